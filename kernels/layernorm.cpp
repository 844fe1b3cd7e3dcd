// kernels/layernorm.cpp: layernorm forward, three passes -> one-pass statistics -> SIMD ->
// rows across threads; its backward; residual + layernorm fused.
// What each version changes, the bytes it moves and the numerics are in
// kernels/layernorm.h; here, the code.
//
// The plain loop every version computes, for each row x (C,) -> y (C,):
//   m = sum x / C;  v = sum (x - m)^2 / C;  s = 1 / sqrt(v + eps);  y = (x - m) * s * w + b
#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/residual.h"
#include "kernels/simd.h"
#include "kernels/versions.h"

namespace kernels {

namespace {

constexpr double kEps = kLayernormEps;

// The last pass of v2: y = (x - m) * s * w + b, in float (the compiler
// vectorises it: no reduction, unit stride). x - m is where a large mean costs accuracy:
// m is rounded to float, so every output can be off by up to (ulp(m) / 2) * s * |w|.
void normalise_row(float* y, const float* x, const float* weight, const float* bias, int C, float m,
                   float s) {
  for (int i = 0; i < C; ++i) {
    const float n = (x[i] - m) * s;
    y[i] = n * weight[i] + bias[i];
  }
}

}  // namespace

// ---- the reference, in double ------------------------------------------------------------
LayernormReference layernorm_reference(const float* inp, const float* weight, const float* bias, int rows,
                                       int C) {
  LayernormReference ref;
  ref.out.resize(static_cast<size_t>(rows) * static_cast<size_t>(C));
  for (int r = 0; r < rows; ++r) {
    const float* x = inp + static_cast<ptrdiff_t>(r) * C;
    double sum = 0.0;
    for (int i = 0; i < C; ++i) sum += x[i];
    const double m = sum / C;
    double sq = 0.0;
    for (int i = 0; i < C; ++i) sq += (x[i] - m) * (x[i] - m);
    const double s = 1.0 / std::sqrt(sq / C + 1e-5);
    for (int i = 0; i < C; ++i) {
      ref.out[static_cast<size_t>(r) * static_cast<size_t>(C) + static_cast<size_t>(i)] =
          (x[i] - m) * s * weight[i] + bias[i];
    }
    ref.mean.push_back(m);
    ref.rstd.push_back(s);
    ref.cond = std::max(ref.cond, std::fabs(m) * s);
  }
  return ref;
}

// ---- v1: three passes, plain loops ---------------------------------------------------------
// The reference a student steps through (nn::layernorm_forward forwards here) and the one
// the naive GPT backend runs: every sum in one fixed order (index 0 upward, in F), so the
// same inputs give the same bits on every run, and a faster version is compared with these
// numbers, not the other way round.
template <typename F>
void layernorm_forward_v1(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int rows,
                          int C) {
  // inp (rows,C), weight (C), bias (C) or nullptr -> out (rows,C), mean (rows), rstd (rows)
  const F eps = static_cast<F>(kLayernormEps);
  for (int n = 0; n < rows; ++n) {
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    // Pass 1: mean = sum(x) / C
    F m = 0;
    for (int c = 0; c < C; ++c) {
      m += x[c];
    }
    m /= static_cast<F>(C);
    // Pass 2: var = sum((x - mean)^2) / C: two passes (not E[x^2] - mean^2, which cancels
    // catastrophically when the mean is large compared with the spread)
    F v = 0;
    for (int c = 0; c < C; ++c) {
      const F xshift = x[c] - m;
      v += xshift * xshift;
    }
    v /= static_cast<F>(C);
    const F s = F(1) / std::sqrt(v + eps);  // eps keeps a constant row finite
    // Pass 3: out = (x - mean) * rstd * weight + bias
    F* o = out + static_cast<ptrdiff_t>(n) * C;
    for (int c = 0; c < C; ++c) {
      const F xhat = (x[c] - m) * s;  // normalised: mean 0, variance ~1 over the row
      o[c] = xhat * weight[c] + (bias != nullptr ? bias[c] : F(0));
    }
    mean[n] = m;
    rstd[n] = s;
  }
}
template void layernorm_forward_v1<float>(float*, float*, float*, const float*, const float*, const float*, int,
                                          int);
template void layernorm_forward_v1<double>(double*, double*, double*, const double*, const double*,
                                           const double*, int, int);

// ---- v2: one pass for the statistics -----------------------------------------------------
// var = E[x^2] - E[x]^2: sum and sum of squares in the same pass. In double (see the
// header for why float would not do); the two sums are independent chains, so the pass
// costs about what v1's mean pass alone cost.
void layernorm_forward_v2(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int rows, int C) {
  // inp (rows,C), weight (C), bias (C), out (rows,C), mean (rows), rstd (rows)
  for (int r = 0; r < rows; ++r) {
    const float* x = inp + static_cast<ptrdiff_t>(r) * C;
    double sum = 0.0, sumsq = 0.0;
    for (int i = 0; i < C; ++i) {
      const double xi = x[i];
      sum += xi;
      sumsq += xi * xi;
    }
    const double m = sum / C;
    // Rounding can leave a variance of ~0 slightly negative; sqrt of that is NaN.
    const double var = std::max(sumsq / C - m * m, 0.0);
    const double s = 1.0 / std::sqrt(var + kEps);
    mean[r] = static_cast<float>(m);
    rstd[r] = static_cast<float>(s);
    normalise_row(out + static_cast<ptrdiff_t>(r) * C, x, weight, bias, C, mean[r], rstd[r]);
  }
}

// ---- v3: SIMD, statistics per chunk -----------------------------------------------------------
// Float lanes cannot hold a double sum, and a float sum of squares would fail (header).
// So the row is split into chunks of 1024 floats (4 KB, in L1 after the first read), and
// each chunk gets the stable two-pass statistics, both passes over L1, not memory:
//   (a) the chunk's mean m_c: kAcc accumulators x W lanes (AVX2: 4 x 8 = 32 float partial
//       sums of 32 terms each; NEON 8 x 4), so the rounding stays at about ulp(mean) (measured at 1000 + N(0,1) to
//       1e5 + N(0,1): within 1.3x of what rounding the mean to float costs anyway);
//   (b) its squared deviations sum (x - m_c)^2: small numbers, no cancellation;
//   (c) merge the chunk's (count, mean, M2) into the row's, in double (Chan, Golub &
//       LeVeque 1979): exact algebra, no difference of large numbers.
// Memory sees each element once for the statistics, as in v2.
namespace {

using V = simd::Native;
constexpr int W = V::lanes;
constexpr int kChunk = 1024;  // floats: 4 KB; a multiple of every W

// At least 4 accumulators: vaddps and vfmadd have 3-4 cycles of latency and two ports take
// them, so one chain would run at a quarter of the speed the L1 feeds; 4 chains get most of
// it. And at least 32 float partial sums in all (kAcc x W), so each sums at most 32 terms
// of a chunk whatever the SIMD width: with NEON's 4 lanes and 4 accumulators the partials
// got twice AVX2's terms and, at means of 1e4, twice its rounding, past the tests' bound.
constexpr int kAcc = W >= 8 ? 4 : 32 / W;

V::reg add_all(const V::reg (&acc)[kAcc]) {
  V::reg total = acc[0];
  for (int u = 1; u < kAcc; ++u) total = V::add(total, acc[u]);
  return total;
}

struct Stats {
  double count = 0.0, mean = 0.0, m2 = 0.0;  // m2 = sum (x - mean)^2
};

// (a) and (b) over one chunk x[0..n), n >= 1.
Stats chunk_stats(const float* x, int n) {
  // (a) mean = sum x / n
  V::reg acc[kAcc];
  for (V::reg& a : acc) a = V::zero();
  int j = 0;
  for (; j + kAcc * W <= n; j += kAcc * W) {
    for (int u = 0; u < kAcc; ++u) acc[u] = V::add(acc[u], V::load(x + j + u * W));
  }
  for (; j + W <= n; j += W) acc[0] = V::add(acc[0], V::load(x + j));
  float sum = V::sum(add_all(acc));
  for (; j < n; ++j) sum += x[j];
  Stats c;
  c.count = n;
  c.mean = static_cast<double>(sum) / n;

  // (b) m2 = sum (x - mf)^2 - n (mean - mf)^2, mf = the mean rounded to float (the
  // correction term is exact algebra; it is ~1e-9 of m2 at mean 1000, sigma 1).
  const auto mf = static_cast<float>(c.mean);
  const V::reg vm = V::set1(mf);
  for (V::reg& a : acc) a = V::zero();
  j = 0;
  for (; j + kAcc * W <= n; j += kAcc * W) {
    for (int u = 0; u < kAcc; ++u) {
      const V::reg d = V::sub(V::load(x + j + u * W), vm);
      acc[u] = V::fma(d, d, acc[u]);
    }
  }
  for (; j + W <= n; j += W) {
    const V::reg d = V::sub(V::load(x + j), vm);
    acc[0] = V::fma(d, d, acc[0]);
  }
  float sq = V::sum(add_all(acc));
  for (; j < n; ++j) sq += (x[j] - mf) * (x[j] - mf);
  const double off = c.mean - mf;
  c.m2 = std::max(static_cast<double>(sq) - n * off * off, 0.0);
  return c;
}

// (c) a <- a merged with b (Chan et al.): the means differ by delta, and the squared
// deviations of each part from the merged mean add delta^2 * na * nb / n.
void merge(Stats& a, const Stats& b) {
  const double n = a.count + b.count;
  const double delta = b.mean - a.mean;
  a.mean += delta * (b.count / n);
  a.m2 += b.m2 + delta * delta * (a.count * b.count / n);
  a.count = n;
}

// y = (x - m) * s * w + b over a row, in SIMD.
void normalise_row_simd(float* y, const float* x, const float* weight, const float* bias, int C, float m,
                        float s) {
  const V::reg vm = V::set1(m), vs = V::set1(s);
  int i = 0;
  for (; i + W <= C; i += W) {
    const V::reg n = V::mul(V::sub(V::load(x + i), vm), vs);
    V::store(y + i, V::fma(n, V::load(weight + i), V::load(bias + i)));
  }
  for (; i < C; ++i) y[i] = (x[i] - m) * s * weight[i] + bias[i];
}

}  // namespace

void layernorm_forward_v3(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int rows, int C) {
  // inp (rows,C), weight (C), bias (C), out (rows,C), mean (rows), rstd (rows)
  for (int r = 0; r < rows; ++r) {
    const float* x = inp + static_cast<ptrdiff_t>(r) * C;
    Stats row;
    for (int c0 = 0; c0 < C; c0 += kChunk) {
      merge(row, chunk_stats(x + c0, std::min(kChunk, C - c0)));  // (chunk,) in L1
    }
    const double s = 1.0 / std::sqrt(row.m2 / C + kEps);
    mean[r] = static_cast<float>(row.mean);
    rstd[r] = static_cast<float>(s);
    normalise_row_simd(out + static_cast<ptrdiff_t>(r) * C, x, weight, bias, C, mean[r], rstd[r]);
  }
}

// ---- v4: the cpu backend's, SIMD rows across threads -----------------------------------------
// v1's three passes on one row, each a SIMD loop over the row while it sits in L1, and the
// rows split across OpenMP threads (each row's arithmetic is the same whoever runs it).
namespace {

// sum x[0..n): 4 accumulators (FMA/add latency 4 x 2 ports wants >= 4 chains in flight),
// then the tail one element at a time. Fixed order for a given n.
inline float row_sum(const float* x, int n) {
  V::reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  int i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    for (int u = 0; u < 4; ++u) acc[u] = V::add(acc[u], V::load(x + i + u * W));
  }
  for (; i + W <= n; i += W) acc[0] = V::add(acc[0], V::load(x + i));
  float s = V::sum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
  for (; i < n; ++i) s += x[i];
  return s;
}

// sum (x[i] - m)^2 over [0, n)
inline float row_sq_dev(const float* x, float m, int n) {
  const V::reg vm = V::set1(m);
  V::reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  int i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    for (int u = 0; u < 4; ++u) {
      const V::reg d = V::sub(V::load(x + i + u * W), vm);
      acc[u] = V::fma(d, d, acc[u]);
    }
  }
  for (; i + W <= n; i += W) {
    const V::reg d = V::sub(V::load(x + i), vm);
    acc[0] = V::fma(d, d, acc[0]);
  }
  float s = V::sum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
  for (; i < n; ++i) s += (x[i] - m) * (x[i] - m);
  return s;
}

// One row: y = (x - mean) * rstd * w + b, mean and rstd from the two-pass formula.
void layernorm_row(float* y, float* mean_out, float* rstd_out, const float* x, const float* weight,
                   const float* bias, int C) {
  const float m = row_sum(x, C) / static_cast<float>(C);
  const float var = row_sq_dev(x, m, C) / static_cast<float>(C);
  const float s = 1.0f / std::sqrt(var + static_cast<float>(kLayernormEps));
  const V::reg vm = V::set1(m), vs = V::set1(s);
  int c = 0;
  for (; c + W <= C; c += W) {
    const V::reg xhat = V::mul(V::sub(V::load(x + c), vm), vs);
    V::store(y + c, V::fma(xhat, V::load(weight + c), bias != nullptr ? V::load(bias + c) : V::zero()));
  }
  for (; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + (bias != nullptr ? bias[c] : 0.0f);
  *mean_out = m;
  *rstd_out = s;
}

}  // namespace

void layernorm_forward_v4(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int rows, int C) {
  // inp (rows,C), weight (C), bias (C) -> out (rows,C), mean (rows), rstd (rows); one thread per row
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * C >= kMinParallelElems)
  for (int n = 0; n < rows; ++n) {
    const ptrdiff_t off = static_cast<ptrdiff_t>(n) * C;
    layernorm_row(out + off, mean + n, rstd + n, inp + off, weight, bias, C);
  }
}

// ---- backward v1: plain loops -------------------------------------------------------------
template <typename F>
void layernorm_backward_v1(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                           const F* mean, const F* rstd, int rows, int C) {
  // dout (rows,C), inp (rows,C), weight (C), mean (rows), rstd (rows)
  // -> dinp (rows,C) += (the residual stream), dweight (C) +=, dbias (C) +=
  for (int n = 0; n < rows; ++n) {
    const F* dy = dout + static_cast<ptrdiff_t>(n) * C;
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    F* dx = dinp + static_cast<ptrdiff_t>(n) * C;
    const F m = mean[n];
    const F s = rstd[n];

    // Two reductions over the row: every xhat_c depends on every x_j through the mean and
    // the variance, and these two sums are all of that coupling.
    //   mean(g) and mean(g * xhat), with g = dout * weight = dL/dxhat
    F g_mean = 0;
    F gxhat_mean = 0;
    for (int c = 0; c < C; ++c) {
      const F xhat = (x[c] - m) * s;
      const F g = dy[c] * weight[c];
      g_mean += g;
      gxhat_mean += g * xhat;
    }
    g_mean /= static_cast<F>(C);
    gxhat_mean /= static_cast<F>(C);

    for (int c = 0; c < C; ++c) {
      const F xhat = (x[c] - m) * s;
      const F g = dy[c] * weight[c];
      // out = xhat * weight + bias: the parameters see dout directly
      if (dbias != nullptr) dbias[c] += dy[c];
      dweight[c] += dy[c] * xhat;
      // dL/dx = rstd * (g - mean(g) - xhat * mean(g xhat)):
      //   the direct path, minus what flows back through the mean, minus through the variance
      dx[c] += s * (g - g_mean - xhat * gxhat_mean);
    }
  }
}
template void layernorm_backward_v1<float>(float*, float*, float*, const float*, const float*, const float*,
                                           const float*, const float*, int, int);
template void layernorm_backward_v1<double>(double*, double*, double*, const double*, const double*,
                                            const double*, const double*, const double*, int, int);

// ---- backward v2: SIMD rows, fixed chunks of rows across threads ---------------------------
namespace {

// One row of the layernorm backward; dinp ACCUMULATES, pdw/pdb (the chunk's partials) too.
void layernorm_backward_row(float* dx, float* pdw, float* pdb, const float* dy, const float* x,
                            const float* weight, float m, float s, int C) {
  // mean(g) and mean(g xhat), g = dy * w, xhat = (x - m) s
  const V::reg vm = V::set1(m), vs = V::set1(s);
  V::reg ag = V::zero(), agx = V::zero();
  int c = 0;
  for (; c + W <= C; c += W) {
    const V::reg xhat = V::mul(V::sub(V::load(x + c), vm), vs);
    const V::reg gg = V::mul(V::load(dy + c), V::load(weight + c));
    ag = V::add(ag, gg);
    agx = V::fma(gg, xhat, agx);
  }
  float gsum = V::sum(ag), gxsum = V::sum(agx);
  for (int j = c; j < C; ++j) {
    const float xhat = (x[j] - m) * s;
    const float gg = dy[j] * weight[j];
    gsum += gg;
    gxsum += gg * xhat;
  }
  const float g_mean = gsum / static_cast<float>(C);
  const float gx_mean = gxsum / static_cast<float>(C);
  // dx += s (g - mean(g) - xhat mean(g xhat));  dw += dy xhat;  db += dy
  const V::reg vgm = V::set1(g_mean), vgx = V::set1(gx_mean);
  c = 0;
  for (; c + W <= C; c += W) {
    const V::reg xhat = V::mul(V::sub(V::load(x + c), vm), vs);
    const V::reg d = V::load(dy + c);
    const V::reg gg = V::mul(d, V::load(weight + c));
    V::store(pdb + c, V::add(V::load(pdb + c), d));
    V::store(pdw + c, V::fma(d, xhat, V::load(pdw + c)));
    const V::reg inner = V::sub(V::sub(gg, vgm), V::mul(xhat, vgx));
    V::store(dx + c, V::fma(vs, inner, V::load(dx + c)));
  }
  for (; c < C; ++c) {
    const float xhat = (x[c] - m) * s;
    const float gg = dy[c] * weight[c];
    pdb[c] += dy[c];
    pdw[c] += dy[c] * xhat;
    dx[c] += s * (gg - g_mean - xhat * gx_mean);
  }
}

}  // namespace

void layernorm_backward_v2(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                           const float* weight, const float* mean, const float* rstd, int rows, int C) {
  // dout (rows,C), inp (rows,C) -> dinp (rows,C) +=, dweight (C) +=, dbias (C) +=
  // Rows in fixed chunks of kRowChunk; chunk k sums its rows' dweight/dbias terms into
  // partial k (in L1), the partials are added in chunk order at the end.
  const int nchunks = (rows + kRowChunk - 1) / kRowChunk;
  float* part = thread_scratch<float, 0>(static_cast<size_t>(nchunks) * 2 * static_cast<size_t>(C));
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * C >= kMinParallelElems)
  for (int k = 0; k < nchunks; ++k) {
    float* pdw = part + static_cast<ptrdiff_t>(k) * 2 * C;  // (C) this chunk's dweight
    float* pdb = pdw + C;                                   // (C) this chunk's dbias
    std::fill(pdw, pdw + 2 * C, 0.0f);
    const int n_end = std::min(rows, (k + 1) * kRowChunk);
    for (int n = k * kRowChunk; n < n_end; ++n) {
      const ptrdiff_t off = static_cast<ptrdiff_t>(n) * C;
      layernorm_backward_row(dinp + off, pdw, pdb, dout + off, inp + off, weight, mean[n], rstd[n], C);
    }
  }
  // dweight[c] += sum_k partial_k[c], k in order (cheap: nchunks x 2C adds)
  for (int c = 0; c < C; ++c) {
    float sw = 0.0f, sb = 0.0f;
    for (int k = 0; k < nchunks; ++k) {
      sw += part[static_cast<ptrdiff_t>(k) * 2 * C + c];
      sb += part[static_cast<ptrdiff_t>(k) * 2 * C + C + c];
    }
    dweight[c] += sw;
    if (dbias != nullptr) dbias[c] += sb;
  }
}

// ---- residual + layernorm ---------------------------------------------------------------------
void residual_layernorm_forward_v1(float* residual_out, float* ln_out, float* mean, float* rstd, const float* a,
                                   const float* b, const float* weight, const float* bias, int rows, int C) {
  residual_forward_v1(residual_out, a, b, static_cast<int64_t>(rows) * C);
  layernorm_forward_v1(ln_out, mean, rstd, residual_out, weight, bias, rows, C);
}

void residual_layernorm_forward_v2(float* residual_out, float* ln_out, float* mean, float* rstd, const float* a,
                                   const float* b, const float* weight, const float* bias, int rows, int C) {
  // residual_out = a + b, ln_out = layernorm(residual_out), row by row: the sum is read
  // back from L1 by the statistics and the normalisation, not from memory.
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * C >= kMinParallelElems)
  for (int n = 0; n < rows; ++n) {
    const ptrdiff_t off = static_cast<ptrdiff_t>(n) * C;
    float* r = residual_out + off;
    int c = 0;
    for (; c + W <= C; c += W) V::store(r + c, V::add(V::load(a + off + c), V::load(b + off + c)));
    for (; c < C; ++c) r[c] = a[off + c] + b[off + c];
    layernorm_row(ln_out + off, mean + n, rstd + n, r, weight, bias, C);
  }
}

// ---- dispatch -------------------------------------------------------------------------------
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int rows, int C) {
  layernorm_forward_v3(out, mean, rstd, inp, weight, bias, rows, C);
}

const std::vector<LayernormVersion>& layernorm_versions() {
  static const std::vector<LayernormVersion> versions = {
      {1, "three-pass", "mean, variance, normalise: 3 plain-loop passes, sums in float, 16 B/element",
       &layernorm_forward_v1<float>},
      {2, "one-pass", "sum and sum of squares in one pass (double), then normalise: 12 B/element",
       &layernorm_forward_v2},
      {3, "one-pass-simd", "SIMD; two-pass statistics per 4 KB chunk in L1, merged in double",
       &layernorm_forward_v3},
      {4, "rows-parallel", "v1's passes in SIMD per row (row in L1), rows across threads: the trainer's",
       &layernorm_forward_v4},
  };
  return versions;
}

const LayernormVersion& layernorm_version(const std::string& number_or_name) {
  return find_version(layernorm_versions(), number_or_name, "layernorm");
}

const std::vector<OpVersion<LayernormBackwardFn>>& layernorm_backward_versions() {
  static const std::vector<OpVersion<LayernormBackwardFn>> versions = {
      {1, "loops", "plain loops, rows in order: the reference", &layernorm_backward_v1<float>},
      {2, "rows-parallel", "SIMD rows; fixed chunks of 32 rows across threads, partials added in order",
       &layernorm_backward_v2},
  };
  return versions;
}

const OpVersion<LayernormBackwardFn>& layernorm_backward_version(const std::string& number_or_name) {
  return find_version(layernorm_backward_versions(), number_or_name, "layernorm_backward");
}

const std::vector<OpVersion<ResidualLayernormFn>>& residual_layernorm_versions() {
  static const std::vector<OpVersion<ResidualLayernormFn>> versions = {
      {1, "two-ops", "residual_forward v1, then layernorm_forward v1", &residual_layernorm_forward_v1},
      {2, "fused-rows", "add, statistics and normalise per row from L1 (layernorm v4's row), rows across threads",
       &residual_layernorm_forward_v2},
  };
  return versions;
}

const OpVersion<ResidualLayernormFn>& residual_layernorm_version(const std::string& number_or_name) {
  return find_version(residual_layernorm_versions(), number_or_name, "residual_layernorm");
}

}  // namespace kernels
