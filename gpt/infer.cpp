// gpt/infer.cpp: packing a GPT for inference, the Decoder (a forward over the new
// positions only, reading the past from the KV cache), and generation with and without it.
// See gpt/infer.h.
#include "gpt/infer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/clock.h"
#include "kernels/decode.h"
#include "nn/check.h"
#include "io/text.h"

namespace gpt {

using i64 = int64_t;

// ---- packed matrices --------------------------------------------------------------------------

namespace {

void check_packable(kernels::WeightFormat f, int rows, int cols, const char* what) {
  const std::string why = kernels::check_packable(f, rows, cols);
  NN_CHECK(why.empty(), "cannot pack " << what << " (" << rows << " x " << cols << ") as "
                                       << kernels::format_name(f) << ": " << why);
}

}  // namespace

kernels::WeightFormat head_format(kernels::WeightFormat format) {
  return format == kernels::WeightFormat::sparse24 ? kernels::WeightFormat::f32 : format;
}

namespace {

// Every matrix the decoder reads packed, with its (rows, cols), checked before any work.
void check_model_packable(const GPTConfig& c, kernels::WeightFormat f) {
  const int C = c.n_embd;
  check_packable(f, qkv_channels(c), C, "attn.c_attn.weight");
  check_packable(f, C, C, "attn.c_proj.weight");
  check_packable(f, fc_channels(c), C, "mlp.c_fc.weight");
  check_packable(f, C, mlp_hidden(c), "mlp.c_proj.weight");
  check_packable(head_format(f), c.vocab_size, C, c.tie_embeddings ? "the head (wte)" : "the head (lm_head)");
}

// Packs on the host (kernels::pack_weights), then moves the result into `memory` (a move
// when that is host memory, a copy up to the device otherwise).
kernels::PackedWeights pack_into(const float* w, int rows, int cols, kernels::WeightFormat f, Memory& memory) {
  kernels::PackedWeights p = kernels::pack_weights(w, rows, cols, f);
  if (&memory == &p.memory()) return p;
  return p.to(memory);
}

// W <- what format f stores for it (in place, host memory).
void round_trip(float* w, int rows, int cols, kernels::WeightFormat f) {
  const kernels::PackedWeights p = kernels::pack_weights(w, rows, cols, f);
  kernels::unpack_weights(p.view(), w);
}

}  // namespace

// ---- the inference model ------------------------------------------------------------------------

int64_t InferenceModel::weight_bytes_per_token() const {
  auto b = static_cast<i64>(head.bytes());
  for (size_t l = 0; l < qkvw.size(); ++l) {
    b += static_cast<i64>(qkvw[l].bytes() + attprojw[l].bytes() + fcw[l].bytes() + fcprojw[l].bytes());
  }
  b += static_cast<i64>(vectors.size() * sizeof(float));
  // one row of wte, and one of wpe (gpt2)
  b += (wpe.empty() ? 1 : 2) * static_cast<i64>(config.n_embd) * static_cast<i64>(sizeof(float));
  return b;
}

int64_t InferenceModel::bytes() const {
  auto b = static_cast<i64>(head.bytes());
  for (size_t l = 0; l < qkvw.size(); ++l) {
    b += static_cast<i64>(qkvw[l].bytes() + attprojw[l].bytes() + fcw[l].bytes() + fcprojw[l].bytes());
  }
  b += static_cast<i64>((vectors.size() + wte.size() + wpe.size() + rope_cos.size() + rope_sin.size()) * sizeof(float));
  return b;
}

const kernels::PackedWeights& InferenceModel::linear(Linear which, int l) const {
  const auto ul = static_cast<size_t>(l);
  switch (which) {
    case Linear::qkv: return qkvw[ul];
    case Linear::attproj: return attprojw[ul];
    case Linear::fc: return fcw[ul];
    case Linear::fcproj: return fcprojw[ul];
  }
  return qkvw[ul];
}

InferenceModel pack_model(const GPT& model, kernels::WeightFormat format, Memory& memory) {
  const GPTConfig& c = model.config;
  validate(c);
  check_model_packable(c, format);
  NN_CHECK(static_cast<int64_t>(model.params_memory.size()) == num_parameters(c),
           "pack_model: the model has no parameters (was it created with gpt_create?)");
  // a host copy (the model may live on a GPU), read through the layout of kParams
  std::vector<float> host = model.params_memory.to_vector();
  const ParameterTensors P = param_tensors(host.data(), c);
  const i64 L = c.n_layer, C = c.n_embd, V = c.vocab_size, maxT = c.block_size;

  InferenceModel m;
  m.config = c;
  m.format = format;
  m.wte = Array<float>(memory, static_cast<size_t>(V * C));
  m.wte.upload(P.wte, m.wte.size());
  m.params.wte = m.wte.data();
  if (P.wpe != nullptr) {
    m.wpe = Array<float>(memory, static_cast<size_t>(maxT * C));
    m.wpe.upload(P.wpe, m.wpe.size());
    m.params.wpe = m.wpe.data();
  }
  if (c.arch == Arch::llama) {
    // RoPE's tables, as gpt_create makes them
    m.rope_cos = Array<float>(memory, model.rope_cos.size());
    m.rope_sin = Array<float>(memory, model.rope_sin.size());
    const std::vector<float> cos = model.rope_cos.to_vector(), sin = model.rope_sin.to_vector();
    m.rope_cos.upload(cos.data(), cos.size());
    m.rope_sin.upload(sin.data(), sin.size());
  }

  // the vectors (the rank-1 rows of kParams), one after another; a bias the model lacks
  // takes no room
  i64 total = 0;
  for (const ParamSpec& s : kParams) total += s.shape.rank == 1 ? param_numel(s, c) : 0;
  m.vectors = Array<float>(memory, static_cast<size_t>(total));
  i64 at = 0;
  for (const ParamSpec& s : kParams) {
    const i64 n = param_numel(s, c);
    if (s.shape.rank != 1 || n == 0) continue;
    m.vectors.upload(P.*s.field, static_cast<size_t>(n), static_cast<size_t>(at));
    m.params.*s.field = m.vectors.data() + at;
    at += n;
  }

  const int Ci = c.n_embd;
  for (int l = 0; l < L; ++l) {
    const ParameterTensors p = layer_params(P, c, l);
    m.qkvw.push_back(pack_into(p.qkvw, qkv_channels(c), Ci, format, memory));
    m.attprojw.push_back(pack_into(p.attprojw, Ci, Ci, format, memory));
    m.fcw.push_back(pack_into(p.fcw, fc_channels(c), Ci, format, memory));
    m.fcprojw.push_back(pack_into(p.fcprojw, Ci, mlp_hidden(c), format, memory));
  }
  m.head = pack_into(head_weight(P), c.vocab_size, Ci, head_format(format), memory);
  return m;
}

GPT dequantized_copy(const GPT& model, kernels::WeightFormat format) {
  const GPTConfig& c = model.config;
  check_model_packable(c, format);
  GPT out = gpt_move_to(model, host_memory());
  const int Ci = c.n_embd;
  for (int l = 0; l < c.n_layer; ++l) {
    const ParameterTensors p = layer_params(out.params, c, l);
    round_trip(p.qkvw, qkv_channels(c), Ci, format);
    round_trip(p.attprojw, Ci, Ci, format);
    round_trip(p.fcw, fc_channels(c), Ci, format);
    round_trip(p.fcprojw, Ci, mlp_hidden(c), format);
  }
  round_trip(const_cast<float*>(head_weight(out.params)), c.vocab_size, Ci, head_format(format));
  return out;
}

// ---- the decoder ----------------------------------------------------------------------------------
// Activations: kActivations at (max_batch, block_size) rows (a prefill of a whole block), one
// layer's worth reused layer after layer (nothing is kept for a backward), without the
// attention maps (the decode attention reads the cache), dropout masks, probs and losses.
namespace {

ActivationLayout decoder_layout(const GPTConfig& c, int max_batch) {
  ActivationLayout l = with_config(ActivationLayout{}, c);
  l.B = max_batch;
  l.T = c.block_size;
  l.stacked = false;
  l.preatt = false;
  l.att = false;
  l.masks = false;
  l.loss = false;
  return l;
}

// The decode step's kernels: matvecs on the packed matrices, attention over the KV cache.
class DecodeKernels final : public BlockKernels {
 public:
  DecodeKernels(const InferenceModel& m, Backend& be, float* kcache, float* vcache, int max_batch, int B, int n,
                int pos)
      : m_(m), be_(be), kcache_(kcache), vcache_(vcache), max_batch_(max_batch), B_(B), n_(n), pos_(pos) {}
  // The int8 cache instead (lesson 15): values and scales, (L, max_batch, maxT, KV) and
  // (L, max_batch, maxT, NKV).
  void use_int8(int8_t* kq, int8_t* vq, float* kscale, float* vscale) {
    kq_ = kq;
    vq_ = vq;
    kscale_ = kscale;
    vscale_ = vscale;
  }
  void linear(float* out, const float* inp, const LinearLayer& w, int N) override {
    be_.matvec_forward(out, inp, m_.linear(w.which, w.layer).view(), w.bias, N);
  }
  void linear_gelu(float* pre, float* out, const float* inp, const LinearLayer& w, int N) override {
    linear(pre, inp, w, N);
    be_.gelu_forward(out, pre, static_cast<i64>(N) * w.out);
  }
  void attention(float* out, float* /*preatt*/, float* /*att*/, float* /*lse*/, const float* qkv, int layer) override {
    const GPTConfig& c = m_.config;
    // layer l's cache: (max_batch, maxT, NKV hs) for k and for v
    const i64 layer_kv = static_cast<i64>(max_batch_) * c.block_size * kv_channels(c);
    if (kq_ != nullptr) {
      const i64 layer_scales = static_cast<i64>(max_batch_) * c.block_size * kv_heads(c);
      be_.attention_decode_int8(out, kq_ + layer * layer_kv, vq_ + layer * layer_kv, kscale_ + layer * layer_scales,
                                vscale_ + layer * layer_scales, qkv, B_, n_, pos_, c.n_embd, c.n_head, kv_heads(c),
                                c.block_size);
      return;
    }
    be_.attention_decode(out, kcache_ + layer * layer_kv, vcache_ + layer * layer_kv, qkv, B_, n_, pos_, c.n_embd,
                         c.n_head, kv_heads(c), c.block_size);
  }
  void rope(float* qkv) override {
    // the n new positions of each sequence continue where the cache ends
    const GPTConfig& c = m_.config;
    const int C = c.n_embd, hs = C / c.n_head, QKV = qkv_channels(c);
    be_.rope_forward(qkv, qkv, m_.rope_cos.data(), m_.rope_sin.data(), B_, n_, c.n_head, hs, QKV, pos_);
    be_.rope_forward(qkv + C, qkv + C, m_.rope_cos.data(), m_.rope_sin.data(), B_, n_, kv_heads(c), hs, QKV, pos_);
  }

 private:
  const InferenceModel& m_;
  Backend& be_;
  float* kcache_;
  float* vcache_;
  int8_t* kq_ = nullptr;
  int8_t* vq_ = nullptr;
  float* kscale_ = nullptr;
  float* vscale_ = nullptr;
  int max_batch_, B_, n_, pos_;
};

}  // namespace

Decoder::Decoder(const InferenceModel& m, Backend& be, int max_batch, KvCache kv)
    : m_(&m), be_(&be), max_batch_(max_batch), kv_(kv) {
  const GPTConfig& c = m.config;
  NN_CHECK(max_batch >= 1, "Decoder: max_batch must be >= 1, got " << max_batch);
  NN_CHECK(!m.wte.empty() && m.qkvw.size() == static_cast<size_t>(c.n_layer),
           "Decoder: the InferenceModel is empty (make it with pack_model)");
  NN_CHECK(&be.memory() == &m.wte.memory(),
           "Decoder: the model is in " << m.wte.memory().where() << " but the " << be.name() << " backend computes in "
                                       << be.memory().where() << " (pack_model(model, format, backend.memory()))");
  const size_t cells = static_cast<size_t>(c.n_layer) * static_cast<size_t>(max_batch) *
                       static_cast<size_t>(c.block_size) * static_cast<size_t>(kv_channels(c));
  if (kv_ == KvCache::f32) {
    kcache_ = Array<float>(be.memory(), cells);
    vcache_ = Array<float>(be.memory(), cells);
  } else {
    // int8 values, and one scale per (layer, sequence, position, KV head)
    const size_t scales = cells / static_cast<size_t>(c.n_embd / c.n_head);
    kq_ = Array<int8_t>(be.memory(), cells);
    vq_ = Array<int8_t>(be.memory(), cells);
    kscale_ = Array<float>(be.memory(), scales);
    vscale_ = Array<float>(be.memory(), scales);
  }
  layout_ = decoder_layout(c, max_batch);
  acts_ = Array<float>(be.memory(), static_cast<size_t>(activation_floats(c, layout_)));
  ids_ = Array<int32_t>(be.memory(), static_cast<size_t>(max_batch) * static_cast<size_t>(c.block_size));
}

void Decoder::rewind(int p) {
  NN_CHECK(p >= 0 && p <= pos_, "Decoder::rewind(" << p << "): the cache holds positions 0.." << pos_
                                                   << " (rewind to 0 <= p <= " << pos_ << ")");
  // positions >= p are simply overwritten by the next step
  pos_ = p;
}

int64_t Decoder::kv_cache_bytes() const {
  const GPTConfig& c = m_->config;
  if (kv_ == KvCache::int8) {
    // what is allocated: the int8 values and the float scales, for K and for V
    return static_cast<i64>(kq_.bytes() + vq_.bytes() + kscale_.bytes() + vscale_.bytes());
  }
  return 2 * static_cast<i64>(c.n_layer) * max_batch_ * c.block_size * kv_channels(c) * static_cast<i64>(sizeof(float));
}

Decoder::Int8Cache Decoder::int8_cache() const {
  NN_CHECK(kv_ == KvCache::int8, "Decoder::int8_cache: this Decoder's KV cache is fp32 (KvCache::int8 makes an int8 one)");
  return {kq_.to_vector(), vq_.to_vector(), kscale_.to_vector(), vscale_.to_vector()};
}

const std::vector<float>& Decoder::step(const int32_t* tokens, int B, int n) {
  const GPTConfig& c = m_->config;
  const int C = c.n_embd, V = c.vocab_size, maxT = c.block_size;
  NN_CHECK(B >= 1 && B <= max_batch_, "Decoder::step: batch " << B << " outside 1.." << max_batch_
                                                              << " (the Decoder's max_batch)");
  NN_CHECK(n >= 1, "Decoder::step: n = " << n << " tokens; feed at least one");
  NN_CHECK(pos_ + n <= maxT, "Decoder::step: positions " << pos_ << ".." << pos_ + n - 1 << " exceed block_size "
                                                         << maxT << " (rewind, or start again with the last tokens)");
  const i64 N = static_cast<i64>(B) * n;
  for (i64 i = 0; i < N; ++i) {
    NN_CHECK(tokens[i] >= 0 && tokens[i] < V,
             "Decoder::step: token id " << tokens[i] << " at " << i << " is outside the vocabulary [0, " << V << ")");
  }
  ids_.upload(tokens, static_cast<size_t>(N));
  const InferenceModel& M = *m_;
  Backend& be = *be_;
  const ActivationTensors A = activation_tensors(acts_.data(), c, layout_);
  const int Ni = static_cast<int>(N);

  // x (B, n, C) = wte[tok] + wpe[pos + t]: the positions continue where the cache ends
  // (llama: wte[tok]; its positions enter through RoPE, DecodeKernels::rope)
  be.encoder_forward(A.encoded, ids_.data(), M.wte.data(),
                     M.wpe.empty() ? nullptr : M.wpe.data() + static_cast<i64>(pos_) * C, B, n, C, V);
  // the L blocks (training's block_forward) and the final norm, with the decode kernels
  DecodeKernels k(M, be, kcache_.data(), vcache_.data(), max_batch_, B, n, pos_);
  if (kv_ == KvCache::int8) k.use_int8(kq_.data(), vq_.data(), kscale_.data(), vscale_.data());
  transformer_forward(be, k, c, M.params, A, layout_, A.encoded, Ni, Dropout{}, fuses(be, fusion_, c));
  // the head (wte when tied, else lm_head; no bias): logits (B, n, V)
  be.matvec_forward(A.logits, A.lnf, M.head.view(), nullptr, Ni);
  logits_.resize(static_cast<size_t>(N * V));
  acts_.memory().to_host(logits_.data(), A.logits, logits_.size() * sizeof(float));
  pos_ += n;
  return logits_;
}

// ---- generation --------------------------------------------------------------------------------

namespace {

void check_generate(const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  NN_CHECK(!prompt.empty(), "generate: the prompt must hold at least one token");
  NN_CHECK(o.tokens >= 0, "generate: the number of tokens must be >= 0, got " << o.tokens);
  NN_CHECK(o.top_k >= 0, "generate: top_k must be >= 0 (0: off), got " << o.top_k);
  NN_CHECK(o.top_p > 0.0f && o.top_p <= 1.0f, "generate: top_p must be in (0, 1] (1: off), got " << o.top_p);
}

}  // namespace

int32_t sample_token(const float* logits, int V, const GenerateOptions& o, float u) {
  NN_CHECK(o.top_k >= 0, "sample_token: top_k must be >= 0 (0: off), got " << o.top_k);
  NN_CHECK(o.top_p > 0.0f && o.top_p <= 1.0f, "sample_token: top_p must be in (0, 1] (1: off), got " << o.top_p);
  const bool use_k = o.top_k > 0 && o.top_k < V;
  const bool use_p = o.top_p < 1.0f && o.temperature > 0.0f;
  // the defaults draw exactly as before (the tests of lessons 08-10 pin those draws)
  if (!use_k && !use_p) return nn::sample_from_logits(logits, V, o.temperature, u);
  for (int i = 0; i < V; ++i) {
    NN_CHECK(std::isfinite(logits[i]), "logit " << i << " is " << logits[i] << ": the model diverged");
  }
  // the candidates, largest logit first (ties: the smaller id first, as greedy's argmax)
  const int K = use_k ? o.top_k : V;
  std::vector<int32_t> order(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) order[static_cast<size_t>(i)] = i;
  const auto larger = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  std::partial_sort(order.begin(), order.begin() + K, order.end(), larger);
  int kept = K;
  if (use_p) {
    // the nucleus: softmax over the K candidates at this temperature (in double, max
    // subtracted), then the shortest prefix whose mass reaches top_p (at least one token)
    const double T = o.temperature, lmax = logits[order[0]];
    std::vector<double> w(static_cast<size_t>(K));
    double sum = 0.0;
    for (int i = 0; i < K; ++i) {
      w[static_cast<size_t>(i)] = std::exp((static_cast<double>(logits[order[static_cast<size_t>(i)]]) - lmax) / T);
      sum += w[static_cast<size_t>(i)];
    }
    double cum = 0.0;
    kept = 0;
    while (kept < K) {
      cum += w[static_cast<size_t>(kept)];
      ++kept;
      if (cum >= static_cast<double>(o.top_p) * sum) break;
    }
  }
  std::vector<float> sub(static_cast<size_t>(kept));
  for (int i = 0; i < kept; ++i) sub[static_cast<size_t>(i)] = logits[order[static_cast<size_t>(i)]];
  return order[static_cast<size_t>(nn::sample_from_logits(sub.data(), kept, o.temperature, u))];
}

std::vector<int32_t> generate(Decoder& dec, const std::vector<int32_t>& prompt, const GenerateOptions& o,
                              GenerateStats* stats) {
  check_generate(prompt, o);
  const GPTConfig& c = dec.model().config;
  const int V = c.vocab_size, maxT = c.block_size;
  const int refill = std::max(1, maxT / 2);
  nn::Rng rng(o.seed);
  std::vector<int32_t> ids = prompt, out;
  GenerateStats st;

  // prefill: the prompt's last block_size tokens in one step
  dec.reset();
  double t0 = kernels::now_seconds();
  const int keep = std::min(static_cast<int>(ids.size()), maxT);
  const std::vector<float>* logits = &dec.step(ids.data() + (ids.size() - static_cast<size_t>(keep)), 1, keep);
  const float* row = logits->data() + static_cast<i64>(keep - 1) * V;
  st.prefill_seconds = kernels::now_seconds() - t0;

  // decode: draw from the last row, feed the draw (one step per generated token)
  t0 = kernels::now_seconds();
  for (int i = 0; i < o.tokens; ++i) {
    const int32_t next = sample_token(row, V, o, rng.uniform());
    ids.push_back(next);
    out.push_back(next);
    if (next == o.eos_id) break;
    if (dec.pos() < maxT) {
      logits = &dec.step(&next, 1, 1);
      row = logits->data();
    } else {
      // the cache is full: start again from the last block_size / 2 tokens (one prefill)
      dec.reset();
      logits = &dec.step(ids.data() + (ids.size() - static_cast<size_t>(refill)), 1, refill);
      row = logits->data() + static_cast<i64>(refill - 1) * V;
    }
  }
  st.decode_seconds = kernels::now_seconds() - t0;
  st.generated = static_cast<int>(out.size());
  if (stats != nullptr) *stats = st;
  return out;
}

std::vector<int32_t> generate_without_cache(GPT& model, Backend& be, const std::vector<int32_t>& prompt,
                                            const GenerateOptions& o, GenerateStats* stats) {
  check_generate(prompt, o);
  const int V = model.config.vocab_size, maxT = model.config.block_size;
  nn::Rng rng(o.seed);
  std::vector<int32_t> ids = prompt, out;
  std::vector<float> row(static_cast<size_t>(V));
  GenerateStats st;
  const double t0 = kernels::now_seconds();
  for (int i = 0; i < o.tokens; ++i) {
    // the model sees at most block_size tokens: the most recent ones (as gpt::sample)
    const int T = std::min(static_cast<int>(ids.size()), maxT);
    gpt_forward(model, be, ids.data() + (ids.size() - static_cast<size_t>(T)), nullptr, 1, T);
    gpt_memory(model).to_host(row.data(), model.acts.logits + static_cast<i64>(T - 1) * V, row.size() * sizeof(float));
    const int32_t next = sample_token(row.data(), V, o, rng.uniform());
    ids.push_back(next);
    out.push_back(next);
    if (next == o.eos_id) break;
  }
  st.decode_seconds = kernels::now_seconds() - t0;
  st.generated = static_cast<int>(out.size());
  if (stats != nullptr) *stats = st;
  return out;
}

}  // namespace gpt
