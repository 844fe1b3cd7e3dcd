// kernels/cuda/flash_attention.cu: causal grouped-query flash attention, forward and backward,
// on the GPU (kernels/flash_attention.h states the maths and the layout: qkv (B,T,C+2*NKV*hs)
// = [q | k | v] per position, query head h reads KV head h / (NH / NKV); out (B,T,C); lse
// (B,NH,T), the log-sum-exp of each query's scores, the only thing the forward saves).
//
//   forward v1    one block per (query tile of kBr, b, h), a thread per query holding its q
//                 and its output accumulator in registers; the block walks the key tiles up
//                 to its diagonal through shared memory (K and V tiles of kBc keys), with the
//                 online softmax (running max m and sum l, rescaled per tile). Writes out and
//                 lse = m + log l. No (T,T) matrix, no workspace: the same kernel as
//                 attention.cu's v3 plus the lse and the KV-head mapping.
//   backward v1   two kernels, so that every output element has one owner (no atomics: the
//                 same bits every run):
//                   dq: one block per (query tile, b, h), a thread per query; the key tiles
//                       up to the diagonal through shared memory; p = exp(q.k scale - lse)
//                       and dp = dout . v recomputed, ds = p (dp - D), dq += ds k
//                       (D_t = dout_t . out_t, computed by the thread that owns row t);
//                   dk, dv: one block per (key tile of kBc, b, g), a thread per key holding
//                       its k, v, dk, dv in registers; the block walks every query head of
//                       group g and every query tile from the diagonal down, staging q, dout,
//                       lse and D of kBr queries in shared memory; dv += p dout, dk += ds q.
//                 p and dp are computed twice (once per kernel): the price of no atomics and
//                 of no (T,T) matrix.
//
// Head sizes up to 128 (HS = 32, 64 or 128 instances; channels hs..HS-1 are zeros). Tiles of
// 32 x 32: the emulator runs the tests' sizes in well under a second. Registers: the backward
// keeps 3 (dq) or 4 (dk/dv) head-sized arrays per thread; scripts/check_old_gpus.py (CUDA
// 12.5's ptxas, sm_50-53) reports 6 of the 9 kernels at 255 registers and spilling (up to 2888
// bytes per thread, the HS = 64 and 128 instances). Speeds: not yet measured on a GPU.
//
// Oldest GPU: compute capability 5.0 (NNLAB_SM_MAXWELL: static shared memory, __syncthreads),
// compile-checked for 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
#include <cfloat>
#include <cmath>
#include <string>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"  // stage_kv_tile, online_softmax_tile
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

constexpr int kBr = 32;  // queries per tile
constexpr int kBc = 32;  // keys per tile

void check_flash_sizes(const char* what, int B, int T, int C, int NH, int NKV) {
  if (B < 1 || T < 1 || C < 1 || NH < 1 || NKV < 1 || C % NH != 0 || NH % NKV != 0) {
    throw Error(std::string("flash attention ") + what +
                ": expected positive sizes with C divisible by NH and NH by NKV, got B=" + std::to_string(B) +
                " T=" + std::to_string(T) + " C=" + std::to_string(C) + " NH=" + std::to_string(NH) +
                " NKV=" + std::to_string(NKV));
  }
  if (C / NH > 128) {
    throw Error(std::string("flash attention ") + what + ": head size C/NH = " + std::to_string(C / NH) +
                " is over 128, the most it keeps in registers");
  }
}

// ---- forward ---------------------------------------------------------------------------------
// Grid (ceil(T / kBr), B*NH), block kBr: thread i owns query t = q0 + i.
template <int HS>
__global__ void __launch_bounds__(kBr) flash_forward_kernel(float* out, float* lse, const float* qkv, int T, int C,
                                                            int NH, int NKV, float scale) {
  __shared__ float Ks[kBc][HS];
  __shared__ float Vs[kBc][HS];
  const int bh = static_cast<int>(blockIdx.y);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const int g = h / (NH / NKV);
  const int C3 = C + 2 * NKV * hs;
  // the last query tiles walk the most keys: start them first
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kBr;
  const int t = q0 + static_cast<int>(threadIdx.x);
  const bool active = t < T;  // inactive threads still load tiles and reach every barrier
  const float* base = qkv + static_cast<size_t>(b) * T * C3;
  const float* kbase = base + C + g * hs;             // k_0 of KV head g
  const float* vbase = base + C + NKV * hs + g * hs;  // v_0 of KV head g

  float q[HS];  // q_t * scale
  float o[HS];  // sum exp(s - m) v, unnormalised
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    q[d] = (active && d < hs) ? base[static_cast<size_t>(t) * C3 + h * hs + d] * scale : 0.0f;
    o[d] = 0.0f;
  }
  float m = -FLT_MAX;  // not -INFINITY: exp(m - m_new) must never see -inf - -inf
  float l = 0.0f;

  const int kv_end = min(q0 + kBr, T);
  for (int k0 = 0; k0 < kv_end; k0 += kBc) {
    stage_kv_tile<kBc, HS>(Ks, Vs, kbase, vbase, static_cast<size_t>(C3), k0, T, hs, kBr);
    __syncthreads();
    if (active && k0 <= t) {
      const int valid = min(kBc, t - k0 + 1);
      online_softmax_tile<kBc, HS>(q, Ks, Vs, valid, m, l, o);  // common.cuh
    }
    __syncthreads();  // before the next tile overwrites Ks, Vs
  }
  if (active) {
    const float inv = 1.0f / l;  // l >= 1: the max's own term is exp(0)
    float* o_t = out + (static_cast<size_t>(b) * T + t) * C + h * hs;
#pragma unroll
    for (int d = 0; d < HS; ++d) {
      if (d < hs) o_t[d] = o[d] * inv;
    }
    lse[static_cast<size_t>(bh) * T + t] = m + logf(l);
  }
}

template <int HS>
void flash_forward_launch(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int NKV) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const char* name = HS == 32 ? "flash_forward_kernel<32>" : HS == 64 ? "flash_forward_kernel<64>"
                                                                      : "flash_forward_kernel<128>";
  launch(name, flash_forward_kernel<HS>, dim3(ceil_div(T, kBr), static_cast<unsigned>(B * NH)), dim3(kBr), 0, out,
         lse, qkv, T, C, NH, NKV, scale);
}

void flash_forward_v1(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, int NKV) {
  check_flash_sizes("forward v1", B, T, C, NH, NKV);
  const int hs = C / NH;
  if (hs <= 32) {
    flash_forward_launch<32>(out, lse, qkv, B, T, C, NH, NKV);
  } else if (hs <= 64) {
    flash_forward_launch<64>(out, lse, qkv, B, T, C, NH, NKV);
  } else {
    flash_forward_launch<128>(out, lse, qkv, B, T, C, NH, NKV);
  }
}

// ---- backward: dq ------------------------------------------------------------------------------
// Grid (ceil(T / kBr), B*NH), block kBr: thread i owns query t = q0 + i and writes its dq.
template <int HS>
__global__ void __launch_bounds__(kBr) flash_backward_dq_kernel(float* dqkv, const float* dout, const float* qkv,
                                                                const float* out, const float* lse, int T, int C,
                                                                int NH, int NKV, float scale) {
  __shared__ float Ks[kBc][HS];
  __shared__ float Vs[kBc][HS];
  const int bh = static_cast<int>(blockIdx.y);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const int g = h / (NH / NKV);
  const int C3 = C + 2 * NKV * hs;
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kBr;
  const int t = q0 + static_cast<int>(threadIdx.x);
  const bool active = t < T;
  const float* base = qkv + static_cast<size_t>(b) * T * C3;
  const float* kbase = base + C + g * hs;
  const float* vbase = base + C + NKV * hs + g * hs;
  const size_t orow = (static_cast<size_t>(b) * T + (active ? t : 0)) * C + h * hs;

  float q[HS], dov[HS], dq[HS];
  float D = 0.0f;  // dout_t . out_t
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    const bool in = active && d < hs;
    q[d] = in ? base[static_cast<size_t>(t) * C3 + h * hs + d] * scale : 0.0f;
    dov[d] = in ? dout[orow + d] : 0.0f;
    D += in ? dov[d] * out[orow + d] : 0.0f;
    dq[d] = 0.0f;
  }
  const float lse_t = active ? lse[static_cast<size_t>(bh) * T + t] : 0.0f;

  const int kv_end = min(q0 + kBr, T);
  for (int k0 = 0; k0 < kv_end; k0 += kBc) {
    stage_kv_tile<kBc, HS>(Ks, Vs, kbase, vbase, static_cast<size_t>(C3), k0, T, hs, kBr);
    __syncthreads();
    if (active && k0 <= t) {
      const int valid = min(kBc, t - k0 + 1);
      for (int j = 0; j < valid; ++j) {
        float s = 0.0f, dp = 0.0f;
#pragma unroll
        for (int d = 0; d < HS; ++d) {
          s += q[d] * Ks[j][d];
          dp += dov[d] * Vs[j][d];
        }
        const float ds = expf(s - lse_t) * (dp - D);  // p recomputed from q, k and lse
#pragma unroll
        for (int d = 0; d < HS; ++d) dq[d] += ds * Ks[j][d];
      }
    }
    __syncthreads();
  }
  if (active) {
    float* dst = dqkv + (static_cast<size_t>(b) * T + t) * C3 + h * hs;
#pragma unroll
    for (int d = 0; d < HS; ++d) {
      if (d < hs) dst[d] = dq[d] * scale;
    }
  }
}

// ---- backward: dk, dv --------------------------------------------------------------------------
// Grid (ceil(T / kBc), B*NKV), block kBc: thread i owns key j = k0 + i of KV head g and writes
// its dk, dv, summed over the group's query heads and every later query in a fixed order.
template <int HS>
__global__ void __launch_bounds__(kBc) flash_backward_dkv_kernel(float* dqkv, const float* dout, const float* qkv,
                                                                 const float* out, const float* lse, int T, int C,
                                                                 int NH, int NKV, float scale) {
  static_assert(kBr == kBc, "thread i stages query i of a tile");
  __shared__ float Qs[kBr][HS];
  __shared__ float dOs[kBr][HS];
  __shared__ float lse_s[kBr];
  __shared__ float D_s[kBr];
  const int bg = static_cast<int>(blockIdx.y);
  const int b = bg / NKV;
  const int g = bg % NKV;
  const int hs = C / NH;
  const int group = NH / NKV;
  const int C3 = C + 2 * NKV * hs;
  const int k0 = static_cast<int>(blockIdx.x) * kBc;
  const int j = k0 + static_cast<int>(threadIdx.x);
  const bool active = j < T;
  const float* base = qkv + static_cast<size_t>(b) * T * C3;

  float k[HS], v[HS], dk[HS], dv[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    const bool in = active && d < hs;
    k[d] = in ? base[static_cast<size_t>(j) * C3 + C + g * hs + d] * scale : 0.0f;
    v[d] = in ? base[static_cast<size_t>(j) * C3 + C + NKV * hs + g * hs + d] : 0.0f;
    dk[d] = 0.0f;
    dv[d] = 0.0f;
  }

  for (int h = g * group; h < (g + 1) * group; ++h) {
    // query tiles from the one holding k0: earlier queries see none of these keys
    for (int q0 = k0 / kBr * kBr; q0 < T; q0 += kBr) {
      {  // thread i stages query q0 + i: q, dout, lse and D = dout . out
        const int tq = q0 + static_cast<int>(threadIdx.x);
        const bool in_t = tq < T;
        const size_t orow = (static_cast<size_t>(b) * T + (in_t ? tq : 0)) * C + h * hs;
        float D = 0.0f;
        for (int d = 0; d < HS; ++d) {
          const bool in = in_t && d < hs;
          Qs[threadIdx.x][d] = in ? base[static_cast<size_t>(tq) * C3 + h * hs + d] : 0.0f;
          const float dov = in ? dout[orow + d] : 0.0f;
          dOs[threadIdx.x][d] = dov;
          D += in ? dov * out[orow + d] : 0.0f;
        }
        lse_s[threadIdx.x] = in_t ? lse[(static_cast<size_t>(b) * NH + h) * T + tq] : 0.0f;
        D_s[threadIdx.x] = D;
      }
      __syncthreads();
      if (active) {
        const int first = max(j - q0, 0);           // queries before j do not see key j
        const int last = min(kBr, T - q0);          // past T: no query
        for (int i = first; i < last; ++i) {
          float s = 0.0f, dp = 0.0f;
#pragma unroll
          for (int d = 0; d < HS; ++d) {
            s += Qs[i][d] * k[d];
            dp += dOs[i][d] * v[d];
          }
          const float p = expf(s - lse_s[i]);
          const float ds = p * (dp - D_s[i]);
#pragma unroll
          for (int d = 0; d < HS; ++d) {
            dv[d] += p * dOs[i][d];
            dk[d] += ds * Qs[i][d];
          }
        }
      }
      __syncthreads();  // before the next tile overwrites the staged queries
    }
  }
  if (active) {
    float* dst = dqkv + (static_cast<size_t>(b) * T + j) * C3;
#pragma unroll
    for (int d = 0; d < HS; ++d) {
      if (d < hs) {
        dst[C + g * hs + d] = dk[d] * scale;
        dst[C + NKV * hs + g * hs + d] = dv[d];
      }
    }
  }
}

template <int HS>
void flash_backward_launch(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int B,
                           int T, int C, int NH, int NKV) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const char* dq_name = HS == 32 ? "flash_backward_dq_kernel<32>" : HS == 64 ? "flash_backward_dq_kernel<64>"
                                                                             : "flash_backward_dq_kernel<128>";
  const char* dkv_name = HS == 32 ? "flash_backward_dkv_kernel<32>" : HS == 64 ? "flash_backward_dkv_kernel<64>"
                                                                               : "flash_backward_dkv_kernel<128>";
  launch(dq_name, flash_backward_dq_kernel<HS>, dim3(ceil_div(T, kBr), static_cast<unsigned>(B * NH)), dim3(kBr), 0,
         dqkv, dout, qkv, out, lse, T, C, NH, NKV, scale);
  launch(dkv_name, flash_backward_dkv_kernel<HS>, dim3(ceil_div(T, kBc), static_cast<unsigned>(B * NKV)), dim3(kBc),
         0, dqkv, dout, qkv, out, lse, T, C, NH, NKV, scale);
}

void flash_backward_v1(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int B,
                       int T, int C, int NH, int NKV) {
  check_flash_sizes("backward v1", B, T, C, NH, NKV);
  const int hs = C / NH;
  if (hs <= 32) {
    flash_backward_launch<32>(dqkv, dout, qkv, out, lse, B, T, C, NH, NKV);
  } else if (hs <= 64) {
    flash_backward_launch<64>(dqkv, dout, qkv, out, lse, B, T, C, NH, NKV);
  } else {
    flash_backward_launch<128>(dqkv, dout, qkv, out, lse, B, T, C, NH, NKV);
  }
}

}  // namespace

void add_flash_attention(Kernels& k) {
  k.flash_attention = {
      {1, "flash", "a block per (query tile, b, h), K and V tiles in shared memory, online softmax in registers, "
                   "lse saved: no (T,T) matrix",
       flash_forward_v1, {NNLAB_SM_MAXWELL}},
  };
  k.flash_attention_backward = {
      {1, "flash", "dq by (query tile, b, h), dk and dv by (key tile, b, kv head), p recomputed from q, k and lse "
                   "in each: no (T,T) matrix, no atomics",
       flash_backward_v1, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
