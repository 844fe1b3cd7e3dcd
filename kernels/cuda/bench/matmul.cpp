// kernels/cuda/bench/matmul.cpp: (to be written)
#include <stdexcept>

#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

Op matmul_op() {
  Op op;
  op.name = "matmul";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().matmul); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("matmul: not written yet");
  };
  return op;
}

}  // namespace kernels::cuda::bench
