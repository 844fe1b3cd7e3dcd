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
// The step timing and the PyTorch comparison of `gpt bench` are gpt/bench.h.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "gpt/bench.h"
#include "gpt/lora.h"
#include "gpt/train.h"

namespace gpt {

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
  // finetune (LoRA or full, gpt/lora.h) and merge (an adapter into a checkpoint)
  FinetuneOptions finetune;
  std::string merge_adapter, merge_out;
};

// Adds the model/optimisation/data flags of TrainOptions to `app` (lesson 08 reuses them),
// and --config FILE.
void add_train_flags(CLI::App& app, TrainOptions& o);
// Reads the config file of --config (if given) into the flags of `app` that were not given
// on the command line (the command line wins): CLI11 applies it (App::parse_from_stream),
// with each flag's own checks, and ends in the app's callbacks (a call from one of them is a
// no-op). Call after parsing. The format is one `key = value` per line,
// keys the long flag names with or without the dashes (`max-iters = 500` or
// `max_iters = 500`), each at most once; `#` comments outside quotes, blank lines and
// `[sections]` ignored; a value in "..." (escapes \\ \" \n \t \r) or '...' (as it is):
// TOML and INI files of flat keys read the same. nn::Error naming the file and line for an
// unknown key, a key set twice, --help or --config in the file, or a bad value.
void apply_config_file(CLI::App& app, const std::string& path);
// Adds the subcommands of `nnlab gpt` (train, sample, eval, bench, dump, diff) to `cmd`, the
// front door's `gpt` command (app/nnlab.cpp).
void add_gpt_subcommands(CLI::App& cmd, CliOptions& opts);
// Runs whichever subcommand of `gpt` was given; exit status.
int run_gpt_command(CLI::App& gpt_cmd, const CliOptions& opts);

}  // namespace gpt
