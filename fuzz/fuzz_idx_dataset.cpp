// fuzz/fuzz_idx_dataset.cpp: nn::load_idx_dataset on an image file and a label file.
//
// The pair checks a dataset needs before training: 3-D images, 1-D labels, the same count,
// every label in [0, 10). The input is split in two at the offset its first two bytes name
// (big-endian, modulo the rest): images, then labels.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_util.h"
#include "nn/check.h"
#include "nn/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t rest = size - 2;
  const size_t split = rest == 0 ? 0 : ((static_cast<size_t>(data[0]) << 8) | data[1]) % (rest + 1);
  const std::string_view all = fuzz::as_text(data + 2, rest);
  const std::string images = fuzz::write_scratch("images-idx3-ubyte", all.substr(0, split));
  const std::string labels = fuzz::write_scratch("labels-idx1-ubyte", all.substr(split));
  try {
    const nn::ImageDataset ds = nn::load_idx_dataset(images, labels, 10);
    const int64_t pixels = static_cast<int64_t>(ds.rows) * ds.cols;
    if (ds.rows < 1 || ds.cols < 1 || ds.images.numel() != ds.size() * pixels) {
      std::fprintf(stderr, "fuzz_idx_dataset: %lld images of %dx%d in a tensor of %lld floats\n",
                   static_cast<long long>(ds.size()), ds.rows, ds.cols, static_cast<long long>(ds.images.numel()));
      std::abort();
    }
    for (int32_t label : ds.labels) {
      if (label < 0 || label >= ds.num_classes) {
        std::fprintf(stderr, "fuzz_idx_dataset: label %d accepted with %d classes\n", label, ds.num_classes);
        std::abort();
      }
    }
  } catch (const nn::Error&) {
  }
  return 0;
}
