// kernels/rope.cpp: rotary position embedding, plain loops and SIMD (kernels/rope.h).
#include "kernels/rope.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace kernels {

// ---- the tables ---------------------------------------------------------------------------------
template <typename F>
void rope_tables(F* cos, F* sin, int maxT, int hs, double theta) {
  // cos, sin (maxT, hs/2)
  const int half = hs / 2;
  for (int p = 0; p < maxT; ++p) {
    for (int i = 0; i < half; ++i) {
      // freq_i = theta^(-2i/hs): pair 0 turns by one radian per position, the last pair
      // ~theta times slower (wavelengths from 2 pi to ~2 pi theta positions)
      const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hs));
      const double angle = static_cast<double>(p) * freq;
      cos[static_cast<ptrdiff_t>(p) * half + i] = static_cast<F>(std::cos(angle));
      sin[static_cast<ptrdiff_t>(p) * half + i] = static_cast<F>(std::sin(angle));
    }
  }
}
template void rope_tables<float>(float*, float*, int, int, double);
template void rope_tables<double>(double*, double*, int, int, double);

// ---- v1: plain loops ----------------------------------------------------------------------------
namespace {

// The one loop nest both directions share; sign = +1 rotates by +angle (forward), -1 by -angle
// (backward: the transpose of the rotation).
template <typename F>
void rope_v1(F* out, const F* inp, const F* cos, const F* sin, int B, int T, int NH, int hs, int stride, int pos0,
             F sign) {
  const int half = hs / 2;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const ptrdiff_t row = (static_cast<ptrdiff_t>(b) * T + t) * stride;  // token (b, t)
      const F* c = cos + static_cast<ptrdiff_t>(pos0 + t) * half;          // (hs/2) its angles
      const F* s = sin + static_cast<ptrdiff_t>(pos0 + t) * half;
      for (int h = 0; h < NH; ++h) {
        const F* x = inp + row + static_cast<ptrdiff_t>(h) * hs;  // (hs) head h
        F* y = out + row + static_cast<ptrdiff_t>(h) * hs;
        for (int i = 0; i < half; ++i) {
          // the pair (x_i, x_{i+hs/2}) turned by the angle: read both before writing (in place)
          const F x1 = x[i];
          const F x2 = x[i + half];
          const F si = sign * s[i];
          y[i] = x1 * c[i] - x2 * si;
          y[i + half] = x2 * c[i] + x1 * si;
        }
      }
    }
  }
}

}  // namespace

template <typename F>
void rope_forward_v1(F* out, const F* inp, const F* cos, const F* sin, int B, int T, int NH, int hs, int stride,
                     int pos0) {
  rope_v1(out, inp, cos, sin, B, T, NH, hs, stride, pos0, F(1));
}
template void rope_forward_v1<float>(float*, const float*, const float*, const float*, int, int, int, int, int, int);
template void rope_forward_v1<double>(double*, const double*, const double*, const double*, int, int, int, int, int,
                                      int);

template <typename F>
void rope_backward_v1(F* dinp, const F* dout, const F* cos, const F* sin, int B, int T, int NH, int hs, int stride,
                      int pos0) {
  // dL/dx = R^T dL/dy: the rotation by the negated angle
  rope_v1(dinp, dout, cos, sin, B, T, NH, hs, stride, pos0, F(-1));
}
template void rope_backward_v1<float>(float*, const float*, const float*, const float*, int, int, int, int, int, int);
template void rope_backward_v1<double>(double*, const double*, const double*, const double*, int, int, int, int, int,
                                       int);

// ---- v2: SIMD over the pairs, positions across threads ------------------------------------------
namespace {

using V = simd::Native;
constexpr int W = V::lanes;

// kNegate: the backward (sin negated). The same arithmetic as v1, W pairs per step.
template <bool kNegate>
void rope_v2(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
             int stride, int pos0) {
  const int half = hs / 2;
  const int64_t rows = static_cast<int64_t>(B) * T;
#pragma omp parallel for schedule(static) if (rows * NH * hs >= kMinParallelElems)
  for (int64_t bt = 0; bt < rows; ++bt) {
    const int t = static_cast<int>(bt % T);
    const float* c = cos + static_cast<ptrdiff_t>(pos0 + t) * half;
    const float* s = sin + static_cast<ptrdiff_t>(pos0 + t) * half;
    for (int h = 0; h < NH; ++h) {
      const float* x = inp + bt * stride + static_cast<ptrdiff_t>(h) * hs;
      float* y = out + bt * stride + static_cast<ptrdiff_t>(h) * hs;
      int i = 0;
      for (; i + W <= half; i += W) {
        // x_i .. x_{i+W-1} and their partners x_{i+hs/2} ..: two contiguous loads
        const V::reg x1 = V::load(x + i), x2 = V::load(x + i + half);
        const V::reg ci = V::load(c + i);
        const V::reg si = kNegate ? V::sub(V::zero(), V::load(s + i)) : V::load(s + i);
        V::store(y + i, V::sub(V::mul(x1, ci), V::mul(x2, si)));
        V::store(y + i + half, V::add(V::mul(x2, ci), V::mul(x1, si)));
      }
      for (; i < half; ++i) {
        const float x1 = x[i], x2 = x[i + half];
        const float si = kNegate ? -s[i] : s[i];
        y[i] = x1 * c[i] - x2 * si;
        y[i + half] = x2 * c[i] + x1 * si;
      }
    }
  }
}

}  // namespace

void rope_forward_v2(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                     int stride, int pos0) {
  rope_v2<false>(out, inp, cos, sin, B, T, NH, hs, stride, pos0);
}
void rope_backward_v2(float* dinp, const float* dout, const float* cos, const float* sin, int B, int T, int NH,
                      int hs, int stride, int pos0) {
  rope_v2<true>(dinp, dout, cos, sin, B, T, NH, hs, stride, pos0);
}

void rope_forward(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                  int stride, int pos0) {
  rope_forward_v2(out, inp, cos, sin, B, T, NH, hs, stride, pos0);
}
void rope_backward(float* dinp, const float* dout, const float* cos, const float* sin, int B, int T, int NH, int hs,
                   int stride, int pos0) {
  rope_backward_v2(dinp, dout, cos, sin, B, T, NH, hs, stride, pos0);
}

// ---- the tables of versions ------------------------------------------------------------------------
const std::vector<OpVersion<RopeFn>>& rope_versions() {
  static const std::vector<OpVersion<RopeFn>> versions = {
      {1, "loops", "plain loops over (b, t, h, pair): the reference", &rope_forward_v1<float>},
      {2, "simd", "W pairs per step (x_i and x_{i+hs/2}: two contiguous loads), positions across threads",
       &rope_forward_v2},
  };
  return versions;
}
const OpVersion<RopeFn>& rope_version(const std::string& number_or_name) {
  return find_version(rope_versions(), number_or_name, "rope");
}
const std::vector<OpVersion<RopeFn>>& rope_backward_versions() {
  static const std::vector<OpVersion<RopeFn>> versions = {
      {1, "loops", "plain loops, the inverse rotation: the reference", &rope_backward_v1<float>},
      {2, "simd", "v2 forward's loop with the angle negated", &rope_backward_v2},
  };
  return versions;
}
const OpVersion<RopeFn>& rope_backward_version(const std::string& number_or_name) {
  return find_version(rope_backward_versions(), number_or_name, "rope_backward");
}

}  // namespace kernels
