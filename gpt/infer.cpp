// gpt/infer.cpp: packing a GPT for inference, the Decoder (a forward over the new
// positions only, reading the past from the KV cache), and generation with and without it.
// See gpt/infer.h.
#include "gpt/infer.h"

#include <algorithm>
#include <map>
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

kernels::WeightsView PackedMatrix::view() const {
  return {format, rows, cols, data.data(), scales.empty() ? nullptr : scales.data(),
          index.empty() ? nullptr : index.data()};
}

int64_t PackedMatrix::bytes() const { return static_cast<int64_t>(kernels::format_bytes(format, rows, cols)); }

namespace {

// The parameters of a model, as pointers into a HOST copy of its flat buffer (the model
// itself may live on a GPU). Found by slice name, so the layout is gpt/model.cpp's alone.
ParameterTensors host_params(const GPTData& model, std::vector<float>& host) {
  host = model.params_memory.to_vector();
  std::map<std::string, i64> offset;
  for (const ParamSlice& s : model.slices) offset[s.name] = s.offset;
  auto find = [&](const std::string& name) -> float* {
    const auto it = offset.find(name);
    return it == offset.end() ? nullptr : host.data() + it->second;
  };
  ParameterTensors p{};
  p.wte = find("wte");
  p.wpe = find("wpe");
  // per-layer tensors are stacked over L: layer 0's slice starts the stack
  p.ln1w = find("h.0.ln_1.weight");
  p.ln1b = find("h.0.ln_1.bias");
  p.qkvw = find("h.0.attn.c_attn.weight");
  p.qkvb = find("h.0.attn.c_attn.bias");
  p.attprojw = find("h.0.attn.c_proj.weight");
  p.attprojb = find("h.0.attn.c_proj.bias");
  p.ln2w = find("h.0.ln_2.weight");
  p.ln2b = find("h.0.ln_2.bias");
  p.fcw = find("h.0.mlp.c_fc.weight");
  p.fcb = find("h.0.mlp.c_fc.bias");
  p.fcprojw = find("h.0.mlp.c_proj.weight");
  p.fcprojb = find("h.0.mlp.c_proj.bias");
  p.lnfw = find("ln_f.weight");
  p.lnfb = find("ln_f.bias");
  NN_CHECK(p.wte != nullptr && p.wpe != nullptr && p.qkvw != nullptr && p.lnfw != nullptr,
           "pack_model: the model has no parameters (was it created with gpt_create?)");
  return p;
}

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
  check_packable(f, 3 * C, C, "attn.c_attn.weight");
  check_packable(f, C, C, "attn.c_proj.weight");
  check_packable(f, 4 * C, C, "mlp.c_fc.weight");
  check_packable(f, C, 4 * C, "mlp.c_proj.weight");
  check_packable(head_format(f), c.vocab_size, C, "the head (wte)");
}

PackedMatrix pack_into(const float* w, int rows, int cols, kernels::WeightFormat f, Memory& memory) {
  const kernels::PackedWeights p = kernels::pack_weights(w, rows, cols, f);
  PackedMatrix m;
  m.format = f;
  m.rows = rows;
  m.cols = cols;
  m.data = Array<uint8_t>(memory, p.data.size());
  m.data.upload(p.data.data(), p.data.size());
  m.scales = Array<float>(memory, p.scales.size());
  m.scales.upload(p.scales.data(), p.scales.size());
  m.index = Array<uint8_t>(memory, p.index.size());
  m.index.upload(p.index.data(), p.index.size());
  return m;
}

// W <- what format f stores for it (in place, host memory).
void round_trip(float* w, int rows, int cols, kernels::WeightFormat f) {
  const kernels::PackedWeights p = kernels::pack_weights(w, rows, cols, f);
  kernels::unpack_weights(p.view(), w);
}

}  // namespace

// ---- the inference model ------------------------------------------------------------------------

int64_t InferenceModel::weight_bytes_per_token() const {
  i64 b = head.bytes();
  for (size_t l = 0; l < qkvw.size(); ++l) b += qkvw[l].bytes() + attprojw[l].bytes() + fcw[l].bytes() + fcprojw[l].bytes();
  b += static_cast<i64>(vectors.size() * sizeof(float));
  b += 2 * static_cast<i64>(config.n_embd) * static_cast<i64>(sizeof(float));  // one row of wte, one of wpe
  return b;
}

int64_t InferenceModel::bytes() const {
  i64 b = head.bytes();
  for (size_t l = 0; l < qkvw.size(); ++l) b += qkvw[l].bytes() + attprojw[l].bytes() + fcw[l].bytes() + fcprojw[l].bytes();
  b += static_cast<i64>((vectors.size() + wte.size() + wpe.size()) * sizeof(float));
  return b;
}

InferenceModel pack_model(const GPT& model, kernels::WeightFormat format, Memory& memory) {
  const GPTConfig& c = model.config;
  validate(c);
  check_model_packable(c, format);
  std::vector<float> host;
  const ParameterTensors P = host_params(model, host);
  const i64 L = c.n_layer, C = c.n_embd, V = c.vocab_size, maxT = c.block_size;

  InferenceModel m;
  m.config = c;
  m.format = format;
  m.wte = Array<float>(memory, static_cast<size_t>(V * C));
  m.wte.upload(P.wte, m.wte.size());
  m.wpe = Array<float>(memory, static_cast<size_t>(maxT * C));
  m.wpe.upload(P.wpe, m.wpe.size());

  // the vectors, one after another; a bias the model lacks takes no room
  struct Vec {
    const float* src;
    i64 n;
    const float** dst;
  };
  const Vec vecs[] = {{P.ln1w, L * C, &m.ln1w},         {P.ln1b, L * C, &m.ln1b},     {P.qkvb, L * 3 * C, &m.qkvb},
                      {P.attprojb, L * C, &m.attprojb}, {P.ln2w, L * C, &m.ln2w},     {P.ln2b, L * C, &m.ln2b},
                      {P.fcb, L * 4 * C, &m.fcb},       {P.fcprojb, L * C, &m.fcprojb}, {P.lnfw, C, &m.lnfw},
                      {P.lnfb, C, &m.lnfb}};
  i64 total = 0;
  for (const Vec& v : vecs) total += v.src != nullptr ? v.n : 0;
  m.vectors = Array<float>(memory, static_cast<size_t>(total));
  i64 at = 0;
  for (const Vec& v : vecs) {
    if (v.src == nullptr) {
      *v.dst = nullptr;
      continue;
    }
    m.vectors.upload(v.src, static_cast<size_t>(v.n), static_cast<size_t>(at));
    *v.dst = m.vectors.data() + at;
    at += v.n;
  }

  const int Ci = c.n_embd;
  for (i64 l = 0; l < L; ++l) {
    m.qkvw.push_back(pack_into(P.qkvw + l * 3 * C * C, 3 * Ci, Ci, format, memory));
    m.attprojw.push_back(pack_into(P.attprojw + l * C * C, Ci, Ci, format, memory));
    m.fcw.push_back(pack_into(P.fcw + l * 4 * C * C, 4 * Ci, Ci, format, memory));
    m.fcprojw.push_back(pack_into(P.fcprojw + l * C * 4 * C, Ci, 4 * Ci, format, memory));
  }
  m.head = pack_into(P.wte, c.vocab_size, Ci, head_format(format), memory);
  return m;
}

GPT dequantized_copy(const GPT& model, kernels::WeightFormat format) {
  const GPTConfig& c = model.config;
  check_model_packable(c, format);
  GPT out = gpt_move_to(model, host_memory());
  const ParameterTensors& P = out.params;
  const i64 C = c.n_embd;
  const int Ci = c.n_embd;
  for (i64 l = 0; l < c.n_layer; ++l) {
    round_trip(P.qkvw + l * 3 * C * C, 3 * Ci, Ci, format);
    round_trip(P.attprojw + l * C * C, Ci, Ci, format);
    round_trip(P.fcw + l * 4 * C * C, 4 * Ci, Ci, format);
    round_trip(P.fcprojw + l * C * 4 * C, Ci, 4 * Ci, format);
  }
  round_trip(P.wte, c.vocab_size, Ci, head_format(format));
  return out;
}

// ---- the decoder ----------------------------------------------------------------------------------
// Activations for R = max_batch * block_size rows (a prefill of a whole block), one layer's
// worth reused layer after layer (nothing is kept for a backward):
//   x (R,C) the residual stream, r2 (R,C) x + attention branch, ln (R,C), qkv (R,3C),
//   atty (R,C), proj (R,C) a branch's output, fch (R,4C), fchg (R,4C), logits (R,V),
//   mean (R), rstd (R).
namespace {

struct DecoderActs {
  float *x, *r2, *ln, *qkv, *atty, *proj, *fch, *fchg, *logits, *mean, *rstd;
};

i64 decoder_act_floats(const GPTConfig& c, int max_batch) {
  const i64 R = static_cast<i64>(max_batch) * c.block_size, C = c.n_embd, V = c.vocab_size;
  return R * (16 * C + V + 2);
}

DecoderActs point_decoder_acts(float* base, const GPTConfig& c, int max_batch) {
  const i64 R = static_cast<i64>(max_batch) * c.block_size, C = c.n_embd, V = c.vocab_size;
  DecoderActs a{};
  float** ptrs[] = {&a.x, &a.r2, &a.ln, &a.qkv, &a.atty, &a.proj, &a.fch, &a.fchg, &a.logits, &a.mean, &a.rstd};
  const i64 sizes[] = {R * C, R * C, R * C, R * 3 * C, R * C, R * C, R * 4 * C, R * 4 * C, R * V, R, R};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    *ptrs[i] = base;
    base += sizes[i];
  }
  return a;
}

}  // namespace

Decoder::Decoder(const InferenceModel& m, Backend& be, int max_batch) : m_(&m), be_(&be), max_batch_(max_batch) {
  const GPTConfig& c = m.config;
  NN_CHECK(max_batch >= 1, "Decoder: max_batch must be >= 1, got " << max_batch);
  NN_CHECK(!m.wte.empty() && m.qkvw.size() == static_cast<size_t>(c.n_layer),
           "Decoder: the InferenceModel is empty (make it with pack_model)");
  NN_CHECK(&be.memory() == &m.wte.memory(),
           "Decoder: the model is in " << m.wte.memory().where() << " but the " << be.name() << " backend computes in "
                                       << be.memory().where() << " (pack_model(model, format, backend.memory()))");
  const size_t kv = static_cast<size_t>(c.n_layer) * static_cast<size_t>(max_batch) *
                    static_cast<size_t>(c.block_size) * static_cast<size_t>(c.n_embd);
  kcache_ = Array<float>(be.memory(), kv);
  vcache_ = Array<float>(be.memory(), kv);
  acts_ = Array<float>(be.memory(), static_cast<size_t>(decoder_act_floats(c, max_batch)));
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
  return 2 * static_cast<i64>(c.n_layer) * max_batch_ * c.block_size * c.n_embd * static_cast<i64>(sizeof(float));
}

const std::vector<float>& Decoder::step(const int32_t* tokens, int B, int n) {
  const GPTConfig& c = m_->config;
  const int L = c.n_layer, C = c.n_embd, NH = c.n_head, V = c.vocab_size, maxT = c.block_size;
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
  const DecoderActs A = point_decoder_acts(acts_.data(), c, max_batch_);
  const InferenceModel& M = *m_;
  Backend& be = *be_;
  const int Ni = static_cast<int>(N);
  const i64 Cl = C;
  const i64 layer_kv = static_cast<i64>(max_batch_) * maxT * C;  // one layer's cache (max_batch, maxT, C)
  auto at = [](const float* p, i64 off) { return p != nullptr ? p + off : nullptr; };

  // x (B, n, C) = wte[tok] + wpe[pos + t]: the positions continue where the cache ends
  be.encoder_forward(A.x, ids_.data(), M.wte.data(), M.wpe.data() + pos_ * Cl, B, n, C, V);
  be.layernorm_forward(A.ln, A.mean, A.rstd, A.x, M.ln1w, M.ln1b, Ni, C);
  for (int l = 0; l < L; ++l) {
    const auto ul = static_cast<size_t>(l);
    // attention branch: x + proj(attention(LN1(x))), the keys and values of the past from the cache
    be.matvec_forward(A.qkv, A.ln, M.qkvw[ul].view(), at(M.qkvb, l * 3 * Cl), Ni);
    be.attention_decode(A.atty, kcache_.data() + l * layer_kv, vcache_.data() + l * layer_kv, A.qkv, B, n, pos_, C, NH,
                        maxT);
    be.matvec_forward(A.proj, A.atty, M.attprojw[ul].view(), at(M.attprojb, l * Cl), Ni);
    be.residual_layernorm_forward(A.r2, A.ln, A.mean, A.rstd, A.x, A.proj, M.ln2w + l * Cl, at(M.ln2b, l * Cl), Ni, C);
    // MLP branch: x + fcproj(gelu(fc(LN2(x))))
    be.matvec_forward(A.fch, A.ln, M.fcw[ul].view(), at(M.fcb, l * 4 * Cl), Ni);
    be.gelu_forward(A.fchg, A.fch, N * 4 * Cl);
    be.matvec_forward(A.proj, A.fchg, M.fcprojw[ul].view(), at(M.fcprojb, l * Cl), Ni);
    // the second residual add, fused with the next LayerNorm (the next layer's ln1, or ln_f)
    const bool last = l + 1 == L;
    const float* next_w = last ? M.lnfw : M.ln1w + (l + 1) * Cl;
    const float* next_b = last ? M.lnfb : at(M.ln1b, (l + 1) * Cl);
    be.residual_layernorm_forward(A.x, A.ln, A.mean, A.rstd, A.r2, A.proj, next_w, next_b, Ni, C);
  }
  // the head (wte, tied; no bias): logits (B, n, V)
  be.matvec_forward(A.logits, A.ln, M.head.view(), nullptr, Ni);
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
}

}  // namespace

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
    const int32_t next = nn::sample_from_logits(row, V, o.temperature, rng.uniform());
    ids.push_back(next);
    out.push_back(next);
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
  st.generated = o.tokens;
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
    const int32_t next = nn::sample_from_logits(row.data(), V, o.temperature, rng.uniform());
    ids.push_back(next);
    out.push_back(next);
  }
  st.decode_seconds = kernels::now_seconds() - t0;
  st.generated = o.tokens;
  if (stats != nullptr) *stats = st;
  return out;
}

}  // namespace gpt
