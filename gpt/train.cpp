// gpt/train.cpp: batches, schedule, checkpoints, evaluation, sampling, the training loop,
// dumps and diffs (gpt/train.h).
#include "gpt/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <numbers>
#include <ostream>
#include <sstream>

#include "gpt/compress.h"
#include "kernels/ceilings.h"
#include "nn/check.h"
#include "nn/checkpoint.h"
#include "nn/cli_checks.h"
#include "nn/numbers.h"
#include "io/progress.h"
#include "kernels/comm.h"
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
  // build_vocab sorts the characters; ids are positions in that order, so a vocabulary
  // listed in another order would silently map ids to other letters
  NN_CHECK(vocab_to_hex(v) == hex, "checkpoint vocabulary is not in byte order (ids would map to other characters)");
  return v;
}

namespace {

// The metadata's "best_val_loss" when no validation loss has been recorded yet.
constexpr const char* kNoBestLoss = "none";

// The model's tensors and (with_optimizer) AdamW's, as a checkpoint names them.
std::vector<std::string> tensor_names(const std::vector<ParamSlice>& slices, bool with_optimizer) {
  std::vector<std::string> names;
  for (const char* prefix : {"", "adam.m.", "adam.v."}) {
    if (prefix[0] != '\0' && !with_optimizer) break;
    for (const ParamSlice& s : slices) names.push_back(prefix + s.name);
  }
  return names;
}

}  // namespace

void save_checkpoint(const std::string& path, const GPT& model, const nn::CharVocab& vocab,
                     const TrainState& state, bool with_optimizer, const FullMoments* moments) {
  NN_CHECK(!with_optimizer || moments != nullptr || !model.sharded,
           "saving " << path << ": the AdamW moments are sharded across ranks (ZeRO-1): gather them first "
                     << "(gpt_gather_moments)");
  std::vector<nn::TensorRef> refs;
  // host copies (the model may live on a GPU); the same file whichever backend trained it
  const std::vector<float> params = model.params_memory.to_vector();
  std::vector<float> m, v;
  auto add = [&](const std::string& prefix, const std::vector<float>& mem) {
    for (const ParamSlice& s : model.slices) refs.push_back({prefix + s.name, s.shape, mem.data() + s.offset});
  };
  add("", params);
  if (with_optimizer) {
    m = moments != nullptr ? moments->m : model.m_memory.to_vector();
    v = moments != nullptr ? moments->v : model.v_memory.to_vector();
    NN_CHECK(static_cast<int64_t>(m.size()) == model.num_params && static_cast<int64_t>(v.size()) == model.num_params,
             "saving " << path << ": " << m.size() << " and " << v.size() << " AdamW moments for " << model.num_params
                       << " parameters");
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
      {"arch", arch_name(c.arch)},
      {"n_kv_head", std::to_string(kv_heads(c))},
      {"ffn_hidden", std::to_string(mlp_hidden(c))},
      {"rope_theta", fmt(c.rope_theta, 6)},
      {"norm_eps", fmt(c.norm_eps, 10)},
      {"tie_embeddings", c.tie_embeddings ? "1" : "0"},
      {"attention", attention_name(c.attention)},
      {"vocab_hex", vocab_to_hex(vocab)},
      {"adam_t", std::to_string(model.adam_t)},
      {"step", std::to_string(state.step)},
      {"best_val_loss", std::isfinite(state.best_val_loss) ? fmt(state.best_val_loss, 6) : kNoBestLoss},
      {"corpus", state.corpus},
  };
  if (state.ternary) meta["ternary"] = "1";  // BitNet latents (gpt/compress.h); absent otherwise
  if (state.int8_activations) meta["activations"] = "int8";  // W1.58A8 (--ternary-a8); absent: fp32
  // nn::save_safetensors refuses a non-finite value in any tensor (and leaves the old file)
  nn::save_safetensors(path, refs, meta);
}

LoadedCheckpoint load_checkpoint(const std::string& path, Memory& memory) {
  // Sizes bounded by the file (and nn::kMaxCheckpointBytes), both checksums, finite values.
  const nn::Checkpoint ck = nn::load_safetensors(path);
  const std::string where = "checkpoint " + path;
  const std::string damaged = ": the file is damaged or was not written by `nnlab gpt train`; use another checkpoint";
  auto meta = [&](const std::string& key) -> const std::string& {
    const auto it = ck.metadata.find(key);
    NN_CHECK(it != ck.metadata.end(), where << " has no '" << key
                                            << "' entry: it is not a GPT checkpoint of nnlab (made by `nnlab gpt train`)");
    return it->second;
  };
  NN_CHECK(meta("format") == "nnlab-gpt-1", where << " has format '" << meta("format") << "', expected nnlab-gpt-1");
  // every value validated, each message naming its key (nn/numbers.h: whole text, finite, in range)
  auto int_of = [&](const std::string& key, long long lo, long long hi) {
    return nn::parse_int(meta(key), where + ": metadata '" + key + "'", lo, hi);
  };
  // the same limits as the flags that set them (gpt/cli.cpp)
  GPTConfig c;
  c.vocab_size = static_cast<int>(int_of("vocab_size", 1, 256));
  c.block_size = static_cast<int>(int_of("block_size", 1, 65536));
  c.n_layer = static_cast<int>(int_of("n_layer", 1, 1024));
  c.n_head = static_cast<int>(int_of("n_head", 1, 1024));
  c.n_embd = static_cast<int>(int_of("n_embd", 1, 65536));
  c.dropout = static_cast<float>(nn::parse_finite(meta("dropout"), where + ": metadata 'dropout'", 0.0, 0.99));
  NN_CHECK(meta("bias") == "0" || meta("bias") == "1",
           where << ": metadata 'bias' must be 0 or 1, got '" << meta("bias") << "'" << damaged);
  c.bias = meta("bias") == "1";
  // lesson 11's keys; a checkpoint from before them is a gpt2 (the defaults)
  auto optional = [&](const std::string& key) { return ck.metadata.count(key) > 0; };
  if (optional("arch")) {
    try {
      c.arch = parse_arch(meta("arch"));
    } catch (const nn::Error& e) {
      NN_CHECK(false, where << ": metadata 'arch': " << e.what() << damaged);
    }
  }
  if (optional("n_kv_head")) c.n_kv_head = static_cast<int>(int_of("n_kv_head", 1, 1024));
  if (optional("ffn_hidden")) c.ffn_hidden = static_cast<int>(int_of("ffn_hidden", 1, 1 << 20));
  if (c.arch == Arch::gpt2) c.ffn_hidden = 0;  // gpt2's is 4C whatever the file says (validate checks it)
  if (optional("rope_theta")) {
    c.rope_theta = static_cast<float>(nn::parse_finite(meta("rope_theta"), where + ": metadata 'rope_theta'", 1.0, 1e12));
  }
  if (optional("norm_eps")) {
    c.norm_eps = static_cast<float>(nn::parse_finite(meta("norm_eps"), where + ": metadata 'norm_eps'", 1e-30, 0.5));
  }
  if (optional("tie_embeddings")) {
    NN_CHECK(meta("tie_embeddings") == "0" || meta("tie_embeddings") == "1",
             where << ": metadata 'tie_embeddings' must be 0 or 1, got '" << meta("tie_embeddings") << "'" << damaged);
    c.tie_embeddings = meta("tie_embeddings") == "1";
  }
  if (optional("attention")) {
    try {
      c.attention = parse_attention(meta("attention"));
    } catch (const nn::Error& e) {
      NN_CHECK(false, where << ": metadata 'attention': " << e.what() << damaged);
    }
  }
  try {
    validate(c);
  } catch (const nn::Error& e) {
    NN_CHECK(false, where << ": its metadata describes no valid model: " << e.what() << damaged);
  }
  nn::CharVocab vocab;
  try {
    vocab = vocab_from_hex(meta("vocab_hex"));
  } catch (const nn::Error& e) {
    NN_CHECK(false, where << ": metadata 'vocab_hex': " << e.what() << damaged);
  }
  NN_CHECK(vocab.size() == c.vocab_size, where << ": metadata 'vocab_hex' lists " << vocab.size()
                                               << " characters but 'vocab_size' is " << c.vocab_size << damaged);
  TrainState state;
  state.step = static_cast<int>(int_of("step", 0, 100000000));
  const std::string& best = meta("best_val_loss");
  state.best_val_loss = best == kNoBestLoss
                            ? std::numeric_limits<float>::infinity()
                            : static_cast<float>(nn::parse_finite(best, where + ": metadata 'best_val_loss' (or \"none\")", 0.0, 1e9));
  state.corpus = meta("corpus");
  if (optional("ternary")) {
    NN_CHECK(meta("ternary") == "0" || meta("ternary") == "1",
             where << ": metadata 'ternary' must be 0 or 1, got '" << meta("ternary") << "'" << damaged);
    state.ternary = meta("ternary") == "1";
  }
  if (optional("activations")) {
    NN_CHECK(meta("activations") == "fp32" || meta("activations") == "int8",
             where << ": metadata 'activations' must be fp32 or int8, got '" << meta("activations") << "'" << damaged);
    state.int8_activations = meta("activations") == "int8";
    NN_CHECK(!state.int8_activations || state.ternary,
             where << ": metadata 'activations' is int8 but 'ternary' is not 1 (int8 activations are trained with "
                   << "ternary weights only)" << damaged);
  }
  const long long adam_t = int_of("adam_t", 0, 100000000);

  // The tensors must be exactly the ones the config names, with its shapes, checked
  // BEFORE anything sized from the metadata is allocated (the tensors themselves are
  // bounded by the file's size): a 20 KB file claiming a 2048-wide model is refused here,
  // not after allocating 1.7 GB for it.
  const std::vector<ParamSlice> slices = param_slices(c);
  bool has_optimizer = false;
  for (const auto& [name, t] : ck.tensors) has_optimizer = has_optimizer || name.rfind("adam.", 0) == 0;
  const std::vector<std::string> names = tensor_names(slices, has_optimizer);
  const std::string config_text = "n_layer=" + std::to_string(c.n_layer) + " n_head=" + std::to_string(c.n_head) +
                                  " n_embd=" + std::to_string(c.n_embd) + " block_size=" + std::to_string(c.block_size) +
                                  " vocab_size=" + std::to_string(c.vocab_size) + " bias=" + (c.bias ? "1" : "0") +
                                  " arch=" + arch_name(c.arch) + " n_kv_head=" + std::to_string(kv_heads(c)) +
                                  " ffn_hidden=" + std::to_string(mlp_hidden(c)) +
                                  " tie_embeddings=" + (c.tie_embeddings ? "1" : "0");
  for (size_t i = 0; i < names.size(); ++i) {
    const ParamSlice& s = slices[i % slices.size()];
    const auto it = ck.tensors.find(names[i]);
    NN_CHECK(it != ck.tensors.end(), where << " lacks tensor '" << names[i] << "' that its metadata's model ("
                                           << config_text << (has_optimizer ? ", with AdamW state" : "")
                                           << ") has" << damaged);
    NN_CHECK(it->second.shape() == nn::Shape(s.shape),
             where << ": tensor '" << names[i] << "' has shape " << nn::shape_str(it->second.shape())
                   << ", its metadata's model (" << config_text << ") says " << nn::shape_str(s.shape) << damaged);
  }
  NN_CHECK(ck.tensors.size() == names.size(), [&] {
    std::string extra;
    for (const auto& [name, t] : ck.tensors) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        extra = name;
        break;
      }
    }
    return where + " holds tensor '" + extra + "' that its metadata's model (" + config_text + ") does not have" +
           damaged;
  }());
  if (has_optimizer) {
    // AdamW's state: v is a mean of squares (never negative: sqrt(v) would be NaN), and
    // the step count t of its bias correction 1 - beta^t is the optimizer steps taken.
    for (const ParamSlice& s : slices) {
      const nn::Tensor& v = ck.tensors.at("adam.v." + s.name);
      for (int64_t i = 0; i < v.numel(); ++i) {
        NN_CHECK(v.data()[i] >= 0.0f, where << ": tensor 'adam.v." << s.name << "' holds " << v.data()[i]
                                            << " at index " << i << ", but AdamW's second moment is never negative"
                                            << damaged);
      }
    }
    NN_CHECK(adam_t == state.step, where << ": metadata 'adam_t' is " << adam_t << " but 'step' is " << state.step
                                         << ": a training checkpoint has taken one AdamW step per step (a wrong adam_t "
                                            "would restart AdamW's bias correction)"
                                         << damaged);
  }

  LoadedCheckpoint out{gpt_create(c), std::move(vocab), state, has_optimizer};
  out.model.adam_t = adam_t;
  auto take = [&](const std::string& prefix, Array<float>& mem) {
    for (const ParamSlice& s : out.model.slices) {
      const nn::Tensor& t = ck.tensors.at(prefix + s.name);
      std::copy(t.data(), t.data() + s.numel, mem.begin() + s.offset);
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
  // a dump is a debugging record, not a checkpoint: it may show the NaN being hunted
  nn::save_safetensors(path, refs, {{"format", "nnlab-gpt-dump-1"}}, nn::NonFinite::Allow);
}

std::vector<DiffRow> diff_dumps(const std::string& a, const std::string& b, std::vector<std::string>* only_a,
                                std::vector<std::string>* only_b) {
  // dumps may hold NaN (write_dump): a NaN differs from everything (an infinite error)
  nn::LoadOptions dumps;
  dumps.non_finite = nn::NonFinite::Allow;
  const nn::Checkpoint ca = nn::load_safetensors(a, dumps);
  const nn::Checkpoint cb = nn::load_safetensors(b, dumps);
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
  c.arch = parse_arch(o.arch);
  // llama has no biases: the gpt2 default (true) does not apply, an explicit --bias true is refused
  if (c.arch == Arch::llama && o.given.count("bias") == 0) c.bias = false;
  c.n_kv_head = o.n_kv_head;
  c.ffn_hidden = o.ffn_hidden;
  c.rope_theta = o.rope_theta;
  c.norm_eps = o.norm_eps;
  c.tie_embeddings = !o.untied_head;
  c.attention = parse_attention(o.attention);
  validate(c);
  return c;
}

int use_threads(int threads) {
  // a thread count far above the cores makes every OpenMP barrier wait on descheduled
  // threads: 4096 threads on 2 cores ran for minutes per step
  const int most = nn::max_threads_allowed();
  NN_CHECK(threads >= 0 && threads <= most,
           "--threads " << threads << " is outside [0, " << most << "] (4x this machine's " << most / 4
                        << " hardware threads): use 0 for the default (all cores)");
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(threads);
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void check_options(const TrainOptions& o) {
  // The flags' own validators (gpt/cli.cpp) say this first, naming the flag; these checks
  // hold for every other caller (lessons, tests) and name the same flags.
  auto check_range = [](double v, const char* flag, double lo, double hi) {
    NN_CHECK(std::isfinite(v) && v >= lo && v <= hi,
             flag << " is " << v << ": expected a finite number in [" << lo << ", " << hi << "]");
  };
  NN_CHECK(o.batch_size >= 1 && o.grad_accum >= 1 && o.max_iters >= 0 && o.eval_interval >= 1 && o.eval_iters >= 1,
           "--batch-size, --grad-accum, --eval-interval and --eval-iters must be >= 1 and --max-iters >= 0");
  check_range(o.lr, "--lr", 1e-9, 10.0);
  check_range(o.min_lr, "--min-lr", 0.0, o.lr);  // also: min_lr <= lr
  check_range(o.weight_decay, "--weight-decay", 0.0, 10.0);
  check_range(o.beta1, "--beta1", 0.0, 0.9999999);
  check_range(o.beta2, "--beta2", 0.0, 0.9999999);
  // eps > 0: where v = 0 (a weight whose gradient was always 0, or beta2 = 0 and g = 0),
  // m / (sqrt(v) + eps) is 0 / eps = 0; with eps = 0 it is 0 / 0 = NaN
  check_range(o.eps, "--eps", kMinEps, 1.0);
  check_range(o.grad_clip, "--grad-clip", 0.0, 1e9);
  check_range(o.dropout, "--dropout", 0.0, 0.99);
  check_range(o.val_fraction, "--val-fraction", 0.01, 0.5);
  check_range(o.time_budget_s, "--time-budget", 0.0, 1e9);
  check_range(o.temperature, "--temperature", 0.0, 100.0);
  NN_CHECK(o.sample_tokens >= 0 && o.top_k >= 0, "--sample-tokens and --top-k must be >= 0");
  NN_CHECK(o.dump_step == -1 || o.dump_step >= 1, "--dump-step " << o.dump_step << ": steps count from 1");
  NN_CHECK(o.dump_step == -1 || !o.dump_path.empty(),
           "--dump-step " << o.dump_step << " needs --dump-path FILE: where to write the activations and gradients");
  NN_CHECK(o.zero == 0 || o.zero == 1, "--zero " << o.zero << ": stage 0 (no sharding) or 1 (the AdamW moments "
                                                 << "sharded across ranks); stages 2 and 3 are not implemented");
  NN_CHECK(!o.recompute || o.dump_step == -1, "--dump-step with --recompute: recomputation keeps one layer's "
                                               "activations, not every layer's that the dump writes; drop one of them");
  NN_CHECK(o.dump_path.empty() || o.dump_step >= 1,
           "--dump-path " << o.dump_path << " needs --dump-step N: the step whose activations and gradients to write");
  NN_CHECK(!(o.ternary_a8 && o.given.count("ternary") > 0 && !o.ternary),
           "--ternary-a8 trains ternary weights (with int8 activations): it contradicts --ternary=false; drop one");
}

namespace {

// What a run reports when it stops early: which checkpoint is good to go back to. Only
// files this run wrote (or resumed from) count: nn::save_safetensors never writes a NaN,
// so each of them is finite.
struct LastGood {
  std::string path;  // empty: none yet
  int step = 0;
  bool resumed_from = false;
  // the best checkpoint this run wrote ("": none), which may be older and better
  std::string best_path;
  float best_val_loss = 0.0f;
  std::string text() const {
    if (path.empty()) return "This run has written no checkpoint yet, so there is none to go back to";
    std::ostringstream os;
    os << "The last good checkpoint is " << path << " (step " << step
       << (resumed_from ? ", the one this run resumed from" : "") << "), kept as it was: --resume " << path
       << " continues from it";
    if (!best_path.empty() && best_path != path) {
      os << "; the best one is " << best_path << " (val loss " << fmt(best_val_loss) << ")";
    }
    return os.str();
  }
};

// The prompt samples start from, checked against the vocabulary before any training (a
// run must not train for an hour, then fail on its prompt). The default "\n" is replaced by
// the text's first character when the text has no newline, and the note says so.
std::string checked_prompt(const TrainOptions& o, const nn::TextCorpus& corpus, std::ostream& os) {
  const bool given = o.given.count("prompt") > 0;
  if (!given && o.prompt == "\n" && !corpus.vocab.contains('\n')) {
    const std::string first(1, corpus.text.front());
    os << "note: " << corpus.path << " has no newline (the default --prompt); samples start from its first "
       << "character '" << first << "' instead\n";
    return first;
  }
  NN_CHECK(!o.prompt.empty(), "--prompt is empty: sampling needs at least one character to start from");
  for (size_t i = 0; i < o.prompt.size(); ++i) {
    const auto c = static_cast<unsigned char>(o.prompt[i]);
    NN_CHECK(corpus.vocab.contains(c), "--prompt has character "
                                           << (c >= 0x20 && c < 0x7F ? "'" + std::string(1, static_cast<char>(c)) + "'"
                                                                     : "byte " + std::to_string(c))
                                           << " (position " << i << ") that " << corpus.path
                                           << " does not contain, so the model cannot read it: choose a --prompt "
                                              "made of the text's characters (checked before training, so nothing "
                                              "was trained in vain)");
  }
  return o.prompt;
}

// --resume keeps the checkpoint's model: a model flag given with another value is a
// contradiction, not something to ignore silently.
void check_resume_conflicts(const TrainOptions& o, const GPTConfig& c) {
  auto conflict = [&](const char* flag, bool differs, const std::string& given, const std::string& saved) {
    NN_CHECK(!(o.given.count(flag) > 0 && differs),
             "--" << flag << " " << given << " contradicts the checkpoint " << o.resume << " (" << flag << " "
                  << saved << "): a resumed run keeps the model it resumes; drop --" << flag
                  << (o.config.empty() ? "" : " (and its line in " + o.config + ")")
                  << ", or train a new model into another --out-dir");
  };
  conflict("n-layer", o.n_layer != c.n_layer, std::to_string(o.n_layer), std::to_string(c.n_layer));
  conflict("n-head", o.n_head != c.n_head, std::to_string(o.n_head), std::to_string(c.n_head));
  conflict("n-embd", o.n_embd != c.n_embd, std::to_string(o.n_embd), std::to_string(c.n_embd));
  conflict("block-size", o.block_size != c.block_size, std::to_string(o.block_size), std::to_string(c.block_size));
  auto shortest = [](float v) {
    std::ostringstream os;
    os << v;  // 0.1, not 0.100000
    return os.str();
  };
  conflict("dropout", std::fabs(o.dropout - c.dropout) > 1e-6f, shortest(o.dropout), shortest(c.dropout));
  conflict("bias", o.bias != c.bias, o.bias ? "true" : "false", c.bias ? "true" : "false");
  conflict("arch", parse_arch(o.arch) != c.arch, o.arch, arch_name(c.arch));
  conflict("n-kv-head", (o.n_kv_head > 0 ? o.n_kv_head : o.n_head) != kv_heads(c), std::to_string(o.n_kv_head),
           std::to_string(kv_heads(c)));
  conflict("ffn-hidden", o.ffn_hidden != c.ffn_hidden && o.ffn_hidden != mlp_hidden(c), std::to_string(o.ffn_hidden),
           std::to_string(mlp_hidden(c)));
  conflict("rope-theta", std::fabs(o.rope_theta - c.rope_theta) > 1e-3f * c.rope_theta, shortest(o.rope_theta),
           shortest(c.rope_theta));
  conflict("norm-eps", std::fabs(o.norm_eps - c.norm_eps) > 1e-3f * c.norm_eps, shortest(o.norm_eps),
           shortest(c.norm_eps));
  conflict("untied-head", o.untied_head == c.tie_embeddings, o.untied_head ? "true" : "false",
           c.tie_embeddings ? "false" : "true");
  conflict("attention", parse_attention(o.attention) != c.attention, o.attention, attention_name(c.attention));
}

}  // namespace

namespace {
kernels::comm::Comm* g_process_comm = nullptr;
}  // namespace

void set_process_comm(kernels::comm::Comm* comm) { g_process_comm = comm; }
kernels::comm::Comm* process_comm() { return g_process_comm; }

namespace {

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 1469598103934665603ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// The ranks (other than 0) whose `h` differs from rank 0's, as "1, 3" ("" when all agree). Every
// rank's hash goes in its own row of a table, as four exact 16-bit pieces; the sum over the ranks
// gives every rank the whole table, so all ranks reach the same verdict (and fail together).
std::string ranks_differing(kernels::comm::Comm& comm, uint64_t h) {
  const int N = comm.size();
  std::vector<float> table(static_cast<size_t>(N) * 4, 0.0f);
  for (int k = 0; k < 4; ++k) table[static_cast<size_t>(comm.rank()) * 4 + static_cast<size_t>(k)] = static_cast<float>((h >> (16 * k)) & 0xFFFF);
  comm.allreduce_sum(table.data(), static_cast<int64_t>(table.size()));
  std::string differ;
  for (int r = 1; r < N; ++r) {
    if (!std::equal(table.begin() + 4 * r, table.begin() + 4 * r + 4, table.begin()))
      differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  }
  return differ;
}

std::string rank_word(const std::string& list) { return list.find(',') == std::string::npos ? "rank " : "ranks "; }

}  // namespace

void check_replicas(const GPT& model, kernels::comm::Comm& comm, int step) {
  if (comm.size() == 1) return;
  std::vector<float> w(model.params_memory.size());
  gpt_memory(model).to_host(w.data(), model.params_memory.data(), w.size() * sizeof(float));
  const std::string differ = ranks_differing(comm, fnv1a(w.data(), w.size() * sizeof(float)));
  NN_CHECK(differ.empty(), "data parallel: at step " << step << " the weights of " << rank_word(differ) << differ
                                                     << " differ from rank 0's: the replicas diverged (an all-reduce "
                                                     << "skipped or broken, or ranks running different code or data); training "
                                                     << "stopped before this step was evaluated or saved");
}

TrainResult train(const TrainOptions& o, std::ostream& os_all) {
  check_options(o);
  kernels::comm::Comm* comm = o.comm != nullptr ? o.comm : process_comm();
  const int ranks = comm != nullptr ? comm->size() : 1, rank = comm != nullptr ? comm->rank() : 0;
  const bool lead = rank == 0;  // rank 0 prints, logs, evaluates, writes and samples
  std::ostream null_os(nullptr);  // the other ranks' output goes nowhere
  std::ostream& os = lead ? os_all : null_os;
  const kernels::comm::AllreduceFn allreduce = kernels::comm::allreduce_version(o.allreduce).fn;
  const int threads = use_threads(o.threads);
  auto be = make_backend(o.backend, o.precision);

  // data
  const nn::TextCorpus corpus = nn::load_corpus(o.data, o.val_fraction);
  os << "data: " << corpus.description << "\n";
  if (corpus.fallback) os << "note: Tiny Shakespeare not found; training on the fallback text above\n";

  // outputs: a fresh run never replaces another run's checkpoints unless told to
  std::error_code ec;
  if (lead) fs::create_directories(o.out_dir, ec);
  NN_CHECK(!lead || (!ec && fs::is_directory(o.out_dir)), "cannot create the output directory --out-dir " << o.out_dir << ": "
                                                   << (ec ? ec.message() : "a file of that name is in the way")
                                                   << ": choose another --out-dir");
  const std::string best_path = (fs::path(o.out_dir) / "best.safetensors").string();
  const std::string last_path = (fs::path(o.out_dir) / "last.safetensors").string();
  const std::string log_path = o.log.empty() ? (fs::path(o.out_dir) / "log.jsonl").string() : o.log;
  for (const std::string& orphan : lead ? nn::remove_unfinished_writes(o.out_dir) : std::vector<std::string>{}) {
    os << "note: removed " << orphan << ", a checkpoint write that a stopped run left unfinished "
       << "(the checkpoint it was replacing is intact)\n";
  }
  if (lead && o.resume.empty() && !o.overwrite) {
    for (const std::string& p : {best_path, last_path}) {
      NN_CHECK(!fs::exists(p), "--out-dir " << o.out_dir << " already holds " << p
                                            << " from an earlier run, and a new run would replace it: continue that "
                                               "run with --resume "
                                            << last_path << ", replace it with --overwrite, or choose another --out-dir");
    }
  }

  // model: new, or resumed with its vocabulary, config, weights and AdamW state
  TrainState state;
  state.corpus = corpus.path;
  // --ternary-a8 is --ternary's weights plus int8 activations
  const bool ternary = o.ternary || o.ternary_a8;
  state.ternary = ternary;
  state.int8_activations = o.ternary_a8;
  GPT model;
  nn::CharVocab vocab = corpus.vocab;
  LastGood last_good;
  if (!o.resume.empty()) {
    LoadedCheckpoint ck = load_checkpoint(o.resume);
    NN_CHECK(ck.has_optimizer, "checkpoint " << o.resume << " has no AdamW state: it can be sampled from, not resumed");
    NN_CHECK(vocab_to_hex(ck.vocab) == vocab_to_hex(corpus.vocab),
             "checkpoint " << o.resume << " was trained on another text (its vocabulary differs from " << corpus.path
                           << "'s): resume with the same --data");
    check_resume_conflicts(o, ck.model.config);
    NN_CHECK(ck.state.step < o.max_iters, "checkpoint " << o.resume << " is at step " << ck.state.step
                                                        << " and --max-iters is " << o.max_iters
                                                        << ": nothing left to train; raise --max-iters");
    model = std::move(ck.model);
    NN_CHECK(ck.state.ternary == ternary,
             "checkpoint " << o.resume
                           << (ck.state.int8_activations
                                   ? " holds BitNet latent weights (trained with --ternary-a8): resume with --ternary-a8"
                               : ck.state.ternary
                                   ? " holds BitNet latent weights (trained with --ternary): resume with --ternary"
                                   : " was trained in fp32: resume without --ternary or --ternary-a8"));
    NN_CHECK(ck.state.int8_activations == o.ternary_a8,
             "checkpoint " << o.resume
                           << (ck.state.int8_activations
                                   ? " was trained with int8 activations (--ternary-a8): resume with --ternary-a8"
                                   : " was trained with fp32 activations (--ternary): resume with --ternary, without "
                                     "--ternary-a8"));
    state = ck.state;
    last_good.path = o.resume;
    last_good.step = state.step;
    last_good.resumed_from = true;
    // the run resumed in its own out-dir: its best checkpoint is there
    std::error_code same_ec;
    const fs::path resume_dir = fs::path(o.resume).has_parent_path() ? fs::path(o.resume).parent_path() : fs::path(".");
    if (fs::exists(best_path) && std::isfinite(state.best_val_loss) && fs::equivalent(resume_dir, o.out_dir, same_ec)) {
      last_good.best_path = best_path;
      last_good.best_val_loss = state.best_val_loss;
    }
    os << "resumed " << o.resume << " at step " << state.step << " (best val loss "
       << (std::isfinite(state.best_val_loss) ? fmt(state.best_val_loss) : std::string("none yet")) << ")\n";
  } else {
    model = gpt_create(config_from(o, corpus.vocab.size()));
    gpt_init_weights(model, o.seed);
  }
  const int start = state.step;
  NN_CHECK(o.dump_step == -1 || (o.dump_step > start && o.dump_step <= o.max_iters),
           "--dump-step " << o.dump_step << " is not a step of this run (steps " << start + 1 << " to " << o.max_iters
                          << "): nothing would be dumped");
  const std::string prompt = o.sample_tokens > 0 ? checked_prompt(o, corpus, os) : o.prompt;

  const GPTConfig& cfg = model.config;
  const int B = o.batch_size, T = cfg.block_size;
  MemoryBreakdown mem = memory_breakdown(cfg, B, T, be->keeps_preatt(), o.recompute);
  // the model goes where the backend computes (a GPU's memory for cuda), if it fits there
  be->check_capacity(cfg, B, T);
  if (&be->memory() != &gpt_memory(model)) model = gpt_move_to(model, be->memory());
  gpt_set_recompute(model, o.recompute);
  if (o.ternary_a8) {
    NN_CHECK(attention_of(cfg) != AttentionKind::flash,
             "--ternary-a8 needs full attention: flash attention's backward reads the attention output, which is the "
             "attention projection's input that the int8 rounding replaces in place; add --attention full (llama's "
             "automatic choice is flash)");
    // every forward of this model from now on (training, evaluations) rounds the Linears' inputs
    set_int8_activations(model, true);
  }
  if (o.zero == 1 && ranks > 1) {
    gpt_shard_optimizer(model, *comm);  // (a resumed checkpoint's full moments: this rank keeps its shard)
    mem.adam = static_cast<int64_t>(2 * model.m_memory.size() * sizeof(float));
  }
  os << "model: " << cfg.n_layer << " layers, " << cfg.n_head << " heads, " << cfg.n_embd << " wide, context " << T
     << (cfg.bias ? "" : ", no biases") << ", vocabulary " << cfg.vocab_size << ": " << fmt(static_cast<double>(model.num_params) / 1e6, 3)
     << "M parameters (" << fmt(static_cast<double>(mem.total()) / (1 << 20), 1) << " MiB with gradients, AdamW and activations)\n";
  os << "backend: " << be->name() << ", " << threads << " thread" << (threads == 1 ? "" : "s") << "; batch " << B << " x "
     << o.grad_accum << " micro-batch" << (o.grad_accum == 1 ? "" : "es") << ", " << o.max_iters << " steps\n";
  if (ranks > 1) {
    // the ranks must train one model on one text with one recipe: refused at the start otherwise
    std::ostringstream recipe;
    recipe << cfg.n_layer << ' ' << cfg.n_head << ' ' << cfg.n_embd << ' ' << cfg.block_size << ' ' << cfg.vocab_size << ' '
           << model.num_params << ' ' << B << ' ' << o.grad_accum << ' ' << o.max_iters << ' ' << o.lr << ' ' << o.min_lr
           << ' ' << o.warmup_iters << ' ' << o.lr_decay_iters << ' ' << o.weight_decay << ' ' << o.beta1 << ' ' << o.beta2
           << ' ' << o.eps << ' ' << o.grad_clip << ' ' << o.seed << ' ' << o.allreduce << ' ' << start << ' '
           << o.backend << ' ' << be->precision() << ' ' << o.eval_interval << ' ' << o.zero << ' ' << o.recompute;
    const std::string text = recipe.str();
    const uint64_t h = fnv1a(corpus.text.data(), corpus.text.size(), fnv1a(text.data(), text.size()));
    const std::string differ = ranks_differing(*comm, h);
    NN_CHECK(differ.empty(), "data parallel: " << rank_word(differ) << differ << " started with another model, text, "
                                               << "recipe (batch, steps, learning rates, AdamW, seed, all-reduce, ZeRO, recomputation) or "
                                               << "resumed step than rank 0 (" << text << ", " << corpus.path << "): every rank "
                                               << "must be started with the same flags and data; nothing was trained");
    os << "data parallel: " << ranks << " ranks (" << comm->name() << "), each its own " << o.grad_accum << " x " << B
       << " sequences a step (" << ranks * o.grad_accum * B << " in all); gradients summed by the " << o.allreduce
       << (model.sharded ? " ring's reduce-scatter, AdamW on each rank's shard (ZeRO-1), weights all-gathered"
                         : " all-reduce")
       << "; replicas checked equal at every evaluation\n";
  }
  if (o.recompute) os << "activation recomputation: each block's output kept, its inside recomputed in the backward\n";
  if (ternary && !o.quiet && lead) {
    os << "ternary (BitNet b1.58): the block Linears run as clamp(round(W / mean|W|), -1, 1) mean|W|, trained with the "
          "straight-through estimator on fp32 latents (what the checkpoints hold); evaluations use the ternary weights\n";
  }
  if (o.ternary_a8 && !o.quiet && lead) {
    os << "int8 activations (W1.58A8): every block Linear's input rounded per token to int8, absmax / 127, in every "
          "forward (training's: the gradient passes the rounding unchanged; evaluations and the sample: the same)\n";
  }

  // MFU: achieved FLOP/s over the peak measured now on what the backend runs on (the
  // lesson-03 FMA loop on the CPU; the FMA kernel or the tensor-core gemm on a GPU)
  const double flops_tok = flops_per_token(cfg, T);
  std::string peak_what;
  const double peak = o.quiet || !lead ? 0.0 : be->measure_peak_flops(threads, &peak_what);
  if (peak > 0) {
    os << "peak: " << fmt(peak / 1e9, 1) << " GFLOP/s (" << peak_what << "); "
       << "FLOPs/token = 6N + 12 L H Q T = " << nn::format_si(flops_tok) << "FLOP\n";
  } else if (!o.quiet && !peak_what.empty()) {
    os << "peak: " << peak_what << " (no MFU)\n";
  }

  // the log: a resumed run appends to the history before it
  const bool resuming = !o.resume.empty();
  nn::MetricsLog log = log_path == "none" || !lead ? nn::MetricsLog()
                                          : nn::MetricsLog(log_path, resuming ? nn::MetricsLog::Mode::Append
                                                                              : nn::MetricsLog::Mode::Truncate);
  if (log.cut_bytes() > 0) {
    os << "note: removed the unfinished last line (" << log.cut_bytes() << " bytes) of " << log_path
       << ", left by a run that stopped mid-write\n";
  }

  AdamWConfig acfg;
  acfg.beta1 = o.beta1;
  acfg.beta2 = o.beta2;
  acfg.eps = o.eps;
  acfg.weight_decay = o.weight_decay;

  StepOptions step_options;
  step_options.adamw = acfg;
  step_options.grad_clip = o.grad_clip;
  step_options.train = true;
  step_options.comm = comm;
  step_options.allreduce = allreduce;
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> batches(static_cast<size_t>(o.grad_accum));
  std::vector<MicroBatch> micro_batches(static_cast<size_t>(o.grad_accum));

  TrainResult result;
  bool wrote_best = false, wrote_last = false;
  int saved_step = start;  // the step of the newest checkpoint on disk

  // Saves one checkpoint; on failure (a full disk) training stops, naming what is kept.
  FullMoments gathered;  // ZeRO-1: the moments gathered from the ranks for this evaluation's checkpoints
  auto save = [&](const std::string& path, int step) {
    if (!lead) return;
    try {
      save_checkpoint(path, model, vocab, state, true, model.sharded ? &gathered : nullptr);
    } catch (const nn::Error& e) {
      NN_CHECK(false, e.what() << "\ntraining stopped at step " << step << ". " << last_good.text());
    }
  };
  // Writes one log line; a failed write (a full disk, /dev/full) stops the run. The state
  // since the last checkpoint is saved first (to the out-dir, which is not the log's
  // file), so the only thing lost is the log's tail.
  auto log_write = [&](const nn::MetricsLog::Record& record, int step) {
    try {
      log.write(record);
    } catch (const nn::Error& e) {
      std::string kept;
      if (model.sharded) {
        kept = " The state since step " + std::to_string(saved_step) + " could not be saved: the AdamW moments are "
               "sharded across the ranks, which are not all here to gather them.";
      } else if (step > saved_step) {
        try {
          state.step = step;
          save_checkpoint(last_path, model, vocab, state);
          last_good.path = last_path;
          last_good.step = step;
          last_good.resumed_from = false;
          kept = " The state at step " + std::to_string(step) + " was saved first.";
        } catch (const nn::Error&) {
          kept = " Saving the state at step " + std::to_string(step) + " failed as well.";
        }
      }
      NN_CHECK(false, e.what() << "\ntraining stopped at step " << step << "." << kept << " " << last_good.text()
                               << ". Run again with a --log that can be written (or --log none)");
    }
  };

  if (resuming) {
    log_write(nn::MetricsLog::Record().add("step", start).add("split", "resume").add("checkpoint", o.resume), start);
  }

  auto run_eval = [&](int step) {
    if (comm != nullptr) check_replicas(model, *comm, step);
    if (model.sharded && step > 0) gathered = gpt_gather_moments(model, *comm);  // every rank takes part
    if (!lead) return;  // rank 0 evaluates; the others go on to the next step's all-reduce
    // --ternary: the model holds the latents; what it computes is their ternary rounding.
    // --ternary-a8: the model's hook (set_int8_activations) rounds the Linears' inputs in these
    // evaluate forwards too, so tl and vl are the W1.58A8 model's losses
    std::vector<float> latents;
    if (ternary) {
      latents = model.params_memory.to_vector();
      std::vector<float> tern = latents;
      ternarize_params(tern, model);
      model.params_memory.upload(tern.data(), tern.size());
    }
    const float tl = evaluate(model, *be, corpus.train, B, T, o.eval_iters, o.seed, kEvalTrain);
    const float vl = evaluate(model, *be, corpus.val, B, T, o.eval_iters, o.seed, kEvalVal);
    if (ternary) model.params_memory.upload(latents.data(), latents.size());
    result.final_train_loss = tl;
    result.final_val_loss = vl;
    log_write(nn::MetricsLog::Record().add("step", step).add("split", "eval").add("train_loss", static_cast<double>(tl))
                  .add("val_loss", static_cast<double>(vl)), step);
    NN_CHECK(std::isfinite(tl) && std::isfinite(vl),
             "the evaluation at step " << step << " gives train loss " << tl << ", val loss " << vl
                                       << ": training diverged and stopped; nothing was saved at this step. "
                                       << last_good.text() << ". Lower --lr, keep --grad-clip on, or check the data");
    std::string saved;
    if (step > 0) {
      state.step = step;
      if (vl < state.best_val_loss) {
        state.best_val_loss = vl;
        save(best_path, step);
        wrote_best = true;
        last_good.best_path = best_path;
        last_good.best_val_loss = vl;
        saved = ", saved " + best_path;
      }
      save(last_path, step);
      wrote_last = true;
      saved_step = step;
      last_good.path = last_path;
      last_good.step = step;
      last_good.resumed_from = false;
    }
    if (!o.quiet) {
      os << (step == 0 ? "" : "\n") << "step " << step << ": train loss " << fmt(tl) << ", val loss " << fmt(vl) << saved << "\n";
    }
  };

  if (start == 0) run_eval(0);
  nn::ProgressBar bar("train", o.max_iters, os);
  const auto t0 = std::chrono::steady_clock::now();
  double step_ms_sum = 0.0;
  int step = start;
  for (; step < o.max_iters; ++step) {
    bool over_budget =
        o.time_budget_s > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > o.time_budget_s;
    if (ranks > 1 && o.time_budget_s > 0) {  // rank 0's clock decides for all: the ranks stop at one step
      float flag = lead && over_budget ? 1.0f : 0.0f;
      comm->allreduce_sum(&flag, 1);
      over_budget = flag > 0.0f;
    }
    if (over_budget) {
      os << "\ntime budget of " << o.time_budget_s << " s reached at step " << step << "\n";
      break;
    }
    const auto s0 = std::chrono::steady_clock::now();
    const float lr = learning_rate(o, step);
    // the step's micro-batches: their offsets and dropout seeds a pure function of the index
    for (int micro = 0; micro < o.grad_accum; ++micro) {
      // with N ranks: the batches one process with --grad-accum N K would draw, rank r's K of them
      const uint64_t K = static_cast<uint64_t>(o.grad_accum);
      const uint64_t index = static_cast<uint64_t>(step) * K * static_cast<uint64_t>(ranks) +
                             static_cast<uint64_t>(rank) * K + static_cast<uint64_t>(micro);
      auto& [bx, by] = batches[static_cast<size_t>(micro)];
      get_batch(corpus.train, B, T, o.seed, kTrainStream, index, bx, by);
      micro_batches[static_cast<size_t>(micro)] = {bx.data(), by.data(), hash3(o.seed, kDropout, index)};
    }
    step_options.lr = lr;
    bool dumping = false;  // a dump that fails says so itself, with no advice about --lr
    step_options.after_backward = [&](int micro) {
      if (o.dump_step == step + 1 && micro == 0) {
        dumping = true;
        write_dump(o.dump_path, model);
        dumping = false;
        os << "\nwrote activations and gradients of step " << step + 1 << " to " << o.dump_path << "\n";
      }
    };
    StepResult r;
    try {
      r = ternary ? ternary_train_step(model, *be, micro_batches, B, T, step_options)
                    : train_step(model, *be, micro_batches, B, T, step_options);
    } catch (const nn::Error& e) {
      if (dumping) throw;
      // a loss or gradient norm that is not finite
      NN_CHECK(false, e.what() << " at step " << step + 1 << ": training stopped. " << last_good.text()
                               << ". Lower --lr, keep --grad-clip on, or check the data");
    }
    const double loss = r.loss;
    const float norm = r.grad_norm;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
    step_ms_sum += ms;
    result.step_losses.push_back(static_cast<float>(loss));
    const double tok_s = static_cast<double>(B) * T * o.grad_accum * ranks / (ms / 1e3);  // all ranks' tokens
    const double mfu = peak > 0 ? tok_s / ranks * flops_tok / peak : 0.0;  // per rank, against rank 0's peak
    nn::MetricsLog::Record rec = nn::MetricsLog::Record().add("step", step + 1).add("split", "train").add("loss", loss)
                                     .add("lr", static_cast<double>(lr)).add("grad_norm", static_cast<double>(norm))
                                     .add("ms", ms).add("tok_s", tok_s).add("mfu", mfu);
    if (ranks > 1) rec.add("wait_ms", r.wait_ms).add("comm_ms", r.comm_ms);  // rank 0's (gpt/model.h StepResult)
    log_write(rec, step + 1);
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
  if (wrote_best) result.best_path = best_path;
  if (wrote_last) result.last_path = last_path;
  if (!o.quiet) {
    // only what this run did: no "best val loss" that was never measured, no file never written
    os << "trained " << done << " steps in " << nn::format_duration(result.seconds) << " (" << fmt(result.ms_per_iter, 1)
       << " ms/step); ";
    if (!wrote_last) {
      os << "no checkpoint written"
         << (o.max_iters == 0 ? " (--max-iters 0: the initial model was evaluated, not trained)" : "") << "\n";
    } else {
      os << "best val loss " << fmt(state.best_val_loss) << "; checkpoints "
         << (wrote_best ? best_path + " (best), " : "") << last_path << " (last, step " << saved_step << ")\n";
    }
  }

  if (lead && o.sample_tokens > 0) {
    // sample from the best checkpoint, as a user would; the model in memory when this run
    // wrote none
    const std::string from = wrote_best || (resuming && fs::exists(best_path)) ? best_path
                             : wrote_last                                        ? last_path
                                                                                 : std::string();
    GPT sampled;
    if (!from.empty()) sampled = load_checkpoint(from, be->memory()).model;
    if (!from.empty() && o.ternary_a8) set_int8_activations(sampled, true);  // (the model in memory has it already)
    if (ternary) sampled = ternary_copy(from.empty() ? model : sampled);  // what a --ternary model computes
    SampleOptions so;
    so.prompt = prompt;
    so.tokens = o.sample_tokens;
    so.temperature = o.temperature;
    so.top_k = o.top_k;
    so.seed = o.seed;
    os << "\n---- sample (temperature " << o.temperature << (o.top_k > 0 ? ", top-k " + std::to_string(o.top_k) : "")
       << ", from " << (from.empty() ? "the model in memory (no checkpoint written)" : from) << ") ----\n"
       << prompt << sample(from.empty() && !ternary ? model : sampled, *be, vocab, so) << "\n----\n";
  }
  return result;
}

}  // namespace gpt
