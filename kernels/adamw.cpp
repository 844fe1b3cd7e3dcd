// kernels/adamw.cpp: AdamW, sum of squares and scale, loops and SIMD threads (kernels/adamw.h).
#include "kernels/adamw.h"

#include <algorithm>
#include <cmath>

#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace kernels {

// ---- v1: plain loops ------------------------------------------------------------------------
void adamw_update_v1(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                     float eps, float weight_decay, int64_t t) {
  // PyTorch's torch.optim.AdamW (single-tensor path), operation for operation.
  const double td = static_cast<double>(t);
  const float bias_correction1 = 1.0f - static_cast<float>(std::pow(beta1, td));
  const float bias_correction2 = 1.0f - static_cast<float>(std::pow(beta2, td));
  const float step_size = lr / bias_correction1;
  const float bc2_sqrt = std::sqrt(bias_correction2);
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= 1.0f - lr * weight_decay;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    p[i] -= step_size * m[i] / denom;
  }
}

double sum_squares_v1(const float* g, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  return s;
}

void scale_v1(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

// ---- v2: SIMD over OpenMP blocks --------------------------------------------------------------
namespace {

using V = simd::Native;
using S = simd::Portable<1>;  // one lane: the same arithmetic for the tails
constexpr int W = V::lanes;

template <class VV>
void adamw_lanes(float* p, const float* g, float* m, float* v, float decay, float beta1, float beta2,
                 float step_size, float bc2_sqrt, float eps) {
  using R = typename VV::reg;
  const R gi = VV::load(g);
  R pi = VV::load(p);
  pi = VV::sub(pi, VV::mul(VV::set1(decay), pi));  // p -= lr wd p
  const R mi = VV::add(VV::mul(VV::set1(beta1), VV::load(m)), VV::mul(VV::set1(1.0f - beta1), gi));
  const R vi = VV::add(VV::mul(VV::set1(beta2), VV::load(v)), VV::mul(VV::set1(1.0f - beta2), VV::mul(gi, gi)));
  const R denom = VV::add(VV::div(VV::sqrt(vi), VV::set1(bc2_sqrt)), VV::set1(eps));
  pi = VV::sub(pi, VV::div(VV::mul(VV::set1(step_size), mi), denom));
  VV::store(m, mi);
  VV::store(v, vi);
  VV::store(p, pi);
}

}  // namespace

void adamw_update_v2(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                     float eps, float weight_decay, int64_t t) {
  //   p -= lr wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
  //   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
  const double tt = static_cast<double>(t);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(beta1), tt)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), tt)));
  const float decay = lr * weight_decay;
  const int64_t nv = n / W;
#pragma omp parallel for schedule(static) if (n >= kMinParallelElems)
  for (int64_t k = 0; k < nv; ++k) {
    const int64_t i = k * W;
    adamw_lanes<V>(p + i, g + i, m + i, v + i, decay, beta1, beta2, step_size, bc2_sqrt, eps);
  }
  for (int64_t i = nv * W; i < n; ++i) {
    adamw_lanes<S>(p + i, g + i, m + i, v + i, decay, beta1, beta2, step_size, bc2_sqrt, eps);
  }
}

double sum_squares_v2(const float* g, int64_t n) {
  // fixed chunks of kSumChunk: each chunk sums blocks of 4W squares in float lanes (at
  // most 4 terms per lane per block), each block into the chunk's double; the chunk sums
  // are then added in chunk order. Neither step depends on the thread count.
  const int64_t nchunks = (n + kSumChunk - 1) / kSumChunk;
  double* cs = thread_scratch<double, 0>(static_cast<size_t>(nchunks));
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (int64_t k = 0; k < nchunks; ++k) {
    const int64_t lo = k * kSumChunk, hi = std::min(n, lo + kSumChunk);
    double s = 0.0;
    int64_t i = lo;
    for (; i + 16 * W <= hi; i += 16 * W) {
      V::reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
      for (int r = 0; r < 4; ++r) {
        for (int u = 0; u < 4; ++u) {
          const V::reg x = V::load(g + i + (4 * r + u) * W);
          acc[u] = V::fma(x, x, acc[u]);
        }
      }
      s += static_cast<double>(V::sum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3]))));
    }
    for (; i < hi; ++i) s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    cs[k] = s;
  }
  double total = 0.0;
  for (int64_t k = 0; k < nchunks; ++k) total += cs[k];
  return total;
}

void scale_v2(float* x, float s, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElems)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

const std::vector<OpVersion<AdamwFn>>& adamw_versions() {
  static const std::vector<OpVersion<AdamwFn>> versions = {
      {1, "loop", "PyTorch's single-tensor AdamW, operation for operation: the reference", &adamw_update_v1},
      {2, "simd", "SIMD lanes (sqrt included) over OpenMP blocks, bias corrections in double", &adamw_update_v2},
  };
  return versions;
}
const OpVersion<AdamwFn>& adamw_version(const std::string& number_or_name) {
  return find_version(adamw_versions(), number_or_name, "adamw");
}

const std::vector<OpVersion<SumSquaresFn>>& sum_squares_versions() {
  static const std::vector<OpVersion<SumSquaresFn>> versions = {
      {1, "loop", "one double sum in order: the reference", &sum_squares_v1},
      {2, "chunks", "fixed 16K chunks across threads, float lanes per block, double per chunk", &sum_squares_v2},
  };
  return versions;
}
const OpVersion<SumSquaresFn>& sum_squares_version(const std::string& number_or_name) {
  return find_version(sum_squares_versions(), number_or_name, "sum_squares");
}

const std::vector<OpVersion<ScaleFn>>& scale_versions() {
  static const std::vector<OpVersion<ScaleFn>> versions = {
      {1, "loop", "the plain loop: the reference", &scale_v1},
      {2, "threads", "omp parallel for simd over the elements", &scale_v2},
  };
  return versions;
}
const OpVersion<ScaleFn>& scale_version(const std::string& number_or_name) {
  return find_version(scale_versions(), number_or_name, "scale");
}

}  // namespace kernels
