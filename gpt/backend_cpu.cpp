// gpt/backend_cpu.cpp: the fast CPU backend, `--backend cpu` (gpt/backend.h).
//
// The same ops as the naive backend (the nn/ plain loops, the reference), built from the
// lesson-03 pieces: kernels::sgemm (packed panels, SIMD micro-kernel, OpenMP over rows of C)
// for every matmul, the kernels/simd.h abstraction for everything element- and row-wise,
// poly_exp / gelu_tanh (kernels/elementwise.h, kernels/bias_gelu.h) instead of libm, and
// OpenMP over rows, heads or chunks. Fused where it saves a pass: residual + layernorm,
// matmul + bias + GELU (the bias and GELU in one pass after the sgemm).
//
// Determinism (gpt/backend.h): every output element is computed by ONE thread in a fixed
// order that does not depend on the thread count:
//   - row-wise ops (layernorm, softmax, attention per (b, h)) parallelise over rows or
//     heads: each row's arithmetic is the same whoever runs it;
//   - kernels::sgemm splits rows of C across threads; each element's k loop is the same;
//   - sums over rows into a parameter gradient (bias, layernorm weight/bias) are split
//     into FIXED chunks of rows (kRowChunk), each chunk summed into its own partial, the
//     partials then added in chunk order; or split by columns, each column summed in row
//     order (matmul dbias, encoder dwpe/dwte);
//   - sum_squares sums fixed chunks of kSumChunk elements, each in double, the chunk sums
//     then added in chunk order.
// No `reduction` clause and no atomics anywhere: those make the order depend on the team.
//
// Sizes as in gpt/backend.h: N = B * T rows, C channels, OC output channels, V vocabulary,
// NH heads, hs = C / NH.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "gpt/backend.h"
#include "kernels/bias_gelu.h"
#include "kernels/decode.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/simd.h"
#include "nn/check.h"
#include "nn/transformer.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gpt {

namespace {

using std::ptrdiff_t;
using kernels::Trans;
using V = kernels::simd::Native;  // the widest SIMD this build targets (AVX2: 8 lanes)
using S = kernels::simd::Portable<1>;  // one lane: the same arithmetic for the tails
using reg = V::reg;
constexpr int W = V::lanes;

// Below this many elements an element-wise op runs on one thread: waking the team costs a
// few microseconds, about what 16K floats cost to stream on one core.
constexpr int64_t kMinParallelElems = 16384;
// Rows per partial sum of a parameter gradient (layernorm dweight/dbias): fixed, so the
// partials, and the order they are added in, are the same for every thread count.
constexpr int kRowChunk = 32;
// Elements per double partial of sum_squares (same reason).
constexpr int64_t kSumChunk = 16384;

// ---- small SIMD helpers ---------------------------------------------------------------------

// sqrt on a register: kernels/simd.h has none (no kernel needed it before AdamW).
inline reg vsqrt(reg a) {
#if defined(__AVX512F__)
  return _mm512_sqrt_ps(a);
#elif defined(__AVX2__) && defined(__FMA__)
  return _mm256_sqrt_ps(a);
#elif defined(__ARM_NEON)
  return vsqrtq_f32(a);
#else
  for (float& x : a.v) x = std::sqrt(x);
  return a;
#endif
}

// sum x[0..n): 4 accumulators (FMA/add latency 4 x 2 ports wants >= 4 chains in flight),
// then the tail one element at a time. Fixed order for a given n.
inline float row_sum(const float* x, int n) {
  reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  int i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    for (int u = 0; u < 4; ++u) acc[u] = V::add(acc[u], V::load(x + i + u * W));
  }
  for (; i + W <= n; i += W) acc[0] = V::add(acc[0], V::load(x + i));
  float s = V::sum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
  for (; i < n; ++i) s += x[i];
  return s;
}

// sum (x[i] - m)^2 over [0, n)
inline float row_sq_dev(const float* x, float m, int n) {
  const reg vm = V::set1(m);
  reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  int i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    for (int u = 0; u < 4; ++u) {
      const reg d = V::sub(V::load(x + i + u * W), vm);
      acc[u] = V::fma(d, d, acc[u]);
    }
  }
  for (; i + W <= n; i += W) {
    const reg d = V::sub(V::load(x + i), vm);
    acc[0] = V::fma(d, d, acc[0]);
  }
  float s = V::sum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
  for (; i < n; ++i) s += (x[i] - m) * (x[i] - m);
  return s;
}

// ---- layernorm, one row -----------------------------------------------------------------------
// y = (x - mean) * rstd * w + b, mean and rstd from the two-pass formula (the row is in L1).
void layernorm_row(float* y, float* mean_out, float* rstd_out, const float* x, const float* weight,
                   const float* bias, int C) {
  const float m = row_sum(x, C) / static_cast<float>(C);
  const float var = row_sq_dev(x, m, C) / static_cast<float>(C);
  const float s = 1.0f / std::sqrt(var + static_cast<float>(nn::kLayernormEps));
  const reg vm = V::set1(m), vs = V::set1(s);
  int c = 0;
  for (; c + W <= C; c += W) {
    const reg xhat = V::mul(V::sub(V::load(x + c), vm), vs);
    V::store(y + c, V::fma(xhat, V::load(weight + c), bias != nullptr ? V::load(bias + c) : V::zero()));
  }
  for (; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + (bias != nullptr ? bias[c] : 0.0f);
  *mean_out = m;
  *rstd_out = s;
}

// ---- the GELU derivative on a register ------------------------------------------------------
// gelu(x) = x s,  s = 0.5 (1 + tanh(u)) = 1 / (1 + e),  e = exp(-2u),  u = k0 (x + k1 x^3).
// gelu'(x) = s + x ds/dx,  ds/dx = 2 s (1 - s) du/dx = 2 s^2 e du/dx   (1 - s = e s: no
// cancellation when s -> 1),  du/dx = k0 (1 + 3 k1 x^2).
template <class VV>
typename VV::reg gelu_grad(typename VV::reg x) {
  using R = typename VV::reg;
  const R x2 = VV::mul(x, x);
  // -2u = x (-2 k0 - 2 k0 k1 x^2), the constants of kernels::gelu_tanh
  const R minus_2u = VV::mul(x, VV::fma(x2, VV::set1(-0.0713548139f), VV::set1(-1.59576917f)));
  const R e = kernels::poly_exp<VV>(minus_2u);
  const R s = VV::div(VV::set1(1.0f), VV::add(VV::set1(1.0f), e));
  // du/dx = k0 + 3 k0 k1 x^2 = 0.797884561 + 0.107032211 x^2
  const R du = VV::fma(x2, VV::set1(0.107032211f), VV::set1(0.797884561f));
  const R two_x_s2_e = VV::mul(VV::mul(VV::add(x, x), VV::mul(s, s)), e);
  return VV::fma(two_x_s2_e, du, s);
}

// ---- attention helpers, one (b, h) --------------------------------------------------------------
// s[j] = sum_i q[i] * Mt[i * ld + j] for j in [0, nblk * W): a row of scores against keys
// stored transposed (Mt: (hs, ld), keys along the fast axis), so each step of i is one
// broadcast and nblk FMAs: no horizontal sums. Blocks in groups of up to 4 registers.
template <int NB>
inline void dot_blocks(float* s, const float* q, const float* Mt, int hs, int ld, float scale) {
  reg acc[NB];
  for (int u = 0; u < NB; ++u) acc[u] = V::zero();
  for (int i = 0; i < hs; ++i) {
    const reg qi = V::set1(q[i]);
    const float* row = Mt + static_cast<ptrdiff_t>(i) * ld;
    for (int u = 0; u < NB; ++u) acc[u] = V::fma(qi, V::load(row + u * W), acc[u]);
  }
  const reg vs = V::set1(scale);
  for (int u = 0; u < NB; ++u) V::store(s + u * W, V::mul(acc[u], vs));
}
void scores_row(float* s, const float* q, const float* Mt, int hs, int ld, int nblk, float scale) {
  int j = 0;
  for (; j + 4 <= nblk; j += 4) dot_blocks<4>(s + j * W, q, Mt + j * W, hs, ld, scale);
  switch (nblk - j) {
    case 3: dot_blocks<3>(s + j * W, q, Mt + j * W, hs, ld, scale); break;
    case 2: dot_blocks<2>(s + j * W, q, Mt + j * W, hs, ld, scale); break;
    case 1: dot_blocks<1>(s + j * W, q, Mt + j * W, hs, ld, scale); break;
    default: break;
  }
}

// y[0..hs) = sum_{j < n} a[j] * rows[j * ld + 0..hs), in j order (ASSIGNED to y).
void weighted_rows(float* y, const float* a, const float* rows, ptrdiff_t ld, int n, int hs) {
  int c = 0;
  for (; c + 4 * W <= hs; c += 4 * W) {  // 4 independent FMA chains
    reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
    for (int j = 0; j < n; ++j) {
      const reg aj = V::set1(a[j]);
      const float* r = rows + j * ld + c;
      for (int u = 0; u < 4; ++u) acc[u] = V::fma(aj, V::load(r + u * W), acc[u]);
    }
    for (int u = 0; u < 4; ++u) V::store(y + c + u * W, acc[u]);
  }
  for (; c + W <= hs; c += W) {
    reg acc = V::zero();
    for (int j = 0; j < n; ++j) acc = V::fma(V::set1(a[j]), V::load(rows + j * ld + c), acc);
    V::store(y + c, acc);
  }
  for (; c < hs; ++c) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc += a[j] * rows[j * ld + c];
    y[c] = acc;
  }
}

// Mt (hs, ld) = the head's slice [off, off + hs) of T rows of stride C3, transposed; columns
// [T, ld) zero (so padded lanes of a score block are finite).
void transpose_head(float* Mt, const float* base, ptrdiff_t C3, int off, int T, int hs, int ld) {
  for (int i = 0; i < hs; ++i) {
    float* row = Mt + static_cast<ptrdiff_t>(i) * ld;
    for (int t = 0; t < T; ++t) row[t] = base[t * C3 + off + i];
    for (int t = T; t < ld; ++t) row[t] = 0.0f;
  }
}

// Grow-only per-thread scratch for attention.
float* thread_scratch(size_t n) {
  static thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// ---- the backend ------------------------------------------------------------------------------
class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  // ---- encoder ----
  void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T,
                       int C, int V_) override {
    // inp (B,T), wte (V,C), wpe (>=T,C) -> out (B,T,C) = wte[inp] + wpe[t]
    const int N = B * T;
    for (int n = 0; n < N; ++n) {  // check every id before any thread reads a row
      NN_CHECK(0 <= inp[n] && inp[n] < V_, "encoder: token id " << inp[n] << " at position (b=" << n / T
                                                                << ", t=" << n % T << ") is outside [0, "
                                                                << V_
                                                                << "): the data and the model's "
                                                                   "vocabulary size disagree");
    }
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * C >= kMinParallelElems)
    for (int n = 0; n < N; ++n) {
      const float* tok = wte + static_cast<ptrdiff_t>(inp[n]) * C;
      const float* pos = wpe + static_cast<ptrdiff_t>(n % T) * C;
      float* o = out + static_cast<ptrdiff_t>(n) * C;
      for (int c = 0; c < C; ++c) o[c] = tok[c] + pos[c];  // vectorised by the compiler
    }
  }

  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T,
                        int C, int /*V*/) override {
    // dout (B,T,C) -> dwte (V,C) +=, dwpe (>=T,C) +=
    // dwpe: position t sums over b = 0..B-1 in order, one thread per t.
    // dwte: the positions are bucketed by token id (a stable counting sort), then one thread
    // per id sums its positions in order: the naive loop's order, without shared writes.
    const int N = B * T;
    int32_t vmax = 0;
    for (int n = 0; n < N; ++n) vmax = std::max(vmax, inp[n]);
    const int nids = vmax + 1;
    bucket_start_.assign(static_cast<size_t>(nids) + 1, 0);
    for (int n = 0; n < N; ++n) ++bucket_start_[static_cast<size_t>(inp[n]) + 1];
    for (int v = 0; v < nids; ++v) bucket_start_[v + 1] += bucket_start_[v];
    bucket_pos_.resize(static_cast<size_t>(N));
    {
      std::vector<int> fill(bucket_start_.begin(), bucket_start_.end() - 1);
      for (int n = 0; n < N; ++n) bucket_pos_[fill[inp[n]]++] = n;
    }
    const bool par = static_cast<int64_t>(N) * C >= kMinParallelElems;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static) nowait
      for (int t = 0; t < T; ++t) {
        float* dp = dwpe + static_cast<ptrdiff_t>(t) * C;
        for (int b = 0; b < B; ++b) {
          const float* d = dout + (static_cast<ptrdiff_t>(b) * T + t) * C;
          for (int c = 0; c < C; ++c) dp[c] += d[c];
        }
      }
#pragma omp for schedule(static)
      for (int v = 0; v < nids; ++v) {
        float* dt = dwte + static_cast<ptrdiff_t>(v) * C;
        for (int k = bucket_start_[v]; k < bucket_start_[v + 1]; ++k) {
          const float* d = dout + static_cast<ptrdiff_t>(bucket_pos_[k]) * C;
          for (int c = 0; c < C; ++c) dt[c] += d[c];
        }
      }
    }
  }

  // ---- layernorm ----
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                         const float* bias, int N, int C) override {
    // inp (N,C), weight (C), bias (C) -> out (N,C), mean (N), rstd (N); one thread per row
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * C >= kMinParallelElems)
    for (int n = 0; n < N; ++n) {
      const ptrdiff_t off = static_cast<ptrdiff_t>(n) * C;
      layernorm_row(out + off, mean + n, rstd + n, inp + off, weight, bias, C);
    }
  }

  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, int N,
                          int C) override {
    // dout (N,C), inp (N,C) -> dinp (N,C) +=, dweight (C) +=, dbias (C) +=
    // Rows in fixed chunks of kRowChunk; chunk k sums its rows' dweight/dbias terms into
    // partial k (in L1), the partials are added in chunk order at the end.
    const int nchunks = (N + kRowChunk - 1) / kRowChunk;
    partials_.resize(static_cast<size_t>(nchunks) * 2 * static_cast<size_t>(C));
    float* part = partials_.data();
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * C >= kMinParallelElems)
    for (int k = 0; k < nchunks; ++k) {
      float* pdw = part + static_cast<ptrdiff_t>(k) * 2 * C;  // (C) this chunk's dweight
      float* pdb = pdw + C;                                   // (C) this chunk's dbias
      std::fill(pdw, pdw + 2 * C, 0.0f);
      const int n_end = std::min(N, (k + 1) * kRowChunk);
      for (int n = k * kRowChunk; n < n_end; ++n) {
        const ptrdiff_t off = static_cast<ptrdiff_t>(n) * C;
        layernorm_backward_row(dinp + off, pdw, pdb, dout + off, inp + off, weight, mean[n], rstd[n], C);
      }
    }
    // dweight[c] += sum_k partial_k[c], k in order (cheap: nchunks x 2C adds)
    for (int c = 0; c < C; ++c) {
      float sw = 0.0f, sb = 0.0f;
      for (int k = 0; k < nchunks; ++k) {
        sw += part[static_cast<ptrdiff_t>(k) * 2 * C + c];
        sb += part[static_cast<ptrdiff_t>(k) * 2 * C + C + c];
      }
      dweight[c] += sw;
      if (dbias != nullptr) dbias[c] += sb;
    }
  }

  // ---- matmul ----
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                      int OC) override {
    // out (N,OC) = inp (N,C) weight^T (OC,C) + bias (OC): the bias is written first and
    // the sgemm adds onto it (beta = 1), saving a separate read-modify-write pass.
    if (bias != nullptr) {
      fill_rows(out, bias, N, OC);
      kernels::sgemm(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, 1.0f, out, OC);
    } else {
      kernels::sgemm(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC);
    }
  }

  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC) override {
    // dout (N,OC), inp (N,C), weight (OC,C)
    //   dinp (N,C)     = dout (N,OC) weight (OC,C)       assigned (beta 0)
    //   dweight (OC,C) += dout^T (OC,N) inp (N,C)        accumulated (beta 1)
    //   dbias (OC)     += column sums of dout
#ifdef _OPENMP
    // On two threads, the two products (the same FLOPs each) run side by side, one per
    // thread, each a single-thread sgemm: no barrier between k blocks, no shared packing.
    // Measured on the recording machine: faster than both products split across the two
    // threads one after the other. Each element is computed by the same micro-kernel
    // sequence either way, so the result is bit-identical to the threaded path.
    if (dinp != nullptr && omp_get_max_threads() == 2 && !omp_in_parallel() &&
        static_cast<double>(N) * C * OC > 64.0 * 64.0 * 64.0) {
#pragma omp parallel sections num_threads(2)
      {
#pragma omp section
        kernels::sgemm_v5(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
#pragma omp section
        {
          kernels::sgemm_v5(Trans::Yes, Trans::No, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
          if (dbias != nullptr) column_sums_add(dbias, dout, N, OC);
        }
      }
      return;
    }
#endif
    if (dinp != nullptr) {
      kernels::sgemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
    }
    kernels::sgemm(Trans::Yes, Trans::No, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias != nullptr) column_sums_add(dbias, dout, N, OC);
  }

  // ---- attention ----
  void attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    // qkv (B,T,3C) -> out (B,T,C), preatt, att (B,NH,T,T); one thread per (b, h)
    check_attention(B, T, C, NH);
    const int hs = C / NH;
    const ptrdiff_t C3 = 3 * static_cast<ptrdiff_t>(C);
    const int ld = (T + W - 1) / W * W;  // key axis padded to whole registers
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const int items = B * NH;
#pragma omp parallel for schedule(static) if (items > 1 && static_cast<int64_t>(B) * T * T * C >= 65536)
    for (int item = 0; item < items; ++item) {
      const int b = item / NH, h = item % NH;
      float* Kt = thread_scratch(static_cast<size_t>(hs) * ld + ld);  // (hs, ld), then a row (ld)
      float* srow = Kt + static_cast<ptrdiff_t>(hs) * ld;
      const float* base = qkv + static_cast<ptrdiff_t>(b) * T * C3;  // (T, 3C) of batch row b
      transpose_head(Kt, base, C3, C + h * hs, T, hs, ld);
      const float* vbase = base + 2 * C + h * hs;  // v_t2 = vbase + t2 * C3
      for (int t = 0; t < T; ++t) {
        const ptrdiff_t row = (static_cast<ptrdiff_t>(item) * T + t) * T;
        float* prow = preatt + row;
        float* arow = att + row;
        const float* q = base + t * C3 + h * hs;
        // pass 1: scores for keys 0..t (whole blocks; lanes past t are masked below)
        const int nblk = (t + 1 + W - 1) / W;
        scores_row(srow, q, Kt, hs, ld, nblk, scale);
        const int nlanes = nblk * W;
        for (int j = t + 1; j < nlanes; ++j) srow[j] = -std::numeric_limits<float>::infinity();
        // pass 2: softmax over 0..t; the masked lanes give exp(-inf) = exactly 0 (poly_exp
        // clamps at -88, where its result is 0)
        reg vmax = V::set1(-std::numeric_limits<float>::infinity());
        for (int j = 0; j < nlanes; j += W) vmax = V::max(vmax, V::load(srow + j));
        const float maxval = V::hmax(vmax);
        for (int j = 0; j <= t; ++j) prow[j] = srow[j];
        for (int j = t + 1; j < T; ++j) prow[j] = 0.0f;
        const reg vm = V::set1(maxval);
        reg vsum = V::zero();
        for (int j = 0; j < nlanes; j += W) {
          const reg e = kernels::poly_exp<V>(V::sub(V::load(srow + j), vm));
          V::store(srow + j, e);
          vsum = V::add(vsum, e);
        }
        const float inv = 1.0f / V::sum(vsum);
        for (int j = 0; j <= t; ++j) arow[j] = srow[j] * inv;
        for (int j = t + 1; j < T; ++j) arow[j] = 0.0f;
        // pass 3: out_t = sum_{t2 <= t} att[t2] v_t2
        weighted_rows(out + (static_cast<ptrdiff_t>(b) * T + t) * C + h * hs, arow, vbase, C3, t + 1, hs);
      }
    }
  }

  void attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                          const float* att, int B, int T, int C, int NH) override {
    // dout (B,T,C), qkv (B,T,3C), att (B,NH,T,T) -> dqkv (B,T,3C) ASSIGNED (each element
    // written once: head h of batch row b is owned by one thread); dpreatt, datt scratch
    check_attention(B, T, C, NH);
    const int hs = C / NH;
    const ptrdiff_t C3 = 3 * static_cast<ptrdiff_t>(C);
    const int ld = (T + W - 1) / W * W;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const int items = B * NH;
#pragma omp parallel for schedule(static) if (items > 1 && static_cast<int64_t>(B) * T * T * C >= 65536)
    for (int item = 0; item < items; ++item) {
      const int b = item / NH, h = item % NH;
      float* Vt = thread_scratch(static_cast<size_t>(hs) * ld + 2 * static_cast<size_t>(ld));
      float* srow = Vt + static_cast<ptrdiff_t>(hs) * ld;  // (ld) datt of one row
      float* coef = srow + ld;                             // (ld) a column of dpreatt or att
      const float* base = qkv + static_cast<ptrdiff_t>(b) * T * C3;
      float* dbase = dqkv + static_cast<ptrdiff_t>(b) * T * C3;
      const float* dobase = dout + static_cast<ptrdiff_t>(b) * T * C + h * hs;  // dout_t = dobase + t*C
      transpose_head(Vt, base, C3, 2 * C + h * hs, T, hs, ld);
      const float* qh = base + h * hs;
      const float* kh = base + C + h * hs;
      const ptrdiff_t mat = static_cast<ptrdiff_t>(item) * T * T;  // this head's (T,T)
      for (int t = 0; t < T; ++t) {
        const ptrdiff_t row = mat + static_cast<ptrdiff_t>(t) * T;
        const float* arow = att + row;
        float* darow = datt + row;
        float* dprow = dpreatt + row;
        // datt[t2] = dout_t . v_t2 for t2 <= t
        const int nblk = (t + 1 + W - 1) / W;
        scores_row(srow, dobase + static_cast<ptrdiff_t>(t) * C, Vt, hs, ld, nblk, 1.0f);
        // softmax backward: dpreatt[i] = att_i (datt_i - sum_j att_j datt_j)
        float weighted = 0.0f;
        for (int j = 0; j <= t; ++j) weighted += arow[j] * srow[j];
        for (int j = 0; j <= t; ++j) {
          darow[j] = srow[j];
          dprow[j] = arow[j] * (srow[j] - weighted);
        }
        for (int j = t + 1; j < T; ++j) {
          darow[j] = 0.0f;
          dprow[j] = 0.0f;
        }
        // dq_t = sum_{t2 <= t} (dpreatt[t2] scale) k_t2
        for (int j = 0; j <= t; ++j) coef[j] = dprow[j] * scale;
        weighted_rows(dbase + t * C3 + h * hs, coef, kh, C3, t + 1, hs);
      }
      // dk_t2 = sum_{t >= t2} (dpreatt[t][t2] scale) q_t;  dv_t2 = sum_{t >= t2} att[t][t2] dout_t
      for (int t2 = 0; t2 < T; ++t2) {
        const int n = T - t2;
        for (int j = 0; j < n; ++j) coef[j] = dpreatt[mat + static_cast<ptrdiff_t>(t2 + j) * T + t2] * scale;
        weighted_rows(dbase + t2 * C3 + C + h * hs, coef, qh + t2 * C3, C3, n, hs);
        for (int j = 0; j < n; ++j) coef[j] = att[mat + static_cast<ptrdiff_t>(t2 + j) * T + t2];
        weighted_rows(dbase + t2 * C3 + 2 * C + h * hs, coef, dobase + static_cast<ptrdiff_t>(t2) * C, C, n,
                      hs);
      }
    }
  }

  // ---- GELU ----
  void gelu_forward(float* out, const float* inp, int64_t n) override {
    // out = gelu(inp), SIMD (kernels::gelu_tanh), OpenMP over blocks of registers
    const int64_t nv = n / W;
#pragma omp parallel for schedule(static) if (n >= kMinParallelElems)
    for (int64_t k = 0; k < nv; ++k) {
      V::store(out + k * W, kernels::gelu_tanh<V>(V::load(inp + k * W)));
    }
    for (int64_t i = nv * W; i < n; ++i) out[i] = kernels::gelu_tanhf(inp[i]);
  }

  void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) override {
    // dinp = dout * gelu'(inp), assigned
    const int64_t nv = n / W;
#pragma omp parallel for schedule(static) if (n >= kMinParallelElems)
    for (int64_t k = 0; k < nv; ++k) {
      V::store(dinp + k * W, V::mul(V::load(dout + k * W), gelu_grad<V>(V::load(inp + k * W))));
    }
    for (int64_t i = nv * W; i < n; ++i) dinp[i] = dout[i] * gelu_grad<S>(S::set1(inp[i])).v[0];
  }

  // ---- residual ----
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElems)
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  }

  // ---- dropout ----
  void dropout_forward(float* out, float* mask, const float* inp, int64_t n, float p,
                       uint64_t seed) override {
    // mask_i = u_i < p ? 0 : 1 / (1 - p), u_i = nn::dropout_uniform(seed, i): the naive mask
    NN_CHECK(p >= 0.0f && p < 1.0f, "dropout: p = " << p
                                                    << " is outside [0, 1): it is the probability "
                                                       "of dropping an element");
    const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (n >= kMinParallelElems)
    for (int64_t i = 0; i < n; ++i) {
      const float m = nn::dropout_uniform(seed, static_cast<uint64_t>(i)) < p ? 0.0f : scale;
      const float x = inp[i];  // out may alias inp
      mask[i] = m;
      out[i] = x * m;
    }
  }

  void dropout_backward(float* dinp, const float* dout, const float* mask, int64_t n) override {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElems)
    for (int64_t i = 0; i < n; ++i) dinp[i] = dout[i] * mask[i];
  }

  // ---- softmax + cross-entropy ----
  float crossentropy_forward(float* probs, float* losses, const float* logits, const int32_t* targets, int N,
                             int V_) override {
    // logits (N,V), targets (N) -> probs (N,V), losses (N); returns the mean loss
    for (int n = 0; n < N; ++n) {
      NN_CHECK(0 <= targets[n] && targets[n] < V_, "cross-entropy target " << targets[n] << " at row " << n
                                                                          << " is outside [0, " << V_
                                                                          << "): labels and model disagree");
    }
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * V_ >= kMinParallelElems / 4)
    for (int n = 0; n < N; ++n) {
      const float* x = logits + static_cast<ptrdiff_t>(n) * V_;
      float* p = probs + static_cast<ptrdiff_t>(n) * V_;
      // max, then e = exp(x - max) into probs and their sum, then scale by 1 / sum
      reg vmax = V::set1(-std::numeric_limits<float>::infinity());
      int v = 0;
      for (; v + W <= V_; v += W) vmax = V::max(vmax, V::load(x + v));
      float maxval = V::hmax(vmax);
      for (; v < V_; ++v) maxval = std::max(maxval, x[v]);
      const reg vm = V::set1(maxval);
      reg vsum = V::zero();
      v = 0;
      for (; v + W <= V_; v += W) {
        const reg e = kernels::poly_exp<V>(V::sub(V::load(x + v), vm));
        V::store(p + v, e);
        vsum = V::add(vsum, e);
      }
      float sum = V::sum(vsum);
      for (; v < V_; ++v) {
        p[v] = kernels::poly_expf(x[v] - maxval);
        sum += p[v];
      }
      const float inv = 1.0f / sum;
      for (v = 0; v < V_; ++v) p[v] *= inv;
      // loss = logsumexp(x) - x[target]: finite even when p[target] underflows
      losses[n] = maxval + std::log(sum) - x[targets[n]];
    }
    double total = 0.0;
    for (int n = 0; n < N; ++n) total += static_cast<double>(losses[n]);
    return static_cast<float>(total / N);
  }

  void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, int N, int V_,
                             float dloss) override {
    // dlogits = (probs - onehot(target)) * dloss / N, assigned
    const float s = dloss / static_cast<float>(N);
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * V_ >= kMinParallelElems)
    for (int n = 0; n < N; ++n) {
      const float* p = probs + static_cast<ptrdiff_t>(n) * V_;
      float* d = dlogits + static_cast<ptrdiff_t>(n) * V_;
      for (int v = 0; v < V_; ++v) d[v] = s * p[v];
      d[targets[n]] = s * (p[targets[n]] - 1.0f);
    }
  }

  // ---- fused ----
  void residual_layernorm_forward(float* residual_out, float* ln_out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* weight, const float* bias, int N,
                                  int C) override {
    // residual_out = a + b, ln_out = layernorm(residual_out), row by row: the sum is read
    // back from L1 by the statistics and the normalisation, not from memory.
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * C >= kMinParallelElems)
    for (int n = 0; n < N; ++n) {
      const ptrdiff_t off = static_cast<ptrdiff_t>(n) * C;
      float* r = residual_out + off;
      int c = 0;
      for (; c + W <= C; c += W) V::store(r + c, V::add(V::load(a + off + c), V::load(b + off + c)));
      for (; c < C; ++c) r[c] = a[off + c] + b[off + c];
      layernorm_row(ln_out + off, mean + n, rstd + n, r, weight, bias, C);
    }
  }

  void matmul_gelu_forward(float* pre, float* out, const float* inp, const float* weight, const float* bias,
                           int N, int C, int OC) override {
    // pre = inp weight^T + bias, out = gelu(pre): the sgemm, then bias + GELU in one pass
    kernels::sgemm(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, pre, OC);
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * OC >= kMinParallelElems)
    for (int n = 0; n < N; ++n) {
      float* pr = pre + static_cast<ptrdiff_t>(n) * OC;
      float* o = out + static_cast<ptrdiff_t>(n) * OC;
      int c = 0;
      for (; c + W <= OC; c += W) {
        reg x = V::load(pr + c);
        if (bias != nullptr) x = V::add(x, V::load(bias + c));
        V::store(pr + c, x);
        V::store(o + c, kernels::gelu_tanh<V>(x));
      }
      for (; c < OC; ++c) {
        const float x = bias != nullptr ? pr[c] + bias[c] : pr[c];
        pr[c] = x;
        o[c] = kernels::gelu_tanhf(x);
      }
    }
  }

  // ---- inference (lesson 10): the fastest versions of kernels/decode.h ----
  void matvec_forward(float* out, const float* inp, const kernels::WeightsView& w, const float* bias,
                      int N) override {
    kernels::matvec(out, inp, w, bias, N);
  }
  void attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                        int NH, int maxT) override {
    kernels::attention_decode(out, kcache, vcache, qkv, B, n, pos, C, NH, maxT);
  }

  // ---- optimizer helpers ----
  double sum_squares(const float* g, int64_t n) override {
    // fixed chunks of kSumChunk: each chunk sums blocks of 4W squares in float lanes (at
    // most 4 terms per lane per block), each block into the chunk's double; the chunk sums
    // are then added in chunk order. Neither step depends on the thread count.
    const int64_t nchunks = (n + kSumChunk - 1) / kSumChunk;
    chunk_sums_.resize(static_cast<size_t>(nchunks));
    double* cs = chunk_sums_.data();
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (int64_t k = 0; k < nchunks; ++k) {
      const int64_t lo = k * kSumChunk, hi = std::min(n, lo + kSumChunk);
      double s = 0.0;
      int64_t i = lo;
      for (; i + 16 * W <= hi; i += 16 * W) {
        reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
        for (int r = 0; r < 4; ++r) {
          for (int u = 0; u < 4; ++u) {
            const reg x = V::load(g + i + (4 * r + u) * W);
            acc[u] = V::fma(x, x, acc[u]);
          }
        }
        s += static_cast<double>(V::sum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3]))));
      }
      for (; i < hi; ++i) s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
      cs[k] = s;
    }
    double total = 0.0;
    for (int64_t k = 0; k < nchunks; ++k) total += cs[k];
    return total;
  }

  void scale(float* x, float s, int64_t n) override {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElems)
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  }

  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                    float eps, float weight_decay, int64_t t) override {
    // torch.optim.AdamW (gpt/backend.h), SIMD over the flat buffer:
    //   p -= lr wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
    //   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
    const double tt = static_cast<double>(t);
    const float step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(beta1), tt)));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), tt)));
    const float decay = lr * weight_decay;
    const int64_t nv = n / W;
#pragma omp parallel for schedule(static) if (n >= kMinParallelElems)
    for (int64_t k = 0; k < nv; ++k) {
      const int64_t i = k * W;
      adamw_lanes<V>(p + i, g + i, m + i, v + i, decay, beta1, beta2, step_size, bc2_sqrt, eps);
    }
    for (int64_t i = nv * W; i < n; ++i) {
      adamw_lanes<S>(p + i, g + i, m + i, v + i, decay, beta1, beta2, step_size, bc2_sqrt, eps);
    }
  }

 private:
  std::vector<float> partials_;      // layernorm_backward: (nchunks, 2, C)
  std::vector<double> chunk_sums_;   // sum_squares: (nchunks)
  std::vector<int> bucket_start_;    // encoder_backward: (V + 1) offsets into bucket_pos_
  std::vector<int> bucket_pos_;      // encoder_backward: (N) positions sorted by token id

  static void check_attention(int B, int T, int C, int NH) {
    NN_CHECK(B >= 1 && T >= 1 && C >= 1 && NH >= 1,
             "attention: expected positive sizes, got B=" << B << " T=" << T << " C=" << C << " NH=" << NH
                                                          << ": check the model config");
    NN_CHECK(C % NH == 0, "attention: C=" << C << " is not divisible by NH=" << NH
                                          << ": pick n_head so that C / n_head is a whole head size");
  }

  // One row of the layernorm backward; dinp ACCUMULATES, pdw/pdb (the chunk's partials) too.
  static void layernorm_backward_row(float* dx, float* pdw, float* pdb, const float* dy, const float* x,
                                     const float* weight, float m, float s, int C) {
    // mean(g) and mean(g xhat), g = dy * w, xhat = (x - m) s
    const reg vm = V::set1(m), vs = V::set1(s);
    reg ag = V::zero(), agx = V::zero();
    int c = 0;
    for (; c + W <= C; c += W) {
      const reg xhat = V::mul(V::sub(V::load(x + c), vm), vs);
      const reg gg = V::mul(V::load(dy + c), V::load(weight + c));
      ag = V::add(ag, gg);
      agx = V::fma(gg, xhat, agx);
    }
    float gsum = V::sum(ag), gxsum = V::sum(agx);
    for (int j = c; j < C; ++j) {
      const float xhat = (x[j] - m) * s;
      const float gg = dy[j] * weight[j];
      gsum += gg;
      gxsum += gg * xhat;
    }
    const float g_mean = gsum / static_cast<float>(C);
    const float gx_mean = gxsum / static_cast<float>(C);
    // dx += s (g - mean(g) - xhat mean(g xhat));  dw += dy xhat;  db += dy
    const reg vgm = V::set1(g_mean), vgx = V::set1(gx_mean);
    c = 0;
    for (; c + W <= C; c += W) {
      const reg xhat = V::mul(V::sub(V::load(x + c), vm), vs);
      const reg d = V::load(dy + c);
      const reg gg = V::mul(d, V::load(weight + c));
      V::store(pdb + c, V::add(V::load(pdb + c), d));
      V::store(pdw + c, V::fma(d, xhat, V::load(pdw + c)));
      const reg inner = V::sub(V::sub(gg, vgm), V::mul(xhat, vgx));
      V::store(dx + c, V::fma(vs, inner, V::load(dx + c)));
    }
    for (; c < C; ++c) {
      const float xhat = (x[c] - m) * s;
      const float gg = dy[c] * weight[c];
      pdb[c] += dy[c];
      pdw[c] += dy[c] * xhat;
      dx[c] += s * (gg - g_mean - xhat * gx_mean);
    }
  }

  // out (N,OC) = bias broadcast to every row
  static void fill_rows(float* out, const float* bias, int N, int OC) {
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * OC >= 4 * kMinParallelElems)
    for (int n = 0; n < N; ++n) std::copy(bias, bias + OC, out + static_cast<ptrdiff_t>(n) * OC);
  }

  // dst (cols) += column sums of src (rows, cols): split by blocks of columns, each column
  // summed in row order by one thread (the same order for every team size).
  static void column_sums_add(float* dst, const float* src, int rows, int cols) {
    constexpr int kCols = 4 * W;  // one block: 4 registers of column sums
    const int nblocks = (cols + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (nblocks > 1 && static_cast<int64_t>(rows) * cols >= kMinParallelElems)
    for (int blk = 0; blk < nblocks; ++blk) {
      const int c0 = blk * kCols, c1 = std::min(cols, c0 + kCols);
      if (c1 - c0 == kCols) {
        reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
        for (int r = 0; r < rows; ++r) {
          const float* row = src + static_cast<ptrdiff_t>(r) * cols + c0;
          for (int u = 0; u < 4; ++u) acc[u] = V::add(acc[u], V::load(row + u * W));
        }
        for (int u = 0; u < 4; ++u) V::store(dst + c0 + u * W, V::add(V::load(dst + c0 + u * W), acc[u]));
      } else {
        float acc[kCols] = {};
        for (int r = 0; r < rows; ++r) {
          const float* row = src + static_cast<ptrdiff_t>(r) * cols;
          for (int c = c0; c < c1; ++c) acc[c - c0] += row[c];
        }
        for (int c = c0; c < c1; ++c) dst[c] += acc[c - c0];
      }
    }
  }

  template <class VV>
  static void adamw_lanes(float* p, const float* g, float* m, float* v, float decay, float beta1, float beta2,
                          float step_size, float bc2_sqrt, float eps) {
    using R = typename VV::reg;
    const R gi = VV::load(g);
    R pi = VV::load(p);
    pi = VV::sub(pi, VV::mul(VV::set1(decay), pi));  // p -= lr wd p
    const R mi = VV::add(VV::mul(VV::set1(beta1), VV::load(m)), VV::mul(VV::set1(1.0f - beta1), gi));
    const R vi =
        VV::add(VV::mul(VV::set1(beta2), VV::load(v)), VV::mul(VV::set1(1.0f - beta2), VV::mul(gi, gi)));
    R root;
    if constexpr (std::is_same_v<VV, S>) {
      root = S::set1(std::sqrt(vi.v[0]));
    } else {
      root = vsqrt(vi);
    }
    const R denom = VV::add(VV::div(root, VV::set1(bc2_sqrt)), VV::set1(eps));
    pi = VV::sub(pi, VV::div(VV::mul(VV::set1(step_size), mi), denom));
    VV::store(m, mi);
    VV::store(v, vi);
    VV::store(p, pi);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace gpt
