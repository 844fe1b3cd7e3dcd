// kernels/gelu.cpp: tanh-GELU forward and backward, libm loops and SIMD (kernels/gelu.h).
#include "kernels/gelu.h"

#include <cmath>
#include <numbers>

#include "kernels/bias_gelu.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace kernels {

namespace {
// sqrt(2 / pi), computed in double and rounded once to F
template <typename F>
F gelu_scale() {
  return static_cast<F>(std::sqrt(2.0 / std::numbers::pi));
}
constexpr double kGeluCubic = 0.044715;
}  // namespace

// ---- v1: plain loops ------------------------------------------------------------------------
template <typename F>
void gelu_forward_v1(F* out, const F* inp, int64_t n) {
  const F s = gelu_scale<F>();
  const F k = static_cast<F>(kGeluCubic);
  for (int64_t i = 0; i < n; ++i) {
    const F x = inp[i];
    // gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
    const F u = s * (x + k * x * x * x);
    out[i] = F(0.5) * x * (F(1) + std::tanh(u));
  }
}
template void gelu_forward_v1<float>(float*, const float*, int64_t);
template void gelu_forward_v1<double>(double*, const double*, int64_t);

template <typename F>
void gelu_backward_v1(F* dinp, const F* dout, const F* inp, int64_t n) {
  const F s = gelu_scale<F>();
  const F k = static_cast<F>(kGeluCubic);
  for (int64_t i = 0; i < n; ++i) {
    const F x = inp[i];
    const F u = s * (x + k * x * x * x);
    const F th = std::tanh(u);
    // product rule on 0.5 x (1 + tanh(u)):
    //   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx,
    //   du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    const F du = s * (F(1) + F(3) * k * x * x);
    const F grad = F(0.5) * (F(1) + th) + F(0.5) * x * (F(1) - th * th) * du;
    dinp[i] = dout[i] * grad;
  }
}
template void gelu_backward_v1<float>(float*, const float*, const float*, int64_t);
template void gelu_backward_v1<double>(double*, const double*, const double*, int64_t);

// ---- v2: SIMD, poly_exp, threads --------------------------------------------------------------
namespace {

using V = simd::Native;
using S = simd::Portable<1>;  // one lane: the same arithmetic for the tails
constexpr int W = V::lanes;

// The GELU derivative on a register.
// gelu(x) = x s,  s = 0.5 (1 + tanh(u)) = 1 / (1 + e),  e = exp(-2u),  u = k0 (x + k1 x^3).
// gelu'(x) = s + x ds/dx,  ds/dx = 2 s (1 - s) du/dx = 2 s^2 e du/dx   (1 - s = e s: no
// cancellation when s -> 1),  du/dx = k0 (1 + 3 k1 x^2).
template <class VV>
typename VV::reg gelu_grad(typename VV::reg x) {
  using R = typename VV::reg;
  const R x2 = VV::mul(x, x);
  // -2u = x (-2 k0 - 2 k0 k1 x^2), the constants of kernels::gelu_tanh
  const R minus_2u = VV::mul(x, VV::fma(x2, VV::set1(-0.0713548139f), VV::set1(-1.59576917f)));
  const R e = poly_exp<VV>(minus_2u);
  const R s = VV::div(VV::set1(1.0f), VV::add(VV::set1(1.0f), e));
  // du/dx = k0 + 3 k0 k1 x^2 = 0.797884561 + 0.107032211 x^2
  const R du = VV::fma(x2, VV::set1(0.107032211f), VV::set1(0.797884561f));
  const R two_x_s2_e = VV::mul(VV::mul(VV::add(x, x), VV::mul(s, s)), e);
  return VV::fma(two_x_s2_e, du, s);
}

}  // namespace

void gelu_forward_v2(float* out, const float* inp, int64_t n) {
  // out = gelu(inp), SIMD (gelu_tanh), OpenMP over blocks of registers
  const int64_t nv = n / W;
#pragma omp parallel for schedule(static) if (n >= kMinParallelElems)
  for (int64_t k = 0; k < nv; ++k) {
    V::store(out + k * W, gelu_tanh<V>(V::load(inp + k * W)));
  }
  for (int64_t i = nv * W; i < n; ++i) out[i] = gelu_tanhf(inp[i]);
}

void gelu_backward_v2(float* dinp, const float* dout, const float* inp, int64_t n) {
  // dinp = dout * gelu'(inp), assigned
  const int64_t nv = n / W;
#pragma omp parallel for schedule(static) if (n >= kMinParallelElems)
  for (int64_t k = 0; k < nv; ++k) {
    V::store(dinp + k * W, V::mul(V::load(dout + k * W), gelu_grad<V>(V::load(inp + k * W))));
  }
  for (int64_t i = nv * W; i < n; ++i) dinp[i] = dout[i] * gelu_grad<S>(S::set1(inp[i])).v[0];
}

const std::vector<OpVersion<GeluFn>>& gelu_versions() {
  static const std::vector<OpVersion<GeluFn>> versions = {
      {1, "libm", "plain loop with std::tanh: the reference", &gelu_forward_v1<float>},
      {2, "simd", "SIMD, tanh through poly_exp, OpenMP over registers", &gelu_forward_v2},
  };
  return versions;
}
const OpVersion<GeluFn>& gelu_version(const std::string& number_or_name) {
  return find_version(gelu_versions(), number_or_name, "gelu");
}

const std::vector<OpVersion<GeluBackwardFn>>& gelu_backward_versions() {
  static const std::vector<OpVersion<GeluBackwardFn>> versions = {
      {1, "libm", "plain loop with std::tanh: the reference", &gelu_backward_v1<float>},
      {2, "simd", "SIMD, s = 1 / (1 + exp(-2u)) through poly_exp, OpenMP over registers", &gelu_backward_v2},
  };
  return versions;
}
const OpVersion<GeluBackwardFn>& gelu_backward_version(const std::string& number_or_name) {
  return find_version(gelu_backward_versions(), number_or_name, "gelu_backward");
}

}  // namespace kernels
