// kernels/bench/registry.cpp: the list of ops `nnlab bench` can run.
#include <stdexcept>

#include "kernels/bench/ops.h"

namespace kernels::bench {

const std::vector<harness::OpBench>& ops() {
  static const std::vector<harness::OpBench> all = {
      matmul_bench(),
  };
  return all;
}

const harness::OpBench& op(const std::string& name) {
  std::string known;
  for (const harness::OpBench& o : ops()) {
    if (o.name == name) return o;
    known += (known.empty() ? "" : ", ") + o.name;
  }
  throw std::invalid_argument("unknown op '" + name + "': the bench knows " + known);
}

}  // namespace kernels::bench
