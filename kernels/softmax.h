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
// The rule also merges two partial (m, d) of any two parts of a row: that is how v4
// applies it per chunk, and how FlashAttention applies it per tile.
//
// The price: the online pass does not store exp(x - m) (the final m is not known yet), so
// the write pass computes it again: 2 exps per element against the three passes' 1. The
// trade is 8 bytes per element (the store of exp and its re-read) for one exp.
//
// When does the number of passes matter? Only when a row does not fit in cache: a row of
// 1024 floats (4 KB) is re-read from L1 by every pass, and memory sees each element once
// whichever version runs. The bench sweeps rows from L1-sized to larger than the L3
// (2 x 16M) to show where passes start to cost memory traffic.
//
// Versions (code in kernels/softmax.cpp; bytes per element: every pass's reads and writes,
// counted as if no pass found the previous pass's data in cache; figures: ms at 2 x 16M,
// rows larger than the L3 so that every pass goes to memory, 1 thread, 2-core AMD EPYC,
// docs/benchmarks/lesson03-fusion.md):
//   v1  three passes, scalar, std::exp, the sum in double. The reference.
//       20 B/element (read x; read x, write y; read y, write y).   212 ms
//   v2  online softmax, scalar: max and sum in one pass, then one write pass.
//       12 B/element, but 2 exps per element instead of 1: with libm's exp the cost is
//       the exp, not the bytes, so v2 is SLOWER than v1 here.     322 ms
//   v3  v1 in SIMD (simd::Native) with our own exp (poly_exp, kernels/elementwise.h): the
//       exp gets ~10x cheaper and the bytes start to matter. Still 1 exp per element;
//       sums in float lanes per 1024-float chunk (<= 128 terms a lane), chunks in double.
//       20 B/element.                                                   41.8 ms
//   v4  v2 in SIMD: v3's arithmetic (poly_exp, the same chunked sums) with the online
//       rule per chunk (a max pass and an exp-sum pass over the chunk in L1, then one
//       rescale per chunk). 2 exps per element, 12 B/element instead of 20.  54.2 ms
//       v3 -> v4 is the fair unfused-vs-online comparison: equal arithmetic quality, only
//       the passes differ (v1 -> v4 would change SIMD, the exp and the passes at once).
//       On one CPU core v4 does NOT win: at 8K x 1K (rows in L1) v3 took 9.2 ms and v4
//       11.2, and at 2 x 16M, where v4 saves 8 of 20 bytes per element from memory,
//       41.8 against 54.2 ms. v4 moves its 12 B/element at only 7.4 of the core's
//       16.4 GB/s: it is bound by its exps, not by memory, so saving bytes does not pay. The online
//       rule pays where bytes cost far more than an exp: GPUs (FlashAttention).
// softmax_forward() below is v3.
//
// Logits must be finite: a masked entry should be a large negative number (-1e30), not
// -inf (a row that starts with -inf makes the running rule compute -inf - (-inf)).
// Accuracy: v1, v2 ~2e-7 relative (libm exp, double sum); v3, v4 ~1e-6 relative
// (poly_exp's ~2e-7, float lane sums over <= 128 terms).
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// probs (rows, cols), logits (rows, cols); probs may not alias logits.
using SoftmaxFn = void (*)(float* probs, const float* logits, int rows, int cols);

void softmax_forward_v1(float* probs, const float* logits, int rows, int cols);
void softmax_forward_v2(float* probs, const float* logits, int rows, int cols);
void softmax_forward_v3(float* probs, const float* logits, int rows, int cols);
void softmax_forward_v4(float* probs, const float* logits, int rows, int cols);

// The fastest validated version (v3).
void softmax_forward(float* probs, const float* logits, int rows, int cols);

// The textbook three passes in F (float or double), the sum in F too: the plain loops the
// cross-entropy's v1 starts with (kernels/crossentropy.h) and nn::softmax_forward, the
// double-precision reference of the gradient checks. (v1 above sums in double whatever F:
// the reference of this ladder's float versions.)
template <typename F>
void softmax_loops(F* probs, const F* logits, int rows, int cols);

using SoftmaxVersion = OpVersion<SoftmaxFn>;  // number, name, summary, fn (kernels/versions.h)
// Every version, in order: the bench and the tests iterate over this.
const std::vector<SoftmaxVersion>& softmax_versions();
// By number ("2") or name ("v2", "online"); throws std::invalid_argument.
const SoftmaxVersion& softmax_version(const std::string& number_or_name);

}  // namespace kernels
