// Lesson 12: real models on our kernels. See lessons/12-real-models/README.md. Its parts:
//
//   hf      a Hugging Face model directory (gpt/hf.h) in our kernels: load it (or build a
//           random one of a named shape offline), generate from a prompt, perplexity on a text,
//           export it back (hf_part.h)
//   speed   decode tokens/s at GPT-2 124M and 355M shapes in fp32, bf16, int8 and int4 against
//           the bandwidth law, the perplexity each format costs, speculative decoding with the
//           small model drafting for the larger one (speed_part.h)
//   lora    LoRA: low-rank adapters on the attention and MLP projections, against full
//           fine-tuning at several ranks on a domain shift (lora_part.h)
//   all     every part, in that order
//
// --json PATH writes what the parts measured as one JSON object (schema "nnlab-lesson12/1"):
//   {"schema", "machine": {...}, "quick", "parts": {"<part>": {...}, ...}}; each part's
//   fields are listed in its header.
// --quick makes every part small (seconds: the ctest smoke run); NNLAB_QUICK=1 too.
#pragma once

#include <CLI/CLI.hpp>

#include "lessons/common/parts.h"

#include <cstdint>
#include <string>

#include "lessons/12-real-models/hf_part.h"
#include "lessons/12-real-models/lora_part.h"
#include "lessons/12-real-models/speed_part.h"

namespace lesson12 {

struct Options {
  std::string part = "all";  // hf | speed | lora | all
  std::string data;          // the text (default: Tiny Shakespeare, else the Debian fallback)
  bool quick = false;        // --quick, or NNLAB_QUICK=1: small sizes everywhere
  int threads = 0;           // OpenMP threads (0: the default)
  std::string json;          // write every part's numbers here (one JSON object); empty: none
  uint64_t seed = 12;        // random weights and inputs of the parts
  HfPartOptions hf;          // part hf (hf_part.h)
  SpeedOptions speed;        // part speed (speed_part.h)
  LoraOptions lora;          // part lora (lora_part.h)
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

int run_hf_part(const Options& opts);     // hf_part.cpp
int run_speed_part(const Options& opts);  // speed_part.cpp
int run_lora_part(const Options& opts);   // lora_part.cpp

// ---- shared by the parts (real_lesson.cpp) ------------------------------------------------
// Keeps a part's JSON object (its fields, "{...}") for --json (lessons/common/parts.h).
using lessons::record_part;
// A JSON number (null when not finite), as the records write them.
std::string jnum(double v);

}  // namespace lesson12
