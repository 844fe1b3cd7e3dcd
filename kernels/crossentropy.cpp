// kernels/crossentropy.cpp: softmax + cross-entropy, loops and SIMD (kernels/crossentropy.h).
#include "kernels/crossentropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/elementwise.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"
#include "kernels/softmax.h"

namespace kernels {

using std::ptrdiff_t;

// ---- v1: plain loops ------------------------------------------------------------------------
template <typename F>
F crossentropy_forward_v1(F* probs, F* losses, const F* logits, const int32_t* targets, int N, int V) {
  // logits (N,V), targets (N) -> probs (N,V), losses (N); returns the mean loss
  // probs = softmax(logits), row by row: the textbook loops (kernels/softmax.h).
  softmax_loops(probs, logits, N, V);
  double total = 0.0;
  for (int n = 0; n < N; ++n) {
    // -log p_t computed from the logits (logsumexp - x_t) rather than log(p_t), so a
    // probability that underflows to 0 gives a large finite loss instead of inf.
    const F* x = logits + static_cast<ptrdiff_t>(n) * V;
    F maxval = -std::numeric_limits<F>::infinity();
    for (int v = 0; v < V; ++v) {
      maxval = x[v] > maxval ? x[v] : maxval;
    }
    F sum = 0;
    for (int v = 0; v < V; ++v) {
      sum += std::exp(x[v] - maxval);
    }
    losses[n] = maxval + std::log(sum) - x[targets[n]];
    total += static_cast<double>(losses[n]);
  }
  return static_cast<F>(total / N);
}
template float crossentropy_forward_v1<float>(float*, float*, const float*, const int32_t*, int, int);
template double crossentropy_forward_v1<double>(double*, double*, const double*, const int32_t*, int, int);

template <typename F>
void crossentropy_backward_v1(F* dlogits, const F* probs, const int32_t* targets, int N, int V, F dloss) {
  // d(mean_n loss_n)/d x_nv = (p_nv - [v == t_n]) / N
  const F scale = dloss / static_cast<F>(N);
  for (int n = 0; n < N; ++n) {
    const F* p = probs + static_cast<ptrdiff_t>(n) * V;
    F* dx = dlogits + static_cast<ptrdiff_t>(n) * V;
    for (int v = 0; v < V; ++v) {
      const F indicator = v == targets[n] ? F(1) : F(0);
      dx[v] = scale * (p[v] - indicator);
    }
  }
}
template void crossentropy_backward_v1<float>(float*, const float*, const int32_t*, int, int, float);
template void crossentropy_backward_v1<double>(double*, const double*, const int32_t*, int, int, double);

// ---- v2: SIMD rows, threads -------------------------------------------------------------------
namespace {
using Vn = simd::Native;
constexpr int W = Vn::lanes;
}  // namespace

float crossentropy_forward_v2(float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                              int V) {
  // logits (N,V), targets (N) -> probs (N,V), losses (N); returns the mean loss
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * V >= kMinParallelElems / 4)
  for (int n = 0; n < N; ++n) {
    const float* x = logits + static_cast<ptrdiff_t>(n) * V;
    float* p = probs + static_cast<ptrdiff_t>(n) * V;
    // max, then e = exp(x - max) into probs and their sum, then scale by 1 / sum
    Vn::reg vmax = Vn::set1(-std::numeric_limits<float>::infinity());
    int v = 0;
    for (; v + W <= V; v += W) vmax = Vn::max(vmax, Vn::load(x + v));
    float maxval = Vn::hmax(vmax);
    for (; v < V; ++v) maxval = std::max(maxval, x[v]);
    const Vn::reg vm = Vn::set1(maxval);
    Vn::reg vsum = Vn::zero();
    v = 0;
    for (; v + W <= V; v += W) {
      const Vn::reg e = poly_exp<Vn>(Vn::sub(Vn::load(x + v), vm));
      Vn::store(p + v, e);
      vsum = Vn::add(vsum, e);
    }
    float sum = Vn::sum(vsum);
    for (; v < V; ++v) {
      p[v] = poly_expf(x[v] - maxval);
      sum += p[v];
    }
    const float inv = 1.0f / sum;
    for (v = 0; v < V; ++v) p[v] *= inv;
    // loss = logsumexp(x) - x[target]: finite even when p[target] underflows
    losses[n] = maxval + std::log(sum) - x[targets[n]];
  }
  double total = 0.0;
  for (int n = 0; n < N; ++n) total += static_cast<double>(losses[n]);
  return static_cast<float>(total / N);
}

void crossentropy_backward_v2(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                              float dloss) {
  // dlogits = (probs - onehot(target)) * dloss / N, assigned
  const float s = dloss / static_cast<float>(N);
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * V >= kMinParallelElems)
  for (int n = 0; n < N; ++n) {
    const float* p = probs + static_cast<ptrdiff_t>(n) * V;
    float* d = dlogits + static_cast<ptrdiff_t>(n) * V;
    for (int v = 0; v < V; ++v) d[v] = s * p[v];
    d[targets[n]] = s * (p[targets[n]] - 1.0f);
  }
}

const std::vector<OpVersion<CrossentropyFn>>& crossentropy_versions() {
  static const std::vector<OpVersion<CrossentropyFn>> versions = {
      {1, "loops", "softmax then logsumexp in plain loops with std::exp: the reference",
       &crossentropy_forward_v1<float>},
      {2, "simd", "SIMD rows with poly_exp, one exp per element, rows across threads", &crossentropy_forward_v2},
  };
  return versions;
}
const OpVersion<CrossentropyFn>& crossentropy_version(const std::string& number_or_name) {
  return find_version(crossentropy_versions(), number_or_name, "crossentropy");
}

const std::vector<OpVersion<CrossentropyBackwardFn>>& crossentropy_backward_versions() {
  static const std::vector<OpVersion<CrossentropyBackwardFn>> versions = {
      {1, "loops", "plain loops: the reference", &crossentropy_backward_v1<float>},
      {2, "threads", "rows across threads, the target's entry patched after the row", &crossentropy_backward_v2},
  };
  return versions;
}
const OpVersion<CrossentropyBackwardFn>& crossentropy_backward_version(const std::string& number_or_name) {
  return find_version(crossentropy_backward_versions(), number_or_name, "crossentropy_backward");
}

}  // namespace kernels
