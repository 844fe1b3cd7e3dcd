// nn/attention.cpp: causal multi-head self-attention, forward and backward (nn/attention.h).
//
// Plain loops on purpose: this is the version a student steps through. Per (b, t, h) the
// forward does three passes over the earlier positions t2 <= t, exactly as llm.c's CPU
// attention_forward: scores q.k, softmax, weighted sum of v. The backward walks the same
// three passes in reverse. O(B NH Tn^2 hs) work; a fast path (batched matmuls) can come
// later and be checked against these loops.
#include "nn/attention.h"

#include <cmath>
#include <cstddef>
#include <limits>

#include "nn/check.h"

namespace nn {

using std::ptrdiff_t;

namespace {

void check_attention_sizes(int B, int Tn, int C, int NH) {
  NN_CHECK(B >= 1 && Tn >= 1 && C >= 1 && NH >= 1,
           "attention: expected positive sizes, got B=" << B << " T=" << Tn << " C=" << C
                                                        << " NH=" << NH
                                                        << ": check the model config");
  NN_CHECK(C % NH == 0, "attention: C=" << C << " is not divisible by NH=" << NH
                                        << ": pick n_head so that C / n_head is a whole head size");
}

}  // namespace

// ---- forward ------------------------------------------------------------------------
template <typename F>
void attention_forward(F* out, F* preatt, F* att, const F* qkv, int B, int Tn, int C, int NH) {
  // qkv (B, Tn, 3C), out (B, Tn, C), preatt (B, NH, Tn, Tn), att (B, NH, Tn, Tn)
  check_attention_sizes(B, Tn, C, NH);
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

// ---- backward -----------------------------------------------------------------------
template <typename F>
void attention_backward(F* dqkv, F* dpreatt, F* datt, const F* dout, const F* qkv, const F* att,
                        int B, int Tn, int C, int NH) {
  // dout (B, Tn, C), qkv (B, Tn, 3C), att (B, NH, Tn, Tn)
  // -> dqkv (B, Tn, 3C) assigned; dpreatt, datt (B, NH, Tn, Tn) scratch
  check_attention_sizes(B, Tn, C, NH);
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

// ---- explicit instantiations: float (training), double (gradient checks) ---------------
template void attention_forward<float>(float*, float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, double*, const double*, int, int, int,
                                        int);
template void attention_backward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, int, int, int, int);
template void attention_backward<double>(double*, double*, double*, const double*, const double*,
                                         const double*, int, int, int, int);

}  // namespace nn
