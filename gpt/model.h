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
// the naive loops, the CPU kernels and (issue 7) CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpt/backend.h"

namespace gpt {

struct GPTConfig {
  int vocab_size = 65;   // V
  int block_size = 64;   // maxT: the longest context (rows of wpe)
  int n_layer = 4;       // L
  int n_head = 4;        // NH
  int n_embd = 128;      // C; head size hs = C / NH
  float dropout = 0.0f;  // p, used in train mode only
  bool bias = true;      // biases in the Linear and LayerNorm layers (GPT-2: yes; nanoGPT's
                         // Shakespeare config: no). Without, the 7 bias tensors are absent
                         // (null pointers, no slices, no checkpoint entries).
};
// nn::Error when a size is < 1, n_embd % n_head != 0 or dropout outside [0, 1).
void validate(const GPTConfig& c);

// The parameters, as pointers into one flat buffer, in this order. Shapes in comments;
// per-layer tensors are stacked over L.
struct ParameterTensors {
  float* wte;       // (V, C)        token embedding; also the output head (tied)
  float* wpe;       // (maxT, C)     position embedding
  float* ln1w;      // (L, C)
  float* ln1b;      // (L, C)
  float* qkvw;      // (L, 3C, C)    q, k, v projections stacked: rows [0,C) q, [C,2C) k, [2C,3C) v
  float* qkvb;      // (L, 3C)
  float* attprojw;  // (L, C, C)
  float* attprojb;  // (L, C)
  float* ln2w;      // (L, C)
  float* ln2b;      // (L, C)
  float* fcw;       // (L, 4C, C)
  float* fcb;       // (L, 4C)
  float* fcprojw;   // (L, C, 4C)
  float* fcprojb;   // (L, C)
  float* lnfw;      // (C)
  float* lnfb;      // (C)
};
inline constexpr int kNumParamTensors = 16;

// One named tensor of the checkpoint: a slice of the flat parameter buffer. Names follow
// nanoGPT's state dict (transformer.h.0.attn.c_attn.weight -> "h.0.attn.c_attn.weight"),
// so scripts/gpt_torch.py loads them by name.
struct ParamSlice {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the flat buffer
  int64_t numel = 0;
  bool decay = false;  // AdamW weight decay: matrices and embeddings yes, biases and norms no
};
// In buffer order: wte, wpe, then for l = 0..L-1: h.l.ln_1.{weight,bias},
// h.l.attn.c_attn.{weight,bias}, h.l.attn.c_proj.{weight,bias}, h.l.ln_2.{weight,bias},
// h.l.mlp.c_fc.{weight,bias}, h.l.mlp.c_proj.{weight,bias}; then ln_f.{weight,bias}.
// (Buffer order is by tensor kind, so a layer's slices are not contiguous: every slice
// carries its own offset.)
std::vector<ParamSlice> param_slices(const GPTConfig& c);
int64_t num_parameters(const GPTConfig& c);
// nanoGPT's count for MFU and the lesson: all parameters except the position embedding.
int64_t num_parameters_non_embedding(const GPTConfig& c);

// The activations of one forward pass at (B, T): what the backward needs, per layer
// stacked over L. N = B * T.
struct ActivationTensors {
  float* encoded;    // (N, C)       wte[tok] + wpe[t] (after dropout in train mode)
  float* ln1;        // (L, N, C)
  float* ln1_mean;   // (L, N)
  float* ln1_rstd;   // (L, N)
  float* qkv;        // (L, N, 3C)
  float* atty;       // (L, N, C)    attention output, heads concatenated
  float* preatt;     // (L, B, NH, T, T)  scores before the softmax; nullptr (not allocated)
                     //                   on a backend that does not keep them (cuda)
  float* att;        // (L, B, NH, T, T)
  float* attproj;    // (L, N, C)    after dropout in train mode
  float* residual2;  // (L, N, C)    x + attproj
  float* ln2;        // (L, N, C)
  float* ln2_mean;   // (L, N)
  float* ln2_rstd;   // (L, N)
  float* fch;        // (L, N, 4C)
  float* fch_gelu;   // (L, N, 4C)
  float* fcproj;     // (L, N, C)    after dropout in train mode
  float* residual3;  // (L, N, C)    residual2 + fcproj: the next layer's input
  float* lnf;        // (N, C)
  float* lnf_mean;   // (N)
  float* lnf_rstd;   // (N)
  float* logits;     // (N, V)
  float* probs;      // (N, V)
  float* losses;     // (N)
  // dropout masks (0 or 1/(1-p)); allocated only when dropout > 0
  float* encoded_mask;  // (N, C)
  float* attproj_mask;  // (L, N, C)
  float* fcproj_mask;   // (L, N, C)
};

// Gradients of activations for the backward: ONE layer's worth, reused layer after layer
// (the parameter gradients are what is kept). N = B * T.
struct BackwardScratch {
  float* dresidual;  // (N, C)   dL/d(residual stream), accumulated down through the layers
  float* dbranch;    // (N, C)   a branch's output gradient after dropout
  float* dln;        // (N, C)
  float* datty;      // (N, C)
  float* dqkv;       // (N, 3C)
  float* dpreatt;    // (B, NH, T, T)
  float* datt;       // (B, NH, T, T)
  float* dfch_gelu;  // (N, 4C)
  float* dfch;       // (N, 4C)
  float* dlogits;    // (N, V)
};

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.99f;  // nanoGPT's for small models (PyTorch's default is 0.999)
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // on ParamSlice::decay tensors only
};

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

  // activations, sized for (B_alloc, T_alloc); a forward at B <= B_alloc, T <= T_alloc
  // reuses them (sampling runs B = 1 at growing T)
  int B_alloc = 0, T_alloc = 0;
  bool masks_alloc = false;
  bool preatt_alloc = true;  // false on a backend that keeps no preatt (Backend::keeps_preatt)
  Array<float> acts_memory;
  ActivationTensors acts{};
  Array<float> scratch_memory;
  BackwardScratch scratch{};

  // the last forward
  int B = 0, T = 0;
  bool train_mode = false;
  Array<int32_t> tokens_memory;  // the (B, T) ids in the model's memory: inputs, then targets
  bool have_targets = false;
  float mean_loss = -1.0f;  // -1 when the last forward had no targets
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
GPT gpt_create(const GPTConfig& config, Memory& memory = host_memory());
// The model's memory (where its parameters live).
inline Memory& gpt_memory(const GPT& model) { return model.params_memory.memory(); }
// A copy of the model's parameters, gradients, AdamW state and step in `memory` (no
// activations): how a model made or loaded on the host goes to the GPU and comes back.
GPT gpt_move_to(const GPT& model, Memory& memory);
// GPT-2's initialisation, seeded: weights N(0, 0.02), the two residual projections
// (c_proj) N(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm weight 1 and bias 0.
void gpt_init_weights(GPT& model, uint64_t seed);

// Forward at (B, T) with T <= block_size. inputs (B,T) token ids; targets (B,T) or nullptr.
// train = true applies dropout with masks drawn from dropout_seed (ignored when p = 0).
// With targets: sets model.mean_loss (mean cross-entropy over the B*T positions).
void gpt_forward(GPT& model, Backend& be, const int32_t* inputs, const int32_t* targets, int B, int T,
                 bool train = false, uint64_t dropout_seed = 0);
void gpt_zero_grad(GPT& model);
// Backward of the last forward (which must have had targets): ACCUMULATES parameter
// gradients of dloss * mean_loss (dloss = 1 / grad_accum_steps for accumulation).
void gpt_backward(GPT& model, Backend& be, float dloss = 1.0f);
// Global gradient norm (before clipping); if max_norm > 0 and the norm exceeds it, scales
// the gradients by max_norm / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_).
// nn::Error when the norm is not finite.
float gpt_clip_grad_norm(GPT& model, Backend& be, float max_norm);
// One AdamW step at learning rate lr over every slice (decay per ParamSlice::decay).
void gpt_adamw_step(GPT& model, Backend& be, const AdamWConfig& cfg, float lr);

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
// (Backend::keeps_preatt: the naive and cpu backends yes, cuda no).
MemoryBreakdown memory_breakdown(const GPTConfig& c, int B, int T, bool preatt = true);

// Named views of the last forward's activations (name, shape, pointer into the model's
// memory: copy out with Memory::to_host unless it is host memory), in forward order:
// "encoded", "h.0.ln1", ..., "h.0.residual3", ..., "lnf", "logits", "probs", "losses".
// What the dump option writes (gpt/dump.h).
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};
std::vector<NamedTensor> activation_views(const GPT& model);

}  // namespace gpt
