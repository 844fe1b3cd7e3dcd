// kernels/swiglu.cpp: the SwiGLU gate, plain loops and SIMD (kernels/swiglu.h).
#include "kernels/swiglu.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace kernels {

// ---- v1: plain loops ----------------------------------------------------------------------------
template <typename F>
void swiglu_forward_v1(F* out, const F* gate, const F* up, int rows, int H, int ld) {
  // gate, up (rows, H; row stride ld) -> out (rows, H)
  for (int n = 0; n < rows; ++n) {
    const F* g = gate + static_cast<ptrdiff_t>(n) * ld;
    const F* u = up + static_cast<ptrdiff_t>(n) * ld;
    F* y = out + static_cast<ptrdiff_t>(n) * H;
    for (int j = 0; j < H; ++j) {
      // silu(g) = g sigmoid(g) = g / (1 + exp(-g)); the up projection scales it
      const F silu = g[j] / (F(1) + std::exp(-g[j]));
      y[j] = silu * u[j];
    }
  }
}
template void swiglu_forward_v1<float>(float*, const float*, const float*, int, int, int);
template void swiglu_forward_v1<double>(double*, const double*, const double*, int, int, int);

template <typename F>
void swiglu_backward_v1(F* dgate, F* dup, const F* dout, const F* gate, const F* up, int rows, int H, int ld) {
  // dout (rows, H) -> dgate, dup (rows, H; row stride ld), assigned
  for (int n = 0; n < rows; ++n) {
    const F* g = gate + static_cast<ptrdiff_t>(n) * ld;
    const F* u = up + static_cast<ptrdiff_t>(n) * ld;
    const F* dy = dout + static_cast<ptrdiff_t>(n) * H;
    F* dg = dgate + static_cast<ptrdiff_t>(n) * ld;
    F* du = dup + static_cast<ptrdiff_t>(n) * ld;
    for (int j = 0; j < H; ++j) {
      const F s = F(1) / (F(1) + std::exp(-g[j]));  // sigmoid(g)
      // out = silu(g) u: the product rule sends dout u to silu(g), dout silu(g) to u
      du[j] = dy[j] * g[j] * s;
      // silu'(g) = s + g s'(g) = s + g s (1 - s)
      dg[j] = dy[j] * u[j] * (s * (F(1) + g[j] * (F(1) - s)));
    }
  }
}
template void swiglu_backward_v1<float>(float*, float*, const float*, const float*, const float*, int, int, int);
template void swiglu_backward_v1<double>(double*, double*, const double*, const double*, const double*, int, int,
                                         int);

// ---- v2: SIMD with poly_exp, rows across threads --------------------------------------------------
namespace {

using V = simd::Native;
using S = simd::Portable<1>;  // one lane: the same arithmetic for the tails
constexpr int W = V::lanes;

// silu(g) * u on a register: e = exp(-g), silu = g / (1 + e).
template <class VV>
typename VV::reg swiglu_value(typename VV::reg g, typename VV::reg u) {
  const typename VV::reg e = poly_exp<VV>(VV::sub(VV::zero(), g));
  return VV::mul(VV::div(g, VV::add(VV::set1(1.0f), e)), u);
}

// dg and du on registers: s = 1 / (1 + e), silu = g s, silu' = s + g s (1 - s) = s + g s^2 e
// (1 - s = e s exactly in real arithmetic; computing e s instead of 1 - s avoids the
// cancellation when s -> 1, where 1 - s in float keeps only a few bits).
template <class VV>
void swiglu_grads(typename VV::reg dy, typename VV::reg g, typename VV::reg u, typename VV::reg* dg,
                  typename VV::reg* du) {
  using R = typename VV::reg;
  const R e = poly_exp<VV>(VV::sub(VV::zero(), g));
  const R s = VV::div(VV::set1(1.0f), VV::add(VV::set1(1.0f), e));
  *du = VV::mul(dy, VV::mul(g, s));
  const R gs2e = VV::mul(VV::mul(g, VV::mul(s, s)), e);
  *dg = VV::mul(VV::mul(dy, u), VV::add(s, gs2e));
}

}  // namespace

void swiglu_forward_v2(float* out, const float* gate, const float* up, int rows, int H, int ld) {
  // gate, up (rows, H; row stride ld) -> out (rows, H)
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * H >= kMinParallelElems)
  for (int n = 0; n < rows; ++n) {
    const float* g = gate + static_cast<ptrdiff_t>(n) * ld;
    const float* u = up + static_cast<ptrdiff_t>(n) * ld;
    float* y = out + static_cast<ptrdiff_t>(n) * H;
    int j = 0;
    for (; j + W <= H; j += W) V::store(y + j, swiglu_value<V>(V::load(g + j), V::load(u + j)));
    for (; j < H; ++j) y[j] = swiglu_value<S>(S::set1(g[j]), S::set1(u[j])).v[0];
  }
}

void swiglu_backward_v2(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int rows,
                        int H, int ld) {
  // dout (rows, H) -> dgate, dup (rows, H; row stride ld), assigned
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * H >= kMinParallelElems)
  for (int n = 0; n < rows; ++n) {
    const float* g = gate + static_cast<ptrdiff_t>(n) * ld;
    const float* u = up + static_cast<ptrdiff_t>(n) * ld;
    const float* dy = dout + static_cast<ptrdiff_t>(n) * H;
    float* dg = dgate + static_cast<ptrdiff_t>(n) * ld;
    float* du = dup + static_cast<ptrdiff_t>(n) * ld;
    int j = 0;
    for (; j + W <= H; j += W) {
      V::reg rg, ru;
      swiglu_grads<V>(V::load(dy + j), V::load(g + j), V::load(u + j), &rg, &ru);
      V::store(dg + j, rg);
      V::store(du + j, ru);
    }
    for (; j < H; ++j) {
      S::reg rg, ru;
      swiglu_grads<S>(S::set1(dy[j]), S::set1(g[j]), S::set1(u[j]), &rg, &ru);
      dg[j] = rg.v[0];
      du[j] = ru.v[0];
    }
  }
}

void swiglu_forward(float* out, const float* gate, const float* up, int rows, int H, int ld) {
  swiglu_forward_v2(out, gate, up, rows, H, ld);
}
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int rows, int H,
                     int ld) {
  swiglu_backward_v2(dgate, dup, dout, gate, up, rows, H, ld);
}

// ---- the tables ---------------------------------------------------------------------------------
const std::vector<OpVersion<SwigluFn>>& swiglu_versions() {
  static const std::vector<OpVersion<SwigluFn>> versions = {
      {1, "libm", "plain loops with std::exp: the reference", &swiglu_forward_v1<float>},
      {2, "simd", "SIMD, exp through poly_exp, rows across threads", &swiglu_forward_v2},
  };
  return versions;
}
const OpVersion<SwigluFn>& swiglu_version(const std::string& number_or_name) {
  return find_version(swiglu_versions(), number_or_name, "swiglu");
}
const std::vector<OpVersion<SwigluBackwardFn>>& swiglu_backward_versions() {
  static const std::vector<OpVersion<SwigluBackwardFn>> versions = {
      {1, "libm", "plain loops with std::exp: the reference", &swiglu_backward_v1<float>},
      {2, "simd", "SIMD, poly_exp, silu' = s + g s^2 e (no cancellation), rows across threads", &swiglu_backward_v2},
  };
  return versions;
}
const OpVersion<SwigluBackwardFn>& swiglu_backward_version(const std::string& number_or_name) {
  return find_version(swiglu_backward_versions(), number_or_name, "swiglu_backward");
}

}  // namespace kernels
