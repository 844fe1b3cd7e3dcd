// gpt/model.cpp: the GPT's memory layout (read off the tables of gpt/model.h),
// initialisation, the block, forward, backward, AdamW and the training step. Every op goes
// through gpt::Backend; this file only decides which op runs on which slice of which
// buffer, in which order.
#include "gpt/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "gpt/lora.h"
#ifdef NNLAB_HAVE_NCCL
#include "kernels/comm_nccl.h"
#endif
#include "kernels/rope.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace gpt {

namespace {

using i64 = int64_t;

// p + offset, or nullptr for an absent tensor
inline float* at(float* p, i64 offset) { return p != nullptr ? p + offset : nullptr; }

i64 dim_value(Dim d, const GPTConfig& c, int B, int T) {
  i64 v = 0;
  switch (d.sym) {
    case Sym::V: v = c.vocab_size; break;
    case Sym::maxT: v = c.block_size; break;
    case Sym::C: v = c.n_embd; break;
    case Sym::B: v = B; break;
    case Sym::T: v = T; break;
    case Sym::NH: v = c.n_head; break;
    case Sym::QKV: v = qkv_channels(c); break;
    case Sym::H: v = mlp_hidden(c); break;
    case Sym::FC: v = fc_channels(c); break;
  }
  return d.mult * v;
}

// ---- parameters, from kParams ----

bool present(const ParamSpec& s, const GPTConfig& c) {
  switch (s.needs) {
    case Needs::always: return true;
    case Needs::bias: return c.bias;
    case Needs::wpe: return c.arch == Arch::gpt2;
    case Needs::untied: return !c.tie_embeddings;
  }
  return false;
}

// ---- activations and scratch, from kActivations / kScratch ----

template <class Tensors>
bool held(const TensorSpec<Tensors>& s, const ActivationLayout& l) {
  switch (s.held) {
    case Held::always: return true;
    case Held::preatt: return l.preatt && l.att && !l.flash;
    case Held::att: return l.att && !l.flash;
    case Held::lse: return l.att && l.flash;
    case Held::masks: return l.masks;
    case Held::loss: return l.loss;
    case Held::mean: return l.arch == Arch::gpt2;
    case Held::gelu: return l.arch == Arch::gpt2;
    case Held::swiglu: return l.arch == Arch::llama;
  }
  return false;
}

// Elements of one layer's slice of a row (0 when the layout does not hold it).
template <class Tensors>
i64 slice_numel(const TensorSpec<Tensors>& s, const GPTConfig& c, const ActivationLayout& l) {
  return held(s, l) ? numel_of(s.shape, c, l.B, l.T) : 0;
}

// Elements of a whole row: its L slices when stacked per layer.
template <class Tensors>
i64 row_numel(const TensorSpec<Tensors>& s, const GPTConfig& c, const ActivationLayout& l) {
  return slice_numel(s, c, l) * (s.per_layer && l.stacked ? c.n_layer : 1);
}

template <class Tensors, size_t K>
i64 total_floats(const TensorSpec<Tensors> (&rows)[K], const GPTConfig& c, const ActivationLayout& l) {
  i64 n = 0;
  for (const auto& s : rows) n += row_numel(s, c, l);
  return n;
}

// The pointers of a table's struct, rows one after another from `base`; nullptr for a row
// the layout does not hold.
template <class Tensors, size_t K>
Tensors point_rows(const TensorSpec<Tensors> (&rows)[K], float* base, const GPTConfig& c, const ActivationLayout& l) {
  Tensors t{};
  for (const auto& s : rows) {
    const i64 n = row_numel(s, c, l);
    t.*s.field = n > 0 ? base : nullptr;
    base += n;
  }
  return t;
}

// The scratch is one layer's worth at (B, T), every row the config's attention needs held.
ActivationLayout scratch_layout(const GPTConfig& c, int B, int T) {
  ActivationLayout l;
  l.B = B;
  l.T = T;
  l.stacked = false;
  return with_config(l, c);
}

// What a training model's activations hold at (B, T).
// recompute: one layer's slice that every layer reuses (gpt_set_recompute).
ActivationLayout training_layout(const GPTConfig& c, int B, int T, bool masks, bool preatt, bool recompute) {
  ActivationLayout l = with_config(ActivationLayout{}, c);
  l.B = B;
  l.T = T;
  l.stacked = !recompute;
  l.preatt = preatt;
  l.att = true;
  l.masks = masks;
  l.loss = true;
  return l;
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
      m.recompute == m.recompute_alloc && !m.acts_memory.empty()) {
    return;
  }
  const int Ba = std::max(B, m.B_alloc), Ta = std::max(T, m.T_alloc);
  Memory& mem = gpt_memory(m);
  m.acts_memory = Array<float>();  // free the old ones first: on a GPU both may not fit
  m.scratch_memory = Array<float>();
  m.block_outputs = Array<float>();
  m.acts_memory = make_array<float>(
      mem, static_cast<size_t>(activation_floats(m.config, training_layout(m.config, Ba, Ta, want_masks, preatt,
                                                                            m.recompute))));
  m.scratch_memory = make_array<float>(mem, static_cast<size_t>(total_floats(kScratch, m.config, scratch_layout(m.config, Ba, Ta))));
  if (m.recompute) {
    m.block_outputs = make_array<float>(mem, static_cast<size_t>(m.config.n_layer) * Ba * Ta * m.config.n_embd);
  }
  m.B_alloc = Ba;
  m.T_alloc = Ta;
  m.masks_alloc = want_masks;
  m.preatt_alloc = preatt;
  m.recompute_alloc = m.recompute;
}

// The layout of the model's activations at its current (B, T).
ActivationLayout layout_of(const GPT& m) {
  return training_layout(m.config, m.B, m.T, m.masks_alloc, m.preatt_alloc, m.recompute_alloc);
}

// With recomputation: block l's output, the input of block l + 1 ((B, T, C) at the current B, T).
float* block_output(const GPT& m, int l) {
  return const_cast<float*>(m.block_outputs.data()) + static_cast<i64>(l) * m.B * m.T * m.config.n_embd;
}

// Points the model's activations and scratch at its current (B, T).
void point_activations(GPT& m) {
  m.acts = activation_tensors(m.acts_memory.data(), m.config, layout_of(m));
  m.scratch = point_rows(kScratch, m.scratch_memory.data(), m.config, scratch_layout(m.config, m.B, m.T));
}

}  // namespace

// ---- the tables' derived quantities -----------------------------------------------------------

std::vector<int64_t> shape_of(const Shape& s, const GPTConfig& c, int B, int T) {
  std::vector<int64_t> out;
  for (int i = 0; i < s.rank; ++i) out.push_back(dim_value(s.d[i], c, B, T));
  return out;
}

int64_t numel_of(const Shape& s, const GPTConfig& c, int B, int T) {
  i64 n = 1;
  for (int i = 0; i < s.rank; ++i) n *= dim_value(s.d[i], c, B, T);
  return n;
}

std::string letters_of(const Shape& s, Arch arch) {
  std::string out = "(";
  for (int i = 0; i < s.rank; ++i) {
    if (i > 0) out += ", ";
    // gpt2's derived widths in C: QKV = 3C, H = FC = 4C
    const Sym sym = s.d[i].sym;
    if (arch == Arch::gpt2 && (sym == Sym::QKV || sym == Sym::H || sym == Sym::FC)) {
      out += std::to_string(s.d[i].mult * (sym == Sym::QKV ? 3 : 4)) + "C";
      continue;
    }
    if (arch == Arch::llama && sym == Sym::FC) {
      out += std::to_string(2 * s.d[i].mult) + "H";
      continue;
    }
    if (s.d[i].mult != 1) out += std::to_string(s.d[i].mult);
    switch (s.d[i].sym) {
      case Sym::V: out += "V"; break;
      case Sym::maxT: out += "maxT"; break;
      case Sym::C: out += "C"; break;
      case Sym::B: out += "B"; break;
      case Sym::T: out += "T"; break;
      case Sym::NH: out += "NH"; break;
      case Sym::QKV: out += "QKV"; break;
      case Sym::H: out += "H"; break;
      case Sym::FC: out += "FC"; break;
    }
  }
  return out + ")";
}

int64_t param_numel(const ParamSpec& s, const GPTConfig& c) {
  if (!present(s, c)) return 0;
  return numel_of(s.shape, c) * (s.per_layer ? c.n_layer : 1);
}

ParameterTensors param_tensors(float* flat, const GPTConfig& c) {
  ParameterTensors p{};
  for (const ParamSpec& s : kParams) {
    const i64 n = param_numel(s, c);
    p.*s.field = n > 0 ? flat : nullptr;
    flat += n;
  }
  return p;
}

ParameterTensors layer_params(const ParameterTensors& p, const GPTConfig& c, int l) {
  ParameterTensors out = p;
  for (const ParamSpec& s : kParams) {
    if (s.per_layer) out.*s.field = at(p.*s.field, l * numel_of(s.shape, c));
  }
  return out;
}

ActivationLayout with_config(ActivationLayout l, const GPTConfig& c) {
  l.arch = c.arch;
  l.flash = attention_of(c) == AttentionKind::flash;
  return l;
}

int64_t activation_floats(const GPTConfig& c, const ActivationLayout& layout) {
  return total_floats(kActivations, c, layout);
}

ActivationTensors activation_tensors(float* base, const GPTConfig& c, const ActivationLayout& layout) {
  return point_rows(kActivations, base, c, layout);
}

ActivationTensors layer_activations(const ActivationTensors& a, const GPTConfig& c, const ActivationLayout& layout,
                                    int l) {
  ActivationTensors out = a;
  if (!layout.stacked) return out;  // one slice, reused by every layer
  for (const auto& s : kActivations) {
    if (s.per_layer) out.*s.field = at(a.*s.field, l * slice_numel(s, c, layout));
  }
  return out;
}

void validate(const GPTConfig& c) {
  NN_CHECK(c.vocab_size >= 1 && c.block_size >= 1 && c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1,
           "GPT config: every size must be >= 1, got vocab_size=" << c.vocab_size << " block_size="
               << c.block_size << " n_layer=" << c.n_layer << " n_head=" << c.n_head
               << " n_embd=" << c.n_embd);
  NN_CHECK(c.n_embd % c.n_head == 0, "GPT config: n_embd=" << c.n_embd << " is not divisible by n_head="
                                                           << c.n_head << " (each head gets n_embd / n_head channels)");
  NN_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, "GPT config: dropout=" << c.dropout << " must be in [0, 1)");
  const int NKV = kv_heads(c);
  NN_CHECK(NKV >= 1 && c.n_head % NKV == 0, "GPT config: n_kv_head=" << c.n_kv_head << " must divide n_head="
                                                                     << c.n_head
                                                                     << " (each key/value head serves n_head / "
                                                                        "n_kv_head query heads)");
  NN_CHECK(c.ffn_hidden >= 0, "GPT config: ffn_hidden=" << c.ffn_hidden << " must be >= 0 (0: the default)");
  if (c.arch == Arch::gpt2) {
    NN_CHECK(NKV == c.n_head, "GPT config: arch=gpt2 has multi-head attention (n_kv_head=" << NKV
                                                                                          << " != n_head=" << c.n_head
                                                                                          << "); use arch=llama");
    NN_CHECK(c.tie_embeddings, "GPT config: arch=gpt2 ties its head to wte (tie_embeddings=false is llama's)");
    NN_CHECK(c.ffn_hidden == 0 || c.ffn_hidden == 4 * c.n_embd,
             "GPT config: arch=gpt2's MLP is 4 n_embd wide (ffn_hidden=" << c.ffn_hidden << ")");
  } else {
    NN_CHECK(!c.bias, "GPT config: arch=llama has no biases (bias=true is gpt2's)");
    NN_CHECK((c.n_embd / c.n_head) % 2 == 0, "GPT config: RoPE pairs the channels of a head: head size "
                                                 << c.n_embd / c.n_head << " must be even");
    NN_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 1.0f,
             "GPT config: rope_theta=" << c.rope_theta << " must be a finite number > 1");
    NN_CHECK(std::isfinite(c.norm_eps) && c.norm_eps > 0.0f && c.norm_eps < 1.0f,
             "GPT config: norm_eps=" << c.norm_eps << " must be in (0, 1)");
  }
  const AttentionKind att = attention_of(c);
  NN_CHECK(att == AttentionKind::flash || NKV == c.n_head,
           "GPT config: full attention is multi-head only (n_kv_head=" << NKV << " != n_head=" << c.n_head
                                                                       << "); use attention=flash");
}

int kv_heads(const GPTConfig& c) { return c.n_kv_head > 0 ? c.n_kv_head : c.n_head; }
int default_ffn_hidden(int n_embd) { return (8 * n_embd / 3 + 31) / 32 * 32; }
int mlp_hidden(const GPTConfig& c) {
  if (c.arch == Arch::gpt2) return 4 * c.n_embd;
  return c.ffn_hidden > 0 ? c.ffn_hidden : default_ffn_hidden(c.n_embd);
}
int qkv_channels(const GPTConfig& c) { return c.n_embd + 2 * kv_channels(c); }
int fc_channels(const GPTConfig& c) { return c.arch == Arch::llama ? 2 * mlp_hidden(c) : mlp_hidden(c); }
int kv_channels(const GPTConfig& c) { return kv_heads(c) * (c.n_embd / c.n_head); }
AttentionKind attention_of(const GPTConfig& c) {
  if (c.attention != AttentionKind::automatic) return c.attention;
  return c.arch == Arch::llama ? AttentionKind::flash : AttentionKind::full;
}
const char* arch_name(Arch a) { return a == Arch::llama ? "llama" : "gpt2"; }
Arch parse_arch(const std::string& s) {
  if (s == "gpt2") return Arch::gpt2;
  if (s == "llama") return Arch::llama;
  NN_CHECK(false, "unknown arch '" << s << "' (choose gpt2 or llama)");
  return Arch::gpt2;
}
const char* attention_name(AttentionKind a) {
  switch (a) {
    case AttentionKind::automatic: return "auto";
    case AttentionKind::full: return "full";
    case AttentionKind::flash: return "flash";
  }
  return "auto";
}
AttentionKind parse_attention(const std::string& s) {
  if (s == "auto") return AttentionKind::automatic;
  if (s == "full") return AttentionKind::full;
  if (s == "flash") return AttentionKind::flash;
  NN_CHECK(false, "unknown attention '" << s << "' (choose auto, full or flash)");
  return AttentionKind::automatic;
}

std::vector<ParamSlice> param_slices(const GPTConfig& c) {
  validate(c);
  // each row's offset in the flat buffer (the rows one after another, as param_tensors)
  std::vector<i64> offset;
  i64 o = 0;
  for (const ParamSpec& s : kParams) {
    offset.push_back(o);
    o += param_numel(s, c);
  }
  std::vector<ParamSlice> out;
  auto add = [&](size_t row, int l) {
    const ParamSpec& s = kParams[row];
    if (!present(s, c)) return;  // an absent bias
    const std::string name = l >= 0 ? "h." + std::to_string(l) + "." + s.name : std::string(s.name);
    const i64 numel = numel_of(s.shape, c);
    out.push_back({name, shape_of(s.shape, c), offset[row] + std::max(l, 0) * numel, numel, s.decay, &s, l});
  };
  // the rows before the per-layer ones, then layer by layer, then the rest
  const size_t K = std::size(kParams);
  size_t first = 0;
  while (first < K && !kParams[first].per_layer) ++first;
  size_t last = first;
  while (last < K && kParams[last].per_layer) ++last;
  for (size_t r = 0; r < first; ++r) add(r, -1);
  for (int l = 0; l < c.n_layer; ++l) {
    for (size_t r = first; r < last; ++r) add(r, l);
  }
  for (size_t r = last; r < K; ++r) {
    NN_CHECK(!kParams[r].per_layer, "kParams: the per-layer rows must be one run (row " << r << ")");
    add(r, -1);
  }
  return out;
}

int64_t num_parameters(const GPTConfig& c) {
  i64 n = 0;
  for (const ParamSpec& s : kParams) n += param_numel(s, c);
  return n;
}

int64_t num_parameters_non_embedding(const GPTConfig& c) {
  return num_parameters(c) - (c.arch == Arch::gpt2 ? static_cast<i64>(c.block_size) * c.n_embd : 0);
}

GPT gpt_create(const GPTConfig& config, Memory& memory, bool training_state) {
  validate(config);
  GPT m;
  m.config = config;
  m.slices = param_slices(config);
  m.num_params = num_parameters(config);
  const auto n = static_cast<size_t>(m.num_params);
  m.params_memory = make_array<float>(memory, n);
  if (training_state) {
    m.grads_memory = make_array<float>(memory, n);
    m.m_memory = make_array<float>(memory, n);
    m.v_memory = make_array<float>(memory, n);
  }
  m.params = param_tensors(m.params_memory.data(), config);
  if (training_state) m.grads = param_tensors(m.grads_memory.data(), config);
  if (config.arch == Arch::llama) {
    // RoPE's angles for positions 0 .. block_size-1, computed once on the host in double
    const int half = config.n_embd / config.n_head / 2;
    const auto rows = static_cast<size_t>(config.block_size) * static_cast<size_t>(half);
    std::vector<float> cos(rows), sin(rows);
    kernels::rope_tables(cos.data(), sin.data(), config.block_size, config.n_embd / config.n_head,
                         static_cast<double>(config.rope_theta));
    m.rope_cos = make_array<float>(memory, rows);
    m.rope_sin = make_array<float>(memory, rows);
    m.rope_cos.upload(cos.data(), rows);
    m.rope_sin.upload(sin.data(), rows);
  }
  return m;
}

GPT gpt_move_to(const GPT& model, Memory& memory) {
  NN_CHECK(!model.sharded, "moving a model: its optimizer is sharded (ZeRO-1); move it before gpt_shard_optimizer");
  const bool training_state = !model.grads_memory.empty();  // an inference-only model stays one
  GPT out = gpt_create(model.config, memory, training_state);
  const auto n = static_cast<size_t>(model.num_params);
  const bool same = &memory == &gpt_memory(model);
  // within one memory a plain copy; between two, through the host (one of them is host
  // memory: a GPU model comes down, a host model goes up)
  const Array<float>* from[4] = {&model.params_memory, &model.grads_memory, &model.m_memory, &model.v_memory};
  Array<float>* to[4] = {&out.params_memory, &out.grads_memory, &out.m_memory, &out.v_memory};
  std::vector<float> host(same ? 0 : n);
  for (int i = 0; i < (training_state ? 4 : 1); ++i) {
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
    params = param_tensors(params_memory.data(), config);
    grads = grads_memory.empty() ? ParameterTensors{} : param_tensors(grads_memory.data(), config);
  }
  if (!acts_memory.empty() && B > 0) point_activations(*this);
}

void gpt_init_weights(GPT& model, uint64_t seed) {
  nn::Rng rng(seed);
  const float std_residual = 0.02f / std::sqrt(2.0f * static_cast<float>(model.config.n_layer));
  // drawn on the host in slice order (the same weights whatever the backend), then copied in
  std::vector<float> host(static_cast<size_t>(model.num_params));
  for (const ParamSlice& s : model.slices) {
    float* p = host.data() + s.offset;
    switch (s.spec->init) {
      case Init::ones: std::fill(p, p + s.numel, 1.0f); break;
      case Init::zeros: std::fill(p, p + s.numel, 0.0f); break;
      case Init::normal:
      case Init::normal_residual: {
        const float stddev = s.spec->init == Init::normal_residual ? std_residual : 0.02f;
        for (i64 i = 0; i < s.numel; ++i) p[i] = rng.normal(0.0f, stddev);
        break;
      }
    }
  }
  model.params_memory.upload(host.data(), host.size());
  model.m_memory.zero();
  model.v_memory.zero();
  model.adam_t = 0;
}

// ---- the block ---------------------------------------------------------------------------------

bool fuses(const Backend& be, Fusion f, const GPTConfig& c) {
  if (c.arch == Arch::llama) return false;  // no fused residual + RMSNorm op (block_forward)
  return f == Fusion::backend ? be.fuses_residual_layernorm() : f == Fusion::fused;
}

namespace {

// The norm before a branch (or the final one): LayerNorm (gpt2) or RMSNorm (llama).
void norm_forward(Backend& be, const GPTConfig& c, float* out, float* mean, float* rstd, const float* inp,
                  const float* weight, const float* bias, int N) {
  if (c.arch == Arch::llama) {
    be.rmsnorm_forward(out, rstd, inp, weight, N, c.n_embd, c.norm_eps);
  } else {
    be.layernorm_forward(out, mean, rstd, inp, weight, bias, N, c.n_embd);
  }
}

// Its backward: dinp ACCUMULATES (the residual stream), dweight (and dbias) accumulate.
void norm_backward(Backend& be, const GPTConfig& c, float* dinp, float* dweight, float* dbias, const float* dout,
                   const float* inp, const float* weight, const float* mean, const float* rstd, int N) {
  if (c.arch == Arch::llama) {
    be.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, c.n_embd);
  } else {
    be.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, c.n_embd);
  }
}

}  // namespace

void final_norm(Backend& be, const GPTConfig& c, const ParameterTensors& P, const ActivationTensors& A, const float* x,
                int N) {
  norm_forward(be, c, A.lnf, A.lnf_mean, A.lnf_rstd, x, P.lnfw, P.lnfb, N);
}

void block_forward(Backend& be, BlockKernels& k, const GPTConfig& c, int l, const ParameterTensors& p,
                   const ActivationTensors& a, const float* x, int N, const Dropout& drop, bool fuse, bool ln1_ready,
                   const NextNorm* next) {
  const int C = c.n_embd, QKV = qkv_channels(c), H = mlp_hidden(c);
  const bool llama = c.arch == Arch::llama;
  NN_CHECK(!(llama && (fuse || ln1_ready || next != nullptr)),
           "block_forward: arch=llama has no fused residual + RMSNorm (gpt/model.h)");
  const i64 NC = static_cast<i64>(N) * C;

  // attention branch: residual2 = x + proj(attention(norm1(x)))
  if (!ln1_ready) norm_forward(be, c, a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, N);
  // (k.linear_input: each Linear's input may be transformed in place first, BlockKernels)
  const LinearLayer qkv{Linear::qkv, l, p.qkvw, p.qkvb, C, QKV};
  k.linear_input(a.ln1, qkv, N);
  k.linear(a.qkv, a.ln1, qkv, N);
  if (llama) k.rope(a.qkv);  // q and k rotated by their positions, in place
  k.attention(a.atty, a.preatt, a.att, a.lse, a.qkv, l);
  const LinearLayer attproj{Linear::attproj, l, p.attprojw, p.attprojb, C, C};
  k.linear_input(a.atty, attproj, N);
  k.linear(a.attproj, a.atty, attproj, N);
  if (drop.p > 0.0f) be.dropout_forward(a.attproj, a.attproj_mask, a.attproj, NC, drop.p, site_seed(drop.seed, 1 + 2 * l));
  if (fuse) {
    be.residual_layernorm_forward(a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, x, a.attproj, p.ln2w, p.ln2b, N, C);
  } else {
    be.residual_forward(a.residual2, x, a.attproj, NC);
    norm_forward(be, c, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln2w, p.ln2b, N);
  }

  // MLP branch: residual3 = residual2 + fcproj(act(fc(norm2(residual2))))
  if (llama) {
    // SwiGLU: fc is [gate | up] (N, 2H) in one product, then silu(gate) * up (N, H)
    const LinearLayer fc{Linear::fc, l, p.fcw, p.fcb, C, 2 * H};
    k.linear_input(a.ln2, fc, N);
    k.linear(a.fch, a.ln2, fc, N);
    be.swiglu_forward(a.fch_swiglu, a.fch, a.fch + H, N, H, 2 * H);
    const LinearLayer fcproj{Linear::fcproj, l, p.fcprojw, p.fcprojb, H, C};
    k.linear_input(a.fch_swiglu, fcproj, N);
    k.linear(a.fcproj, a.fch_swiglu, fcproj, N);
  } else {
    const LinearLayer fc{Linear::fc, l, p.fcw, p.fcb, C, H};
    k.linear_input(a.ln2, fc, N);
    k.linear_gelu(a.fch, a.fch_gelu, a.ln2, fc, N);
    const LinearLayer fcproj{Linear::fcproj, l, p.fcprojw, p.fcprojb, H, C};
    k.linear_input(a.fch_gelu, fcproj, N);
    k.linear(a.fcproj, a.fch_gelu, fcproj, N);
  }
  if (drop.p > 0.0f) be.dropout_forward(a.fcproj, a.fcproj_mask, a.fcproj, NC, drop.p, site_seed(drop.seed, 2 + 2 * l));
  if (next != nullptr) {
    // fused: the LayerNorm that follows (the next block's LN1, or LN_f) in the same pass
    be.residual_layernorm_forward(a.residual3, next->out, next->mean, next->rstd, a.residual2, a.fcproj, next->weight,
                                  next->bias, N, C);
  } else {
    be.residual_forward(a.residual3, a.residual2, a.fcproj, NC);
  }
}

void transformer_forward(Backend& be, BlockKernels& k, const GPTConfig& c, const ParameterTensors& P,
                         const ActivationTensors& A, const ActivationLayout& layout, const float* x, int N,
                         const Dropout& drop, bool fuse) {
  const int L = c.n_layer;
  const float* in = x;  // the residual stream entering block l
  for (int l = 0; l < L; ++l) {
    const ActivationTensors a = layer_activations(A, c, layout, l);
    const ParameterTensors p = layer_params(P, c, l);
    NextNorm next{A.lnf, A.lnf_mean, A.lnf_rstd, P.lnfw, P.lnfb};  // after the last block: LN_f
    if (l + 1 < L) {
      const ActivationTensors an = layer_activations(A, c, layout, l + 1);
      const ParameterTensors pn = layer_params(P, c, l + 1);
      next = {an.ln1, an.ln1_mean, an.ln1_rstd, pn.ln1w, pn.ln1b};
    }
    // fused, block l > 0 finds its LN1 computed by block l - 1's last residual add
    block_forward(be, k, c, l, p, a, in, N, drop, fuse, /*ln1_ready=*/fuse && l > 0, fuse ? &next : nullptr);
    in = a.residual3;
  }
  if (!fuse) final_norm(be, c, P, A, in, N);
}

void apply_rope(Backend& be, const GPT& m, float* qkv, int B, int T, int pos0, bool inverse) {
  const GPTConfig& c = m.config;
  const int C = c.n_embd, hs = C / c.n_head, QKV = qkv_channels(c);
  const auto& rope = inverse ? be.rope_backward : be.rope_forward;
  rope(qkv, qkv, m.rope_cos.data(), m.rope_sin.data(), B, T, c.n_head, hs, QKV, pos0);        // q: NH heads at 0
  rope(qkv + C, qkv + C, m.rope_cos.data(), m.rope_sin.data(), B, T, kv_heads(c), hs, QKV, pos0);  // k: NKV at C
}

namespace {

// The training forward's kernels: fp32 matmuls on the model's weights, full causal attention.
class TrainingKernels final : public BlockKernels {
 public:
  TrainingKernels(Backend& be, const GPT& m, int B, int T)
      : be_(be), m_(m), B_(B), T_(T), C_(m.config.n_embd), NH_(m.config.n_head), NKV_(kv_heads(m.config)),
        flash_(attention_of(m.config) == AttentionKind::flash) {}
  void linear(float* out, const float* inp, const LinearLayer& w, int N) override {
    be_.matmul_forward(out, inp, w.weight, w.bias, N, w.in, w.out);
    if (m_.lora != nullptr) lora_linear_forward(*m_.lora, be_, out, inp, w, N);  // LoRA hook: out += adapter
  }
  void linear_gelu(float* pre, float* out, const float* inp, const LinearLayer& w, int N) override {
    if (m_.lora != nullptr && m_.lora->site(w.which, w.layer) != nullptr) {
      // LoRA hook: the adapter joins pre before the GELU, so the fused op splits in two
      be_.matmul_forward(pre, inp, w.weight, w.bias, N, w.in, w.out);
      lora_linear_forward(*m_.lora, be_, pre, inp, w, N);
      be_.gelu_forward(out, pre, static_cast<i64>(N) * w.out);
      return;
    }
    be_.matmul_gelu_forward(pre, out, inp, w.weight, w.bias, N, w.in, w.out);
  }
  void attention(float* out, float* preatt, float* att, float* lse, const float* qkv, int /*layer*/) override {
    if (flash_) {
      be_.flash_attention_forward(out, lse, qkv, B_, T_, C_, NH_, NKV_);
    } else {
      be_.attention_forward(out, preatt, att, qkv, B_, T_, C_, NH_);
    }
  }
  void rope(float* qkv) override { apply_rope(be_, m_, qkv, B_, T_, /*pos0=*/0, /*inverse=*/false); }
  // the model's Linear-input hook (GPTData::linear_input: BitNet's int8 activations), if any
  void linear_input(float* x, const LinearLayer& w, int N) override {
    if (m_.linear_input != nullptr) m_.linear_input(gpt_memory(m_), x, N, w.in);
  }

 private:
  Backend& be_;
  const GPT& m_;
  int B_, T_, C_, NH_, NKV_;
  bool flash_;
};

}  // namespace

// ---- forward and backward ------------------------------------------------------------------------

void gpt_forward(GPT& model, Backend& be, const int32_t* inputs, const int32_t* targets, int B, int T,
                 bool train, uint64_t dropout_seed, Fusion fusion) {
  const GPTConfig& cfg = model.config;
  NN_CHECK(B >= 1 && T >= 1, "GPT forward: B=" << B << " T=" << T << " must be >= 1");
  NN_CHECK(T <= cfg.block_size, "GPT forward: sequence length " << T << " exceeds the model's block_size "
                                                                << cfg.block_size);
  NN_CHECK(&be.memory() == &gpt_memory(model),
           "GPT forward: the model is in " << gpt_memory(model).where() << " but the " << be.name()
                                           << " backend computes in " << be.memory().where()
                                           << " (gpt_move_to(model, backend.memory()) moves it)");
  // the Linear-input hook transforms atty in place, which flash attention's backward reads
  NN_CHECK(model.linear_input == nullptr || attention_of(cfg) != AttentionKind::flash,
           "GPT forward: a Linear-input hook (int8 activations, gpt/compress.h) needs full attention: flash "
           "attention's backward reads its output, the attention projection's input that the hook rounds in place "
           "(set attention = full, --attention full)");
  const float p = train ? cfg.dropout : 0.0f;
  const bool drop = p > 0.0f;
  ensure_activations(model, B, T, drop, be.keeps_preatt());
  model.B = B;
  model.T = T;
  point_activations(model);
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
    model.tokens_memory = make_array<int32_t>(gpt_memory(model), static_cast<size_t>(2 * N));
  }
  model.tokens_memory.upload(inputs, static_cast<size_t>(N));
  if (targets != nullptr) model.tokens_memory.upload(targets, static_cast<size_t>(N), static_cast<size_t>(N));
  const int32_t* d_inputs = model.tokens_memory.data();
  const int32_t* d_targets = model.tokens_memory.data() + N;

  const int C = cfg.n_embd, V = cfg.vocab_size;
  const int Ni = static_cast<int>(N);
  const ParameterTensors& P = model.params;
  const ActivationTensors& A = model.acts;

  // embeddings: x = wte[tok] + wpe[t] (llama: wte[tok]; P.wpe is nullptr)
  be.encoder_forward(A.encoded, d_inputs, P.wte, P.wpe, B, T, C, V);
  if (drop) be.dropout_forward(A.encoded, A.encoded_mask, A.encoded, N * C, p, site_seed(dropout_seed, 0));
  // the L blocks and LN_f
  TrainingKernels k(be, model, B, T);
  model.dropout_seed = dropout_seed;
  if (model.recompute_alloc) {
    // recomputation: every block writes the one layer slice, its output goes to block_outputs
    // (the next block's input, and what the backward recomputes block l + 1 from); unfused, so
    // that the backward's second forward of a block is this one's bits (gpt_set_recompute)
    const float* in = A.encoded;
    for (int l = 0; l < cfg.n_layer; ++l) {
      ActivationTensors a = A;
      a.residual3 = block_output(model, l);
      block_forward(be, k, cfg, l, layer_params(P, cfg, l), a, in, Ni, {p, dropout_seed}, /*fuse=*/false,
                    /*ln1_ready=*/false, nullptr);
      in = a.residual3;
    }
    final_norm(be, cfg, P, A, in, Ni);
  } else {
    transformer_forward(be, k, cfg, P, A, layout_of(model), A.encoded, Ni, {p, dropout_seed}, fuses(be, fusion, cfg));
  }
  // the head: logits = lnf wte^T when tied (lm_head^T when not; no bias)
  be.matmul_forward(A.logits, A.lnf, head_weight(P), nullptr, Ni, C, V);
  model.mean_loss = -1.0f;
  if (targets != nullptr) {
    model.mean_loss = be.crossentropy_forward(A.probs, A.losses, A.logits, d_targets, Ni, V);
  }
}

void gpt_zero_grad(GPT& model) { model.grads_memory.zero(); }

void gpt_set_recompute(GPT& model, bool on) { model.recompute = on; }

void gpt_backward(GPT& model, Backend& be, float dloss) {
  NN_CHECK(model.have_targets && model.B > 0, "GPT backward: the last forward had no targets (no loss to differentiate)");
  const GPTConfig& cfg = model.config;
  const int B = model.B, T = model.T, L = cfg.n_layer, C = cfg.n_embd, V = cfg.vocab_size;
  const i64 N = static_cast<i64>(B) * T, NC = N * C;
  const int Ni = static_cast<int>(N);
  const bool drop = model.train_mode && cfg.dropout > 0.0f;
  const ActivationLayout layout = layout_of(model);
  const bool recompute = model.recompute_alloc;
  const ParameterTensors& P = model.params;
  const ParameterTensors& G = model.grads;
  const ActivationTensors& A = model.acts;
  const BackwardScratch& S = model.scratch;

  const int QKV = qkv_channels(cfg), H = mlp_hidden(cfg), NKV = kv_heads(cfg);
  const bool llama = cfg.arch == Arch::llama;
  const bool flash = attention_of(cfg) == AttentionKind::flash;
  // LoRA hook (gpt/lora.h): with adapters attached the base is frozen. Its Linear, head and
  // embedding weight gradients are not computed (nullptr: Backend::matmul_backward skips the
  // product); each Linear's dx gets its adapter's share and the adapters their gradients.
  LoraAdapters* lora = model.lora;
  const bool frozen = lora != nullptr && !lora->compute_base_grads;
  auto W = [frozen](float* g) { return frozen ? nullptr : g; };  // a base weight's gradient, or none
  auto lora_backward = [&](float* dx, const float* dout, const float* x, Linear which, int l) {
    if (lora != nullptr) lora_linear_backward(*lora, be, dx, dout, x, which, l, Ni);
  };

  // loss -> logits -> head (wte when tied: its gradient adds to the embedding's) -> ln_f
  const int32_t* d_inputs = model.tokens_memory.data();
  const int32_t* d_targets = model.tokens_memory.data() + N;
  be.crossentropy_backward(S.dlogits, A.probs, d_targets, Ni, V, dloss);
  be.matmul_backward(S.dln, W(P.lm_head != nullptr ? G.lm_head : G.wte), nullptr, S.dlogits, A.lnf, head_weight(P), Ni,
                     C, V);
  // dresidual: dL/d(residual stream), built up from zero as the layers are walked backwards
  gpt_memory(model).zero(S.dresidual, static_cast<size_t>(NC) * sizeof(float));
  // (the input of LN_f: the last block's output)
  const float* last = recompute ? block_output(model, L - 1) : layer_activations(A, cfg, layout, L - 1).residual3;
  norm_backward(be, cfg, S.dresidual, G.lnfw, G.lnfb, S.dln, last, P.lnfw, A.lnf_mean, A.lnf_rstd, Ni);
  TrainingKernels k(be, model, B, T);  // recomputation's forward

  for (int l = L - 1; l >= 0; --l) {
    // layer l's parameters, their gradients and activations; x its input
    const ParameterTensors p = layer_params(P, cfg, l);
    const ParameterTensors g = layer_params(G, cfg, l);
    ActivationTensors a = layer_activations(A, cfg, layout, l);
    const float* x = l == 0                ? A.encoded
                     : recompute ? block_output(model, l - 1)
                                 : layer_activations(A, cfg, layout, l - 1).residual3;
    if (recompute && l < L - 1) {
      // (the last block's are still in the slice from the forward)
      // block l's activations again, from its stored input, with the first forward's dropout
      // masks (the same seed); its output goes to a slice of its own, not over the stored one
      a.residual3 = S.dbranch;  // free until the dropout backward below, which follows this
      block_forward(be, k, cfg, l, p, a, x, Ni, {drop ? cfg.dropout : 0.0f, model.dropout_seed}, /*fuse=*/false,
                    /*ln1_ready=*/false, nullptr);
    }

    // MLP branch: its output gradient is the stream's gradient (through the dropout mask)
    const float* dbranch = S.dresidual;
    if (drop) {
      be.dropout_backward(S.dbranch, S.dresidual, a.fcproj_mask, NC);
      dbranch = S.dbranch;
    }
    if (llama) {
      be.matmul_backward(S.dfch_gelu, W(g.fcprojw), W(g.fcprojb), dbranch, a.fch_swiglu, p.fcprojw, Ni, H, C);
      lora_backward(S.dfch_gelu, dbranch, a.fch_swiglu, Linear::fcproj, l);
      // into the fused [gate | up] gradient (N, 2H)
      be.swiglu_backward(S.dfch, S.dfch + H, S.dfch_gelu, a.fch, a.fch + H, Ni, H, 2 * H);
      be.matmul_backward(S.dln, W(g.fcw), W(g.fcb), S.dfch, a.ln2, p.fcw, Ni, C, 2 * H);
    } else {
      be.matmul_backward(S.dfch_gelu, W(g.fcprojw), W(g.fcprojb), dbranch, a.fch_gelu, p.fcprojw, Ni, H, C);
      lora_backward(S.dfch_gelu, dbranch, a.fch_gelu, Linear::fcproj, l);
      be.gelu_backward(S.dfch, S.dfch_gelu, a.fch, static_cast<i64>(N) * H);
      be.matmul_backward(S.dln, W(g.fcw), W(g.fcb), S.dfch, a.ln2, p.fcw, Ni, C, H);
    }
    lora_backward(S.dln, S.dfch, a.ln2, Linear::fc, l);
    // += : dresidual becomes dL/d(residual2), the stream plus the path through norm 2
    norm_backward(be, cfg, S.dresidual, g.ln2w, g.ln2b, S.dln, a.residual2, p.ln2w, a.ln2_mean, a.ln2_rstd, Ni);

    // attention branch
    dbranch = S.dresidual;
    if (drop) {
      be.dropout_backward(S.dbranch, S.dresidual, a.attproj_mask, NC);
      dbranch = S.dbranch;
    }
    be.matmul_backward(S.datty, W(g.attprojw), W(g.attprojb), dbranch, a.atty, p.attprojw, Ni, C, C);
    lora_backward(S.datty, dbranch, a.atty, Linear::attproj, l);
    if (flash) {
      be.flash_attention_backward(S.dqkv, S.datty, a.qkv, a.atty, a.lse, B, T, C, cfg.n_head, NKV);
    } else {
      be.attention_backward(S.dqkv, S.dpreatt, S.datt, S.datty, a.qkv, a.att, B, T, C, cfg.n_head);
    }
    // llama: the gradient of q and k rotated back (RoPE's backward), then the projection's
    if (llama) apply_rope(be, model, S.dqkv, B, T, /*pos0=*/0, /*inverse=*/true);
    be.matmul_backward(S.dln, W(g.qkvw), W(g.qkvb), S.dqkv, a.ln1, p.qkvw, Ni, C, QKV);
    lora_backward(S.dln, S.dqkv, a.ln1, Linear::qkv, l);
    // += : dresidual becomes dL/d(this layer's input)
    norm_backward(be, cfg, S.dresidual, g.ln1w, g.ln1b, S.dln, x, p.ln1w, a.ln1_mean, a.ln1_rstd, Ni);
  }

  if (frozen) return;  // LoRA: the embeddings are frozen, their gradient not needed
  const float* dencoded = S.dresidual;
  if (drop) {
    be.dropout_backward(S.dbranch, S.dresidual, A.encoded_mask, NC);
    dencoded = S.dbranch;
  }
  be.encoder_backward(G.wte, G.wpe, dencoded, d_inputs, B, T, C, V);
}

float clip_grad_norm(Backend& be, float* grads, int64_t n, float max_norm, const char* what) {
  const double norm = std::sqrt(be.sum_squares(grads, n));
  NN_CHECK(std::isfinite(norm), what << " is " << norm << ": training diverged (try a lower "
                                     << "learning rate or stronger clipping)");
  if (max_norm > 0.0f && norm > max_norm) be.scale(grads, static_cast<float>(max_norm / (norm + 1e-6)), n);
  return static_cast<float>(norm);
}

float gpt_clip_grad_norm(GPT& model, Backend& be, float max_norm) {
  return clip_grad_norm(be, model.grads_memory.data(), model.num_params, max_norm, "the gradient norm");
}

void gpt_adamw_step(GPT& model, Backend& be, const AdamWConfig& cfg, float lr) {
  NN_CHECK(!model.sharded, "AdamW step: the moments are sharded across ranks (ZeRO-1): train_step with the ranks' "
                           "Comm takes the sharded step");
  model.adam_t += 1;
  // one update per row of kParams (all L layers of a per-layer row at once)
  i64 offset = 0;
  for (const ParamSpec& s : kParams) {
    const i64 n = param_numel(s, model.config);
    const float wd = s.decay ? cfg.weight_decay : 0.0f;
    be.adamw_update(model.params_memory.data() + offset, model.grads_memory.data() + offset,
                    model.m_memory.data() + offset, model.v_memory.data() + offset, n, lr, cfg.beta1, cfg.beta2,
                    cfg.eps, wd, model.adam_t);
    offset += n;
  }
}

// ---- one training step -----------------------------------------------------------------------------

double accumulate_gradients(GPT& model, Backend& be, const std::vector<MicroBatch>& micro, int B, int T,
                            const StepOptions& o) {
  NN_CHECK(!micro.empty(), "train_step: no micro-batch");
  const int K = static_cast<int>(micro.size());
  const int ranks = o.comm != nullptr ? o.comm->size() : 1;
  double loss = 0.0;
  for (int i = 0; i < K; ++i) {
    const MicroBatch& mb = micro[static_cast<size_t>(i)];
    gpt_forward(model, be, mb.inputs, mb.targets, B, T, o.train, mb.dropout_seed);
    NN_CHECK(std::isfinite(model.mean_loss), "the training loss is " << model.mean_loss);
    loss += static_cast<double>(model.mean_loss) / K;
    // dloss = 1/(K N): the K backwards of each of the N ranks accumulate, once summed across
    // the ranks, the gradient of the mean of all K N losses
    gpt_backward(model, be, 1.0f / static_cast<float>(K * ranks));
    if (o.after_backward) o.after_backward(i);
  }
  return loss;
}

double allreduce_gradients(const StepOptions& o, Memory& memory, float* grads, int64_t n, double local) {
  if (o.comm == nullptr || o.comm->size() == 1) return local;
  kernels::comm::Comm& comm = *o.comm;
  if (memory.is_host()) {
    o.allreduce(comm, grads, n);
#ifdef NNLAB_HAVE_NCCL
  } else if (kernels::comm::takes_device_memory(comm) && o.allreduce == kernels::comm::allreduce_library) {
    // NCCL (--comm nccl): the GPUs sum the device buffer among themselves, no host copy. The
    // ring (v1) adds its chunks on the CPU, so it still takes the host path below
    comm.allreduce_sum(grads, n);
#endif
  } else {  // a GPU without NCCL: through the host (lesson 14 measures what that costs)
    std::vector<float> host(static_cast<size_t>(n));
    memory.to_host(host.data(), grads, static_cast<size_t>(n) * sizeof(float));
    o.allreduce(comm, host.data(), n);
    memory.from_host(grads, host.data(), static_cast<size_t>(n) * sizeof(float));
  }
  float mean = static_cast<float>(local / comm.size());
  comm.allreduce_sum(&mean, 1);
  return mean;
}

void gpt_shard_optimizer(GPT& model, kernels::comm::Comm& comm) {
  NN_CHECK(!model.sharded, "ZeRO-1: the optimizer is already sharded");
  NN_CHECK(!model.m_memory.empty(), "ZeRO-1: the model has no AdamW state to shard (made without training state)");
  if (comm.size() == 1) return;
  const kernels::comm::Chunk c = kernels::comm::owned_chunk(model.num_params, comm.size(), comm.rank());
  const size_t n = static_cast<size_t>(c.end - c.begin);
  Memory& mem = gpt_memory(model);
  for (Array<float>* full : {&model.m_memory, &model.v_memory}) {
    Array<float> shard = make_array<float>(mem, n);
    if (n > 0) mem.copy(shard.data(), full->data() + c.begin, n * sizeof(float));
    *full = std::move(shard);  // the full moments are freed: the point of sharding
  }
  model.sharded = true;
  model.shard_begin = c.begin;
  model.shard_end = c.end;
}

FullMoments gpt_gather_moments(const GPT& model, kernels::comm::Comm& comm) {
  FullMoments out;
  if (!model.sharded) {
    out.m = model.m_memory.to_vector();
    out.v = model.v_memory.to_vector();
    return out;
  }
  NN_CHECK(comm.size() > 1, "ZeRO-1: a sharded model's moments are gathered over its ranks, not one");
  for (auto [shard, full] : {std::pair{&model.m_memory, &out.m}, std::pair{&model.v_memory, &out.v}}) {
    full->assign(static_cast<size_t>(model.num_params), 0.0f);
    const std::vector<float> own = shard->to_vector();
    std::copy(own.begin(), own.end(), full->begin() + model.shard_begin);
    kernels::comm::all_gather_ring(comm, full->data(), model.num_params);
  }
  return out;
}

namespace {

// The ZeRO-1 step after the gradients are accumulated (StepOptions: the sharded step).
void sharded_step(GPT& model, Backend& be, const StepOptions& o, StepResult& r) {
  namespace kc = kernels::comm;
  kc::Comm& comm = *o.comm;
  NN_CHECK(model.sharded && comm.size() > 1 &&
               kc::owned_chunk(model.num_params, comm.size(), comm.rank()).begin == model.shard_begin,
           "ZeRO-1 step: the model's optimizer is not sharded over these " << comm.size() << " ranks");
  Memory& mem = gpt_memory(model);
  const int64_t n = model.num_params, b = model.shard_begin, e = model.shard_end;
  // the exchanges run on host copies when the model lives on a GPU (as allreduce_gradients)
  std::vector<float> host;
  float* grads = model.grads_memory.data();
  float* params = model.params_memory.data();
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); };
  clock::time_point t = clock::now();
  if (!mem.is_host()) {
    host.resize(static_cast<size_t>(n));
    mem.to_host(host.data(), grads, static_cast<size_t>(n) * sizeof(float));
    kc::reduce_scatter_ring(comm, host.data(), n);
    if (e > b) mem.from_host(grads + b, host.data() + b, static_cast<size_t>(e - b) * sizeof(float));
  } else {
    kc::reduce_scatter_ring(comm, grads, n);
  }
  // the step's loss and the global gradient norm: two scalars summed round the ring (the same
  // bits on every rank, so every rank clips by the same factor); the norm's square in two
  // floats (high and low parts) to keep a double's precision through a float all-reduce
  const double sq = e > b ? be.sum_squares(grads + b, e - b) : 0.0;
  float sums[3] = {static_cast<float>(sq), 0.0f, static_cast<float>(r.loss / comm.size())};
  sums[1] = static_cast<float>(sq - static_cast<double>(sums[0]));
  kc::allreduce_ring(comm, sums, 3);
  r.comm_ms = since(t);
  r.loss = sums[2];
  const double norm = std::sqrt(static_cast<double>(sums[0]) + static_cast<double>(sums[1]));
  NN_CHECK(std::isfinite(norm), "the gradient norm is " << norm << ": training diverged (try a lower learning rate "
                                                         << "or stronger clipping)");
  r.grad_norm = static_cast<float>(norm);
  if (o.grad_clip > 0.0f && norm > o.grad_clip && e > b) {
    be.scale(grads + b, static_cast<float>(o.grad_clip / (norm + 1e-6)), e - b);
  }
  // AdamW on the own shard: each row of kParams (its decay) where it meets [b, e)
  model.adam_t += 1;
  int64_t offset = 0;
  for (const ParamSpec& s : kParams) {
    const int64_t len = param_numel(s, model.config);
    const int64_t lo = std::max(offset, b), hi = std::min(offset + len, e);
    if (hi > lo) {
      be.adamw_update(params + lo, grads + lo, model.m_memory.data() + (lo - b), model.v_memory.data() + (lo - b),
                      hi - lo, o.lr, o.adamw.beta1, o.adamw.beta2, o.adamw.eps, s.decay ? o.adamw.weight_decay : 0.0f,
                      model.adam_t);
    }
    offset += len;
  }
  // every rank's updated shard to every rank
  t = clock::now();
  if (!mem.is_host()) {
    if (e > b) mem.to_host(host.data() + b, params + b, static_cast<size_t>(e - b) * sizeof(float));
    kc::all_gather_ring(comm, host.data(), n);
    mem.from_host(params, host.data(), static_cast<size_t>(n) * sizeof(float));
  } else {
    kc::all_gather_ring(comm, params, n);
  }
  r.comm_ms += since(t);
}

}  // namespace

StepResult train_step(GPT& model, Backend& be, const std::vector<MicroBatch>& micro, int B, int T,
                      const StepOptions& o) {
  StepResult r;
  gpt_zero_grad(model);
  r.loss = accumulate_gradients(model, be, micro, B, T, o);
  NN_CHECK(!model.sharded || o.comm != nullptr,
           "train step: a model with a sharded optimizer (ZeRO-1) needs its ranks' Comm");
  const bool multi_rank = o.comm != nullptr && o.comm->size() > 1;
  auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  if (multi_rank) {  // the ranks in step: what follows is the transfer alone
    const auto w = std::chrono::steady_clock::now();
    o.comm->barrier();
    r.wait_ms = ms_since(w);
  }
  if (model.sharded) {
    sharded_step(model, be, o, r);
    return r;
  }
  const auto t = std::chrono::steady_clock::now();
  r.loss = allreduce_gradients(o, model.grads_memory.memory(), model.grads_memory.data(),
                               static_cast<int64_t>(model.grads_memory.size()), r.loss);
  if (multi_rank) r.comm_ms = ms_since(t);
  r.grad_norm = gpt_clip_grad_norm(model, be, o.grad_clip);
  gpt_adamw_step(model, be, o.adamw, o.lr);
  return r;
}

double flops_per_token(const GPTConfig& c, int T) {
  // (the attention term counts query heads: grouped-query attention shares K and V between
  // heads but every query head still takes its own dot products)
  const double N = static_cast<double>(num_parameters_non_embedding(c));
  const double L = c.n_layer, H = c.n_head, Q = static_cast<double>(c.n_embd / c.n_head);
  return 6.0 * N + 12.0 * L * H * Q * T;
}

MemoryBreakdown memory_breakdown(const GPTConfig& c, int B, int T, bool preatt, bool recompute) {
  MemoryBreakdown m;
  const i64 f = static_cast<i64>(sizeof(float));
  m.params = num_parameters(c) * f;
  m.grads = m.params;
  m.adam = 2 * m.params;
  m.activations = activation_floats(c, training_layout(c, B, T, c.dropout > 0.0f, preatt, recompute)) * f;
  if (recompute) m.activations += static_cast<i64>(c.n_layer) * B * T * c.n_embd * f;  // the block outputs
  m.scratch = total_floats(kScratch, c, scratch_layout(c, B, T)) * f;
  return m;
}

std::vector<NamedTensor> activation_views(const GPT& model) {
  std::vector<NamedTensor> out;
  if (model.B == 0) return out;
  NN_CHECK(!model.recompute_alloc, "activation views: a model trained with activation recomputation keeps one "
                                   "layer's activations, not every layer's (turn recomputation off to dump them)");
  const GPTConfig& c = model.config;
  const ActivationLayout layout = layout_of(model);
  auto add = [&](const TensorSpec<ActivationTensors>& s, int l) {
    if (!s.view || !held(s, layout) || (s.held == Held::loss && !model.have_targets)) return;
    const ActivationTensors a = l >= 0 ? layer_activations(model.acts, c, layout, l) : model.acts;
    const std::string name = l >= 0 ? "h." + std::to_string(l) + "." + s.name : std::string(s.name);
    out.push_back({name, shape_of(s.shape, c, model.B, model.T), a.*s.field});
  };
  // in forward order: the rows before the per-layer ones, layer by layer, then the rest
  const size_t K = std::size(kActivations);
  size_t first = 0;
  while (first < K && !kActivations[first].per_layer) ++first;
  size_t last = first;
  while (last < K && kActivations[last].per_layer) ++last;
  for (size_t r = 0; r < first; ++r) add(kActivations[r], -1);
  for (int l = 0; l < c.n_layer; ++l) {
    for (size_t r = first; r < last; ++r) add(kActivations[r], l);
  }
  for (size_t r = last; r < K; ++r) add(kActivations[r], -1);
  return out;
}

}  // namespace gpt
