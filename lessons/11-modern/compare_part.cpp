// Lesson 11, part compare: what the modern block buys, measured (compare_part.h).
//
// The question: on this machine, for the same training budget, which model predicts held-out
// Shakespeare best: lesson 08's character GPT-2, the same GPT-2 on BPE tokens, or a
// llama-style block on the same BPE tokens? Three things make the answer fair:
//
//   1. The same text. The corpus is split ONCE, by bytes: the first 90% trains, the last 10%
//      validates, for every tokenizer. The BPE is trained on the training split only (it never
//      sees validation text), then encodes each split on its own.
//   2. The same yardstick. A loss in nats per token depends on what a token is (a BPE token
//      spans ~3 characters, so its loss is larger for the same model quality). Bits per
//      character does not:
//        bpc = (sum over scored tokens of -ln p(token)) / (bytes those tokens cover) / ln 2
//      "Character" means byte of the UTF-8 text (Tiny Shakespeare is ASCII: one byte, one
//      character). Every model scores the same validation text (the whole split for the
//      record; a fixed prefix of it, --val-bytes, in the quick default run), in consecutive
//      windows of its context (score_split below), so all three are measured on the same
//      characters (all but the text's first token, which is only ever an input).
//   3. The same budget, stated: wall-clock seconds of training steps per model (evaluation is
//      not counted), the number of steps fixed up front by a short timing probe so that the
//      warm-up + cosine schedule ends exactly at the budget; the FLOPs each run spent
//      (flops_per_token x tokens) are printed too, for a reader who prefers that budget.
//      Same optimiser settings (AdamW, gpt::TrainOptions' defaults), same batch (sequences),
//      same seeds.
#include "lessons/11-modern/compare_part.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numbers>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpt/backend.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "io/bpe.h"
#include "io/progress.h"
#include "io/text.h"
#include "kernels/harness.h"
#include "lessons/11-modern/modern_lesson.h"
#include "nn/check.h"
#include "nn/cli_checks.h"

namespace lesson11 {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << v;
  return os.str();
}

// ---- the data: one split of the text, two tokenizers ------------------------------------------
// One tokenizer's view of the split: the ids of each split and how many bytes each id spells
// (what turns a sum of nats into bits per character).
struct Tokenized {
  std::string tokenizer;            // "char" or "bpe"
  int vocab_size = 0;
  std::vector<int32_t> train;       // the training split
  std::vector<int32_t> val;         // the validation text the final figure scores
  std::vector<int32_t> curve_val;   // the validation prefix the curve's points score
  std::vector<int32_t> token_bytes; // id -> its length in bytes
  double bytes_per_token = 1.0;     // on the training split
};

// The character tokenizer: id = position of the byte in the sorted vocabulary of the whole
// text (lesson 08's; every id spells one byte).
Tokenized char_tokens(const nn::TextCorpus& corpus, size_t val_bytes, size_t curve_bytes) {
  Tokenized t;
  t.tokenizer = "char";
  t.vocab_size = corpus.vocab.size();
  t.train = corpus.train;
  t.val.assign(corpus.val.begin(), corpus.val.begin() + static_cast<std::ptrdiff_t>(val_bytes));
  t.curve_val.assign(corpus.val.begin(), corpus.val.begin() + static_cast<std::ptrdiff_t>(curve_bytes));
  t.token_bytes.assign(static_cast<size_t>(t.vocab_size), 1);
  return t;
}

// The BPE: trained on the training split's text only, then each split encoded on its own (a
// token never spans the boundary, which is the same byte for both tokenizers). `val_text` is
// the validation text scored (the split or its prefix).
Tokenized bpe_tokens(const std::string& train_text, const std::string& val_text, size_t curve_bytes, int vocab_size,
                     nn::BpeTrainVersion version, double* train_seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  const nn::BpeTokenizer bpe = nn::BpeTokenizer::train(train_text, vocab_size, {}, version);
  *train_seconds = seconds_since(t0);
  Tokenized t;
  t.tokenizer = "bpe";
  t.vocab_size = bpe.vocab_size();
  t.train = bpe.encode(train_text);
  t.val = bpe.encode(val_text);
  t.curve_val = bpe.encode(std::string_view(val_text).substr(0, curve_bytes));
  for (const std::string& bytes : bpe.vocab()) t.token_bytes.push_back(static_cast<int32_t>(bytes.size()));
  t.bytes_per_token = static_cast<double>(train_text.size()) / static_cast<double>(t.train.size());
  // decode(encode(x)) == x is io/bpe's contract (tests/test_bpe.cpp); the byte counts
  // must add up to the text, or bits per character would be wrong
  int64_t val_bytes = 0;
  for (int32_t id : t.val) val_bytes += t.token_bytes[static_cast<size_t>(id)];
  NN_CHECK(val_bytes == static_cast<int64_t>(val_text.size()),
           "the BPE's validation tokens spell " << val_bytes << " bytes, the split has " << val_text.size());
  return t;
}

// ---- the three models ------------------------------------------------------------------------
struct ModelSpec {
  std::string name;       // char-gpt2 | bpe-gpt2 | bpe-llama
  const Tokenized* data;  // its tokens
  gpt::GPTConfig config;
  int T = 0;              // its context in tokens (= config.block_size)
};

ModelSpec make_spec(const std::string& name, const Tokenized& data, const CompareOptions& o, int T) {
  gpt::TrainOptions to;  // lesson 08's trainer: its block (biases, no dropout)
  to.n_layer = o.n_layer;
  to.n_head = o.n_head;
  to.n_embd = o.n_embd;
  to.block_size = T;
  if (name == "bpe-llama") {
    // the same width, depth and heads; what changes is the block (gpt/model.h's Arch), as
    // `nnlab gpt train --arch llama --n-kv-head N` builds it: RMSNorm, RoPE instead of wpe,
    // SwiGLU at the default width (8C/3 rounded up to 32: about the parameters of the 4C GELU
    // MLP), grouped-query attention (flash, the trainer's default for llama), no biases, the
    // head tied to wte as GPT-2's (so the embedding counts the same)
    to.arch = "llama";
    to.n_kv_head = o.n_kv_head > 0 ? o.n_kv_head : std::max(1, o.n_head / 2);
  }
  const gpt::GPTConfig c = gpt::config_from(to, data.vocab_size);
  if (c.arch == gpt::Arch::llama) {
    // a build without the llama block would silently train a GPT-2 here: refuse instead (the
    // llama block has no position table, RoPE rotates q and k)
    for (const gpt::ParamSlice& slice : gpt::param_slices(c)) {
      NN_CHECK(slice.name != "wpe", "this build's GPT gives arch = llama a learned position table (wpe): the llama "
                                    "block is not in gpt/model.cpp. Run with --models char-gpt2,bpe-gpt2");
    }
  }
  return {name, &data, c, T};
}

// ---- bits per character -----------------------------------------------------------------------
struct Score {
  double nats = 0.0;   // sum of -ln p(target) over the scored tokens
  int64_t bytes = 0;   // the bytes those tokens spell
  int64_t tokens = 0;
  double bpc() const { return bytes > 0 ? nats / static_cast<double>(bytes) / std::numbers::ln2 : 0.0; }
};

// Scores every token of `tokens` but the first: consecutive windows of T + 1 tokens, each
// window's inputs [i, i + T) predicting [i + 1, i + T + 1), the next window starting where the
// last one's targets ended. Each token is scored once, seeing the tokens of its own window
// before it (0 .. T - 1 of them: on average half the context, the same for every model since
// the contexts cover about the same characters). The model's per-position losses
// (acts.losses, nats) are summed in double on the host.
Score score_split(gpt::GPT& model, gpt::Backend& be, const std::vector<int32_t>& tokens,
                  const std::vector<int32_t>& token_bytes, int T, int B) {
  Score s;
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> x, y;
  std::vector<float> losses;
  int64_t start = 0;
  while (start + 1 < n) {
    // as many full windows as fit in one batch, or the last (shorter) window alone
    const int len = static_cast<int>(std::min<int64_t>(T, n - 1 - start));
    int b = 0;
    x.clear();
    y.clear();
    while (b < B && start + 1 < n && std::min<int64_t>(T, n - 1 - start) == len) {
      for (int t = 0; t < len; ++t) {
        x.push_back(tokens[static_cast<size_t>(start + t)]);
        y.push_back(tokens[static_cast<size_t>(start + t + 1)]);
      }
      start += len;
      ++b;
    }
    gpt::gpt_forward(model, be, x.data(), y.data(), b, len, /*train=*/false);
    losses.resize(static_cast<size_t>(b) * len);
    gpt::gpt_memory(model).to_host(losses.data(), model.acts.losses, losses.size() * sizeof(float));
    for (size_t i = 0; i < losses.size(); ++i) {
      s.nats += losses[i];
      s.bytes += token_bytes[static_cast<size_t>(y[i])];
    }
    s.tokens += static_cast<int64_t>(losses.size());
  }
  return s;
}

// ---- one run: a model, a seed, the budget --------------------------------------------------------
struct CurvePoint {
  int step = 0;
  double seconds = 0.0;  // training seconds so far (evaluation not counted)
  double val_bpc = 0.0;
};
struct RunResult {
  std::string name;
  int seed = 0;
  int64_t params = 0;
  int steps = 0;
  double train_seconds = 0.0;
  double tokens_per_s = 0.0;
  int64_t train_tokens = 0;
  int64_t train_bytes = 0;  // the bytes of text the training targets spelled
  double flops = 0.0;       // flops_per_token x train_tokens
  int64_t memory_bytes = 0; // gpt::memory_breakdown's total at (B, T)
  double final_val_bpc = 0.0;
  int64_t val_bytes_scored = 0;
  int64_t val_tokens_scored = 0;
  int vocab_size = 0, context = 0;
  std::vector<CurvePoint> curve;
};

// The learning rate of every run: nanoGPT's schedule (gpt::learning_rate's formula with
// gpt::TrainOptions' lr 1e-3 -> min_lr 1e-4), written on the run's PROGRESS p in [0, 1]
// instead of its step: p = step / iters with --iters (then it is learning_rate's schedule), and
// p = training seconds / budget under a time budget, so that the cosine reaches min_lr exactly
// when the budget is spent, whatever speed the machine runs at. (A step count fixed up front
// from a timing probe would overshoot or stop short of the budget when the load changes
// mid-run, and this machine is shared.)
//   step < W:   lr * (step + 1) / W                       W = min(100, planned steps / 10)
//   after:      min_lr + (lr - min_lr) (1 + cos(pi r)) / 2,   r = (p - pW) / (1 - pW)
// where pW is the progress at which the warm-up ended.
class Schedule {
 public:
  explicit Schedule(int planned_steps) : warmup_(std::max(1, std::min(100, planned_steps / 10))) {}
  int warmup() const { return warmup_; }
  float at(int step, double p) {
    if (step < warmup_) return lr_ * static_cast<float>(step + 1) / static_cast<float>(warmup_);
    if (step == warmup_) p_warm_ = p;
    if (p_warm_ >= 1.0) return min_lr_;
    const double r = std::clamp((p - p_warm_) / (1.0 - p_warm_), 0.0, 1.0);
    const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * r));
    return static_cast<float>(min_lr_ + coeff * (lr_ - min_lr_));
  }

 private:
  const float lr_ = gpt::TrainOptions().lr, min_lr_ = gpt::TrainOptions().min_lr;
  int warmup_;
  double p_warm_ = 0.0;
};

gpt::StepOptions step_options_of(const gpt::TrainOptions& to) {
  gpt::StepOptions so;
  so.adamw.beta1 = to.beta1;
  so.adamw.beta2 = to.beta2;
  so.adamw.eps = to.eps;
  so.adamw.weight_decay = to.weight_decay;
  so.grad_clip = to.grad_clip;
  so.train = true;
  return so;
}

constexpr uint64_t kTrainStream = 1;  // get_batch's stream of training batches

// Seconds per training step of `spec`: a throw-away model, 2 untimed steps (first-touch
// allocations, caches), then the median of 5 timed ones.
double probe_step_seconds(const ModelSpec& spec, gpt::Backend& be, int B) {
  gpt::GPT model = gpt::gpt_create(spec.config, be.memory());
  gpt::gpt_init_weights(model, 0x5eed);
  gpt::StepOptions so = step_options_of(gpt::TrainOptions());
  std::vector<int32_t> x, y;
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    gpt::get_batch(spec.data->train, B, spec.T, 0x5eed, kTrainStream, static_cast<uint64_t>(i), x, y);
    const auto t0 = std::chrono::steady_clock::now();
    gpt::train_step(model, be, {{x.data(), y.data(), 0}}, B, spec.T, so);
    be.synchronize();
    if (i >= 2) times.push_back(seconds_since(t0));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One run. `planned` steps: --iters (the run is exactly that many), or the budget over the
// probed step time (then it only sizes the warm-up: the run ends when the budget is spent).
RunResult train_one(const ModelSpec& spec, gpt::Backend& be, int seed, int planned, const CompareOptions& o) {
  const Tokenized& data = *spec.data;
  const int B = o.batch_size, T = spec.T;
  const bool by_steps = o.iters > 0;
  RunResult r;
  r.name = spec.name;
  r.seed = seed;
  gpt::GPT model = gpt::gpt_create(spec.config, be.memory());
  gpt::gpt_init_weights(model, static_cast<uint64_t>(seed));
  r.params = model.num_params;
  r.vocab_size = spec.config.vocab_size;
  r.context = T;
  r.memory_bytes = gpt::memory_breakdown(spec.config, B, T, be.keeps_preatt()).total();

  Schedule schedule(planned);
  gpt::StepOptions so = step_options_of(gpt::TrainOptions());
  auto progress = [&](int steps_done) {
    return by_steps ? static_cast<double>(steps_done) / o.iters : r.train_seconds / o.budget_s;
  };
  // the curve: step 0, then a point each time the progress passes k / curve_points; the last
  // point is the end of the run (the final figure itself when the curve scores the same text)
  const bool curve_is_final = data.curve_val.size() == data.val.size();
  auto point = [&](int step) {
    const Score s = score_split(model, be, data.curve_val, data.token_bytes, T, B);
    r.curve.push_back({step, r.train_seconds, s.bpc()});
  };
  point(0);
  int next_point = 1;

  // the bar counts steps, or per mille of the time budget
  constexpr int64_t kPerMille = 1000;
  nn::ProgressBar bar(spec.name + " seed " + std::to_string(seed), by_steps ? o.iters : kPerMille, std::cout, 5.0);
  std::vector<int32_t> x, y;
  int step = 0;
  while (by_steps ? step < o.iters : r.train_seconds < o.budget_s) {
    const auto t0 = std::chrono::steady_clock::now();
    gpt::get_batch(data.train, B, T, static_cast<uint64_t>(seed), kTrainStream, static_cast<uint64_t>(step), x, y);
    so.lr = schedule.at(step, progress(step));
    const gpt::StepResult sr = gpt::train_step(model, be, {{x.data(), y.data(), 0}}, B, T, so);
    be.synchronize();
    r.train_seconds += seconds_since(t0);
    ++step;
    for (int32_t id : y) r.train_bytes += data.token_bytes[static_cast<size_t>(id)];
    r.train_tokens += static_cast<int64_t>(B) * T;
    const double p = progress(step);
    bar.update(by_steps ? step : std::min<int64_t>(kPerMille, std::llround(p * kPerMille)),
               {{"step", std::to_string(step)}, {"loss", fixed(sr.loss, 4)},
                {"tok/s", nn::format_si(static_cast<double>(r.train_tokens) / r.train_seconds)}});
    if (next_point < o.curve_points && p >= static_cast<double>(next_point) / o.curve_points) {
      point(step);
      ++next_point;
    }
  }
  bar.finish({{"steps", std::to_string(step)}, {"s", fixed(r.train_seconds, 1)}});
  r.steps = step;
  r.tokens_per_s = r.train_seconds > 0 ? static_cast<double>(r.train_tokens) / r.train_seconds : 0.0;
  r.flops = gpt::flops_per_token(spec.config, T) * static_cast<double>(r.train_tokens);

  const Score final_score = score_split(model, be, data.val, data.token_bytes, T, B);
  NN_CHECK(final_score.bytes > 0, "the validation text is " << data.val.size() << " " << data.tokenizer
                                   << " token(s): nothing to score. Use a longer text (--data) or a larger --val-bytes");
  r.final_val_bpc = final_score.bpc();
  r.val_bytes_scored = final_score.bytes;
  r.val_tokens_scored = final_score.tokens;
  if (curve_is_final) {
    r.curve.push_back({step, r.train_seconds, r.final_val_bpc});
  } else {
    point(step);
  }
  return r;
}

// ---- the verdict -----------------------------------------------------------------------------
struct Summary {
  std::string name;
  int runs = 0;
  double mean_bpc = 0.0, min_bpc = 0.0, max_bpc = 0.0;
  double tokens_per_s = 0.0, bytes_per_s = 0.0, flops = 0.0;
  int64_t params = 0, memory_bytes = 0;
  double steps = 0.0;  // mean over the seeds (a time budget gives each run its own count)
};

std::vector<Summary> summarise(const std::vector<std::string>& names, const std::vector<RunResult>& runs) {
  std::vector<Summary> out;
  for (const std::string& name : names) {
    Summary s;
    s.name = name;
    s.min_bpc = 1e30;
    s.max_bpc = -1e30;
    double seconds = 0.0;
    int64_t bytes = 0;
    for (const RunResult& r : runs) {
      if (r.name != name) continue;
      ++s.runs;
      s.mean_bpc += r.final_val_bpc;
      s.min_bpc = std::min(s.min_bpc, r.final_val_bpc);
      s.max_bpc = std::max(s.max_bpc, r.final_val_bpc);
      s.tokens_per_s += r.tokens_per_s;
      s.flops += r.flops;
      seconds += r.train_seconds;
      bytes += r.train_bytes;
      s.params = r.params;
      s.memory_bytes = r.memory_bytes;
      s.steps += r.steps;
    }
    if (s.runs == 0) continue;
    s.mean_bpc /= s.runs;
    s.tokens_per_s /= s.runs;
    s.flops /= s.runs;
    s.steps /= s.runs;
    s.bytes_per_s = seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
    out.push_back(s);
  }
  return out;
}

// One pairwise comparison in words: who is lower, by how much, and whether the seeds agree.
std::string versus(const Summary& a, const Summary& b) {
  const Summary& lo = a.mean_bpc <= b.mean_bpc ? a : b;
  const Summary& hi = a.mean_bpc <= b.mean_bpc ? b : a;
  const double gap = hi.mean_bpc - lo.mean_bpc;
  std::ostringstream os;
  os << lo.name << " beats " << hi.name << " by " << fixed(gap, 3) << " bpc (" << fixed(100.0 * gap / hi.mean_bpc, 1)
     << "% lower)";
  if (lo.runs >= 2 && hi.runs >= 2) {
    const double spread = std::max(lo.max_bpc - lo.min_bpc, hi.max_bpc - hi.min_bpc);
    if (lo.max_bpc < hi.min_bpc) {
      os << "; every seed of " << lo.name << " is below every seed of " << hi.name << " (largest seed spread "
         << fixed(spread, 3) << " bpc)";
    } else {
      os << "; but the seeds overlap (largest seed spread " << fixed(spread, 3)
         << " bpc): not a clear difference at this budget";
    }
  } else {
    os << "; one seed each: the seed spread is not measured (use --seeds 1,2,3)";
  }
  return os.str();
}

std::vector<std::string> conclusions(const std::vector<Summary>& sums) {
  std::vector<std::string> out;
  if (sums.empty()) return out;
  std::vector<Summary> ranked = sums;
  std::sort(ranked.begin(), ranked.end(), [](const Summary& a, const Summary& b) { return a.mean_bpc < b.mean_bpc; });
  std::ostringstream win;
  win << "At this budget " << ranked[0].name << " wins with " << fixed(ranked[0].mean_bpc, 3)
      << " bits per character (mean of " << ranked[0].runs << " seed" << (ranked[0].runs == 1 ? "" : "s") << ")";
  if (ranked.size() >= 2) win << "; " << versus(ranked[0], ranked[1]) << ".";
  out.push_back(win.str());
  auto find = [&](const std::string& name) -> const Summary* {
    for (const Summary& s : sums)
      if (s.name == name) return &s;
    return nullptr;
  };
  const Summary* ch = find("char-gpt2");
  const Summary* bg = find("bpe-gpt2");
  const Summary* bl = find("bpe-llama");
  if (ch != nullptr && bg != nullptr) out.push_back("What BPE buys (same GPT-2 block): " + versus(*ch, *bg) + ".");
  if (bg != nullptr && bl != nullptr) out.push_back("What the llama block buys (same BPE tokens): " + versus(*bg, *bl) + ".");
  // throughput in text, not tokens: a BPE token is several characters
  std::ostringstream speed;
  speed << "Training speed in characters of text per second:";
  for (const Summary& s : sums) speed << " " << s.name << " " << nn::format_si(s.bytes_per_s) << "/s;";
  out.push_back(speed.str());
  return out;
}

// ---- the records ------------------------------------------------------------------------------
std::string machine_line(const gpt::Backend& be, int threads) {
  const kernels::harness::MachineInfo m = kernels::harness::machine_info();
  std::ostringstream os;
  os << m.cpu << ", " << m.cores << " cores, " << threads << " thread" << (threads == 1 ? "" : "s") << ", backend "
     << be.name() << ", " << m.compiler << " " << m.flags << ", " << m.date;
  return os.str();
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double load = -1.0;
  if (f) f >> load;
  return load;
}

struct Setup {
  std::string machine;
  std::string corpus;
  int64_t non_ascii_bytes = 0;  // bytes >= 0x80: "character" means byte of the UTF-8 text
  int64_t corpus_bytes = 0, train_split_bytes = 0, val_split_bytes = 0, val_bytes = 0, curve_bytes = 0;
  int char_context = 0, bpe_context = 0, bpe_vocab = 0;
  double bpe_bytes_per_token = 0.0, bpe_train_seconds = 0.0;
  double load_start = 0.0, load_end = 0.0;
  std::map<std::string, int> planned;          // per model: --iters, or budget / probed step time
  std::map<std::string, double> probe_step_s;  // per model (0: --iters, no probe)
};

// The timing commands' rule (kernels/clock.h, warn_if_busy): busy when the 1-minute load
// average was above the hardware threads (the run itself counts up to its own threads).
bool busy(const Setup& s) {
  const double cores = static_cast<double>(std::thread::hardware_concurrency());
  return cores > 0 && (s.load_start > cores || s.load_end > cores);
}

std::string budget_json(const CompareOptions& o, const Setup& s) {
  using kernels::harness::json_number;
  using kernels::harness::json_string;
  std::ostringstream os;
  os << "{\"kind\": "
     << json_string(o.iters > 0 ? "steps per model"
                                : "wall-clock seconds of training steps per model (evaluation excluded); "
                                  "the cosine schedule runs on time and ends at the budget")
     << ", \"seconds_per_model\": " << json_number(o.iters > 0 ? 0.0 : o.budget_s)
     << ", \"fixed_iters\": " << o.iters << ", \"planned_steps\": {";
  bool first = true;
  for (const auto& [name, n] : s.planned) {
    os << (first ? "" : ", ") << json_string(name) << ": " << n;
    first = false;
  }
  os << "}, \"probe_step_seconds\": {";
  first = true;
  for (const auto& [name, v] : s.probe_step_s) {
    os << (first ? "" : ", ") << json_string(name) << ": " << json_number(v);
    first = false;
  }
  const gpt::TrainOptions to;
  os << "}, \"batch_size\": " << o.batch_size << ", \"lr\": " << json_number(to.lr) << ", \"min_lr\": "
     << json_number(to.min_lr) << ", \"warmup\": \"min(100, planned_steps/10) steps\", \"weight_decay\": "
     << json_number(to.weight_decay) << ", \"betas\": [" << json_number(to.beta1) << ", " << json_number(to.beta2)
     << "], \"grad_clip\": " << json_number(to.grad_clip) << ", \"n_layer\": " << o.n_layer
     << ", \"n_head\": " << o.n_head << ", \"n_embd\": " << o.n_embd
     << ", \"n_kv_head_llama\": " << (o.n_kv_head > 0 ? o.n_kv_head : std::max(1, o.n_head / 2))
     << ", \"char_context\": " << s.char_context << ", \"bpe_context\": " << s.bpe_context
     << ", \"bpe_vocab_size\": " << s.bpe_vocab << ", \"bpe_bytes_per_token\": " << json_number(s.bpe_bytes_per_token)
     << ", \"bpe_train_seconds\": " << json_number(s.bpe_train_seconds) << ", \"corpus\": " << json_string(s.corpus)
     << ", \"corpus_bytes\": " << s.corpus_bytes << ", \"non_ascii_bytes\": " << s.non_ascii_bytes << ", \"train_split_bytes\": " << s.train_split_bytes
     << ", \"val_split_bytes\": " << s.val_split_bytes << ", \"val_text_bytes\": " << s.val_bytes
     << ", \"curve_val_bytes\": " << s.curve_bytes
     << ", \"memory\": \"gpt::memory_breakdown bytes (params, grads, AdamW, activations, scratch) at (B, T)\""
     << ", \"flops\": \"flops_per_token(config, T) x training tokens\""
     << ", \"loadavg_start\": " << json_number(s.load_start) << ", \"loadavg_end\": " << json_number(s.load_end) << "}";
  return os.str();
}

void write_file(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream f(tmp);
    NN_CHECK(f.good(), "cannot write " << tmp.string() << ": check that the folder is writable");
    f << text;
    NN_CHECK(f.good(), "writing " << tmp.string() << " failed (disk full?)");
  }
  fs::rename(tmp, p);
  std::printf("wrote %s\n", p.string().c_str());
}

std::string runs_json(const CompareOptions& o, const Setup& s, const std::vector<RunResult>& runs) {
  using kernels::harness::json_number;
  using kernels::harness::json_string;
  std::ostringstream os;
  os << "{\"machine\": " << json_string(s.machine) << ",\n \"budget\": " << budget_json(o, s) << ",\n \"runs\": [";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    os << (i == 0 ? "\n  " : ",\n  ") << "{\"name\": " << json_string(r.name) << ", \"seed\": " << r.seed
       << ", \"params\": " << r.params << ", \"tokens_per_s\": " << json_number(r.tokens_per_s)
       << ", \"train_bytes\": " << r.train_bytes << ", \"final_val_bpc\": " << json_number(r.final_val_bpc)
       << ", \"steps\": " << r.steps << ", \"train_seconds\": " << json_number(r.train_seconds)
       << ", \"train_tokens\": " << r.train_tokens << ", \"flops\": " << json_number(r.flops)
       << ", \"memory_bytes\": " << r.memory_bytes << ", \"val_bytes_scored\": " << r.val_bytes_scored
       << ", \"val_tokens_scored\": " << r.val_tokens_scored << ", \"vocab_size\": " << r.vocab_size
       << ", \"context\": " << r.context << ", \"curve\": [";
    for (size_t k = 0; k < r.curve.size(); ++k) {
      const CurvePoint& p = r.curve[k];
      os << (k == 0 ? "" : ", ") << "{\"step\": " << p.step << ", \"seconds\": " << json_number(p.seconds)
         << ", \"val_bpc\": " << json_number(p.val_bpc) << "}";
    }
    os << "]}";
  }
  os << "\n ]}\n";
  return os.str();
}

std::string summary_table(const std::vector<Summary>& sums, bool markdown) {
  std::ostringstream os;
  char line[512];
  if (markdown) {
    os << "| model | params | steps | val bpc (mean) | seeds min..max | tokens/s | chars/s | FLOPs spent | "
          "training memory |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  } else {
    std::snprintf(line, sizeof line, "%-10s %9s %6s %9s %17s %9s %9s %8s %10s\n", "model", "params", "steps", "val bpc",
                  "seeds min..max", "tokens/s", "chars/s", "FLOPs", "memory");
    os << line;
  }
  for (const Summary& s : sums) {
    const std::string range = fixed(s.min_bpc, 3) + ".." + fixed(s.max_bpc, 3);
    const std::string mem = fixed(static_cast<double>(s.memory_bytes) / (1 << 20), 1) + " MiB";
    if (markdown) {
      os << "| " << s.name << " | " << s.params << " | " << fixed(s.steps, 0) << " | " << fixed(s.mean_bpc, 3) << " | " << range
         << " | " << nn::format_si(s.tokens_per_s) << " | " << nn::format_si(s.bytes_per_s) << " | "
         << nn::format_si(s.flops) << " | " << mem << " |\n";
    } else {
      std::snprintf(line, sizeof line, "%-10s %9lld %6.0f %9.3f %17s %9s %9s %8s %10s\n", s.name.c_str(),
                    static_cast<long long>(s.params), s.steps, s.mean_bpc, range.c_str(),
                    nn::format_si(s.tokens_per_s).c_str(), nn::format_si(s.bytes_per_s).c_str(), nn::format_si(s.flops).c_str(),
                    mem.c_str());
      os << line;
    }
  }
  return os.str();
}

std::string markdown_record(const CompareOptions& o, const Setup& s, const std::vector<RunResult>& runs,
                            const std::vector<Summary>& sums, const std::vector<std::string>& verdict,
                            const std::string& command) {
  std::ostringstream os;
  os << "# Lesson 11: char GPT-2 vs BPE GPT-2 vs BPE llama under one budget\n\n"
     << "Written by `lesson11 --part compare` (lessons/11-modern/compare_part.cpp); the numbers below are "
        "what that run measured, the JSON beside this file has every run and its curve.\n\n"
     << "- machine: " << s.machine << "\n"
     << "- load average: " << fixed(s.load_start, 2) << " at the start, " << fixed(s.load_end, 2) << " at the end"
     << (busy(s) ? " (**measured under load**: above the hardware threads, other processes shared the cores)" : "")
     << "\n"
     << "- command: `" << command << "` (the record: `bash scripts/bench_lesson11.sh`, knobs BUDGET, SEEDS, "
        "VOCAB, THREADS)\n"
     << "- corpus: " << s.corpus << "; " << s.corpus_bytes << " bytes"
     << (s.non_ascii_bytes == 0 ? std::string(", all ASCII: one byte is one character")
                                : ", " + std::to_string(s.non_ascii_bytes) + " of them outside ASCII (bpc counts UTF-8 bytes)")
     << "; "
     << "train split = the first " << s.train_split_bytes << " bytes, validation = the last " << s.val_split_bytes
     << " bytes, the same boundary for both tokenizers\n"
     << "- budget: ";
  if (o.iters > 0) {
    os << o.iters << " steps per model (fixed with --iters)";
  } else {
    os << fixed(o.budget_s, 0) << " s of training steps per model (wall clock; evaluation not counted); the "
       << "learning rate's cosine runs on the elapsed share of the budget and reaches its minimum at the end; a "
       << "timing probe (median of 5 steps) sizes the warm-up:";
    for (const auto& [name, n] : s.planned) {
      os << " " << name << " " << fixed(1e3 * s.probe_step_s.at(name), 1) << " ms/step, ~" << n << " steps;";
    }
  }
  os << "\n- models: " << o.n_layer << " layers, " << o.n_head << " heads, " << o.n_embd << " wide; char-gpt2 context "
     << s.char_context << " characters; BPE: vocabulary " << s.bpe_vocab << " trained on the train split in "
     << fixed(s.bpe_train_seconds, 1) << " s, " << fixed(s.bpe_bytes_per_token, 2)
     << " bytes per token there, so context " << s.bpe_context << " tokens ~ "
     << fixed(s.bpe_context * s.bpe_bytes_per_token, 0) << " characters; bpe-llama: RMSNorm, RoPE, SwiGLU (default "
     << "width), " << (o.n_kv_head > 0 ? o.n_kv_head : std::max(1, o.n_head / 2)) << " key/value heads, no biases, "
     << "tied head\n"
     << "- optimiser (all runs): AdamW lr 1e-3 -> 1e-4 (warm-up min(100, steps/10), cosine to the last step), "
     << "weight decay 0.1, betas (0.9, 0.99), clip 1.0, batch " << o.batch_size << " sequences\n"
     << "- validation: bits per character over "
     << (s.val_bytes == s.val_split_bytes ? std::string("the WHOLE validation split")
                                          : "the first " + std::to_string(s.val_bytes) + " bytes of the validation split")
     << " (every token but the first, in consecutive windows of the context); the curve's points score "
     << (s.curve_bytes == s.val_bytes ? std::string("the same text")
                                      : "its first " + std::to_string(s.curve_bytes) + " bytes")
     << "\n- memory: gpt::memory_breakdown at (B, T) (parameters, gradients, AdamW moments, activations, backward "
        "scratch), not a measured RSS\n\n"
     << "## Results\n\n"
     << summary_table(sums, true) << "\n";
  os << "Per seed:\n\n| model | seed | val bpc | steps | train s | tokens/s |\n|---|---:|---:|---:|---:|---:|\n";
  for (const RunResult& r : runs) {
    os << "| " << r.name << " | " << r.seed << " | " << fixed(r.final_val_bpc, 4) << " | " << r.steps << " | "
       << fixed(r.train_seconds, 1) << " | " << nn::format_si(r.tokens_per_s) << " |\n";
  }
  os << "\n## Conclusion (computed from the numbers above)\n\n";
  for (const std::string& line : verdict) os << "- " << line << "\n";
  return os.str();
}

std::string command_line(const Options& opts, const CompareOptions& o) {
  std::ostringstream os;
  os << "lesson11 --part compare";
  if (!opts.data.empty()) os << " --data " << opts.data;
  os << " --vocab-size " << opts.vocab_size;
  if (o.iters > 0) {
    os << " --iters " << o.iters;
  } else {
    os << " --budget-s " << fixed(o.budget_s, 0);
  }
  os << " --seeds ";
  for (size_t i = 0; i < o.seeds.size(); ++i) os << (i ? "," : "") << o.seeds[i];
  os << " --n-layer " << o.n_layer << " --n-head " << o.n_head << " --n-embd " << o.n_embd << " --char-context "
     << o.char_context;
  if (o.bpe_context > 0) os << " --bpe-context " << o.bpe_context;
  os << " --val-bytes " << o.val_bytes << " --curve-bytes " << o.curve_bytes << " --curve-points " << o.curve_points
     << " --batch-size " << o.batch_size;
  if (o.n_kv_head > 0) os << " --n-kv-head " << o.n_kv_head;
  os << " --compare-backend " << o.backend;
  if (o.threads > 0) os << " --compare-threads " << o.threads;
  return os.str();
}

}  // namespace

// ---- the options -----------------------------------------------------------------------------
void add_compare_options(CLI::App& app, CompareOptions& o) {
  app.add_option("--budget-s", o.budget_s, "compare: seconds of training per model (wall clock; evaluation excluded)")
      ->check(nn::FiniteRange(0.1, 1e6))
      ->capture_default_str();
  app.add_option("--iters", o.iters, "compare: steps per model instead of a time budget (0: from --budget-s)")
      ->check(CLI::Range(0, 10000000))
      ->capture_default_str();
  app.add_option("--seeds", o.seeds, "compare: one run per model per seed, e.g. 1,2,3")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--models", o.models, "compare: which of char-gpt2, bpe-gpt2, bpe-llama")
      ->delimiter(',')
      ->check(CLI::IsMember({"char-gpt2", "bpe-gpt2", "bpe-llama"}))
      ->capture_default_str();
  app.add_option("--n-layer", o.n_layer, "compare: layers")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--n-head", o.n_head, "compare: attention (query) heads")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--n-embd", o.n_embd, "compare: width C")->check(CLI::Range(2, 8192))->capture_default_str();
  app.add_option("--n-kv-head", o.n_kv_head, "compare: bpe-llama's key/value heads (0: n-head / 2)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--char-context", o.char_context, "compare: char-gpt2's context in characters")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  app.add_option("--bpe-context", o.bpe_context,
                 "compare: the BPE models' context in tokens (0: char-context / bytes per token)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "compare: sequences per step")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--curve-points", o.curve_points, "compare: validation points on each curve")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--val-bytes", o.val_bytes,
                 "compare: the final figure scores this prefix of the validation split (0: all of it)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--curve-bytes", o.curve_bytes,
                 "compare: the curve's points score this prefix of the validation split (0: as --val-bytes)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--compare-backend", o.backend, "compare: naive, cpu or cuda")
      ->check(CLI::IsMember({"naive", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--compare-threads", o.threads, "compare: OpenMP threads (0: the default)")
      ->check(nn::ThreadCount())
      ->capture_default_str();
  app.add_option("--compare-json", o.json, "compare: write every run and its curve here (JSON)");
  app.add_option("--compare-md", o.md, "compare: write the markdown record here");
}

// ---- the part ------------------------------------------------------------------------------------
int run_compare_part(const Options& opts) {
  const CompareOptions& o = opts.compare;
  NN_CHECK(!o.seeds.empty(), "--seeds needs at least one seed");
  NN_CHECK(!o.models.empty(), "--models needs at least one of char-gpt2, bpe-gpt2, bpe-llama");
  const int threads = gpt::use_threads(o.threads);
  auto be = gpt::make_backend(o.backend);

  // the split: by bytes, the same boundary for every tokenizer
  const nn::TextCorpus corpus = nn::load_corpus(opts.data, 0.1);
  const size_t split = corpus.train.size();  // character ids are bytes: ids before = bytes before
  const std::string train_text = corpus.text.substr(0, split);
  const std::string val_text = corpus.text.substr(split);
  const size_t val_bytes =
      o.val_bytes > 0 ? std::min(val_text.size(), static_cast<size_t>(o.val_bytes)) : val_text.size();
  const size_t curve_bytes = o.curve_bytes > 0 ? std::min(val_bytes, static_cast<size_t>(o.curve_bytes)) : val_bytes;
  const std::string scored_text = val_text.substr(0, val_bytes);

  Setup s;
  s.machine = machine_line(*be, threads);
  s.corpus = corpus.description;
  s.corpus_bytes = static_cast<int64_t>(corpus.text.size());
  s.non_ascii_bytes = std::count_if(corpus.text.begin(), corpus.text.end(),
                                    [](char ch) { return static_cast<unsigned char>(ch) >= 0x80; });
  s.train_split_bytes = static_cast<int64_t>(train_text.size());
  s.val_split_bytes = static_cast<int64_t>(val_text.size());
  s.curve_bytes = static_cast<int64_t>(curve_bytes);
  s.val_bytes = static_cast<int64_t>(val_bytes);
  s.char_context = o.char_context;
  s.load_start = load_average();

  std::printf("== part compare: char GPT-2 vs BPE GPT-2 vs BPE llama, one budget\n");
  std::printf("corpus: %s\n", corpus.description.c_str());
  std::printf("split: train = first %zu bytes, validation = last %zu bytes (the same for both tokenizers); "
              "bits per character count bytes: %s\n",
              train_text.size(), val_text.size(),
              s.non_ascii_bytes == 0 ? "the text is ASCII, one byte = one character"
                                     : (std::to_string(s.non_ascii_bytes) + " bytes are outside ASCII").c_str());
  std::printf("machine: %s; load average %.2f\n", s.machine.c_str(), s.load_start);

  std::printf("validation scored: %s (%zu bytes); the curve's points: the first %zu bytes\n",
              val_bytes == val_text.size() ? "the whole split" : "its first bytes (--val-bytes)", val_bytes,
              curve_bytes);

  const Tokenized chars = char_tokens(corpus, val_bytes, curve_bytes);
  const bool want_bpe = std::any_of(o.models.begin(), o.models.end(), [](const std::string& m) { return m != "char-gpt2"; });
  Tokenized bpe;
  if (want_bpe) {
    const auto version = opts.trainer == "v1" ? nn::BpeTrainVersion::v1_plain : nn::BpeTrainVersion::v2_incremental;
    bpe = bpe_tokens(train_text, scored_text, curve_bytes, opts.vocab_size, version, &s.bpe_train_seconds);
    s.bpe_vocab = bpe.vocab_size;
    s.bpe_bytes_per_token = bpe.bytes_per_token;
    // the BPE context covers about the characters the character model sees
    s.bpe_context = o.bpe_context > 0 ? o.bpe_context
                                      : std::max(2, static_cast<int>(std::lround(o.char_context / bpe.bytes_per_token)));
    std::printf("BPE: %d tokens trained on the train split in %.2f s; %.3f bytes/token there; context %d tokens "
                "~ %.0f characters (char-gpt2: %d)\n",
                bpe.vocab_size, s.bpe_train_seconds, bpe.bytes_per_token, s.bpe_context,
                s.bpe_context * bpe.bytes_per_token, o.char_context);
  }

  std::vector<ModelSpec> specs;
  for (const std::string& name : {std::string("char-gpt2"), std::string("bpe-gpt2"), std::string("bpe-llama")}) {
    if (std::find(o.models.begin(), o.models.end(), name) == o.models.end()) continue;
    if (name == "char-gpt2") {
      specs.push_back(make_spec(name, chars, o, o.char_context));
    } else {
      specs.push_back(make_spec(name, bpe, o, s.bpe_context));
    }
  }

  // the steps each model is planned: --iters, or the budget over its probed step time
  for (const ModelSpec& spec : specs) {
    NN_CHECK(spec.data->train.size() > static_cast<size_t>(spec.T),
             spec.name << "'s training split is " << spec.data->train.size() << " tokens, its context " << spec.T
                       << " needs at least " << spec.T + 1 << ": use a longer text (--data) or a smaller "
                       << (spec.name == "char-gpt2" ? "--char-context" : "--bpe-context (or --char-context)"));
    int planned = o.iters;
    double step_s = 0.0;
    if (planned == 0) {
      step_s = probe_step_seconds(spec, *be, o.batch_size);
      planned = std::max(1, static_cast<int>(o.budget_s / step_s));
    }
    s.planned[spec.name] = planned;
    s.probe_step_s[spec.name] = step_s;
    const gpt::MemoryBreakdown mem = gpt::memory_breakdown(spec.config, o.batch_size, spec.T, be->keeps_preatt());
    std::printf("%-9s %s, V %d, T %d, %lld params, %.1f MiB training memory; %s%d steps%s\n", spec.name.c_str(),
                gpt::arch_name(spec.config.arch), spec.config.vocab_size, spec.T,
                static_cast<long long>(gpt::num_parameters(spec.config)),
                static_cast<double>(mem.total()) / (1 << 20), step_s > 0 ? "~" : "", planned,
                step_s > 0 ? (" (probe: " + fixed(1e3 * step_s, 1) + " ms/step)").c_str() : "");
  }

  std::vector<RunResult> runs;
  for (const int seed : o.seeds) {
    for (const ModelSpec& spec : specs) {
      const RunResult r = train_one(spec, *be, seed, s.planned[spec.name], o);
      std::printf("  %s seed %d: val %.4f bpc (%lld bytes scored), %d steps in %.1f s, %s tokens/s\n", r.name.c_str(),
                  r.seed, r.final_val_bpc, static_cast<long long>(r.val_bytes_scored), r.steps, r.train_seconds,
                  nn::format_si(r.tokens_per_s).c_str());
      runs.push_back(r);
    }
  }
  s.load_end = load_average();

  std::vector<std::string> names;
  for (const ModelSpec& spec : specs) names.push_back(spec.name);
  const std::vector<Summary> sums = summarise(names, runs);
  const std::vector<std::string> verdict = conclusions(sums);
  std::printf("\n%s", summary_table(sums, false).c_str());
  std::printf("(bpc: bits per character of %s; memory: gpt::memory_breakdown at (B, T))\n",
              val_bytes == val_text.size() ? "the whole validation split"
                                           : ("the first " + std::to_string(val_bytes) + " bytes of the validation split").c_str());
  for (const std::string& line : verdict) std::printf("%s\n", line.c_str());
  std::printf("load average %.2f at the start, %.2f at the end%s\n", s.load_start, s.load_end,
              busy(s) ? " (measured under load)" : "");

  if (!o.json.empty()) write_file(o.json, runs_json(o, s, runs));
  if (!o.md.empty()) write_file(o.md, markdown_record(o, s, runs, sums, verdict, command_line(opts, o)));
  return 0;
}

}  // namespace lesson11
