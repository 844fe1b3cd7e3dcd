// kernels/dropout.cpp: inverted dropout, loops and threads (kernels/dropout.h).
#include "kernels/dropout.h"

#include "kernels/parallel.h"

namespace kernels {

// ---- v1: the plain loops --------------------------------------------------------------------
template <typename F>
void dropout_forward_v1(F* out, F* mask, const F* inp, int64_t n, float p, uint64_t seed) {
  // Inverted dropout: scale the kept elements by 1 / (1 - p) at training time, so the
  // expected value of out_i is inp_i and evaluation needs no rescaling at all.
  const F scale = F(1) / (F(1) - static_cast<F>(p));  // exactly 1 when p = 0
  for (int64_t i = 0; i < n; ++i) {
    const float u = dropout_uniform(seed, static_cast<uint64_t>(i));
    const F m = u < p ? F(0) : scale;  // never true for p = 0: u >= 0
    const F x = inp[i];                // read before writing: out may alias inp
    mask[i] = m;
    out[i] = x * m;
  }
}
template void dropout_forward_v1<float>(float*, float*, const float*, int64_t, float, uint64_t);
template void dropout_forward_v1<double>(double*, double*, const double*, int64_t, float, uint64_t);

template <typename F>
void dropout_backward_v1(F* dinp, const F* dout, const F* mask, int64_t n) {
  // out_i = inp_i * mask_i, so dL/dinp_i = dL/dout_i * mask_i
  for (int64_t i = 0; i < n; ++i) {
    dinp[i] = dout[i] * mask[i];
  }
}
template void dropout_backward_v1<float>(float*, const float*, const float*, int64_t);
template void dropout_backward_v1<double>(double*, const double*, const double*, int64_t);

// ---- v2: threads ------------------------------------------------------------------------------
void dropout_forward_v2(float* out, float* mask, const float* inp, int64_t n, float p, uint64_t seed) {
  // mask_i = u_i < p ? 0 : 1 / (1 - p), u_i = dropout_uniform(seed, i): v1's mask
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (n >= kMinParallelElems)
  for (int64_t i = 0; i < n; ++i) {
    const float m = dropout_uniform(seed, static_cast<uint64_t>(i)) < p ? 0.0f : scale;
    const float x = inp[i];  // out may alias inp
    mask[i] = m;
    out[i] = x * m;
  }
}

void dropout_backward_v2(float* dinp, const float* dout, const float* mask, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElems)
  for (int64_t i = 0; i < n; ++i) dinp[i] = dout[i] * mask[i];
}

const std::vector<OpVersion<DropoutFn>>& dropout_versions() {
  static const std::vector<OpVersion<DropoutFn>> versions = {
      {1, "loop", "the plain loop: the reference", &dropout_forward_v1<float>},
      {2, "threads", "the loop across OpenMP threads (the mask depends on i alone)", &dropout_forward_v2},
  };
  return versions;
}
const OpVersion<DropoutFn>& dropout_version(const std::string& number_or_name) {
  return find_version(dropout_versions(), number_or_name, "dropout");
}

const std::vector<OpVersion<DropoutBackwardFn>>& dropout_backward_versions() {
  static const std::vector<OpVersion<DropoutBackwardFn>> versions = {
      {1, "loop", "the plain loop: the reference", &dropout_backward_v1<float>},
      {2, "threads", "omp parallel for simd over the elements", &dropout_backward_v2},
  };
  return versions;
}
const OpVersion<DropoutBackwardFn>& dropout_backward_version(const std::string& number_or_name) {
  return find_version(dropout_backward_versions(), number_or_name, "dropout_backward");
}

}  // namespace kernels
