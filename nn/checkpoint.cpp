// nn/checkpoint.cpp: nn::Tensor checkpoints and save_params / load_params, on top of the
// safetensors reader and writer of io/safetensors.cpp.
#include "nn/checkpoint.h"

#include <algorithm>
#include <set>
#include <utility>

#include "nn/check.h"

namespace nn {

Checkpoint load_safetensors(const std::string& path, const LoadOptions& options) {
  SafetensorsFile file = read_safetensors(path, options);
  Checkpoint ck;
  ck.metadata = std::move(file.metadata);
  for (auto& [name, t] : file.tensors) {
    // The tensor copies the floats into its own host array (kernels::Array cannot adopt a
    // vector's): free the file's copy as we go, so the peak is the file plus one tensor.
    ck.tensors.emplace(name, Tensor(std::move(t.shape), t.data));
    std::vector<float>().swap(t.data);
  }
  return ck;
}

// ---- params ----------------------------------------------------------------------------

void save_params(const std::string& path, const std::vector<Param>& params,
                 const std::map<std::string, std::string>& metadata) {
  std::vector<TensorRef> refs;
  for (const Param& p : params) {
    refs.push_back({p.name, p.shape, p.data});
  }
  save_safetensors(path, refs, metadata);
}

std::map<std::string, std::string> load_params(const std::string& path, const std::vector<Param>& params) {
  Checkpoint ck = load_safetensors(path);
  // The phrase "checkpoint is from a different model" is what callers and tests look for.
  const std::string different = "checkpoint is from a different model: " + path;
  const std::string hint = ": load it with the model (sizes, layers) it was saved from";

  // Check everything before copying anything: a failed load leaves the params untouched.
  std::set<std::string> model_names;
  for (const Param& p : params) {
    const auto it = ck.tensors.find(p.name);
    NN_CHECK(it != ck.tensors.end(),
             different << " has no tensor '" << p.name << "' (the model's " << shape_str(p.shape) << ")" << hint);
    NN_CHECK(it->second.shape() == p.shape, different << " has tensor '" << p.name << "' of shape "
                                                      << shape_str(it->second.shape()) << ", the model's is "
                                                      << shape_str(p.shape) << hint);
    NN_CHECK(p.numel() == 0 || p.data != nullptr, "load_params: param '" << p.name << "' has no data pointer");
    model_names.insert(p.name);
  }
  for (const auto& [name, t] : ck.tensors) {
    NN_CHECK(model_names.count(name) == 1, different << " holds tensor '" << name << "' " << shape_str(t.shape())
                                                     << " that the model does not have" << hint);
  }

  for (const Param& p : params) {
    const Tensor& t = ck.tensors.at(p.name);
    std::copy_n(t.data(), t.numel(), p.data);
  }
  return ck.metadata;
}

}  // namespace nn
