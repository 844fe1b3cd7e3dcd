// gpt/cli.cpp: the `nnlab gpt` command line (gpt/cli.h).
#include "gpt/cli.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "gpt/backend_cuda.h"
#include "gpt/profile.h"
#include "kernels/cuda/bench/run.h"
#include "kernels/harness.h"
#include "nn/check.h"
#include "nn/cli_checks.h"
#include "nn/progress.h"
#include "nn/rng.h"

#ifndef NNLAB_TORCH_PYTHON
#define NNLAB_TORCH_PYTHON ""
#endif
#ifndef NNLAB_TORCH_SCRIPT
#define NNLAB_TORCH_SCRIPT ""
#endif

namespace gpt {

namespace fs = std::filesystem;

void add_train_flags(CLI::App& app, TrainOptions& o) {
  const std::string m = "Model", d = "Data", t = "Training", e = "Evaluation, checkpoints, logs", s = "Sampling";
  app.add_option("--n-layer", o.n_layer, "Transformer blocks L")->check(CLI::Range(1, 1024))->capture_default_str()->group(m);
  app.add_option("--n-head", o.n_head, "Attention heads per block (must divide --n-embd)")->check(CLI::Range(1, 1024))->capture_default_str()->group(m);
  app.add_option("--n-embd", o.n_embd, "Channels C")->check(CLI::Range(1, 65536))->capture_default_str()->group(m);
  app.add_option("--block-size", o.block_size, "Context length T (characters the model sees)")->check(CLI::Range(1, 65536))->capture_default_str()->group(m);
  app.add_option("--dropout", o.dropout, "Dropout probability in training")->check(nn::FiniteRange(0.0, 0.99))->capture_default_str()->group(m);
  app.add_option("--bias", o.bias, "Biases in the Linear and LayerNorm layers (true: GPT-2; false: nanoGPT's Shakespeare config)")
      ->capture_default_str()->group(m);
  app.add_option("--data", o.data, "Text file to train on (default: Tiny Shakespeare, else a Debian text)")->group(d);
  app.add_option("--val-fraction", o.val_fraction, "Fraction of the text held out for validation (the end)")->check(nn::FiniteRange(0.01, 0.5))->capture_default_str()->group(d);
  app.add_option("--batch-size", o.batch_size, "Sequences per micro-batch B")->check(CLI::Range(1, 65536))->capture_default_str()->group(t);
  app.add_option("--grad-accum", o.grad_accum, "Micro-batches per optimizer step")->check(CLI::Range(1, 65536))->capture_default_str()->group(t);
  app.add_option("--max-iters", o.max_iters, "Optimizer steps")->check(CLI::Range(0, 100000000))->capture_default_str()->group(t);
  app.add_option("--lr", o.lr, "Peak learning rate")->check(nn::FiniteRange(1e-9, 10.0))->capture_default_str()->group(t);
  app.add_option("--min-lr", o.min_lr, "Learning rate at the end of the cosine decay")->check(nn::FiniteRange(0.0, 10.0))->capture_default_str()->group(t);
  app.add_option("--warmup-iters", o.warmup_iters, "Linear warm-up steps")->check(CLI::Range(0, 100000000))->capture_default_str()->group(t);
  app.add_option("--lr-decay-iters", o.lr_decay_iters, "Step where the decay reaches --min-lr (0: --max-iters)")->check(CLI::Range(0, 100000000))->capture_default_str()->group(t);
  app.add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay (matrices and embeddings only)")->check(nn::FiniteRange(0.0, 10.0))->capture_default_str()->group(t);
  app.add_option("--beta1", o.beta1, "AdamW beta1")->check(nn::FiniteRange(0.0, 0.9999999))->capture_default_str()->group(t);
  app.add_option("--beta2", o.beta2, "AdamW beta2")->check(nn::FiniteRange(0.0, 0.9999999))->capture_default_str()->group(t);
  app.add_option("--eps", o.eps, "AdamW epsilon (> 0: where v is 0, m / (sqrt(v) + eps) would be 0 / 0)")->check(nn::FiniteRange(kMinEps, 1.0))->capture_default_str()->group(t);
  app.add_option("--grad-clip", o.grad_clip, "Clip the global gradient norm to this (0: off)")->check(nn::FiniteRange(0.0, 1e9))->capture_default_str()->group(t);
  app.add_option("--seed", o.seed, "Seed: weights, batches, dropout, sampling")->check(nn::Seed())->capture_default_str()->group(t);
  app.add_option("--backend", o.backend, "naive (plain loops, the reference), cpu (SIMD + OpenMP kernels) or cuda "
                 "(the lesson-09 kernels on a GPU; NNLAB_DEVICE=emu: on the CPU emulator)")
      ->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str()->group(t);
  app.add_option("--precision", o.precision, "cuda: fp32, tf32 or bf16 matmuls (auto: bf16 on compute capability "
                 "8.0+, else fp32); naive and cpu: fp32 only")
      ->check(CLI::IsMember({"auto", "fp32", "tf32", "bf16"}))->capture_default_str()->group(t);
  app.add_option("--threads", o.threads, "OpenMP threads (0: the default, all cores)")->check(nn::ThreadCount())->capture_default_str()->group(t);
  app.add_option("--time-budget", o.time_budget_s, "Stop after this many seconds (0: no limit)")->check(nn::FiniteRange(0.0, 1e9))->capture_default_str()->group(t);
  app.add_option("--eval-interval", o.eval_interval, "Steps between evaluations (and checkpoints)")->check(CLI::Range(1, 100000000))->capture_default_str()->group(e);
  app.add_option("--eval-iters", o.eval_iters, "Batches per evaluation of each split")->check(CLI::Range(1, 100000))->capture_default_str()->group(e);
  app.add_option("--out-dir", o.out_dir, "Where best.safetensors, last.safetensors and log.jsonl go")->capture_default_str()->group(e);
  CLI::Option* resume = app.add_option("--resume", o.resume, "Continue from this checkpoint (weights, AdamW state, step; the log is appended to)")->group(e);
  app.add_flag("--overwrite", o.overwrite, "Let a new run replace the checkpoints an earlier run left in --out-dir")
      ->excludes(resume)->group(e);
  app.add_option("--log", o.log, "JSON-lines log (default <out-dir>/log.jsonl; 'none': no log)")->group(e);
  CLI::Option* dump_step = app.add_option("--dump-step", o.dump_step, "Write named activations and gradients at this step (1-based; needs --dump-path)")
      ->check(CLI::Range(1, 100000000))->group(e);
  CLI::Option* dump_path = app.add_option("--dump-path", o.dump_path, "File for --dump-step (safetensors)")->group(e);
  dump_step->needs(dump_path);
  dump_path->needs(dump_step);
  app.add_option("--config", o.config, "Read options from this file (`max-iters = 500` lines); flags given here win")
      ->check(CLI::ExistingFile)->group(t);
  app.add_option("--sample-tokens", o.sample_tokens, "Characters to sample after training (0: none)")->check(CLI::Range(0, 1000000))->capture_default_str()->group(s);
  app.add_option("--prompt", o.prompt, "Text the samples start from")->group(s);
  app.add_option("--temperature", o.temperature, "Sampling temperature (0: greedy)")->check(nn::FiniteRange(0.0, 100.0))->capture_default_str()->group(s);
  app.add_option("--top-k", o.top_k, "Sample among the k most likely characters only (0: all)")->check(CLI::Range(0, 65536))->capture_default_str()->group(s);

  // which of them were given (on the command line, or by apply_config_file): --resume
  // checks the model's against the checkpoint, and only a default --prompt may be replaced
  for (const char* name : {"n-layer", "n-head", "n-embd", "block-size", "dropout", "bias", "prompt"}) {
    const std::string key = name;
    app.get_option("--" + key)->each([&o, key](const std::string&) { o.given.insert(key); });
  }
}

CLI::App* add_gpt_command(CLI::App& app, CliOptions& opts) {
  CLI::App* gpt_cmd = app.add_subcommand("gpt", "The GPT trainer and sampler (lessons 07-08): train, sample, bench, diff");
  gpt_cmd->require_subcommand(1);

  CLI::App* train_cmd = gpt_cmd->add_subcommand("train", "Train a character GPT; evaluate, checkpoint, log, sample");
  add_train_flags(*train_cmd, opts.train);

  CLI::App* sample_cmd = gpt_cmd->add_subcommand("sample", "Generate text from a checkpoint");
  sample_cmd->add_option("--checkpoint", opts.checkpoint, "A checkpoint written by `nnlab gpt train`")->required();
  sample_cmd->add_option("--prompt", opts.sample.prompt, "Text to start from");
  sample_cmd->add_option("--tokens", opts.sample.tokens, "Characters to generate")->check(CLI::Range(0, 10000000))->capture_default_str();
  sample_cmd->add_option("--temperature", opts.sample.temperature, "Temperature (0: greedy)")->check(nn::FiniteRange(0.0, 100.0))->capture_default_str();
  sample_cmd->add_option("--top-k", opts.sample.top_k, "Only the k most likely characters (0: all)")->check(CLI::Range(0, 65536))->capture_default_str();
  sample_cmd->add_option("--seed", opts.sample.seed, "Seed of the draws")->check(nn::Seed())->capture_default_str();
  sample_cmd->add_option("--backend", opts.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  sample_cmd->add_option("--precision", opts.train.precision, "cuda: auto, fp32, tf32 or bf16")->check(CLI::IsMember({"auto", "fp32", "tf32", "bf16"}))->capture_default_str();

  CLI::App* eval_cmd = gpt_cmd->add_subcommand("eval", "Train and val loss of a checkpoint over many batches");
  eval_cmd->add_option("--checkpoint", opts.checkpoint, "A checkpoint written by `nnlab gpt train`")->required();
  eval_cmd->add_option("--data", opts.train.data, "The text it was trained on (default: Tiny Shakespeare, else a Debian text)");
  eval_cmd->add_option("--val-fraction", opts.train.val_fraction, "As in training")->check(nn::FiniteRange(0.01, 0.5))->capture_default_str();
  eval_cmd->add_option("--eval-iters", opts.train.eval_iters, "Batches per split")->check(CLI::Range(1, 1000000))->capture_default_str();
  eval_cmd->add_option("--batch-size", opts.train.batch_size, "Sequences per batch")->check(CLI::Range(1, 65536))->capture_default_str();
  eval_cmd->add_option("--seed", opts.train.seed, "Seed of the batches")->check(nn::Seed())->capture_default_str();
  eval_cmd->add_option("--backend", opts.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  eval_cmd->add_option("--precision", opts.train.precision, "cuda: auto, fp32, tf32 or bf16")->check(CLI::IsMember({"auto", "fp32", "tf32", "bf16"}))->capture_default_str();

  CLI::App* bench_cmd = gpt_cmd->add_subcommand(
      "bench", "Time one training step (ms/iteration) of our backends and of PyTorch eager, same model, same run");
  add_train_flags(*bench_cmd, opts.train);
  bench_cmd->add_option("--iters", opts.bench.iters, "Timed steps (median reported)")->check(CLI::Range(1, 100000))->capture_default_str();
  bench_cmd->add_option("--warmup", opts.bench.warmup, "Untimed steps first")->check(CLI::Range(0, 100000))->capture_default_str();
  bench_cmd->add_option("--backends", opts.bench.backends, "Our backends to time: naive, cpu, cuda, cuda:fp32, cuda:tf32, cuda:bf16")
      ->delimiter(',')->capture_default_str();
  bench_cmd->add_flag("--naive", opts.bench.naive, "Also time the naive backend (slow)");
  bench_cmd->add_flag("--profile", opts.bench.profile, "Also print where each backend's step goes, op by op");
  bench_cmd->add_option("--torch-modes", opts.bench.torch_modes, "On a GPU: PyTorch eager and/or compile (torch.compile)")->capture_default_str();
  bench_cmd->add_flag("!--no-torch", opts.bench.torch, "Skip the PyTorch reference");
  bench_cmd->add_option("--torch-settings", opts.bench.torch_settings, "PyTorch thread settings to try (all, or e.g. intra=2,blas=1)")->capture_default_str();
  bench_cmd->add_option("--json", opts.bench.json, "Write the results as JSON here");
  bench_cmd->add_option("--markdown", opts.bench.markdown, "Write a markdown table here");

  CLI::App* dump_cmd = gpt_cmd->add_subcommand(
      "dump", "Run a checkpoint on a text; write every named activation (attention maps h.<l>.att, ...) and the "
              "gradients of the next-character loss to a safetensors file");
  dump_cmd->add_option("--checkpoint", opts.checkpoint, "A checkpoint written by `nnlab gpt train`")->required();
  dump_cmd->add_option("--text", opts.dump_text, "The text (at most block_size + 1 characters are used)")->required();
  dump_cmd->add_option("--out", opts.dump_out, "The safetensors file to write")->required();
  dump_cmd->add_option("--backend", opts.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  dump_cmd->add_option("--precision", opts.train.precision, "cuda: auto, fp32, tf32 or bf16")->check(CLI::IsMember({"auto", "fp32", "tf32", "bf16"}))->capture_default_str();

  CLI::App* diff_cmd = gpt_cmd->add_subcommand("diff", "Per-tensor max relative error between two dumps (ours vs PyTorch, naive vs cpu)");
  diff_cmd->add_option("files", opts.diff_files, "Two safetensors dumps")->required()->expected(2)->check(CLI::ExistingFile);
  diff_cmd->add_option("--tolerance", opts.diff_tolerance, "Exit 1 if any shared tensor's error exceeds this (0: never)")->check(nn::FiniteRange(0.0, 1e9));
  return gpt_cmd;
}

namespace {

// One `key = value` line of a config file, split: the value unquoted ("..." with the
// escapes \\ \" \n \t \r, or '...' taken as it is), a `#` outside quotes starting a comment.
// Returns false for a blank, comment or [section] line. nn::Error naming file:line for an
// unterminated quote, text after a closing quote, or a line without '='.
bool split_config_line(const std::string& line, const std::string& where, std::string& key, std::string& value) {
  auto trim = [](const std::string& v) {
    const auto b = v.find_first_not_of(" \t\r");
    const auto e = v.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : v.substr(b, e - b + 1);
  };
  const std::string stripped = trim(line);
  if (stripped.empty() || stripped.front() == '#' || stripped.front() == '[') return false;
  const auto eq = stripped.find('=');
  NN_CHECK(eq != std::string::npos && stripped.substr(0, eq).find('#') == std::string::npos,
           where << ": expected `key = value`, got: " << stripped);
  key = trim(stripped.substr(0, eq));
  const std::string rest = trim(stripped.substr(eq + 1));
  value.clear();
  if (!rest.empty() && (rest.front() == '"' || rest.front() == '\'')) {
    const char quote = rest.front();
    size_t i = 1;
    bool closed = false;
    for (; i < rest.size(); ++i) {
      const char c = rest[i];
      if (c == quote) {
        closed = true;
        ++i;
        break;
      }
      if (quote == '"' && c == '\\') {
        NN_CHECK(i + 1 < rest.size(), where << ": a value ends in a lone '\\'");
        const char e = rest[++i];
        switch (e) {
          case '\\': value += '\\'; break;
          case '"': value += '"'; break;
          case 'n': value += '\n'; break;
          case 't': value += '\t'; break;
          case 'r': value += '\r'; break;
          default:
            NN_CHECK(false, where << ": unknown escape '\\" << e << "' in a \"...\" value (known: \\\\ \\\" \\n \\t \\r; "
                                  << "'...' takes text as it is)");
        }
        continue;
      }
      value += c;
    }
    NN_CHECK(closed, where << ": the value's opening " << quote << " has no closing " << quote);
    const std::string after = trim(rest.substr(i));
    NN_CHECK(after.empty() || after.front() == '#',
             where << ": unexpected text after the quoted value: " << after << " (a comment starts with #)");
    return true;
  }
  // unquoted: up to a '#'
  value = trim(rest.substr(0, rest.find('#')));
  return true;
}

}  // namespace

void apply_config_file(CLI::App& app, const std::string& path) {
  if (path.empty()) return;
  std::ifstream in(path);
  NN_CHECK(in.good(), "cannot read the config file " << path);
  std::string line;
  int lineno = 0;
  std::map<std::string, int> first_line;  // key -> the line that set it: a key may appear once
  while (std::getline(in, line)) {
    ++lineno;
    const std::string where = path + ":" + std::to_string(lineno);
    std::string key, value;
    if (!split_config_line(line, where, key, value)) continue;
    while (!key.empty() && key.front() == '-') key.erase(0, 1);
    std::replace(key.begin(), key.end(), '_', '-');
    CLI::Option* opt = app.get_option_no_throw("--" + key);
    NN_CHECK(key != "config" && key != "help" && key != "help-all",
             where << ": '" << key << "' cannot be set in a config file, only on the command line");
    NN_CHECK(opt != nullptr, where << ": unknown option '" << key << "' (see `nnlab gpt " << app.get_name()
                                   << " --help`)");
    const auto [it, first] = first_line.emplace(key, lineno);
    NN_CHECK(first, where << ": '" << key << "' is set again (first on line " << it->second
                          << "): which one is meant? keep one of the two lines");
    if (opt->count() > 0) continue;  // given on the command line: it wins
    try {
      opt->add_result(value);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      NN_CHECK(false, where << ": " << key << " = " << value << ": " << e.what());
    }
  }
}

double time_train_step(const TrainOptions& o, const std::string& backend, int iters, int warmup) {
  auto be = make_backend(backend, o.precision);
  return time_train_step(o, *be, iters, warmup);
}

double time_train_step(const TrainOptions& o, Backend& b, int iters, int warmup) {
  Backend* be = &b;
  const GPTConfig c = config_from(o, 65);
  const int B = o.batch_size, T = o.block_size;
  be->check_capacity(c, B, T);
  GPT model = gpt_create(c, be->memory());
  gpt_init_weights(model, o.seed);
  nn::Rng rng(o.seed);
  std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
  StepOptions so;  // the trainer's step (gpt/model.h): default AdamW, the options' lr and clip
  so.lr = o.lr;
  so.grad_clip = o.grad_clip;
  std::vector<double> ms;
  for (int i = 0; i < warmup + iters; ++i) {
    for (size_t k = 0; k < x.size(); ++k) {
      x[k] = static_cast<int32_t>(rng.below(65));
      y[k] = static_cast<int32_t>(rng.below(65));
    }
    const auto t0 = std::chrono::steady_clock::now();
    train_step(model, *be, {{x.data(), y.data(), static_cast<uint64_t>(i)}}, B, T, so);
    be->synchronize();  // a GPU runs the last kernels after the host has moved on
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= warmup) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

namespace {

std::string fixed(double v, int p) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(p) << v;
  return os.str();
}

// The number after "key": in a JSON text, searching from `from` (enough for the flat JSON
// scripts/gpt_torch.py writes); NaN when absent.
double json_number(const std::string& json, const std::string& key, size_t from = 0) {
  const size_t k = json.find("\"" + key + "\"", from);
  if (k == std::string::npos) return std::nan("");
  const size_t colon = json.find(':', k);
  try {
    return std::stod(json.substr(colon + 1));
  } catch (const std::exception&) {
    return std::nan("");
  }
}

std::string json_string(const std::string& json, const std::string& key) {
  const size_t k = json.find("\"" + key + "\"");
  if (k == std::string::npos) return "";
  const size_t q1 = json.find('"', json.find(':', k) + 1);
  const size_t q2 = json.find('"', q1 + 1);
  return q1 == std::string::npos || q2 == std::string::npos ? "" : json.substr(q1 + 1, q2 - q1 - 1);
}

// Runs scripts/gpt_torch.py with `args`; its JSON report ("" when PyTorch is missing or the
// script failed, with the reason in *why).
std::string run_torch(const std::string& args, std::string* why) {
  const std::string py = NNLAB_TORCH_PYTHON, script = NNLAB_TORCH_SCRIPT;
  if (py.empty() || script.empty()) {
    *why = "skipped: no Python with PyTorch was found when nnlab was configured (install python3-torch, re-run cmake)";
    return "";
  }
  const std::string tmp = (fs::temp_directory_path() / ("nnlab_torch_bench_" + std::to_string(::getpid()) + ".json")).string();
  const std::string cmd = "'" + py + "' '" + script + "' " + args + " --json '" + tmp + "'";
  std::cout << "running PyTorch: " << cmd << "\n" << std::flush;
  const int rc = std::system(cmd.c_str());
  std::ifstream in(tmp);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(tmp);
  if (rc != 0 || ss.str().empty()) {
    *why = "failed: the PyTorch script exited with status " + std::to_string(rc);
    return "";
  }
  return ss.str();
}

int run_bench(const CliOptions& opts) {
  const TrainOptions& o = opts.train;
  const BenchOptions& b = opts.bench;
  const int threads = use_threads(o.threads);
  std::vector<std::string> specs = b.backends;
  if (b.naive && std::find(specs.begin(), specs.end(), "naive") == specs.end()) specs.push_back("naive");
  const GPTConfig cfg = config_from(o, 65);
  const double flops_tok = flops_per_token(cfg, o.block_size);
  const double tokens = static_cast<double>(o.batch_size) * o.block_size;
  std::cout << "GPT training step (forward, backward, clip, AdamW): " << o.n_layer << " layers, " << o.n_head
            << " heads, " << o.n_embd << " wide, context " << o.block_size << ", batch " << o.batch_size
            << ", vocabulary 65, dropout " << o.dropout << (o.bias ? "" : ", no biases") << "; " << threads
            << " CPU threads; median of " << b.iters << " after " << b.warmup << " warm-up; FLOPs/token "
            << nn::format_si(flops_tok) << "FLOP (6N + 12 L H Q T)\n";

  struct Row {
    std::string name, precision;
    double ms = 0, peak = 0;  // peak: FLOP/s MFU is measured against (0: none)
    std::string note;
  };
  std::vector<Row> rows;
  std::map<std::string, double> peak_of;  // precision -> the peak measured for it
  struct Profile {
    std::string backend;
    std::vector<ProfileRow> rows;  // totals over `steps`
    int steps = 1;
  };
  std::vector<Profile> profiles;
  std::vector<std::string> cuda_precisions;
  for (const std::string& spec : specs) {
    const auto colon = spec.find(':');
    const std::string name = spec.substr(0, colon);
    TrainOptions oo = o;
    if (colon != std::string::npos) oo.precision = spec.substr(colon + 1);
    auto be = make_backend(name, oo.precision);
    const std::string precision = be->precision();
    if (name == "cuda") cuda_precisions.push_back(precision);
    std::string what;
    const double peak = be->measure_peak_flops(threads, &what);
    if (peak > 0) peak_of[name == "cuda" ? precision : "cpu"] = peak;
    const int iters = name == "naive" ? std::max(3, b.iters / 10) : b.iters;
    const double ms = time_train_step(oo, *be, iters, name == "naive" ? 1 : b.warmup);
    rows.push_back({"nnlab " + be->name(), precision, ms, peak, "peak: " + (what.empty() ? "-" : what)});
    if (b.profile) {
      ProfilingBackend prof(*be);
      time_train_step(oo, prof, 1, 0);  // first launches, allocations
      prof.reset();
      const int steps = name == "naive" ? 1 : 5;
      time_train_step(oo, prof, steps, 0);
      profiles.push_back({be->name(), prof.rows(), steps});
    }
  }

  // PyTorch, in the same run: on the GPU (eager / torch.compile at each of our cuda
  // precisions) when we timed cuda, else on the CPU (the fastest thread setting)
  std::map<std::string, double> torch_ms;  // "eager fp32" -> ms
  std::string torch_note;
  if (b.torch) {
    std::ostringstream args;
    args << " --n-layer " << o.n_layer << " --n-head " << o.n_head << " --n-embd " << o.n_embd << " --block-size "
         << o.block_size << " --batch-size " << o.batch_size << " --vocab-size 65 --iters " << b.iters << " --warmup "
         << b.warmup;
    if (!cuda_precisions.empty()) {
      std::string precs;
      for (const auto& p : cuda_precisions) precs += (precs.empty() ? "" : ",") + p;
      const std::string json = run_torch("bench-gpu" + args.str() + " --dropout " + std::to_string(o.dropout) +
                                             " --bias " + (o.bias ? "1" : "0") + " --precisions " + precs +
                                             " --modes '" + b.torch_modes + "'",
                                         &torch_note);
      // rows: {"precision": "bf16", "mode": "eager", "ms_per_iter": ...}
      for (size_t at = json.find("\"precision\""); at != std::string::npos; at = json.find("\"precision\"", at + 1)) {
        const std::string rest = json.substr(at);
        const std::string p = json_string(rest, "precision"), m = json_string(rest, "mode");
        const double ms = json_number(rest, "ms_per_iter");
        if (p.empty() || m.empty() || std::isnan(ms)) continue;
        torch_ms[m + " " + p] = ms;
        rows.push_back({"PyTorch " + m + " (" + json_string(json, "device") + ")", p, ms, 0,
                        "torch " + json_string(json, "torch_version") + (m == "compile" ? ", torch.compile" : "")});
      }
    } else {
      const std::string json = run_torch("bench" + args.str() + " --settings '" + b.torch_settings + "'", &torch_note);
      if (!json.empty()) {
        const size_t best = json.find("\"best\"");
        const double ms = json_number(json, "ms_per_iter", best);
        torch_ms["eager fp32"] = ms;
        rows.push_back({"PyTorch eager (CPU)", "fp32", ms, 0,
                        "torch " + json_string(json, "torch_version") + ", BLAS " + json_string(json, "blas") +
                            ", intra-op threads " + fixed(json_number(json, "intra", best), 0) + ", BLAS threads " +
                            fixed(json_number(json, "blas_threads", best), 0) + " (the fastest setting tried)"});
      }
    }
  }
  for (Row& r : rows) {  // PyTorch's MFU against the peak we measured at that precision
    if (r.peak == 0) {
      const auto it = peak_of.find(cuda_precisions.empty() ? "cpu" : r.precision);
      if (it != peak_of.end()) r.peak = it->second;
    }
  }

  std::ostringstream table;
  table << "| implementation | precision | ms/step | tokens/s | MFU | vs PyTorch eager | vs torch.compile | note |\n"
        << "|---|---|---:|---:|---:|---:|---:|---|\n";
  auto ratio = [&](const std::string& key, double ms) {
    const auto it = torch_ms.find(key);
    return it == torch_ms.end() ? std::string("-") : fixed(it->second / ms, 2) + "x";
  };
  for (const Row& r : rows) {
    const double tok_s = tokens / (r.ms / 1e3);
    table << "| " << r.name << " | " << r.precision << " | " << fixed(r.ms, 2) << " | " << fixed(tok_s, 0) << " | "
          << (r.peak > 0 ? fixed(100.0 * tok_s * flops_tok / r.peak, 1) + "%" : "-") << " | "
          << ratio("eager " + r.precision, r.ms) << " | " << ratio("compile " + r.precision, r.ms) << " | " << r.note
          << " |\n";
  }
  std::cout << "\n" << table.str();
  for (const Row& r : rows) {
    if (r.name.find("emulator") != std::string::npos) {
      std::cout << kernels::cuda::bench::emulator_warning() << "\n";
      break;
    }
  }
  if (b.torch && torch_ms.empty()) std::cout << "PyTorch: " << torch_note << "\n";
  for (const Row& r : rows) {
    if (r.name.rfind("nnlab", 0) != 0) continue;
    const auto eager = torch_ms.find("eager " + r.precision);
    if (eager == torch_ms.end()) continue;
    const bool gpu = r.name.rfind("nnlab cuda", 0) == 0;
    std::cout << r.name << " is " << fixed(eager->second / r.ms, 2) << "x PyTorch eager's speed"
              << (gpu ? " (goal: at least 1x)" : r.name == "nnlab cpu" ? " (goal: 2x)" : "");
    const auto comp = torch_ms.find("compile " + r.precision);
    if (comp != torch_ms.end()) std::cout << ", " << fixed(comp->second / r.ms, 2) << "x torch.compile's";
    std::cout << "\n";
  }
  std::ostringstream prof_md;
  for (const Profile& p : profiles) {
    prof_md << "\nwhere a step goes on " << p.backend << " (each op waited for; mean of " << p.steps << " steps):\n\n";
    print_profile(prof_md, p.rows, p.steps);
  }
  std::cout << prof_md.str();

  if (!b.json.empty()) {
    std::ofstream js(b.json);
    NN_CHECK(js.good(), "cannot write " << b.json);
    js << "{\"schema\": \"nnlab-gpt-bench/2\", \"config\": {\"n_layer\": " << o.n_layer << ", \"n_head\": " << o.n_head
       << ", \"n_embd\": " << o.n_embd << ", \"block_size\": " << o.block_size << ", \"batch_size\": " << o.batch_size
       << ", \"dropout\": " << o.dropout << ", \"bias\": " << (o.bias ? "true" : "false") << "}, \"threads\": " << threads
       << ", \"flops_per_token\": " << flops_tok << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const double tok_s = tokens / (r.ms / 1e3);
      js << (i ? ", " : "") << "{\"name\": " << kernels::harness::json_string(r.name) << ", \"precision\": \"" << r.precision
         << "\", \"ms_per_step\": " << r.ms << ", \"tokens_per_s\": " << tok_s << ", \"mfu\": "
         << (r.peak > 0 ? fixed(tok_s * flops_tok / r.peak, 5) : "null") << ", \"peak_flops\": " << r.peak << "}";
    }
    js << "], \"profiles\": [";
    for (size_t i = 0; i < profiles.size(); ++i) {
      const Profile& pr = profiles[i];
      js << (i ? ", " : "") << "{\"backend\": " << kernels::harness::json_string(pr.backend) << ", \"ops\": [";
      for (size_t k = 0; k < pr.rows.size(); ++k) {
        const ProfileRow& p = pr.rows[k];
        js << (k ? ", " : "") << "{\"op\": \"" << p.op << "\", \"calls_per_step\": "
           << static_cast<double>(p.calls) / pr.steps << ", \"ms_per_step\": " << p.ms / pr.steps << "}";
      }
      js << "]}";
    }
    js << "]}\n";
    js.flush();
    NN_CHECK(js.good(), "writing " << b.json << " failed (is the disk full?): the JSON is incomplete");
  }
  if (!b.markdown.empty()) {
    std::ofstream md(b.markdown);
    NN_CHECK(md.good(), "cannot write " << b.markdown);
    md << "# nnlab gpt bench\n\nConfig: " << o.n_layer << " layers, " << o.n_head << " heads, " << o.n_embd
       << " wide, context " << o.block_size << ", batch " << o.batch_size << ", dropout " << o.dropout
       << (o.bias ? "" : ", no biases") << "; median of " << b.iters << " steps after " << b.warmup << " warm-up.\n\n"
       << table.str() << prof_md.str();
    md.flush();
    NN_CHECK(md.good(), "writing " << b.markdown << " failed (is the disk full?): the table is incomplete");
  }
  return 0;
}

int run_diff(const CliOptions& opts) {
  std::vector<std::string> only_a, only_b;
  const auto rows = diff_dumps(opts.diff_files[0], opts.diff_files[1], &only_a, &only_b);
  NN_CHECK(!rows.empty(), "the two files share no tensor names: nothing to compare");
  double worst = 0.0;
  std::string worst_name;
  std::cout << std::left << std::setw(32) << "tensor" << std::right << std::setw(12) << "elements" << std::setw(14)
            << "max abs err" << std::setw(14) << "max rel err" << "\n";
  for (const DiffRow& r : rows) {
    std::cout << std::left << std::setw(32) << r.name << std::right << std::setw(12) << r.numel << std::setw(14)
              << std::scientific << std::setprecision(2) << r.max_abs_err << std::setw(14) << r.max_rel_err
              << std::defaultfloat << "\n";
    if (!(r.max_rel_err <= worst)) {
      worst = r.max_rel_err;
      worst_name = r.name;
    }
  }
  std::cout << rows.size() << " shared tensors; worst " << worst_name << " at " << std::scientific << std::setprecision(2)
            << worst << std::defaultfloat << " (max |a-b| / max |b| per tensor)\n";
  if (!only_a.empty()) std::cout << only_a.size() << " only in " << opts.diff_files[0] << " (first: " << only_a[0] << ")\n";
  if (!only_b.empty()) std::cout << only_b.size() << " only in " << opts.diff_files[1] << " (first: " << only_b[0] << ")\n";
  if (opts.diff_tolerance > 0.0 && !(worst <= opts.diff_tolerance)) {
    std::cerr << "error: " << worst_name << " differs by " << worst << " > tolerance " << opts.diff_tolerance << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

namespace {
// What a command prints is its result: output cut short by a full disk is an error.
void check_stdout() {
  std::cout.flush();
  NN_CHECK(std::cout.good(), "writing to standard output failed (is the disk full, or the pipe closed?): "
                             "the output above is incomplete");
}
}  // namespace

int run_gpt_command(CLI::App& gpt_cmd, const CliOptions& opts) {
  if (gpt_cmd.got_subcommand("train")) {
    apply_config_file(*gpt_cmd.get_subcommand("train"), opts.train.config);
    train(opts.train, std::cout);
    check_stdout();
    return 0;
  }
  if (gpt_cmd.got_subcommand("sample")) {
    auto be = make_backend(opts.backend, opts.train.precision);
    LoadedCheckpoint ck = load_checkpoint(opts.checkpoint, be->memory());
    SampleOptions so = opts.sample;
    const bool prompt_given = gpt_cmd.get_subcommand("sample")->get_option("--prompt")->count() > 0;
    if (!prompt_given && !ck.vocab.contains('\n')) {
      // the default prompt is a newline; a text without one gets its first character
      so.prompt = std::string(1, static_cast<char>(ck.vocab.chars.front()));
      std::cerr << "note: " << opts.checkpoint << " was trained on a text without a newline (the default --prompt); "
                << "starting from '" << so.prompt << "' instead\n";
    }
    std::cout << so.prompt << sample(ck.model, *be, ck.vocab, so) << "\n";
    check_stdout();
    return 0;
  }
  if (gpt_cmd.got_subcommand("eval")) {
    auto be = make_backend(opts.backend, opts.train.precision);
    LoadedCheckpoint ck = load_checkpoint(opts.checkpoint, be->memory());
    const nn::TextCorpus corpus = nn::load_corpus(opts.train.data, opts.train.val_fraction);
    NN_CHECK(vocab_to_hex(ck.vocab) == vocab_to_hex(corpus.vocab),
             "checkpoint " << opts.checkpoint << " was trained on another text than " << corpus.path << " (the vocabularies differ)");
    const int B = opts.train.batch_size, T = ck.model.config.block_size, n = opts.train.eval_iters;
    // batch streams 2 and 3: the ones training evaluates on (train.cpp), extended to n batches
    const float tl = evaluate(ck.model, *be, corpus.train, B, T, n, opts.train.seed, 2);
    const float vl = evaluate(ck.model, *be, corpus.val, B, T, n, opts.train.seed, 3);
    std::cout << "data: " << corpus.description << "\n" << opts.checkpoint << " (step " << ck.state.step << "): train loss "
              << fixed(tl, 4) << ", val loss " << fixed(vl, 4) << " over " << n << " batches of " << B << " x " << T
              << " characters each\n";
    check_stdout();
    return 0;
  }
  if (gpt_cmd.got_subcommand("bench")) {
    apply_config_file(*gpt_cmd.get_subcommand("bench"), opts.train.config);
    return run_bench(opts);
  }
  if (gpt_cmd.got_subcommand("dump")) {
    auto be = make_backend(opts.backend, opts.train.precision);
    LoadedCheckpoint ck = load_checkpoint(opts.checkpoint, be->memory());
    std::vector<int32_t> ids = ck.vocab.encode(opts.dump_text);
    NN_CHECK(ids.size() >= 2, "--text needs at least 2 characters (inputs and their next characters)");
    const int T = std::min(static_cast<int>(ids.size()) - 1, ck.model.config.block_size);
    gpt_zero_grad(ck.model);
    gpt_forward(ck.model, *be, ids.data(), ids.data() + 1, 1, T);
    gpt_backward(ck.model, *be);
    write_dump(opts.dump_out, ck.model);
    std::cout << "wrote " << opts.dump_out << ": activations and gradients of " << T << " positions, loss "
              << ck.model.mean_loss << "\n";
    return 0;
  }
  if (gpt_cmd.got_subcommand("diff")) return run_diff(opts);
  return 1;
}

}  // namespace gpt
