// Lesson 11, part compare: what the modern block buys, measured. Three models trained under
// one budget on the same corpus split, compared in bits per character (compare_part.cpp):
//
//   char-gpt2   lesson 08's character GPT-2 (the trainer's defaults: 4 layers, 4 heads, 128
//               wide, context 64 characters)
//   bpe-gpt2    the same GPT-2 block on byte-level BPE tokens (io/bpe.h, trained on the
//               training split only), its context in tokens chosen to cover about as many
//               characters as the character model's
//   bpe-llama   arch = llama (RMSNorm, RoPE, SwiGLU, grouped-query attention) at the same
//               width and depth, on the same tokens and context
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace lesson11 {

struct CompareOptions {
  // The defaults are the quick run of `lesson11` (seconds per model, a 2-layer 64-wide model,
  // 8 KiB of validation text); the record (scripts/bench_lesson11.sh) sets lesson 08's model
  // (--n-layer 4 --n-embd 128), minutes per model and the whole validation split.
  // the budget: wall-clock seconds of training steps per model (evaluation not counted);
  // the number of steps comes from a timing probe, unless `iters` fixes it
  double budget_s = 2.0;
  int iters = 0;                    // > 0: this many steps per model (no probe: deterministic)
  std::vector<int> seeds = {1};     // one run per model per seed
  std::vector<std::string> models = {"char-gpt2", "bpe-gpt2", "bpe-llama"};
  // the model (lesson 08's trainer: 4 layers, 4 heads, 128 wide, context 64) and the
  // optimisation (gpt::TrainOptions' defaults)
  int n_layer = 2, n_head = 4, n_embd = 64;
  int char_context = 64;  // T of the character model, in characters
  int bpe_context = 0;    // T of the BPE models, in tokens; 0: char_context / (bytes per token)
  int n_kv_head = 0;      // llama's key/value heads; 0: n_head / 2
  int batch_size = 12;
  // evaluation: bits per character of a prefix of the validation split, the same bytes for
  // every tokenizer
  int64_t val_bytes = 8192;  // the final figure scores this prefix (0: the whole split)
  int curve_points = 4;      // validation points on each curve after step 0
  int64_t curve_bytes = 4096;  // the curve's points score this prefix (0: as val_bytes)
  // the records
  std::string backend = "cpu";
  int threads = 0;           // 0: OpenMP's default
  std::string json;          // write the runs here (docs/benchmarks/lesson11-compare.json)
  std::string md;            // write the markdown record here (lesson11-compare.md)
};

void add_compare_options(CLI::App& app, CompareOptions& o);

}  // namespace lesson11
