// kernels/cuda/bench/crossentropy.cpp: (to be written)
#include <stdexcept>

#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

Op crossentropy_op() {
  Op op;
  op.name = "crossentropy";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().crossentropy); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("crossentropy: not written yet");
  };
  return op;
}

}  // namespace kernels::cuda::bench
