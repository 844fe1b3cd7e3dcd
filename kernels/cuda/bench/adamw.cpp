// kernels/cuda/bench/adamw.cpp: (to be written)
#include <stdexcept>

#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

Op adamw_op() {
  Op op;
  op.name = "adamw";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().adamw); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("adamw: not written yet");
  };
  return op;
}

}  // namespace kernels::cuda::bench
