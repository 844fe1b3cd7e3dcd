// kernels/attention.cpp: causal multi-head self-attention, plain loops and the threaded
// SIMD version (kernels/attention.h).
//
// v1 is the version a student steps through. Per (b, t, h) the forward does three passes
// over the earlier positions t2 <= t, exactly as llm.c's CPU attention_forward: scores
// q.k, softmax, weighted sum of v. The backward walks the same three passes in reverse.
// O(B NH Tn^2 hs) work.
#include "kernels/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/elementwise.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace kernels {

using std::ptrdiff_t;

// ---- v1: plain loops --------------------------------------------------------------------
template <typename F>
void attention_forward_v1(F* out, F* preatt, F* att, const F* qkv, int B, int Tn, int C, int NH) {
  // qkv (B, Tn, 3C), out (B, Tn, C), preatt (B, NH, Tn, Tn), att (B, NH, Tn, Tn)
  const int C3 = 3 * C;
  const int hs = C / NH;  // head size
  // Dividing by sqrt(hs) keeps the scores' variance ~1 when q and k have unit variance, so
  // the softmax does not saturate into a one-hot as hs grows.
  const F scale = F(1) / std::sqrt(static_cast<F>(hs));

  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      for (int h = 0; h < NH; ++h) {
        // this head's query at position t: q = qkv[b, t, h*hs : (h+1)*hs]
        const F* q = qkv + (static_cast<ptrdiff_t>(b) * Tn + t) * C3 + h * hs;
        const ptrdiff_t row = ((static_cast<ptrdiff_t>(b) * NH + h) * Tn + t) * Tn;
        F* preatt_row = preatt + row;  // (Tn): scores of query t against every key t2
        F* att_row = att + row;        // (Tn)

        // pass 1: preatt[t2] = q . k_t2 / sqrt(hs), only for t2 <= t (the causal mask)
        F maxval = -std::numeric_limits<F>::infinity();
        for (int t2 = 0; t2 <= t; ++t2) {
          const F* k = qkv + (static_cast<ptrdiff_t>(b) * Tn + t2) * C3 + C + h * hs;  // +C: key
          F dot = 0;
          for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
          dot *= scale;
          preatt_row[t2] = dot;
          if (dot > maxval) maxval = dot;
        }

        // pass 2: softmax over t2 <= t. att[t2] = exp(p_t2 - max) / sum_j exp(p_j - max);
        // subtracting the max changes nothing mathematically and keeps exp from overflowing.
        F expsum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const F e = std::exp(preatt_row[t2] - maxval);
          att_row[t2] = e;
          expsum += e;
        }
        const F expsum_inv = F(1) / expsum;  // >= 1 term equals exp(0) = 1, so never 0
        for (int t2 = 0; t2 < Tn; ++t2) {
          if (t2 <= t) {
            att_row[t2] *= expsum_inv;
          } else {
            // masked positions: probability exactly 0 (and a defined preatt, not garbage)
            att_row[t2] = 0;
            preatt_row[t2] = 0;
          }
        }

        // pass 3: out_t = sum_{t2 <= t} att[t2] v_t2, into this head's slice of out
        F* o = out + (static_cast<ptrdiff_t>(b) * Tn + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const F* v = qkv + (static_cast<ptrdiff_t>(b) * Tn + t2) * C3 + 2 * C + h * hs;  // +2C
          const F a = att_row[t2];
          for (int i = 0; i < hs; ++i) o[i] += a * v[i];
        }
      }
    }
  }
}

// ---- backward v1: the three passes in reverse -----------------------------------------------
template <typename F>
void attention_backward_v1(F* dqkv, F* dpreatt, F* datt, const F* dout, const F* qkv, const F* att,
                        int B, int Tn, int C, int NH) {
  // dout (B, Tn, C), qkv (B, Tn, 3C), att (B, NH, Tn, Tn)
  // -> dqkv (B, Tn, 3C) assigned; dpreatt, datt (B, NH, Tn, Tn) scratch
  const int C3 = 3 * C;
  const int hs = C / NH;
  const F scale = F(1) / std::sqrt(static_cast<F>(hs));

  // dqkv is an activation gradient: assigned. Key t2 and value t2 receive contributions
  // from every later query t >= t2, so the loops below sum into dqkv; clearing it first
  // makes the op as a whole an assignment (a NaN left in dqkv by the caller cannot survive).
  const ptrdiff_t n_qkv = static_cast<ptrdiff_t>(B) * Tn * C3;
  for (ptrdiff_t i = 0; i < n_qkv; ++i) dqkv[i] = 0;

  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      for (int h = 0; h < NH; ++h) {
        const ptrdiff_t row = ((static_cast<ptrdiff_t>(b) * NH + h) * Tn + t) * Tn;
        const F* att_row = att + row;
        F* datt_row = datt + row;
        F* dpreatt_row = dpreatt + row;
        const ptrdiff_t qoff = (static_cast<ptrdiff_t>(b) * Tn + t) * C3 + h * hs;
        const F* q = qkv + qoff;
        F* dq = dqkv + qoff;
        const F* dout_t = dout + (static_cast<ptrdiff_t>(b) * Tn + t) * C + h * hs;

        // pass 3 reversed: out_t = sum_t2 att[t2] v_t2
        //   datt[t2] = dout_t . v_t2        dv_t2 += att[t2] dout_t
        for (int t2 = 0; t2 < Tn; ++t2) datt_row[t2] = 0;  // masked entries stay 0
        for (int t2 = 0; t2 <= t; ++t2) {
          const ptrdiff_t voff = (static_cast<ptrdiff_t>(b) * Tn + t2) * C3 + 2 * C + h * hs;
          const F* v = qkv + voff;
          F* dv = dqkv + voff;
          F d = 0;
          for (int i = 0; i < hs; ++i) {
            d += v[i] * dout_t[i];
            dv[i] += att_row[t2] * dout_t[i];
          }
          datt_row[t2] = d;
        }

        // pass 2 reversed, the softmax Jacobian d att_j / d p_i = att_j (delta_ij - att_i):
        //   dpreatt[i] = att_i (datt_i - sum_j att_j datt_j)
        // (the O(Tn) form of llm.c's double loop over the Jacobian; masked entries are 0
        // because att_i = 0 there)
        F weighted = 0;  // sum_j att_j datt_j
        for (int t2 = 0; t2 <= t; ++t2) weighted += att_row[t2] * datt_row[t2];
        for (int t2 = 0; t2 < Tn; ++t2) {
          dpreatt_row[t2] = t2 <= t ? att_row[t2] * (datt_row[t2] - weighted) : F(0);
        }

        // pass 1 reversed: preatt[t2] = q . k_t2 * scale
        //   dq += dpreatt[t2] k_t2 scale      dk_t2 += dpreatt[t2] q scale
        for (int t2 = 0; t2 <= t; ++t2) {
          const ptrdiff_t koff = (static_cast<ptrdiff_t>(b) * Tn + t2) * C3 + C + h * hs;
          const F* k = qkv + koff;
          F* dk = dqkv + koff;
          const F g = dpreatt_row[t2] * scale;
          for (int i = 0; i < hs; ++i) {
            dq[i] += g * k[i];
            dk[i] += g * q[i];
          }
        }
      }
    }
  }
}

template void attention_forward_v1<float>(float*, float*, float*, const float*, int, int, int, int);
template void attention_forward_v1<double>(double*, double*, double*, const double*, int, int, int, int);
template void attention_backward_v1<float>(float*, float*, float*, const float*, const float*, const float*, int,
                                           int, int, int);
template void attention_backward_v1<double>(double*, double*, double*, const double*, const double*,
                                            const double*, int, int, int, int);

// ---- v2: one thread per (b, h), SIMD rows ----------------------------------------------------
namespace {

using V = simd::Native;  // the widest SIMD this build targets (AVX2: 8 lanes)
constexpr int W = V::lanes;

// The helpers, one (b, h) at a time.
// s[j] = sum_i q[i] * Mt[i * ld + j] for j in [0, nblk * W): a row of scores against keys
// stored transposed (Mt: (hs, ld), keys along the fast axis), so each step of i is one
// broadcast and nblk FMAs: no horizontal sums. Blocks in groups of up to 4 registers.
template <int NB>
inline void dot_blocks(float* s, const float* q, const float* Mt, int hs, int ld, float scale) {
  V::reg acc[NB];
  for (int u = 0; u < NB; ++u) acc[u] = V::zero();
  for (int i = 0; i < hs; ++i) {
    const V::reg qi = V::set1(q[i]);
    const float* row = Mt + static_cast<ptrdiff_t>(i) * ld;
    for (int u = 0; u < NB; ++u) acc[u] = V::fma(qi, V::load(row + u * W), acc[u]);
  }
  const V::reg vs = V::set1(scale);
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
    V::reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
    for (int j = 0; j < n; ++j) {
      const V::reg aj = V::set1(a[j]);
      const float* r = rows + j * ld + c;
      for (int u = 0; u < 4; ++u) acc[u] = V::fma(aj, V::load(r + u * W), acc[u]);
    }
    for (int u = 0; u < 4; ++u) V::store(y + c + u * W, acc[u]);
  }
  for (; c + W <= hs; c += W) {
    V::reg acc = V::zero();
    for (int j = 0; j < n; ++j) acc = V::fma(V::set1(a[j]), V::load(rows + j * ld + c), acc);
    V::store(y + c, acc);
  }
  for (; c < hs; ++c) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc += a[j] * rows[j * ld + c];
    y[c] = acc;
  }
}

// v3's weighted_rows: the same sums, each element's terms added in the same j order, but all
// of a head's registers advance together. v2 covers hs in groups of 4 registers and then one
// register at a time: with hs = 32 on AVX-512 (2 registers) it never forms a group of 4, and
// runs two passes over j, each ONE dependent FMA chain (4 cycles per FMA: a quarter of an FMA
// port). Here a remainder of 1-3 registers runs as 1-3 interleaved chains in one pass.
// The scalar tail of v3's and v4's weighted sums: y[c0..hs) = sum_{j < n} a[j] rows[j * ld + c].
// One out-of-line copy, so that both rungs run the same instructions (whether the compiler
// fuses a * b + acc into an FMA is its choice, and it could choose differently in two inlined
// copies: the rungs would then differ in the last bit).
[[gnu::noinline]] void weighted_rows_tail(float* y, const float* a, const float* rows, ptrdiff_t ld, int n, int c0,
                                          int hs) {
  for (int c = c0; c < hs; ++c) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc += a[j] * rows[j * ld + c];
    y[c] = acc;
  }
}

template <int NB>
inline void weighted_block(float* y, const float* a, const float* rows, ptrdiff_t ld, int n) {
  V::reg acc[NB];
  for (int u = 0; u < NB; ++u) acc[u] = V::zero();
  for (int j = 0; j < n; ++j) {
    const V::reg aj = V::set1(a[j]);
    const float* r = rows + j * ld;
    for (int u = 0; u < NB; ++u) acc[u] = V::fma(aj, V::load(r + u * W), acc[u]);
  }
  for (int u = 0; u < NB; ++u) V::store(y + u * W, acc[u]);
}
void weighted_rows_v3(float* y, const float* a, const float* rows, ptrdiff_t ld, int n, int hs) {
  int c = 0;
  for (; c + 4 * W <= hs; c += 4 * W) weighted_block<4>(y + c, a, rows + c, ld, n);
  switch ((hs - c) / W) {
    case 3: weighted_block<3>(y + c, a, rows + c, ld, n); c += 3 * W; break;
    case 2: weighted_block<2>(y + c, a, rows + c, ld, n); c += 2 * W; break;
    case 1: weighted_block<1>(y + c, a, rows + c, ld, n); c += W; break;
    default: break;
  }
  weighted_rows_tail(y, a, rows, ld, n, c, hs);  // the scalar tail, as v2's
}

// The weighted sum each rung uses: v2's or v3's (bit-identical; v3 keeps more FMAs in flight).
template <bool kV3>
inline void weighted_rows_of(float* y, const float* a, const float* rows, ptrdiff_t ld, int n, int hs) {
  if constexpr (kV3) {
    weighted_rows_v3(y, a, rows, ld, n, hs);
  } else {
    weighted_rows(y, a, rows, ld, n, hs);
  }
}

// One row of the causal softmax, shared by v2-v4: srow holds the scaled scores of keys 0..t
// in whole registers (nlanes floats; what lies past t is overwritten). Writes preatt's row
// (prow: the scores, 0 past t) and att's (arow: the probabilities, 0 past t).
void softmax_row(float* srow, float* prow, float* arow, int t, int T, int nlanes) {
  for (int j = t + 1; j < nlanes; ++j) srow[j] = -std::numeric_limits<float>::infinity();
  // the masked lanes give exp(-inf) = exactly 0 (poly_exp clamps at -88, where its result is 0)
  V::reg vmax = V::set1(-std::numeric_limits<float>::infinity());
  for (int j = 0; j < nlanes; j += W) vmax = V::max(vmax, V::load(srow + j));
  const float maxval = V::hmax(vmax);
  for (int j = 0; j <= t; ++j) prow[j] = srow[j];
  for (int j = t + 1; j < T; ++j) prow[j] = 0.0f;
  const V::reg vm = V::set1(maxval);
  V::reg vsum = V::zero();
  for (int j = 0; j < nlanes; j += W) {
    const V::reg e = poly_exp<V>(V::sub(V::load(srow + j), vm));
    V::store(srow + j, e);
    vsum = V::add(vsum, e);
  }
  const float inv = 1.0f / V::sum(vsum);
  for (int j = 0; j <= t; ++j) arow[j] = srow[j] * inv;
  for (int j = t + 1; j < T; ++j) arow[j] = 0.0f;
}

// One row of the softmax backward, shared by v2-v4: srow holds datt[0..t] (dout_t . v_t2).
// Writes datt's row (darow) and dpreatt's (dprow), 0 past t, with the softmax Jacobian:
// dpreatt[i] = att_i (datt_i - sum_j att_j datt_j).
void softmax_backward_row(const float* srow, const float* arow, float* darow, float* dprow, int t, int T) {
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

}  // namespace

namespace {
template <bool kV3>
void attention_forward_heads(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH) {
  // qkv (B,T,3C) -> out (B,T,C), preatt, att (B,NH,T,T); one thread per (b, h)
  const int hs = C / NH;
  const ptrdiff_t C3 = 3 * static_cast<ptrdiff_t>(C);
  const int ld = (T + W - 1) / W * W;  // key axis padded to whole registers
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int items = B * NH;
#pragma omp parallel for schedule(static) if (items > 1 && static_cast<int64_t>(B) * T * T * C >= 65536)
  for (int item = 0; item < items; ++item) {
    const int b = item / NH, h = item % NH;
    float* Kt = thread_scratch<float, 0>(static_cast<size_t>(hs) * ld + ld);  // (hs, ld), then a row (ld)
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
      // pass 2: softmax over 0..t
      softmax_row(srow, prow, arow, t, T, nblk * W);
      // pass 3: out_t = sum_{t2 <= t} att[t2] v_t2
      weighted_rows_of<kV3>(out + (static_cast<ptrdiff_t>(b) * T + t) * C + h * hs, arow, vbase, C3, t + 1, hs);
    }
  }
}
}  // namespace

void attention_forward_v2(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH) {
  attention_forward_heads<false>(out, preatt, att, qkv, B, T, C, NH);
}
void attention_forward_v3(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH) {
  attention_forward_heads<true>(out, preatt, att, qkv, B, T, C, NH);
}

namespace {
template <bool kV3>
void attention_backward_heads(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH) {
  // dout (B,T,C), qkv (B,T,3C), att (B,NH,T,T) -> dqkv (B,T,3C) ASSIGNED (each element
  // written once: head h of batch row b is owned by one thread); dpreatt, datt scratch
  const int hs = C / NH;
  const ptrdiff_t C3 = 3 * static_cast<ptrdiff_t>(C);
  const int ld = (T + W - 1) / W * W;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int items = B * NH;
#pragma omp parallel for schedule(static) if (items > 1 && static_cast<int64_t>(B) * T * T * C >= 65536)
  for (int item = 0; item < items; ++item) {
    const int b = item / NH, h = item % NH;
    float* Vt = thread_scratch<float, 0>(static_cast<size_t>(hs) * ld + 2 * static_cast<size_t>(ld));
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
      softmax_backward_row(srow, arow, darow, dprow, t, T);
      // dq_t = sum_{t2 <= t} (dpreatt[t2] scale) k_t2
      for (int j = 0; j <= t; ++j) coef[j] = dprow[j] * scale;
      weighted_rows_of<kV3>(dbase + t * C3 + h * hs, coef, kh, C3, t + 1, hs);
    }
    // dk_t2 = sum_{t >= t2} (dpreatt[t][t2] scale) q_t;  dv_t2 = sum_{t >= t2} att[t][t2] dout_t
    for (int t2 = 0; t2 < T; ++t2) {
      const int n = T - t2;
      for (int j = 0; j < n; ++j) coef[j] = dpreatt[mat + static_cast<ptrdiff_t>(t2 + j) * T + t2] * scale;
      weighted_rows_of<kV3>(dbase + t2 * C3 + C + h * hs, coef, qh + t2 * C3, C3, n, hs);
      for (int j = 0; j < n; ++j) coef[j] = att[mat + static_cast<ptrdiff_t>(t2 + j) * T + t2];
      weighted_rows_of<kV3>(dbase + t2 * C3 + 2 * C + h * hs, coef, dobase + static_cast<ptrdiff_t>(t2) * C, C,
                            n, hs);
    }
  }
}
}  // namespace

void attention_backward_v2(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                           const float* att, int B, int T, int C, int NH) {
  attention_backward_heads<false>(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
}
void attention_backward_v3(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                           const float* att, int B, int T, int C, int NH) {
  attention_backward_heads<true>(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
}

// ---- v4: several rows at once ------------------------------------------------------------------
// v3 computes one query row at a time. At the GPT's shapes that is latency-bound: the scores of
// query t against 16 keys are ONE register, so scores_row runs one dependent FMA chain of hs
// steps for every query t < 16 (and at most 4 chains for any t <= 64); each weighted sum of
// rows (out, dq, dk, dv) runs hs / W chains. v4 takes kRows = 4 rows at once (query rows for
// scores, out and dq; key columns for dk and dv), so every load of a key, value or query
// register feeds 4 independent chains, as lesson 03's register tiles do for the matrix
// product. Each element still sums the same terms in the same order as v3 (rows with fewer
// terms stop earlier), so the results are bit-identical to v3 (and v2); the softmax rows
// are v3's own functions.
namespace {

constexpr int kRows = 4;                   // rows (query rows, or key columns) per register tile
constexpr int kMaxRegs = W >= 16 ? 4 : 2;  // registers per row in a tile: 4 x 4 + 4 of 32 zmm, 4 x 2 + 2 of 16 ymm

// v4's softmax row: v3's arithmetic (bit-identical) without v3's scalar loops. v3 writes -inf
// into the lanes past t one float at a time and then loads them as a register: a wide load of
// narrow stores waits for them to reach the cache (no store forwarding), and its copies into
// preatt and att were scalar loops too (a third of v3's forward time at the GPT's shapes,
// measured with perf). Here the last register is masked in a register (min with a row of
// +inf / -inf from kMaskTable), and whole registers are stored where the row has room.
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::array<float, 2 * W> mask_table() {
  std::array<float, 2 * W> m{};
  for (int i = 0; i < 2 * W; ++i) m[i] = i < W ? kInf : -kInf;
  return m;
}
alignas(64) constexpr std::array<float, 2 * W> kMaskTable = mask_table();

void softmax_row_v4(float* srow, float* prow, float* arow, int t, int T, int nlanes) {
  const int jl = nlanes - W;  // the last register holds keys jl..jl+W-1, t among them
  // lane l of the last register stays if l <= t - jl, else becomes -inf
  const V::reg keep = V::load(kMaskTable.data() + (W - 1) - (t - jl));
  V::store(srow + jl, V::min(V::load(srow + jl), keep));
  V::reg vmax = V::set1(-kInf);
  for (int j = 0; j < nlanes; j += W) vmax = V::max(vmax, V::load(srow + j));
  const float maxval = V::hmax(vmax);
  if (prow != nullptr) {  // preatt's row: the scores up to t, 0 after
    for (int j = 0; j < jl; j += W) V::store(prow + j, V::load(srow + j));
    for (int j = jl; j <= t; ++j) prow[j] = srow[j];
    for (int j = t + 1; j < std::min(nlanes, T); ++j) prow[j] = 0.0f;
    int j0 = nlanes;
    for (; j0 + W <= T; j0 += W) V::store(prow + j0, V::zero());
    for (int j = j0; j < T; ++j) prow[j] = 0.0f;
  }
  const V::reg vm = V::set1(maxval);
  V::reg vsum = V::zero();
  for (int j = 0; j < nlanes; j += W) {
    const V::reg e = poly_exp<V>(V::sub(V::load(srow + j), vm));  // exactly +0 past t
    V::store(srow + j, e);
    vsum = V::add(vsum, e);
  }
  const float inv = 1.0f / V::sum(vsum);
  const V::reg vinv = V::set1(inv);
  // att's row: e / sum (+0 past t, as v3 writes), whole registers while the row has room
  int j = 0;
  for (; j < nlanes && j + W <= T; j += W) V::store(arow + j, V::mul(V::load(srow + j), vinv));
  for (; j < std::min(nlanes, T); ++j) arow[j] = srow[j] * inv;  // a register that crosses T
  for (; j + W <= T; j += W) V::store(arow + j, V::zero());
  for (; j < T; ++j) arow[j] = 0.0f;
}

// Calls body.template operator()<NB>(c) over [0, n) in chunks of NB <= kMaxRegs registers
// (c = the first float of the chunk); returns where the whole registers end.
template <typename Body>
inline int for_register_chunks(int n, Body&& body) {
  int c = 0;
  for (; c + kMaxRegs * W <= n; c += kMaxRegs * W) body.template operator()<kMaxRegs>(c);
  switch ((n - c) / W) {
    case 3: if constexpr (kMaxRegs > 3) { body.template operator()<3>(c); c += 3 * W; } break;
    case 2: if constexpr (kMaxRegs > 2) { body.template operator()<2>(c); c += 2 * W; } break;
    case 1: body.template operator()<1>(c); c += W; break;
    default: break;
  }
  return c;
}

// Scores of R rows: s[r * lds + j] = scale * sum_i q_r[i] Mt[i * ld + j] for j in [0, nblk W),
// q_r = q + r * qs. Each element's FMAs over i in scores_row's order.
template <int R>
void scores_rows(float* s, ptrdiff_t lds, const float* q, ptrdiff_t qs, const float* Mt, int hs, int ld,
                 int nblk, float scale) {
  for_register_chunks(nblk * W, [&]<int NB>(int c) {
    V::reg acc[R][NB];
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < NB; ++u) acc[r][u] = V::zero();
    for (int i = 0; i < hs; ++i) {
      const float* row = Mt + static_cast<ptrdiff_t>(i) * ld + c;
      V::reg m[NB];
      for (int u = 0; u < NB; ++u) m[u] = V::load(row + u * W);
      for (int r = 0; r < R; ++r) {
        const V::reg qi = V::set1(q[r * qs + i]);
        for (int u = 0; u < NB; ++u) acc[r][u] = V::fma(qi, m[u], acc[r][u]);
      }
    }
    const V::reg vs = V::set1(scale);
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < NB; ++u) V::store(s + r * lds + c + u * W, V::mul(acc[r][u], vs));
  });
}

// Weighted sums of rows for R query rows with 1, 2, ... more terms each (causal rows t0..t0+R-1):
//   y_r[0..hs) = sum_{j < n0 + r} a_r[j] rows[j * ld + 0..hs)   (ASSIGNED), y_r = y + r * ys,
// a_r = a + r * as, each in j order, as weighted_rows_v3 adds them.
template <int R>
void weighted_rows_causal(float* y, ptrdiff_t ys, const float* a, ptrdiff_t as, const float* rows, ptrdiff_t ld,
                          int n0, int hs) {
  const int c_end = for_register_chunks(hs, [&]<int NB>(int c) {
    V::reg acc[R][NB];
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < NB; ++u) acc[r][u] = V::zero();
    auto step = [&](int j, int r_first) {  // term j for rows r_first..R-1
      const float* rj = rows + j * ld + c;
      V::reg m[NB];
      for (int u = 0; u < NB; ++u) m[u] = V::load(rj + u * W);
      // r runs over constants (an unrolled loop, a runtime test): indexing acc with a runtime
      // r would move the accumulators from registers to the stack
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if (r < r_first) continue;
        const V::reg aj = V::set1(a[r * as + j]);
        for (int u = 0; u < NB; ++u) acc[r][u] = V::fma(aj, m[u], acc[r][u]);
      }
    };
    for (int j = 0; j < n0; ++j) step(j, 0);
    for (int e = 1; e < R; ++e) step(n0 - 1 + e, e);  // the triangle: row r has r terms more
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < NB; ++u) V::store(y + r * ys + c + u * W, acc[r][u]);
  });
  if (c_end == hs) return;  // no scalar tail (hs a multiple of the register width): no calls
  for (int r = 0; r < R; ++r) weighted_rows_tail(y + r * ys, a + r * as, rows, ld, n0 + r, c_end, hs);  // v3's tail
}

// The same for R key columns t2..t2+R-1 (dk, dv): column r sums over the rows t >= t2 + r,
//   y_r[0..hs) = sum_{t = t2 + r}^{T - 1} coef(t, r) rows[t * ld + 0..hs),
// coef(t, r) = M[t * ldm + t2 + r] (* scale when kScale): M is the head's (T, T) dpreatt or att
// (ldm = T), or v5's scaled coefficients (ldm = ld),
// read along its rows, so no column is gathered (but for a scalar tail: column (T) is its scratch).
// The terms in t order, as v3's columns add them.
template <int R, bool kScale>
void weighted_rows_columns(float* y, ptrdiff_t ys, const float* M, ptrdiff_t ldm, int T, int t2, float scale,
                           const float* rows, ptrdiff_t ld, int hs, float* column) {
  auto coef = [&](int t, int r) {
    const float m = M[static_cast<ptrdiff_t>(t) * ldm + t2 + r];
    return kScale ? m * scale : m;
  };
  const int c_end = for_register_chunks(hs, [&]<int NB>(int c) {
    V::reg acc[R][NB];
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < NB; ++u) acc[r][u] = V::zero();
    for (int t = t2; t < T; ++t) {
      const int r_last = std::min(R - 1, t - t2);  // columns r <= t - t2 have row t
      const float* rt = rows + t * ld + c;
      V::reg m[NB];
      for (int u = 0; u < NB; ++u) m[u] = V::load(rt + u * W);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {  // constant r, as in weighted_rows_causal
        if (r > r_last) continue;
        const V::reg ct = V::set1(coef(t, r));
        for (int u = 0; u < NB; ++u) acc[r][u] = V::fma(ct, m[u], acc[r][u]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < NB; ++u) V::store(y + r * ys + c + u * W, acc[r][u]);
  });
  if (c_end < hs) {  // the scalar tail: v3's, on the column gathered as v3 gathers it
    for (int r = 0; r < R; ++r) {
      for (int t = t2 + r; t < T; ++t) column[t - t2 - r] = coef(t, r);
      weighted_rows_tail(y + r * ys, column, rows + (t2 + r) * ld, ld, T - t2 - r, c_end, hs);
    }
  }
}

// v5's softmax backward row: v4's (softmax_backward_row, then the row's dq coefficients
// dpreatt * scale) in whole registers and one pass: weighted = sum_j att_j datt_j, then datt,
// dpreatt and coef; zeros past t in datt and dpreatt. The sum runs in W lanes, then across
// them, not in j order: v5 is not bit-identical to v4 (within float rounding of it).
// darow or dprow nullptr: that row is not written (v5 reads neither back: coef is what it keeps).
void softmax_backward_row_v5(const float* srow, const float* arow, float* darow, float* dprow, float* coef, int t,
                             int T, float scale) {
  const int n = t + 1, nv = n / W * W;
  V::reg acc = V::zero();
  for (int j = 0; j < nv; j += W) acc = V::fma(V::load(arow + j), V::load(srow + j), acc);
  float weighted = V::sum(acc);
  for (int j = nv; j < n; ++j) weighted += arow[j] * srow[j];
  const V::reg vw = V::set1(weighted), vs = V::set1(scale);
  for (int j = 0; j < nv; j += W) {
    const V::reg sj = V::load(srow + j);
    const V::reg dj = V::mul(V::load(arow + j), V::sub(sj, vw));
    if (darow != nullptr) V::store(darow + j, sj);
    if (dprow != nullptr) V::store(dprow + j, dj);
    V::store(coef + j, V::mul(dj, vs));
  }
  for (int j = nv; j < n; ++j) {
    const float dj = arow[j] * (srow[j] - weighted);
    if (darow != nullptr) darow[j] = srow[j];
    if (dprow != nullptr) dprow[j] = dj;
    coef[j] = dj * scale;
  }
  if (darow != nullptr) std::fill(darow + n, darow + T, 0.0f);
  if (dprow != nullptr) std::fill(dprow + n, dprow + T, 0.0f);
}

// Runs fn.template operator()<R>(i) over [0, n) in tiles of kRows, then one tile of the rest.
template <typename Fn>
inline void for_row_tiles(int n, Fn&& fn) {
  int i = 0;
  for (; i + kRows <= n; i += kRows) fn.template operator()<kRows>(i);
  switch (n - i) {
    case 3: fn.template operator()<3>(i); break;
    case 2: fn.template operator()<2>(i); break;
    case 1: fn.template operator()<1>(i); break;
    default: break;
  }
}
static_assert(kRows == 4, "for_row_tiles handles a remainder of up to 3 rows");

}  // namespace

void attention_forward_v4(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH) {
  // qkv (B,T,3C) -> out (B,T,C), preatt, att (B,NH,T,T); one thread per (b, h), as v2
  const int hs = C / NH;
  const ptrdiff_t C3 = 3 * static_cast<ptrdiff_t>(C);
  const int ld = (T + W - 1) / W * W;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int items = B * NH;
#pragma omp parallel for schedule(static) if (items > 1 && static_cast<int64_t>(B) * T * T * C >= 65536)
  for (int item = 0; item < items; ++item) {
    const int b = item / NH, h = item % NH;
    // (hs, ld) keys transposed, then kRows rows of scores (ld each)
    float* Kt = thread_scratch<float, 0>(static_cast<size_t>(hs + kRows) * ld);
    float* srows = Kt + static_cast<ptrdiff_t>(hs) * ld;
    const float* base = qkv + static_cast<ptrdiff_t>(b) * T * C3;
    transpose_head(Kt, base, C3, C + h * hs, T, hs, ld);
    const float* vbase = base + 2 * C + h * hs;
    const ptrdiff_t mat = static_cast<ptrdiff_t>(item) * T * T;
    for_row_tiles(T, [&]<int R>(int t0) {
      // pass 1: the scores of rows t0..t0+R-1, as many key blocks as the last row needs
      const int nblk = (t0 + R + W - 1) / W;
      scores_rows<R>(srows, ld, base + t0 * C3 + h * hs, C3, Kt, hs, ld, nblk, scale);
      // pass 2: each row's softmax (v3's)
      for (int r = 0; r < R; ++r) {
        const int t = t0 + r;
        softmax_row_v4(srows + r * ld, preatt != nullptr ? preatt + mat + t * T : nullptr, att + mat + t * T, t, T,
                       nblk * W);
      }
      // pass 3: out_t = sum_{t2 <= t} att[t2] v_t2 for the R rows together
      weighted_rows_causal<R>(out + (static_cast<ptrdiff_t>(b) * T + t0) * C + h * hs, C, att + mat + t0 * T, T,
                              vbase, C3, t0 + 1, hs);
    });
  }
}

namespace {
// v4's and v5's backward: the same tiles; kV5 selects v5's softmax row (whole registers, the
// scaled coefficients of every row kept) and dk read from those coefficients.
template <bool kV5>
void attention_backward_tiles(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH) {
  // as v2/v3: dqkv ASSIGNED, each element written by the thread that owns its (b, h)
  const int hs = C / NH;
  const ptrdiff_t C3 = 3 * static_cast<ptrdiff_t>(C);
  const int ld = (T + W - 1) / W * W;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int items = B * NH;
  // v4: kRows rows of dq's coefficients (the tile's); v5: (T, ld), every row's, and a column
  const size_t coef_floats = kV5 ? static_cast<size_t>(T) * ld + T : static_cast<size_t>(kRows) * ld;
#pragma omp parallel for schedule(static) if (items > 1 && static_cast<int64_t>(B) * T * T * C >= 65536)
  for (int item = 0; item < items; ++item) {
    const int b = item / NH, h = item % NH;
    // (hs, ld) values transposed, kRows rows of datt, then the coefficients
    float* Vt = thread_scratch<float, 0>(static_cast<size_t>(hs + kRows) * ld + coef_floats);
    float* srows = Vt + static_cast<ptrdiff_t>(hs) * ld;
    float* coefs = srows + static_cast<ptrdiff_t>(kRows) * ld;
    float* column = kV5 ? coefs + static_cast<ptrdiff_t>(T) * ld : coefs;  // the scalar tail's gathered column
    const float* base = qkv + static_cast<ptrdiff_t>(b) * T * C3;
    float* dbase = dqkv + static_cast<ptrdiff_t>(b) * T * C3;
    const float* dobase = dout + static_cast<ptrdiff_t>(b) * T * C + h * hs;
    transpose_head(Vt, base, C3, 2 * C + h * hs, T, hs, ld);
    const float* qh = base + h * hs;
    const float* kh = base + C + h * hs;
    const ptrdiff_t mat = static_cast<ptrdiff_t>(item) * T * T;
    for_row_tiles(T, [&]<int R>(int t0) {
      // datt[t][t2] = dout_t . v_t2 for the R rows, then each row's softmax backward
      const int nblk = (t0 + R + W - 1) / W;
      scores_rows<R>(srows, ld, dobase + static_cast<ptrdiff_t>(t0) * C, C, Vt, hs, ld, nblk, 1.0f);
      float* tile_coefs = kV5 ? coefs + static_cast<ptrdiff_t>(t0) * ld : coefs;  // row t0's
      for (int r = 0; r < R; ++r) {
        const int t = t0 + r;
        const ptrdiff_t row = mat + static_cast<ptrdiff_t>(t) * T;
        if constexpr (kV5) {
          softmax_backward_row_v5(srows + r * ld, att + row, datt != nullptr ? datt + row : nullptr,
                                  dpreatt != nullptr ? dpreatt + row : nullptr, tile_coefs + r * ld, t, T, scale);
        } else {  // v3's row, then the coefficients
          softmax_backward_row(srows + r * ld, att + row, datt + row, dpreatt + row, t, T);
          for (int j = 0; j <= t; ++j) coefs[r * ld + j] = dpreatt[row + j] * scale;
        }
      }
      // dq_t = sum_{t2 <= t} (dpreatt[t][t2] scale) k_t2 for the R rows
      weighted_rows_causal<R>(dbase + t0 * C3 + h * hs, C3, tile_coefs, ld, kh, C3, t0 + 1, hs);
    });
    // dk_t2 = sum_{t >= t2} (dpreatt[t][t2] scale) q_t;  dv_t2 = sum_{t >= t2} att[t][t2] dout_t
    for_row_tiles(T, [&]<int R>(int t2) {
      if constexpr (kV5) {  // the scaled coefficients, kept
        weighted_rows_columns<R, false>(dbase + t2 * C3 + C + h * hs, C3, coefs, ld, T, t2, 1.0f, qh, C3, hs, column);
      } else {
        weighted_rows_columns<R, true>(dbase + t2 * C3 + C + h * hs, C3, dpreatt + mat, T, T, t2, scale, qh, C3, hs,
                                       column);
      }
      weighted_rows_columns<R, false>(dbase + t2 * C3 + 2 * C + h * hs, C3, att + mat, T, T, t2, 1.0f, dobase, C,
                                      hs, column);
    });
  }
}
}  // namespace

void attention_backward_v4(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                           const float* att, int B, int T, int C, int NH) {
  attention_backward_tiles<false>(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
}

// ---- v5 (backward only): whole-register softmax rows, the scaled coefficients kept -----------
// v4's backward spends its non-product time in scalar loops: each row's softmax backward (a dot
// product, then datt and dpreatt element by element) and the row's dq coefficients (dpreatt *
// scale, once more); and dk's pass multiplies every coefficient by the scale again as it
// broadcasts it. v5 does the row in whole registers, in one pass that also writes the scaled
// coefficients, and keeps the head's (T, ld) coefficients, which dq reads by rows and dk by
// columns without a multiply. dk and dv sum the same terms in the same order as v4; the
// softmax row's sum does not (lanes first), so v5 agrees with v4 within float rounding.
// The forward has nothing of the kind to gain (its softmax rows are already v4's registers):
// the backward ladder has a fifth rung, the forward four.
void attention_backward_v5(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                           const float* att, int B, int T, int C, int NH) {
  attention_backward_tiles<true>(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
}

const std::vector<OpVersion<AttentionFn>>& attention_versions() {
  static const std::vector<OpVersion<AttentionFn>> versions = {
      {1, "loops", "three passes per (b, t, h) in plain loops, std::exp: the reference",
       &attention_forward_v1<float>},
      {2, "heads-parallel", "a thread per (b, h), keys transposed, SIMD scores, poly_exp softmax",
       &attention_forward_v2},
      {3, "heads-interleaved", "v2 with a head's registers summed as interleaved FMA chains (bit-identical)",
       &attention_forward_v3},
      {4, "row-tiles", "v3 with 4 query rows (key columns) per register tile: each load feeds 4 chains (bit-identical)",
       &attention_forward_v4},
  };
  return versions;
}
const OpVersion<AttentionFn>& attention_version(const std::string& number_or_name) {
  return find_version(attention_versions(), number_or_name, "attention");
}

const std::vector<OpVersion<AttentionBackwardFn>>& attention_backward_versions() {
  static const std::vector<OpVersion<AttentionBackwardFn>> versions = {
      {1, "loops", "the three passes in reverse, plain loops: the reference", &attention_backward_v1<float>},
      {2, "heads-parallel", "a thread per (b, h), values transposed; dq by rows, dk and dv by columns",
       &attention_backward_v2},
      {3, "heads-interleaved", "v2 with a head's registers summed as interleaved FMA chains (bit-identical)",
       &attention_backward_v3},
      {4, "row-tiles", "v3 with 4 query rows (key columns) per register tile: each load feeds 4 chains (bit-identical)",
       &attention_backward_v4},
      {5, "register-rows", "v4 with whole-register softmax-backward rows and the scaled coefficients kept for dq and dk",
       &attention_backward_v5},
  };
  return versions;
}
const OpVersion<AttentionBackwardFn>& attention_backward_version(const std::string& number_or_name) {
  return find_version(attention_backward_versions(), number_or_name, "attention_backward");
}

}  // namespace kernels
