// kernels/encoder.cpp: token + position embedding, loops and threads (kernels/encoder.h).
#include "kernels/encoder.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/parallel.h"

namespace kernels {

using std::ptrdiff_t;

// ---- v1: plain loops ------------------------------------------------------------------------
template <typename F>
void encoder_forward_v1(F* out, const int32_t* inp, const F* wte, const F* wpe, int B, int T, int C) {
  // inp (B,T), wte (V,C), wpe (>=T,C) -> out (B,T,C)
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int32_t id = inp[static_cast<ptrdiff_t>(b) * T + t];
      F* o = out + (static_cast<ptrdiff_t>(b) * T + t) * C;
      const F* tok = wte + static_cast<ptrdiff_t>(id) * C;  // the token's row
      if (wpe == nullptr) {  // no position table (RoPE models): the token's row alone
        for (int c = 0; c < C; ++c) o[c] = tok[c];
        continue;
      }
      const F* pos = wpe + static_cast<ptrdiff_t>(t) * C;   // the position's row
      for (int c = 0; c < C; ++c) {
        o[c] = tok[c] + pos[c];  // out[b,t,:] = wte[id,:] + wpe[t,:]
      }
    }
  }
}
template void encoder_forward_v1<float>(float*, const int32_t*, const float*, const float*, int, int, int);
template void encoder_forward_v1<double>(double*, const int32_t*, const double*, const double*, int, int, int);

template <typename F>
void encoder_backward_v1(F* dwte, F* dwpe, const F* dout, const int32_t* inp, int B, int T, int C) {
  // dout (B,T,C) -> dwte (V,C) +=, dwpe (>=T,C) +=
  // The forward copied row id of wte and row t of wpe into out[b,t,:] (slope 1), so each
  // gets dout[b,t,:] back; a token seen twice in the batch gets both contributions.
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int32_t id = inp[static_cast<ptrdiff_t>(b) * T + t];
      const F* d = dout + (static_cast<ptrdiff_t>(b) * T + t) * C;
      F* dtok = dwte + static_cast<ptrdiff_t>(id) * C;
      for (int c = 0; c < C; ++c) dtok[c] += d[c];
      if (dwpe == nullptr) continue;  // no position table
      F* dpos = dwpe + static_cast<ptrdiff_t>(t) * C;
      for (int c = 0; c < C; ++c) dpos[c] += d[c];
    }
  }
}
template void encoder_backward_v1<float>(float*, float*, const float*, const int32_t*, int, int, int);
template void encoder_backward_v1<double>(double*, double*, const double*, const int32_t*, int, int, int);

// ---- v2: threads ------------------------------------------------------------------------------
void encoder_forward_v2(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T,
                        int C) {
  const int N = B * T;
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * C >= kMinParallelElems)
  for (int n = 0; n < N; ++n) {
    const float* tok = wte + static_cast<ptrdiff_t>(inp[n]) * C;
    float* o = out + static_cast<ptrdiff_t>(n) * C;
    if (wpe == nullptr) {  // no position table (RoPE models)
      std::copy(tok, tok + C, o);
      continue;
    }
    const float* pos = wpe + static_cast<ptrdiff_t>(n % T) * C;
    for (int c = 0; c < C; ++c) o[c] = tok[c] + pos[c];  // vectorised by the compiler
  }
}

void encoder_backward_v2(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C) {
  // dwpe: position t sums over b = 0..B-1 in order, one thread per t.
  // dwte: the positions are bucketed by token id (a stable counting sort), then one thread
  // per id sums its positions in order: v1's order, without shared writes.
  const int N = B * T;
  int32_t vmax = 0;
  for (int n = 0; n < N; ++n) vmax = std::max(vmax, inp[n]);
  const int nids = vmax + 1;
  int* bucket_start = thread_scratch<int, 0>(static_cast<size_t>(nids) + 1);  // (nids + 1) offsets
  int* bucket_pos = thread_scratch<int, 1>(static_cast<size_t>(N));           // (N) positions by id
  std::fill(bucket_start, bucket_start + nids + 1, 0);
  for (int n = 0; n < N; ++n) ++bucket_start[static_cast<size_t>(inp[n]) + 1];
  for (int v = 0; v < nids; ++v) bucket_start[v + 1] += bucket_start[v];
  {
    std::vector<int> fill(bucket_start, bucket_start + nids);
    for (int n = 0; n < N; ++n) bucket_pos[fill[inp[n]]++] = n;
  }
  const bool par = static_cast<int64_t>(N) * C >= kMinParallelElems;
#pragma omp parallel if (par)
  {
#pragma omp for schedule(static) nowait
    for (int t = 0; t < (dwpe != nullptr ? T : 0); ++t) {
      float* dp = dwpe + static_cast<ptrdiff_t>(t) * C;
      for (int b = 0; b < B; ++b) {
        const float* d = dout + (static_cast<ptrdiff_t>(b) * T + t) * C;
        for (int c = 0; c < C; ++c) dp[c] += d[c];
      }
    }
#pragma omp for schedule(static)
    for (int v = 0; v < nids; ++v) {
      float* dt = dwte + static_cast<ptrdiff_t>(v) * C;
      for (int k = bucket_start[v]; k < bucket_start[v + 1]; ++k) {
        const float* d = dout + static_cast<ptrdiff_t>(bucket_pos[k]) * C;
        for (int c = 0; c < C; ++c) dt[c] += d[c];
      }
    }
  }
}

const std::vector<OpVersion<EncoderFn>>& encoder_versions() {
  static const std::vector<OpVersion<EncoderFn>> versions = {
      {1, "loops", "plain loops over (b, t): the reference", &encoder_forward_v1<float>},
      {2, "threads", "rows across OpenMP threads", &encoder_forward_v2},
  };
  return versions;
}
const OpVersion<EncoderFn>& encoder_version(const std::string& number_or_name) {
  return find_version(encoder_versions(), number_or_name, "encoder");
}

const std::vector<OpVersion<EncoderBackwardFn>>& encoder_backward_versions() {
  static const std::vector<OpVersion<EncoderBackwardFn>> versions = {
      {1, "loops", "plain loops over (b, t): the reference", &encoder_backward_v1<float>},
      {2, "threads", "dwpe one thread per position; dwte one thread per id after a counting sort",
       &encoder_backward_v2},
  };
  return versions;
}
const OpVersion<EncoderBackwardFn>& encoder_backward_version(const std::string& number_or_name) {
  return find_version(encoder_backward_versions(), number_or_name, "encoder_backward");
}

}  // namespace kernels
