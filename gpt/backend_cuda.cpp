// gpt/backend_cuda.cpp: `--backend cuda` (gpt/backend_cuda.h). The backend is a table over
// the CUDA ladders (kernels/cuda/device.h: Kernels): one chosen rung per op, listed once in
// CudaRungs' constructor (which rung of which ladder, and what the trainer uses it for),
// from which kernel_plan() prints; cuda_backend() fills the gpt::Backend table, each op one
// or two calls of those rungs.
#include "gpt/backend_cuda.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/ceilings.h"
#include "kernels/harness.h"
#include "kernels/cuda/device.h"
#include "nn/check.h"

namespace gpt {

namespace {
TensorCorePeakFn& tensor_core_peak_fn() {
  static TensorCorePeakFn fn = nullptr;
  return fn;
}
}  // namespace

void set_tensor_core_peak(TensorCorePeakFn fn) { tensor_core_peak_fn() = fn; }

namespace kc = kernels::cuda;

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

Precision choose_precision(const std::string& name, int sm, const std::string& device_name) {
  const std::string cc = std::to_string(sm / 10) + "." + std::to_string(sm % 10);
  if (name == "auto") return sm >= 80 ? Precision::bf16 : Precision::fp32;
  if (name == "fp32") return Precision::fp32;
  NN_CHECK(name == "tf32" || name == "bf16",
           "unknown precision '" << name << "': choose auto, fp32, tf32 or bf16");
  NN_CHECK(sm >= 80, "--precision " << name << " needs tensor cores with " << name << " inputs, compute capability 8.0 "
                                    << "(Ampere) or newer; " << device_name << " is " << cc
                                    << ": use --precision fp32");
  return name == "tf32" ? Precision::tf32 : Precision::bf16;
}

void check_device_memory(const GPTConfig& c, int B, int T, size_t free_bytes, const std::string& device_name) {
  const MemoryBreakdown m = memory_breakdown(c, B, T, /*preatt: the cuda backend keeps none*/ false);
  const auto need = static_cast<size_t>(m.total());
  if (need <= free_bytes) return;
  auto mib = [](int64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; };
  NN_CHECK(false, "not enough device memory on " << device_name << " for this run: it needs " << mib(static_cast<int64_t>(need))
                                                 << " and " << mib(static_cast<int64_t>(free_bytes)) << " is free.\n"
                                                 << "  parameters      " << mib(m.params) << "\n"
                                                 << "  gradients       " << mib(m.grads) << "\n"
                                                 << "  AdamW m and v   " << mib(m.adam) << "\n"
                                                 << "  activations     " << mib(m.activations) << " (batch " << B
                                                 << " x context " << T << "; the attention maps grow as T^2)\n"
                                                 << "  backward scratch " << mib(m.scratch) << "\n"
                                                 << "Lower --batch-size (use --grad-accum to keep the batch) or "
                                                 << "--block-size, or use a smaller model");
}

namespace {

// The matmul rung each precision runs (kernels/cuda/matmul.cu: the any-layout rungs).
const char* matmul_rung(Precision p) {
  switch (p) {
    case Precision::fp32: return "v9";   // fp32 warp tiles
    case Precision::tf32: return "v10";  // TF32 tensor cores
    case Precision::bf16: return "v11";  // BF16 tensor cores
  }
  return "v9";
}

using Plan = std::vector<std::pair<std::string, std::string>>;

// The rung `id` of `op`'s ladder (kernels/cuda/device.h: Kernels; "last": its last rung, as
// the inference ops take, like kernels::matvec on the host), recorded in the plan as
// (what the trainer uses it for, "op vN name"). nn::Error if the build's table lacks it.
template <class Fn, class W>
const kernels::OpVersion<Fn, W>& use(Plan& plan, const std::string& what,
                                     const std::vector<kernels::OpVersion<Fn, W>>& ladder,
                           const std::string& op, const std::string& id) {
  NN_CHECK(!ladder.empty(), "the CUDA kernel table has no " << op << " versions (kernels/cuda/device.h: Kernels)");
  const kernels::OpVersion<Fn, W>* chosen = id == "last" ? &ladder.back() : nullptr;
  for (const auto& v : ladder) {
    if (v.id() == id) chosen = &v;
  }
  NN_CHECK(chosen != nullptr,
           "the CUDA kernel table has no " << op << " " << id << " (kernels/cuda/device.h: Kernels)");
  plan.emplace_back(what, op + " " + chosen->id() + " " + chosen->name);
  return *chosen;
}

// int sizes for the launchers; the GPT's tensors stay far below 2^31 elements per op
int as_int(int64_t n) {
  NN_CHECK(n < (int64_t{1} << 31), "an op over " << n << " elements: more than the kernels' int sizes");
  return static_cast<int>(n);
}

// The cuda backend's state, shared by every callable of its table: the device, the chosen
// rung of each ladder and the scratch the ops need.
struct CudaRungs {
  // The table: for each op, the rung of its ladder this backend runs, and what for.
  CudaRungs(kc::Device& dev, Precision precision)
      : dev_(dev), k_(dev.kernels()), precision_(precision),
        matmul_(use(plan_, "matmul (forward, dinp, dweight)", k_.matmul, "matmul", matmul_rung(precision))),
        bias_backward_(use(plan_, "matmul dbias", k_.bias_backward, "bias_backward", "v2")),
        attention_(use(plan_, "attention forward", k_.attention, "attention", "v2")),
        attention_backward_(use(plan_, "attention backward", k_.attention_backward, "attention_backward", "v2")),
        layernorm_forward_(use(plan_, "layernorm forward", k_.layernorm_forward, "layernorm_forward", "v3")),
        layernorm_backward_(use(plan_, "layernorm backward", k_.layernorm_backward, "layernorm_backward", "v3")),
        residual_layernorm_(use(plan_, "residual + layernorm", k_.residual_layernorm, "residual_layernorm", "v2")),
        softmax_(use(plan_, "softmax (cross-entropy)", k_.softmax, "softmax", "v3")),
        gelu_(use(plan_, "gelu forward", k_.gelu, "gelu", "v2")),
        gelu_backward_(use(plan_, "gelu backward", k_.gelu_backward, "gelu_backward", "v2")),
        encoder_forward_(use(plan_, "encoder forward", k_.encoder_forward, "encoder_forward", "v1")),
        encoder_backward_(use(plan_, "encoder backward", k_.encoder_backward, "encoder_backward", "v2")),
        dropout_(use(plan_, "dropout forward", k_.dropout_forward, "dropout_forward", "v1")),
        multiply_(use(plan_, "dropout backward", k_.multiply, "multiply", "v1")),
        add_(use(plan_, "residual add", k_.add, "add", "v1")),
        ce_loss_(use(plan_, "cross-entropy loss", k_.crossentropy_loss, "crossentropy_loss", "v1")),
        ce_backward_(use(plan_, "cross-entropy backward", k_.crossentropy_backward, "crossentropy_backward", "v1")),
        sum_(use(plan_, "loss mean, gradient norm", k_.sum, "sum", "v2")),
        scale_(use(plan_, "gradient clipping", k_.scale, "scale", "v1")),
        adamw_(use(plan_, "AdamW", k_.adamw, "adamw", "v2")),
        matvec_(use(plan_, "matvec (inference)", k_.matvec, "matvec", "last")),
        attention_decode_(use(plan_, "attention over the KV cache (inference)", k_.attention_decode,
                              "attention_decode", "last")),
        rmsnorm_forward_(use(plan_, "rmsnorm forward (llama)", k_.rmsnorm_forward, "rmsnorm_forward", "v2")),
        rmsnorm_backward_(use(plan_, "rmsnorm backward (llama)", k_.rmsnorm_backward, "rmsnorm_backward", "v3")),
        rope_forward_(use(plan_, "rope forward (llama)", k_.rope_forward, "rope_forward", "v1")),
        rope_backward_(use(plan_, "rope backward (llama)", k_.rope_backward, "rope_backward", "v1")),
        swiglu_forward_(use(plan_, "swiglu forward (llama)", k_.swiglu_forward, "swiglu_forward", "v1")),
        swiglu_backward_(use(plan_, "swiglu backward (llama)", k_.swiglu_backward, "swiglu_backward", "v1")),
        flash_(use(plan_, "flash attention forward", k_.flash_attention, "flash_attention", "v1")),
        flash_backward_(use(plan_, "flash attention backward", k_.flash_attention_backward, "flash_attention_backward",
                            "v1")),
        sum_buffer_(dev, kc::kSumWorkspaceDoubles + 1) {}

  double measure_peak_flops(std::string* what) {
    if (dev_.info().emulated) {
      if (what) *what = "not measured: the emulator's speed says nothing about a GPU";
      return 0.0;
    }
    if (precision_ == Precision::fp32) {
      const kc::Ceilings c = kc::measure_ceilings(dev_, {});
      if (what) *what = "FP32 FMA kernel on " + dev_.info().name + ", measured now";
      return c.fma_gflops * 1e9;
    }
    // Tensor cores: the FLOP rate of the same matmul rung the trainer uses, on a square
    // 4096^3 problem of random numbers (zeros can run faster than data: fewer bits toggle),
    // and the installed library's rate (set_tensor_core_peak), whichever is higher.
    const int n = 4096;
    const size_t nn = static_cast<size_t>(n) * n;
    std::vector<float> host(nn);
    kernels::harness::fill_random(host, 1);
    Array<float> a(dev_, nn), b(dev_, nn), c(dev_, nn, kernels::uninitialized);
    a.upload(host);
    b.upload(host);
    double best = 1e30;
    for (int i = 0; i < 4; ++i) {
      const double ms = dev_.time_ms([&] { matmul_.fn(c.data(), a.data(), b.data(), n, n, n, {}); });
      if (i > 0) best = std::min(best, ms);  // the first run warms up
    }
    const double ours = 2.0 * n * n * static_cast<double>(n) / (best / 1e3);
    const std::string ours_what = "matmul " + matmul_.id() + " (" + matmul_.name + ") at 4096^3 on " +
                                  dev_.info().name + ", measured now";
    std::string lib_what;
    const double lib = tensor_core_peak_fn() ? tensor_core_peak_fn()(dev_, precision_name(precision_), &lib_what) : 0.0;
    if (lib > ours) {
      if (what) *what = lib_what + " (our " + ours_what + ": " + std::to_string(static_cast<int>(ours / 1e9)) + " GFLOP/s)";
      return lib;
    }
    if (what) *what = ours_what + (lib_what.empty() ? "" : " (" + lib_what + ")");
    return ours;
  }

  void check_capacity(const GPTConfig& c, int B, int T) {
    const size_t total = dev_.info().memory_bytes, used = dev_.memory_in_use();
    check_device_memory(c, B, T, total > used ? total - used : 0, dev_.info().name);
  }

  // out (N,OC) = inp (N,C) . W (OC,C)^T + bias
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
    kc::MatmulArgs args;
    args.trans_b = true;
    args.bias = bias;
    matmul_.fn(out, inp, weight, N, OC, C, args);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC) {
    if (dinp != nullptr) matmul_.fn(dinp, dout, weight, N, C, OC, {});  // dinp = dout . W
    if (dweight != nullptr) {  // nullptr: a frozen weight (LoRA, gpt/lora.h), skipped
      kc::MatmulArgs dw;       // dW += dout^T . inp
      dw.trans_a = true;
      dw.accumulate = true;
      matmul_.fn(dweight, dout, inp, OC, C, N, dw);
    }
    if (dbias != nullptr) bias_backward_.fn(dbias, dout, N, OC);
  }

  void attention_backward(float* dqkv, float* dpreatt, const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH) {
    // The scratch's dpreatt and datt are adjacent (gpt/model.cpp): 2 B NH T T floats.
    const size_t have = 2 * static_cast<size_t>(B) * NH * T * T * sizeof(float);
    const size_t need = attention_backward_.workspace ? attention_backward_.workspace(B, T, C, NH) : 0;
    float* ws = dpreatt;
    if (need > have) {
      if (own_workspace_.bytes() < need) own_workspace_ = Array<float>(dev_, (need + 3) / 4, kernels::uninitialized);
      ws = own_workspace_.data();
    }
    attention_backward_.fn(dqkv, ws, dout, qkv, att, B, T, C, NH);
  }

  float crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                             int V) {
    softmax_.fn(probs, logits, N, V);
    ce_loss_.fn(losses, probs, targets, N, V);
    return static_cast<float>(sum(losses, N, false) / N);  // waits: the loss is logged every step
  }

  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                    float eps, float weight_decay, int64_t t) {
    if (n == 0) return;
    kc::AdamWArgs a;
    a.lr = lr;
    a.beta1 = beta1;
    a.beta2 = beta2;
    a.eps = eps;
    a.weight_decay = weight_decay;
    a.t = static_cast<int>(t);
    adamw_.fn(p, m, v, g, static_cast<size_t>(n), a);
  }

  // sum (or sum of squares) of x on the device, brought back (the host waits for it)
  double sum(const float* x, int64_t n, bool squares) {
    if (n == 0) return 0.0;
    double* out = sum_buffer_.data();
    sum_.fn(out, out + 1, x, static_cast<size_t>(n), squares);
    double s = 0.0;
    dev_.to_host(&s, out, sizeof s);
    return s;
  }

  kc::Device& dev_;
  const kc::Kernels& k_;
  Precision precision_;
  Plan plan_;  // filled by the constructor's use(): before the rungs, which are initialised after it
  const kernels::OpVersion<kc::MatmulFn>& matmul_;
  const kernels::OpVersion<kc::BiasBackwardFn>& bias_backward_;
  const kernels::OpVersion<kc::AttentionFn, kc::WorkspaceFn>& attention_;
  const kernels::OpVersion<kc::AttentionBackwardFn, kc::WorkspaceFn>& attention_backward_;
  const kernels::OpVersion<kc::LayerNormForwardFn>& layernorm_forward_;
  const kernels::OpVersion<kc::LayerNormBackwardFn>& layernorm_backward_;
  const kernels::OpVersion<kc::ResidualLayerNormFn>& residual_layernorm_;
  const kernels::OpVersion<kc::SoftmaxFn>& softmax_;
  const kernels::OpVersion<kc::GeluFn>& gelu_;
  const kernels::OpVersion<kc::GeluBackwardFn>& gelu_backward_;
  const kernels::OpVersion<kc::EncoderForwardFn>& encoder_forward_;
  const kernels::OpVersion<kc::EncoderBackwardFn>& encoder_backward_;
  const kernels::OpVersion<kc::DropoutForwardFn>& dropout_;
  const kernels::OpVersion<kc::MultiplyFn>& multiply_;
  const kernels::OpVersion<kc::AddFn>& add_;
  const kernels::OpVersion<kc::CrossEntropyLossFn>& ce_loss_;
  const kernels::OpVersion<kc::CrossEntropyBackwardFn>& ce_backward_;
  const kernels::OpVersion<kc::SumFn>& sum_;
  const kernels::OpVersion<kc::ScaleFn>& scale_;
  const kernels::OpVersion<kc::AdamWFn>& adamw_;
  const kernels::OpVersion<kc::MatvecFn>& matvec_;
  const kernels::OpVersion<kc::AttentionDecodeFn>& attention_decode_;
  const kernels::OpVersion<kc::RmsnormForwardFn>& rmsnorm_forward_;
  const kernels::OpVersion<kc::RmsnormBackwardFn>& rmsnorm_backward_;
  const kernels::OpVersion<kc::RopeFn>& rope_forward_;
  const kernels::OpVersion<kc::RopeFn>& rope_backward_;
  const kernels::OpVersion<kc::SwigluForwardFn>& swiglu_forward_;
  const kernels::OpVersion<kc::SwigluBackwardFn>& swiglu_backward_;
  const kernels::OpVersion<kc::FlashAttentionFn>& flash_;
  const kernels::OpVersion<kc::FlashAttentionBackwardFn>& flash_backward_;
  Array<double> sum_buffer_;  // the result, then the sum's workspace
  Array<float> own_workspace_;
};

}  // namespace

// The table: each op one or two calls of the rungs CudaRungs chose; every callable shares
// the one CudaRungs (device, workspaces), which lives as long as any copy of the table.
Backend cuda_backend(kc::Device& device, const std::string& precision) {
  const Precision chosen = choose_precision(precision, device.info().sm, device.info().name);
  auto r = std::make_shared<CudaRungs>(device, chosen);
  Backend be;
  be.name = [r] { return "cuda " + precision_name(r->precision_) + " on " + r->dev_.info().name; };
  be.precision = [r] { return precision_name(r->precision_); };
  be.memory = [r]() -> Memory& { return r->dev_; };
  be.keeps_preatt = [] { return false; };
  // residual + LayerNorm as one kernel (gpt/model.h, Fusion)
  be.fuses_residual_layernorm = [] { return true; };
  be.synchronize = [r] { r->dev_.synchronize(); };
  be.measure_peak_flops = [r](int /*threads*/, std::string* what) { return r->measure_peak_flops(what); };
  be.check_capacity = [r](const GPTConfig& c, int B, int T) { r->check_capacity(c, B, T); };
  be.rungs = r->plan_;

  be.encoder_forward = [r](float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C,
                           int /*V: ids were checked by gpt_forward*/) {
    r->encoder_forward_.fn(out, inp, wte, wpe, B, T, C);
  };
  be.encoder_backward = [r](float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                            int V) { r->encoder_backward_.fn(dwte, dwpe, dout, inp, B, T, C, V); };
  be.layernorm_forward = [r](float* out, float* mean, float* rstd, const float* inp, const float* weight,
                             const float* bias, int N, int C) {
    r->layernorm_forward_.fn(out, mean, rstd, inp, weight, bias, N, C);
  };
  be.layernorm_backward = [r](float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int N, int C) {
    r->layernorm_backward_.fn(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  };
  be.residual_layernorm_forward = [r](float* residual_out, float* ln_out, float* mean, float* rstd, const float* a,
                                      const float* b, const float* weight, const float* bias, int N, int C) {
    r->residual_layernorm_.fn(residual_out, ln_out, mean, rstd, a, b, weight, bias, N, C);
  };

  be.matmul_forward = [r](float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                          int OC) { r->matmul_forward(out, inp, weight, bias, N, C, OC); };
  be.matmul_backward = [r](float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                           const float* weight, int N, int C, int OC) {
    r->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  };
  be.matmul_gelu_forward = [r](float* pre, float* out, const float* inp, const float* weight, const float* bias,
                               int N, int C, int OC) {
    r->matmul_forward(pre, inp, weight, bias, N, C, OC);
    r->gelu_.fn(out, pre, as_int(static_cast<int64_t>(N) * OC));
  };

  // The unfused attention keeps the probabilities in its (B,NH,T,T) workspace: that is the
  // layer's `att` buffer, which the backward reads. No preatt on this backend (nullptr).
  be.attention_forward = [r](float* out, float* /*preatt*/, float* att, const float* qkv, int B, int T, int C,
                             int NH) { r->attention_.fn(out, att, qkv, B, T, C, NH); };
  be.attention_backward = [r](float* dqkv, float* dpreatt, float* /*datt: follows dpreatt*/, const float* dout,
                              const float* qkv, const float* att, int B, int T, int C, int NH) {
    r->attention_backward(dqkv, dpreatt, dout, qkv, att, B, T, C, NH);
  };

  // llama's ops (lesson 11): kernels/cuda/llama_ops.cu and flash_attention.cu
  be.rmsnorm_forward = [r](float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) {
    r->rmsnorm_forward_.fn(out, rstd, inp, weight, N, C, eps);
  };
  be.rmsnorm_backward = [r](float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                            const float* rstd, int N, int C) {
    r->rmsnorm_backward_.fn(dinp, dweight, dout, inp, weight, rstd, N, C);
  };
  be.rope_forward = [r](float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                        int stride, int pos0) { r->rope_forward_.fn(out, inp, cos, sin, B, T, NH, hs, stride, pos0); };
  be.rope_backward = [r](float* dinp, const float* dout, const float* cos, const float* sin, int B, int T, int NH,
                         int hs, int stride, int pos0) {
    r->rope_backward_.fn(dinp, dout, cos, sin, B, T, NH, hs, stride, pos0);
  };
  be.swiglu_forward = [r](float* out, const float* gate, const float* up, int rows, int H, int ld) {
    r->swiglu_forward_.fn(out, gate, up, rows, H, ld);
  };
  be.swiglu_backward = [r](float* dgate, float* dup, const float* dout, const float* gate, const float* up, int rows,
                           int H, int ld) { r->swiglu_backward_.fn(dgate, dup, dout, gate, up, rows, H, ld); };
  be.flash_attention_forward = [r](float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int NKV) {
    r->flash_.fn(out, lse, qkv, B, T, C, NH, NKV);
  };
  be.flash_attention_backward = [r](float* dqkv, const float* dout, const float* qkv, const float* out,
                                    const float* lse, int B, int T, int C, int NH, int NKV) {
    r->flash_backward_.fn(dqkv, dout, qkv, out, lse, B, T, C, NH, NKV);
  };

  be.gelu_forward = [r](float* out, const float* inp, int64_t n) {
    if (n > 0) r->gelu_.fn(out, inp, as_int(n));
  };
  be.gelu_backward = [r](float* dinp, const float* dout, const float* inp, int64_t n) {
    if (n > 0) r->gelu_backward_.fn(dinp, dout, inp, static_cast<size_t>(n));
  };
  be.residual_forward = [r](float* out, const float* a, const float* b, int64_t n) {
    if (n > 0) r->add_.fn(out, a, b, static_cast<size_t>(n));
  };
  be.dropout_forward = [r](float* out, float* mask, const float* inp, int64_t n, float p, uint64_t seed) {
    if (n > 0) r->dropout_.fn(out, mask, inp, static_cast<size_t>(n), p, seed);
  };
  be.dropout_backward = [r](float* dinp, const float* dout, const float* mask, int64_t n) {
    if (n > 0) r->multiply_.fn(dinp, dout, mask, static_cast<size_t>(n));
  };

  be.crossentropy_forward = [r](float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                                int V) { return r->crossentropy_forward(probs, losses, logits, targets, N, V); };
  be.crossentropy_backward = [r](float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                                 float dloss) {
    r->ce_backward_.fn(dlogits, probs, targets, N, V, dloss / static_cast<float>(N));
  };

  be.sum_squares = [r](const float* g, int64_t n) { return r->sum(g, n, true); };
  be.scale = [r](float* x, float s, int64_t n) {
    if (n > 0) r->scale_.fn(x, s, static_cast<size_t>(n));
  };
  be.adamw_update = [r](float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                        float eps, float weight_decay, int64_t t) {
    r->adamw_update(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
  };

  // Inference (lesson 10): the table's last versions; w's pointers are device pointers. The
  // launchers' size checks (kernels::cuda::Error) come back as nn::Error.
  be.matvec_forward = [r](float* out, const float* inp, const kernels::WeightsView& w, const float* bias, int N) {
    if (N <= 0 || w.rows <= 0) return;
    try {
      r->matvec_.fn(out, inp, w, bias, N);
    } catch (const kc::Error& e) {
      NN_CHECK(false, e.what());
    }
  };
  be.attention_decode = [r](float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                            int NH, int NKV, int maxT) {
    try {
      r->attention_decode_.fn(out, kcache, vcache, qkv, B, n, pos, C, NH, NKV, maxT);
    } catch (const kc::Error& e) {
      NN_CHECK(false, e.what());
    }
  };
  // attention_decode_int8 (lesson 15's int8 KV cache) has no CUDA kernel yet: left empty,
  // fill_defaults makes it say "int8 KV cache: not on backend cuda".
  fill_defaults(be);
  return be;
}

std::unique_ptr<Backend> make_cuda_backend(kc::Device& device, const std::string& precision) {
  return std::make_unique<Backend>(cuda_backend(device, precision));
}

std::unique_ptr<Backend> make_cuda_backend(const std::string& precision) {
  const char* env = std::getenv("NNLAB_DEVICE");
  const std::string want = env ? env : "";
  if (want == "emu" || want == "emulator") return make_cuda_backend(kc::emulator(), precision);
  std::string why;
  kc::Device* gpu = kc::gpu(&why);
  NN_CHECK(gpu != nullptr, "--backend cuda: no usable GPU: "
                               << why << ". (NNLAB_DEVICE=emu runs the same kernels on the CPU emulator: correct, "
                               << "but thousands of times slower; for tests and for stepping through a kernel)");
  return make_cuda_backend(*gpu, precision);
}

std::vector<std::pair<std::string, std::string>> kernel_plan(const Backend& be) {
  NN_CHECK(!be.rungs.empty(), "kernel_plan: the " << be.name() << " backend is not the cuda backend");
  return be.rungs;
}

}  // namespace gpt
