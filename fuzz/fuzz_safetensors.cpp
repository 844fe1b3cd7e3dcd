// fuzz/fuzz_safetensors.cpp: nn::load_safetensors and nn::load_params on arbitrary bytes.
//
// The raw file format: 8-byte header length, JSON header, data section (io/safetensors.h).
// Mutating raw bytes exercises the structural checks: the length, UTF-8, the JSON parser
// (nesting, escapes, integers), the tensor table (dtype, shapes, offsets, overlaps, gaps)
// and the checksum. Then load_params checks the tensors against a fixed two-tensor model,
// the path every lesson's checkpoint takes.
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "nn/check.h"
#include "nn/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("input.safetensors", fuzz::as_text(data, size));
  try {
    nn::load_safetensors(path);
  } catch (const nn::Error&) {
    return 0;  // refused with a message: what a loader must do
  }
  // Into a model of two tensors, w (2, 3) and b (3): names and shapes must match exactly.
  std::vector<float> w(6, 0.0f), b(3, 0.0f);
  std::vector<nn::Param> params(2);
  params[0].name = "w";
  params[0].shape = {2, 3};
  params[0].data = w.data();
  params[1].name = "b";
  params[1].shape = {3};
  params[1].data = b.data();
  try {
    nn::load_params(path, params);
  } catch (const nn::Error&) {
  }
  return 0;
}
