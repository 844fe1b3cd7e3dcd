// Lesson 11: from nanoGPT to a modern LLM. Its parts so far:
//
//   bpe   the byte-level BPE tokenizer (io/bpe.h): train it on the corpus, encode the whole
//         corpus, decode it back (checked equal), and print the statistics (merges, tokens,
//         bytes per token) and where the time goes (pre-tokenisation vs the merges). Also
//         the tool behind the Hugging Face comparison (tests/python/test_bpe_hf.py) and the
//         speed record (scripts/bench_bpe.py, docs/benchmarks/bpe-vs-tokenizers.md):
//         --save-tokenizer / --load-tokenizer (tokenizer.json), --write-ids, --repeats.
//   compare  char GPT-2 vs BPE GPT-2 vs BPE llama under one budget, in bits per character
//            (compare_part.h)
//   all   every part, in that order
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "lessons/11-modern/compare_part.h"

namespace lesson11 {

struct Options {
  std::string part = "all";  // bpe | compare | all
  std::string data;          // the corpus (default: Tiny Shakespeare, else the Debian fallback)
  // bpe
  int vocab_size = 1024;            // specials + 256 bytes + merges
  std::string trainer = "v2";       // v1 (the plain merge loop) | v2 (incremental pair counts)
  std::string save_tokenizer;       // write the trained tokenizer.json here
  std::string load_tokenizer;       // use this tokenizer.json instead of training
  std::string write_ids;            // write the corpus's ids here, as JSON [id, ...]
  int repeats = 3;                  // timed encodes (the median is printed)
  CompareOptions compare;           // compare (compare_part.h); uses --data, --vocab-size, --trainer
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_bpe_part(const Options& opts);  // bpe_part.cpp
int run_compare_part(const Options& opts);  // compare_part.cpp

}  // namespace lesson11
