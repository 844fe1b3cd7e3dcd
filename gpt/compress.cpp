// gpt/compress.cpp: calibration, SmoothQuant, W8A8 and int8-KV evaluation, GPTQ and BitNet
// b1.58's straight-through step (gpt/compress.h says what each is). The evaluation runs the
// model's own block (gpt::transformer_forward) with a BlockKernels of its own: the Linear
// layers either watched (calibration), or computed by kernels::w8a8_linear on int8 weights;
// attention optionally reading keys and values rounded as an int8 cache holds them.
#include "gpt/compress.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>

#include "gpt/train.h"
#include "kernels/int8_gemm.h"
#include "kernels/weight_format.h"
#include "nn/check.h"

namespace gpt {

namespace {

using i64 = int64_t;

void check_host(const GPT& model, Backend& be, const char* what) {
  NN_CHECK(&gpt_memory(model) == &host_memory() && &be.memory() == &host_memory(),
           what << " needs the model and the backend in host memory (the naive or cpu backend)");
}

// The block's four Linear matrices of layer l, as (pointer, rows, cols).
struct Matrix {
  float* w;
  int rows, cols;
};
Matrix linear_matrix(const ParameterTensors& P, const GPTConfig& c, Linear which, int l) {
  const ParameterTensors p = layer_params(P, c, l);
  const int C = c.n_embd;
  switch (which) {
    case Linear::qkv: return {p.qkvw, qkv_channels(c), C};
    case Linear::attproj: return {p.attprojw, C, C};
    case Linear::fc: return {p.fcw, fc_channels(c), C};
    case Linear::fcproj: return {p.fcprojw, C, mlp_hidden(c)};
  }
  return {nullptr, 0, 0};
}
constexpr Linear kLinears[] = {Linear::qkv, Linear::attproj, Linear::fc, Linear::fcproj};

// int8 copies of every block Linear: q (out, in) and one scale per output row.
struct W8Weights {
  std::vector<std::vector<int8_t>> q;  // 4 l + which
  std::vector<std::vector<float>> s;
};
W8Weights quantize_linears(const GPT& m) {
  const GPTConfig& c = m.config;
  W8Weights w;
  for (int l = 0; l < c.n_layer; ++l) {
    for (Linear which : kLinears) {
      const Matrix M = linear_matrix(m.params, c, which, l);
      std::vector<int8_t> q(static_cast<size_t>(M.rows) * M.cols);
      std::vector<float> s(static_cast<size_t>(M.rows));
      kernels::quantize_rows_int8(M.w, M.rows, M.cols, q.data(), s.data());
      w.q.push_back(std::move(q));
      w.s.push_back(std::move(s));
    }
  }
  return w;
}

// The block's kernels for evaluation: fp32 as training's, or W8A8 Linears; an optional watcher
// of every Linear's input; optionally an int8 KV round trip before attention.
class EvalKernels final : public BlockKernels {
 public:
  EvalKernels(Backend& be, const GPT& m, int B, int T) : be_(be), m_(m), B_(B), T_(T) {}
  std::function<void(const LinearLayer&, const float*, int)> observe;
  const W8Weights* w8 = nullptr;
  bool kv_int8 = false;

  void linear(float* out, const float* inp, const LinearLayer& w, int N) override {
    if (observe) observe(w, inp, N);
    if (w8 != nullptr) {
      const size_t i = static_cast<size_t>(4 * w.layer + static_cast<int>(w.which));
      scratch_.resize(kernels::w8a8_scratch_bytes(N, w.out, w.in));
      kernels::w8a8_linear(out, inp, w8->q[i].data(), w8->s[i].data(), w.bias, N, w.out, w.in, scratch_.data());
    } else {
      be_.matmul_forward(out, inp, w.weight, w.bias, N, w.in, w.out);
    }
  }
  void linear_gelu(float* pre, float* out, const float* inp, const LinearLayer& w, int N) override {
    if (w8 != nullptr || observe) {
      linear(pre, inp, w, N);
      be_.gelu_forward(out, pre, static_cast<i64>(N) * w.out);
    } else {
      be_.matmul_gelu_forward(pre, out, inp, w.weight, w.bias, N, w.in, w.out);  // as training's
    }
  }
  void attention(float* out, float* preatt, float* att, float* lse, const float* qkv, int /*layer*/) override {
    const GPTConfig& c = m_.config;
    const int C = c.n_embd, NH = c.n_head, NKV = kv_heads(c), hs = C / NH, QKV = qkv_channels(c);
    const float* in = qkv;
    if (kv_int8) {
      // what an int8 cache gives back: k and v of every position, per head, rounded
      const i64 N = static_cast<i64>(B_) * T_;
      kv_.assign(qkv, qkv + N * QKV);
      for (i64 r = 0; r < N; ++r) {
        float* row = kv_.data() + r * QKV;
        quantize_dequantize_heads_int8(row + C, NKV, hs);             // k
        quantize_dequantize_heads_int8(row + C + NKV * hs, NKV, hs);  // v
      }
      in = kv_.data();
    }
    if (attention_of(c) == AttentionKind::flash) {
      be_.flash_attention_forward(out, lse, in, B_, T_, C, NH, NKV);
    } else {
      be_.attention_forward(out, preatt, att, in, B_, T_, C, NH);
    }
  }
  void rope(float* qkv) override { apply_rope(be_, m_, qkv, B_, T_, /*pos0=*/0, /*inverse=*/false); }
  // the model's own Linear-input hook (set_int8_activations: a W1.58A8 model), as training's
  void linear_input(float* x, const LinearLayer& w, int N) override {
    if (m_.linear_input != nullptr) m_.linear_input(gpt_memory(m_), x, N, w.in);
  }

 private:
  Backend& be_;
  const GPT& m_;
  int B_, T_;
  std::vector<unsigned char> scratch_;
  std::vector<float> kv_;
};

// One eval forward through k: logits in A.logits, returns the mean loss (targets) or 0.
struct EvalBuffers {
  ActivationLayout layout;
  std::vector<float> acts;
  ActivationTensors A{};
};
EvalBuffers eval_buffers(const GPTConfig& c, Backend& be, int B, int T) {
  EvalBuffers b;
  ActivationLayout l;
  l.B = B;
  l.T = T;
  l.stacked = false;
  l.preatt = be.keeps_preatt();
  l.att = true;
  l.masks = false;
  l.loss = true;
  b.layout = with_config(l, c);
  b.acts.assign(static_cast<size_t>(activation_floats(c, b.layout)), 0.0f);
  b.A = activation_tensors(b.acts.data(), c, b.layout);
  return b;
}
float eval_forward(const GPT& m, Backend& be, EvalKernels& k, EvalBuffers& b, const int32_t* inputs,
                   const int32_t* targets, int B, int T) {
  const GPTConfig& c = m.config;
  NN_CHECK(T >= 1 && T <= c.block_size, "evaluation: T=" << T << " outside [1, block_size " << c.block_size << "]");
  const int C = c.n_embd, V = c.vocab_size, N = B * T;
  for (int i = 0; i < N; ++i) {
    NN_CHECK(inputs[i] >= 0 && inputs[i] < V, "evaluation: token id " << inputs[i] << " outside the vocabulary");
  }
  const ParameterTensors& P = m.params;
  const ActivationTensors& A = b.A;
  be.encoder_forward(A.encoded, inputs, P.wte, P.wpe, B, T, C, V);
  transformer_forward(be, k, c, P, A, b.layout, A.encoded, N, Dropout{}, fuses(be, Fusion::backend, c));
  be.matmul_forward(A.logits, A.lnf, head_weight(P), nullptr, N, C, V);
  if (targets == nullptr) return 0.0f;
  return be.crossentropy_forward(A.probs, A.losses, A.logits, targets, N, V);
}

double median(std::vector<float> v) {
  if (v.empty()) return 0.0;
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  double m = v[h];
  if (v.size() % 2 == 0) {
    m = (m + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h))) / 2.0;
  }
  return m;
}

}  // namespace

// ---- calibration -----------------------------------------------------------------------------------

Calibration calibrate(const GPT& model, Backend& be, const std::vector<int32_t>& tokens, int B, int T, int batches,
                      uint64_t seed, bool gram) {
  check_host(model, be, "calibration");
  const GPTConfig& c = model.config;
  Calibration cal;
  for (int l = 0; l < c.n_layer; ++l) {
    for (Linear which : kLinears) {
      const Matrix M = linear_matrix(model.params, c, which, l);
      LinearStats s;
      s.which = which;
      s.layer = l;
      s.in = M.cols;
      s.out = M.rows;
      s.absmax.assign(static_cast<size_t>(s.in), 0.0f);
      s.sum.assign(static_cast<size_t>(s.in), 0.0);
      s.sumsq.assign(static_cast<size_t>(s.in), 0.0);
      s.sum4.assign(static_cast<size_t>(s.in), 0.0);
      if (gram) s.gram.assign(static_cast<size_t>(s.in) * s.in, 0.0);
      cal.layers.push_back(std::move(s));
    }
  }
  EvalKernels k(be, model, B, T);
  EvalBuffers buf = eval_buffers(c, be, B, T);
  std::vector<double> rowd;
  k.observe = [&](const LinearLayer& w, const float* inp, int N) {
    LinearStats& s = cal.layers[static_cast<size_t>(4 * w.layer + static_cast<int>(w.which))];
    const int in = s.in;
    rowd.resize(static_cast<size_t>(in));
    for (int n = 0; n < N; ++n) {
      const float* x = inp + static_cast<i64>(n) * in;
      for (int j = 0; j < in; ++j) {
        const double v = x[j];
        s.absmax[static_cast<size_t>(j)] = std::max(s.absmax[static_cast<size_t>(j)], std::fabs(x[j]));
        s.sum[static_cast<size_t>(j)] += v;
        s.sumsq[static_cast<size_t>(j)] += v * v;
        s.sum4[static_cast<size_t>(j)] += v * v * v * v;
        rowd[static_cast<size_t>(j)] = v;
      }
      if (!s.gram.empty()) {
        // upper triangle; mirrored at the end
        for (int i = 0; i < in; ++i) {
          const double xi = rowd[static_cast<size_t>(i)];
          double* g = s.gram.data() + static_cast<i64>(i) * in;
          for (int j = i; j < in; ++j) g[j] += xi * rowd[static_cast<size_t>(j)];
        }
      }
    }
    s.rows += N;
  };
  std::vector<int32_t> x, y;
  for (int b = 0; b < batches; ++b) {
    get_batch(tokens, B, T, seed, /*stream=*/7, static_cast<uint64_t>(b), x, y);
    eval_forward(model, be, k, buf, x.data(), nullptr, B, T);
  }
  for (LinearStats& s : cal.layers) {
    if (s.gram.empty() || s.rows == 0) continue;
    const double inv = 1.0 / static_cast<double>(s.rows);
    for (int i = 0; i < s.in; ++i) {
      for (int j = i; j < s.in; ++j) {
        const double v = s.gram[static_cast<size_t>(i) * s.in + j] * inv;
        s.gram[static_cast<size_t>(i) * s.in + j] = v;
        s.gram[static_cast<size_t>(j) * s.in + i] = v;
      }
    }
  }
  return cal;
}

OutlierStats outlier_stats(const LinearStats& s) {
  OutlierStats o;
  if (s.rows == 0 || s.in == 0) return o;
  const double med = median(s.absmax);
  const double mx = *std::max_element(s.absmax.begin(), s.absmax.end());
  o.max_over_median = med > 0 ? mx / med : 0.0;
  double sum = 0, sq = 0, s4 = 0;
  for (int j = 0; j < s.in; ++j) {
    sum += s.sum[static_cast<size_t>(j)];
    sq += s.sumsq[static_cast<size_t>(j)];
    s4 += s.sum4[static_cast<size_t>(j)];
  }
  const double n = static_cast<double>(s.rows) * s.in;
  const double m2 = sq / n, m4 = s4 / n, mean = sum / n;
  o.kurtosis = m2 > 0 ? m4 / (m2 * m2) : 0.0;
  const double sigma = std::sqrt(std::max(0.0, m2 - mean * mean));
  int over = 0;
  for (float a : s.absmax) over += a > 6.0 * sigma ? 1 : 0;
  o.frac_6sigma = static_cast<double>(over) / s.in;
  return o;
}

// ---- SmoothQuant ---------------------------------------------------------------------------------

std::vector<float> smoothing_scales(const LinearStats& s, const float* W, float alpha) {
  std::vector<float> sc(static_cast<size_t>(s.in), 1.0f);
  for (int j = 0; j < s.in; ++j) {
    float wmax = 0.0f;
    for (int r = 0; r < s.out; ++r) wmax = std::max(wmax, std::fabs(W[static_cast<i64>(r) * s.in + j]));
    const float xmax = s.absmax[static_cast<size_t>(j)];
    if (xmax > 0.0f && wmax > 0.0f) {
      sc[static_cast<size_t>(j)] =
          static_cast<float>(std::pow(static_cast<double>(xmax), alpha) / std::pow(static_cast<double>(wmax), 1.0 - alpha));
    }
  }
  return sc;
}

void smooth_model(GPT& model, const Calibration& cal, float alpha) {
  NN_CHECK(&gpt_memory(model) == &host_memory(), "smoothing needs a model in host memory");
  NN_CHECK(alpha >= 0.0f && alpha <= 1.0f, "SmoothQuant's alpha must be in [0, 1], got " << alpha);
  const GPTConfig& c = model.config;
  NN_CHECK(static_cast<int>(cal.layers.size()) == 4 * c.n_layer, "smoothing: the calibration is of another model");
  for (int l = 0; l < c.n_layer; ++l) {
    const ParameterTensors p = layer_params(model.params, c, l);
    struct Site {
      Linear which;
      float* nw;
      float* nb;
    };
    for (const Site& site : {Site{Linear::qkv, p.ln1w, p.ln1b}, Site{Linear::fc, p.ln2w, p.ln2b}}) {
      const LinearStats& s = cal.at(site.which, l);
      const Matrix M = linear_matrix(model.params, c, site.which, l);
      NN_CHECK(s.in == M.cols && s.out == M.rows, "smoothing: the calibration is of another model");
      const std::vector<float> sc = smoothing_scales(s, M.w, alpha);
      for (int j = 0; j < M.cols; ++j) {
        const float sj = sc[static_cast<size_t>(j)];
        site.nw[j] /= sj;
        if (site.nb != nullptr) site.nb[j] /= sj;
        for (int r = 0; r < M.rows; ++r) M.w[static_cast<i64>(r) * M.cols + j] *= sj;
      }
    }
  }
}

// ---- W8A8 / int8 KV evaluation ---------------------------------------------------------------------

void quantize_dequantize_heads_int8(float* x, int heads, int hs) {
  for (int h = 0; h < heads; ++h) {
    float* v = x + static_cast<i64>(h) * hs;
    float amax = 0.0f;
    for (int i = 0; i < hs; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float s = amax / 127.0f;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    for (int i = 0; i < hs; ++i) v[i] = std::clamp(std::nearbyint(v[i] * inv), -127.0f, 127.0f) * s;
  }
}

int64_t kv_bytes_per_token(const GPTConfig& c, bool int8) {
  const i64 L = c.n_layer, NKV = kv_heads(c), hs = c.n_embd / c.n_head;
  return int8 ? 2 * L * (NKV * hs + NKV * static_cast<i64>(sizeof(float))) : 2 * L * NKV * hs * static_cast<i64>(sizeof(float));
}

float evaluate_compressed(const GPT& model, Backend& be, const std::vector<int32_t>& tokens, int B, int T, int iters,
                          uint64_t seed, uint64_t split_id, const CompressedEval& e) {
  check_host(model, be, "evaluate_compressed");
  EvalKernels k(be, model, B, T);
  W8Weights w8;
  if (e.w8a8) {
    w8 = quantize_linears(model);
    k.w8 = &w8;
  }
  k.kv_int8 = e.kv_int8;
  EvalBuffers buf = eval_buffers(model.config, be, B, T);
  std::vector<int32_t> x, y;
  double sum = 0.0;
  for (int i = 0; i < iters; ++i) {
    get_batch(tokens, B, T, seed, split_id, static_cast<uint64_t>(i), x, y);  // gpt::evaluate's batches
    sum += eval_forward(model, be, k, buf, x.data(), y.data(), B, T);
  }
  return static_cast<float>(sum / std::max(iters, 1));
}

std::vector<float> compressed_logits(const GPT& model, Backend& be, const int32_t* inputs, int B, int T,
                                     const CompressedEval& e) {
  check_host(model, be, "compressed_logits");
  EvalKernels k(be, model, B, T);
  W8Weights w8;
  if (e.w8a8) {
    w8 = quantize_linears(model);
    k.w8 = &w8;
  }
  k.kv_int8 = e.kv_int8;
  EvalBuffers buf = eval_buffers(model.config, be, B, T);
  eval_forward(model, be, k, buf, inputs, nullptr, B, T);
  const size_t n = static_cast<size_t>(B) * T * model.config.vocab_size;
  return std::vector<float>(buf.A.logits, buf.A.logits + n);
}

// ---- GPTQ ----------------------------------------------------------------------------------------------

namespace {

// In place: A (n, n) symmetric positive definite -> its lower Cholesky factor L (A = L L^T),
// the upper triangle zeroed. nn::Error when A is not positive definite.
void cholesky_lower(std::vector<double>& A, int n) {
  for (int j = 0; j < n; ++j) {
    double d = A[static_cast<size_t>(j) * n + j];
    for (int k = 0; k < j; ++k) d -= A[static_cast<size_t>(j) * n + k] * A[static_cast<size_t>(j) * n + k];
    NN_CHECK(d > 0.0, "GPTQ: the dampened Hessian is not positive definite (pivot " << d << " at column " << j
                                                                                   << "): raise the dampening");
    const double ljj = std::sqrt(d);
    A[static_cast<size_t>(j) * n + j] = ljj;
    for (int i = j + 1; i < n; ++i) {
      double v = A[static_cast<size_t>(i) * n + j];
      for (int k = 0; k < j; ++k) v -= A[static_cast<size_t>(i) * n + k] * A[static_cast<size_t>(j) * n + k];
      A[static_cast<size_t>(i) * n + j] = v / ljj;
    }
    for (int k = j + 1; k < n; ++k) A[static_cast<size_t>(j) * n + k] = 0.0;
  }
}

// U, the upper Cholesky factor of A^-1 (A^-1 = U^T U), row-major (n, n).
std::vector<double> inverse_cholesky_upper(std::vector<double> A, int n) {
  cholesky_lower(A, n);  // A = L L^T
  // Linv = L^-1 (lower), column by column by forward substitution
  std::vector<double> Li(static_cast<size_t>(n) * n, 0.0);
  for (int j = 0; j < n; ++j) {
    Li[static_cast<size_t>(j) * n + j] = 1.0 / A[static_cast<size_t>(j) * n + j];
    for (int i = j + 1; i < n; ++i) {
      double v = 0.0;
      for (int k = j; k < i; ++k) v -= A[static_cast<size_t>(i) * n + k] * Li[static_cast<size_t>(k) * n + j];
      Li[static_cast<size_t>(i) * n + j] = v / A[static_cast<size_t>(i) * n + i];
    }
  }
  // A^-1 = Linv^T Linv
  std::vector<double> inv(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = i; j < n; ++j) {
      double v = 0.0;
      for (int k = j; k < n; ++k) v += Li[static_cast<size_t>(k) * n + i] * Li[static_cast<size_t>(k) * n + j];
      inv[static_cast<size_t>(i) * n + j] = v;
      inv[static_cast<size_t>(j) * n + i] = v;
    }
  }
  cholesky_lower(inv, n);  // A^-1 = M M^T, U = M^T
  std::vector<double> U(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) U[static_cast<size_t>(i) * n + j] = inv[static_cast<size_t>(j) * n + i];
  return U;
}

}  // namespace

void gptq_quantize(float* W, int rows, int cols, const double* H, const GptqOptions& o, int8_t* q, float* scales) {
  NN_CHECK(o.bits >= 2 && o.bits <= 8, "GPTQ: bits must be in [2, 8], got " << o.bits);
  NN_CHECK(o.group >= 0, "GPTQ: group must be >= 0, got " << o.group);
  NN_CHECK(!o.gptq || H != nullptr, "GPTQ: no Hessian (calibrate first)");
  const int qmax = (1 << (o.bits - 1)) - 1;
  const int group = o.group > 0 ? o.group : cols;
  const int ngroups = (cols + group - 1) / group;
  // the scales, fixed from the original weights
  std::vector<float> sc(static_cast<size_t>(rows) * ngroups);
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < ngroups; ++g) {
      float amax = 0.0f;
      for (int j = g * group; j < std::min(cols, (g + 1) * group); ++j) amax = std::max(amax, std::fabs(W[static_cast<i64>(r) * cols + j]));
      sc[static_cast<size_t>(r) * ngroups + g] = amax / static_cast<float>(qmax);
    }
  }
  if (scales != nullptr) std::copy(sc.begin(), sc.end(), scales);
  auto round_to = [&](float w, float s) -> float {
    return s > 0.0f ? std::clamp(std::nearbyint(w / s), -static_cast<float>(qmax), static_cast<float>(qmax)) : 0.0f;
  };
  if (!o.gptq) {
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < cols; ++j) {
        const i64 i = static_cast<i64>(r) * cols + j;
        const float s = sc[static_cast<size_t>(r) * ngroups + j / group];
        const float qi = round_to(W[i], s);
        if (q != nullptr) q[i] = static_cast<int8_t>(qi);
        W[i] = qi * s;
      }
    }
    return;
  }
  std::vector<double> Hd(H, H + static_cast<i64>(cols) * cols);
  double mean_diag = 0.0;
  for (int i = 0; i < cols; ++i) {
    if (Hd[static_cast<size_t>(i) * cols + i] == 0.0) {
      // a dead input: nothing ever reaches this column, so its weights do not matter
      Hd[static_cast<size_t>(i) * cols + i] = 1.0;
      for (int r = 0; r < rows; ++r) W[static_cast<i64>(r) * cols + i] = 0.0f;
    }
    mean_diag += Hd[static_cast<size_t>(i) * cols + i];
  }
  mean_diag /= cols;
  for (int i = 0; i < cols; ++i) Hd[static_cast<size_t>(i) * cols + i] += o.damp * mean_diag;
  const std::vector<double> U = inverse_cholesky_upper(std::move(Hd), cols);
  std::vector<double> Wd(W, W + static_cast<i64>(rows) * cols);  // the sweep in double
  for (int i = 0; i < cols; ++i) {
    const double* u = U.data() + static_cast<size_t>(i) * cols;
    const double dii = u[i];
    for (int r = 0; r < rows; ++r) {
      double* w = Wd.data() + static_cast<i64>(r) * cols;
      const float s = sc[static_cast<size_t>(r) * ngroups + i / group];
      const float qi = round_to(static_cast<float>(w[i]), s);
      const double qv = static_cast<double>(qi) * s;
      const double err = (w[i] - qv) / dii;
      for (int j = i + 1; j < cols; ++j) w[j] -= err * u[j];
      w[i] = qv;
      if (q != nullptr) q[static_cast<i64>(r) * cols + i] = static_cast<int8_t>(qi);
      W[static_cast<i64>(r) * cols + i] = qi * s;
    }
  }
}

namespace {

// gptq_quantize on every block Linear of a host model, in place; `done` (may be empty) gets each
// matrix's integers and scales right after it is quantised. Returns the seconds spent.
using GptqDone = std::function<void(Linear, int, const Matrix&, const std::vector<int8_t>&, const std::vector<float>&)>;
double quantize_linears(GPT& model, const Calibration& cal, const GptqOptions& o, const GptqDone& done) {
  NN_CHECK(&gpt_memory(model) == &host_memory(), "GPTQ needs a model in host memory");
  const GPTConfig& c = model.config;
  NN_CHECK(!o.gptq || static_cast<int>(cal.layers.size()) == 4 * c.n_layer, "GPTQ: the calibration is of another model");
  std::vector<int8_t> q;
  std::vector<float> scales;
  double seconds = 0.0;
  for (int l = 0; l < c.n_layer; ++l) {
    for (Linear which : kLinears) {
      const Matrix M = linear_matrix(model.params, c, which, l);
      const double* H = nullptr;
      if (o.gptq) {
        const LinearStats& s = cal.at(which, l);
        NN_CHECK(s.in == M.cols && static_cast<i64>(s.gram.size()) == static_cast<i64>(M.cols) * M.cols,
                 "GPTQ: the calibration has no Gram matrix of this model's layer " << l);
        H = s.gram.data();
      }
      if (done) {
        const int group = o.group > 0 ? o.group : M.cols;
        q.assign(static_cast<size_t>(M.rows) * static_cast<size_t>(M.cols), 0);
        scales.assign(static_cast<size_t>(M.rows) * static_cast<size_t>((M.cols + group - 1) / group), 0.0f);
      }
      const auto t0 = std::chrono::steady_clock::now();
      gptq_quantize(M.w, M.rows, M.cols, H, o, done ? q.data() : nullptr, done ? scales.data() : nullptr);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (done) done(which, l, M, q, scales);
    }
  }
  return seconds;
}

// int4's storage (kernels/weight_format.h) filled from integers already chosen: q + 8 in the
// nibbles (column 2j low, 2j+1 high), the scales as given (one per group of kInt4Group).
kernels::PackedWeights pack_int4_integers(const std::vector<int8_t>& q, const std::vector<float>& scales, int rows,
                                          int cols) {
  const kernels::WeightFormat f = kernels::WeightFormat::int4;
  kernels::PackedWeights p;
  p.format = f;
  p.rows = rows;
  p.cols = cols;
  p.data = Array<uint8_t>(host_memory(), kernels::format_data_bytes(f, rows, cols));  // zero-filled
  p.scales = Array<float>(host_memory(), kernels::format_scale_count(f, rows, cols));
  NN_CHECK(scales.size() == p.scales.size() && q.size() == static_cast<size_t>(rows) * static_cast<size_t>(cols),
           "pack_int4_integers: sizes do not match int4's storage");
  for (size_t i = 0; i < q.size(); ++i) {
    NN_CHECK(q[i] >= -7 && q[i] <= 7, "pack_int4_integers: q = " << int{q[i]} << " is outside int4's [-7, 7]");
    const auto stored = static_cast<uint8_t>(q[i] + 8);
    p.data[i / 2] = static_cast<uint8_t>(p.data[i / 2] | ((i & 1) ? stored << 4 : stored));
  }
  for (size_t g = 0; g < scales.size(); ++g) p.scales[g] = scales[g];
  return p;
}

kernels::PackedWeights& packed_linear(InferenceModel& m, Linear which, int l) {
  const auto ul = static_cast<size_t>(l);
  switch (which) {
    case Linear::qkv: return m.qkvw[ul];
    case Linear::attproj: return m.attprojw[ul];
    case Linear::fc: return m.fcw[ul];
    case Linear::fcproj: return m.fcprojw[ul];
  }
  return m.qkvw[ul];
}

}  // namespace

double gptq_model(GPT& model, const Calibration& cal, const GptqOptions& o) {
  return quantize_linears(model, cal, o, {});
}

InferenceModel gptq_pack_int4(const GPT& model, const Calibration& cal, const GptqOptions& o, Memory& memory,
                              double* seconds) {
  NN_CHECK(o.bits == 4 && o.group == kernels::kInt4Group,
           "gptq_pack_int4: int4 stores 4-bit integers in groups of " << kernels::kInt4Group << " columns; got bits "
                                                                     << o.bits << ", group " << o.group);
  // the skeleton (embeddings, vectors, the int4 head); its block Linears are replaced below
  InferenceModel m = pack_model(model, kernels::WeightFormat::int4, memory);
  GPT work = gpt_move_to(model, host_memory());
  const double s = quantize_linears(work, cal, o, [&](Linear which, int l, const Matrix& M, const std::vector<int8_t>& q,
                                                      const std::vector<float>& scales) {
    kernels::PackedWeights p = pack_int4_integers(q, scales, M.rows, M.cols);
    packed_linear(m, which, l) = &memory == &host_memory() ? std::move(p) : p.to(memory);
  });
  if (seconds != nullptr) *seconds = s;
  return m;
}

// ---- BitNet b1.58 ---------------------------------------------------------------------------------

float ternarize(float* out, const float* W, int64_t n) {
  double sum = 0.0;
  for (i64 i = 0; i < n; ++i) sum += std::fabs(W[i]);
  const float gamma = n > 0 ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
  // kernels::ternary_pack's rule (gamma + 1e-5 as the divisor), so a trained model packs as it trained
  const float inv = 1.0f / (gamma + 1e-5f);
  for (i64 i = 0; i < n; ++i) out[i] = std::clamp(std::nearbyint(W[i] * inv), -1.0f, 1.0f) * gamma;
  return gamma;
}

void ternarize_params(std::vector<float>& params, const GPT& model) {
  NN_CHECK(static_cast<i64>(params.size()) == model.num_params, "ternarize_params: " << params.size()
                                                                   << " floats for a model of " << model.num_params);
  for (const ParamSlice& s : model.slices) {
    const auto f = s.spec->field;
    if (f == &ParameterTensors::qkvw || f == &ParameterTensors::attprojw || f == &ParameterTensors::fcw ||
        f == &ParameterTensors::fcprojw) {
      float* w = params.data() + s.offset;
      ternarize(w, w, s.numel);  // one gamma per matrix (per layer)
    }
  }
}

StepResult ternary_train_step(GPT& model, Backend& be, const std::vector<MicroBatch>& micro, int B, int T,
                              const StepOptions& o) {
  const size_t n = static_cast<size_t>(model.num_params);
  const std::vector<float> latents = model.params_memory.to_vector();
  std::vector<float> tern = latents;
  ternarize_params(tern, model);
  model.params_memory.upload(tern.data(), n);
  bool restored = false;
  auto restore = [&] {
    if (!restored) model.params_memory.upload(latents.data(), n);
    restored = true;
  };
  StepOptions so = o;
  const int K = static_cast<int>(micro.size());
  // after the last backward the gradients of the ternary model are in; the clip and AdamW
  // that train_step runs next must act on the latents (the straight-through estimator)
  so.after_backward = [&](int i) {
    if (o.after_backward) o.after_backward(i);
    if (i == K - 1) restore();
  };
  try {
    StepResult r = train_step(model, be, micro, B, T, so);
    restore();
    return r;
  } catch (...) {
    restore();
    throw;
  }
}

GPT ternary_copy(const GPT& model) {
  GPT copy = model;
  std::vector<float> p = copy.params_memory.to_vector();
  ternarize_params(p, copy);
  copy.params_memory.upload(p.data(), p.size());
  return copy;
}

void as_trained(LoadedCheckpoint& ck) {
  if (ck.state.ternary) ck.model = ternary_copy(ck.model);
  if (ck.state.int8_activations) set_int8_activations(ck.model, true);
}

void fake_quantize_rows_int8(float* x, int rows, int cols) {
  // quantize_rows_int8 then q s back into x: the value the int8 kernel multiplies (times s)
  std::vector<int8_t> q(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  std::vector<float> s(static_cast<size_t>(rows));
  kernels::quantize_rows_int8(x, rows, cols, q.data(), s.data());
  for (i64 r = 0; r < rows; ++r) {
    const float sr = s[static_cast<size_t>(r)];
    for (i64 c = 0; c < cols; ++c) x[r * cols + c] = static_cast<float>(q[static_cast<size_t>(r * cols + c)]) * sr;
  }
}

namespace {
// The hook set_int8_activations installs: in host memory in place; elsewhere (a GPU's) through
// a host copy, as the device has no rounding kernel of its own here
void int8_activation_hook(Memory& memory, float* x, int rows, int cols) {
  if (memory.is_host()) {
    fake_quantize_rows_int8(x, rows, cols);
    return;
  }
  const size_t bytes = static_cast<size_t>(rows) * static_cast<size_t>(cols) * sizeof(float);
  std::vector<float> h(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  memory.to_host(h.data(), x, bytes);
  fake_quantize_rows_int8(h.data(), rows, cols);
  memory.from_host(x, h.data(), bytes);
}
}  // namespace

void set_int8_activations(GPT& model, bool on) {
  NN_CHECK(!on || attention_of(model.config) != AttentionKind::flash,
           "int8 activations (W1.58A8) need full attention: flash attention's backward reads the attention output, "
           "which is the attention projection's input that the int8 rounding replaces in place (train with "
           "--attention full; llama's automatic choice is flash)");
  model.linear_input = on ? int8_activation_hook : nullptr;
}

}  // namespace gpt
