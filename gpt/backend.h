// gpt/backend.h: the ops a GPT training step calls, as one table (struct Backend: a callable
// per op), so the model code (gpt/model.cpp) is written once and runs on every backend:
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
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpt/memory.h"
#include "kernels/weight_format.h"

namespace gpt {

struct GPTConfig;  // gpt/model.h

// The host backends' FLOP/s ceiling: the lesson-03 FMA loop on `threads` threads, measured
// now (Backend::measure_peak_flops's default).
double host_peak_flops(int threads, std::string* what);

// A backend is a table, not a class hierarchy: one callable per op, filled by a function
// (naive_backend(), cpu_backend(), cuda_backend()) with the rungs that backend chose, each
// callable capturing whatever state it needs (the cuda backend's device and workspaces).
// Call sites read like method calls, `be.layernorm_forward(out, ...)`; stepping into one
// passes std::function's invoker (gdb: `skip -gfi /usr/include/c++/*/bits/*` steps straight
// through it), then lands in the filling function's lambda for that op or in the kernel
// itself where the table holds the kernel (naive's `kernels::layernorm_forward_v1<float>`). Every op is listed
// once more in for_each_op below, which is how profiling, the defaults and the "every op is
// set" test see them all without naming each.
struct Backend {
  // ---- what the backend is (not ops: profiling copies these from the table it wraps) -------
  std::function<std::string()> name;
  // What its matmuls compute in: "fp32" (host backends), or the cuda backend's --precision.
  std::function<std::string()> precision = [] { return std::string("fp32"); };
  // Where this backend's tensors must live (host memory unless set otherwise).
  std::function<Memory&()> memory = []() -> Memory& { return host_memory(); };
  // Waits for every op launched so far (a GPU runs them asynchronously; host backends are
  // done when the call returns). What timing around ops needs.
  std::function<void()> synchronize = [] {};
  // The FLOP/s ceiling MFU is measured against, measured now on what this backend runs on
  // (host backends: the lesson-03 FMA loop on `threads` threads); *what says what it is.
  // 0 when not measured.
  std::function<double(int threads, std::string* what)> measure_peak_flops = host_peak_flops;
  // Does attention_forward write its `preatt` argument (the scores before the softmax)? A
  // backend that does not (cpu and cuda: their backwards read only the probabilities) gets
  // nullptr there, and the model allocates no preatt buffer (L B NH T^2 floats).
  std::function<bool()> keeps_preatt = [] { return true; };
  // Should the model fuse each residual add with the LayerNorm after it
  // (residual_layernorm_forward) instead of residual_forward then layernorm_forward? A fast
  // backend whose fused op saves a pass over the residual stream says yes; the reference
  // (naive) keeps the default no, so its forward runs the diagram's ops in the diagram's
  // order, LN1 at the start of its own block. The two orders give the same values (the
  // add is exact; tests/test_gpt.cpp checks forward and gradients).
  std::function<bool()> fuses_residual_layernorm = [] { return false; };
  // nn::Error when a training run at (B, T) of config `c` cannot fit (the cuda backend
  // checks the GPU's free memory and lists what needs how much); host backends: no check.
  std::function<void(const GPTConfig& c, int B, int T)> check_capacity = [](const GPTConfig&, int, int) {};
  // The rungs this backend runs, as (what the trainer uses it for, "op vN name") rows: the
  // cuda backend's plan (kernel_plan, gpt/backend_cuda.h). Host backends list theirs in
  // their file's header comment and leave this empty.
  std::vector<std::pair<std::string, std::string>> rungs;

  // ---- training ops ----------------------------------------------------------------------
  // out (B,T,C) = wte[inp] + wpe[t]   (nn::encoder_forward; V for the id check)
  std::function<void(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C, int V)>
      encoder_forward;
  // dwte (V,C), dwpe (T,C) accumulated   (nn::encoder_backward)
  std::function<void(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C, int V)>
      encoder_backward;

  // (nn::layernorm_forward / nn::layernorm_backward; dinp ACCUMULATES)
  std::function<void(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                     int N, int C)>
      layernorm_forward;
  std::function<void(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, const float* mean, const float* rstd, int N, int C)>
      layernorm_backward;

  // out (N,OC) = inp (N,C) weight^T (OC,C) + bias (OC, may be nullptr)
  // (nn::linear_forward_loops / nn::linear_backward_loops; dinp assigned, skipped if nullptr;
  // dweight accumulated, skipped if nullptr: a frozen weight, gpt/lora.h)
  std::function<void(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC)>
      matmul_forward;
  std::function<void(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC)>
      matmul_backward;

  // causal multi-head attention (nn::attention_forward / nn::attention_backward)
  std::function<void(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH)>
      attention_forward;
  std::function<void(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv, const float* att,
                     int B, int T, int C, int NH)>
      attention_backward;

  // (nn::gelu_forward / nn::gelu_backward, tanh approximation)
  std::function<void(float* out, const float* inp, int64_t n)> gelu_forward;
  std::function<void(float* dinp, const float* dout, const float* inp, int64_t n)> gelu_backward;

  // out = a + b   (nn::residual_forward)
  std::function<void(float* out, const float* a, const float* b, int64_t n)> residual_forward;

  // (nn::dropout_forward / nn::dropout_backward: the mask is a function of (seed, i))
  std::function<void(float* out, float* mask, const float* inp, int64_t n, float p, uint64_t seed)> dropout_forward;
  std::function<void(float* dinp, const float* dout, const float* mask, int64_t n)> dropout_backward;

  // logits (N,V), targets (N) -> probs (N,V), losses (N); returns the mean loss
  // (nn::softmax_cross_entropy_forward). Backward: dlogits = (probs - onehot) * dloss / N,
  // assigned (nn::softmax_cross_entropy_backward).
  std::function<float(float* probs, float* losses, const float* logits, const int32_t* targets, int N, int V)>
      crossentropy_forward;
  std::function<void(float* dlogits, const float* probs, const int32_t* targets, int N, int V, float dloss)>
      crossentropy_backward;

  // ---- llama's ops (lesson 11; arch = llama in gpt/model.h) -------------------------------
  // RMSNorm (kernels/rmsnorm.h): out (N,C), rstd (N); backward: dinp ACCUMULATES (the
  // residual stream, layernorm_backward's rule), dweight accumulates
  std::function<void(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps)>
      rmsnorm_forward;
  std::function<void(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                     const float* rstd, int N, int C)>
      rmsnorm_backward;
  // RoPE (kernels/rope.h): B*T rows of `stride` floats, NH heads of hs from the pointer,
  // positions pos0 .. pos0+T-1; cos, sin (>= pos0+T, hs/2) in this backend's memory; out may
  // be inp. Backward: the inverse rotation, ASSIGNED.
  std::function<void(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                     int stride, int pos0)>
      rope_forward;
  std::function<void(float* dinp, const float* dout, const float* cos, const float* sin, int B, int T, int NH, int hs,
                     int stride, int pos0)>
      rope_backward;
  // SwiGLU (kernels/swiglu.h): out (rows,H) = silu(gate) * up, gate and up rows `ld` apart;
  // backward: dgate, dup ASSIGNED
  std::function<void(float* out, const float* gate, const float* up, int rows, int H, int ld)> swiglu_forward;
  std::function<void(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int rows, int H,
                     int ld)>
      swiglu_backward;
  // Causal grouped-query flash attention (kernels/flash_attention.h): qkv (B,T,C+2 NKV hs)
  // -> out (B,T,C), lse (B,NH,T); backward: dqkv ASSIGNED
  std::function<void(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int NKV)>
      flash_attention_forward;
  std::function<void(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int B,
                     int T, int C, int NH, int NKV)>
      flash_attention_backward;

  // ---- fused ops: a backend may fill them with one pass; left empty, fill_defaults makes
  // each the pair of ops it fuses ---------------------------------------------------------
  // residual_out = a + b, then ln_out = layernorm(residual_out)
  std::function<void(float* residual_out, float* ln_out, float* mean, float* rstd, const float* a, const float* b,
                     const float* weight, const float* bias, int N, int C)>
      residual_layernorm_forward;
  // pre = inp weight^T + bias, out = gelu(pre)   (pre is kept for the backward)
  std::function<void(float* pre, float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                     int OC)>
      matmul_gelu_forward;

  // ---- inference (gpt/infer.h, lesson 10) ---------------------------------------------------
  // out (N, w.rows) = inp (N, w.cols) W^T + bias (may be nullptr), W packed in any
  // kernels::WeightFormat with its pointers in this backend's memory (kernels::matvec).
  // Left empty, fill_defaults makes them throw nn::Error: a backend without inference ops
  // says so.
  std::function<void(float* out, const float* inp, const kernels::WeightsView& w, const float* bias, int N)>
      matvec_forward;
  // Appends the k, v of qkv (B, n, C + 2 KV) to the caches (B, maxT, KV) at [pos, pos+n),
  // KV = NKV * C / NH, then out (B, n, C) = the n new queries' causal attention over
  // positions 0 .. pos+i (kernels::attention_decode; NKV = NH: multi-head).
  std::function<void(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C, int NH,
                     int NKV, int maxT)>
      attention_decode;
  // attention_decode over an int8 KV cache (lesson 15): caches (B, maxT, KV) int8 with one
  // float scale per position and KV head (B, maxT, NKV); the new rows quantised into it first
  // (kernels::attention_decode_int8). Left empty, fill_defaults makes it throw nn::Error
  // ("int8 KV cache: not on backend <name>"): the cuda backend has none yet.
  std::function<void(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale, const float* qkv, int B,
                     int n, int pos, int C, int NH, int NKV, int maxT)>
      attention_decode_int8;

  // ---- optimizer helpers over flat buffers ------------------------------------------------
  // sum of squares of g (n), accumulated in double in a fixed order
  std::function<double(const float* g, int64_t n)> sum_squares;
  // x *= s
  std::function<void(float* x, float s, int64_t n)> scale;
  // AdamW, PyTorch's torch.optim.AdamW formula (t is the 1-based step):
  //   p -= lr * wd * p                              (decoupled weight decay; wd = 0 for no decay)
  //   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
  //   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
  std::function<void(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                     float eps, float weight_decay, int64_t t)>
      adamw_update;
};

// Every op of the table, once, in the order above: f(name, op) for each, `op` a reference to
// the table's std::function (const when `be` is). Profiling wraps each op through it
// (gpt/profile.h), fill_defaults checks that none is left empty, and the tests check every
// backend. An op added to Backend is added here, and then every one of those sees it.
template <class Table, class F>
void for_each_op(Table& be, F&& f) {
  f("encoder_forward", be.encoder_forward);
  f("encoder_backward", be.encoder_backward);
  f("layernorm_forward", be.layernorm_forward);
  f("layernorm_backward", be.layernorm_backward);
  f("matmul_forward", be.matmul_forward);
  f("matmul_backward", be.matmul_backward);
  f("attention_forward", be.attention_forward);
  f("attention_backward", be.attention_backward);
  f("gelu_forward", be.gelu_forward);
  f("gelu_backward", be.gelu_backward);
  f("residual_forward", be.residual_forward);
  f("dropout_forward", be.dropout_forward);
  f("dropout_backward", be.dropout_backward);
  f("crossentropy_forward", be.crossentropy_forward);
  f("crossentropy_backward", be.crossentropy_backward);
  f("rmsnorm_forward", be.rmsnorm_forward);
  f("rmsnorm_backward", be.rmsnorm_backward);
  f("rope_forward", be.rope_forward);
  f("rope_backward", be.rope_backward);
  f("swiglu_forward", be.swiglu_forward);
  f("swiglu_backward", be.swiglu_backward);
  f("flash_attention_forward", be.flash_attention_forward);
  f("flash_attention_backward", be.flash_attention_backward);
  f("residual_layernorm_forward", be.residual_layernorm_forward);
  f("matmul_gelu_forward", be.matmul_gelu_forward);
  f("matvec_forward", be.matvec_forward);
  f("attention_decode", be.attention_decode);
  f("attention_decode_int8", be.attention_decode_int8);
  f("sum_squares", be.sum_squares);
  f("scale", be.scale);
  f("adamw_update", be.adamw_update);
}

// Completes a filled table: each fused op left empty becomes its pair of ops (the table's
// own, as they are now), each inference op left empty throws nn::Error naming the backend;
// then nn::Error if a name or any other op is still empty (a filling function forgot one).
void fill_defaults(Backend& be);

// The tables: naive = the v1 rung of each kernels/ ladder (gpt/backend.cpp), cpu = the
// chosen CPU rungs (gpt/backend_cpu.cpp); cuda_backend is gpt/backend_cuda.h.
Backend naive_backend();
Backend cpu_backend();

// "naive", "cpu" or "cuda" (nn::Error naming the choices otherwise). `precision` is the
// cuda backend's (gpt/backend_cuda.h: "auto", "fp32", "tf32", "bf16"); the host backends
// compute in fp32 only and refuse anything but "auto" or "fp32".
std::unique_ptr<Backend> make_backend(const std::string& name, const std::string& precision = "auto");
std::unique_ptr<Backend> make_naive_backend();
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace gpt
