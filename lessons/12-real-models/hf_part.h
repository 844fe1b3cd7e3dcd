// Lesson 12, part hf: a Hugging Face model directory in our kernels (gpt/hf.h).
//
//   lesson12 --part hf --model DIR          a model as the hub serves it (scripts/fetch_model.py
//                                            fetches gpt2, gpt2-medium, SmolLM-135M)
//   lesson12 --part hf [--hf-shapes a,b]    offline: random models of the named shapes, written
//                                            as Hugging Face directories first (save_hf_model)
//
// For each model it prints how config.json maps onto our GPTConfig, the parameter count, the
// load time (and the size of the files it read), a greedy continuation of --hf-prompt (text
// through tokenizer.json when the directory has one; random models: token ids), decode tokens/s
// with the KV cache in fp32, and the perplexity and bits per byte on --data (Tiny Shakespeare,
// else the Debian fallback; io/text.h find_corpus), over --hf-eval-tokens tokens. A random
// model has no tokenizer: its text is scored as bytes (ids 0..255), and its perplexity is about
// its vocabulary size: the numbers check the plumbing, not a language model.
//
// Shapes (--hf-shapes): gpt2 (124M), gpt2-medium (355M), smollm-135m (Llama: 30 layers, 576
// wide, 9 heads, 3 kv heads), and tiny-gpt2 / tiny-llama (a few thousand parameters: --quick).
//
// --json: the part's object is
//   {"source": "dir" | "random",
//    "models": [{"name", "architecture", "arch", "dtype", "n_layer", "n_embd", "n_head", "n_kv_head",
//                "ffn_hidden", "vocab_size", "block_size", "params", "file_bytes", "save_seconds"
//                (random only, else null), "load_seconds", "roundtrip_exact" (random only: the loaded
//                parameters equal the written ones; null for a directory), "has_tokenizer",
//                "prompt_tokens", "generated", "decode_tokens_per_second", "eval_tokens",
//                "perplexity", "bits_per_byte", "eval_seconds"}, ...]}
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace lesson12 {

struct HfPartOptions {
  std::string model;                 // a Hugging Face model directory; empty: random models
  std::string shapes = "gpt2,smollm-135m";  // the random models' shapes (quick: tiny-gpt2,tiny-llama)
  std::string prompt = "First Citizen:";
  int tokens = 20;                   // generated greedily (quick: 8)
  int eval_tokens = 2048;            // tokens of --data scored for perplexity (quick: 200)
};
void add_hf_options(CLI::App& app, HfPartOptions& o);

}  // namespace lesson12
