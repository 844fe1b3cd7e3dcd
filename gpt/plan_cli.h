// gpt/plan_cli.h: `nnlab plan`, the memory and network arithmetic of gpt/plan.h as a table
// (lesson 14): what a model costs to train and to serve, on how many GPUs, and how long its
// gradients take to cross a link.
//
//   nnlab plan --params 7e9 --gpu-mem 80 [--precision fp32|mixed] [--zero 0..3]
//              [--layers 32 --embd 4096 --heads 32 --seq 2048 --batch 8]   (activations need a shape)
//              [--nodes 8 --link nvlink|ib200|ib400|eth100|eth10 --step-ms 900]
//   nnlab plan --config gpt/configs/shakespeare_char_gpu.toml   our trainer's config file, or
//   nnlab plan --config gpt/configs/gpt2_124m.json              a Hugging Face config.json
//              (a --config plan is printed beside memory_breakdown's exact count, gpt/model.h)
//
// The numbers are per GPU (a rank); --batch is each rank's micro-batch. Bad values (zero,
// negative, NaN, an unknown link) are refused by the flags' checks; contradictory ones by
// print_plan with an nn::Error.
#pragma once

#include <CLI/CLI.hpp>

#include <iosfwd>
#include <string>

namespace gpt {

struct PlanCliOptions {
  double params = 0;         // 0: counted from the shape or --config
  double gpu_mem_gb = 80;    // one GPU's memory, GB (1e9 bytes)
  double usable = 0;         // 0: plan::kUsableFraction
  std::string precision = "auto";  // auto: fp32 with --config (our trainer), else mixed
  int zero = 0;              // ZeRO stage the per-rank column shows
  // the shape (gpt/model.h GPTConfig); 0: not given
  std::string arch = "gpt2";
  int layers = 0, embd = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  int seq = 0, batch = 0;    // 0: the config's block and batch size, else 2048 and 8
  std::string attention = "auto";  // auto | full | maps | flash
  bool recompute = false;    // count activations with recomputation for the GPU counts
  // serving
  int serve_batch = 1;
  int serve_seq = 0;         // 0: the training context
  // the network
  int nodes = 1;             // ranks (one GPU each) the step's gradients are all-reduced over
  std::string link = "ib400";
  double step_ms = 0;        // one rank's compute per step, alone; 0: no step prediction
  bool overlap = false;      // communication overlaps the backward (ours does not)
  std::string config;        // a train config (key = value) or a Hugging Face config.json
};

// The flags, each checked (finite, positive, a known link); the front door's `plan` command.
void add_plan_options(CLI::App& app, PlanCliOptions& o);
// Writes the plan to `os`. nn::Error for what the flags alone cannot refuse: no model given,
// a shape and --config together, an incomplete shape, a shape GPTConfig refuses.
void print_plan(std::ostream& os, const PlanCliOptions& o);
// print_plan to stdout; 0.
int run_plan(const PlanCliOptions& o);

}  // namespace gpt
