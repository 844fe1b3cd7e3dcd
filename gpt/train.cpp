// gpt/train.cpp: batches, schedule, checkpoints, evaluation, sampling, the training loop,
// dumps and diffs (gpt/train.h).
#include "gpt/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <numbers>
#include <ostream>
#include <sstream>

#include "kernels/ceilings.h"
#include "nn/check.h"
#include "nn/checkpoint.h"
#include "nn/progress.h"
#include "nn/rng.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpt {

namespace fs = std::filesystem;

namespace {

// A 64-bit hash of three numbers, from SplitMix64's first output (nn/rng.h).
uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) {
  return nn::splitmix64(nn::splitmix64(nn::splitmix64(a) ^ b) ^ c);
}

// Streams of batches: distinct per purpose so no two draw the same numbers.
constexpr uint64_t kTrainStream = 1, kEvalTrain = 2, kEvalVal = 3, kDropout = 4;

std::string fmt(double v, int precision = 4) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(precision) << v;
  return os.str();
}

}  // namespace

float learning_rate(const TrainOptions& o, int it) {
  const int W = std::max(o.warmup_iters, 0);
  const int D = o.lr_decay_iters > 0 ? o.lr_decay_iters : o.max_iters;
  if (it < W) return o.lr * static_cast<float>(it + 1) / static_cast<float>(W);
  if (it > D) return o.min_lr;
  if (D <= W) return o.lr;
  const double ratio = static_cast<double>(it - W) / static_cast<double>(D - W);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return static_cast<float>(o.min_lr + coeff * (o.lr - o.min_lr));
}

void get_batch(const std::vector<int32_t>& tokens, int B, int T, uint64_t seed, uint64_t stream,
               uint64_t index, std::vector<int32_t>& x, std::vector<int32_t>& y) {
  NN_CHECK(tokens.size() >= static_cast<size_t>(T) + 1,
           "the text split has " << tokens.size() << " characters; a batch of context " << T << " needs at least "
                                 << T + 1 << ": use a longer text, a smaller --block-size or a smaller --val-fraction");
  nn::Rng rng(hash3(seed, stream, index));
  const auto span = static_cast<uint32_t>(tokens.size() - static_cast<size_t>(T));  // offsets [0, span)
  x.resize(static_cast<size_t>(B) * T);
  y.resize(static_cast<size_t>(B) * T);
  for (int b = 0; b < B; ++b) {
    const size_t off = rng.below(span);
    for (int t = 0; t < T; ++t) {
      x[static_cast<size_t>(b) * T + t] = tokens[off + static_cast<size_t>(t)];
      y[static_cast<size_t>(b) * T + t] = tokens[off + static_cast<size_t>(t) + 1];
    }
  }
}

// ---- checkpoints ------------------------------------------------------------------------

std::string vocab_to_hex(const nn::CharVocab& vocab) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : vocab.chars) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

nn::CharVocab vocab_from_hex(const std::string& hex) {
  NN_CHECK(!hex.empty() && hex.size() % 2 == 0, "checkpoint vocabulary is malformed (" << hex.size() << " hex digits)");
  auto val = [&](char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    NN_CHECK(false, "checkpoint vocabulary has a non-hex digit '" << ch << "'");
    return 0;
  };
  std::string bytes;
  for (size_t i = 0; i < hex.size(); i += 2) bytes += static_cast<char>(val(hex[i]) * 16 + val(hex[i + 1]));
  nn::CharVocab v = nn::build_vocab(bytes);
  NN_CHECK(v.size() * 2 == static_cast<int>(hex.size()), "checkpoint vocabulary repeats a character");
  return v;
}

void save_checkpoint(const std::string& path, const GPT& model, const nn::CharVocab& vocab,
                     const TrainState& state, bool with_optimizer) {
  std::vector<nn::TensorRef> refs;
  // host copies (the model may live on a GPU); the same file whichever backend trained it
  const std::vector<float> params = model.params_memory.to_vector();
  std::vector<float> m, v;
  auto add = [&](const std::string& prefix, const std::vector<float>& mem) {
    for (const ParamSlice& s : model.slices) refs.push_back({prefix + s.name, s.shape, mem.data() + s.offset});
  };
  add("", params);
  if (with_optimizer) {
    m = model.m_memory.to_vector();
    v = model.v_memory.to_vector();
    add("adam.m.", m);
    add("adam.v.", v);
  }
  const GPTConfig& c = model.config;
  std::map<std::string, std::string> meta = {
      {"format", "nnlab-gpt-1"},
      {"vocab_size", std::to_string(c.vocab_size)},
      {"block_size", std::to_string(c.block_size)},
      {"n_layer", std::to_string(c.n_layer)},
      {"n_head", std::to_string(c.n_head)},
      {"n_embd", std::to_string(c.n_embd)},
      {"dropout", fmt(c.dropout, 6)},
      {"bias", c.bias ? "1" : "0"},
      {"vocab_hex", vocab_to_hex(vocab)},
      {"adam_t", std::to_string(model.adam_t)},
      {"step", std::to_string(state.step)},
      {"best_val_loss", fmt(state.best_val_loss, 6)},
      {"corpus", state.corpus},
  };
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  nn::save_safetensors(path, refs, meta);
}

LoadedCheckpoint load_checkpoint(const std::string& path, Memory& memory) {
  nn::Checkpoint ck = nn::load_safetensors(path);
  auto meta = [&](const std::string& key) -> const std::string& {
    const auto it = ck.metadata.find(key);
    NN_CHECK(it != ck.metadata.end(), "checkpoint " << path << " has no '" << key
                                                    << "' entry: it is not a GPT checkpoint of nnlab (made by `nnlab gpt train`)");
    return it->second;
  };
  NN_CHECK(meta("format") == "nnlab-gpt-1", "checkpoint " << path << " has format '" << meta("format")
                                                          << "', expected nnlab-gpt-1");
  auto to_int = [&](const std::string& key) {
    try {
      return std::stoi(meta(key));
    } catch (const std::exception&) {
      NN_CHECK(false, "checkpoint " << path << ": '" << key << "' is not a number: " << meta(key));
      return 0;
    }
  };
  GPTConfig c;
  c.vocab_size = to_int("vocab_size");
  c.block_size = to_int("block_size");
  c.n_layer = to_int("n_layer");
  c.n_head = to_int("n_head");
  c.n_embd = to_int("n_embd");
  c.dropout = std::stof(meta("dropout"));
  NN_CHECK(meta("bias") == "0" || meta("bias") == "1", "checkpoint " << path << ": 'bias' must be 0 or 1, got " << meta("bias"));
  c.bias = meta("bias") == "1";
  LoadedCheckpoint out{gpt_create(c), vocab_from_hex(meta("vocab_hex")), {}, false};
  NN_CHECK(out.vocab.size() == c.vocab_size, "checkpoint " << path << ": its vocabulary has " << out.vocab.size()
                                                           << " characters but vocab_size is " << c.vocab_size);
  out.model.adam_t = std::stoll(meta("adam_t"));
  out.state.step = to_int("step");
  out.state.best_val_loss = std::stof(meta("best_val_loss"));
  out.state.corpus = meta("corpus");
  out.has_optimizer = ck.tensors.count("adam.m." + out.model.slices.front().name) > 0;
  auto take = [&](const std::string& prefix, Array<float>& mem) {
    for (const ParamSlice& s : out.model.slices) {
      const auto it = ck.tensors.find(prefix + s.name);
      NN_CHECK(it != ck.tensors.end(), "checkpoint " << path << " lacks tensor '" << prefix + s.name
                                                     << "': it is truncated or from another program");
      NN_CHECK(it->second.shape() == nn::Shape(s.shape),
               "checkpoint " << path << ": tensor '" << prefix + s.name << "' has shape "
                             << nn::shape_str(it->second.shape()) << ", the config says " << nn::shape_str(s.shape));
      std::copy(it->second.data(), it->second.data() + s.numel, mem.begin() + s.offset);
    }
  };
  take("", out.model.params_memory);
  if (out.has_optimizer) {
    take("adam.m.", out.model.m_memory);
    take("adam.v.", out.model.v_memory);
  }
  if (&memory != &host_memory()) out.model = gpt_move_to(out.model, memory);
  return out;
}

// ---- evaluation and sampling ---------------------------------------------------------------

float evaluate(GPT& model, Backend& be, const std::vector<int32_t>& tokens, int B, int T, int iters,
               uint64_t seed, uint64_t split_id) {
  std::vector<int32_t> x, y;
  double sum = 0.0;
  for (int i = 0; i < iters; ++i) {
    get_batch(tokens, B, T, seed, split_id, static_cast<uint64_t>(i), x, y);
    gpt_forward(model, be, x.data(), y.data(), B, T, /*train=*/false);
    sum += model.mean_loss;
  }
  return static_cast<float>(sum / std::max(iters, 1));
}

std::string sample(GPT& model, Backend& be, const nn::CharVocab& vocab, const SampleOptions& o) {
  NN_CHECK(!o.prompt.empty(), "sampling needs a prompt of at least one character (the default is a newline)");
  NN_CHECK(o.tokens >= 0, "the number of characters to sample must be >= 0, got " << o.tokens);
  std::vector<int32_t> ids = vocab.encode(o.prompt);
  const int V = model.config.vocab_size, maxT = model.config.block_size;
  nn::Rng rng(o.seed);
  std::vector<float> kept, row(static_cast<size_t>(V));
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::string out;
  for (int n = 0; n < o.tokens; ++n) {
    // the model sees at most block_size characters: the most recent ones
    const int T = std::min(static_cast<int>(ids.size()), maxT);
    const int32_t* ctx = ids.data() + (ids.size() - static_cast<size_t>(T));
    gpt_forward(model, be, ctx, nullptr, 1, T);
    // the last position's logits, copied to the host (they may be on a GPU)
    gpt_memory(model).to_host(row.data(), model.acts.logits + static_cast<int64_t>(T - 1) * V, row.size() * sizeof(float));
    const float* logits = row.data();
    int32_t next = 0;
    if (o.top_k > 0 && o.top_k < V) {
      // top-k: sample among the k largest logits only
      for (int i = 0; i < V; ++i) order[static_cast<size_t>(i)] = i;
      std::partial_sort(order.begin(), order.begin() + o.top_k, order.end(),
                        [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
      kept.assign(static_cast<size_t>(o.top_k), 0.0f);
      for (int i = 0; i < o.top_k; ++i) kept[static_cast<size_t>(i)] = logits[order[static_cast<size_t>(i)]];
      next = order[static_cast<size_t>(nn::sample_from_logits(kept.data(), o.top_k, o.temperature, rng.uniform()))];
    } else {
      next = nn::sample_from_logits(logits, V, o.temperature, rng.uniform());
    }
    ids.push_back(next);
    out += static_cast<char>(vocab.chars[static_cast<size_t>(next)]);
  }
  return out;
}

// ---- dump and diff ---------------------------------------------------------------------------

void write_dump(const std::string& path, const GPT& model) {
  std::vector<nn::TensorRef> refs;
  // host copies of every tensor (the model may live on a GPU)
  std::vector<std::vector<float>> held;
  for (const NamedTensor& t : activation_views(model)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    held.emplace_back(static_cast<size_t>(n));
    gpt_memory(model).to_host(held.back().data(), t.data, held.back().size() * sizeof(float));
    refs.push_back({t.name, t.shape, held.back().data()});
  }
  const float loss = model.mean_loss;
  if (model.have_targets) refs.push_back({"loss", {1}, &loss});
  const std::vector<float> grads = model.grads_memory.to_vector();
  for (const ParamSlice& s : model.slices) refs.push_back({"grad." + s.name, s.shape, grads.data() + s.offset});
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  nn::save_safetensors(path, refs, {{"format", "nnlab-gpt-dump-1"}});
}

std::vector<DiffRow> diff_dumps(const std::string& a, const std::string& b, std::vector<std::string>* only_a,
                                std::vector<std::string>* only_b) {
  const nn::Checkpoint ca = nn::load_safetensors(a);
  const nn::Checkpoint cb = nn::load_safetensors(b);
  std::vector<DiffRow> rows;
  for (const auto& [name, ta] : ca.tensors) {
    const auto it = cb.tensors.find(name);
    if (it == cb.tensors.end()) {
      if (only_a) only_a->push_back(name);
      continue;
    }
    const nn::Tensor& tb = it->second;
    NN_CHECK(ta.shape() == tb.shape(), "tensor '" << name << "' has shape " << nn::shape_str(ta.shape()) << " in " << a
                                                  << " but " << nn::shape_str(tb.shape()) << " in " << b);
    DiffRow r{name, ta.numel(), 0.0, 0.0};
    double scale = 0.0;
    for (int64_t i = 0; i < ta.numel(); ++i) {
      const double x = ta.data()[i], y = tb.data()[i];
      const double e = std::fabs(x - y);
      r.max_abs_err = std::isnan(e) ? INFINITY : std::max(r.max_abs_err, e);
      scale = std::max(scale, std::fabs(y));
    }
    r.max_rel_err = scale > 0.0 ? r.max_abs_err / scale : r.max_abs_err;
    rows.push_back(r);
  }
  if (only_b) {
    for (const auto& kv : cb.tensors) {
      if (!ca.tensors.count(kv.first)) only_b->push_back(kv.first);
    }
  }
  return rows;
}

// ---- training --------------------------------------------------------------------------------

GPTConfig config_from(const TrainOptions& o, int vocab_size) {
  GPTConfig c;
  c.vocab_size = vocab_size;
  c.block_size = o.block_size;
  c.n_layer = o.n_layer;
  c.n_head = o.n_head;
  c.n_embd = o.n_embd;
  c.dropout = o.dropout;
  c.bias = o.bias;
  validate(c);
  return c;
}

int use_threads(int threads) {
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(threads);
  return omp_get_max_threads();
#else
  (void)threads;
  return 1;
#endif
}

TrainResult train(const TrainOptions& o, std::ostream& os) {
  NN_CHECK(o.batch_size >= 1 && o.grad_accum >= 1 && o.max_iters >= 0 && o.eval_interval >= 1 && o.eval_iters >= 1,
           "batch_size, grad_accum, eval_interval and eval_iters must be >= 1 and max_iters >= 0");
  NN_CHECK(o.lr > 0.0f && o.min_lr >= 0.0f && o.min_lr <= o.lr,
           "learning rates: need lr > 0 and 0 <= min_lr <= lr, got lr=" << o.lr << " min_lr=" << o.min_lr);
  const int threads = use_threads(o.threads);
  auto be = make_backend(o.backend, o.precision);

  // data
  const nn::TextCorpus corpus = nn::load_corpus(o.data, o.val_fraction);
  os << "data: " << corpus.description << "\n";
  if (corpus.fallback) os << "note: Tiny Shakespeare not found; training on the fallback text above\n";

  // model: new, or resumed with its vocabulary, config, weights and AdamW state
  TrainState state;
  state.corpus = corpus.path;
  GPT model;
  nn::CharVocab vocab = corpus.vocab;
  if (!o.resume.empty()) {
    LoadedCheckpoint ck = load_checkpoint(o.resume);
    NN_CHECK(ck.has_optimizer, "checkpoint " << o.resume << " has no AdamW state: it can be sampled from, not resumed");
    NN_CHECK(vocab_to_hex(ck.vocab) == vocab_to_hex(corpus.vocab),
             "checkpoint " << o.resume << " was trained on another text (its vocabulary differs from " << corpus.path
                           << "'s): resume with the same --data");
    model = std::move(ck.model);
    state = ck.state;
    os << "resumed " << o.resume << " at step " << state.step << " (best val loss " << fmt(state.best_val_loss) << ")\n";
  } else {
    model = gpt_create(config_from(o, corpus.vocab.size()));
    gpt_init_weights(model, o.seed);
  }
  const GPTConfig& cfg = model.config;
  const int B = o.batch_size, T = cfg.block_size;
  const MemoryBreakdown mem = memory_breakdown(cfg, B, T, be->keeps_preatt());
  // the model goes where the backend computes (a GPU's memory for cuda), if it fits there
  be->check_capacity(cfg, B, T);
  if (&be->memory() != &gpt_memory(model)) model = gpt_move_to(model, be->memory());
  os << "model: " << cfg.n_layer << " layers, " << cfg.n_head << " heads, " << cfg.n_embd << " wide, context " << T
     << (cfg.bias ? "" : ", no biases") << ", vocabulary " << cfg.vocab_size << ": " << fmt(static_cast<double>(model.num_params) / 1e6, 3)
     << "M parameters (" << fmt(static_cast<double>(mem.total()) / (1 << 20), 1) << " MiB with gradients, AdamW and activations)\n";
  os << "backend: " << be->name() << ", " << threads << " thread" << (threads == 1 ? "" : "s") << "; batch " << B << " x "
     << o.grad_accum << " micro-batch" << (o.grad_accum == 1 ? "" : "es") << ", " << o.max_iters << " steps\n";

  // MFU: achieved FLOP/s over the peak measured now on what the backend runs on (the
  // lesson-03 FMA loop on the CPU; the FMA kernel or the tensor-core gemm on a GPU)
  const double flops_tok = flops_per_token(cfg, T);
  std::string peak_what;
  const double peak = o.quiet ? 0.0 : be->measure_peak_flops(threads, &peak_what);
  if (peak > 0) {
    os << "peak: " << fmt(peak / 1e9, 1) << " GFLOP/s (" << peak_what << "); "
       << "FLOPs/token = 6N + 12 L H Q T = " << nn::format_si(flops_tok) << "FLOP\n";
  } else if (!o.quiet && !peak_what.empty()) {
    os << "peak: " << peak_what << " (no MFU)\n";
  }

  fs::create_directories(o.out_dir);
  const std::string best_path = (fs::path(o.out_dir) / "best.safetensors").string();
  const std::string last_path = (fs::path(o.out_dir) / "last.safetensors").string();
  const std::string log_path = o.log.empty() ? (fs::path(o.out_dir) / "log.jsonl").string() : o.log;
  nn::MetricsLog log = log_path == "none" ? nn::MetricsLog() : nn::MetricsLog(log_path);

  AdamWConfig acfg;
  acfg.beta1 = o.beta1;
  acfg.beta2 = o.beta2;
  acfg.eps = o.eps;
  acfg.weight_decay = o.weight_decay;

  TrainResult result;
  result.best_path = best_path;
  result.last_path = last_path;
  std::vector<int32_t> x, y;
  std::string last_good = o.resume.empty() ? "none yet" : o.resume;

  auto run_eval = [&](int step) {
    const float tl = evaluate(model, *be, corpus.train, B, T, o.eval_iters, o.seed, kEvalTrain);
    const float vl = evaluate(model, *be, corpus.val, B, T, o.eval_iters, o.seed, kEvalVal);
    result.final_train_loss = tl;
    result.final_val_loss = vl;
    log.write(nn::MetricsLog::Record().add("step", step).add("split", "eval").add("train_loss", static_cast<double>(tl))
                  .add("val_loss", static_cast<double>(vl)));
    std::string saved;
    if (step > 0) {
      state.step = step;
      if (vl < state.best_val_loss) {
        state.best_val_loss = vl;
        save_checkpoint(best_path, model, vocab, state);
        saved = ", saved " + best_path;
      }
      save_checkpoint(last_path, model, vocab, state);
      last_good = last_path + " (step " + std::to_string(step) + ")";
    }
    if (!o.quiet) {
      os << (step == 0 ? "" : "\n") << "step " << step << ": train loss " << fmt(tl) << ", val loss " << fmt(vl) << saved << "\n";
    }
  };

  const int start = state.step;
  if (start == 0) run_eval(0);
  nn::ProgressBar bar("train", o.max_iters, os);
  const auto t0 = std::chrono::steady_clock::now();
  double step_ms_sum = 0.0;
  int step = start;
  for (; step < o.max_iters; ++step) {
    if (o.time_budget_s > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > o.time_budget_s) {
      os << "\ntime budget of " << o.time_budget_s << " s reached at step " << step << "\n";
      break;
    }
    const auto s0 = std::chrono::steady_clock::now();
    const float lr = learning_rate(o, step);
    gpt_zero_grad(model);
    double loss = 0.0;
    for (int micro = 0; micro < o.grad_accum; ++micro) {
      const uint64_t index = static_cast<uint64_t>(step) * static_cast<uint64_t>(o.grad_accum) + static_cast<uint64_t>(micro);
      get_batch(corpus.train, B, T, o.seed, kTrainStream, index, x, y);
      gpt_forward(model, *be, x.data(), y.data(), B, T, /*train=*/true, hash3(o.seed, kDropout, index));
      NN_CHECK(std::isfinite(model.mean_loss),
               "the training loss is " << model.mean_loss << " at step " << step + 1
                                       << ": training stopped. The last good checkpoint is " << last_good
                                       << " (kept as it was). Lower --lr, keep --grad-clip on, or check the data");
      loss += static_cast<double>(model.mean_loss) / o.grad_accum;
      gpt_backward(model, *be, 1.0f / static_cast<float>(o.grad_accum));
      if (o.dump_step == step + 1 && !o.dump_path.empty() && micro == 0) {
        write_dump(o.dump_path, model);
        os << "\nwrote activations and gradients of step " << step + 1 << " to " << o.dump_path << "\n";
      }
    }
    float norm = 0.0f;
    try {
      norm = gpt_clip_grad_norm(model, *be, o.grad_clip);
    } catch (const nn::Error& e) {
      NN_CHECK(false, e.what() << " at step " << step + 1 << ": training stopped. The last good checkpoint is "
                               << last_good << " (kept as it was)");
    }
    gpt_adamw_step(model, *be, acfg, lr);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
    step_ms_sum += ms;
    result.step_losses.push_back(static_cast<float>(loss));
    const double tok_s = static_cast<double>(B) * T * o.grad_accum / (ms / 1e3);
    const double mfu = peak > 0 ? tok_s * flops_tok / peak : 0.0;
    log.write(nn::MetricsLog::Record().add("step", step + 1).add("split", "train").add("loss", loss)
                  .add("lr", static_cast<double>(lr)).add("grad_norm", static_cast<double>(norm)).add("ms", ms)
                  .add("tok_s", tok_s).add("mfu", mfu));
    if (!o.quiet) {
      std::vector<std::pair<std::string, std::string>> fields = {
          {"step", std::to_string(step + 1)}, {"loss", fmt(loss)}, {"tok/s", nn::format_si(tok_s)}};
      if (peak > 0) fields.push_back({"MFU", fmt(100.0 * mfu, 1) + "%"});  // no peak measured: no MFU
      bar.update(step + 1 - start, fields);
    }
    if ((step + 1) % o.eval_interval == 0 && step + 1 < o.max_iters) run_eval(step + 1);
  }
  const int done = step - start;
  result.steps = done;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.ms_per_iter = done > 0 ? step_ms_sum / done : 0.0;
  if (!o.quiet) bar.finish({{"steps", std::to_string(done)}, {"ms/step", fmt(result.ms_per_iter, 1)}});
  if (done > 0) run_eval(step);
  result.best_val_loss = state.best_val_loss;
  if (!o.quiet) {
    os << "trained " << done << " steps in " << nn::format_duration(result.seconds) << " (" << fmt(result.ms_per_iter, 1)
       << " ms/step); best val loss " << fmt(state.best_val_loss) << ", checkpoints " << best_path << ", " << last_path
       << "\n";
  }

  if (o.sample_tokens > 0) {
    // sample from the best checkpoint, as a user would
    LoadedCheckpoint best = load_checkpoint(fs::exists(best_path) ? best_path : last_path, be->memory());
    SampleOptions so;
    so.prompt = o.prompt;
    so.tokens = o.sample_tokens;
    so.temperature = o.temperature;
    so.top_k = o.top_k;
    so.seed = o.seed;
    os << "\n---- sample (temperature " << o.temperature << (o.top_k > 0 ? ", top-k " + std::to_string(o.top_k) : "")
       << ", from " << (fs::exists(best_path) ? best_path : last_path) << ") ----\n"
       << o.prompt << sample(best.model, *be, best.vocab, so) << "\n----\n";
  }
  return result;
}

}  // namespace gpt
