// kernels/rmsnorm.cpp: RMSNorm forward and backward, plain loops and SIMD rows (kernels/rmsnorm.h).
#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace kernels {

// ---- forward v1: plain loops ----------------------------------------------------------------
template <typename F>
void rmsnorm_forward_v1(F* out, F* rstd, const F* inp, const F* weight, int rows, int C, F eps) {
  // inp (rows,C), weight (C) -> out (rows,C), rstd (rows)
  for (int n = 0; n < rows; ++n) {
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    F* y = out + static_cast<ptrdiff_t>(n) * C;
    // pass 1: mean(x^2), the row's mean square (no mean subtracted: that is the diff from layernorm)
    F ss = 0;
    for (int c = 0; c < C; ++c) ss += x[c] * x[c];
    const F s = F(1) / std::sqrt(ss / static_cast<F>(C) + eps);
    // pass 2: out = (x * rstd) * weight, in HF's order (normalise, then scale)
    for (int c = 0; c < C; ++c) y[c] = (x[c] * s) * weight[c];
    rstd[n] = s;
  }
}
template void rmsnorm_forward_v1<float>(float*, float*, const float*, const float*, int, int, float);
template void rmsnorm_forward_v1<double>(double*, double*, const double*, const double*, int, int, double);

// ---- forward v2: SIMD rows, rows across threads -----------------------------------------------
namespace {

using V = simd::Native;
constexpr int W = V::lanes;

// sum_c x_c^2 over one row: 4 accumulators of W lanes (an FMA has ~4 cycles of latency, so one
// chain would wait on itself; 4 independent chains keep the unit busy), then a scalar tail.
float row_sum_squares(const float* x, int C) {
  V::reg a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
  int c = 0;
  for (; c + 4 * W <= C; c += 4 * W) {
    const V::reg x0 = V::load(x + c), x1 = V::load(x + c + W), x2 = V::load(x + c + 2 * W), x3 = V::load(x + c + 3 * W);
    a0 = V::fma(x0, x0, a0);
    a1 = V::fma(x1, x1, a1);
    a2 = V::fma(x2, x2, a2);
    a3 = V::fma(x3, x3, a3);
  }
  for (; c + W <= C; c += W) {
    const V::reg x0 = V::load(x + c);
    a0 = V::fma(x0, x0, a0);
  }
  float ss = V::sum(V::add(V::add(a0, a1), V::add(a2, a3)));
  for (; c < C; ++c) ss += x[c] * x[c];
  return ss;
}

}  // namespace

void rmsnorm_forward_v2(float* out, float* rstd, const float* inp, const float* weight, int rows, int C, float eps) {
  // inp (rows,C), weight (C) -> out (rows,C), rstd (rows); one thread per row, the row in L1
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * C >= kMinParallelElems)
  for (int n = 0; n < rows; ++n) {
    const float* x = inp + static_cast<ptrdiff_t>(n) * C;
    float* y = out + static_cast<ptrdiff_t>(n) * C;
    const float s = 1.0f / std::sqrt(row_sum_squares(x, C) / static_cast<float>(C) + eps);
    const V::reg vs = V::set1(s);
    int c = 0;
    for (; c + W <= C; c += W) V::store(y + c, V::mul(V::mul(V::load(x + c), vs), V::load(weight + c)));
    for (; c < C; ++c) y[c] = (x[c] * s) * weight[c];
    rstd[n] = s;
  }
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int rows, int C, float eps) {
  rmsnorm_forward_v2(out, rstd, inp, weight, rows, C, eps);
}

// ---- backward v1: plain loops -------------------------------------------------------------------
template <typename F>
void rmsnorm_backward_v1(F* dinp, F* dweight, const F* dout, const F* inp, const F* weight, const F* rstd, int rows,
                         int C) {
  // dout (rows,C), inp (rows,C), weight (C), rstd (rows) -> dinp (rows,C) += (the residual stream),
  // dweight (C) +=
  for (int n = 0; n < rows; ++n) {
    const F* dy = dout + static_cast<ptrdiff_t>(n) * C;
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    F* dx = dinp + static_cast<ptrdiff_t>(n) * C;
    const F s = rstd[n];

    // One reduction over the row: every xhat_c depends on every x_j through rstd alone, and
    // mean(g xhat), g = dout * weight = dL/dxhat, is all of that coupling.
    F gxhat_mean = 0;
    for (int c = 0; c < C; ++c) gxhat_mean += dy[c] * weight[c] * (x[c] * s);
    gxhat_mean /= static_cast<F>(C);

    for (int c = 0; c < C; ++c) {
      const F xhat = x[c] * s;
      const F g = dy[c] * weight[c];
      // out = xhat * weight: the weight sees dout times what it multiplied
      dweight[c] += dy[c] * xhat;
      // dL/dx_c = rstd (g_c - xhat_c mean(g xhat)): the direct path, minus what flows back
      // through rstd (d rstd / dx_c = -rstd^3 x_c / C)
      dx[c] += s * (g - xhat * gxhat_mean);
    }
  }
}
template void rmsnorm_backward_v1<float>(float*, float*, const float*, const float*, const float*, const float*, int,
                                         int);
template void rmsnorm_backward_v1<double>(double*, double*, const double*, const double*, const double*,
                                          const double*, int, int);

// ---- backward v2: SIMD rows, fixed chunks of rows across threads ---------------------------------
namespace {

// One row of the backward; dx ACCUMULATES, pdw (the chunk's dweight partial) too.
void rmsnorm_backward_row(float* dx, float* pdw, const float* dy, const float* x, const float* weight, float s,
                          int C) {
  // mean(g xhat), g = dy * w, xhat = x s: two accumulators (the chain is an FMA after a mul)
  const V::reg vs = V::set1(s);
  V::reg a0 = V::zero(), a1 = V::zero();
  int c = 0;
  for (; c + 2 * W <= C; c += 2 * W) {
    a0 = V::fma(V::mul(V::load(dy + c), V::load(weight + c)), V::mul(V::load(x + c), vs), a0);
    a1 = V::fma(V::mul(V::load(dy + c + W), V::load(weight + c + W)), V::mul(V::load(x + c + W), vs), a1);
  }
  for (; c + W <= C; c += W) {
    a0 = V::fma(V::mul(V::load(dy + c), V::load(weight + c)), V::mul(V::load(x + c), vs), a0);
  }
  float gx = V::sum(V::add(a0, a1));
  for (; c < C; ++c) gx += dy[c] * weight[c] * (x[c] * s);
  const float gx_mean = gx / static_cast<float>(C);

  const V::reg vm = V::set1(gx_mean);
  c = 0;
  for (; c + W <= C; c += W) {
    const V::reg xhat = V::mul(V::load(x + c), vs);
    const V::reg d = V::load(dy + c);
    V::store(pdw + c, V::fma(d, xhat, V::load(pdw + c)));
    const V::reg g = V::mul(d, V::load(weight + c));
    // dx += s (g - xhat mean(g xhat))
    V::store(dx + c, V::fma(vs, V::sub(g, V::mul(xhat, vm)), V::load(dx + c)));
  }
  for (; c < C; ++c) {
    const float xhat = x[c] * s;
    pdw[c] += dy[c] * xhat;
    dx[c] += s * (dy[c] * weight[c] - xhat * gx_mean);
  }
}

}  // namespace

void rmsnorm_backward_v2(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                         const float* rstd, int rows, int C) {
  // dout (rows,C), inp (rows,C) -> dinp (rows,C) +=, dweight (C) +=
  // Rows in fixed chunks of kRowChunk; chunk k sums its rows' dweight terms into partial k
  // (in L1), the partials are added in chunk order at the end: no dependence on the team size.
  const int nchunks = (rows + kRowChunk - 1) / kRowChunk;
  float* part = thread_scratch<float, 0>(static_cast<size_t>(nchunks) * static_cast<size_t>(C));
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * C >= kMinParallelElems)
  for (int k = 0; k < nchunks; ++k) {
    float* pdw = part + static_cast<ptrdiff_t>(k) * C;  // (C) this chunk's dweight
    std::fill(pdw, pdw + C, 0.0f);
    const int n_end = std::min(rows, (k + 1) * kRowChunk);
    for (int n = k * kRowChunk; n < n_end; ++n) {
      const ptrdiff_t off = static_cast<ptrdiff_t>(n) * C;
      rmsnorm_backward_row(dinp + off, pdw, dout + off, inp + off, weight, rstd[n], C);
    }
  }
  // dweight[c] += sum_k partial_k[c], k in order
  for (int c = 0; c < C; ++c) {
    float sw = 0.0f;
    for (int k = 0; k < nchunks; ++k) sw += part[static_cast<ptrdiff_t>(k) * C + c];
    dweight[c] += sw;
  }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int rows, int C) {
  rmsnorm_backward_v2(dinp, dweight, dout, inp, weight, rstd, rows, C);
}

// ---- the tables ---------------------------------------------------------------------------------
const std::vector<OpVersion<RmsnormFn>>& rmsnorm_versions() {
  static const std::vector<OpVersion<RmsnormFn>> versions = {
      {1, "loops", "sum of squares, then scale: plain loops, the reference", &rmsnorm_forward_v1<float>},
      {2, "simd-rows", "SIMD rows with 4 FMA chains for the sum of squares, rows across threads",
       &rmsnorm_forward_v2},
  };
  return versions;
}
const OpVersion<RmsnormFn>& rmsnorm_version(const std::string& number_or_name) {
  return find_version(rmsnorm_versions(), number_or_name, "rmsnorm");
}

const std::vector<OpVersion<RmsnormBackwardFn>>& rmsnorm_backward_versions() {
  static const std::vector<OpVersion<RmsnormBackwardFn>> versions = {
      {1, "loops", "plain loops, rows in order: the reference", &rmsnorm_backward_v1<float>},
      {2, "simd-rows", "SIMD rows; fixed chunks of 32 rows across threads, partials added in order",
       &rmsnorm_backward_v2},
  };
  return versions;
}
const OpVersion<RmsnormBackwardFn>& rmsnorm_backward_version(const std::string& number_or_name) {
  return find_version(rmsnorm_backward_versions(), number_or_name, "rmsnorm_backward");
}

}  // namespace kernels
