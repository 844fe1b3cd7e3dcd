// kernels/cuda/bench/softmax.cpp: (to be written)
#include <stdexcept>

#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

Op softmax_op() {
  Op op;
  op.name = "softmax";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().softmax); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("softmax: not written yet");
  };
  return op;
}

}  // namespace kernels::cuda::bench
