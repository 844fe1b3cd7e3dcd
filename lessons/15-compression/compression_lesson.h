// Lesson 15: compression that changes the arithmetic. See lessons/15-compression/README.md.
// Its parts:
//
//   int8     the machine's int8 and fp32 peaks (ceilings.h), the int8 GEMM ladder
//            (kernels/int8_gemm.h) against the fp32 sgemm at the same sizes, every rung
//            validated bit for bit against the plain loops before it is timed; then the
//            decode-shaped products (matvec) in fp32, int8 weights, W8A8 and ternary, on the
//            bandwidth law of lesson 10
//   w8a8     lesson 10's trained model with activations in int8 too: the outliers of its
//            Linear layers' inputs, validation loss of W8A8 with and without SmoothQuant
//            (several alphas) next to fp32 and weight-only int8, and decoding tokens/s
//   gptq     round-to-nearest against GPTQ at int4 and int3: loss change and seconds to
//            quantise
//   bitnet   BitNet b1.58: the same model trained from scratch with ternary weights
//            (straight-through estimator) against fp32 at the same parameter count and at
//            the same bytes: loss curves, and what decoding reads
//   kv       an int8 KV cache (per head, per position scales): bytes per token, and the loss
//            it costs as the context grows
//   energy   which energy counters this machine exposes; joules per token measured where one
//            is readable, else estimated from a stated model (always marked); the energy
//            roofline of fp32, bf16, int8, int4, ternary and 2:4
//   all      every part, in that order
//
// The trained model is lesson 10's target (out/lesson10/target, trained on first use);
// --json PATH writes what the parts measured (schema "nnlab-lesson15/1"), --quick makes every
// model and measurement small (seconds: CI).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/infer.h"
#include "gpt/train.h"
#include "kernels/weight_format.h"
#include "lessons/common/parts.h"

namespace lesson15 {

struct Options {
  std::string part = "all";
  bool quick = false;
  int threads = 0;        // OpenMP threads (0: the default)
  std::string json;       // write every part's numbers here; empty: none
  std::string data;       // the corpus (default: Tiny Shakespeare, else the Debian fallback)
  std::string out_dir = "out/lesson10";  // lesson 10's trained target is reused (and trained there if missing)
  std::string checkpoint;  // study this model instead (lesson 08's out/gpt/best.safetensors, lesson 11's llama)
  std::string bitnet_dir = "out/lesson15";  // the BitNet part's runs
  int bitnet_steps = 1000;  // bitnet: training steps of each run
  uint64_t seed = 1337;
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_int8_part(const Options& opts);    // int8_part.cpp
int run_w8a8_part(const Options& opts);    // model_parts.cpp
int run_gptq_part(const Options& opts);    // model_parts.cpp
int run_bitnet_part(const Options& opts);  // bitnet_part.cpp
int run_kv_part(const Options& opts);      // model_parts.cpp
int run_energy_part(const Options& opts);  // energy_part.cpp

// ---- shared by the parts (compression_lesson.cpp) --------------------------------------
std::string jnum(double v);
// Lesson 10's trained target model (trained into <out-dir>/target first when missing) and the
// validation split of its corpus.
struct Target {
  gpt::LoadedCheckpoint ck;
  std::vector<int32_t> train, val;
  std::string corpus;
  std::string name;  // what the parts call it: "lesson 10's model", or the --checkpoint's path and arch
};
Target load_target(const Options& opts);
// Decoding tokens/s at batch 1 of a packed model (gpt::Decoder on `be`, whose memory holds
// `im`): one warm-up, then the best of 3 greedy generations of `tokens` tokens after a
// one-token prompt.
double decode_tokens_per_s(const gpt::InferenceModel& im, gpt::Backend& be, int tokens, uint64_t seed);

}  // namespace lesson15
