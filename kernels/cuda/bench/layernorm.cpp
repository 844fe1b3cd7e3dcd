// kernels/cuda/bench/layernorm.cpp: (to be written)
#include <stdexcept>

#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

Op layernorm_forward_op() {
  Op op;
  op.name = "layernorm_forward";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().layernorm_forward); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("layernorm_forward: not written yet");
  };
  return op;
}

Op layernorm_backward_op() {
  Op op;
  op.name = "layernorm_backward";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().layernorm_backward); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("layernorm_backward: not written yet");
  };
  return op;
}

Op residual_layernorm_op() {
  Op op;
  op.name = "residual_layernorm";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().residual_layernorm); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("residual_layernorm: not written yet");
  };
  return op;
}

}  // namespace kernels::cuda::bench
