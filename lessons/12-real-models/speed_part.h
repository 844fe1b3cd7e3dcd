// Lesson 12, part speed: lesson 10's measurements at the shapes of real models.
//
// For each model (by default random-initialised models of the shapes of GPT-2 124M, GPT-2
// medium 355M and SmolLM-135M: the speed of a decode step does not depend on the values) and
// each weight format fp32, bf16, int8, int4 (gpt::pack_model):
//   - decode tokens/s at batch 1 after a prompt (gpt::generate, greedy, the KV cache), the
//     median over rounds;
//   - the bandwidth law's prediction: measured STREAM triad bandwidth / weight bytes per token
//     (gpt::InferenceModel::weight_bytes_per_token), and the fraction of it reached;
//   - the perplexity of the packed model on the evaluation text (the Decoder's own logits, so
//     exactly what runs), and how much the format changes it from fp32. The text's tokens are
//     a BPE (io/bpe.h) trained on the corpus's training split (ids < V); with random weights
//     the perplexity is about V (the model knows nothing) and only its change per format means
//     anything: the program says so.
// Then speculative decoding (gpt/speculative.h, greedy): the 124M shape drafting for the 355M
// shape, and the 355M's own int4 copy drafting for it, against plain decoding of the 355M.
// Greedy, so the output must be the target's own greedy tokens: checked. (Random models of GPT-2's init with a tied head
// mostly repeat the current token, so they agree more than one would guess: the part measures
// and prints how often the target's greedy token repeats the one before, repeat_fraction.)
//
// With real weights (a Hugging Face directory loaded by gpt/hf.h) the same measurements run
// through measure_model(model, tokenizer-encoded text) below: nothing here knows the weights
// are random except the `random_weights` flag that the printout and the record carry.
//
// JSON (record_part "speed"):
//   {"bandwidth_gbs", "threads", "prompt", "tokens", "rounds", "eval": {"text", "tokenizer",
//    "tokens", "window"},
//    "models": [{"name", "arch", "params", "random_weights", "config": {"V", "maxT", "L",
//      "NH", "NKV", "C", "H"},
//      "rows": [{"format", "bytes_per_token", "tokens_per_s", "round_tokens_per_s": [...],
//                "prefill_ms", "law_tokens_per_s", "fraction_of_law", "perplexity",
//                "perplexity_change"}]}],
//    "speculative": [{"target", "draft", "k", "tokens", "acceptance", "tokens_per_round",
//      "expected_tokens_per_round", "tokens_per_s", "baseline_tokens_per_s", "speedup",
//      "cost_ratio", "expected_speedup", "random_weights", "self_copy", "repeat_fraction"}]}
//   tokens_per_s: median of the rounds; perplexity_change: this format's perplexity / fp32's - 1.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "io/bpe.h"

namespace lesson12 {

struct SpeedOptions {
  std::string shapes;          // comma-separated named shapes (empty: the default list, or the quick one)
  std::string formats = "fp32,bf16,int8,int4";
  int prompt = 64;             // prompt tokens before the timed decode
  int tokens = 32;             // tokens decoded per round
  int rounds = 5;              // rounds per format (the median is reported)
  int eval_tokens = 2048;      // tokens of the evaluation text scored (0: no perplexity)
  int window = 256;            // scored in windows of this many tokens (one prefill each)
  int bpe_vocab = 1024;        // the BPE trained on the corpus for the random-weight models
  std::string spec_target = "gpt2-355m", spec_draft = "gpt2-124m";  // empty: no speculative
  int spec_k = 4;
  int spec_tokens = 48;
  // Real weights: comma-separated Hugging Face model directories (scripts/fetch_model.py),
  // measured instead of the random shapes; with two or more, speculative decoding drafts
  // with the first for the last (GPT-2 124M for GPT-2 medium). 
  std::string models;
};
void add_speed_options(CLI::App& app, SpeedOptions& opts);

// The named shapes: gpt2-124m (V 50257, maxT 1024, L 12, NH 12, C 768), gpt2-355m (L 24,
// NH 16, C 1024), smollm-135m (llama: V 49152, maxT 2048, L 30, C 576, NH 9, NKV 3, H 1536,
// tied, theta 10000, eps 1e-5), and tiny-gpt2, tiny-gpt2-wide, tiny-llama (V 512: --quick).
// nn::Error naming the choices for another name.
gpt::GPTConfig named_shape(const std::string& name);
std::vector<std::string> shape_names();
// A model of that config with GPT-2's random initialisation (gpt_init_weights), holding its
// parameters only (the gradients and AdamW moments gpt_create makes are released: 355M
// parameters would need 5.7 GB with them, 1.4 GB without).
gpt::GPT random_model(const gpt::GPTConfig& c, uint64_t seed);

// A model loaded from a Hugging Face directory (--speed-models; gpt/hf.h load_hf_model).
struct RealModel {
  gpt::GPT model;
  std::optional<nn::BpeTokenizer> tokenizer;  // encodes the evaluation text (else the corpus BPE)
  std::string name;
};

// One format of one model.
struct FormatRow {
  std::string format;
  int64_t bytes_per_token = 0;
  double tokens_per_s = 0.0;             // median of the rounds
  std::vector<double> round_tokens_per_s;
  double prefill_ms = 0.0;               // the prompt's prefill, median
  double law_tokens_per_s = 0.0;         // bandwidth / bytes_per_token
  double perplexity = 0.0;               // 0 when not measured
  double perplexity_change = 0.0;        // perplexity / fp32's - 1
};
struct ModelResult {
  std::string name;
  gpt::GPTConfig config;
  int64_t params = 0;
  bool random_weights = true;
  std::vector<FormatRow> rows;
};
// Decode and perplexity of `model` in each of o.formats on backend `be`: the prompt is the
// first o.prompt ids of `eval_ids` (random ids < V when it is shorter), the perplexity is
// scored on up to o.eval_tokens of `eval_ids` (none when empty). `bandwidth` in bytes/s.
ModelResult measure_model(const gpt::GPT& model, const std::string& name, bool random_weights,
                          const std::vector<int32_t>& eval_ids, const SpeedOptions& o, double bandwidth,
                          gpt::Backend& be, uint64_t seed);
// exp(mean cross-entropy) of next-token prediction over `ids` in windows of `window` tokens
// (each window prefilled from an empty cache; the first token of a window is context only).
// nn::Error when an id is >= V or fewer than 2 ids are given.
double packed_perplexity(const gpt::InferenceModel& im, gpt::Backend& be, const std::vector<int32_t>& ids,
                         int window);

}  // namespace lesson12
