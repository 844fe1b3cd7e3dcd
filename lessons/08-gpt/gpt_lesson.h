// Lesson 08: the GPT. See lessons/08-gpt/README.md.
//
//   shapes   build the model, run one forward and backward on a real batch, print every
//            parameter (name, shape, count) and every activation (name, shape, bytes) in
//            the order the data flows
//   memory   the bytes a training run holds: parameters, gradients, AdamW m and v,
//            activations (per token, and the attention maps), backward scratch; for this
//            model and for nanoGPT's GPU config, and as B and T grow
//   flops    FLOPs per token (6N + 12 L H Q T), per step, the measured FMA peak, the time a
//            step would take at 100% MFU next to a measured step
//   train    the demo: gpt::train with nanoGPT's Shakespeare-char CPU config
//   sample   text from a checkpoint at several temperatures and with top-k
// The model, the trainer and the sampler are gpt/ (gpt/model.h, gpt/train.h); this lesson
// only looks at them.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "gpt/train.h"

namespace lesson08 {

// gpt/train.h's defaults (nanoGPT's CPU run) with a sample at the end of training.
gpt::TrainOptions lesson_train_defaults();

struct Options {
  std::string part = "all";  // shapes | memory | flops | train | sample | all (= shapes, memory, flops)
  gpt::TrainOptions train = lesson_train_defaults();
  std::string checkpoint;    // part sample; empty: <out-dir>/best.safetensors
  int flops_iters = 3;       // part flops: timed training steps (median), after one warm-up
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_shapes_part(const Options& opts);
int run_memory_part(const Options& opts);
int run_flops_part(const Options& opts);
int run_train_part(const Options& opts);
int run_sample_part(const Options& opts);

// ---- the pieces the parts print (tested in tests/test_lesson08.cpp) -----------------------

// The shape of a parameter or activation in the lesson's letters, from its name:
// "h.0.attn.c_attn.weight" -> "(3C, C)", "h.2.att" -> "(B, NH, T, T)".
std::string symbolic_shape(const std::string& name);

// One line of the memory table. The rows of memory_table sum to
// gpt::memory_breakdown(c, B, T).total(); the two activation rows are computed from their
// own formulas and checked against memory_breakdown's count (nn::Error if they disagree).
struct MemoryRow {
  std::string what;
  std::string formula;  // floats, in the lesson's letters
  int64_t bytes = 0;
};
std::vector<MemoryRow> memory_table(const gpt::GPTConfig& c, int B, int T);
// Activation floats that grow with B*T (everything but the attention maps), per token.
int64_t activation_floats_per_token(const gpt::GPTConfig& c);
// The attention maps preatt and att: 2 * L * B * NH * T^2 floats.
int64_t attention_map_floats(const gpt::GPTConfig& c, int B, int T);

// The bytes of a training run at (B, T) in double (an upper bound of memory_breakdown's
// total: dropout masks and biases counted whatever the config), so that a size too large
// for 64-bit byte counts is found before anything is counted in int64.
double memory_bytes_upper_bound(const gpt::GPTConfig& c, int B, int T);
// True when every byte count of memory_breakdown(c, B, T) fits in int64 with a 2x margin
// (total < 2^62 bytes, 4 EiB). memory_table refuses (nn::Error naming the sizes) otherwise.
bool memory_countable(const gpt::GPTConfig& c, int B, int T);

// PaLM's FLOPs per token split into its two terms; dense + attention == flops_per_token.
struct FlopsPerToken {
  int64_t n_params = 0;   // N: non-embedding parameters (all but wpe)
  double dense = 0.0;     // 6 N
  double attention = 0.0; // 12 L H Q T
  double total() const { return dense + attention; }
};
FlopsPerToken flops_breakdown(const gpt::GPTConfig& c, int T);

// nanoGPT's Shakespeare-char GPU config: L 6, NH 6, C 384, T 256 (B 64), V 65.
gpt::GPTConfig nanogpt_gpu_config();
inline constexpr int kNanoGptGpuBatch = 64;

}  // namespace lesson08
