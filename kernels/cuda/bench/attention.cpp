// kernels/cuda/bench/attention.cpp: (to be written)
#include <stdexcept>

#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

Op attention_op() {
  Op op;
  op.name = "attention";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().attention); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("attention: not written yet");
  };
  return op;
}

}  // namespace kernels::cuda::bench
