// kernels/softmax.cpp: row-wise softmax, three passes -> online, each scalar and then in
// SIMD. What each version changes and the bytes it moves are in kernels/softmax.h; here,
// the code.
//
// The plain loop every version computes, for each row x (cols,) -> y (cols,):
//   m = max_j x[j];  s = sum_j exp(x[j] - m);  y[j] = exp(x[j] - m) / s
#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/simd.h"
#include "kernels/versions.h"

namespace kernels {

// ---- v1: three passes ---------------------------------------------------------------------
void softmax_forward_v1(float* probs, const float* logits, int rows, int cols) {
  // logits (rows, cols), probs (rows, cols)
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<ptrdiff_t>(r) * cols;
    float* y = probs + static_cast<ptrdiff_t>(r) * cols;
    // Pass 1: the max. -INFINITY is the identity of max (any finite start could be
    // larger than every logit, and then the largest exponent would not be 0).
    float maxval = -INFINITY;
    for (int j = 0; j < cols; ++j) maxval = std::max(maxval, x[j]);
    // Pass 2: y = exp(x - max), summed. The sum in double: a float sum of 50K terms of
    // ~0.5 grows to ~25000, where floats are 0.002 apart, so each term added keeps only
    // ~8 of its 24 bits.
    double sum = 0.0;
    for (int j = 0; j < cols; ++j) {
      y[j] = std::exp(x[j] - maxval);
      sum += y[j];
    }
    // Pass 3: normalise: re-reads what pass 2 wrote.
    const auto inv = static_cast<float>(1.0 / sum);
    for (int j = 0; j < cols; ++j) y[j] *= inv;
  }
}

// ---- v2: online softmax, scalar -----------------------------------------------------------
// One pass keeps a running max m and a running sum d = sum of exp(x - m) over what it has
// seen. A new max changes the reference point of every term already in d, so d is
// rescaled by exp(m_old - m_new) (Milakov & Gimelshein 2018). Written with a branch so
// each element costs ONE exp: the max changes rarely (~ln(cols) times in random data), so
// the branch predicts well.
void softmax_forward_v2(float* probs, const float* logits, int rows, int cols) {
  // logits (rows, cols), probs (rows, cols)
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<ptrdiff_t>(r) * cols;
    float* y = probs + static_cast<ptrdiff_t>(r) * cols;
    float m = -INFINITY;
    double d = 0.0;
    for (int j = 0; j < cols; ++j) {
      if (x[j] > m) {
        d = d * std::exp(m - x[j]) + 1.0;  // rescale to the new max; its own term is exp(0)
        m = x[j];
      } else {
        d += std::exp(x[j] - m);
      }
    }
    // The write pass: the exp again (v1 stored it instead: 8 more bytes per element).
    const auto inv = static_cast<float>(1.0 / d);
    for (int j = 0; j < cols; ++j) y[j] = std::exp(x[j] - m) * inv;
  }
}

// ---- the SIMD helpers of v3 and v4 --------------------------------------------------------
// Both work a row in chunks of 1024 floats (4 KB), small enough to stay in L1 between two
// looks at them, and each chunk's sum is a float sum in the lanes, added to the row's sum
// in double: float lanes sum at most 1024 / 8 = 128 terms each, so the float sum stays
// accurate however long the row (v1's comment says what a long float sum loses).
namespace {

using V = simd::Native;
constexpr int W = V::lanes;
constexpr int kChunk = 1024;  // floats: 4 KB, an eighth of L1d; a multiple of every W

// max of x[0..n). One accumulator: vmaxps has 1-cycle latency on current x86, faster
// than the loads feeding it.
float max_of(const float* x, int n) {
  int j = 0;
  V::reg acc = V::set1(-INFINITY);
  for (; j + W <= n; j += W) acc = V::max(acc, V::load(x + j));
  float m = V::hmax(acc);
  for (; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

// sum of exp(x[j] - m) over x[0..n), n <= kChunk. One accumulator: poly_exp (~15
// instructions) per vector is the cost; the add's latency hides behind it.
float sum_exp(const float* x, int n, float m) {
  int j = 0;
  const V::reg vm = V::set1(m);
  V::reg acc = V::zero();
  for (; j + W <= n; j += W) acc = V::add(acc, poly_exp<V>(V::sub(V::load(x + j), vm)));
  float s = V::sum(acc);
  for (; j < n; ++j) s += poly_expf(x[j] - m);
  return s;
}

// y = exp(x - m) over x[0..n), n <= kChunk, and returns their sum: sum_exp that also
// stores what it adds.
float store_exp_sum(float* y, const float* x, int n, float m) {
  int j = 0;
  const V::reg vm = V::set1(m);
  V::reg acc = V::zero();
  for (; j + W <= n; j += W) {
    const V::reg e = poly_exp<V>(V::sub(V::load(x + j), vm));
    V::store(y + j, e);
    acc = V::add(acc, e);
  }
  float s = V::sum(acc);
  for (; j < n; ++j) {
    y[j] = poly_expf(x[j] - m);
    s += y[j];
  }
  return s;
}

// y *= s over y[0..n).
void scale(float* y, int n, float s) {
  int j = 0;
  const V::reg vs = V::set1(s);
  for (; j + W <= n; j += W) V::store(y + j, V::mul(V::load(y + j), vs));
  for (; j < n; ++j) y[j] *= s;
}

// y = exp(x - m) * inv over x[0..n).
void write_probs(float* y, const float* x, int n, float m, float inv) {
  int j = 0;
  const V::reg vm = V::set1(m), vinv = V::set1(inv);
  for (; j + W <= n; j += W) V::store(y + j, V::mul(poly_exp<V>(V::sub(V::load(x + j), vm)), vinv));
  for (; j < n; ++j) y[j] = poly_expf(x[j] - m) * inv;
}

}  // namespace

// ---- v3: three passes in SIMD -------------------------------------------------------------
// v1's three passes, each a SIMD loop, with poly_exp: one exp per element, and the same
// chunked float-then-double sum as v4, so that v3 -> v4 changes only the number of passes.
void softmax_forward_v3(float* probs, const float* logits, int rows, int cols) {
  // logits (rows, cols), probs (rows, cols)
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<ptrdiff_t>(r) * cols;
    float* y = probs + static_cast<ptrdiff_t>(r) * cols;
    // Pass 1: the max.
    const float m = max_of(x, cols);
    // Pass 2: y = exp(x - m), summed per chunk in float lanes, chunks in double.
    double sum = 0.0;
    for (int c0 = 0; c0 < cols; c0 += kChunk) {
      const int n = std::min(kChunk, cols - c0);
      sum += store_exp_sum(y + c0, x + c0, n, m);
    }
    // Pass 3: normalise: re-reads what pass 2 wrote.
    scale(y, cols, static_cast<float>(1.0 / sum));
  }
}

// ---- v4: online softmax in SIMD, per chunk ------------------------------------------------
// Per element, the online rule needs a rescale exp whenever a lane's max grows, or a
// select between two formulas (as v2's branch). Per CHUNK it needs neither: a chunk stays
// in L1, so it is read twice from there, once for its max and once for sum exp(x - chunk
// max), and memory still sees each element once. Then one rescale merges the chunk into
// the row's running (m, d), in double.
void softmax_forward_v4(float* probs, const float* logits, int rows, int cols) {
  // logits (rows, cols), probs (rows, cols)
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<ptrdiff_t>(r) * cols;
    float* y = probs + static_cast<ptrdiff_t>(r) * cols;
    // Pass 1 over memory: the running (m, d), one chunk at a time.
    float m = -INFINITY;
    double d = 0.0;
    for (int c0 = 0; c0 < cols; c0 += kChunk) {
      const int n = std::min(kChunk, cols - c0);
      const float mc = max_of(x + c0, n);               // (chunk,) in L1 from here on
      const double dc = sum_exp(x + c0, n, mc);
      // Merge (mc, dc) into (m, d): whichever max is smaller, its sum is rescaled.
      if (mc > m) {
        d = d * std::exp(static_cast<double>(m) - mc) + dc;
        m = mc;
      } else {
        d += dc * std::exp(static_cast<double>(mc) - m);
      }
    }
    // Pass 2 over memory: write, the exp again (v3 stored it instead: 8 more bytes per
    // element).
    write_probs(y, x, cols, m, static_cast<float>(1.0 / d));
  }
}

// ---- dispatch -------------------------------------------------------------------------------
// v3: measured faster than v4 at 8K x 1K and no slower at 2 x 16M (kernels/softmax.h).
template <typename F>
void softmax_loops(F* probs, const F* logits, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const F* x = logits + static_cast<std::ptrdiff_t>(r) * cols;
    F* p = probs + static_cast<std::ptrdiff_t>(r) * cols;
    F maxval = -std::numeric_limits<F>::infinity();
    for (int c = 0; c < cols; ++c) {
      maxval = x[c] > maxval ? x[c] : maxval;
    }
    F sum = 0;
    for (int c = 0; c < cols; ++c) {
      p[c] = std::exp(x[c] - maxval);
      sum += p[c];
    }
    for (int c = 0; c < cols; ++c) {
      p[c] /= sum;
    }
  }
}
template void softmax_loops<float>(float*, const float*, int, int);
template void softmax_loops<double>(double*, const double*, int, int);

void softmax_forward(float* probs, const float* logits, int rows, int cols) {
  softmax_forward_v3(probs, logits, rows, cols);
}

const std::vector<SoftmaxVersion>& softmax_versions() {
  static const std::vector<SoftmaxVersion> versions = {
      {1, "three-pass", "max, exp+sum (writes exp), normalise: 3 passes, 20 B/element", &softmax_forward_v1},
      {2, "online", "running max and rescaled sum in one pass, then write: 12 B/element", &softmax_forward_v2},
      {3, "three-pass-simd", "v1 in SIMD with poly_exp: 3 passes, 1 exp per element, 20 B/element",
       &softmax_forward_v3},
      {4, "online-simd", "v2 in SIMD with poly_exp, online per 4 KB chunk: 2 exps per element, 12 B/element",
       &softmax_forward_v4},
  };
  return versions;
}

const SoftmaxVersion& softmax_version(const std::string& number_or_name) {
  return find_version(softmax_versions(), number_or_name, "softmax");
}

}  // namespace kernels
