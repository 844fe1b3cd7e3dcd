// Lesson 11: from nanoGPT to a modern LLM. See lessons/11-modern/README.md. Its parts:
//
//   bpe     the byte-level BPE tokenizer (io/bpe.h): train it on the corpus, encode the whole
//           corpus, decode it back (checked equal), and print the statistics (merges, tokens,
//           bytes per token) and where the time goes (pre-tokenisation vs the merges). Also
//           the tool behind the Hugging Face comparison (tests/python/test_bpe_hf.py) and the
//           speed record (scripts/bench_bpe.py, docs/benchmarks/bpe-vs-tokenizers.md):
//           --save-tokenizer / --load-tokenizer (tokenizer.json), --write-ids, --repeats.
//           --bpe-sweep 300,512,1024: bytes per token with the first k merges (the figure).
//   norm    LayerNorm vs RMSNorm on the same rows (kernels/layernorm.h, rmsnorm.h): what each
//           output looks like, rmsnorm v1 vs v2, a finite-difference check of the backward in
//           double, v1 vs v2 timed through the harness (kernels/harness.h)
//   rope    RoPE (kernels/rope.h) on a q and a k: q_p . k_p' for pairs (p, p') of equal
//           p - p' (equal dot products: attention sees relative positions), v1 vs v2, the
//           backward's gradient check
//   swiglu  GELU MLP vs SwiGLU MLP parameter counts at C and H = 8C/3 rounded up to 32
//           (gpt::default_ffn_hidden), v1 vs v2, the backward's gradient check
//   flash   full attention's (B,NH,T,T) maps vs flash attention's lse (bytes against T), and
//           flash v3 vs attention v4 (backward v5) forward + backward time at a few T
//           (alternating rounds)
//   gqa     grouped-query attention: KV-cache bytes per token for each NKV, decode attention's
//           time against the context, the bandwidth law (gqa_part.cpp)
//   compare char GPT-2 vs BPE GPT-2 vs BPE llama under one budget, in bits per character
//           (compare_part.h)
//   all     every part, in that order
//
// --json PATH writes what the parts measured as one JSON object (schema "nnlab-lesson11/1"):
//   {"schema", "machine": {...}, "quick", "parts": {"<part>": {...}, ...}} with
//   bpe:    "corpus_bytes", "vocab_size", "merges", "tokens", "bytes_per_token",
//           "encode_seconds", "regex_seconds", "sweep": [{"merges", "vocab_size", "tokens",
//           "bytes_per_token"}] (empty without --bpe-sweep)
//   norm:   "rows", "C", "layernorm_out_mean", "layernorm_out_rms", "rmsnorm_out_mean",
//           "rmsnorm_out_rms", "v1_v2_max_diff", "backward_v1_v2_max_diff",
//           "gradcheck_max_rel_err", "timings": [{"op", "variant", "ms"}]
//   rope:   "hs", "theta", "pairs": [{"p", "p2", "diff", "dot"}], "max_spread_equal_diff",
//           "v1_v2_max_diff", "gradcheck_max_rel_err"
//   swiglu: "C", "H", "gelu_mlp_params", "swiglu_mlp_params", "v1_v2_max_diff",
//           "gradcheck_max_rel_err"
//   flash:  "B", "NH", "hs", "rows": [{"T", "full_bytes", "flash_bytes", "full_ms",
//           "flash_ms", "max_rel_diff_out", "max_rel_diff_dqkv"}]
// --quick makes every part small (seconds: the ctest smoke run); NNLAB_QUICK=1 too.
#pragma once

#include <CLI/CLI.hpp>

#include "lessons/common/parts.h"

#include <string>
#include <vector>

#include "lessons/11-modern/gqa_part.h"

#include "lessons/11-modern/compare_part.h"

namespace lesson11 {

struct Options {
  std::string part = "all";  // bpe | norm | rope | swiglu | flash | gqa | compare | all
  std::string data;          // the corpus (default: Tiny Shakespeare, else the Debian fallback)
  bool quick = false;        // --quick, or NNLAB_QUICK=1: small sizes everywhere
  int threads = 0;           // OpenMP threads (0: the default)
  std::string json;          // write every part's numbers here (one JSON object); empty: none
  uint64_t seed = 11;        // the random rows, vectors and matrices of the parts
  // bpe
  int vocab_size = 1024;            // specials + 256 bytes + merges
  std::string trainer = "v2";       // v1 (the plain merge loop) | v2 (incremental pair counts)
  std::string save_tokenizer;       // write the trained tokenizer.json here
  std::string load_tokenizer;       // use this tokenizer.json instead of training
  std::string write_ids;            // write the corpus's ids here, as JSON [id, ...]
  int repeats = 3;                  // timed encodes (the median is printed)
  std::vector<int> bpe_sweep;       // merge counts whose bytes per token to measure (empty: none)
  // norm, swiglu
  int channels = 0;                 // C (0: 768, --quick 64)
  // flash
  std::vector<int> flash_T;         // sequence lengths (empty: 256, 512, 1024; --quick 32, 64)
  int flash_rounds = 3;             // alternating timing rounds (medians)
  GqaOptions gqa;                   // part gqa (gqa_part.h)
  CompareOptions compare;           // compare (compare_part.h); uses --data, --vocab-size, --trainer
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_bpe_part(const Options& opts);     // bpe_part.cpp
int run_norm_part(const Options& opts);    // norm_part.cpp
int run_rope_part(const Options& opts);    // rope_part.cpp
int run_swiglu_part(const Options& opts);  // swiglu_part.cpp
int run_flash_part(const Options& opts);   // flash_part.cpp
int run_compare_part(const Options& opts); // compare_part.cpp

// ---- shared by the parts (modern_lesson.cpp) ----------------------------------------------
// Keeps a part's JSON object (its fields, "{...}") for --json (lessons/common/parts.h).
using lessons::record_part;
// A JSON number (null when not finite), as the records write them.
std::string jnum(double v);
// C for the parts that take one: --channels, else 768 (64 with --quick).
int channels_of(const Options& opts);

}  // namespace lesson11
