// gpt/cli.h: `nnlab gpt <train|sample|bench|diff>`, the command line of the GPT trainer.
//
//   nnlab gpt train  [--n-layer 4 ... --config run.toml]   train, evaluate, checkpoint, sample
//   nnlab gpt sample --checkpoint out/gpt/best.safetensors --prompt "ROMEO:" [--top-k 20]
//   nnlab gpt eval   --checkpoint C [--eval-iters 200]        train and val loss of a checkpoint
//   nnlab gpt bench  [--iters 30] [--backends cpu,cuda:bf16] [--profile]
//                                                            ms/step, tokens/s, MFU: ours vs PyTorch
//   nnlab gpt dump   --checkpoint C --text "..." --out F     activations (attention maps) on a text
//   nnlab gpt diff   a.safetensors b.safetensors             per-tensor max relative error
// Every hyper-parameter is a flag, and any flag can come from a config file instead
// (--config FILE: `lr = 0.001` lines, see apply_config_file; flags on the command line win).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "gpt/train.h"

namespace gpt {

struct BenchOptions {
  int iters = 30, warmup = 5;
  // ours: "naive", "cpu", "cuda" (at --precision) or "cuda:fp32" / "cuda:tf32" / "cuda:bf16"
  std::vector<std::string> backends = {"cpu"};
  bool naive = false;      // also time the naive backend (slow)
  bool profile = false;    // also a per-op time table of each backend (gpt/profile.h)
  bool torch = true;       // run the PyTorch reference in the same run
  std::string torch_settings = "all";   // CPU: the thread settings to try
  std::string torch_modes = "eager,compile";  // GPU: eager and/or torch.compile
  std::string json;        // write the results here
  std::string markdown;    // and a table here
};

struct CliOptions {
  TrainOptions train;
  // sample
  std::string checkpoint;
  SampleOptions sample;
  std::string backend = "cpu";
  // bench
  BenchOptions bench;
  // dump
  std::string dump_text;
  std::string dump_out;
  // diff
  std::vector<std::string> diff_files;
  double diff_tolerance = 0.0;  // > 0: exit 1 when a shared tensor's max relative error exceeds it
};

// Adds the model/optimisation/data flags of TrainOptions to `app` (lesson 08 reuses them),
// and --config FILE.
void add_train_flags(CLI::App& app, TrainOptions& o);
// Reads the config file of --config (if given) into the flags of `app` that were not given
// on the command line (the command line wins). Call after parsing. The format is one
// `key = value` per line, keys the long flag names with or without the dashes
// (`max-iters = 500` or `max_iters = 500`), `#` comments, blank lines, `[sections]` and
// quotes around values ignored: TOML and INI files of flat keys read the same.
// nn::Error naming the file and line for an unknown key or a bad value.
void apply_config_file(CLI::App& app, const std::string& path);
// Adds `gpt` and its subcommands to `app`; returns the `gpt` subcommand.
CLI::App* add_gpt_command(CLI::App& app, CliOptions& opts);
// Runs whichever subcommand of `gpt` was given; exit status.
int run_gpt_command(CLI::App& gpt_cmd, const CliOptions& opts);

// Timing of one training step (forward, backward, clip, AdamW) at the options' sizes on
// random tokens: median ms over `iters` after `warmup`, on a new backend (with the options'
// precision) or on `be`.
double time_train_step(const TrainOptions& o, const std::string& backend, int iters, int warmup);
double time_train_step(const TrainOptions& o, Backend& be, int iters, int warmup);

}  // namespace gpt
