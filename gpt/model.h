// gpt/model.h: a GPT-2-style character model as flat structs, in the spirit of
// karpathy/llm.c's train_gpt2.c: one buffer for all parameters, one for their gradients,
// one for each AdamW moment, one for the activations, and structs of pointers into them.
//
//   tokens (B,T) -> wte[tok] + wpe[t] -> [ L x block ] -> LayerNorm -> x wte^T -> logits (B,T,V)
//   block: x = x + proj(attention(LN1(x)));  x = x + fcproj(gelu(fc(LN2(x))))
//
// Pre-LayerNorm (GPT-2), causal multi-head attention, a GELU MLP 4x wide, residual
// connections, a final LayerNorm, and the output head TIED to the token embedding (the same
// (V,C) matrix embeds tokens and scores them). Dropout (train mode only) on the embedding
// output and on each block's two branch outputs before they join the residual stream.
// nanoGPT also drops attention probabilities; this model does not (one fewer T x T buffer).
//
// The forward/backward code calls only gpt::Backend (gpt/backend.h), so the same code runs
// the naive loops, the CPU kernels and CUDA. Reading order below:
//   - the tables (kParams, kActivations, kScratch): every tensor once, with its shape as a
//     function of the config; sizes, pointers, decay flags, checkpoint names and dump views
//     all come from them;
//   - block_forward: one block as the diagram draws it,
//       LN1 -> attention -> + residual -> LN2 -> MLP -> + residual,
//     LN1 of each block at the start of that block. A fast backend may fuse each residual
//     add with the LayerNorm after it (Backend::fuses_residual_layernorm); the values are
//     the same. Training (gpt_forward) and decoding (gpt/infer.h Decoder::step) both run it,
//     each with its BlockKernels (matmul and full attention, or packed matvec and the KV cache);
//   - gpt_forward, gpt_backward, clip, AdamW, and train_step, the one training step the
//     trainer, the bench and the tests run.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "kernels/comm.h"

namespace gpt {

// The two block designs (lesson 11 teaches the second as a diff from the first):
//   gpt2   learned position table wpe, LayerNorm, GELU MLP 4C wide, multi-head attention,
//          optional biases, head tied to wte
//   llama  no wpe (RoPE rotates q and k), RMSNorm, SwiGLU MLP (gate and up projections
//          stacked in one (2H, C) matrix, then down (C, H)), grouped-query attention
//          (n_kv_head key/value heads shared by n_head query heads), no biases, the head
//          tied to wte or its own lm_head (V, C)
enum class Arch : uint8_t { gpt2, llama };
// How the block's attention runs: `full` keeps the (T, T) maps (kernels/attention.h; the
// maps lessons 07 and 08 draw, multi-head only); `flash` keeps one log-sum-exp per query
// row (kernels/flash_attention.h; grouped-query heads). automatic: flash for llama, full
// for gpt2 (see attention_of).
enum class AttentionKind : uint8_t { automatic, full, flash };

struct GPTConfig {
  int vocab_size = 65;   // V
  int block_size = 64;   // maxT: the longest context (rows of wpe, or of RoPE's tables)
  int n_layer = 4;       // L
  int n_head = 4;        // NH
  int n_embd = 128;      // C; head size hs = C / NH
  float dropout = 0.0f;  // p, used in train mode only
  bool bias = true;      // biases in the Linear and LayerNorm layers (GPT-2: yes; nanoGPT's
                         // Shakespeare config: no). Without, the 7 bias tensors are absent
                         // (null pointers, no slices, no checkpoint entries). llama: false.
  Arch arch = Arch::gpt2;
  int n_kv_head = 0;     // NKV, key/value heads (llama); 0: n_head. gpt2: n_head only
  int ffn_hidden = 0;    // H, the SwiGLU width (llama); 0: default_ffn_hidden(C)
  float rope_theta = 10000.0f;    // RoPE's base (llama; kernels/rope.h)
  float norm_eps = 1e-5f;         // RMSNorm's eps (llama; LayerNorm's is fixed at 1e-5)
  bool tie_embeddings = true;     // the head is wte (gpt2: always), else its own lm_head
  AttentionKind attention = AttentionKind::automatic;
};
// nn::Error when a size is < 1, n_embd % n_head != 0, dropout outside [0, 1), n_head %
// n_kv_head != 0, the head size is odd for RoPE, or an option the arch lacks is set
// (gpt2 with n_kv_head != n_head, an untied head or flash's GQA; llama with biases; full
// attention with n_kv_head != n_head).
void validate(const GPTConfig& c);
// The derived sizes: key/value heads, the MLP's hidden width (gpt2 4C; llama ffn_hidden, by
// default 8C/3 rounded up to a multiple of 32: the parameters of a 4C GELU MLP in three
// matrices), the qkv projection's width (C + 2 NKV hs), and the attention that runs.
int kv_heads(const GPTConfig& c);
int default_ffn_hidden(int n_embd);
int mlp_hidden(const GPTConfig& c);
int qkv_channels(const GPTConfig& c);
// The MLP's first projection's width (gpt2 H, llama 2H) and the channels of one position's
// keys (NKV hs: what a KV cache stores per position, per layer, for k and again for v).
int fc_channels(const GPTConfig& c);
int kv_channels(const GPTConfig& c);
AttentionKind attention_of(const GPTConfig& c);
// "gpt2" / "llama", "full" / "flash" / "auto", and back (nn::Error naming the choices).
const char* arch_name(Arch a);
Arch parse_arch(const std::string& s);
const char* attention_name(AttentionKind a);
AttentionKind parse_attention(const std::string& s);

// ---- one description of the model: the tables ------------------------------------------------
// Every tensor of the model is one row of a table below (kParams, kActivations, kScratch):
// its name, its shape as a function of the config, and what it is. Everything else is
// derived from the rows, never written again: the element counts (num_parameters,
// memory_breakdown), the pointer structs (ParameterTensors, ActivationTensors,
// BackwardScratch), the AdamW decay flags, the checkpoint slices and their names
// (param_slices), the initialisation, the inference model's vectors (gpt/infer.cpp) and the
// named activations of a dump (activation_views).

// The letters a shape is written in, and a multiple of one: 3 * C is the Dim {3, C}.
// QKV: the qkv projection's width, C + 2 NKV hs (3C with multi-head attention); H: the MLP's
// hidden width (gpt2 4C, llama ffn_hidden); FC: the MLP's first projection's width (gpt2 H,
// llama 2H: gate and up stacked).
enum class Sym : uint8_t { V, maxT, C, B, T, NH, QKV, H, FC };
struct Dim {
  int mult = 1;
  Sym sym = Sym::C;
};
constexpr Dim operator*(int k, Dim d) { return {k * d.mult, d.sym}; }
namespace dims {
inline constexpr Dim V{1, Sym::V}, maxT{1, Sym::maxT}, C{1, Sym::C}, B{1, Sym::B}, T{1, Sym::T}, NH{1, Sym::NH},
    QKV{1, Sym::QKV}, H{1, Sym::H}, FC{1, Sym::FC};
}  // namespace dims
// A shape of up to 4 dims, e.g. {B, T, 3 * C}; one layer's, for a tensor stacked over L.
struct Shape {
  Dim d[4]{};
  int rank = 0;
  constexpr Shape(std::initializer_list<Dim> list) {
    for (Dim x : list) d[rank++] = x;
  }
};

// The parameters, as pointers into one flat buffer, in the order of kParams (shapes there);
// per-layer tensors are stacked over L: (L, shape). nullptr for a bias the config lacks.
struct ParameterTensors {
  float* wte;       // token embedding; also the output head (tied)
  float* wpe;       // position embedding (gpt2)
  float* ln1w;      // LayerNorm (gpt2) or RMSNorm (llama) weight
  float* ln1b;
  float* qkvw;      // q, k, v projections stacked: rows [0,C) q, then k and v, NKV hs rows each
  float* qkvb;
  float* attprojw;
  float* attprojb;
  float* ln2w;
  float* ln2b;
  float* fcw;       // gpt2: (4C, C); llama: (2H, C), rows [0,H) gate, [H,2H) up
  float* fcb;
  float* fcprojw;   // (C, H): llama's down projection
  float* fcprojb;
  float* lnfw;
  float* lnfb;
  float* lm_head;   // (V, C), the untied head (llama with tie_embeddings = false)
};

// How a parameter starts (gpt_init_weights, GPT-2's): N(0, 0.02); the two residual
// projections N(0, 0.02 / sqrt(2 L)); LayerNorm weights 1; biases 0.
enum class Init : uint8_t { normal, normal_residual, ones, zeros };

// When a parameter is in the model (present(), gpt/model.cpp).
enum class Needs : uint8_t {
  always,
  bias,    // GPTConfig::bias
  wpe,     // a learned position table: arch gpt2 (llama rotates q and k instead)
  untied,  // its own output head: tie_embeddings = false (llama)
};

struct ParamSpec {
  const char* name;  // the checkpoint's (nanoGPT's state dict); a per-layer one is prefixed "h.<l>."
  float* ParameterTensors::*field;
  Shape shape;       // one layer's
  bool decay;        // AdamW weight decay: matrices and embeddings yes, biases and norms no
  bool per_layer;    // stacked over L
  Needs needs;       // present always, or only with biases, a position table, an untied head
  Init init;
};

// The activations of one forward pass at (B, T): what the backward needs, per layer
// stacked over L, in the order of kActivations (shapes there). nullptr for one the layout
// does not hold (ActivationLayout).
struct ActivationTensors {
  float* encoded;    // wte[tok] + wpe[t] (after dropout in train mode); llama: wte[tok]
  float* ln1;
  float* ln1_mean;   // LayerNorm's (gpt2); RMSNorm keeps only rstd
  float* ln1_rstd;
  float* qkv;        // llama: with RoPE applied to q and k (in place, after the projection)
  float* preatt;     // scores before the softmax; not kept by a backend whose attention does not (cuda)
  float* att;        // softmax(preatt), the attention maps (full attention)
  float* lse;        // flash attention: the log-sum-exp of each query row's scores
  float* atty;       // attention output, heads concatenated
  float* attproj;    // after dropout in train mode
  float* residual2;  // x + attproj
  float* ln2;
  float* ln2_mean;
  float* ln2_rstd;
  float* fch;        // the MLP's first projection (llama: [gate | up])
  float* fch_gelu;   // gelu(fch) (gpt2)
  float* fch_swiglu; // silu(gate) * up (llama)
  float* fcproj;     // after dropout in train mode
  float* residual3;  // residual2 + fcproj: the next layer's input
  float* lnf;
  float* lnf_mean;
  float* lnf_rstd;
  float* logits;
  float* probs;
  float* losses;
  // dropout masks (0 or 1/(1-p)); held only when dropout > 0
  float* encoded_mask;
  float* attproj_mask;
  float* fcproj_mask;
};

// Gradients of activations for the backward: ONE layer's worth, reused layer after layer
// (the parameter gradients are what is kept). Shapes in kScratch.
struct BackwardScratch {
  float* dresidual;  // dL/d(residual stream), accumulated down through the layers
  float* dbranch;    // a branch's output gradient after dropout
  float* dln;
  float* datty;
  float* dqkv;
  float* dpreatt;
  float* datt;
  float* dfch_gelu;  // the gradient of the MLP's activation output (gelu or swiglu)
  float* dfch;
  float* dlogits;
};

// When an activation is held (ActivationLayout says which of them a layout holds).
enum class Held : uint8_t {
  always,
  preatt,  // full attention's scores, where the backend keeps them
  att,     // full attention's maps (training)
  lse,     // flash attention's log-sum-exp (training)
  masks,
  loss,
  mean,    // LayerNorm's means (gpt2)
  gelu,    // the GELU MLP's output (gpt2)
  swiglu,  // the SwiGLU MLP's output (llama)
};

template <class Tensors>
struct TensorSpec {
  const char* name;  // activation_views' name; a per-layer one is prefixed "h.<l>."
  float* Tensors::*field;
  Shape shape;       // one layer's
  bool per_layer;    // stacked over L (or one slice reused, ActivationLayout::stacked)
  Held held;
  bool view;         // listed by activation_views (what a dump writes)
};

namespace tables {
using namespace dims;
using P = ParameterTensors;
using A = ActivationTensors;
using S = BackwardScratch;

// The parameters, in buffer order: wte, wpe, then each per-layer kind stacked over L, then
// ln_f, then lm_head. (Buffer order is by kind, so a layer's slices are not contiguous; the checkpoint
// lists them layer by layer: param_slices.)
// With arch = llama the same rows hold llama's tensors: ln_1/ln_2/ln_f are RMSNorm weights,
// c_attn is (C + 2 NKV hs, C) = [q_proj | k_proj | v_proj], c_fc is (2H, C) = [gate_proj |
// up_proj], mlp.c_proj is down_proj (C, H); there are no biases and no wpe, and an untied
// head is lm_head. (Hugging Face's names, for lesson 12's loader: split c_attn and c_fc by rows.)
inline constexpr ParamSpec kParams[] = {
    // name                 field         shape           decay  per_layer needs           init
    {"wte",                 &P::wte,      {V, C},         true,  false,    Needs::always, Init::normal},
    {"wpe",                 &P::wpe,      {maxT, C},      true,  false,    Needs::wpe,    Init::normal},
    {"ln_1.weight",         &P::ln1w,     {C},            false, true,     Needs::always, Init::ones},
    {"ln_1.bias",           &P::ln1b,     {C},            false, true,     Needs::bias,   Init::zeros},
    {"attn.c_attn.weight",  &P::qkvw,     {QKV, C},       true,  true,     Needs::always, Init::normal},
    {"attn.c_attn.bias",    &P::qkvb,     {QKV},          false, true,     Needs::bias,   Init::zeros},
    {"attn.c_proj.weight",  &P::attprojw, {C, C},         true,  true,     Needs::always, Init::normal_residual},
    {"attn.c_proj.bias",    &P::attprojb, {C},            false, true,     Needs::bias,   Init::zeros},
    {"ln_2.weight",         &P::ln2w,     {C},            false, true,     Needs::always, Init::ones},
    {"ln_2.bias",           &P::ln2b,     {C},            false, true,     Needs::bias,   Init::zeros},
    {"mlp.c_fc.weight",     &P::fcw,      {FC, C},        true,  true,     Needs::always, Init::normal},
    {"mlp.c_fc.bias",       &P::fcb,      {FC},           false, true,     Needs::bias,   Init::zeros},
    {"mlp.c_proj.weight",   &P::fcprojw,  {C, H},         true,  true,     Needs::always, Init::normal_residual},
    {"mlp.c_proj.bias",     &P::fcprojb,  {C},            false, true,     Needs::bias,   Init::zeros},
    {"ln_f.weight",         &P::lnfw,     {C},            false, false,    Needs::always, Init::ones},
    {"ln_f.bias",           &P::lnfb,     {C},            false, false,    Needs::bias,   Init::zeros},
    {"lm_head.weight",      &P::lm_head,  {V, C},         true,  false,    Needs::untied, Init::normal},
};

// The activations, in forward order (also the buffer's order and the dump's).
inline constexpr TensorSpec<A> kActivations[] = {
    // name        field            shape                per_layer held           view
    {"encoded",    &A::encoded,     {B, T, C},           false,    Held::always,  true},
    {"encoded_mask", &A::encoded_mask, {B, T, C},        false,    Held::masks,   false},
    {"ln1",        &A::ln1,         {B, T, C},           true,     Held::always,  true},
    {"ln1_mean",   &A::ln1_mean,    {B, T},              true,     Held::mean,    false},
    {"ln1_rstd",   &A::ln1_rstd,    {B, T},              true,     Held::always,  false},
    {"qkv",        &A::qkv,         {B, T, QKV},         true,     Held::always,  true},
    {"preatt",     &A::preatt,      {B, NH, T, T},       true,     Held::preatt,  false},
    {"att",        &A::att,         {B, NH, T, T},       true,     Held::att,     true},
    {"lse",        &A::lse,         {B, NH, T},          true,     Held::lse,     false},
    {"atty",       &A::atty,        {B, T, C},           true,     Held::always,  true},
    {"attproj",    &A::attproj,     {B, T, C},           true,     Held::always,  true},
    {"attproj_mask", &A::attproj_mask, {B, T, C},        true,     Held::masks,   false},
    {"residual2",  &A::residual2,   {B, T, C},           true,     Held::always,  true},
    {"ln2",        &A::ln2,         {B, T, C},           true,     Held::always,  true},
    {"ln2_mean",   &A::ln2_mean,    {B, T},              true,     Held::mean,    false},
    {"ln2_rstd",   &A::ln2_rstd,    {B, T},              true,     Held::always,  false},
    {"fch",        &A::fch,         {B, T, FC},          true,     Held::always,  true},
    {"fch_gelu",   &A::fch_gelu,    {B, T, H},           true,     Held::gelu,    true},
    {"fch_swiglu", &A::fch_swiglu,  {B, T, H},           true,     Held::swiglu,  true},
    {"fcproj",     &A::fcproj,      {B, T, C},           true,     Held::always,  true},
    {"fcproj_mask", &A::fcproj_mask, {B, T, C},          true,     Held::masks,   false},
    {"residual3",  &A::residual3,   {B, T, C},           true,     Held::always,  true},
    {"lnf",        &A::lnf,         {B, T, C},           false,    Held::always,  true},
    {"lnf_mean",   &A::lnf_mean,    {B, T},              false,    Held::mean,    false},
    {"lnf_rstd",   &A::lnf_rstd,    {B, T},              false,    Held::always,  false},
    {"logits",     &A::logits,      {B, T, V},           false,    Held::always,  true},
    {"probs",      &A::probs,       {B, T, V},           false,    Held::loss,    true},
    {"losses",     &A::losses,      {B, T},              false,    Held::loss,    true},
};

// One layer's activation gradients (the backward walks the layers down, reusing them).
inline constexpr TensorSpec<S> kScratch[] = {
    {"dresidual", &S::dresidual, {B, T, C},     false, Held::always, false},
    {"dbranch",   &S::dbranch,   {B, T, C},     false, Held::always, false},
    {"dln",       &S::dln,       {B, T, C},     false, Held::always, false},
    {"datty",     &S::datty,     {B, T, C},     false, Held::always, false},
    {"dqkv",      &S::dqkv,      {B, T, QKV},   false, Held::always, false},
    {"dpreatt",   &S::dpreatt,   {B, NH, T, T}, false, Held::att,    false},
    {"datt",      &S::datt,      {B, NH, T, T}, false, Held::att,    false},
    {"dfch_gelu", &S::dfch_gelu, {B, T, H},     false, Held::always, false},
    {"dfch",      &S::dfch,      {B, T, FC},    false, Held::always, false},
    {"dlogits",   &S::dlogits,   {B, T, V},     false, Held::always, false},
};
}  // namespace tables
using tables::kActivations;
using tables::kParams;
using tables::kScratch;
inline constexpr int kNumParamTensors = static_cast<int>(std::size(kParams));

// A block's Linear weight (c_attn, attn c_proj, c_fc, mlp c_proj): the per-layer matrices,
// what the decoder packs (gpt/infer.h) and pruning prunes (gpt/prune.h).
constexpr bool is_block_matrix(const ParamSpec& s) { return s.per_layer && s.shape.rank == 2; }

// The value of a shape's dims for a config (and B, T for activations), and its element count.
std::vector<int64_t> shape_of(const Shape& s, const GPTConfig& c, int B = 0, int T = 0);
int64_t numel_of(const Shape& s, const GPTConfig& c, int B = 0, int T = 0);
// The shape in letters: "(3C, C)", "(B, NH, T, T)" (lesson 08's tables); for llama the
// widths stay letters: "(QKV, C)" (QKV = C + 2 NKV hs), "(2H, C)".
std::string letters_of(const Shape& s, Arch arch = Arch::gpt2);

// One named tensor of the checkpoint: a slice of the flat parameter buffer.
struct ParamSlice {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the flat buffer
  int64_t numel = 0;
  bool decay = false;  // AdamW weight decay: matrices and embeddings yes, biases and norms no
  const ParamSpec* spec = nullptr;  // its row of kParams
  int layer = -1;                   // its layer (-1: not a per-layer tensor)
};
// In checkpoint order: the rows of kParams before the per-layer ones (wte, wpe), then layer
// by layer h.<l>.<name> for l = 0..L-1, then the rest (ln_f.weight, ln_f.bias); an absent
// bias has no slice. Names follow nanoGPT's state dict (transformer.h.0.attn.c_attn.weight
// -> "h.0.attn.c_attn.weight"), so scripts/gpt_torch.py loads them by name.
std::vector<ParamSlice> param_slices(const GPTConfig& c);
int64_t num_parameters(const GPTConfig& c);
// nanoGPT's count for MFU and the lesson: all parameters except the position embedding.
int64_t num_parameters_non_embedding(const GPTConfig& c);
// Elements of one row of kParams in the flat buffer: all L layers of a per-layer row, 0 for
// a bias the config lacks.
int64_t param_numel(const ParamSpec& s, const GPTConfig& c);
// The 16 pointers into a flat buffer laid out as kParams says (the model's own, or a host
// copy of it: gpt/infer.cpp reads a GPU model that way).
ParameterTensors param_tensors(float* flat, const GPTConfig& c);
// Layer l's parameters: every per-layer pointer moved to layer l's slice of its stack.
ParameterTensors layer_params(const ParameterTensors& p, const GPTConfig& c, int l);

// Which activations a buffer holds and at what size.
struct ActivationLayout {
  int B = 0, T = 0;
  bool stacked = true;  // one slice per layer (training: the backward reads them all); false:
                        // one slice every layer reuses (decoding keeps nothing for a backward)
  bool preatt = true;   // Held::preatt (Backend::keeps_preatt)
  bool att = true;      // Held::att (a decoder's attention reads the KV cache, keeps no maps)
  bool masks = false;   // Held::masks (dropout > 0 in train mode)
  bool loss = true;     // Held::loss
  Arch arch = Arch::gpt2;  // Held::mean and Held::gelu (gpt2) or Held::swiglu (llama)
  bool flash = false;   // flash attention: Held::lse instead of Held::preatt and Held::att
};
// The layout's arch and attention from a config (the rest as given).
ActivationLayout with_config(ActivationLayout l, const GPTConfig& c);
// Floats of an activation buffer with `layout`, and its pointers when it starts at `base`.
int64_t activation_floats(const GPTConfig& c, const ActivationLayout& layout);
ActivationTensors activation_tensors(float* base, const GPTConfig& c, const ActivationLayout& layout);
// Layer l's activations: every per-layer pointer moved to layer l's slice (the same slice
// for every l when the layout is not stacked).
ActivationTensors layer_activations(const ActivationTensors& a, const GPTConfig& c, const ActivationLayout& layout,
                                    int l);

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.99f;  // nanoGPT's for small models (PyTorch's default is 0.999)
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // on ParamSlice::decay tensors only
};

struct LoraAdapters;  // gpt/lora.h

// The data of a GPT; GPT below adds copying that re-points the pointer structs. Every
// buffer is an Array in one Memory (gpt/memory.h): host memory for the naive and cpu
// backends, the GPU's for cuda. gpt_create puts a model in host memory; gpt_move_to copies
// it into the memory of the backend that will run it.
struct GPTData {
  GPTConfig config;
  std::vector<ParamSlice> slices;
  int64_t num_params = 0;
  Array<float> params_memory;  // num_params
  Array<float> grads_memory;   // num_params
  Array<float> m_memory;       // AdamW first moment
  Array<float> v_memory;       // AdamW second moment
  ParameterTensors params{};
  ParameterTensors grads{};
  int64_t adam_t = 0;  // AdamW steps taken (1-based t of the next step is adam_t + 1)
  // ZeRO stage 1 (lesson 14; gpt_shard_optimizer): this rank's AdamW moments cover the
  // parameters [shard_begin, shard_end) of the flat buffer only; m_memory and v_memory then
  // hold shard_end - shard_begin floats. sharded = false: all num_params.
  bool sharded = false;
  int64_t shard_begin = 0, shard_end = 0;
  // llama: RoPE's cos and sin tables (block_size, hs/2) (kernels/rope.h), made with the
  // parameters in the same memory; empty for gpt2. Not parameters: a function of the config.
  Array<float> rope_cos, rope_sin;

  // activations, sized for (B_alloc, T_alloc); a forward at B <= B_alloc, T <= T_alloc
  // reuses them (sampling runs B = 1 at growing T)
  int B_alloc = 0, T_alloc = 0;
  bool masks_alloc = false;
  bool preatt_alloc = true;  // false on a backend that keeps no preatt (Backend::keeps_preatt)
  // Activation recomputation (lesson 14; gpt_set_recompute): the forward keeps only each
  // block's output (block_outputs, (L, B, T, C)) and ONE layer's activations that every layer
  // reuses; the backward runs block l's forward again from its input before its backward.
  bool recompute = false;
  bool recompute_alloc = false;
  Array<float> block_outputs;
  Array<float> acts_memory;
  ActivationTensors acts{};
  Array<float> scratch_memory;
  BackwardScratch scratch{};

  // the last forward
  int B = 0, T = 0;
  bool train_mode = false;
  uint64_t dropout_seed = 0;  // the last forward's (recomputation draws the same masks again)
  Array<int32_t> tokens_memory;  // the (B, T) ids in the model's memory: inputs, then targets
  bool have_targets = false;
  float mean_loss = -1.0f;  // -1 when the last forward had no targets

  // LoRA hook (gpt/lora.h, lora_attach): adapters the forward adds at the Linear layers and
  // the backward trains, the base frozen (no weight gradients computed). Not owned; nullptr:
  // none. A copy of the model shares them.
  LoraAdapters* lora = nullptr;

  // Linear-input hook (lesson 15: BitNet b1.58's int8 activations, gpt/compress.h's
  // set_int8_activations): when set, every forward of this model (gpt_forward, and the
  // recomputation's forward in gpt_backward) calls it on the stored input of each block Linear
  // (ln1 -> qkv, atty -> attn proj, ln2 -> fc, fch_gelu / fch_swiglu -> mlp proj), x (rows,
  // cols) in the model's memory, to transform it IN PLACE right before the Linear reads it.
  // Why in place is the straight-through estimator: the backward reads these four buffers only
  // as the Linears' inputs (dW = dout^T x), never to differentiate the op that wrote them
  // (LayerNorm / RMSNorm backward reads its input and mean / rstd, GELU its pre-activation
  // fch, SwiGLU fch, full attention qkv and att; the fused residual + LayerNorm writes ln2 apart
  // from residual2, the fused matmul + GELU fch_gelu apart from fch). So forward and dW see
  // the transformed x, and dx passes through the transform as the identity. Flash attention's
  // backward does read its output atty (D = rowsum(dO o O)): gpt_forward refuses the hook
  // there. nullptr: none. A copy of the model keeps it; gpt_move_to does not.
  using LinearInputHook = void (*)(Memory& memory, float* x, int rows, int cols);
  LinearInputHook linear_input = nullptr;
};

// A copy is a deep copy whose ParameterTensors / ActivationTensors point into ITS buffers
// (a member-wise copy would leave them pointing into the original's). Moves keep buffers.
struct GPT : GPTData {
  GPT() = default;
  GPT(const GPT& other) : GPTData(other) { repoint(); }
  GPT& operator=(const GPT& other) {
    GPTData::operator=(other);
    repoint();
    return *this;
  }
  GPT(GPT&&) noexcept = default;
  GPT& operator=(GPT&&) noexcept = default;
  ~GPT() = default;
  void repoint();
};

// Allocates parameters, gradients and AdamW state (zeroed) in `memory`; no activations yet.
// training_state = false: the parameters only (grads and AdamW moments empty, their pointers
// null), for a model that is only run (a 355M Hugging Face model must not cost 4x its size);
// gpt_backward and the AdamW step then have nothing to write to and must not be called.
GPT gpt_create(const GPTConfig& config, Memory& memory = host_memory(), bool training_state = true);
// The model's memory (where its parameters live).
inline Memory& gpt_memory(const GPT& model) { return model.params_memory.memory(); }
// A copy of the model's parameters, gradients, AdamW state and step in `memory` (no
// activations): how a model made or loaded on the host goes to the GPU and comes back.
GPT gpt_move_to(const GPT& model, Memory& memory);
// GPT-2's initialisation, seeded: weights N(0, 0.02), the two residual projections
// (c_proj) N(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm weight 1 and bias 0.
void gpt_init_weights(GPT& model, uint64_t seed);

// ---- the block: written once, run by training and by decoding ------------------------------
//   x -> LN1 -> attention -> + x = residual2 -> LN2 -> MLP -> + residual2 = residual3
// What differs between a training forward and a decode step is only how a Linear layer runs
// (an fp32 matmul on the training weights, or a matvec on packed ones) and how attention
// runs (full causal attention over T positions, or the new positions over the KV cache):
// the block asks a BlockKernels for those two and calls the Backend for the rest.
enum class Linear : uint8_t { qkv, attproj, fc, fcproj };  // the block's four Linear layers
struct LinearLayer {
  Linear which;
  int layer;              // l
  const float* weight;    // (out, in) fp32, layer l's; nullptr where only a packed copy exists
  const float* bias;      // (out), nullptr without biases
  int in = 0, out = 0;    // channels: qkv C -> QKV, attproj C -> C, fc C -> FC, fcproj H -> C
};
class BlockKernels {
 public:
  virtual ~BlockKernels() = default;
  // out (N, w.out) = inp (N, w.in) W^T + b
  virtual void linear(float* out, const float* inp, const LinearLayer& w, int N) = 0;
  // pre = inp W^T + b, out = gelu(pre): the MLP's first layer (pre is kept for the backward)
  virtual void linear_gelu(float* pre, float* out, const float* inp, const LinearLayer& w, int N) = 0;
  // out (N, C) = causal attention of qkv (N, QKV) at layer l; preatt and att are the maps
  // a training forward with full attention keeps, lse the log-sum-exps one with flash
  // attention keeps (nullptr where the layout holds none)
  virtual void attention(float* out, float* preatt, float* att, float* lse, const float* qkv, int layer) = 0;
  // llama: RoPE on the q and k heads of qkv (N, QKV), in place, at the positions these N
  // rows hold (training: 0 .. T-1 in each sequence; decoding: after the cache)
  virtual void rope(float* qkv) = 0;
  // x (N, w.in): the buffer holding Linear w's input, called by block_forward right before
  // linear / linear_gelu reads it; may transform it in place. Training's kernels run the
  // model's linear_input hook here (GPTData above); by default nothing happens.
  virtual void linear_input(float* x, const LinearLayer& w, int N) {
    (void)x;
    (void)w;
    (void)N;
  }
};

// Whether the forward fuses each residual add with the LayerNorm after it
// (Backend::residual_layernorm_forward: residual2 with LN2, residual3 with the next block's
// LN1 or with LN_f) or runs the diagram's ops one by one. `backend`: as
// Backend::fuses_residual_layernorm() says (the naive backend: never; it is the reference).
// Both orders compute the same values (tests/test_gpt.cpp checks forward and gradients).
enum class Fusion : uint8_t { backend, fused, unfused };
struct Dropout {
  float p = 0.0f;      // 0: off (eval mode, decoding)
  uint64_t seed = 0;   // this forward's; each site draws its own stream from it
};
// Where the LayerNorm after a block writes (the next block's LN1, or LN_f) and its weights,
// for a block that computes it fused with its last residual add.
struct NextNorm {
  float* out;
  float* mean;
  float* rstd;
  const float* weight;
  const float* bias;
};
// Block l on N rows: x (N, C) -> a.residual3 (N, C). p and a are layer l's
// (layer_params, layer_activations). fuse: residual + LayerNorm as one op; ln1_ready: a.ln1
// was computed by the previous block's fused residual (then LN1 is skipped); next: where
// the fused last residual puts the LayerNorm that follows (nullptr: not fused).
// arch = llama: RMSNorm for each norm (no mean, no bias), RoPE on q and k after the qkv
// projection (k.rope), SwiGLU between the MLP's projections; the fused residual + norm is
// not used (fuse must be false: there is no fused residual + RMSNorm op yet).
void block_forward(Backend& be, BlockKernels& k, const GPTConfig& c, int l, const ParameterTensors& p,
                   const ActivationTensors& a, const float* x, int N, const Dropout& drop, bool fuse, bool ln1_ready,
                   const NextNorm* next);
// The L blocks and the final LayerNorm: x (N, C) (the embeddings) -> A.lnf (N, C), layer l
// in layer_activations(A, c, layout, l).
void transformer_forward(Backend& be, BlockKernels& k, const GPTConfig& c, const ParameterTensors& P,
                         const ActivationTensors& A, const ActivationLayout& layout, const float* x, int N,
                         const Dropout& drop, bool fuse);
// Backend::fuses_residual_layernorm() unless `f` says otherwise; never for llama (above).
bool fuses(const Backend& be, Fusion f, const GPTConfig& c);
// The final norm of the residual stream x (N, C) into A.lnf (LayerNorm or RMSNorm by arch).
void final_norm(Backend& be, const GPTConfig& c, const ParameterTensors& P, const ActivationTensors& A, const float* x,
                int N);
// llama: RoPE on the q and k heads of qkv (B*T rows of QKV floats), in place, positions pos0
// .. pos0+T-1 from the model's tables; inverse: the backward (the gradient rotated back).
void apply_rope(Backend& be, const GPT& m, float* qkv, int B, int T, int pos0, bool inverse);
// The output head's (V, C) matrix: wte when tied, else lm_head.
inline const float* head_weight(const ParameterTensors& P) { return P.lm_head != nullptr ? P.lm_head : P.wte; }

// Activation recomputation on or off (takes effect at the next forward). On: the forward
// stores each block's output and one layer's activations, not L layers' (memory_breakdown with
// recompute says how much less), and the backward recomputes each block's activations from its
// stored input before differentiating it: one more block forward per layer (about a third more
// arithmetic) for activation memory that no longer grows with L except by L B T C floats. The
// forward then runs the diagram's ops one by one (no fused residual + LayerNorm), so that the
// recomputed activations are the same bits as the first forward's: the gradients equal those of
// a stored unfused run exactly (tests/test_gpt_recompute.cpp). activation_views is refused.
void gpt_set_recompute(GPT& model, bool on);

// Forward at (B, T) with T <= block_size. inputs (B,T) token ids; targets (B,T) or nullptr.
// train = true applies dropout with masks drawn from dropout_seed (ignored when p = 0).
// With targets: sets model.mean_loss (mean cross-entropy over the B*T positions).
void gpt_forward(GPT& model, Backend& be, const int32_t* inputs, const int32_t* targets, int B, int T,
                 bool train = false, uint64_t dropout_seed = 0, Fusion fusion = Fusion::backend);
void gpt_zero_grad(GPT& model);
// Backward of the last forward (which must have had targets): ACCUMULATES parameter
// gradients of dloss * mean_loss (dloss = 1 / grad_accum_steps for accumulation).
void gpt_backward(GPT& model, Backend& be, float dloss = 1.0f);
// Global gradient norm (before clipping); if max_norm > 0 and the norm exceeds it, scales
// the gradients by max_norm / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_).
// nn::Error when the norm is not finite.
float gpt_clip_grad_norm(GPT& model, Backend& be, float max_norm);
// The same over any n gradients (gpt/lora.h: the adapters'); `what` names the norm in the error.
float clip_grad_norm(Backend& be, float* grads, int64_t n, float max_norm, const char* what);
// One AdamW step at learning rate lr over every parameter tensor (decay per kParams).
void gpt_adamw_step(GPT& model, Backend& be, const AdamWConfig& cfg, float lr);

// ---- one training step: the trainer, the bench and the tests all run this -------------------
struct MicroBatch {
  const int32_t* inputs;   // (B, T)
  const int32_t* targets;  // (B, T)
  uint64_t dropout_seed = 0;
};
struct StepOptions {
  float lr = 1e-3f;
  float grad_clip = 1.0f;  // 0: measure the norm, do not clip
  AdamWConfig adamw;
  bool train = true;       // dropout on (train mode)
  // called after each micro-batch's backward with its index (the trainer's dump, the pruned
  // fine-tune's mask); may be empty
  std::function<void(int)> after_backward;
  // Data parallelism (lesson 14): with a Comm of N > 1 ranks each rank runs its own K
  // micro-batches with dloss = 1 / (K N), and the gradients are summed across the ranks by
  // `allreduce` (kernels/comm.h: v1 ring, v2 the engine's) before the clip and the AdamW step:
  // the gradient of the mean loss over all N K micro-batches, the same on every rank, so every
  // rank takes the same step. nullptr (or one rank): this process alone.
  kernels::comm::Comm* comm = nullptr;
  kernels::comm::AllreduceFn allreduce = kernels::comm::allreduce_library;
  // ZeRO stage 1 (the model gpt_shard_optimizer'ed over `comm`): instead of the all-reduce, the
  // ring's two halves with the update between them: reduce-scatter the gradients (each rank
  // ends with the sum of its own shard only), clip by the global norm (the shards' squares
  // summed across ranks), AdamW on the own shard with the shard-sized moments, all-gather the
  // weights. The same traffic as an all-reduce, 1 / N of the optimizer memory per rank.
};
struct StepResult {
  double loss = 0.0;       // mean over the micro-batches (of every rank) of their mean loss
  float grad_norm = 0.0f;  // before clipping
  // with N > 1 ranks: milliseconds waiting at a barrier for the slowest rank to finish its
  // backward (load imbalance: one barrier's latency when none), then in the collectives (the
  // all-reduce, or ZeRO-1's reduce-scatter, scalars and all-gather): the transfer itself
  double wait_ms = 0.0, comm_ms = 0.0;
};
// For each micro-batch: forward (train mode), backward with dloss = 1/(K N) (K micro-batches,
// N = o.comm's ranks or 1: the gradients ACCUMULATE this rank's share of the gradient of the
// mean loss); returns this rank's mean loss. What train_step and gpt/lora.h's lora_train_step
// share. nn::Error when a loss is not finite.
double accumulate_gradients(GPT& model, Backend& be, const std::vector<MicroBatch>& micro, int B, int T,
                            const StepOptions& o);
// Sums n gradients (or any floats) over o.comm's ranks with o.allreduce, through a host copy
// when they live in device memory; returns `local` averaged over the ranks (the step's loss).
// Does nothing with one rank.
double allreduce_gradients(const StepOptions& o, Memory& memory, float* grads, int64_t n, double local);
// zero_grad; accumulate_gradients; (N ranks: allreduce_gradients); clip to grad_clip; one
// AdamW step at lr.
// nn::Error when a loss is not finite (before its backward) or the norm is not (from
// gpt_clip_grad_norm), with no AdamW step taken.
StepResult train_step(GPT& model, Backend& be, const std::vector<MicroBatch>& micro, int B, int T,
                      const StepOptions& o);

// ZeRO stage 1: keeps only this rank's shard of the AdamW moments, the parameters
// kernels::comm::owned_chunk(num_params, N, rank) (the chunk the ring's reduce-scatter leaves
// summed on this rank), copied from the full moments the model holds (zeros when new, a
// resumed checkpoint's otherwise). With one rank: nothing to shard (sharded stays false).
// train_step then runs the sharded step (StepOptions above); gpt_adamw_step is refused.
void gpt_shard_optimizer(GPT& model, kernels::comm::Comm& comm);
// The full moments of a sharded model, gathered from every rank (host vectors of num_params;
// a collective: every rank must call it): what a checkpoint saves, whatever the rank count.
struct FullMoments {
  std::vector<float> m, v;
};
FullMoments gpt_gather_moments(const GPT& model, kernels::comm::Comm& comm);

// FLOPs of one training step per token, forward + backward, PaLM's appendix B estimate:
//   6 N + 12 L H Q T   (N non-embedding parameters, H heads, Q head size, T context)
double flops_per_token(const GPTConfig& c, int T);

// Bytes a training run holds at (B, T): parameters, gradients, AdamW m and v, activations,
// backward scratch (what lesson 08 counts).
struct MemoryBreakdown {
  int64_t params = 0, grads = 0, adam = 0, activations = 0, scratch = 0;
  int64_t total() const { return params + grads + adam + activations + scratch; }
};
// preatt: whether the activations include the (L,B,NH,T,T) scores before the softmax
// (Backend::keeps_preatt: the naive backend yes, cpu and cuda no).
// recompute: activation recomputation (gpt_set_recompute): one layer's activations plus the L
// block outputs.
MemoryBreakdown memory_breakdown(const GPTConfig& c, int B, int T, bool preatt = true, bool recompute = false);

// Named views of the last forward's activations (name, shape, pointer into the model's
// memory: copy out with Memory::to_host unless it is host memory): the kActivations rows
// marked `view`, in forward order: "encoded", "h.0.ln1", ..., "h.0.residual3", ..., "lnf",
// "logits", and with targets "probs", "losses". What the dump writes (write_dump).
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};
std::vector<NamedTensor> activation_views(const GPT& model);

}  // namespace gpt
