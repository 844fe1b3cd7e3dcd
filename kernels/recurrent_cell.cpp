// kernels/recurrent_cell.cpp: the element-wise part of an LSTM / RNN step, plain loops (v1)
// and SIMD (v2). The math and the versions are in kernels/recurrent_cell.h.
#include "kernels/recurrent_cell.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/elementwise.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace kernels {

using std::ptrdiff_t;

// ---- v1: plain loops ----------------------------------------------------------------------
namespace {

// tanh(x). For float, through one exp: tanh(x) = 2 / (1 + exp(-2x)) - 1. glibc's tanhf
// goes through expm1f, and perf showed it at a third of an LSTM training step (the gates
// take 2 tanh per unit and step); this form costs one expf and a division and is within
// ~1e-7 of tanhf (absolute), far below what training can notice. exp(-2x) = inf for very
// negative x gives 2/inf - 1 = -1, the right limit. Double (the gradient checks) keeps
// std::tanh.
template <typename F>
F tanh_v1(F x) {
  if constexpr (std::is_same_v<F, float>) {
    return 2.0f / (1.0f + std::exp(-2.0f * x)) - 1.0f;
  } else {
    return std::tanh(x);
  }
}

// sigmoid(x) = 1 / (1 + exp(-x)), two branches so exp never overflows (as nn::sigmoid_forward).
template <typename F>
F sigmoid_v1(F x) {
  if (x >= F(0)) {
    return F(1) / (F(1) + std::exp(-x));
  }
  const F e = std::exp(x);
  return e / (F(1) + e);
}

}  // namespace

template <typename F>
void lstm_pointwise_forward_v1(F* h, F* c, F* gates, const F* c_prev, const F* b, int B, int H) {
  // gates (B,4H) z in, [i f g o] out; c_prev (B,H) or nullptr; b (4H) -> h, c (B,H)
  const ptrdiff_t G = 4 * static_cast<ptrdiff_t>(H);
  for (int r = 0; r < B; ++r) {
    F* zr = gates + r * G;  // [ z_i | z_f | z_g | z_o ], each H wide
    for (int j = 0; j < H; ++j) {
      const F i = sigmoid_v1(zr[j] + b[j]);                  // input gate: how much of g to write
      const F f = sigmoid_v1(zr[H + j] + b[H + j]);          // forget gate: how much of c to keep
      const F g = tanh_v1(zr[2 * H + j] + b[2 * H + j]);     // candidate values
      const F o = sigmoid_v1(zr[3 * H + j] + b[3 * H + j]);  // output gate: how much of c to show
      zr[j] = i;
      zr[H + j] = f;
      zr[2 * H + j] = g;
      zr[3 * H + j] = o;
      const ptrdiff_t k = static_cast<ptrdiff_t>(r) * H + j;
      const F cp = c_prev != nullptr ? c_prev[k] : F(0);
      c[k] = f * cp + i * g;      // c_t = f * c_{t-1} + i * g
      h[k] = o * tanh_v1(c[k]);   // h_t = o * tanh(c_t)
    }
  }
}
template void lstm_pointwise_forward_v1<float>(float*, float*, float*, const float*, const float*, int, int);
template void lstm_pointwise_forward_v1<double>(double*, double*, double*, const double*, const double*, int,
                                                int);

template <typename F>
void lstm_pointwise_backward_v1(F* dz, F* dc_prev, const F* dh, const F* dc, const F* gates, const F* c,
                                const F* c_prev, int B, int H) {
  // dh, dc (B,H), gates (B,4H), c, c_prev (B,H) -> dz (B,4H) =, dc_prev (B,H) =
  const ptrdiff_t G = 4 * static_cast<ptrdiff_t>(H);
  for (int r = 0; r < B; ++r) {
    const F* gr = gates + r * G;
    F* dzr = dz + r * G;
    for (int j = 0; j < H; ++j) {
      const ptrdiff_t k = static_cast<ptrdiff_t>(r) * H + j;
      const F i = gr[j], f = gr[H + j], g = gr[2 * H + j], o = gr[3 * H + j];
      const F tc = tanh_v1(c[k]);
      const F cp = c_prev != nullptr ? c_prev[k] : F(0);
      // h = o * tanh(c):  dL/do = dh * tanh(c);  dL/dc gets dh * o * (1 - tanh(c)^2)
      // on top of what reaches c from step t+1 (c_{t+1} = f_{t+1} c_t + ...).
      const F d_o = dh[k] * tc;
      const F dc_total = (dc != nullptr ? dc[k] : F(0)) + dh[k] * o * (F(1) - tc * tc);
      // c = f * c_prev + i * g
      const F d_i = dc_total * g;
      const F d_f = dc_total * cp;
      const F d_g = dc_total * i;
      if (dc_prev != nullptr) {
        dc_prev[k] = dc_total * f;  // the cell path: only a multiplication by f
      }
      // through the activations: sigmoid' = s (1 - s), tanh' = 1 - t^2
      dzr[j] = d_i * i * (F(1) - i);
      dzr[H + j] = d_f * f * (F(1) - f);
      dzr[2 * H + j] = d_g * (F(1) - g * g);
      dzr[3 * H + j] = d_o * o * (F(1) - o);
    }
  }
}
template void lstm_pointwise_backward_v1<float>(float*, float*, const float*, const float*, const float*,
                                                const float*, const float*, int, int);
template void lstm_pointwise_backward_v1<double>(double*, double*, const double*, const double*,
                                                 const double*, const double*, const double*, int, int);

template <typename F>
void rnn_pointwise_forward_v1(F* h, const F* b, int B, int H) {
  // h (B,H) holds z without the bias; h = tanh(z + b)
  for (int r = 0; r < B; ++r) {
    F* hr = h + static_cast<ptrdiff_t>(r) * H;
    for (int j = 0; j < H; ++j) {
      hr[j] = tanh_v1(hr[j] + b[j]);
    }
  }
}
template void rnn_pointwise_forward_v1<float>(float*, const float*, int, int);
template void rnn_pointwise_forward_v1<double>(double*, const double*, int, int);

// ---- v2: SIMD through poly_exp -------------------------------------------------------------
// The same formulas on W lanes: sigmoid(x) = 1 / (1 + exp(-x)) and tanh(x) = 2 / (1 + exp(-2x))
// - 1. poly_exp clamps its argument to [-88, 88], so exp never overflows and both need no
// branch: at x = -100, sigmoid = 1 / (1 + exp(88)) = 6e-39 (the true value, 4e-44, is as
// good as 0 next to the other gates), tanh = 2 / (1 + 1.65e38) - 1 = -1. Each lane is
// computed independently, so the thread count cannot change a result.
namespace {

using V = simd::Native;
using S = simd::Portable<1>;  // one lane: the same arithmetic for the tails

template <class VV>
typename VV::reg sigmoid_reg(typename VV::reg x) {
  const typename VV::reg one = VV::set1(1.0f);
  return VV::div(one, VV::add(one, poly_exp<VV>(VV::sub(VV::zero(), x))));
}

template <class VV>
typename VV::reg tanh_reg(typename VV::reg x) {
  const typename VV::reg one = VV::set1(1.0f);
  const typename VV::reg e = poly_exp<VV>(VV::mul(x, VV::set1(-2.0f)));
  return VV::sub(VV::div(VV::set1(2.0f), VV::add(one, e)), one);
}

// Lanes j .. j+W-1 of row r (k = r * H + j into the (B,H) buffers, zr = the row's gates).
template <class VV>
void lstm_forward_lanes(float* h, float* c, float* zr, const float* c_prev, const float* b, int H,
                        ptrdiff_t j, ptrdiff_t k) {
  using R = typename VV::reg;
  const R i = sigmoid_reg<VV>(VV::add(VV::load(zr + j), VV::load(b + j)));
  const R f = sigmoid_reg<VV>(VV::add(VV::load(zr + H + j), VV::load(b + H + j)));
  const R g = tanh_reg<VV>(VV::add(VV::load(zr + 2 * H + j), VV::load(b + 2 * H + j)));
  const R o = sigmoid_reg<VV>(VV::add(VV::load(zr + 3 * H + j), VV::load(b + 3 * H + j)));
  VV::store(zr + j, i);
  VV::store(zr + H + j, f);
  VV::store(zr + 2 * H + j, g);
  VV::store(zr + 3 * H + j, o);
  const R cp = c_prev != nullptr ? VV::load(c_prev + k) : VV::zero();
  const R cn = VV::fma(f, cp, VV::mul(i, g));  // c = f c_prev + i g
  VV::store(c + k, cn);
  VV::store(h + k, VV::mul(o, tanh_reg<VV>(cn)));  // h = o tanh(c)
}

template <class VV>
void lstm_backward_lanes(float* dzr, float* dc_prev, const float* dh, const float* dc, const float* gr,
                         const float* c, const float* c_prev, int H, ptrdiff_t j, ptrdiff_t k) {
  using R = typename VV::reg;
  const R one = VV::set1(1.0f);
  const R i = VV::load(gr + j), f = VV::load(gr + H + j), g = VV::load(gr + 2 * H + j),
          o = VV::load(gr + 3 * H + j);
  const R tc = tanh_reg<VV>(VV::load(c + k));
  const R cp = c_prev != nullptr ? VV::load(c_prev + k) : VV::zero();
  const R dhk = VV::load(dh + k);
  const R d_o = VV::mul(dhk, tc);
  // dc_total = dc + dh o (1 - tanh(c)^2)
  const R dc_in = dc != nullptr ? VV::load(dc + k) : VV::zero();
  const R dc_total = VV::fma(VV::mul(dhk, o), VV::sub(one, VV::mul(tc, tc)), dc_in);
  if (dc_prev != nullptr) {
    VV::store(dc_prev + k, VV::mul(dc_total, f));  // read dc above, written here: same index
  }
  VV::store(dzr + j, VV::mul(VV::mul(VV::mul(dc_total, g), i), VV::sub(one, i)));
  VV::store(dzr + H + j, VV::mul(VV::mul(VV::mul(dc_total, cp), f), VV::sub(one, f)));
  VV::store(dzr + 2 * H + j, VV::mul(VV::mul(dc_total, i), VV::sub(one, VV::mul(g, g))));
  VV::store(dzr + 3 * H + j, VV::mul(VV::mul(d_o, o), VV::sub(one, o)));
}

}  // namespace

void lstm_pointwise_forward_v2(float* h, float* c, float* gates, const float* c_prev, const float* b, int B,
                               int H) {
  // gates (B,4H) z in, [i f g o] out; c_prev (B,H) or nullptr; b (4H) -> h, c (B,H)
  constexpr int W = V::lanes;
  const ptrdiff_t G = 4 * static_cast<ptrdiff_t>(H);
  const ptrdiff_t hv = H / W * W;  // the columns whole registers cover
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(B) * H >= kMinParallelElems)
  for (int r = 0; r < B; ++r) {
    float* zr = gates + r * G;
    const ptrdiff_t row = static_cast<ptrdiff_t>(r) * H;
    for (ptrdiff_t j = 0; j < hv; j += W) lstm_forward_lanes<V>(h, c, zr, c_prev, b, H, j, row + j);
    for (ptrdiff_t j = hv; j < H; ++j) lstm_forward_lanes<S>(h, c, zr, c_prev, b, H, j, row + j);
  }
}

void lstm_pointwise_backward_v2(float* dz, float* dc_prev, const float* dh, const float* dc, const float* gates,
                                const float* c, const float* c_prev, int B, int H) {
  // dh, dc (B,H), gates (B,4H), c, c_prev (B,H) -> dz (B,4H) =, dc_prev (B,H) =
  constexpr int W = V::lanes;
  const ptrdiff_t G = 4 * static_cast<ptrdiff_t>(H);
  const ptrdiff_t hv = H / W * W;
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(B) * H >= kMinParallelElems)
  for (int r = 0; r < B; ++r) {
    const float* gr = gates + r * G;
    float* dzr = dz + r * G;
    const ptrdiff_t row = static_cast<ptrdiff_t>(r) * H;
    for (ptrdiff_t j = 0; j < hv; j += W) {
      lstm_backward_lanes<V>(dzr, dc_prev, dh, dc, gr, c, c_prev, H, j, row + j);
    }
    for (ptrdiff_t j = hv; j < H; ++j) lstm_backward_lanes<S>(dzr, dc_prev, dh, dc, gr, c, c_prev, H, j, row + j);
  }
}

void rnn_pointwise_forward_v2(float* h, const float* b, int B, int H) {
  // h (B,H): z in, tanh(z + b) out
  constexpr int W = V::lanes;
  const ptrdiff_t hv = H / W * W;
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(B) * H >= kMinParallelElems)
  for (int r = 0; r < B; ++r) {
    float* hr = h + static_cast<ptrdiff_t>(r) * H;
    for (ptrdiff_t j = 0; j < hv; j += W) V::store(hr + j, tanh_reg<V>(V::add(V::load(hr + j), V::load(b + j))));
    for (ptrdiff_t j = hv; j < H; ++j) hr[j] = tanh_reg<S>(S::set1(hr[j] + b[j])).v[0];
  }
}

// ---- the ladders ---------------------------------------------------------------------------
const std::vector<OpVersion<LstmPointwiseForwardFn>>& lstm_pointwise_forward_versions() {
  static const std::vector<OpVersion<LstmPointwiseForwardFn>> versions = {
      {1, "libm", "plain loops, sigmoid and tanh through std::exp: the reference", &lstm_pointwise_forward_v1<float>},
      {2, "simd", "SIMD, sigmoid and tanh through poly_exp, threads from kMinParallelElems",
       &lstm_pointwise_forward_v2},
  };
  return versions;
}
const std::vector<OpVersion<LstmPointwiseBackwardFn>>& lstm_pointwise_backward_versions() {
  static const std::vector<OpVersion<LstmPointwiseBackwardFn>> versions = {
      {1, "libm", "plain loops, tanh(c) through std::exp: the reference", &lstm_pointwise_backward_v1<float>},
      {2, "simd", "SIMD, tanh(c) through poly_exp, threads from kMinParallelElems", &lstm_pointwise_backward_v2},
  };
  return versions;
}
const std::vector<OpVersion<RnnPointwiseForwardFn>>& rnn_pointwise_forward_versions() {
  static const std::vector<OpVersion<RnnPointwiseForwardFn>> versions = {
      {1, "libm", "plain loop, tanh through std::exp: the reference", &rnn_pointwise_forward_v1<float>},
      {2, "simd", "SIMD, tanh through poly_exp, threads from kMinParallelElems", &rnn_pointwise_forward_v2},
  };
  return versions;
}
const OpVersion<LstmPointwiseForwardFn>& lstm_pointwise_forward_version(const std::string& number_or_name) {
  return find_version(lstm_pointwise_forward_versions(), number_or_name, "lstm_pointwise_forward");
}
const OpVersion<LstmPointwiseBackwardFn>& lstm_pointwise_backward_version(const std::string& number_or_name) {
  return find_version(lstm_pointwise_backward_versions(), number_or_name, "lstm_pointwise_backward");
}
const OpVersion<RnnPointwiseForwardFn>& rnn_pointwise_forward_version(const std::string& number_or_name) {
  return find_version(rnn_pointwise_forward_versions(), number_or_name, "rnn_pointwise_forward");
}

}  // namespace kernels
