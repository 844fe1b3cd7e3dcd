// gpt/backend.h: the ops a GPT training step calls, behind one interface, so the model
// code (gpt/model.cpp) is written once and runs on every backend:
//   naive  the v1 rung of each op's kernels/ ladder: the plain loops (gpt/backend.cpp), the reference
//   cpu    the top CPU rungs of the same ladders: SIMD, kernels::sgemm, OpenMP, fused where it
//          pays (gpt/backend_cpu.cpp, a table of named rungs)
//   cuda   the chosen rungs of the lesson-09 CUDA ladders (gpt/backend_cuda.h), on a GPU or the
//          CUDA emulator
//
// Conventions, the same for every backend:
//   - pointers (floats, and the int32 token ids) are into buffers the model owns, in the
//     backend's memory(): host memory for naive and cpu, device memory for cuda
//     (gpt/memory.h); token ids are already checked to be < V;
//   - N = B * T rows, C channels, OC output channels, V vocabulary, NH heads;
//   - gradient rule of nn/: parameter gradients ACCUMULATE, activation gradients are
//     ASSIGNED, except layernorm_backward's dinp, which ACCUMULATES (the residual stream);
//   - results must be deterministic: the same inputs give bit-identical outputs run after
//     run (fixed reduction order whatever the thread count), so resumed training repeats
//     an uninterrupted run exactly;
//   - each op's meaning is its nn/ reference's (linked in each comment); a backend agrees
//     with naive to float rounding (tests/test_gpt_cpu_backend.cpp op by op, tests/test_gpt.cpp for the whole model).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpt/memory.h"
#include "kernels/weight_format.h"

namespace gpt {

struct GPTConfig;  // gpt/model.h

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // What its matmuls compute in: "fp32" (host backends), or the cuda backend's --precision.
  virtual std::string precision() const { return "fp32"; }
  // Where this backend's tensors must live (host memory unless overridden).
  virtual Memory& memory() { return host_memory(); }
  // Waits for every op launched so far (a GPU runs them asynchronously; host backends are
  // done when the call returns). What timing around ops needs.
  virtual void synchronize() {}
  // The FLOP/s ceiling MFU is measured against, measured now on what this backend runs on
  // (host backends: the lesson-03 FMA loop on `threads` threads); *what says what it is.
  // 0 when not measured.
  virtual double measure_peak_flops(int threads, std::string* what);
  // Does attention_forward write its `preatt` argument (the scores before the softmax)? A
  // backend that does not (cuda: its attention keeps only the probabilities) gets nullptr
  // there, and the model allocates no preatt buffer (L B NH T^2 floats).
  virtual bool keeps_preatt() const { return true; }
  // Should the model fuse each residual add with the LayerNorm after it
  // (residual_layernorm_forward) instead of residual_forward then layernorm_forward? A fast
  // backend whose fused op saves a pass over the residual stream says yes; the reference
  // (naive) keeps the default no, so its forward runs the diagram's ops in the diagram's
  // order, LN1 at the start of its own block. The two orders give the same values (the
  // add is exact; tests/test_gpt.cpp checks forward and gradients).
  virtual bool fuses_residual_layernorm() const { return false; }
  // nn::Error when a training run at (B, T) of config `c` cannot fit (the cuda backend
  // checks the GPU's free memory and lists what needs how much); host backends: no check.
  virtual void check_capacity(const GPTConfig& c, int B, int T) {
    (void)c, (void)B, (void)T;
  }

  // out (B,T,C) = wte[inp] + wpe[t]   (nn::encoder_forward; V for the id check)
  virtual void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                               int T, int C, int V) = 0;
  // dwte (V,C), dwpe (T,C) accumulated   (nn::encoder_backward)
  virtual void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                                int T, int C, int V) = 0;

  // (nn::layernorm_forward / nn::layernorm_backward; dinp ACCUMULATES)
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int N, int C) = 0;
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;

  // out (N,OC) = inp (N,C) weight^T (OC,C) + bias (OC, may be nullptr)
  // (nn::linear_forward_loops / nn::linear_backward_loops; dinp assigned, skipped if nullptr)
  virtual void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                              int C, int OC) = 0;
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, int N, int C, int OC) = 0;

  // causal multi-head attention (nn::attention_forward / nn::attention_backward)
  virtual void attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T,
                                 int C, int NH) = 0;
  virtual void attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout,
                                  const float* qkv, const float* att, int B, int T, int C, int NH) = 0;

  // (nn::gelu_forward / nn::gelu_backward, tanh approximation)
  virtual void gelu_forward(float* out, const float* inp, int64_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) = 0;

  // out = a + b   (nn::residual_forward)
  virtual void residual_forward(float* out, const float* a, const float* b, int64_t n) = 0;

  // (nn::dropout_forward / nn::dropout_backward: the mask is a function of (seed, i))
  virtual void dropout_forward(float* out, float* mask, const float* inp, int64_t n, float p,
                               uint64_t seed) = 0;
  virtual void dropout_backward(float* dinp, const float* dout, const float* mask, int64_t n) = 0;

  // logits (N,V), targets (N) -> probs (N,V), losses (N); returns the mean loss
  // (nn::softmax_cross_entropy_forward). Backward: dlogits = (probs - onehot) * dloss / N,
  // assigned (nn::softmax_cross_entropy_backward).
  virtual float crossentropy_forward(float* probs, float* losses, const float* logits,
                                     const int32_t* targets, int N, int V) = 0;
  virtual void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, int N,
                                     int V, float dloss) = 0;

  // ---- fused ops: a backend may override them with one pass; the defaults call the pair --
  // residual_out = a + b, then ln_out = layernorm(residual_out)
  virtual void residual_layernorm_forward(float* residual_out, float* ln_out, float* mean, float* rstd,
                                          const float* a, const float* b, const float* weight,
                                          const float* bias, int N, int C);
  // pre = inp weight^T + bias, out = gelu(pre)   (pre is kept for the backward)
  virtual void matmul_gelu_forward(float* pre, float* out, const float* inp, const float* weight,
                                   const float* bias, int N, int C, int OC);

  // ---- inference (gpt/infer.h, lesson 10) ---------------------------------------------------
  // out (N, w.rows) = inp (N, w.cols) W^T + bias (may be nullptr), W packed in any
  // kernels::WeightFormat with its pointers in this backend's memory (kernels::matvec).
  // The defaults throw nn::Error: a backend without inference ops says so.
  virtual void matvec_forward(float* out, const float* inp, const kernels::WeightsView& w, const float* bias,
                              int N);
  // Appends the k, v of qkv (B, n, 3C) to the caches (B, maxT, C) at [pos, pos+n), then
  // out (B, n, C) = the n new queries' causal attention over positions 0 .. pos+i
  // (kernels::attention_decode).
  virtual void attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n,
                                int pos, int C, int NH, int maxT);

  // ---- optimizer helpers over flat buffers ------------------------------------------------
  // sum of squares of g (n), accumulated in double in a fixed order
  virtual double sum_squares(const float* g, int64_t n) = 0;
  // x *= s
  virtual void scale(float* x, float s, int64_t n) = 0;
  // AdamW, PyTorch's torch.optim.AdamW formula (t is the 1-based step):
  //   p -= lr * wd * p                              (decoupled weight decay; wd = 0 for no decay)
  //   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
  //   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
  virtual void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                            float beta2, float eps, float weight_decay, int64_t t) = 0;
};

// "naive", "cpu" or "cuda" (nn::Error naming the choices otherwise). `precision` is the
// cuda backend's (gpt/backend_cuda.h: "auto", "fp32", "tf32", "bf16"); the host backends
// compute in fp32 only and refuse anything but "auto" or "fp32".
std::unique_ptr<Backend> make_backend(const std::string& name, const std::string& precision = "auto");
std::unique_ptr<Backend> make_naive_backend();
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace gpt
