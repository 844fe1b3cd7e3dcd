// gpt/model.cpp: the GPT's memory layout, initialisation, forward, backward and AdamW
// step (gpt/model.h). Every op goes through gpt::Backend; this file only decides which op
// runs on which slice of which buffer, in which order.
#include "gpt/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "nn/check.h"
#include "nn/rng.h"

namespace gpt {

namespace {

using i64 = int64_t;

// Element counts of the 16 parameter tensors, in ParameterTensors order.
std::array<i64, kNumParamTensors> param_sizes(const GPTConfig& c) {
  const i64 V = c.vocab_size, maxT = c.block_size, L = c.n_layer, C = c.n_embd;
  const i64 b = c.bias ? 1 : 0;  // bias tensors are empty without biases
  return {V * C,     maxT * C, L * C,         b * L * C,     L * 3 * C * C, b * L * 3 * C, L * C * C, b * L * C,
          L * C,     b * L * C, L * 4 * C * C, b * L * 4 * C, L * C * 4 * C, b * L * C,     C,         b * C};
}

// p + offset, or nullptr for an absent (bias) tensor
inline float* at(float* p, i64 offset) { return p != nullptr ? p + offset : nullptr; }
inline const float* at(const float* p, i64 offset) { return p != nullptr ? p + offset : nullptr; }

// Points the 16 members of ParameterTensors into `base`, in order.
ParameterTensors point_params(float* base, const GPTConfig& c) {
  ParameterTensors p{};
  float** ptrs[kNumParamTensors] = {&p.wte,  &p.wpe,      &p.ln1w,     &p.ln1b, &p.qkvw, &p.qkvb,
                                    &p.attprojw, &p.attprojb, &p.ln2w, &p.ln2b, &p.fcw,  &p.fcb,
                                    &p.fcprojw,  &p.fcprojb,  &p.lnfw, &p.lnfb};
  const auto sizes = param_sizes(c);
  for (int i = 0; i < kNumParamTensors; ++i) {
    const i64 n = sizes[static_cast<size_t>(i)];
    *ptrs[i] = n > 0 ? base : nullptr;
    base += n;
  }
  return p;
}

// Does tensor kind i (ParameterTensors order) take weight decay? Matrices and embeddings.
constexpr std::array<bool, kNumParamTensors> kDecay = {true,  true,  false, false, true,  false,
                                                       true,  false, false, false, true,  false,
                                                       true,  false, false, false};

// Activation element counts at (B, T), in ActivationTensors order (the three masks last,
// zero when there is no dropout).
constexpr int kNumActTensors = 26;
std::array<i64, kNumActTensors> act_sizes(const GPTConfig& c, int B, int T, bool masks, bool preatt) {
  const i64 N = static_cast<i64>(B) * T, L = c.n_layer, C = c.n_embd, NH = c.n_head, V = c.vocab_size;
  const i64 TT = static_cast<i64>(B) * NH * T * T;
  return {N * C,     L * N * C, L * N,     L * N,     L * N * 3 * C, L * N * C, preatt ? L * TT : 0,
          L * TT,    L * N * C, L * N * C, L * N * C, L * N,         L * N,     L * N * 4 * C,
          L * N * 4 * C, L * N * C, L * N * C, N * C, N,             N,         N * V,
          N * V,     N,         masks ? N * C : 0, masks ? L * N * C : 0, masks ? L * N * C : 0};
}

ActivationTensors point_acts(float* base, const GPTConfig& c, int B, int T, bool masks, bool preatt) {
  ActivationTensors a{};
  float** ptrs[kNumActTensors] = {
      &a.encoded,  &a.ln1,      &a.ln1_mean, &a.ln1_rstd, &a.qkv,      &a.atty,     &a.preatt,
      &a.att,      &a.attproj,  &a.residual2, &a.ln2,     &a.ln2_mean, &a.ln2_rstd, &a.fch,
      &a.fch_gelu, &a.fcproj,   &a.residual3, &a.lnf,     &a.lnf_mean, &a.lnf_rstd, &a.logits,
      &a.probs,    &a.losses,   &a.encoded_mask, &a.attproj_mask, &a.fcproj_mask};
  const auto sizes = act_sizes(c, B, T, masks, preatt);
  for (int i = 0; i < kNumActTensors; ++i) {
    const i64 n = sizes[static_cast<size_t>(i)];
    *ptrs[i] = n > 0 ? base : nullptr;
    base += n;
  }
  return a;
}

constexpr int kNumScratchTensors = 10;
std::array<i64, kNumScratchTensors> scratch_sizes(const GPTConfig& c, int B, int T) {
  const i64 N = static_cast<i64>(B) * T, C = c.n_embd, NH = c.n_head, V = c.vocab_size;
  const i64 TT = static_cast<i64>(B) * NH * T * T;
  return {N * C, N * C, N * C, N * C, N * 3 * C, TT, TT, N * 4 * C, N * 4 * C, N * V};
}

BackwardScratch point_scratch(float* base, const GPTConfig& c, int B, int T) {
  BackwardScratch s{};
  float** ptrs[kNumScratchTensors] = {&s.dresidual, &s.dbranch, &s.dln,      &s.datty, &s.dqkv,
                                      &s.dpreatt,   &s.datt,    &s.dfch_gelu, &s.dfch, &s.dlogits};
  const auto sizes = scratch_sizes(c, B, T);
  for (int i = 0; i < kNumScratchTensors; ++i) {
    *ptrs[i] = base;
    base += sizes[static_cast<size_t>(i)];
  }
  return s;
}

template <size_t K>
i64 total(const std::array<i64, K>& sizes) {
  i64 n = 0;
  for (i64 s : sizes) n += s;
  return n;
}

// The seed of dropout site `site` (0: embedding, 1 + 2l: layer l's attention branch,
// 2 + 2l: its MLP branch) for one forward pass.
uint64_t site_seed(uint64_t dropout_seed, int site) {
  return dropout_seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(site) * 0xBF58476D1CE4E5B9ULL + 1;
}

// (Re)allocates activations and scratch when (B, T) grows or masks become needed.
void ensure_activations(GPT& m, int B, int T, bool masks, bool preatt) {
  const bool want_masks = masks || m.masks_alloc;
  if (B <= m.B_alloc && T <= m.T_alloc && want_masks == m.masks_alloc && preatt == m.preatt_alloc &&
      !m.acts_memory.empty()) {
    return;
  }
  const int Ba = std::max(B, m.B_alloc), Ta = std::max(T, m.T_alloc);
  Memory& mem = gpt_memory(m);
  m.acts_memory = Array<float>();  // free the old ones first: on a GPU both may not fit
  m.scratch_memory = Array<float>();
  m.acts_memory = Array<float>(mem, static_cast<size_t>(total(act_sizes(m.config, Ba, Ta, want_masks, preatt))));
  m.scratch_memory = Array<float>(mem, static_cast<size_t>(total(scratch_sizes(m.config, Ba, Ta))));
  m.B_alloc = Ba;
  m.T_alloc = Ta;
  m.masks_alloc = want_masks;
  m.preatt_alloc = preatt;
}

}  // namespace

void validate(const GPTConfig& c) {
  NN_CHECK(c.vocab_size >= 1 && c.block_size >= 1 && c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1,
           "GPT config: every size must be >= 1, got vocab_size=" << c.vocab_size << " block_size="
               << c.block_size << " n_layer=" << c.n_layer << " n_head=" << c.n_head
               << " n_embd=" << c.n_embd);
  NN_CHECK(c.n_embd % c.n_head == 0, "GPT config: n_embd=" << c.n_embd << " is not divisible by n_head="
                                                           << c.n_head << " (each head gets n_embd / n_head channels)");
  NN_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, "GPT config: dropout=" << c.dropout << " must be in [0, 1)");
}

std::vector<ParamSlice> param_slices(const GPTConfig& c) {
  validate(c);
  const auto sizes = param_sizes(c);
  std::array<i64, kNumParamTensors> offsets{};
  for (int i = 1; i < kNumParamTensors; ++i) {
    offsets[static_cast<size_t>(i)] = offsets[static_cast<size_t>(i - 1)] + sizes[static_cast<size_t>(i - 1)];
  }
  const i64 V = c.vocab_size, maxT = c.block_size, L = c.n_layer, C = c.n_embd;
  std::vector<ParamSlice> out;
  auto add = [&](const std::string& name, int kind, std::vector<i64> shape, i64 index) {
    if (sizes[static_cast<size_t>(kind)] == 0) return;  // an absent bias
    i64 numel = 1;
    for (i64 d : shape) numel *= d;
    out.push_back({name, std::move(shape), offsets[static_cast<size_t>(kind)] + index * numel, numel,
                   kDecay[static_cast<size_t>(kind)]});
  };
  add("wte", 0, {V, C}, 0);
  add("wpe", 1, {maxT, C}, 0);
  for (i64 l = 0; l < L; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", 2, {C}, l);
    add(h + "ln_1.bias", 3, {C}, l);
    add(h + "attn.c_attn.weight", 4, {3 * C, C}, l);
    add(h + "attn.c_attn.bias", 5, {3 * C}, l);
    add(h + "attn.c_proj.weight", 6, {C, C}, l);
    add(h + "attn.c_proj.bias", 7, {C}, l);
    add(h + "ln_2.weight", 8, {C}, l);
    add(h + "ln_2.bias", 9, {C}, l);
    add(h + "mlp.c_fc.weight", 10, {4 * C, C}, l);
    add(h + "mlp.c_fc.bias", 11, {4 * C}, l);
    add(h + "mlp.c_proj.weight", 12, {C, 4 * C}, l);
    add(h + "mlp.c_proj.bias", 13, {C}, l);
  }
  add("ln_f.weight", 14, {C}, 0);
  add("ln_f.bias", 15, {C}, 0);
  return out;
}

int64_t num_parameters(const GPTConfig& c) { return total(param_sizes(c)); }

int64_t num_parameters_non_embedding(const GPTConfig& c) {
  return num_parameters(c) - static_cast<i64>(c.block_size) * c.n_embd;
}

GPT gpt_create(const GPTConfig& config, Memory& memory) {
  validate(config);
  GPT m;
  m.config = config;
  m.slices = param_slices(config);
  m.num_params = num_parameters(config);
  const auto n = static_cast<size_t>(m.num_params);
  m.params_memory = Array<float>(memory, n);
  m.grads_memory = Array<float>(memory, n);
  m.m_memory = Array<float>(memory, n);
  m.v_memory = Array<float>(memory, n);
  m.params = point_params(m.params_memory.data(), config);
  m.grads = point_params(m.grads_memory.data(), config);
  return m;
}

GPT gpt_move_to(const GPT& model, Memory& memory) {
  GPT out = gpt_create(model.config, memory);
  const auto n = static_cast<size_t>(model.num_params);
  const bool same = &memory == &gpt_memory(model);
  // within one memory a plain copy; between two, through the host (one of them is host
  // memory: a GPU model comes down, a host model goes up)
  const Array<float>* from[4] = {&model.params_memory, &model.grads_memory, &model.m_memory, &model.v_memory};
  Array<float>* to[4] = {&out.params_memory, &out.grads_memory, &out.m_memory, &out.v_memory};
  std::vector<float> host(same ? 0 : n);
  for (int i = 0; i < 4; ++i) {
    if (same) {
      memory.copy(to[i]->data(), from[i]->data(), n * sizeof(float));
    } else {
      from[i]->download(host.data(), n);
      to[i]->upload(host.data(), n);
    }
  }
  out.adam_t = model.adam_t;
  return out;
}

void GPT::repoint() {
  if (!params_memory.empty()) {
    params = point_params(params_memory.data(), config);
    grads = point_params(grads_memory.data(), config);
  }
  if (!acts_memory.empty() && B > 0) {
    acts = point_acts(acts_memory.data(), config, B, T, masks_alloc, preatt_alloc);
    scratch = point_scratch(scratch_memory.data(), config, B, T);
  }
}

void gpt_init_weights(GPT& model, uint64_t seed) {
  nn::Rng rng(seed);
  const float std_residual = 0.02f / std::sqrt(2.0f * static_cast<float>(model.config.n_layer));
  // drawn on the host in slice order (the same weights whatever the backend), then copied in
  std::vector<float> host(static_cast<size_t>(model.num_params));
  for (const ParamSlice& s : model.slices) {
    float* p = host.data() + s.offset;
    const bool is_norm = s.name.find("ln_") != std::string::npos;
    const bool is_bias = s.name.size() >= 5 && s.name.compare(s.name.size() - 5, 5, ".bias") == 0;
    if (is_norm) {
      std::fill(p, p + s.numel, is_bias ? 0.0f : 1.0f);
    } else if (is_bias) {
      std::fill(p, p + s.numel, 0.0f);
    } else {
      const bool residual_proj = s.name.find("c_proj.weight") != std::string::npos;
      const float stddev = residual_proj ? std_residual : 0.02f;
      for (i64 i = 0; i < s.numel; ++i) p[i] = rng.normal(0.0f, stddev);
    }
  }
  model.params_memory.upload(host.data(), host.size());
  model.m_memory.zero();
  model.v_memory.zero();
  model.adam_t = 0;
}

void gpt_forward(GPT& model, Backend& be, const int32_t* inputs, const int32_t* targets, int B, int T,
                 bool train, uint64_t dropout_seed) {
  const GPTConfig& cfg = model.config;
  NN_CHECK(B >= 1 && T >= 1, "GPT forward: B=" << B << " T=" << T << " must be >= 1");
  NN_CHECK(T <= cfg.block_size, "GPT forward: sequence length " << T << " exceeds the model's block_size "
                                                                << cfg.block_size);
  NN_CHECK(&be.memory() == &gpt_memory(model),
           "GPT forward: the model is in " << gpt_memory(model).where() << " but the " << be.name()
                                           << " backend computes in " << be.memory().where()
                                           << " (gpt_move_to(model, backend.memory()) moves it)");
  const float p = train ? cfg.dropout : 0.0f;
  const bool drop = p > 0.0f;
  ensure_activations(model, B, T, drop, be.keeps_preatt());
  model.acts = point_acts(model.acts_memory.data(), cfg, B, T, model.masks_alloc, model.preatt_alloc);
  model.scratch = point_scratch(model.scratch_memory.data(), cfg, B, T);
  model.B = B;
  model.T = T;
  model.train_mode = train;
  const i64 N = static_cast<i64>(B) * T;
  const int V0 = cfg.vocab_size;
  auto check_ids = [&](const int32_t* ids, const char* what) {
    for (i64 i = 0; i < N; ++i) {
      NN_CHECK(ids[i] >= 0 && ids[i] < V0, "GPT forward: " << what << " id " << ids[i] << " at position " << i
                                                           << " is outside the vocabulary [0, " << V0 << ")");
    }
  };
  check_ids(inputs, "token");
  model.have_targets = targets != nullptr;
  if (targets != nullptr) check_ids(targets, "target");
  // the ids go where the backend reads them: inputs at [0, N), targets at [N, 2N)
  if (model.tokens_memory.size() < static_cast<size_t>(2 * N)) {
    model.tokens_memory = Array<int32_t>(gpt_memory(model), static_cast<size_t>(2 * N));
  }
  model.tokens_memory.upload(inputs, static_cast<size_t>(N));
  if (targets != nullptr) model.tokens_memory.upload(targets, static_cast<size_t>(N), static_cast<size_t>(N));
  const int32_t* d_inputs = model.tokens_memory.data();
  const int32_t* d_targets = model.tokens_memory.data() + N;

  const int L = cfg.n_layer, C = cfg.n_embd, NH = cfg.n_head, V = cfg.vocab_size;
  const int Ni = static_cast<int>(N);
  const i64 NC = N * C, TT = static_cast<i64>(B) * NH * T * T;
  const ParameterTensors& P = model.params;
  const ActivationTensors& A = model.acts;

  be.encoder_forward(A.encoded, d_inputs, P.wte, P.wpe, B, T, C, V);
  if (drop) be.dropout_forward(A.encoded, A.encoded_mask, A.encoded, NC, p, site_seed(dropout_seed, 0));
  // ln1 of layer 0 has no residual add before it; later ones are fused with the previous
  // layer's second residual add (residual_layernorm_forward below).
  be.layernorm_forward(A.ln1, A.ln1_mean, A.ln1_rstd, A.encoded, P.ln1w, P.ln1b, Ni, C);

  for (int l = 0; l < L; ++l) {
    const float* residual = l == 0 ? A.encoded : A.residual3 + (l - 1) * NC;
    float* ln1 = A.ln1 + l * NC;
    float* qkv = A.qkv + l * 3 * NC;
    float* atty = A.atty + l * NC;
    float* preatt = at(A.preatt, l * TT);  // nullptr on a backend that keeps none
    float* att = A.att + l * TT;
    float* attproj = A.attproj + l * NC;
    float* residual2 = A.residual2 + l * NC;
    float* ln2 = A.ln2 + l * NC;
    float* fch = A.fch + l * 4 * NC;
    float* fch_gelu = A.fch_gelu + l * 4 * NC;
    float* fcproj = A.fcproj + l * NC;
    float* residual3 = A.residual3 + l * NC;

    // attention branch: x + proj(attention(LN1(x)))
    be.matmul_forward(qkv, ln1, P.qkvw + static_cast<i64>(l) * 3 * C * C, at(P.qkvb, static_cast<i64>(l) * 3 * C),
                      Ni, C, 3 * C);
    be.attention_forward(atty, preatt, att, qkv, B, T, C, NH);
    be.matmul_forward(attproj, atty, P.attprojw + static_cast<i64>(l) * C * C, at(P.attprojb, static_cast<i64>(l) * C),
                      Ni, C, C);
    if (drop) be.dropout_forward(attproj, A.attproj_mask + l * NC, attproj, NC, p, site_seed(dropout_seed, 1 + 2 * l));
    be.residual_layernorm_forward(residual2, ln2, A.ln2_mean + l * N, A.ln2_rstd + l * N, residual, attproj,
                                  P.ln2w + static_cast<i64>(l) * C, at(P.ln2b, static_cast<i64>(l) * C), Ni, C);

    // MLP branch: x + fcproj(gelu(fc(LN2(x))))
    be.matmul_gelu_forward(fch, fch_gelu, ln2, P.fcw + static_cast<i64>(l) * 4 * C * C,
                           at(P.fcb, static_cast<i64>(l) * 4 * C), Ni, C, 4 * C);
    be.matmul_forward(fcproj, fch_gelu, P.fcprojw + static_cast<i64>(l) * C * 4 * C,
                      at(P.fcprojb, static_cast<i64>(l) * C), Ni, 4 * C, C);
    if (drop) be.dropout_forward(fcproj, A.fcproj_mask + l * NC, fcproj, NC, p, site_seed(dropout_seed, 2 + 2 * l));

    // the second residual add, fused with the next LayerNorm (the next layer's ln1, or ln_f)
    const bool last = l + 1 == L;
    float* next_ln = last ? A.lnf : A.ln1 + (l + 1) * NC;
    float* next_mean = last ? A.lnf_mean : A.ln1_mean + (l + 1) * N;
    float* next_rstd = last ? A.lnf_rstd : A.ln1_rstd + (l + 1) * N;
    const float* next_w = last ? P.lnfw : P.ln1w + static_cast<i64>(l + 1) * C;
    const float* next_b = last ? P.lnfb : at(P.ln1b, static_cast<i64>(l + 1) * C);
    be.residual_layernorm_forward(residual3, next_ln, next_mean, next_rstd, residual2, fcproj, next_w, next_b,
                                  Ni, C);
  }

  // the tied head: logits = lnf wte^T (no bias)
  be.matmul_forward(A.logits, A.lnf, P.wte, nullptr, Ni, C, V);
  model.mean_loss = -1.0f;
  if (targets != nullptr) {
    model.mean_loss = be.crossentropy_forward(A.probs, A.losses, A.logits, d_targets, Ni, V);
  }
}

void gpt_zero_grad(GPT& model) { model.grads_memory.zero(); }

void gpt_backward(GPT& model, Backend& be, float dloss) {
  NN_CHECK(model.have_targets && model.B > 0, "GPT backward: the last forward had no targets (no loss to differentiate)");
  const GPTConfig& cfg = model.config;
  const int B = model.B, T = model.T, L = cfg.n_layer, C = cfg.n_embd, NH = cfg.n_head, V = cfg.vocab_size;
  const i64 N = static_cast<i64>(B) * T, NC = N * C, TT = static_cast<i64>(B) * NH * T * T;
  const int Ni = static_cast<int>(N);
  const bool drop = model.train_mode && cfg.dropout > 0.0f;
  const ParameterTensors& P = model.params;
  const ParameterTensors& G = model.grads;
  const ActivationTensors& A = model.acts;
  const BackwardScratch& S = model.scratch;

  // loss -> logits -> (tied head) -> ln_f
  const int32_t* d_inputs = model.tokens_memory.data();
  const int32_t* d_targets = model.tokens_memory.data() + N;
  be.crossentropy_backward(S.dlogits, A.probs, d_targets, Ni, V, dloss);
  be.matmul_backward(S.dln, G.wte, nullptr, S.dlogits, A.lnf, P.wte, Ni, C, V);
  // dresidual: dL/d(residual stream), built up from zero as the layers are walked backwards
  gpt_memory(model).zero(S.dresidual, static_cast<size_t>(NC) * sizeof(float));
  be.layernorm_backward(S.dresidual, G.lnfw, G.lnfb, S.dln, A.residual3 + (L - 1) * NC, P.lnfw, A.lnf_mean,
                        A.lnf_rstd, Ni, C);

  for (int l = L - 1; l >= 0; --l) {
    const float* residual = l == 0 ? A.encoded : A.residual3 + (l - 1) * NC;
    const i64 lC = static_cast<i64>(l) * C;

    // MLP branch: its output gradient is the stream's gradient (through the dropout mask)
    const float* dbranch = S.dresidual;
    if (drop) {
      be.dropout_backward(S.dbranch, S.dresidual, A.fcproj_mask + l * NC, NC);
      dbranch = S.dbranch;
    }
    be.matmul_backward(S.dfch_gelu, G.fcprojw + lC * 4 * C, at(G.fcprojb, lC), dbranch, A.fch_gelu + l * 4 * NC,
                       P.fcprojw + lC * 4 * C, Ni, 4 * C, C);
    be.gelu_backward(S.dfch, S.dfch_gelu, A.fch + l * 4 * NC, 4 * NC);
    be.matmul_backward(S.dln, G.fcw + lC * 4 * C, at(G.fcb, 4 * lC), S.dfch, A.ln2 + l * NC, P.fcw + lC * 4 * C, Ni,
                       C, 4 * C);
    // += : dresidual becomes dL/d(residual2), the stream plus the path through LN2
    be.layernorm_backward(S.dresidual, G.ln2w + lC, at(G.ln2b, lC), S.dln, A.residual2 + l * NC, P.ln2w + lC,
                          A.ln2_mean + l * N, A.ln2_rstd + l * N, Ni, C);

    // attention branch
    dbranch = S.dresidual;
    if (drop) {
      be.dropout_backward(S.dbranch, S.dresidual, A.attproj_mask + l * NC, NC);
      dbranch = S.dbranch;
    }
    be.matmul_backward(S.datty, G.attprojw + lC * C, at(G.attprojb, lC), dbranch, A.atty + l * NC,
                       P.attprojw + lC * C, Ni, C, C);
    be.attention_backward(S.dqkv, S.dpreatt, S.datt, S.datty, A.qkv + l * 3 * NC, A.att + l * TT, B, T, C, NH);
    be.matmul_backward(S.dln, G.qkvw + lC * 3 * C, at(G.qkvb, 3 * lC), S.dqkv, A.ln1 + l * NC, P.qkvw + lC * 3 * C,
                       Ni, C, 3 * C);
    // += : dresidual becomes dL/d(this layer's input)
    be.layernorm_backward(S.dresidual, G.ln1w + lC, at(G.ln1b, lC), S.dln, residual, P.ln1w + lC,
                          A.ln1_mean + l * N, A.ln1_rstd + l * N, Ni, C);
  }

  const float* dencoded = S.dresidual;
  if (drop) {
    be.dropout_backward(S.dbranch, S.dresidual, A.encoded_mask, NC);
    dencoded = S.dbranch;
  }
  be.encoder_backward(G.wte, G.wpe, dencoded, d_inputs, B, T, C, V);
}

float gpt_clip_grad_norm(GPT& model, Backend& be, float max_norm) {
  const double norm = std::sqrt(be.sum_squares(model.grads_memory.data(), model.num_params));
  NN_CHECK(std::isfinite(norm), "the gradient norm is " << norm << ": training diverged (try a lower "
                                                         << "learning rate or stronger clipping)");
  if (max_norm > 0.0f && norm > max_norm) {
    be.scale(model.grads_memory.data(), static_cast<float>(max_norm / (norm + 1e-6)), model.num_params);
  }
  return static_cast<float>(norm);
}

void gpt_adamw_step(GPT& model, Backend& be, const AdamWConfig& cfg, float lr) {
  model.adam_t += 1;
  const auto sizes = param_sizes(model.config);
  i64 offset = 0;
  for (int k = 0; k < kNumParamTensors; ++k) {
    const i64 n = sizes[static_cast<size_t>(k)];
    const float wd = kDecay[static_cast<size_t>(k)] ? cfg.weight_decay : 0.0f;
    be.adamw_update(model.params_memory.data() + offset, model.grads_memory.data() + offset,
                    model.m_memory.data() + offset, model.v_memory.data() + offset, n, lr, cfg.beta1, cfg.beta2,
                    cfg.eps, wd, model.adam_t);
    offset += n;
  }
}

double flops_per_token(const GPTConfig& c, int T) {
  const double N = static_cast<double>(num_parameters_non_embedding(c));
  const double L = c.n_layer, H = c.n_head, Q = static_cast<double>(c.n_embd / c.n_head);
  return 6.0 * N + 12.0 * L * H * Q * T;
}

MemoryBreakdown memory_breakdown(const GPTConfig& c, int B, int T, bool preatt) {
  MemoryBreakdown m;
  const i64 f = static_cast<i64>(sizeof(float));
  m.params = num_parameters(c) * f;
  m.grads = m.params;
  m.adam = 2 * m.params;
  m.activations = total(act_sizes(c, B, T, c.dropout > 0.0f, preatt)) * f;
  m.scratch = total(scratch_sizes(c, B, T)) * f;
  return m;
}

std::vector<NamedTensor> activation_views(const GPT& model) {
  const GPTConfig& c = model.config;
  const i64 B = model.B, T = model.T, N = B * T, C = c.n_embd, NH = c.n_head, V = c.vocab_size;
  const i64 NC = N * C, TT = B * NH * T * T;
  const ActivationTensors& A = model.acts;
  std::vector<NamedTensor> out;
  if (model.B == 0) return out;
  out.push_back({"encoded", {B, T, C}, A.encoded});
  for (i64 l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    out.push_back({h + "ln1", {B, T, C}, A.ln1 + l * NC});
    out.push_back({h + "qkv", {B, T, 3 * C}, A.qkv + l * 3 * NC});
    out.push_back({h + "att", {B, NH, T, T}, A.att + l * TT});
    out.push_back({h + "atty", {B, T, C}, A.atty + l * NC});
    out.push_back({h + "attproj", {B, T, C}, A.attproj + l * NC});
    out.push_back({h + "residual2", {B, T, C}, A.residual2 + l * NC});
    out.push_back({h + "ln2", {B, T, C}, A.ln2 + l * NC});
    out.push_back({h + "fch", {B, T, 4 * C}, A.fch + l * 4 * NC});
    out.push_back({h + "fch_gelu", {B, T, 4 * C}, A.fch_gelu + l * 4 * NC});
    out.push_back({h + "fcproj", {B, T, C}, A.fcproj + l * NC});
    out.push_back({h + "residual3", {B, T, C}, A.residual3 + l * NC});
  }
  out.push_back({"lnf", {B, T, C}, A.lnf});
  out.push_back({"logits", {B, T, V}, A.logits});
  if (model.have_targets) {
    out.push_back({"probs", {B, T, V}, A.probs});
    out.push_back({"losses", {B, T}, A.losses});
  }
  return out;
}

}  // namespace gpt
