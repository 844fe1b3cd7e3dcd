// kernels/residual.cpp: out = a + b, the plain loop and the threaded one (kernels/residual.h).
#include "kernels/residual.h"

#include "kernels/parallel.h"

namespace kernels {

// ---- v1: the plain loop ---------------------------------------------------------------------
template <typename F>
void residual_forward_v1(F* out, const F* a, const F* b, int64_t n) {
  // out (n) = a (n) + b (n)
  for (int64_t i = 0; i < n; ++i) {
    out[i] = a[i] + b[i];
  }
}
template void residual_forward_v1<float>(float*, const float*, const float*, int64_t);
template void residual_forward_v1<double>(double*, const double*, const double*, int64_t);

// ---- v2: threads over the elements --------------------------------------------------------
void residual_forward_v2(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElems)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

const std::vector<OpVersion<ResidualFn>>& residual_versions() {
  static const std::vector<OpVersion<ResidualFn>> versions = {
      {1, "loop", "the plain loop: the reference", &residual_forward_v1<float>},
      {2, "threads", "omp parallel for simd over the elements", &residual_forward_v2},
  };
  return versions;
}

const OpVersion<ResidualFn>& residual_version(const std::string& number_or_name) {
  return find_version(residual_versions(), number_or_name, "residual");
}

}  // namespace kernels
