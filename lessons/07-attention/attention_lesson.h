// Lesson 07: attention. See lessons/07-attention/README.md.
//
//   loops      single-head causal self-attention on five hand-made tokens, every step
//              printed (q, k, v, scores, mask, softmax rows, output), computed by the plain
//              loops below and cross-checked against nn::attention_forward with NH = 1
//   scale      the variance of q.k with and without 1/sqrt(hs) for several head sizes, and
//              how peaked the softmax gets (largest probability, entropy): a table
//   softmax    the naive softmax against the max-subtracted one on large logits, in float
//   multihead  the same tokens through NH = 1, 2 and 4 heads: each head's attention rows
//   gradcheck  nn::attention_backward against central finite differences in double, per
//              part (q, k, v), and the softmax Jacobian's O(T) form against the full matrix
// Without --part all five run, in that order, in well under a second.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace lesson07 {

struct Options {
  std::string part = "all";  // loops | scale | softmax | multihead | gradcheck | all
  uint64_t seed = 42;        // the random vectors of parts scale and gradcheck
  int queries = 4000;        // part scale: random queries per head size (each against --keys keys)
  int keys = 16;             // part scale: keys each query is scored against
  bool quick = false;        // fewer queries: what the tests and the notebook run
  std::string out_dir = "out/lesson07";
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_loops_part(const Options& opts);
int run_scale_part(const Options& opts);
int run_softmax_part(const Options& opts);
int run_multihead_part(const Options& opts);
int run_gradcheck_part(const Options& opts);

// ---- the lesson's own functions (the tests call them too) -------------------------------

// The hand-made example of parts loops and multihead: 5 tokens of C = 4 channels, the
// sequence "A B A C B", and projections Wq = Wk = 2 I, Wv = I (see the README for why).
struct Example {
  int T = 0, C = 0;
  std::vector<std::string> tokens;  // (T) names
  std::vector<double> x;            // (T, C) the token vectors
  std::vector<double> Wq, Wk, Wv;   // (C, C) each: q = x Wq^T, k = x Wk^T, v = x Wv^T
};
Example hand_made_example();

// y = x W^T: x (T, C), W (C, C) -> y (T, C). A linear layer without bias.
std::vector<double> project(const std::vector<double>& x, const std::vector<double>& W, int T, int C);

// Causal self-attention over one sequence in plain loops, every intermediate kept.
// q, k, v (T, C), each C = NH heads of hs = C / NH channels, side by side.
struct AttentionTrace {
  int T = 0, C = 0, NH = 0, hs = 0;
  std::vector<double> scores;  // (NH, T, T) q_t . k_t2 for every t2, the future included
  std::vector<double> masked;  // (NH, T, T) scores / sqrt(hs) for t2 <= t, -inf for t2 > t
  std::vector<double> att;     // (NH, T, T) softmax of each row of masked (0 where masked)
  std::vector<double> out;     // (T, C)     out_t = sum_t2 att[t][t2] v_t2, heads concatenated
};
AttentionTrace attention_loops(const std::vector<double>& q, const std::vector<double>& k,
                               const std::vector<double>& v, int T, int C, int NH);

// q, k, v (T, C) -> qkv (1, T, 3C), the layout nn::attention_forward reads.
std::vector<double> pack_qkv(const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, int T, int C);

// Part scale, one head size: q and k with N(0, 1) entries; `queries` queries, each scored
// against `keys` keys. Variance of q.k without and with 1/sqrt(hs); the softmax over the
// keys' scores: mean largest probability, mean entropy (nats; log(keys) is uniform) and
// mean trace of the softmax's Jacobian, sum_i p_i (1 - p_i) (0 for a one-hot).
struct ScaleRow {
  int hs = 0;
  double var_raw = 0, var_scaled = 0;
  double maxp_raw = 0, maxp_scaled = 0;
  double entropy_raw = 0, entropy_scaled = 0;
  double jac_raw = 0, jac_scaled = 0;
};
ScaleRow measure_scale(int hs, int queries, int keys, uint64_t seed);
std::vector<int> scale_head_sizes();  // the head sizes part scale measures

// Part softmax: probs (n) from logits (n), in float. naive: exp(x_i) / sum_j exp(x_j);
// stable: the same with the row's max subtracted first.
void softmax_naive(float* probs, const float* logits, int n);
void softmax_stable(float* probs, const float* logits, int n);

}  // namespace lesson07
