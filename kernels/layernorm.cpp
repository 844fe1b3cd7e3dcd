// kernels/layernorm.cpp: layernorm forward, three passes -> one-pass statistics -> SIMD.
// What each version changes, the bytes it moves and the numerics are in
// kernels/layernorm.h; here, the code.
//
// The plain loop every version computes, for each row x (C,) -> y (C,):
//   m = sum x / C;  v = sum (x - m)^2 / C;  s = 1 / sqrt(v + eps);  y = (x - m) * s * w + b
#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/simd.h"
#include "kernels/versions.h"

namespace kernels {

namespace {

constexpr double kEps = 1e-5;

// The last pass, shared by v1 and v2: y = (x - m) * s * w + b, in float (the compiler
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

// ---- v1: three passes ---------------------------------------------------------------------
void layernorm_forward_v1(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int rows, int C) {
  // inp (rows,C), weight (C), bias (C), out (rows,C), mean (rows), rstd (rows)
  for (int r = 0; r < rows; ++r) {
    const float* x = inp + static_cast<ptrdiff_t>(r) * C;
    // Pass 1: the mean.
    double sum = 0.0;
    for (int i = 0; i < C; ++i) sum += x[i];
    const double m = sum / C;
    // Pass 2: the variance, from deviations (the stable two-pass formula).
    double sq = 0.0;
    for (int i = 0; i < C; ++i) {
      const double d = x[i] - m;
      sq += d * d;
    }
    const double s = 1.0 / std::sqrt(sq / C + kEps);
    // Pass 3: normalise, scale, shift.
    mean[r] = static_cast<float>(m);
    rstd[r] = static_cast<float>(s);
    normalise_row(out + static_cast<ptrdiff_t>(r) * C, x, weight, bias, C, mean[r], rstd[r]);
  }
}

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

// ---- dispatch -------------------------------------------------------------------------------
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int rows, int C) {
  layernorm_forward_v3(out, mean, rstd, inp, weight, bias, rows, C);
}

const std::vector<LayernormVersion>& layernorm_versions() {
  static const std::vector<LayernormVersion> versions = {
      {1, "three-pass", "mean, variance, normalise: 3 passes, sums in double, 16 B/element",
       &layernorm_forward_v1},
      {2, "one-pass", "sum and sum of squares in one pass (double), then normalise: 12 B/element",
       &layernorm_forward_v2},
      {3, "one-pass-simd", "SIMD; two-pass statistics per 4 KB chunk in L1, merged in double",
       &layernorm_forward_v3},
  };
  return versions;
}

const LayernormVersion& layernorm_version(const std::string& number_or_name) {
  return find_version(layernorm_versions(), number_or_name, "layernorm");
}

}  // namespace kernels
