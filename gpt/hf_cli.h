// gpt/hf_cli.h: the commands that run any loaded model (lesson 12):
//
//   nnlab generate   --model DIR|CKPT --prompt "..." [--tokens N --temperature T --top-k K
//                    --top-p P --seed S --format f32|bf16|int8|int4 --no-cache --threads N]
//                    text (or --ids: token ids) from a Hugging Face directory (gpt/hf.h) or
//                    an nnlab checkpoint (a character model: its vocabulary). --prompt-ids
//                    "1 2 3" gives ids instead of text; the hidden --dump-logits FILE writes
//                    the prompt's logits (n, V) as safetensors "logits" (the parity tests).
//   nnlab perplexity --model DIR|CKPT --text FILE [--format F --context N --stride S --limit N]
//                    mean cross-entropy per token over the text in windows of `context` tokens
//                    moved by `stride` (each token scored once, with up to context-1 tokens
//                    before it: Hugging Face's perplexity recipe), exp of it, and bits per byte
//                    (the same loss over the text's bytes, comparable across tokenizers).
//   nnlab export-hf  --checkpoint CKPT --out DIR [--tokenizer tokenizer.json]
//                    an nnlab checkpoint (either arch) as a Hugging Face directory.
// Each prints a last line with the time and tokens per second (on stderr for generate, so
// its stdout is only the text or the ids).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpt/infer.h"

namespace gpt {

// Perplexity of `ids` (>= 2 tokens) under the decoder's model: windows of `context` tokens
// (<= block_size) moved by `stride` (<= context); each token after the first scored once,
// predicted from the tokens before it in its window. bytes_of(id): the bytes a token
// stands for (bits per byte); nullptr counts one byte a token.
struct PerplexityResult {
  double mean_nll = 0.0;       // nats per token
  double perplexity = 0.0;     // exp(mean_nll)
  double bits_per_byte = 0.0;  // the same loss per byte of text, in bits
  int64_t scored = 0, bytes = 0;
  double seconds = 0.0;
};
PerplexityResult window_perplexity(Decoder& dec, const std::vector<int32_t>& ids, int context, int stride,
                                   const std::function<size_t(int32_t)>& bytes_of = nullptr);

struct GenerateCliOptions {
  std::string model;         // a Hugging Face directory or an nnlab checkpoint file
  std::string prompt;        // text, through the model's tokenizer (or character vocabulary)
  std::string prompt_ids;    // "1 2 3" (or comma-separated): ids instead of text
  int tokens = 50;
  float temperature = 1.0f;  // the model's generation_config.json value unless given; 0: greedy
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 1337;
  std::string format = "f32";  // f32 | bf16 | int8 | int4 (lesson 10's packed weights)
  bool no_cache = false;       // a full forward per token instead of the KV cache
  bool ids = false;            // print the generated ids, not text
  bool no_eos = false;         // do not stop at the model's eos id
  std::string dump_logits;     // hidden: write the prompt's logits here
  std::string backend = "cpu";
  int threads = 0;
  // the flags (add_generate_options sets them): which of temperature / top_k / top_p were
  // given on the command line (else the model's generation_config.json defaults)
  const CLI::Option* temperature_opt = nullptr;
  const CLI::Option* top_k_opt = nullptr;
  const CLI::Option* top_p_opt = nullptr;
};
struct PerplexityCliOptions {
  std::string model;
  std::string text;
  std::string format = "f32";
  int context = 0;   // 0: the model's block_size
  int stride = 0;    // 0: context (windows side by side)
  int limit = 0;     // > 0: only the first `limit` tokens of the text
  std::string backend = "cpu";
  int threads = 0;
};
struct ExportHfCliOptions {
  std::string checkpoint;
  std::string out;
  std::string tokenizer;  // optional tokenizer.json to copy in (its vocabulary must match)
};

void add_generate_options(CLI::App& app, GenerateCliOptions& o);
int run_generate(const GenerateCliOptions& o);
void add_perplexity_options(CLI::App& app, PerplexityCliOptions& o);
int run_perplexity(const PerplexityCliOptions& o);
void add_export_hf_options(CLI::App& app, ExportHfCliOptions& o);
int run_export_hf(const ExportHfCliOptions& o);

}  // namespace gpt
