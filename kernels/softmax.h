// kernels/softmax.h: row-wise softmax, probs (rows, cols) = softmax(logits (rows, cols)).
//
//   softmax(x)_j = exp(x_j - m) / sum_k exp(x_k - m),  m = max_k x_k
//
// Why subtract the max: exp overflows float above x = 88.7 (exp(89) = inf), and logits of
// 100 or 1000 are ordinary; inf / inf is NaN. Any m gives the same result mathematically
// (it cancels), and m = max makes every exponent <= 0: every exp is in (0, 1], the
// largest is exactly 1, and the sum is in [1, cols]. Nothing overflows.
//
// Passes over a row: the textbook needs three (the max, then exp and sum, then divide),
// and the divide pass re-reads what the exp pass wrote. The online softmax (Milakov &
// Gimelshein 2018, "Online normalizer calculation for softmax") finds the max and the sum
// in ONE pass: keep a running max m and a running sum d of exp(x - m); when a new max
// m' arrives, the sum so far was computed against the old max, so rescale it:
//   d' = d * exp(m - m') + exp(x - m')
// The rule also merges two partial (m, d) of any two parts of a row: that is how v3
// applies it per chunk, and how FlashAttention applies it per tile.
//
// When does the number of passes matter? Only when a row does not fit in cache: a row of
// 1024 floats (4 KB) is re-read from L1 by every pass, and memory sees each element once
// whichever version runs. The bench sweeps rows from L1-sized to larger than the L3
// (2 x 16M) to show where passes start to cost memory traffic.
//
// Versions (code in kernels/softmax.cpp; bytes per element: every pass's reads and writes,
// counted as if no pass found the previous pass's data in cache; figures: ms at 2 x 16M,
// rows larger than the L3 so that every pass goes to memory, 1 thread, on the machine
// recorded in the benchmark record):
//   v1  three passes, scalar, std::exp, the sum in double. The reference.
//       20 B/element (read x; read x, write y; read y, write y).        FIG_V1
//   v2  online softmax, scalar: max and sum in one pass, then one write pass.
//       12 B/element, but 2 exps per element instead of 1: with libm's exp the cost is
//       the exp, not the bytes, so v2 can be SLOWER than v1 here.   FIG_V2
//   v3  v2 in SIMD (simd::Native) with our own exp (poly_exp, kernels/elementwise.h):
//       the exp gets ~10x cheaper and the bytes start to matter. Online per chunk of 1024
//       floats (a max pass and an exp-sum pass over the chunk in L1, then one rescale
//       per chunk), so lanes sum at most 128 terms in float and chunks merge in double.
//       12 B/element.                                                   FIG_V3
//       v1 -> v3 changes two things at once. v3 still pays 2 exps per element; where rows
//       fit in cache and passes cost only L1 bandwidth, a three-pass SIMD version (1 exp
//       per element) could beat it: online softmax wins where the bytes cost more than
//       the exp (GPUs; rows beyond the caches).
// softmax_forward() below is v3.
//
// Logits must be finite: a masked entry should be a large negative number (-1e30), not
// -inf (a row that starts with -inf makes the running rule compute -inf - (-inf)).
// Accuracy: v1, v2 ~2e-7 relative (libm exp, double sum); v3 ~1e-6 relative (poly_exp's
// ~2e-7, float lane sums over <= 128 terms).
#pragma once

#include <string>
#include <vector>

namespace kernels {

// probs (rows, cols), logits (rows, cols); probs may not alias logits.
using SoftmaxFn = void (*)(float* probs, const float* logits, int rows, int cols);

void softmax_forward_v1(float* probs, const float* logits, int rows, int cols);
void softmax_forward_v2(float* probs, const float* logits, int rows, int cols);
void softmax_forward_v3(float* probs, const float* logits, int rows, int cols);

// The fastest validated version (v3).
void softmax_forward(float* probs, const float* logits, int rows, int cols);

struct SoftmaxVersion {
  int number;
  const char* name;
  const char* summary;
  SoftmaxFn fn;
};
// Every version, in order: the bench and the tests iterate over this.
const std::vector<SoftmaxVersion>& softmax_versions();
// By number ("2") or name ("v2", "online"); throws std::invalid_argument.
const SoftmaxVersion& softmax_version(const std::string& number_or_name);

}  // namespace kernels
