// nn/checkpoint.h: checkpoints of nn::Tensor and of a model's parameters, in the safetensors
// format of io/safetensors.h (the format, its checksums, the atomic write and the checks on
// reading are described there).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "nn/optim.h"
#include "nn/tensor.h"

namespace nn {

struct Checkpoint {
  std::map<std::string, std::string> metadata;
  std::map<std::string, Tensor> tensors;
};

// read_safetensors (io/safetensors.h), every check included, with the tensors as nn::Tensor.
// Throws nn::Error naming the file and the problem.
Checkpoint load_safetensors(const std::string& path, const LoadOptions& options = {});

// Saves params (names and shapes as keys) plus metadata.
void save_params(const std::string& path, const std::vector<Param>& params,
                 const std::map<std::string, std::string>& metadata = {});
// Loads into existing params: every param must be present with the same shape, and the
// file must hold no others ("checkpoint is from a different model: ..." otherwise).
// Returns the metadata.
std::map<std::string, std::string> load_params(const std::string& path,
                                               const std::vector<Param>& params);

}  // namespace nn
