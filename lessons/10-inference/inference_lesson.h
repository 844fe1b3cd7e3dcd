// Lesson 10: inference. See lessons/10-inference/README.md.
//
//   kv           ms/token with and without the KV cache as the context grows (O(T) vs
//                O(T^2) work per token), and a check that both give the same logits
//   law          the bandwidth law: tokens/s at batch 1 for models of several sizes and
//                weight formats against bytes of weights per token, with the line
//                measured bandwidth / bytes; then batch > 1 (weights read once per step)
//   quant        the trained model in fp32, bf16, int8 (per output channel), int4 (groups
//                of 32): bytes, tokens/s, validation loss and its change, side by side
//   speculative  drafts of several sizes and k: acceptance rate, tokens per round and
//                speedup, measured next to (1 - a^(k+1)) / (1 - a) and the draft's cost
//   prune        magnitude and 2:4 pruning at several sparsities, a short fine-tune,
//                validation loss vs sparsity; dense tokens/s on a pruned model (no faster)
//                and the 2:4 compressed format's bytes and tokens/s
//   all          every part, in that order
// Each part prints its table and, with --json-dir, writes lesson10-<part>.json there (-cuda,
// -naive appended for those backends) (what
// notebooks/10-inference.ipynb plots and scripts/bench_lesson10.sh records). The trained
// models (a target and drafts, on Tiny Shakespeare) are trained on first use into
// --out-dir and reused; --quick makes every model and measurement small (seconds: CI).
//
// JSON schema "nnlab-lesson10/1": {"schema", "part", "machine": {...}, ...part fields}:
//   kv:          "rows": [{"context", "ms_per_token_cache", "ms_per_token_nocache"}],
//                "max_logit_diff" (cache vs no cache, over every position checked)
//   law:         "bandwidth_gbs" (measured, all threads), "bandwidth_1t_gbs",
//                "rows": [{"model", "params", "format", "bytes_per_token", "tokens_per_s",
//                "law_tokens_per_s", "fraction_of_law"}],
//                "batch_rows": [{"model", "format", "batch", "tokens_per_s", "steps_per_s"}]
//   quant:       "rows": [{"format", "bytes", "bytes_per_token", "tokens_per_s", "val_loss",
//                "val_loss_change"}]
//   speculative: "target": {...}, "rows": [{"draft", "draft_params", "k", "acceptance",
//                "tokens_per_round", "expected_tokens_per_round", "cost_ratio", "speedup",
//                "expected_speedup"}], "baseline_tokens_per_s"
//   prune:       "rows": [{"kind", "sparsity", "val_loss_pruned", "val_loss_finetuned"}],
//                "speed": [{"what", "bytes_per_token", "tokens_per_s"}]
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/model.h"
#include "gpt/train.h"

namespace lesson10 {

struct Options {
  std::string part = "all";  // kv | law | quant | speculative | prune | all
  std::string backend = "cpu";  // naive | cpu | cuda; always at fp32 (the cuda backend's
                                // training forward too: the no-cache baseline and the
                                // evaluations then round like the decoder, not in bf16)
  int threads = 0;              // 0: OpenMP's default
  bool quick = false;           // --quick, or NNLAB_QUICK=1 in the environment
  std::string data;             // the corpus (default: Tiny Shakespeare, else the Debian fallback)
  std::string out_dir = "out/lesson10";  // trained models: <out-dir>/<role>/best.safetensors
  std::string checkpoint;       // the target model; empty: <out-dir>/target (trained if missing)
  std::string json_dir;         // write lesson10-<part>.json here; empty: no JSON
  int tokens = 0;               // tokens generated per measurement (0: the part's default)
  uint64_t seed = 1337;
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_kv_part(const Options& opts);           // kv_law.cpp
int run_law_part(const Options& opts);          // kv_law.cpp
int run_quant_part(const Options& opts);        // quant.cpp
int run_speculative_part(const Options& opts);  // speculative_part.cpp
int run_prune_part(const Options& opts);        // prune_part.cpp

// ---- shared by the parts (inference_lesson.cpp) ------------------------------------------
// The training options of each model the lesson uses: "target" (the model quant, prune and
// speculative study), "draft-s" and "draft-m" (speculative decoding's drafts: same corpus,
// so the same vocabulary). quick: tiny models and few steps.
gpt::TrainOptions model_options(const Options& opts, const std::string& role);
// The checkpoint of a role: opts.checkpoint for "target" when given, else
// <out-dir>/<role>/best.safetensors, trained first (printing that it does) when missing.
gpt::LoadedCheckpoint load_or_train(const Options& opts, const std::string& role);
// The token ids of the corpus the models were trained on, split as gpt::train splits it.
struct Splits {
  std::vector<int32_t> train, val;
  std::string description;
};
Splits corpus_splits(const Options& opts, const nn::CharVocab& vocab);
// JSON of the machine the figures come from (cpu, cores, threads, backend, compiler flags) and
// "device": the backend that ran them as it names itself (e.g. "cuda fp32 on NVIDIA H200": the
// GPU of a cuda record).
std::string machine_json(const Options& opts, const gpt::Backend& backend);
// Writes `json` to <json-dir>/lesson10-<part>.json (atomic) when json_dir is set; says where.
// A backend other than cpu writes lesson10-<part>-<backend>.json (the GPU's law beside the CPU's).
void write_part_json(const Options& opts, const std::string& part, const std::string& json);

// ---- what the parts conclude, computed from what they measured ------------------------
// Every sentence a part prints about its figures comes from these functions, which take the
// measured numbers and say what they show, whichever way they come out (tests feed them
// numbers both ways): a conclusion written in advance would be wrong on the next machine.

// part speculative: the tokens to generate, `requested` or (0) as many as fit; a prompt,
// the tokens and k drafted tokens must fit the models' context of `positions`. nn::Error
// saying what the context holds and needs, when nothing fits or `requested` does not.
int speculative_tokens(int positions, int prompt_len, int max_k, int requested);

// part kv: one measured context.
struct KvPoint {
  int context = 0;
  double ms_cache = 0.0, ms_nocache = 0.0;
};
// What the kv table shows: how much each column grew from the shortest to the longest context.
std::vector<std::string> kv_conclusions(const std::vector<KvPoint>& rows);

// part law: one model in one format at batch 1, and one batch size on the mid-size model.
struct LawPoint {
  std::string model, format;
  double params = 0.0, bytes_per_token = 0.0, tokens_per_s = 0.0, fraction = 0.0;  // fraction of the law
  bool in_cache = false;  // the packed weights fit in the last-level cache
};
struct BatchPoint {
  std::string format;
  int batch = 0;
  double steps_per_s = 0.0;
};
// "Where the law holds and where it breaks": models beyond and within the last-level cache
// (`llc_bytes`), the smallest model's formats, and batch > 1, each judged from the points.
std::vector<std::string> law_conclusions(const std::vector<LawPoint>& points, const std::vector<BatchPoint>& batch,
                                         double llc_bytes);

}  // namespace lesson10
