// gpt/cli.cpp: the `nnlab gpt` command line (gpt/cli.h).
#include "gpt/cli.h"

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "gpt/backend.h"
#include "gpt/compress.h"
#include "nn/check.h"
#include "nn/cli_checks.h"

namespace gpt {

void add_train_flags(CLI::App& app, TrainOptions& o) {
  const std::string m = "Model", d = "Data", t = "Training", e = "Evaluation, checkpoints, logs", s = "Sampling";
  app.add_option("--n-layer", o.n_layer, "Transformer blocks L")->check(CLI::Range(1, 1024))->capture_default_str()->group(m);
  app.add_option("--n-head", o.n_head, "Attention heads per block (must divide --n-embd)")->check(CLI::Range(1, 1024))->capture_default_str()->group(m);
  app.add_option("--n-embd", o.n_embd, "Channels C")->check(CLI::Range(1, 65536))->capture_default_str()->group(m);
  app.add_option("--block-size", o.block_size, "Context length T (characters the model sees)")->check(CLI::Range(1, 65536))->capture_default_str()->group(m);
  app.add_option("--dropout", o.dropout, "Dropout probability in training")->check(nn::FiniteRange(0.0, 0.99))->capture_default_str()->group(m);
  app.add_option("--bias", o.bias, "Biases in the Linear and LayerNorm layers (true: GPT-2; false: nanoGPT's Shakespeare config)")
      ->capture_default_str()->group(m);
  app.add_option("--arch", o.arch, "The block: gpt2 (LayerNorm, learned positions, GELU MLP) or llama (lesson 11: "
                 "RMSNorm, RoPE, SwiGLU, grouped-query attention, no biases)")
      ->check(CLI::IsMember({"gpt2", "llama"}))->capture_default_str()->group(m);
  app.add_option("--n-kv-head", o.n_kv_head, "llama: key/value heads, dividing --n-head (0: --n-head, multi-head; 1: "
                 "multi-query)")->check(CLI::Range(0, 1024))->capture_default_str()->group(m);
  app.add_option("--ffn-hidden", o.ffn_hidden, "llama: the SwiGLU width H (0: 8 n_embd / 3 rounded up to 32)")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str()->group(m);
  app.add_option("--rope-theta", o.rope_theta, "llama: RoPE's base theta")->check(nn::FiniteRange(1.0001, 1e12))
      ->capture_default_str()->group(m);
  app.add_option("--norm-eps", o.norm_eps, "llama: RMSNorm's epsilon")->check(nn::FiniteRange(1e-30, 0.5))
      ->capture_default_str()->group(m);
  app.add_flag("--untied-head", o.untied_head, "llama: an output head lm_head of its own instead of wte")->group(m);
  app.add_option("--attention", o.attention, "auto (llama: flash, gpt2: full), full (keeps the T x T maps; "
                 "multi-head only) or flash (keeps one log-sum-exp per row)")
      ->check(CLI::IsMember({"auto", "full", "flash"}))->capture_default_str()->group(m);
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
  app.add_option("--allreduce", o.allreduce, "Under mpirun (data parallel, lesson 14): the gradients' all-reduce, "
                 "ring (written over point-to-point messages) or library (MPI_Allreduce)")
      ->check(CLI::IsMember({"ring", "library"}))->capture_default_str()->group(t);
  app.add_option("--zero", o.zero, "Under mpirun: 1 shards AdamW's moments across the ranks (ZeRO stage 1: "
                 "reduce-scatter, update the own shard, all-gather the weights); 0 every rank holds them all")
      ->check(CLI::Range(0, 1))->capture_default_str()->group(t);
  app.add_flag("--ternary", o.ternary, "BitNet b1.58 (lesson 15): train every block Linear ternary, "
               "clamp(round(W / mean|W|), -1, 1) mean|W|, with the straight-through estimator; checkpoints hold the "
               "fp32 latents")->group(t);
  app.add_flag("--ternary-a8", o.ternary_a8, "BitNet b1.58's whole recipe, W1.58A8 (lesson 15): --ternary's weights "
               "(implied) and every block Linear's input rounded per token to int8 (absmax / 127) in every forward, "
               "the gradient passing the rounding unchanged; needs --attention full for llama")->group(t);
  app.add_flag("--recompute", o.recompute, "Activation recomputation: keep each block's output, recompute its "
               "inside in the backward (less memory, about a third more arithmetic)")->group(t);
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
      ->check(CLI::ExistingFile)->configurable(false)->group(t);
  app.add_option("--sample-tokens", o.sample_tokens, "Characters to sample after training (0: none)")->check(CLI::Range(0, 1000000))->capture_default_str()->group(s);
  app.add_option("--prompt", o.prompt, "Text the samples start from")->group(s);
  app.add_option("--temperature", o.temperature, "Sampling temperature (0: greedy)")->check(nn::FiniteRange(0.0, 100.0))->capture_default_str()->group(s);
  app.add_option("--top-k", o.top_k, "Sample among the k most likely characters only (0: all)")->check(CLI::Range(0, 65536))->capture_default_str()->group(s);

  // which of them were given (on the command line, or by apply_config_file): --resume
  // checks the model's against the checkpoint, and only a default --prompt may be replaced
  for (const char* name : {"n-layer", "n-head", "n-embd", "block-size", "dropout", "bias", "prompt", "arch",
                           "n-kv-head", "ffn-hidden", "rope-theta", "norm-eps", "untied-head", "attention",
                           "ternary"}) {
    const std::string key = name;
    app.get_option("--" + key)->each([&o, key](const std::string&) { o.given.insert(key); });
  }
}

void add_gpt_subcommands(CLI::App& cmd, CliOptions& opts) {
  cmd.require_subcommand(1);

  CLI::App* train_cmd = cmd.add_subcommand("train", "Train a character GPT; evaluate, checkpoint, log, sample");
  add_train_flags(*train_cmd, opts.train);

  CLI::App* sample_cmd = cmd.add_subcommand("sample", "Generate text from a checkpoint");
  sample_cmd->add_option("--checkpoint", opts.checkpoint, "A checkpoint written by `nnlab gpt train`")->required();
  sample_cmd->add_option("--prompt", opts.sample.prompt, "Text to start from");
  sample_cmd->add_option("--tokens", opts.sample.tokens, "Characters to generate")->check(CLI::Range(0, 10000000))->capture_default_str();
  sample_cmd->add_option("--temperature", opts.sample.temperature, "Temperature (0: greedy)")->check(nn::FiniteRange(0.0, 100.0))->capture_default_str();
  sample_cmd->add_option("--top-k", opts.sample.top_k, "Only the k most likely characters (0: all)")->check(CLI::Range(0, 65536))->capture_default_str();
  sample_cmd->add_option("--seed", opts.sample.seed, "Seed of the draws")->check(nn::Seed())->capture_default_str();
  sample_cmd->add_option("--backend", opts.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  sample_cmd->add_option("--precision", opts.train.precision, "cuda: auto, fp32, tf32 or bf16")->check(CLI::IsMember({"auto", "fp32", "tf32", "bf16"}))->capture_default_str();

  CLI::App* eval_cmd = cmd.add_subcommand("eval", "Train and val loss of a checkpoint over many batches");
  eval_cmd->add_option("--checkpoint", opts.checkpoint, "A checkpoint written by `nnlab gpt train`")->required();
  eval_cmd->add_option("--data", opts.train.data, "The text it was trained on (default: Tiny Shakespeare, else a Debian text)");
  eval_cmd->add_option("--val-fraction", opts.train.val_fraction, "As in training")->check(nn::FiniteRange(0.01, 0.5))->capture_default_str();
  eval_cmd->add_option("--eval-iters", opts.train.eval_iters, "Batches per split")->check(CLI::Range(1, 1000000))->capture_default_str();
  eval_cmd->add_option("--batch-size", opts.train.batch_size, "Sequences per batch")->check(CLI::Range(1, 65536))->capture_default_str();
  eval_cmd->add_option("--seed", opts.train.seed, "Seed of the batches")->check(nn::Seed())->capture_default_str();
  eval_cmd->add_option("--backend", opts.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  eval_cmd->add_option("--precision", opts.train.precision, "cuda: auto, fp32, tf32 or bf16")->check(CLI::IsMember({"auto", "fp32", "tf32", "bf16"}))->capture_default_str();

  CLI::App* bench_cmd = cmd.add_subcommand(
      "bench", "Time one training step (ms/iteration) of our backends and of PyTorch eager, same model, same run");
  add_train_flags(*bench_cmd, opts.train);
  bench_cmd->add_option("--iters", opts.bench.iters, "Timed steps (median reported)")->check(CLI::Range(1, 100000))->capture_default_str();
  bench_cmd->add_option("--warmup", opts.bench.warmup, "Untimed steps first")->check(CLI::Range(0, 100000))->capture_default_str();
  bench_cmd->add_option("--rounds", opts.bench.rounds,
                        "Alternate ours and the CPU PyTorch peer this many times; report each side's median over the rounds and every round's ratio")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  bench_cmd->add_option("--backends", opts.bench.backends, "Our backends to time: naive, cpu, cuda, cuda:fp32, cuda:tf32, cuda:bf16")
      ->delimiter(',')->capture_default_str();
  bench_cmd->add_flag("--naive", opts.bench.naive, "Also time the naive backend (slow)");
  bench_cmd->add_flag("--profile", opts.bench.profile, "Also print where each backend's step goes, op by op");
  bench_cmd->add_option("--torch-modes", opts.bench.torch_modes, "On a GPU: PyTorch eager and/or compile (torch.compile)")->capture_default_str();
  bench_cmd->add_flag("!--no-torch", opts.bench.torch, "Skip the PyTorch reference");
  bench_cmd->add_option("--torch-settings", opts.bench.torch_settings, "PyTorch thread settings to try (all, or e.g. intra=2,blas=1)")->capture_default_str();
  bench_cmd->add_option("--json", opts.bench.json, "Write the results as JSON here");
  bench_cmd->add_option("--markdown", opts.bench.markdown, "Write a markdown table here");

  CLI::App* dump_cmd = cmd.add_subcommand(
      "dump", "Run a checkpoint on a text; write every named activation (attention maps h.<l>.att, ...) and the "
              "gradients of the next-character loss to a safetensors file");
  dump_cmd->add_option("--checkpoint", opts.checkpoint, "A checkpoint written by `nnlab gpt train`")->required();
  dump_cmd->add_option("--text", opts.dump_text, "The text (at most block_size + 1 characters are used)")->required();
  dump_cmd->add_option("--out", opts.dump_out, "The safetensors file to write")->required();
  dump_cmd->add_option("--backend", opts.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  dump_cmd->add_option("--precision", opts.train.precision, "cuda: auto, fp32, tf32 or bf16")->check(CLI::IsMember({"auto", "fp32", "tf32", "bf16"}))->capture_default_str();

  // LoRA (gpt/lora.h, lesson 12)
  CLI::App* ft = cmd.add_subcommand(
      "finetune", "Adapt a checkpoint to a new text: LoRA adapters on the frozen model (--lora-rank R), or full "
                  "fine-tuning (--lora-rank 0)");
  FinetuneOptions& f = opts.finetune;
  ft->add_option("--init", f.init, "The base checkpoint (`nnlab gpt train`)")->required()->check(CLI::ExistingFile);
  ft->add_option("--data", f.data, "The new text: a file, or a directory read as one text (default: the Debian "
                 "licence texts, /usr/share/common-licenses)");
  ft->add_option("--old-data", f.old_data, "The base's own text: its val loss before and after (forgetting)");
  ft->add_option("--val-fraction", f.val_fraction, "The end of each text held out")->check(nn::FiniteRange(0.01, 0.5))->capture_default_str();
  ft->add_option("--lora-rank", f.rank, "Adapter rank r (0: full fine-tuning of every parameter)")->check(CLI::Range(0, 65536))->capture_default_str();
  ft->add_option("--lora-alpha", f.alpha, "The update is scaled by alpha / r")->check(nn::FiniteRange(1e-6, 1e6))->capture_default_str();
  ft->add_option("--lora-targets", f.targets, "Adapted layers: any of qkv,attproj,fc,fcproj (or all)")->capture_default_str();
  ft->add_option("--iters", f.iters, "Optimizer steps")->check(CLI::Range(0, 100000000))->capture_default_str();
  ft->add_option("--batch-size", f.batch_size, "Sequences per step")->check(CLI::Range(1, 65536))->capture_default_str();
  ft->add_option("--lr", f.lr, "Peak learning rate")->check(nn::FiniteRange(1e-9, 10.0))->capture_default_str();
  ft->add_option("--min-lr", f.min_lr, "Learning rate at the end of the cosine decay")->check(nn::FiniteRange(0.0, 10.0))->capture_default_str();
  ft->add_option("--warmup-iters", f.warmup_iters, "Linear warm-up steps")->check(CLI::Range(0, 100000000))->capture_default_str();
  ft->add_option("--weight-decay", f.weight_decay, "AdamW weight decay on what is trained")->check(nn::FiniteRange(0.0, 10.0))->capture_default_str();
  ft->add_option("--grad-clip", f.grad_clip, "Clip the trained parameters' gradient norm (0: off)")->check(nn::FiniteRange(0.0, 1e9))->capture_default_str();
  ft->add_option("--eval-iters", f.eval_iters, "Validation batches")->check(CLI::Range(1, 100000))->capture_default_str();
  ft->add_option("--seed", f.seed, "Seed: adapters, batches")->check(nn::Seed())->capture_default_str();
  ft->add_option("--backend", f.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str();
  ft->add_option("--threads", f.threads, "OpenMP threads (0: the default)")->check(nn::ThreadCount())->capture_default_str();
  ft->add_option("--out", f.out, "Write the adapters here (rank 0: the fine-tuned checkpoint)");

  CLI::App* merge_cmd = cmd.add_subcommand("merge", "Fold a LoRA adapter file into a checkpoint's weights (W += alpha/r B A)");
  merge_cmd->add_option("--checkpoint", opts.checkpoint, "The base checkpoint")->required()->check(CLI::ExistingFile);
  merge_cmd->add_option("--adapter", opts.merge_adapter, "An adapter file (`nnlab gpt finetune --out`)")->required()->check(CLI::ExistingFile);
  merge_cmd->add_option("--out", opts.merge_out, "The merged checkpoint to write")->required();

  CLI::App* diff_cmd = cmd.add_subcommand("diff", "Per-tensor max relative error between two dumps (ours vs PyTorch, naive vs cpu)");
  diff_cmd->add_option("files", opts.diff_files, "Two safetensors dumps")->required()->expected(2)->check(CLI::ExistingFile);
  diff_cmd->add_option("--tolerance", opts.diff_tolerance, "Exit 1 if any shared tensor's error exceeds this (0: never)")->check(nn::FiniteRange(0.0, 1e9));
}

// ---- config files ---------------------------------------------------------------------------
//
// CLI11 applies a config file: apply_config_file hands it to the app's parse_from_stream, and
// CLI11 finds each key's option, refuses a key that no option has (config_extras_mode::error)
// and one that belongs to the command line only (--help, --config: not configurable), leaves
// alone an option the command line gave (it wins), converts and validates each value with the
// option's own checks (nn::FiniteRange, CLI::Range, ...: the same as for a flag), reads a flag
// as a flag (`no-torch = true` turns PyTorch off), and checks --overwrite against --resume and
// --dump-step against --dump-path with the file's values included.
//
// What CLI11 2.1.2 (Debian's libcli11-dev) does not do is here, each for a promise of the
// format (gpt/cli.h):
// - it reads the --config of the main app only, during parse(); a subcommand's (`nnlab gpt
//   train`, `nnlab lesson08`) is never read: apply_config_file reads it after parse();
// - its TOML reader cuts a line at the first '#' even inside quotes, keeps "\n" as a backslash
//   and an n, lets an unterminated quote through, splits a value at spaces and commas, takes
//   `[train]` for a subcommand and `max_iters` for another key than `max-iters`:
//   ConfigReader reads the lines instead (split_config_line) and hands CLI11 one value a key;
// - it keeps the first of two lines setting one key and ignores the second without a word:
//   ConfigReader refuses the second; and it takes a key `++` for a section's start, accepted
//   without a word: refused as the unknown key it is;
// - its messages name the key, not the line: ConfigReader remembers the lines (explain).

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

// The option CLI11 gives a config key to (App::_parse_single_config: --key, -k, then a
// positional named key); nullptr: none.
const CLI::Option* option_of(const CLI::App& app, const std::string& key) {
  const CLI::Option* opt = app.get_option_no_throw("--" + key);
  if (opt == nullptr && key.size() == 1) opt = app.get_option_no_throw("-" + key);
  return opt != nullptr ? opt : app.get_option_no_throw(key);
}

// `nnlab gpt train`: the command an app is, for a hint to its --help.
std::string command_of(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* p = app.get_parent(); p != nullptr; p = p->get_parent()) path = p->get_name() + " " + path;
  return path;
}

// The config file format for CLI11: the lines of a file as CLI11's items, one value each (an
// option's delimiter still splits it, as on the command line), and where each came from.
class ConfigReader : public CLI::ConfigBase {
 public:
  explicit ConfigReader(std::string path) : path_(std::move(path)) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    std::vector<CLI::ConfigItem> out;
    lines_.clear();
    std::map<std::string, int> first_line;  // a key may appear once
    std::string text;
    for (int n = 1; std::getline(in, text); ++n) {
      Line l{{}, {}, n};
      if (!split_config_line(text, where(n), l.key, l.value)) continue;
      // `--max-iters`, `max-iters` and `max_iters` are one key
      while (!l.key.empty() && l.key.front() == '-') l.key.erase(0, 1);
      std::replace(l.key.begin(), l.key.end(), '_', '-');
      // CLI11 takes an item named "++" for the start of a section and accepts it silently
      NN_CHECK(l.key != "++", where(n) << ": unknown option '++'");
      const auto [it, first] = first_line.emplace(l.key, n);
      NN_CHECK(first, where(n) << ": '" << l.key << "' is set again (first on line " << it->second
                               << "): which one is meant? keep one of the two lines");
      CLI::ConfigItem item;
      item.name = l.key;
      item.inputs = {l.value};
      out.push_back(std::move(item));
      lines_.push_back(std::move(l));
    }
    return out;
  }

  // CLI11's refusal of the file's items, as `file:line: ...`.
  std::string explain(const CLI::App& app, const CLI::Error& e) const {
    const std::string what = e.what();
    if (dynamic_cast<const CLI::ConfigError*>(&e) != nullptr) {
      // a key without an option, or one for the command line only: CLI11 takes the items
      // in order and stops at the first of them
      for (const Line& l : lines_) {
        const CLI::Option* opt = option_of(app, l.key);
        if (opt == nullptr)
          return where(l.number) + ": unknown option '" + l.key + "' (see `" + command_of(app) + " --help`)";
        if (!opt->get_configurable())
          return where(l.number) + ": '" + l.key + "' cannot be set in a config file, only on the command line";
      }
    }
    // a value refused: CLI11's message names the option first (`--eps: expected a finite
    // number ...`, `Could not convert: --bias = maybe`): the first word of it that is a key
    // of the file (with an option) is the line
    const std::string separators = " \t\n:,=()[]{}'\"";
    for (size_t b = what.find_first_not_of(separators), end = 0; b != std::string::npos;
         b = what.find_first_not_of(separators, end)) {
      end = what.find_first_of(separators, b);
      std::string word = what.substr(b, end == std::string::npos ? std::string::npos : end - b);
      word.erase(0, word.find_first_not_of('-'));
      for (const Line& l : lines_) {
        if (l.key == word && option_of(app, l.key) != nullptr)
          return where(l.number) + ": " + l.key + " = " + l.value + ": " + what;
      }
      if (end == std::string::npos) break;
    }
    return path_ + ": " + what;  // not one line's (--overwrite excludes --resume)
  }

 private:
  struct Line {
    std::string key, value;
    int number = 0;
  };
  std::string where(int line) const { return path_ + ":" + std::to_string(line); }

  std::string path_;
  mutable std::vector<Line> lines_;  // of the last from_config (which CLI::Config declares const)
};

}  // namespace

void apply_config_file(CLI::App& app, const std::string& path) {
  // parse_from_stream ends in the app's callbacks, and lesson 08 calls this from one: the
  // call from within finds the file being read and returns
  static thread_local const CLI::App* reading = nullptr;
  if (path.empty() || reading == &app) return;
  std::ifstream in(path);
  NN_CHECK(in.good(), "cannot read the config file " << path);
  auto reader = std::make_shared<ConfigReader>(path);
  app.config_formatter(reader);
  app.allow_config_extras(CLI::config_extras_mode::error);  // CLI11's default ignores an unknown key
  struct Reading {
    explicit Reading(const CLI::App* a) { reading = a; }
    ~Reading() { reading = nullptr; }
  } guard(&app);
  try {
    app.parse_from_stream(in);
  } catch (const CLI::Error& e) {
    NN_CHECK(false, reader->explain(app, e));
  }
}

namespace {

std::string fixed(double v, int p) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(p) << v;
  return os.str();
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
    as_trained(ck);  // a BitNet checkpoint: its ternary weights (and int8 activations), not the latents
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
    as_trained(ck);  // a BitNet checkpoint: its ternary weights (and int8 activations), not the latents
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
    return run_bench(opts.train, opts.bench);
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
  if (gpt_cmd.got_subcommand("finetune")) {
    finetune(opts.finetune, std::cout);
    check_stdout();
    return 0;
  }
  if (gpt_cmd.got_subcommand("merge")) {
    LoadedCheckpoint ck = load_checkpoint(opts.checkpoint);
    const LoraAdapters ad = load_lora(opts.merge_adapter, ck.model.config);
    lora_merge(ck.model, ad);
    save_checkpoint(opts.merge_out, ck.model, ck.vocab, ck.state, /*with_optimizer=*/false);
    std::cout << "merged " << opts.merge_adapter << " (rank " << ad.config.rank << ", alpha " << ad.config.alpha << ", "
              << lora_targets_string(ad.config.targets) << ") into " << opts.checkpoint << ": wrote " << opts.merge_out
              << "\n";
    check_stdout();
    return 0;
  }
  if (gpt_cmd.got_subcommand("diff")) return run_diff(opts);
  return 1;
}

}  // namespace gpt
