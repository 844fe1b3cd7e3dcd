// Lesson 08: the GPT, looked at part by part. The model, trainer and sampler are gpt/
// (gpt/model.h, gpt/train.h); this file prints what they hold and cost.
#include "lessons/08-gpt/gpt_lesson.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <span>
#include <sstream>
#include <utility>

#include "gpt/bench.h"
#include "gpt/cli.h"
#include "kernels/ceilings.h"
#include "nn/check.h"
#include "io/shape.h"
#include "io/text.h"
#include "kernels/clock.h"

namespace lesson08 {

namespace fs = std::filesystem;
using i64 = int64_t;

gpt::TrainOptions lesson_train_defaults() {
  gpt::TrainOptions o;  // nanoGPT's CPU run: L 4, NH 4, C 128, T 64, B 12, 2000 steps
  o.sample_tokens = 500;
  return o;
}

void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part to run (all = shapes, memory, flops; train is separate)")
      ->check(CLI::IsMember({"shapes", "memory", "flops", "train", "sample", "all"}))
      ->capture_default_str();
  gpt::add_train_flags(app, o.train);
  app.add_option("--checkpoint", o.checkpoint, "Part sample: the checkpoint (default <out-dir>/best.safetensors)")
      ->group("Sampling");
  app.add_option("--flops-iters", o.flops_iters, "Part flops: timed training steps (median reported)")
      ->check(CLI::Range(1, 1000))->capture_default_str()->group("Training");
  // --config FILE (one of gpt::add_train_flags): read once the command line is parsed, so a
  // flag given there wins, as in `nnlab gpt train`. A bad file is a parse error: message
  // and non-zero exit, before anything runs.
  app.parse_complete_callback([&app, &o] {
    try {
      gpt::apply_config_file(app, o.train.config);
    } catch (const nn::Error& e) {
      throw CLI::ValidationError("--config", e.what());
    }
  });
}

// ---- small helpers --------------------------------------------------------------------------

namespace {

// 1234567 -> "1,234,567"
std::string grouped(i64 v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// Bytes in MiB, or in TiB from 1 TiB up (a GPT-3-sized run's table stays readable).
std::string size_text(i64 bytes) {
  std::ostringstream os;
  const double m = static_cast<double>(bytes) / (1024.0 * 1024.0);
  if (m >= 1024.0 * 1024.0) {
    os << std::fixed << std::setprecision(1) << m / (1024.0 * 1024.0) << " TiB";
  } else {
    os << std::fixed << std::setprecision(m < 10 ? 2 : 1) << m << " MiB";
  }
  return os.str();
}

std::string fixed(double v, int p) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(p) << v;
  return os.str();
}

std::string describe(const gpt::GPTConfig& c) {
  std::ostringstream os;
  os << "L=" << c.n_layer << " NH=" << c.n_head << " C=" << c.n_embd << " hs=" << c.n_embd / c.n_head
     << " V=" << c.vocab_size << " maxT=" << c.block_size;
  return os.str();
}

// Newlines and tabs made visible, for printing a batch on one line.
std::string visible(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

// ---- the pieces -------------------------------------------------------------------------------

gpt::GPTConfig nanogpt_gpu_config() {
  gpt::GPTConfig c;  // nanoGPT config/train_shakespeare_char.py
  c.vocab_size = 65;
  c.block_size = 256;
  c.n_layer = 6;
  c.n_head = 6;
  c.n_embd = 384;
  c.dropout = 0.2f;
  return c;
}

std::string symbolic_shape(const std::string& name) {
  // the letters of gpt/model.h's tables, the one place the shapes are written: a parameter
  // "h.<l>.<row>" or "<row>" of gpt::kParams, an activation "h.<l>.<row>" or "<row>" of
  // gpt::kActivations
  std::string row = name;
  if (row.rfind("h.", 0) == 0) row = row.substr(row.find('.', 2) + 1);
  for (const gpt::ParamSpec& s : gpt::kParams) {
    if (row == s.name) return gpt::letters_of(s.shape);
  }
  for (const auto& s : gpt::kActivations) {
    if (row == s.name) return gpt::letters_of(s.shape);
  }
  NN_CHECK(false, "symbolic_shape: '" << name << "' is neither a parameter nor an activation of gpt/model.h");
  return "";
}

int64_t activation_floats_per_token(const gpt::GPTConfig& c) {
  const i64 L = c.n_layer, C = c.n_embd, V = c.vocab_size;
  // per layer: ln1 C + qkv 3C + atty C + attproj C + residual2 C + ln2 C + fch 4C
  //            + fch_gelu 4C + fcproj C + residual3 C = 18C, and 2 + 2 LayerNorm mean/rstd
  const i64 per_layer = 18 * C + 4;
  // encoded C, lnf C + mean/rstd 2, logits V, probs V, losses 1
  i64 floats = C + L * per_layer + C + 2 + 2 * V + 1;
  // dropout masks, only when there is dropout: encoded C, and per layer attproj C + fcproj C
  if (c.dropout > 0.0f) floats += C + 2 * L * C;
  return floats;
}

int64_t attention_map_floats(const gpt::GPTConfig& c, int B, int T) {
  // preatt and att, (L, B, NH, T, T) each
  return 2 * static_cast<i64>(c.n_layer) * B * c.n_head * static_cast<i64>(T) * T;
}

double memory_bytes_upper_bound(const gpt::GPTConfig& c, int B, int T) {
  const double L = c.n_layer, C = c.n_embd, NH = c.n_head, V = c.vocab_size, maxT = c.block_size;
  const double b = B, t = T;
  // parameters: wte V C, wpe maxT C, per layer 12 C^2 + 13 C (weights and biases), lnf 2C
  const double P = V * C + maxT * C + L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
  // activations: per token (with the dropout masks), the attention maps, one layer's scratch
  const double per_token = C + L * (20.0 * C + 4.0) + 3.0 * C + 2.0 * V + 3.0;
  const double maps = 2.0 * L * b * NH * t * t;
  const double scratch = b * t * (15.0 * C + V) + 2.0 * b * NH * t * t;
  return 4.0 * (4.0 * P + b * t * per_token + maps + scratch);  // float32: 4 bytes each
}

bool memory_countable(const gpt::GPTConfig& c, int B, int T) {
  return memory_bytes_upper_bound(c, B, T) < std::ldexp(1.0, 62);
}

std::vector<MemoryRow> memory_table(const gpt::GPTConfig& c, int B, int T) {
  NN_CHECK(memory_countable(c, B, T),
           "B=" << B << " T=" << T << " with " << describe(c) << " would hold about " << std::scientific
                << std::setprecision(2) << memory_bytes_upper_bound(c, B, T) << std::defaultfloat
                << " bytes, more than 64-bit byte counts hold (2^62 = 4.6e18, with a margin): no machine has "
                   "that memory; choose a smaller --batch-size, --block-size, --n-layer or --n-embd");
  const gpt::MemoryBreakdown m = gpt::memory_breakdown(c, B, T);
  const i64 f = static_cast<i64>(sizeof(float));
  const i64 per_token = activation_floats_per_token(c) * B * T * f;
  const i64 maps = attention_map_floats(c, B, T) * f;
  NN_CHECK(per_token + maps == m.activations,
           "lesson 08's activation formula (" << per_token + maps << " bytes) disagrees with gpt::memory_breakdown ("
                                              << m.activations << " bytes): update activation_floats_per_token");
  std::vector<MemoryRow> rows;
  rows.push_back({"parameters", "P", m.params});
  rows.push_back({"gradients", "P", m.grads});
  rows.push_back({"AdamW m", "P", m.adam / 2});
  rows.push_back({"AdamW v", "P", m.adam - m.adam / 2});
  rows.push_back({"activations, per token", c.dropout > 0.0f ? "B T (L (20C+4) + 3C + 2V + 3)" : "B T (L (18C+4) + 2C + 2V + 3)",
                  per_token});
  rows.push_back({"activations, attention maps", "2 L B NH T^2", maps});
  rows.push_back({"backward scratch (one layer)", "B T (15C + V) + 2 B NH T^2", m.scratch});
  return rows;
}

FlopsPerToken flops_breakdown(const gpt::GPTConfig& c, int T) {
  FlopsPerToken f;
  f.n_params = gpt::num_parameters_non_embedding(c);
  f.dense = 6.0 * static_cast<double>(f.n_params);
  const double L = c.n_layer, H = c.n_head, Q = static_cast<double>(c.n_embd / c.n_head);
  f.attention = 12.0 * L * H * Q * T;
  return f;
}

// ---- part 1: shapes -----------------------------------------------------------------------

int run_shapes_part(const Options& opts) {
  std::ostream& os = std::cout;
  const gpt::TrainOptions& o = opts.train;
  gpt::use_threads(o.threads);
  os << "== Part 1: every tensor of one training step, in the order the data flows ==\n";
  const nn::TextCorpus corpus = nn::load_corpus(o.data, o.val_fraction);
  os << "data: " << corpus.description << "\n";
  const gpt::GPTConfig cfg = gpt::config_from(o, corpus.vocab.size());
  const int B = o.batch_size, T = cfg.block_size;
  os << "config: B=" << B << " T=" << T << " C=" << cfg.n_embd << " NH=" << cfg.n_head << " hs=C/NH="
     << cfg.n_embd / cfg.n_head << " L=" << cfg.n_layer << " V=" << cfg.vocab_size << " (the vocabulary of this text)"
     << ", dropout " << cfg.dropout << "\n\n";

  auto be = gpt::make_backend(o.backend);
  gpt::GPT model = gpt::gpt_create(cfg);  // made and initialised on the host,
  gpt::gpt_init_weights(model, o.seed);
  if (!be->memory().is_host()) model = gpt::gpt_move_to(model, be->memory());  // then where it runs
  os << "parameters, in checkpoint order (one flat buffer of float32; shapes as nanoGPT's state dict):\n";
  os << "  " << std::left << std::setw(28) << "name" << std::setw(14) << "shape" << std::setw(11) << "letters"
     << std::right << std::setw(10) << "count" << "  decay\n";
  i64 total = 0;
  for (const gpt::ParamSlice& s : model.slices) {
    os << "  " << std::left << std::setw(28) << s.name << std::setw(14) << nn::shape_str(s.shape) << std::setw(11)
       << symbolic_shape(s.name) << std::right << std::setw(10) << grouped(s.numel) << "  " << (s.decay ? "yes" : "no")
       << "\n";
    total += s.numel;
  }
  os << "  total " << grouped(total) << " parameters (" << size_text(total * 4) << "); without wpe (the N of 6N): "
     << grouped(gpt::num_parameters_non_embedding(cfg)) << "\n";
  os << "  wte is used twice: it embeds the input tokens AND scores the output (tied head, logits = lnf wte^T)\n\n";

  std::vector<int32_t> x, y;
  gpt::get_batch(corpus.train, B, T, o.seed, /*stream=*/1, /*index=*/0, x, y);
  os << "one batch: tokens (B, T) = (" << B << ", " << T << ") ids, targets = the same text shifted by one.\n";
  const size_t show = static_cast<size_t>(std::min(T, 48));
  os << "  x[0][:" << show << "] = \"" << visible(corpus.vocab.decode(std::span<const int32_t>(x.data(), show))) << "\"\n";
  os << "  y[0][:" << show << "] = \"" << visible(corpus.vocab.decode(std::span<const int32_t>(y.data(), show))) << "\"\n\n";

  gpt::gpt_zero_grad(model);
  gpt::gpt_forward(model, *be, x.data(), y.data(), B, T, /*train=*/true, o.seed);
  const auto views = gpt::activation_views(model);
  os << "activations of that forward (" << be->name() << " backend), in forward order:\n";
  os << "  " << std::left << std::setw(16) << "name" << std::setw(18) << "shape" << std::setw(15) << "letters"
     << std::right << std::setw(12) << "bytes" << "\n";
  i64 listed = 0;
  for (const gpt::NamedTensor& t : views) {
    i64 n = 1;
    for (i64 d : t.shape) n *= d;
    os << "  " << std::left << std::setw(16) << t.name << std::setw(18) << nn::shape_str(t.shape) << std::setw(15)
       << symbolic_shape(t.name) << std::right << std::setw(12) << grouped(n * 4) << "\n";
    listed += n * 4;
  }
  const gpt::MemoryBreakdown mem = gpt::memory_breakdown(cfg, B, T, be->keeps_preatt());
  os << "  listed " << size_text(listed) << "; kept too but not listed (LayerNorm means and 1/std"
     << (be->keeps_preatt() ? ", the pre-softmax scores preatt (B, NH, T, T) per layer" : "")
     << (cfg.dropout > 0.0f ? ", the dropout masks" : "") << "): "
     << size_text(mem.activations - listed) << "; all activations " << size_text(mem.activations) << "\n\n";

  const double uniform = std::log(static_cast<double>(cfg.vocab_size));
  os << "loss = mean of losses (B, T) = " << fixed(model.mean_loss, 4) << "   (log V = " << fixed(uniform, 4)
     << ": a fresh model guesses close to uniformly)\n";
  gpt::gpt_backward(model, *be);
  const float norm = gpt::gpt_clip_grad_norm(model, *be, 0.0f);  // 0: measure, do not clip
  os << "backward: one gradient per parameter (" << grouped(model.num_params) << " floats, same layout), global norm "
     << fixed(norm, 4) << "; activation gradients live in a scratch of ONE layer ("
     << size_text(mem.scratch) << "), reused from layer L-1 down to 0\n";
  return 0;
}

// ---- part 2: memory -----------------------------------------------------------------------

namespace {

void print_memory(std::ostream& os, const std::string& title, const gpt::GPTConfig& c, int B, int T) {
  os << title << ": " << describe(c) << ", B=" << B << " T=" << T << ", dropout " << c.dropout << ", P = "
     << grouped(gpt::num_parameters(c)) << " parameters\n";
  const auto rows = memory_table(c, B, T);
  i64 total = 0;
  for (const MemoryRow& r : rows) total += r.bytes;
  for (const MemoryRow& r : rows) {
    os << "  " << std::left << std::setw(30) << r.what << std::setw(32) << r.formula << std::right << std::setw(15)
       << grouped(r.bytes) << " B " << std::setw(11) << size_text(r.bytes) << std::setw(6)
       << fixed(100.0 * static_cast<double>(r.bytes) / static_cast<double>(total), 0) << "%\n";
  }
  os << "  " << std::left << std::setw(62) << "total" << std::right << std::setw(15) << grouped(total) << " B "
     << std::setw(11) << size_text(total) << "\n\n";
}

}  // namespace

int run_memory_part(const Options& opts) {
  std::ostream& os = std::cout;
  const gpt::TrainOptions& o = opts.train;
  os << "== Part 2: the memory of a training run (float32: 4 bytes per number) ==\n";
  const nn::TextCorpus corpus = nn::load_corpus(o.data, o.val_fraction);
  const gpt::GPTConfig cfg = gpt::config_from(o, corpus.vocab.size());
  const int B = o.batch_size, T = cfg.block_size;
  print_memory(os, "this model", cfg, B, T);
  const gpt::GPTConfig gpu = nanogpt_gpu_config();
  print_memory(os, "nanoGPT's GPU config", gpu, kNanoGptGpuBatch, gpu.block_size);

  os << "how activations grow (this model; context T = block size, so wpe grows with T too):\n";
  os << "  " << std::right << std::setw(5) << "B" << std::setw(6) << "T" << std::setw(19) << "params+grads+m+v"
     << std::setw(14) << "per token" << std::setw(16) << "attention maps" << std::setw(12) << "scratch" << std::setw(12)
     << "total" << "\n";
  const std::pair<int, int> sizes[] = {{B, T}, {2 * B, T}, {B, 2 * T}, {2 * B, 2 * T}, {B, 4 * T}};
  for (const auto& [b, t] : sizes) {
    gpt::GPTConfig c = cfg;
    c.block_size = t;
    if (!memory_countable(c, b, t)) {
      // Counting this row in int64 would overflow: say so instead of printing a wrapped number.
      os << "  " << std::setw(5) << b << std::setw(6) << t << "  about " << std::scientific << std::setprecision(2)
         << memory_bytes_upper_bound(c, b, t) << std::defaultfloat << " bytes: beyond 64-bit byte counts\n";
      continue;
    }
    const gpt::MemoryBreakdown m = gpt::memory_breakdown(c, b, t);
    const i64 maps = attention_map_floats(c, b, t) * 4;
    os << "  " << std::setw(5) << b << std::setw(6) << t << " " << std::setw(18) << size_text(m.params + m.grads + m.adam)
       << " " << std::setw(13) << size_text(m.activations - maps) << " " << std::setw(15) << size_text(maps) << " "
       << std::setw(11) << size_text(m.scratch) << " " << std::setw(11) << size_text(m.total()) << "\n";
  }
  os << "  doubling B doubles every activation; doubling T doubles the per-token part and QUADRUPLES the\n"
        "  attention maps (B NH T^2 per layer). The weights and the optimizer do not care about B or T.\n"
        "  (FlashAttention never stores the T x T maps: it recomputes them in the backward.)\n";
  return 0;
}

// ---- part 3: FLOPs and MFU ------------------------------------------------------------------

int run_flops_part(const Options& opts) {
  std::ostream& os = std::cout;
  const gpt::TrainOptions& o = opts.train;
  const int threads = gpt::use_threads(o.threads);
  os << "== Part 3: FLOPs per token, the peak, and MFU ==\n";
  kernels::warn_if_busy(os);
  const nn::TextCorpus corpus = nn::load_corpus(o.data, o.val_fraction);
  const gpt::GPTConfig cfg = gpt::config_from(o, corpus.vocab.size());
  const int B = o.batch_size, T = cfg.block_size;
  const FlopsPerToken f = flops_breakdown(cfg, T);
  const double Q = static_cast<double>(cfg.n_embd / cfg.n_head);
  os << "PaLM (Chowdhery et al. 2022, appendix B): training FLOPs per token = 6 N + 12 L H Q T\n";
  os << "  N = " << grouped(f.n_params) << " parameters (all but wpe: a lookup costs no FLOPs, but wte is also the\n"
     << "      head's (V, C) matrix, which does); every weight does one multiply-add (2 FLOPs) per token forward,\n"
     << "      two in the backward (dinp and dweight): 2N + 4N = 6N\n";
  os << "  6N             = " << std::setw(14) << grouped(static_cast<i64>(f.dense)) << " FLOP/token\n";
  os << "  12 L H Q T     = " << std::setw(14) << grouped(static_cast<i64>(f.attention)) << " FLOP/token  (L=" << cfg.n_layer
     << " H=" << cfg.n_head << " Q=" << Q << " T=" << T << ": q.k and att.v, 2 x 2 L T C forward, x3 with backward)\n";
  os << "  total          = " << std::setw(14) << grouped(static_cast<i64>(f.total())) << " FLOP/token  (attention "
     << fixed(100.0 * f.attention / f.total(), 1) << "%)\n";
  NN_CHECK(std::fabs(f.total() - gpt::flops_per_token(cfg, T)) <= 1e-6 * f.total(),
           "the lesson's split disagrees with gpt::flops_per_token");
  const double tokens = static_cast<double>(B) * T * o.grad_accum;
  const double step_flops = f.total() * tokens;
  os << "  one step: B T = " << static_cast<i64>(tokens) << " tokens -> " << fixed(step_flops / 1e9, 2) << " GFLOP\n\n";

  os << "measuring the peak: lesson 03's FMA loop (12 independent chains, " << threads << " threads) ..." << std::flush;
  const double peak = kernels::measure_fma_peak(threads, 0.2);
  os << " " << fixed(peak / 1e9, 1) << " GFLOP/s\n";
  const double ideal_ms = step_flops / peak * 1e3;
  os << "  a step at 100% MFU would take " << fixed(ideal_ms, 2) << " ms\n";
  os << "timing " << opts.flops_iters << " training steps (forward, backward, clip, AdamW; " << o.backend
     << " backend, median after 1 warm-up) ..." << std::flush;
  const double ms = gpt::time_train_step(o, o.backend, opts.flops_iters, 1);
  os << " " << fixed(ms, 1) << " ms/step, " << fixed(tokens / (ms / 1e3), 0) << " tokens/s\n";
  os << "  MFU = (FLOPs/token x tokens/s) / peak = " << fixed(100.0 * ideal_ms / ms, 1) << "%\n";
  os << "  (the peak is what THIS machine's cores do on pure FMAs right now, measured the same way as\n"
        "  lesson 03's roofline, not a datasheet number; the rest of a step is memory-bound work:\n"
        "  LayerNorm, GELU, softmax, AdamW, which the 6N count does not even include)\n";
  return 0;
}

// ---- part 4: train ---------------------------------------------------------------------------

int run_train_part(const Options& opts) {
  std::cout << "== Part 4: training the GPT (nanoGPT's Shakespeare-char CPU config unless flags say otherwise) ==\n";
  const gpt::TrainResult r = gpt::train(opts.train, std::cout);
  std::cout << "\nbest val loss " << fixed(r.best_val_loss, 4) << "; next: `nnlab lesson08 --part sample`, and the\n"
            << "notebook notebooks/08-gpt.ipynb (loss curves from " << opts.train.out_dir
            << "/log.jsonl, attention maps)\n";
  return 0;
}

// ---- part 5: sample --------------------------------------------------------------------------

int run_sample_part(const Options& opts) {
  std::ostream& os = std::cout;
  const gpt::TrainOptions& o = opts.train;
  gpt::use_threads(o.threads);
  const std::string path =
      opts.checkpoint.empty() ? (fs::path(o.out_dir) / "best.safetensors").string() : opts.checkpoint;
  NN_CHECK(fs::exists(path), "no checkpoint at " << path << ": run `nnlab lesson08 --part train` first "
                                                 << "(or pass --checkpoint FILE)");
  os << "== Part 5: sampling from " << path << " ==\n";
  gpt::LoadedCheckpoint ck = gpt::load_checkpoint(path);
  os << "model: " << describe(ck.model.config) << ", trained " << ck.state.step << " steps, best val loss "
     << fixed(ck.state.best_val_loss, 4) << "\n";
  auto be = gpt::make_backend(o.backend);
  if (!be->memory().is_host()) ck.model = gpt::gpt_move_to(ck.model, be->memory());  // loaded on the host
  gpt::SampleOptions so;
  so.prompt = o.prompt;
  so.tokens = o.sample_tokens;
  so.seed = o.seed;
  const int top_k = o.top_k > 0 ? o.top_k : 10;
  struct Setting {
    float temperature;
    int top_k;
  };
  const Setting settings[] = {{0.5f, 0}, {0.8f, 0}, {1.0f, 0}, {1.0f, top_k}};
  for (const Setting& s : settings) {
    so.temperature = s.temperature;
    so.top_k = s.top_k;
    os << "\n---- temperature " << fixed(s.temperature, 1)
       << (s.top_k > 0 ? ", top-k " + std::to_string(s.top_k) + " (only the k likeliest characters)" : "") << " ----\n"
       << so.prompt << gpt::sample(ck.model, *be, ck.vocab, so) << "\n";
  }
  os << "----\nsame seed for each: low temperatures repeat the likeliest words; 1.0 is the model's own\n"
        "distribution; top-k cuts its long tail of unlikely characters (the typos).\n";
  return 0;
}

// ---- the parts' order ------------------------------------------------------------------------

int run(const Options& opts) {
  if (opts.part == "shapes") return run_shapes_part(opts);
  if (opts.part == "memory") return run_memory_part(opts);
  if (opts.part == "flops") return run_flops_part(opts);
  if (opts.part == "train") return run_train_part(opts);
  if (opts.part == "sample") return run_sample_part(opts);
  // "all": the quick parts; training is asked for by name (minutes)
  for (auto* part : {&run_shapes_part, &run_memory_part, &run_flops_part}) {
    if (const int rc = part(opts); rc != 0) return rc;
    std::cout << "\n";
  }
  std::cout << "Training is its own part (a few minutes): nnlab lesson08 --part train\n";
  return 0;
}

}  // namespace lesson08
