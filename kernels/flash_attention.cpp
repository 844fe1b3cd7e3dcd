// kernels/flash_attention.cpp: causal grouped-query self-attention, the plain-loop reference,
// the flash algorithm in plain loops, and the flash algorithm over SIMD registers and threads
// (kernels/flash_attention.h states the maths and the layout).
//
// Why flash: the unfused attention (kernels/attention.cpp) writes the (Tn, Tn) scores and
// probabilities of every head to memory and reads them back in the backward. At Tn = 4096
// that is 64 MiB per head and per matrix. The softmax of a row needs only its maximum and
// its sum, and both can be computed ONLINE, tile of keys by tile of keys: after each tile
// the running sum and the running output are rescaled by exp(old max - new max). The
// backward needs p again, but p = exp(s - lse) is recomputed from q, k and the one saved
// lse per row. What memory the matrix cost is paid back as a second computation of q.k.
#include "kernels/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace kernels {

using std::ptrdiff_t;

void check_flash_attention_sizes(int B, int Tn, int C, int NH, int NKV) {
  if (B < 1 || Tn < 1 || C < 1 || NH < 1 || NKV < 1 || C % NH != 0 || NH % NKV != 0) {
    throw std::invalid_argument("flash attention: expected positive sizes with C divisible by NH and NH by NKV, got B=" +
                                std::to_string(B) + " Tn=" + std::to_string(Tn) + " C=" + std::to_string(C) +
                                " NH=" + std::to_string(NH) + " NKV=" + std::to_string(NKV));
  }
}

namespace {

// Where things are in one position's row of qkv, for query head h / KV head g.
struct Layout {
  int T, C, NH, NKV, hs, group;  // group = NH / NKV query heads per KV head
  ptrdiff_t C3;                  // channels per position: C + 2 NKV hs
  Layout(int Tn, int C_, int NH_, int NKV_)
      : T(Tn), C(C_), NH(NH_), NKV(NKV_), hs(C_ / NH_), group(NH_ / NKV_), C3(flash_qkv_channels(C_, NH_, NKV_)) {}
  ptrdiff_t pos(int b, int t) const { return (static_cast<ptrdiff_t>(b) * T + t) * C3; }  // row (b, t)
  int q(int h) const { return h * hs; }
  int k(int g) const { return C + g * hs; }
  int v(int g) const { return C + NKV * hs + g * hs; }
  ptrdiff_t out(int b, int t, int h) const { return (static_cast<ptrdiff_t>(b) * T + t) * C + h * hs; }
  ptrdiff_t lse(int b, int h, int t) const { return (static_cast<ptrdiff_t>(b) * NH + h) * T + t; }
};

// v1's row t of query head h's probabilities (KV head g), into p[0, T): the scores, then the
// softmax with its max subtracted, kernels/attention.cpp's v1 step for step (so with NKV == NH
// the two agree bit for bit); 0 past t. Gives the max and the sum of exponentials (the lse's
// parts). The forward and the backward of v1 both compute it.
template <typename F>
void probability_row(F* p, F& maxval, F& expsum, const F* qkv, const Layout& L, int b, int h, int g, int t,
                     F scale) {
  const F* q = qkv + L.pos(b, t) + L.q(h);
  maxval = -std::numeric_limits<F>::infinity();
  for (int t2 = 0; t2 <= t; ++t2) {
    const F* k = qkv + L.pos(b, t2) + L.k(g);
    F dot = 0;
    for (int i = 0; i < L.hs; ++i) dot += q[i] * k[i];
    dot *= scale;
    p[t2] = dot;
    if (dot > maxval) maxval = dot;
  }
  expsum = 0;
  for (int t2 = 0; t2 <= t; ++t2) {
    const F e = std::exp(p[t2] - maxval);
    p[t2] = e;
    expsum += e;
  }
  const F expsum_inv = F(1) / expsum;
  for (int t2 = 0; t2 < L.T; ++t2) p[t2] = t2 <= t ? p[t2] * expsum_inv : F(0);
}

// v2's tile: queries x keys of 16 x 16 (small: it is for reading, and for the gradient
// checks' tiny sizes to cross tile edges).
constexpr int kTile2 = 16;
// v3's tiles: 64 queries per forward / dq item, key blocks of 64 there (whole registers for
// every SIMD width: 4 AVX-512 registers of scores per row), 32 keys per dk/dv item (its
// two (32, hs) accumulators stay in L1 at hs = 64: 16 KiB).
constexpr int kQ3 = 64;
constexpr int kK3 = 64;
constexpr int kKV3 = 32;
// queries per block in the dk/dv pass: their p and ds are computed first, then summed into the
// key tile's dk, dv with the key rows held in registers across the block.
constexpr int kQB3 = 32;

}  // namespace

// ---- v1: plain loops, the (Tn, Tn) probabilities materialised --------------------------------
template <typename F>
void flash_attention_forward_v1(F* out, F* lse, const F* qkv, int B, int Tn, int C, int NH, int NKV) {
  check_flash_attention_sizes(B, Tn, C, NH, NKV);
  const Layout L(Tn, C, NH, NKV);
  const int hs = L.hs;
  const F scale = F(1) / std::sqrt(static_cast<F>(hs));
  std::vector<F> P(static_cast<size_t>(Tn) * Tn);  // one head's probabilities: the O(Tn^2)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const int g = h / L.group;  // the KV head this query head reads
      for (int t = 0; t < Tn; ++t) {
        F* p = P.data() + static_cast<ptrdiff_t>(t) * Tn;
        F maxval, expsum;
        probability_row(p, maxval, expsum, qkv, L, b, h, g, t, scale);
        // log sum_t2 exp(s) = max + log sum exp(s - max): what the flash versions save
        lse[L.lse(b, h, t)] = maxval + std::log(expsum);
        F* o = out + L.out(b, t, h);
        for (int i = 0; i < hs; ++i) o[i] = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const F* v = qkv + L.pos(b, t2) + L.v(g);
          const F a = p[t2];
          for (int i = 0; i < hs; ++i) o[i] += a * v[i];
        }
      }
    }
  }
}

// The backward of v1 reads neither out nor lse: it recomputes the probabilities exactly as the
// forward did and walks kernels/attention.cpp's three passes in reverse, through the (Tn, Tn)
// matrices dp and ds. That keeps the reference independent of what the flash versions save.
template <typename F>
void flash_attention_backward_v1(F* dqkv, const F* dout, const F* qkv, const F* /*out*/, const F* /*lse*/, int B,
                                 int Tn, int C, int NH, int NKV) {
  check_flash_attention_sizes(B, Tn, C, NH, NKV);
  const Layout L(Tn, C, NH, NKV);
  const int hs = L.hs;
  const F scale = F(1) / std::sqrt(static_cast<F>(hs));
  const ptrdiff_t n_qkv = static_cast<ptrdiff_t>(B) * Tn * L.C3;
  for (ptrdiff_t i = 0; i < n_qkv; ++i) dqkv[i] = 0;  // keys and values are summed into: clear first
  const size_t nn = static_cast<size_t>(Tn) * Tn;
  std::vector<F> P(nn), dS(nn);  // the head's probabilities and score gradients: O(Tn^2)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const int g = h / L.group;
      for (int t = 0; t < Tn; ++t) {  // the forward's probabilities, row t
        F maxval, expsum;
        probability_row(P.data() + static_cast<ptrdiff_t>(t) * Tn, maxval, expsum, qkv, L, b, h, g, t, scale);
      }
      for (int t = 0; t < Tn; ++t) {
        const F* p = P.data() + static_cast<ptrdiff_t>(t) * Tn;
        F* ds = dS.data() + static_cast<ptrdiff_t>(t) * Tn;
        const F* q = qkv + L.pos(b, t) + L.q(h);
        F* dq = dqkv + L.pos(b, t) + L.q(h);
        const F* dout_t = dout + L.out(b, t, h);
        // out_t = sum p[t2] v_t2:  dp[t2] = dout_t . v_t2,  dv_t2 += p[t2] dout_t
        for (int t2 = 0; t2 <= t; ++t2) {
          const F* v = qkv + L.pos(b, t2) + L.v(g);
          F* dv = dqkv + L.pos(b, t2) + L.v(g);
          F d = 0;
          for (int i = 0; i < hs; ++i) {
            d += v[i] * dout_t[i];
            dv[i] += p[t2] * dout_t[i];
          }
          ds[t2] = d;  // dp for now
        }
        // the softmax's Jacobian: ds[i] = p_i (dp_i - sum_j p_j dp_j)
        F weighted = 0;
        for (int t2 = 0; t2 <= t; ++t2) weighted += p[t2] * ds[t2];
        for (int t2 = 0; t2 < Tn; ++t2) ds[t2] = t2 <= t ? p[t2] * (ds[t2] - weighted) : F(0);
        // s[t2] = q . k_t2 scale:  dq += ds scale k_t2,  dk_t2 += ds scale q
        for (int t2 = 0; t2 <= t; ++t2) {
          const F* k = qkv + L.pos(b, t2) + L.k(g);
          F* dk = dqkv + L.pos(b, t2) + L.k(g);
          const F gr = ds[t2] * scale;
          for (int i = 0; i < hs; ++i) {
            dq[i] += gr * k[i];
            dk[i] += gr * q[i];
          }
        }
      }
    }
  }
}

// ---- v2: the flash algorithm in plain loops ---------------------------------------------------
template <typename F>
void flash_attention_forward_v2(F* out, F* lse, const F* qkv, int B, int Tn, int C, int NH, int NKV) {
  check_flash_attention_sizes(B, Tn, C, NH, NKV);
  const Layout L(Tn, C, NH, NKV);
  const int hs = L.hs;
  const F scale = F(1) / std::sqrt(static_cast<F>(hs));
  const F neg_inf = -std::numeric_limits<F>::infinity();
  // One query tile's state: o (kTile2, hs) unnormalised, m and l per row, a row of scores.
  std::vector<F> o(static_cast<size_t>(kTile2) * hs), m(kTile2), l(kTile2), s(kTile2);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const int g = h / L.group;
      for (int t0 = 0; t0 < Tn; t0 += kTile2) {
        const int t1 = std::min(t0 + kTile2, Tn);
        std::fill(o.begin(), o.end(), F(0));
        std::fill(m.begin(), m.end(), neg_inf);
        std::fill(l.begin(), l.end(), F(0));
        // key tiles up to the query tile's diagonal; those entirely after t1 - 1 are all masked
        for (int k0 = 0; k0 < t1; k0 += kTile2) {
          const int k1 = std::min(k0 + kTile2, Tn);
          for (int t = std::max(t0, k0); t < t1; ++t) {  // rows before k0 see no key of this tile
            const int r = t - t0;
            const int end = std::min(k1, t + 1);  // causal: keys k0 .. end - 1
            const F* q = qkv + L.pos(b, t) + L.q(h);
            F tile_max = neg_inf;
            for (int j = k0; j < end; ++j) {
              const F* k = qkv + L.pos(b, j) + L.k(g);
              F dot = 0;
              for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
              s[j - k0] = dot * scale;
              tile_max = std::max(tile_max, s[j - k0]);
            }
            // the online softmax: rescale what was summed under the old max (exp(-inf) = 0
            // on the first tile), then add this tile's terms under the new one
            const F m_new = std::max(m[r], tile_max);
            const F corr = std::exp(m[r] - m_new);
            F* orow = o.data() + static_cast<ptrdiff_t>(r) * hs;
            l[r] *= corr;
            for (int i = 0; i < hs; ++i) orow[i] *= corr;
            for (int j = k0; j < end; ++j) {
              const F p = std::exp(s[j - k0] - m_new);
              l[r] += p;
              const F* v = qkv + L.pos(b, j) + L.v(g);
              for (int i = 0; i < hs; ++i) orow[i] += p * v[i];
            }
            m[r] = m_new;
          }
        }
        for (int t = t0; t < t1; ++t) {
          const int r = t - t0;
          const F inv = F(1) / l[r];  // l >= 1: the max's own term is exp(0)
          F* dst = out + L.out(b, t, h);
          for (int i = 0; i < hs; ++i) dst[i] = o[static_cast<ptrdiff_t>(r) * hs + i] * inv;
          lse[L.lse(b, h, t)] = m[r] + std::log(l[r]);
        }
      }
    }
  }
}

template <typename F>
void flash_attention_backward_v2(F* dqkv, const F* dout, const F* qkv, const F* out, const F* lse, int B, int Tn,
                                 int C, int NH, int NKV) {
  check_flash_attention_sizes(B, Tn, C, NH, NKV);
  const Layout L(Tn, C, NH, NKV);
  const int hs = L.hs;
  const F scale = F(1) / std::sqrt(static_cast<F>(hs));
  const ptrdiff_t n_qkv = static_cast<ptrdiff_t>(B) * Tn * L.C3;
  for (ptrdiff_t i = 0; i < n_qkv; ++i) dqkv[i] = 0;  // dq over key tiles, dk and dv over heads: summed into
  // D_t = dout_t . out_t = sum_j p_j dp_j: the softmax Jacobian's row sum, one number per row
  // instead of a walk over the row (which the flash backward never has whole).
  std::vector<F> D(static_cast<size_t>(Tn));
  // one key tile's dk and dv (kTile2, hs): summed over every query row that sees the tile
  std::vector<F> dk(static_cast<size_t>(kTile2) * hs), dv(static_cast<size_t>(kTile2) * hs);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const int g = h / L.group;
      for (int t = 0; t < Tn; ++t) {
        const F* o = out + L.out(b, t, h);
        const F* d = dout + L.out(b, t, h);
        F acc = 0;
        for (int i = 0; i < hs; ++i) acc += d[i] * o[i];
        D[t] = acc;
      }
      // key tiles outside, query tiles inside (from the tile holding k0 down: earlier
      // queries cannot see these keys), so a key tile's dk, dv accumulate in a small buffer
      for (int k0 = 0; k0 < Tn; k0 += kTile2) {
        const int k1 = std::min(k0 + kTile2, Tn);
        std::fill(dk.begin(), dk.end(), F(0));
        std::fill(dv.begin(), dv.end(), F(0));
        for (int t0 = k0 / kTile2 * kTile2; t0 < Tn; t0 += kTile2) {
          const int t1 = std::min(t0 + kTile2, Tn);
          for (int t = std::max(t0, k0); t < t1; ++t) {
            const int end = std::min(k1, t + 1);
            const F* q = qkv + L.pos(b, t) + L.q(h);
            F* dq = dqkv + L.pos(b, t) + L.q(h);
            const F* dout_t = dout + L.out(b, t, h);
            const F lse_t = lse[L.lse(b, h, t)];
            for (int j = k0; j < end; ++j) {
              const F* k = qkv + L.pos(b, j) + L.k(g);
              const F* v = qkv + L.pos(b, j) + L.v(g);
              F dot = 0, dp = 0;
              for (int i = 0; i < hs; ++i) {
                dot += q[i] * k[i];
                dp += dout_t[i] * v[i];
              }
              const F p = std::exp(dot * scale - lse_t);  // recomputed, not stored
              const F ds = p * (dp - D[t]) * scale;
              F* dkj = dk.data() + static_cast<ptrdiff_t>(j - k0) * hs;
              F* dvj = dv.data() + static_cast<ptrdiff_t>(j - k0) * hs;
              for (int i = 0; i < hs; ++i) {
                dq[i] += ds * k[i];
                dkj[i] += ds * q[i];
                dvj[i] += p * dout_t[i];
              }
            }
          }
        }
        for (int j = k0; j < k1; ++j) {  // into KV head g, which the group's query heads share
          F* dkd = dqkv + L.pos(b, j) + L.k(g);
          F* dvd = dqkv + L.pos(b, j) + L.v(g);
          for (int i = 0; i < hs; ++i) {
            dkd[i] += dk[static_cast<ptrdiff_t>(j - k0) * hs + i];
            dvd[i] += dv[static_cast<ptrdiff_t>(j - k0) * hs + i];
          }
        }
      }
    }
  }
}

template void flash_attention_forward_v1<float>(float*, float*, const float*, int, int, int, int, int);
template void flash_attention_forward_v1<double>(double*, double*, const double*, int, int, int, int, int);
template void flash_attention_backward_v1<float>(float*, const float*, const float*, const float*, const float*, int,
                                                 int, int, int, int);
template void flash_attention_backward_v1<double>(double*, const double*, const double*, const double*,
                                                  const double*, int, int, int, int, int);
template void flash_attention_forward_v2<float>(float*, float*, const float*, int, int, int, int, int);
template void flash_attention_forward_v2<double>(double*, double*, const double*, int, int, int, int, int);
template void flash_attention_backward_v2<float>(float*, const float*, const float*, const float*, const float*, int,
                                                 int, int, int, int);
template void flash_attention_backward_v2<double>(double*, const double*, const double*, const double*,
                                                  const double*, int, int, int, int, int);

// ---- v3: SIMD registers and threads ----------------------------------------------------------
namespace {

using V = simd::Native;
constexpr int W = V::lanes;
static_assert(kK3 % W == 0 && kKV3 % W == 0, "key blocks are whole registers");

// Mt (hs, ld) = rows [0, n) of `rows` (stride C3), channels [0, hs), transposed; columns
// [n, ld) zero, so a padded lane of a score block is a finite 0 before it is masked.
void transpose_block(float* Mt, const float* rows, ptrdiff_t C3, int n, int hs, int ld) {
  for (int i = 0; i < hs; ++i) {
    float* dst = Mt + static_cast<ptrdiff_t>(i) * ld;
    for (int j = 0; j < n; ++j) dst[j] = rows[j * C3 + i];
    for (int j = n; j < ld; ++j) dst[j] = 0.0f;
  }
}

// s[j] = scale * sum_i x[i] Mt[i * ld + j], j in [0, NB W): a row of scores against a block of
// keys stored transposed, one broadcast and NB FMAs per channel (no horizontal sums).
template <int NB>
inline void dot_block(float* s, const float* x, const float* Mt, int hs, int ld, float scale) {
  V::reg acc[NB];
  for (int u = 0; u < NB; ++u) acc[u] = V::zero();
  for (int i = 0; i < hs; ++i) {
    const V::reg xi = V::set1(x[i]);
    const float* row = Mt + static_cast<ptrdiff_t>(i) * ld;
    for (int u = 0; u < NB; ++u) acc[u] = V::fma(xi, V::load(row + u * W), acc[u]);
  }
  const V::reg vs = V::set1(scale);
  for (int u = 0; u < NB; ++u) V::store(s + u * W, V::mul(acc[u], vs));
}
void dot_row(float* s, const float* x, const float* Mt, int hs, int ld, int nblk, float scale) {
  int j = 0;
  for (; j + 4 <= nblk; j += 4) dot_block<4>(s + j * W, x, Mt + j * W, hs, ld, scale);
  switch (nblk - j) {
    case 3: dot_block<3>(s + j * W, x, Mt + j * W, hs, ld, scale); break;
    case 2: dot_block<2>(s + j * W, x, Mt + j * W, hs, ld, scale); break;
    case 1: dot_block<1>(s + j * W, x, Mt + j * W, hs, ld, scale); break;
    default: break;
  }
}

// y[0..hs) = corr * y + sum_{j < n} a[j] rows[j * ld + 0..hs), terms in j order; up to 4
// registers of y advance together (independent FMA chains).
template <int NB>
inline void scale_add_block(float* y, float corr, const float* a, const float* rows, ptrdiff_t ld, int n) {
  V::reg acc[NB];
  const V::reg c = V::set1(corr);
  for (int u = 0; u < NB; ++u) acc[u] = V::mul(V::load(y + u * W), c);
  for (int j = 0; j < n; ++j) {
    const V::reg aj = V::set1(a[j]);
    const float* r = rows + j * ld;
    for (int u = 0; u < NB; ++u) acc[u] = V::fma(aj, V::load(r + u * W), acc[u]);
  }
  for (int u = 0; u < NB; ++u) V::store(y + u * W, acc[u]);
}
void scale_add_rows(float* y, float corr, const float* a, const float* rows, ptrdiff_t ld, int n, int hs) {
  int c = 0;
  for (; c + 4 * W <= hs; c += 4 * W) scale_add_block<4>(y + c, corr, a, rows + c, ld, n);
  switch ((hs - c) / W) {
    case 3: scale_add_block<3>(y + c, corr, a, rows + c, ld, n); c += 3 * W; break;
    case 2: scale_add_block<2>(y + c, corr, a, rows + c, ld, n); c += 2 * W; break;
    case 1: scale_add_block<1>(y + c, corr, a, rows + c, ld, n); c += W; break;
    default: break;
  }
  for (; c < hs; ++c) {  // the channels past the last whole register
    float acc = y[c] * corr;
    for (int j = 0; j < n; ++j) acc += a[j] * rows[j * ld + c];
    y[c] = acc;
  }
}

// Lanes [valid, nblk W) of s set to -inf: keys after the query (or past the block).
inline void mask_tail(float* s, int valid, int nblk) {
  for (int j = valid; j < nblk * W; ++j) s[j] = -std::numeric_limits<float>::infinity();
}

// p[j] = exp(s[j] - shift) over nblk registers (masked lanes give exactly 0: poly_exp clamps
// at -88); returns the sum when asked (the forward's l).
inline float exp_shifted(float* p, const float* s, float shift, int nblk) {
  const V::reg vm = V::set1(shift);
  V::reg sum = V::zero();
  for (int j = 0; j < nblk * W; j += W) {
    const V::reg e = poly_exp<V>(V::sub(V::load(s + j), vm));
    V::store(p + j, e);
    sum = V::add(sum, e);
  }
  return V::sum(sum);
}

// ds[j] = p[j] (dp[j] - D) scale: masked lanes have p = 0 and a finite dp, so ds = 0 there.
inline void score_grads(float* ds, const float* p, const float* dp, float D, float scale, int nblk) {
  const V::reg vD = V::set1(D), vs = V::set1(scale);
  for (int j = 0; j < nblk * W; j += W) {
    V::store(ds + j, V::mul(V::mul(V::load(p + j), V::sub(V::load(dp + j), vD)), vs));
  }
}

// The per-thread scratch of each v3 pass, in floats: the same formulas size the buffers and
// flash_attention_scratch_bytes' report.
size_t v3_forward_floats(int hs) { return static_cast<size_t>(hs) * kK3 + kK3 + static_cast<size_t>(kQ3) * (hs + 2); }
size_t v3_dq_floats(int hs) { return 2 * static_cast<size_t>(hs) * kK3 + 3 * kK3 + static_cast<size_t>(kQ3) * hs; }
size_t v3_dkv_floats(int hs) {
  return 2 * static_cast<size_t>(hs) * kKV3 + 3 * kKV3 + 2 * kKV3 * kQB3 + 2 * static_cast<size_t>(kKV3) * hs;
}

// Thread teams only where the work pays for waking them (as kernels/attention.cpp).
inline bool worth_threads(int items, int B, int T, int C) {
  return items > 1 && static_cast<int64_t>(B) * T * T * C >= 65536;
}

}  // namespace

void flash_attention_forward_v3(float* out, float* lse, const float* qkv, int B, int Tn, int C, int NH, int NKV) {
  check_flash_attention_sizes(B, Tn, C, NH, NKV);
  const Layout L(Tn, C, NH, NKV);
  const int hs = L.hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int tiles = (Tn + kQ3 - 1) / kQ3;
  const int items = B * NH * tiles;
  // Item order: query tile slowest, LAST tile first, so the longest items (the most keys to
  // walk) start first and dynamic scheduling fills the tail with short ones. Every item
  // writes only its own rows: the result is the same for any team and any schedule.
#pragma omp parallel for schedule(dynamic, 1) if (worth_threads(items, B, Tn, C))
  for (int item = 0; item < items; ++item) {
    const int tile = tiles - 1 - item / (B * NH);
    const int bh = item % (B * NH);
    const int b = bh / NH, h = bh % NH, g = h / L.group;
    float* Kt = thread_scratch<float, 10>(v3_forward_floats(hs));  // (hs, kK3) a key block, transposed
    float* s = Kt + static_cast<ptrdiff_t>(hs) * kK3;               // (kK3) scores, then p
    float* o = s + kK3;                                             // (kQ3, hs) unnormalised outputs
    float* m = o + static_cast<ptrdiff_t>(kQ3) * hs;                // (kQ3) running max
    float* l = m + kQ3;                                             // (kQ3) running sum
    const int t0 = tile * kQ3, t1 = std::min(t0 + kQ3, Tn);
    std::fill(o, o + static_cast<ptrdiff_t>(kQ3) * hs, 0.0f);
    std::fill(m, m + kQ3, -std::numeric_limits<float>::infinity());
    std::fill(l, l + kQ3, 0.0f);
    for (int k0 = 0; k0 < t1; k0 += kK3) {
      const int n = std::min(kK3, t1 - k0);  // keys past t1 - 1 are after every query here
      transpose_block(Kt, qkv + L.pos(b, k0) + L.k(g), L.C3, n, hs, kK3);
      const float* vrows = qkv + L.pos(b, k0) + L.v(g);
      for (int t = std::max(t0, k0); t < t1; ++t) {
        const int r = t - t0;
        const int valid = std::min(n, t - k0 + 1);
        const int nblk = (valid + W - 1) / W;
        dot_row(s, qkv + L.pos(b, t) + L.q(h), Kt, hs, kK3, nblk, scale);
        mask_tail(s, valid, nblk);
        V::reg vmax = V::load(s);
        for (int j = W; j < nblk * W; j += W) vmax = V::max(vmax, V::load(s + j));
        const float m_new = std::max(m[r], V::hmax(vmax));
        const float corr = std::exp(m[r] - m_new);  // 0 on the first block (m = -inf)
        l[r] = l[r] * corr + exp_shifted(s, s, m_new, nblk);
        scale_add_rows(o + static_cast<ptrdiff_t>(r) * hs, corr, s, vrows, L.C3, valid, hs);
        m[r] = m_new;
      }
    }
    for (int t = t0; t < t1; ++t) {
      const int r = t - t0;
      const float inv = 1.0f / l[r];
      const float* orow = o + static_cast<ptrdiff_t>(r) * hs;
      float* dst = out + L.out(b, t, h);
      for (int i = 0; i < hs; ++i) dst[i] = orow[i] * inv;
      lse[L.lse(b, h, t)] = m[r] + std::log(l[r]);
    }
  }
}

void flash_attention_backward_v3(float* dqkv, const float* dout, const float* qkv, const float* out,
                                 const float* lse, int B, int Tn, int C, int NH, int NKV) {
  check_flash_attention_sizes(B, Tn, C, NH, NKV);
  const Layout L(Tn, C, NH, NKV);
  const int hs = L.hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const bool threads = worth_threads(B * NH, B, Tn, C);

  // D (B, NH, Tn) = rowsum(dout * out), on the calling thread's scratch, shared read-only below.
  const int rows = B * NH * Tn;
  float* D = thread_scratch<float, 13>(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) if (threads)
  for (int bt = 0; bt < B * Tn; ++bt) {
    const int b = bt / Tn, t = bt % Tn;
    for (int h = 0; h < NH; ++h) {
      const float* o = out + L.out(b, t, h);
      const float* d = dout + L.out(b, t, h);
      float acc = 0.0f;
      for (int i = 0; i < hs; ++i) acc += d[i] * o[i];
      D[L.lse(b, h, t)] = acc;
    }
  }

  // Pass 1, dq: an item per (b, h, query tile), walking the key blocks up to its diagonal.
  const int qtiles = (Tn + kQ3 - 1) / kQ3;
  const int qitems = B * NH * qtiles;
#pragma omp parallel for schedule(dynamic, 1) if (threads)
  for (int item = 0; item < qitems; ++item) {
    const int tile = qtiles - 1 - item / (B * NH);
    const int bh = item % (B * NH);
    const int b = bh / NH, h = bh % NH, g = h / L.group;
    float* Kt = thread_scratch<float, 11>(v3_dq_floats(hs));  // (hs, kK3)
    float* Vt = Kt + static_cast<ptrdiff_t>(hs) * kK3;         // (hs, kK3)
    float* p = Vt + static_cast<ptrdiff_t>(hs) * kK3;          // (kK3) scores, then p
    float* dp = p + kK3;                                       // (kK3)
    float* ds = dp + kK3;                                      // (kK3)
    float* dq = ds + kK3;                                      // (kQ3, hs)
    const int t0 = tile * kQ3, t1 = std::min(t0 + kQ3, Tn);
    std::fill(dq, dq + static_cast<ptrdiff_t>(kQ3) * hs, 0.0f);
    for (int k0 = 0; k0 < t1; k0 += kK3) {
      const int n = std::min(kK3, t1 - k0);
      transpose_block(Kt, qkv + L.pos(b, k0) + L.k(g), L.C3, n, hs, kK3);
      transpose_block(Vt, qkv + L.pos(b, k0) + L.v(g), L.C3, n, hs, kK3);
      const float* krows = qkv + L.pos(b, k0) + L.k(g);
      for (int t = std::max(t0, k0); t < t1; ++t) {
        const int valid = std::min(n, t - k0 + 1);
        const int nblk = (valid + W - 1) / W;
        dot_row(p, qkv + L.pos(b, t) + L.q(h), Kt, hs, kK3, nblk, scale);
        mask_tail(p, valid, nblk);
        exp_shifted(p, p, lse[L.lse(b, h, t)], nblk);  // p recomputed from q, k, lse
        dot_row(dp, dout + L.out(b, t, h), Vt, hs, kK3, nblk, 1.0f);
        score_grads(ds, p, dp, D[L.lse(b, h, t)], scale, nblk);
        scale_add_rows(dq + static_cast<ptrdiff_t>(t - t0) * hs, 1.0f, ds, krows, L.C3, valid, hs);
      }
    }
    for (int t = t0; t < t1; ++t) {
      std::copy(dq + static_cast<ptrdiff_t>(t - t0) * hs, dq + static_cast<ptrdiff_t>(t - t0 + 1) * hs,
                dqkv + L.pos(b, t) + L.q(h));
    }
  }

  // Pass 2, dk and dv: an item per (b, g, key tile), walking every query of the group's heads
  // from the tile's first key on. The item owns its keys' dk, dv: summed over heads and
  // queries in a fixed order, then written once.
  const int ktiles = (Tn + kKV3 - 1) / kKV3;
  const int kitems = B * NKV * ktiles;
#pragma omp parallel for schedule(dynamic, 1) if (threads)
  for (int item = 0; item < kitems; ++item) {
    const int tile = item / (B * NKV);  // the first key tiles see the most queries: first
    const int bg = item % (B * NKV);
    const int b = bg / NKV, g = bg % NKV;
    float* Kt = thread_scratch<float, 12>(v3_dkv_floats(hs));  // (hs, kKV3)
    float* Vt = Kt + static_cast<ptrdiff_t>(hs) * kKV3;         // (hs, kKV3)
    float* p = Vt + static_cast<ptrdiff_t>(hs) * kKV3;          // (kKV3) one query's p
    float* dp = p + kKV3;                                       // (kKV3)
    float* ds = dp + kKV3;                                      // (kKV3)
    float* PT = ds + kKV3;                                      // (kKV3, kQB3) a query block's p, transposed
    float* dST = PT + kKV3 * kQB3;                              // (kKV3, kQB3) its ds, transposed
    float* dk = dST + kKV3 * kQB3;                              // (kKV3, hs)
    float* dv = dk + static_cast<ptrdiff_t>(kKV3) * hs;         // (kKV3, hs)
    const int k0 = tile * kKV3, n = std::min(kKV3, Tn - k0);
    constexpr int nblk = kKV3 / W;  // whole tile: keys past a query (or past Tn) masked to p = 0
    transpose_block(Kt, qkv + L.pos(b, k0) + L.k(g), L.C3, n, hs, kKV3);
    transpose_block(Vt, qkv + L.pos(b, k0) + L.v(g), L.C3, n, hs, kKV3);
    std::fill(dk, dk + 2 * static_cast<ptrdiff_t>(kKV3) * hs, 0.0f);
    for (int h = g * L.group; h < (g + 1) * L.group; ++h) {
      // Queries in blocks of kQB3: first p and ds of the whole block (stored transposed, a
      // key's coefficients contiguous), then dv_j += sum_r p[r][j] dout_r and dk_j += sum_r
      // ds[r][j] q_r with each key's row of dk / dv in registers across the block's queries
      // (one load and one store per block instead of per query). Each dk, dv element still
      // sums its terms in query order: the same bits for any thread count.
      for (int tb = k0; tb < Tn; tb += kQB3) {
        const int nq = std::min(kQB3, Tn - tb);
        for (int r = 0; r < nq; ++r) {
          const int t = tb + r;
          const float* q = qkv + L.pos(b, t) + L.q(h);
          dot_row(p, q, Kt, hs, kKV3, nblk, scale);
          mask_tail(p, std::min(n, t - k0 + 1), nblk);
          exp_shifted(p, p, lse[L.lse(b, h, t)], nblk);
          dot_row(dp, dout + L.out(b, t, h), Vt, hs, kKV3, nblk, 1.0f);
          score_grads(ds, p, dp, D[L.lse(b, h, t)], scale, nblk);
          for (int j = 0; j < kKV3; ++j) {
            PT[j * kQB3 + r] = p[j];
            dST[j * kQB3 + r] = ds[j];
          }
        }
        for (int j = 0; j < n; ++j) {
          scale_add_rows(dv + static_cast<ptrdiff_t>(j) * hs, 1.0f, PT + j * kQB3, dout + L.out(b, tb, h), C, nq,
                         hs);
          scale_add_rows(dk + static_cast<ptrdiff_t>(j) * hs, 1.0f, dST + j * kQB3, qkv + L.pos(b, tb) + L.q(h), L.C3,
                         nq, hs);
        }
      }
    }
    for (int j = 0; j < n; ++j) {
      std::copy(dk + static_cast<ptrdiff_t>(j) * hs, dk + static_cast<ptrdiff_t>(j + 1) * hs,
                dqkv + L.pos(b, k0 + j) + L.k(g));
      std::copy(dv + static_cast<ptrdiff_t>(j) * hs, dv + static_cast<ptrdiff_t>(j + 1) * hs,
                dqkv + L.pos(b, k0 + j) + L.v(g));
    }
  }
}

size_t flash_attention_scratch_bytes(int version, bool backward, int B, int Tn, int C, int NH, int NKV,
                                     int threads) {
  check_flash_attention_sizes(B, Tn, C, NH, NKV);
  const int hs = C / NH;
  const size_t T = static_cast<size_t>(Tn);
  const size_t th = static_cast<size_t>(std::max(threads, 1));
  size_t floats = 0;
  switch (version) {
    case 1:  // P, and in the backward dS: (Tn, Tn) each
      floats = (backward ? 2 : 1) * T * T;
      break;
    case 2:  // the forward's o, m, l, s; the backward's D (Tn) and a key tile's dk, dv
      floats = backward ? T + 2 * static_cast<size_t>(kTile2) * hs
                        : static_cast<size_t>(kTile2) * hs + 3 * static_cast<size_t>(kTile2);
      break;
    case 3:  // per thread; the backward's D (B, NH, Tn) once
      floats = backward ? static_cast<size_t>(B) * NH * T + th * (v3_dq_floats(hs) + v3_dkv_floats(hs))
                        : th * v3_forward_floats(hs);
      break;
    default:
      throw std::invalid_argument("flash attention: no version " + std::to_string(version));
  }
  return floats * sizeof(float);
}

const std::vector<OpVersion<FlashAttentionFn>>& flash_attention_versions() {
  static const std::vector<OpVersion<FlashAttentionFn>> versions = {
      {1, "loops", "plain loops per (b, h), the (T, T) probabilities materialised: the reference",
       &flash_attention_forward_v1<float>},
      {2, "flash-loops", "query x key tiles, online softmax, only the log-sum-exp saved: O(T) memory",
       &flash_attention_forward_v2<float>},
      {3, "flash-simd", "v2 over SIMD registers, a thread per (b, h, query tile)", &flash_attention_forward_v3},
  };
  return versions;
}
const OpVersion<FlashAttentionFn>& flash_attention_version(const std::string& number_or_name) {
  return find_version(flash_attention_versions(), number_or_name, "flash_attention");
}

const std::vector<OpVersion<FlashAttentionBackwardFn>>& flash_attention_backward_versions() {
  static const std::vector<OpVersion<FlashAttentionBackwardFn>> versions = {
      {1, "loops", "the probabilities recomputed whole, (T, T) dp and ds: the reference",
       &flash_attention_backward_v1<float>},
      {2, "flash-loops", "key tiles outside, query tiles inside, p recomputed from q, k and lse",
       &flash_attention_backward_v2<float>},
      {3, "flash-simd", "v2 over SIMD registers in two passes: dq by (b, h, query tile), dk, dv by "
                        "(b, kv head, key tile)",
       &flash_attention_backward_v3},
  };
  return versions;
}
const OpVersion<FlashAttentionBackwardFn>& flash_attention_backward_version(const std::string& number_or_name) {
  return find_version(flash_attention_backward_versions(), number_or_name, "flash_attention_backward");
}

}  // namespace kernels
