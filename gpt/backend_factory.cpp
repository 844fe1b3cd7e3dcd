// gpt/backend_factory.cpp: make_backend, the one place that knows every backend (naive,
// cpu, cuda), so that no backend's file needs to know the others (gpt/backend.h).
#include <memory>
#include <string>

#include "gpt/backend.h"
#include "gpt/backend_cuda.h"
#include "nn/check.h"

namespace gpt {

std::unique_ptr<Backend> make_backend(const std::string& name, const std::string& precision) {
  if (name == "cuda") return make_cuda_backend(precision);
  NN_CHECK(name == "naive" || name == "cpu", "unknown backend '" << name << "': choose naive (plain loops, the "
                                                                 << "reference), cpu (SIMD + OpenMP kernels) or cuda "
                                                                 << "(the lesson-09 kernels on a GPU)");
  NN_CHECK(precision == "auto" || precision == "fp32",
           "the " << name << " backend computes in fp32 only; --precision " << precision << " needs --backend cuda");
  if (name == "naive") return make_naive_backend();
  return make_cpu_backend();
}

}  // namespace gpt
