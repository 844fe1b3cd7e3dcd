// nn/checkpoint.h: checkpoints in the safetensors format, written atomically.
//
// safetensors (https://github.com/huggingface/safetensors) is: an 8-byte little-endian
// header length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}}, then the raw
// little-endian tensor bytes. numpy, PyTorch and the notebooks can read it directly.
//
// We add one metadata entry, "nnlab.checksum": a 64-bit FNV-1a hash of the data section,
// so a file corrupted after it was written is caught, not trained from.
// Saving writes <path>.tmp, flushes it, then renames it over <path>: a crash mid-write
// leaves the previous checkpoint intact.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/optim.h"
#include "nn/tensor.h"

namespace nn {

struct TensorRef {
  std::string name;
  Shape shape;
  const float* data = nullptr;
};

struct Checkpoint {
  std::map<std::string, std::string> metadata;
  std::map<std::string, Tensor> tensors;
};

void save_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Validates everything: header length within the file, JSON well-formed, dtype F32,
// offsets in order, inside the data section and matching the shape, checksum if present.
// Throws nn::Error naming the file and the problem.
Checkpoint load_safetensors(const std::string& path);

// Saves params (names and shapes as keys) plus metadata.
void save_params(const std::string& path, const std::vector<Param>& params,
                 const std::map<std::string, std::string>& metadata = {});
// Loads into existing params: every param must be present with the same shape, and the
// file must hold no others ("checkpoint is from a different model: ..." otherwise).
// Returns the metadata.
std::map<std::string, std::string> load_params(const std::string& path,
                                               const std::vector<Param>& params);

}  // namespace nn
