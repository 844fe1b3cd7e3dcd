// gpt/lora.h: LoRA, low-rank adapters on a frozen GPT (lesson 12; Hu et al. 2021).
//
// A Linear layer y = x W^T + b (W (out, in)) gets an adapter of rank r: two small matrices
// A (r, in) and B (out, r), and the layer computes
//
//   y = x W^T + b + (alpha / r) (x A^T) B^T
//
// W and b stay frozen; only A and B are trained. A starts random (Kaiming-uniform, as PEFT's
// default: U(-1/sqrt(in), 1/sqrt(in))), B starts at zero, so the adapted model starts EQUAL
// to the base model (the adapter adds exact zeros) and the first step moves B only.
// Trainable parameters per site: r (in + out) instead of in * out.
//
// Sites: any of the block's four Linear layers (gpt::Linear: qkv, attproj, fc, fcproj) in
// every layer. Our qkv is one (QKV, C) matrix and llama's fc is [gate | up] (2H, C), so one
// adapter covers the fused matrix (its q, k and v rows share A, as PEFT's adapter on GPT-2's
// fused c_attn does; llama's gate and up share A, where PEFT would put one on each).
//
// How it runs: attach the adapters to the model (lora_attach: GPT::lora). While attached,
//   - the forward (gpt/model.cpp's TrainingKernels) adds each site's adapter to the Linear's
//     output: h = (alpha/r) x A^T (N, r), kept for the backward, then y += h B^T;
//   - the backward computes, at each site, dB += dy^T h, dh = (alpha/r) dy B, dA += dh^T x,
//     dx += dh A; and it SKIPS the base's weight gradients: the Linear, head and embedding
//     weight products are not computed at all (Backend::matmul_backward with dweight nullptr,
//     no encoder backward). The norms' weight gradients (O(N C), fused with the norm's dx)
//     still land in GPT::grads, unused;
//   - lora_train_step is train_step for the adapters: clip and AdamW over A and B only.
// Every product is a Backend::matmul_forward / matmul_backward (kernels::sgemm on the cpu
// backend, the plain loops on naive, the GPU's on cuda), so it runs wherever the model does.
//
// Files: save_lora writes the adapters alone (safetensors, with rank, alpha, targets and the
// base's shape in the metadata: kilobytes to a few MB); load_lora refuses a base of another
// shape, a wrong rank, a NaN. lora_merge folds them into the weights, W += (alpha/r) B A, and
// the merged model is an ordinary GPT (save_checkpoint, pack_model work unchanged).
//
// Not done: QLoRA (the frozen base held packed int8/int4 and dequantized a layer at a time).
// The base here is fp32; gpt/infer.h's dequantized_copy gives an fp32 model with int8/int4
// values to adapt, which has QLoRA's arithmetic but not its memory saving.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "gpt/train.h"

namespace gpt {

struct LoraConfig {
  int rank = 4;         // r >= 1
  float alpha = 8.0f;   // the update is scaled by alpha / r
  // which Linear layers get adapters, indexed by gpt::Linear (qkv, attproj, fc, fcproj)
  bool targets[4] = {true, true, true, true};
  float scale() const { return alpha / static_cast<float>(rank); }
};
// "qkv,attproj,fc,fcproj" (any non-empty subset, any order; "all") <-> the targets.
// nn::Error naming the unknown name.
void parse_lora_targets(const std::string& s, bool targets[4]);
std::string lora_targets_string(const bool targets[4]);
const char* linear_name(Linear which);

// One adapted Linear layer: layer l's `which`, its channels, and where its A (r, in) and
// B (out, r) are in the flat buffers.
struct LoraSite {
  Linear which = Linear::qkv;
  int layer = 0;
  int in = 0, out = 0;
  int64_t a = 0, b = 0;  // offsets of A and B in LoraAdapters::params (and grads, m, v)
};

// Every adapter of a model in one flat buffer (as GPT's parameters): the sites layer by
// layer, each A then B; their gradients and AdamW moments alongside, all in one Memory.
struct LoraAdapters {
  LoraConfig config;
  GPTConfig base;  // the shape of the model they adapt (load_lora checks it)
  std::vector<LoraSite> sites;
  int64_t num_params = 0;
  Array<float> params, grads, m, v;
  int64_t adam_t = 0;
  // For the measurement of what freezing saves (lesson 12) only: true makes the backward
  // compute the base's weight gradients anyway (into GPT::grads, then unused), as a LoRA
  // without the skip would. Never set for training: it is the wasted work the skip avoids.
  bool compute_base_grads = false;
  // the last forward's h = (alpha/r) x A^T per site ((sites, N_alloc, r), the backward's dB
  // reads it) and the backward's scratch (dh (N, r) and the adapter's dx (N, max in))
  int N_alloc = 0;
  Array<float> hidden, scratch;

  // the site of layer l's `which`; nullptr when it has no adapter
  const LoraSite* site(Linear which, int l) const;
  int site_index(Linear which, int l) const;
  // bytes of AdamW state (m and v) and of everything trained (params + grads + m + v)
  int64_t optimizer_bytes() const { return 2 * num_params * static_cast<int64_t>(sizeof(float)); }
};

// Adapters for a model of config `base` in `memory` (zeroed: B = 0 and A = 0; lora_init
// draws A). nn::Error for rank < 1, a non-finite or non-positive alpha, no target.
LoraAdapters lora_create(const GPTConfig& base, const LoraConfig& c, Memory& memory = host_memory());
// A ~ U(-1/sqrt(in), 1/sqrt(in)) (Kaiming-uniform with a = sqrt(5), PEFT's default), B = 0,
// AdamW state zeroed, drawn on the host in site order (the same whatever the memory).
void lora_init(LoraAdapters& ad, uint64_t seed);
// Trainable parameters: r (in + out) per site.
int64_t lora_num_parameters(const GPTConfig& base, const LoraConfig& c);

// Attaches (the forward adds the adapters, the backward trains them and freezes the base) or
// detaches (nullptr). nn::Error when the shapes or the memories differ. The model keeps a
// pointer: the adapters must outlive the attachment.
void lora_attach(GPT& model, LoraAdapters* ad);

// ---- the hooks gpt/model.cpp calls at each Linear layer (while attached) ----------------
// out (N, w.out) += (alpha/r) (x A^T) B^T, keeping h for the backward; no-op for a layer
// without an adapter.
void lora_linear_forward(LoraAdapters& ad, Backend& be, float* out, const float* x, const LinearLayer& w, int N);
// dA, dB accumulate; dx (N, in) += the adapter's (dx already holds the base's dout W).
void lora_linear_backward(LoraAdapters& ad, Backend& be, float* dx, const float* dout, const float* x, Linear which,
                          int layer, int N);

// train_step (gpt/model.h) with the adapters attached to `model`: zero the adapters'
// gradients, forward + backward per micro-batch (base frozen), clip the adapters' gradient
// norm, AdamW on the adapters (o.adamw's weight decay on A and B). nn::Error when none is
// attached or a loss or the norm is not finite (no step taken).
StepResult lora_train_step(GPT& model, Backend& be, const std::vector<MicroBatch>& micro, int B, int T,
                           const StepOptions& o);

// ---- files and merging -------------------------------------------------------------------
// Tensors "h.<l>.<target>.lora_A" (r, in) and ".lora_B" (out, r); metadata "lora.rank",
// "lora.alpha", "lora.targets", and the base's shape ("lora.base.arch", n_layer, n_embd,
// qkv, fc, hidden, vocab_size). Atomic, refuses NaN (nn::save_safetensors).
void save_lora(const std::string& path, const LoraAdapters& ad);
// nn::Error naming the problem: a file that is not an adapter file, a base shape that
// differs from `base` (the key named), a tensor missing or extra, a tensor whose shape
// disagrees with the rank (a wrong rank), a NaN or infinity (the tensor named).
LoraAdapters load_lora(const std::string& path, const GPTConfig& base, Memory& memory = host_memory());
// W += (alpha/r) B A at every site, on a host model (kernels::sgemm). The model must not
// have the adapters attached (it would add them twice).
void lora_merge(GPT& model, const LoraAdapters& ad);

// ---- fine-tuning: `nnlab gpt finetune` and lesson 12's measurement -------------------------
// A character model (a checkpoint of `nnlab gpt train`) adapted to a new text: LoRA (rank >= 1,
// the base frozen) or full fine-tuning (rank 0: every parameter, fresh AdamW state).
// The new text is read with the base's vocabulary: a character the base never saw cannot be
// an input or a target, so it is dropped (FinetuneResult::dropped says how much).
struct FinetuneOptions {
  std::string init;            // the base checkpoint
  std::string data;            // the new domain: a text file, or a directory (every regular file in
                               // it, sorted, as one text: the Debian licence texts); "" = kLicenceDir
  std::string old_data;        // the base's own text, for forgetting: val loss there before and after
                               // ("" = not measured)
  double val_fraction = 0.1;   // the end of each text is its validation split
  int rank = 4;                // 0: full fine-tuning
  float alpha = 8.0f;
  std::string targets = "qkv,attproj,fc,fcproj";
  int iters = 200;
  int batch_size = 12;
  float lr = 1e-3f, min_lr = 1e-4f;  // cosine decay over iters after warmup_iters (learning_rate)
  int warmup_iters = 10;
  float weight_decay = 0.0f;
  float grad_clip = 1.0f;
  int eval_iters = 20;         // validation batches (the same ones before and after)
  uint64_t seed = 1337;
  std::string backend = "cpu";
  int threads = 0;
  std::string out;             // rank >= 1: the adapter file; rank 0: a checkpoint; "" = none
  bool quiet = false;
};
struct FinetuneResult {
  int64_t trainable_params = 0;
  int64_t optimizer_bytes = 0;   // AdamW's m and v of what is trained
  int64_t gradient_bytes = 0;    // the gradients of what is trained
  int steps = 0;
  double ms_per_step = 0.0;      // median over the steps
  double seconds = 0.0;          // the training steps, evaluation excluded
  float val_before = 0.0f, val_after = 0.0f;  // the new domain's validation loss (nats/char)
  float old_before = 0.0f, old_after = 0.0f;  // the old domain's (NaN when old_data is "")
  double dropped = 0.0;          // fraction of the new text's characters outside the base's vocabulary
  std::vector<float> losses;     // the training loss of every step
};
FinetuneResult finetune(const FinetuneOptions& o, std::ostream& os);

}  // namespace gpt
