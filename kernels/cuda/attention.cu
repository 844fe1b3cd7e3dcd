// kernels/cuda/attention.cu: causal self-attention forward, the GPT's attention core
// (nn/attention.h is the CPU version and states the maths):
//
//   for each batch row b, head h, query position t (hs = C / NH, scale = 1 / sqrt(hs)):
//     s[t2] = q_t . k_t2 * scale            t2 <= t (causal: no peeking ahead)
//     p     = softmax(s[0..t])
//     out_t = sum_{t2 <= t} p[t2] v_t2      (the head's slice of out)
//
// qkv (B,T,3C) holds q | k | v side by side per position; out (B,T,C), heads concatenated.
// The work is two matmuls per head, Q.K^T (T,hs)x(hs,T) and P.V (T,T)x(T,hs), with a
// softmax between them. Written that way, the (T,T) score matrix goes to memory and back:
// at T = 1024 that is 4 MiB per head, against 256 KiB of q, k, v; at T = 4096, 64 MiB per
// head. The ladder is about that matrix:
//
//   v1 unfused, naive   three kernels through a (B,NH,T,T) workspace: scores (one thread
//                       per entry), softmax (one thread per row), P.V (one thread per
//                       output); O(T^2) memory, 4 trips of the T^2 matrix through DRAM
//   v2 unfused, tiled   the two products in 32x32 shared-memory tiles (tiles above the
//                       diagonal skipped) and one warp per softmax row: each q, k, v
//                       element is read from DRAM 32x less often, but the T^2 scores still
//                       make the same 4 trips, so the traffic barely shrinks
//   v3 fused (flash)    one kernel; a block owns 64 queries of one head and walks the key
//                       tiles up to its diagonal through shared memory, keeping scores in
//                       registers and the softmax "online" (running max and sum, rescaled
//                       per tile): the T^2 matrix never exists, O(T) memory, no workspace;
//                       traffic is reading qkv and writing out
//
// What the unfused versions leave behind: after v1 or v2 returns, their workspace holds the
// softmax PROBABILITIES p[b,h,t,t2] (the scores were overwritten in place by the softmax
// kernel, and P.V only reads them), row (b,h,t) at ((b*NH + h)*T + t)*T, entries t2 <= t;
// entries t2 > t are never written. The GPT trainer passes its per-layer att buffer as the
// workspace and hands it to the backward below (the bench's validate checks these
// probabilities against the reference too). v3 keeps none: a backward after it would have
// to recompute them.
//
// The backward (nn::attention_backward), per (b, h), with att the probabilities above:
//
//   datt[t,t2]    = dout_t . v_t2                                   t2 <= t
//   dpreatt[t,t2] = att[t,t2] (datt[t,t2] - sum_j att[t,j] datt[t,j])   (the softmax's Jacobian)
//   dq_t  = scale sum_{t2 <= t} dpreatt[t,t2] k_t2      dQ = dP . K * scale
//   dk_t2 = scale sum_{t >= t2} dpreatt[t,t2] q_t       dK = dP^T . Q * scale
//   dv_t2 =       sum_{t >= t2} att[t,t2] dout_t        dV = P^T . dOut
//
// four products per head (dOut.V^T, dP.K, dP^T.Q, P^T.dOut), each half the work of a
// full one (the causal triangle), and a row reduction between the first and the others.
// dqkv (B,T,3C) is assigned: every element written once, by one thread, summed in a fixed
// order (no atomics: the same bits every run). Both versions keep datt, then dpreatt in
// place, in a (B,NH,T,T) workspace (O(T^2) scratch, entries t2 <= t):
//
//   backward v1 naive   a thread per datt entry (a dot of hs); a thread per row for the
//                       softmax backward; a thread per dqkv element walking its t2 (dq) or
//                       t (dk, dv) range in order: dk and dv read a column of dP / P, T
//                       floats apart from one t to the next
//   backward v2 tiled   the four products in 32x32 shared-memory tiles, tiles above the
//                       diagonal skipped (dK and dV walk the query tiles from the diagonal
//                       down, reading dP / P tiles transposed out of shared memory); one
//                       warp per softmax-backward row (coalesced, a warp_sum for the dot)
//
// Speeds: not yet measured on a GPU.
//
// Oldest GPU: compute capability 5.0 for every version, forward and backward (NNLAB_SM_MAXWELL:
// shared-memory tiles, __syncthreads, _sync shuffles), compile-checked for 5.0, 5.2 and 5.3
// (scripts/check_old_gpus.py).
#include <cfloat>
#include <cmath>
#include <string>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"  // warp_sum, stage_kv_tile, online_softmax_tile
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

// Throws Error unless the sizes make sense (every version checks before launching).
void check_attention_sizes(const char* version, int B, int T, int C, int NH) {
  if (B < 1 || T < 1 || C < 1 || NH < 1 || C % NH != 0) {
    throw Error(std::string("attention ") + version + ": expected positive sizes with C divisible by NH, got B=" +
                std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                " NH=" + std::to_string(NH));
  }
}

// The unfused versions keep the scores, then the probabilities, of every (b, h) in a
// (B,NH,T,T) workspace: row (b,h,t) starts at ((b*NH + h)*T + t)*T. Only entries t2 <= t
// are written or read; the rest is never touched (a GPU would not clear it either). When
// they return it holds the probabilities: the backward's att. The backward versions use the
// same size for datt / dpreatt.
size_t scores_workspace(int B, int T, int /*C*/, int NH) {
  return static_cast<size_t>(B) * static_cast<size_t>(NH) * static_cast<size_t>(T) * static_cast<size_t>(T) *
         sizeof(float);
}

size_t no_workspace(int, int, int, int) { return 0; }

void check_workspace(const char* version, const float* workspace) {
  if (!workspace) {
    throw Error(std::string("attention ") + version +
                ": needs a workspace of B*NH*T*T floats (Version::workspace says how many bytes), got nullptr");
  }
}

// The offset of row (bh, t) in the (B*NH, T, T) workspace, in size_t: B*NH*T*T passes 2^31
// at B=8, NH=12, T=4800.
__device__ __forceinline__ size_t score_row(int bh, int t, int T) {
  return (static_cast<size_t>(bh) * static_cast<size_t>(T) + static_cast<size_t>(t)) * static_cast<size_t>(T);
}

// ---- v1: unfused, naive ------------------------------------------------------------------

// att[b,h,t,t2] = q_t . k_t2 * scale for t2 <= t. Grid (ceil(T*T / block), B*NH): one
// thread per entry of the (T,T) matrix of head (b,h); threads above the diagonal do nothing.
__global__ void scores_naive_kernel(float* att, const float* qkv, int T, int C, int NH, float scale) {
  const int bh = static_cast<int>(blockIdx.y);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;  // t*T + t2
  if (i >= static_cast<long long>(T) * T) return;
  const int t = static_cast<int>(i / T);
  const int t2 = static_cast<int>(i % T);
  if (t2 > t) return;  // masked: the softmax never reads it
  const float* q = qkv + (static_cast<size_t>(b) * T + t) * 3 * C + h * hs;           // q_t of head h
  const float* k = qkv + (static_cast<size_t>(b) * T + t2) * 3 * C + C + h * hs;      // k_t2: +C
  float dot = 0.0f;
  for (int d = 0; d < hs; ++d) dot += q[d] * k[d];
  att[score_row(bh, t, T) + t2] = dot * scale;
}

// In place, row (b,h,t): att[t2] = exp(att[t2] - max) / sum_j exp(att[j] - max), t2 <= t.
// One thread per row walks it three times: simple, and slow (one thread does T work, and
// neighbouring threads read addresses T floats apart, so no load is coalesced).
__global__ void softmax_naive_kernel(float* att, int rows, int T) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // b*NH*T + h*T + t
  if (row >= rows) return;
  const int t = row % T;
  float* a = att + static_cast<size_t>(row) * T;
  float maxval = -FLT_MAX;  // not -INFINITY: never risk -inf - -inf
  for (int t2 = 0; t2 <= t; ++t2) maxval = fmaxf(maxval, a[t2]);
  float sum = 0.0f;
  for (int t2 = 0; t2 <= t; ++t2) {
    const float e = expf(a[t2] - maxval);
    a[t2] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;  // the max's own term is exp(0) = 1, so sum >= 1
  for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
}

// out[b,t,h*hs + d] = sum_{t2 <= t} p[b,h,t,t2] v_t2[d]: one thread per output element.
// Neighbouring threads (consecutive d) read consecutive v's and the same p: coalesced.
__global__ void pv_naive_kernel(float* out, const float* att, const float* qkv, int B, int T, int C, int NH) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;  // (b*T + t)*C + c
  if (i >= static_cast<long long>(B) * T * C) return;
  const int hs = C / NH;
  const int bt = static_cast<int>(i / C);
  const int b = bt / T;
  const int t = bt % T;
  const int c = static_cast<int>(i % C);
  const int h = c / hs;
  const int d = c % hs;
  const float* p = att + score_row(b * NH + h, t, T);
  const float* v = qkv + static_cast<size_t>(b) * T * 3 * C + 2 * C + h * hs + d;  // v_0[d]; +2C: value
  float acc = 0.0f;
  for (int t2 = 0; t2 <= t; ++t2) acc += p[t2] * v[static_cast<size_t>(t2) * 3 * C];
  out[i] = acc;
}

void attention_v1(float* out, float* workspace, const float* qkv, int B, int T, int C, int NH) {
  check_attention_sizes("v1", B, T, C, NH);
  check_workspace("v1", workspace);
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const int block = 256;
  const long long entries = static_cast<long long>(T) * T;
  launch("scores_naive_kernel", scores_naive_kernel, dim3(static_cast<unsigned>((entries + block - 1) / block),
                                                          static_cast<unsigned>(B * NH)),
         dim3(block), 0, workspace, qkv, T, C, NH, scale);
  const int rows = B * NH * T;
  launch("softmax_naive_kernel", softmax_naive_kernel, dim3(ceil_div(rows, block)), dim3(block), 0, workspace,
         rows, T);
  const long long outputs = static_cast<long long>(B) * T * C;
  launch("pv_naive_kernel", pv_naive_kernel, dim3(static_cast<unsigned>((outputs + block - 1) / block)),
         dim3(block), 0, out, static_cast<const float*>(workspace), qkv, B, T, C, NH);
}

// ---- v2: unfused, shared-memory tiles ----------------------------------------------------

constexpr int kTile = 32;  // output tile (kTile x kTile), one thread per entry: 1024 threads

// The plain loop both tiled kernels replace, for one output entry (r, c):
//     for (k = 0; k < K; ++k) acc += A[r][k] * B[k][c];
// Here a block stages a (32 x 32) slab of A and of B in shared memory, every thread then
// reads 32 of each from there: each global element is loaded once per block instead of once
// per thread, 32x fewer DRAM/L2 reads. The output the kernel writes is still (T,T).

// S (T,T) = Q (T,hs) . K^T (hs,T) * scale for one head, lower triangle. Grid (T/32 key
// tiles, T/32 query tiles, B*NH); block (32 keys, 32 queries).
__global__ void scores_tiled_kernel(float* att, const float* qkv, int T, int C, int NH, float scale) {
  __shared__ float Qs[kTile][kTile + 1];  // (32 queries, 32 channels); +1: no bank conflicts
  __shared__ float Ks[kTile][kTile + 1];  // (32 keys, 32 channels)
  const int bh = static_cast<int>(blockIdx.z);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const int q0 = static_cast<int>(blockIdx.y) * kTile;  // first query of the tile
  const int k0 = static_cast<int>(blockIdx.x) * kTile;  // first key of the tile
  if (k0 > q0) return;  // every key > every query: the whole tile is masked (the block leaves together)
  const int tx = static_cast<int>(threadIdx.x);  // key within the tile (and channel, when loading)
  const int ty = static_cast<int>(threadIdx.y);  // query within the tile (and key row, when loading)
  const int t = q0 + ty;
  const int t2 = k0 + tx;
  const float* qbase = qkv + static_cast<size_t>(b) * T * 3 * C + h * hs;  // q_0 of head h
  const float* kbase = qbase + C;                                         // k_0 of head h
  float acc = 0.0f;
  for (int c0 = 0; c0 < hs; c0 += kTile) {  // channel slabs of 32
    const int c = c0 + tx;
    Qs[ty][tx] = (t < T && c < hs) ? qbase[static_cast<size_t>(t) * 3 * C + c] : 0.0f;             // (q0+ty, c0+tx)
    Ks[ty][tx] = (k0 + ty < T && c < hs) ? kbase[static_cast<size_t>(k0 + ty) * 3 * C + c] : 0.0f;  // (k0+ty, c0+tx)
    __syncthreads();
    for (int j = 0; j < kTile; ++j) acc += Qs[ty][j] * Ks[tx][j];  // q_t . k_t2 over this slab
    __syncthreads();
  }
  if (t < T && t2 <= t) att[score_row(bh, t, T) + t2] = acc * scale;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The softmax of v1 with one warp per row: lanes read consecutive entries (coalesced) and
// the max and sum are combined with shuffles. Block 256 = 8 rows.
__global__ void softmax_warp_kernel(float* att, int rows, int T) {
  const int row = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= rows) return;  // the whole warp leaves: its shuffles are never reached
  const int t = row % T;
  float* a = att + static_cast<size_t>(row) * T;
  float maxval = -FLT_MAX;  // lanes past t keep -FLT_MAX, which the max ignores
  for (int t2 = lane; t2 <= t; t2 += 32) maxval = fmaxf(maxval, a[t2]);
  maxval = warp_max(maxval);
  float sum = 0.0f;
  for (int t2 = lane; t2 <= t; t2 += 32) {
    const float e = expf(a[t2] - maxval);
    a[t2] = e;
    sum += e;
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int t2 = lane; t2 <= t; t2 += 32) a[t2] *= inv;
}

// O (T,hs) = P (T,T) . V (T,hs) for one head, summing key tiles up to the diagonal. Grid
// (ceil(hs/32) channel tiles, T/32 query tiles, B*NH); block (32 channels, 32 queries).
__global__ void pv_tiled_kernel(float* out, const float* att, const float* qkv, int T, int C, int NH) {
  __shared__ float Ps[kTile][kTile + 1];  // (32 queries, 32 keys)
  __shared__ float Vs[kTile][kTile + 1];  // (32 keys, 32 channels)
  const int bh = static_cast<int>(blockIdx.z);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const int c0 = static_cast<int>(blockIdx.x) * kTile;  // first channel of the tile
  const int q0 = static_cast<int>(blockIdx.y) * kTile;  // first query of the tile
  const int tx = static_cast<int>(threadIdx.x);          // channel (and key, when loading P)
  const int ty = static_cast<int>(threadIdx.y);          // query (and key row, when loading V)
  const int t = q0 + ty;
  const int c = c0 + tx;
  const float* vbase = qkv + static_cast<size_t>(b) * T * 3 * C + 2 * C + h * hs;  // v_0 of head h
  float acc = 0.0f;
  for (int k0 = 0; k0 <= q0 && k0 < T; k0 += kTile) {  // key tiles up to the diagonal tile
    const int key = k0 + tx;
    // Above the diagonal the workspace holds whatever was there: mask it here, never read it.
    Ps[ty][tx] = (t < T && key <= t) ? att[score_row(bh, t, T) + key] : 0.0f;                  // (q0+ty, k0+tx)
    Vs[ty][tx] = (k0 + ty < T && c < hs) ? vbase[static_cast<size_t>(k0 + ty) * 3 * C + c] : 0.0f;  // (k0+ty, c0+tx)
    __syncthreads();
    for (int j = 0; j < kTile; ++j) acc += Ps[ty][j] * Vs[j][tx];
    __syncthreads();
  }
  if (t < T && c < hs) out[(static_cast<size_t>(b) * T + t) * C + h * hs + c] = acc;
}

void attention_v2(float* out, float* workspace, const float* qkv, int B, int T, int C, int NH) {
  check_attention_sizes("v2", B, T, C, NH);
  check_workspace("v2", workspace);
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int tiles = ceil_div(T, kTile);
  const auto heads = static_cast<unsigned>(B * NH);
  launch("scores_tiled_kernel", scores_tiled_kernel, dim3(tiles, tiles, heads), dim3(kTile, kTile), 0, workspace,
         qkv, T, C, NH, scale);
  const int rows = B * NH * T;
  const int block = 256;  // 8 warps, 8 rows
  launch("softmax_warp_kernel", softmax_warp_kernel, dim3(ceil_div(rows, block / 32)), dim3(block), 0, workspace,
         rows, T);
  launch("pv_tiled_kernel", pv_tiled_kernel, dim3(ceil_div(hs, kTile), tiles, heads), dim3(kTile, kTile), 0, out,
         static_cast<const float*>(workspace), qkv, T, C, NH);
}

// ---- v3: fused, flash-style ----------------------------------------------------------------

constexpr int kBr = 64;  // queries per block, one thread each
constexpr int kBc = 32;  // keys per shared-memory tile

// One block per (tile of kBr queries, b*NH + h); thread i owns query t = q0 + i: its q and
// its output accumulator o live in registers, as do its kBc scores of the current key tile.
// HS is the head size rounded up to 32, 64 or 128; channels hs..HS-1 are zeros in q, k
// and v, so they add nothing (and the loops over HS unroll, which keeps q and o in
// registers). ptxas -v for sm_80 (CUDA 13): HS = 64 uses 252 registers and spills nothing;
// at HS = 128, q + o + s = 288 floats is more than the 255 registers a thread can have,
// and about 900 bytes per thread spill to local memory.
//
// The online softmax: after key tiles 0..j the thread holds
//     m = max of its scores so far,  l = sum exp(s - m),  o = sum exp(s - m) v
// and a new tile with max m_tile rescales all three by exp(m - m_new), m_new = max(m, m_tile),
// before adding its own terms. At the end out = o / l: the softmax of all scores, without
// ever storing them.
template <int HS>
__global__ void __launch_bounds__(kBr) flash_attention_kernel(float* out, const float* qkv, int T, int C, int NH,
                                                              float scale) {
  __shared__ float Ks[kBc][HS];  // (kBc keys, HS channels): every thread reads the same k (broadcast)
  __shared__ float Vs[kBc][HS];  // (kBc keys, HS channels)
  const int bh = static_cast<int>(blockIdx.y);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  // The last query tiles have the most keys to walk: hand them out first, so the long
  // blocks do not start last and leave the GPU waiting on a tail.
  const int q0 = (static_cast<int>(gridDim.x - 1 - blockIdx.x)) * kBr;
  const int t = q0 + static_cast<int>(threadIdx.x);  // this thread's query
  const bool active = t < T;  // inactive threads still load tiles and reach every barrier
  const float* head = qkv + static_cast<size_t>(b) * T * 3 * C + h * hs;  // q_0 of head h; +C: k, +2C: v

  float q[HS];  // q_t * scale (scaling q once instead of every score)
  float o[HS];  // sum exp(s - m) v, unnormalised
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    q[d] = (active && d < hs) ? head[static_cast<size_t>(t) * 3 * C + d] * scale : 0.0f;
    o[d] = 0.0f;
  }
  float m = -FLT_MAX;  // running max; not -INFINITY: exp(m - m_new) must never see -inf - -inf
  float l = 0.0f;      // running sum of exp(s - m)

  // Key tiles up to this query tile's last query: tiles entirely above the diagonal are skipped.
  const int kv_end = min(q0 + kBr, T);
  for (int k0 = 0; k0 < kv_end; k0 += kBc) {
    // The block loads keys k0..k0+kBc-1 of k and v: consecutive threads, consecutive channels.
    stage_kv_tile<kBc, HS>(Ks, Vs, head + C, head + 2 * C, static_cast<size_t>(3) * C, k0, T, hs, kBr);
    __syncthreads();

    if (active && k0 <= t) {  // else every key of the tile is after t: nothing to add
      const int valid = min(kBc, t - k0 + 1);  // keys k0 .. k0+valid-1 are <= t (and < T)
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
  }
}

template <int HS>
void flash_attention_launch(float* out, const float* qkv, int B, int T, int C, int NH) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const char* name = HS == 32   ? "flash_attention_kernel<32>"
                     : HS == 64 ? "flash_attention_kernel<64>"
                                : "flash_attention_kernel<128>";
  launch(name, flash_attention_kernel<HS>, dim3(ceil_div(T, kBr), static_cast<unsigned>(B * NH)),
         dim3(kBr), 0, out, qkv, T, C, NH, scale);
}

void attention_v3(float* out, float* /*workspace: none*/, const float* qkv, int B, int T, int C, int NH) {
  check_attention_sizes("v3", B, T, C, NH);
  const int hs = C / NH;
  if (hs <= 32) {
    flash_attention_launch<32>(out, qkv, B, T, C, NH);
  } else if (hs <= 64) {
    flash_attention_launch<64>(out, qkv, B, T, C, NH);
  } else if (hs <= 128) {
    flash_attention_launch<128>(out, qkv, B, T, C, NH);
  } else {
    throw Error("attention v3 (fused): head size C/NH = " + std::to_string(hs) +
                " is over 128, the most it keeps in registers; use v1 or v2, or more heads");
  }
}

// ==== the backward ==========================================================================

void check_backward_workspace(const char* version, const float* workspace) {
  if (!workspace) {
    throw Error(std::string("attention backward ") + version +
                ": needs a workspace of B*NH*T*T floats for datt / dpreatt (Version::workspace says how many "
                "bytes), got nullptr");
  }
}

// ---- backward v1: naive ------------------------------------------------------------------

// datt[b,h,t,t2] = dout_t . v_t2 for t2 <= t. Grid (ceil(T*T / block), B*NH): one thread per
// entry of head (b,h)'s (T,T) matrix, as the forward's scores_naive_kernel.
__global__ void datt_naive_kernel(float* datt, const float* dout, const float* qkv, int T, int C, int NH) {
  const int bh = static_cast<int>(blockIdx.y);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;  // t*T + t2
  if (i >= static_cast<long long>(T) * T) return;
  const int t = static_cast<int>(i / T);
  const int t2 = static_cast<int>(i % T);
  if (t2 > t) return;  // masked: nothing downstream reads it
  const float* g = dout + (static_cast<size_t>(b) * T + t) * C + h * hs;                // dout_t of head h
  const float* v = qkv + (static_cast<size_t>(b) * T + t2) * 3 * C + 2 * C + h * hs;   // v_t2: +2C
  float dot = 0.0f;
  for (int d = 0; d < hs; ++d) dot += g[d] * v[d];
  datt[score_row(bh, t, T) + t2] = dot;
}

// In place, row (b,h,t): d[t2] = p[t2] (d[t2] - sum_{j <= t} p[j] d[j]), t2 <= t (datt
// becomes dpreatt). One thread per row, two walks along it.
__global__ void softmax_backward_naive_kernel(float* d, const float* att, int rows, int T) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // b*NH*T + h*T + t
  if (row >= rows) return;
  const int t = row % T;
  const float* p = att + static_cast<size_t>(row) * T;
  float* g = d + static_cast<size_t>(row) * T;
  float weighted = 0.0f;  // sum_j p[j] datt[j]
  for (int t2 = 0; t2 <= t; ++t2) weighted += p[t2] * g[t2];
  for (int t2 = 0; t2 <= t; ++t2) g[t2] = p[t2] * (g[t2] - weighted);
}

// One thread per element of dqkv (B,T,3C): which third of the row it is in says which sum:
//   q part: dq_t[d]  = scale sum_{t2 = 0..t}   dp[t][t2] k_t2[d]   (a row of dP)
//   k part: dk_t[d]  = scale sum_{t3 = t..T-1} dp[t3][t] q_t3[d]   (a column of dP)
//   v part: dv_t[d]  =       sum_{t3 = t..T-1} p[t3][t]  dout_t3[d] (a column of P)
// Each sum in increasing order; written once (assigned).
__global__ void dqkv_naive_kernel(float* dqkv, const float* dp, const float* att, const float* dout,
                                  const float* qkv, int B, int T, int C, int NH, float scale) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;  // (b*T + t)*3C + j
  if (i >= static_cast<long long>(B) * T * 3 * C) return;
  const int hs = C / NH;
  const int bt = static_cast<int>(i / (3 * C));
  const int b = bt / T;
  const int t = bt % T;
  const int j = static_cast<int>(i % (3 * C));
  const int part = j / C;  // 0: q, 1: k, 2: v
  const int h = (j % C) / hs;
  const int d = (j % C) % hs;
  const int bh = b * NH + h;
  const size_t C3 = 3 * static_cast<size_t>(C);
  const float* head = qkv + static_cast<size_t>(b) * T * C3 + h * hs + d;  // q_0[d] of head h; +C: k, +2C: v
  float acc = 0.0f;
  if (part == 0) {
    const float* row = dp + score_row(bh, t, T);
    for (int t2 = 0; t2 <= t; ++t2) acc += row[t2] * head[static_cast<size_t>(t2) * C3 + C];
    acc *= scale;
  } else if (part == 1) {
    for (int t3 = t; t3 < T; ++t3) acc += dp[score_row(bh, t3, T) + t] * head[static_cast<size_t>(t3) * C3];
    acc *= scale;
  } else {
    const float* g = dout + static_cast<size_t>(b) * T * C + h * hs + d;  // dout_0[d] of head h
    for (int t3 = t; t3 < T; ++t3) acc += att[score_row(bh, t3, T) + t] * g[static_cast<size_t>(t3) * C];
  }
  dqkv[i] = acc;
}

void attention_backward_v1(float* dqkv, float* workspace, const float* dout, const float* qkv, const float* att,
                           int B, int T, int C, int NH) {
  check_attention_sizes("backward v1", B, T, C, NH);
  check_backward_workspace("v1", workspace);
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const int block = 256;
  const long long entries = static_cast<long long>(T) * T;
  launch("datt_naive_kernel", datt_naive_kernel,
         dim3(static_cast<unsigned>((entries + block - 1) / block), static_cast<unsigned>(B * NH)), dim3(block), 0,
         workspace, dout, qkv, T, C, NH);
  const int rows = B * NH * T;
  launch("softmax_backward_naive_kernel", softmax_backward_naive_kernel, dim3(ceil_div(rows, block)), dim3(block),
         0, workspace, att, rows, T);
  const long long outputs = static_cast<long long>(B) * T * 3 * C;
  launch("dqkv_naive_kernel", dqkv_naive_kernel, dim3(static_cast<unsigned>((outputs + block - 1) / block)),
         dim3(block), 0, dqkv, static_cast<const float*>(workspace), att, dout, qkv, B, T, C, NH, scale);
}

// ---- backward v2: shared-memory tiles ----------------------------------------------------
//
// Three tiled kernels serve the four products. Each works on one head (b,h) = blockIdx.z
// and takes its row vectors as (base pointer, row stride): row t of head h of x is
// x + (b*T + t)*ld + h*hs, so q, k, v (stride 3C, bases qkv, qkv + C, qkv + 2C), dout
// (stride C) and the parts of dqkv are all the same kind of operand. M is a (B,NH,T,T)
// matrix (att or the workspace) of which only the lower triangle t2 <= t is read.
//
//   lower_abt_tiled_kernel    S[t][t2]  = a_t . b_t2              t2 <= t    datt = dOut.V^T
//   lower_times_tiled_kernel  out_t     = alpha sum_{t2<=t} M[t][t2] x_t2    dQ = dP.K scale
//   lower_t_times_tiled_kernel out_t2   = alpha sum_{t>=t2} M[t][t2] x_t     dK = dP^T.Q scale,
//                                                                             dV = P^T.dOut
// Block (32, 32) = one thread per output entry of a 32x32 tile; every operand goes through
// a 32x32 shared tile (+1 column: no bank conflicts when a warp reads down a column).

// Row t of head (b,h) of an operand with row stride ld.
__device__ __forceinline__ size_t head_row(int b, int h, int t, int T, int ld, int hs) {
  return (static_cast<size_t>(b) * static_cast<size_t>(T) + static_cast<size_t>(t)) * static_cast<size_t>(ld) +
         static_cast<size_t>(h) * static_cast<size_t>(hs);
}

// S (T,T) = A (T,hs) . B^T (hs,T), lower triangle. Grid (T/32 column tiles, T/32 row
// tiles, B*NH); block (32 columns t2, 32 rows t). The forward's scores_tiled_kernel with
// general operands and no scale.
__global__ void lower_abt_tiled_kernel(float* S, const float* a, int lda, const float* bm, int ldb, int T, int C,
                                       int NH) {
  __shared__ float As[kTile][kTile + 1];  // (32 rows t, 32 channels)
  __shared__ float Bs[kTile][kTile + 1];  // (32 rows t2, 32 channels)
  const int bh = static_cast<int>(blockIdx.z);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const int r0 = static_cast<int>(blockIdx.y) * kTile;  // first row t of the tile
  const int s0 = static_cast<int>(blockIdx.x) * kTile;  // first column t2 of the tile
  if (s0 > r0) return;  // above the diagonal: the whole block leaves together
  const int tx = static_cast<int>(threadIdx.x);  // column t2 within the tile (channel, when loading)
  const int ty = static_cast<int>(threadIdx.y);  // row t within the tile (and row t2, when loading B)
  const int t = r0 + ty;
  const int t2 = s0 + tx;
  float acc = 0.0f;
  for (int c0 = 0; c0 < hs; c0 += kTile) {  // channel slabs of 32
    const int c = c0 + tx;
    As[ty][tx] = (t < T && c < hs) ? a[head_row(b, h, t, T, lda, hs) + c] : 0.0f;                   // (r0+ty, c0+tx)
    Bs[ty][tx] = (s0 + ty < T && c < hs) ? bm[head_row(b, h, s0 + ty, T, ldb, hs) + c] : 0.0f;    // (s0+ty, c0+tx)
    __syncthreads();
    for (int j = 0; j < kTile; ++j) acc += As[ty][j] * Bs[tx][j];  // a_t . b_t2 over this slab
    __syncthreads();
  }
  if (t < T && t2 <= t) S[score_row(bh, t, T) + t2] = acc;
}

// out (T,hs) = alpha M (T,T) . X (T,hs), M lower triangular: the column tiles of M (key
// tiles) from 0 up to the diagonal. Grid (ceil(hs/32) channel tiles, T/32 row tiles,
// B*NH); block (32 channels, 32 rows t). The forward's pv_tiled_kernel, generalised.
__global__ void lower_times_tiled_kernel(float* out, int ldo, const float* M, const float* x, int ldx, int T, int C,
                                         int NH, float alpha) {
  __shared__ float Ms[kTile][kTile + 1];  // (32 rows t, 32 columns t2)
  __shared__ float Xs[kTile][kTile + 1];  // (32 rows t2, 32 channels)
  const int bh = static_cast<int>(blockIdx.z);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const int c0 = static_cast<int>(blockIdx.x) * kTile;  // first channel of the tile
  const int r0 = static_cast<int>(blockIdx.y) * kTile;  // first row t of the tile
  const int tx = static_cast<int>(threadIdx.x);          // channel (and column t2, when loading M)
  const int ty = static_cast<int>(threadIdx.y);          // row t (and row t2, when loading X)
  const int t = r0 + ty;
  const int c = c0 + tx;
  float acc = 0.0f;
  for (int s0 = 0; s0 <= r0 && s0 < T; s0 += kTile) {  // column tiles up to the diagonal tile
    const int t2 = s0 + tx;
    // Above the diagonal M holds anything (NaN in the tests): masked here, never read.
    Ms[ty][tx] = (t < T && t2 <= t) ? M[score_row(bh, t, T) + t2] : 0.0f;                           // (r0+ty, s0+tx)
    Xs[ty][tx] = (s0 + ty < T && c < hs) ? x[head_row(b, h, s0 + ty, T, ldx, hs) + c] : 0.0f;     // (s0+ty, c0+tx)
    __syncthreads();
    for (int j = 0; j < kTile; ++j) acc += Ms[ty][j] * Xs[j][tx];  // sum_t2 M[t][t2] x_t2[c]
    __syncthreads();
  }
  if (t < T && c < hs) out[head_row(b, h, t, T, ldo, hs) + c] = alpha * acc;
}

// out (T,hs) = alpha M^T (T,T) . X (T,hs), M lower triangular: out row t2 sums over the
// rows t >= t2 of M, so a block walks the row tiles of M from its diagonal tile down to T.
// The plain loop it replaces, for one output entry (t2, c):
//     for (t = t2; t < T; ++t) acc += M[t][t2] * x_t[c];
// M's tile is loaded as stored (a warp reads 32 consecutive t2 of one row t: coalesced)
// and read transposed from shared memory (Ms[j][ty]: one address per warp, a broadcast).
// Grid (ceil(hs/32) channel tiles, T/32 tiles of t2, B*NH); block (32 channels, 32 rows t2).
__global__ void lower_t_times_tiled_kernel(float* out, int ldo, const float* M, const float* x, int ldx, int T,
                                           int C, int NH, float alpha) {
  __shared__ float Ms[kTile][kTile + 1];  // (32 rows t, 32 columns t2)
  __shared__ float Xs[kTile][kTile + 1];  // (32 rows t, 32 channels)
  const int bh = static_cast<int>(blockIdx.z);
  const int b = bh / NH;
  const int h = bh % NH;
  const int hs = C / NH;
  const int c0 = static_cast<int>(blockIdx.x) * kTile;  // first channel of the tile
  const int s0 = static_cast<int>(blockIdx.y) * kTile;  // first output row t2 of the tile
  const int tx = static_cast<int>(threadIdx.x);          // channel (and column t2, when loading M)
  const int ty = static_cast<int>(threadIdx.y);          // output row t2 (and row t, when loading)
  const int t2 = s0 + ty;
  const int c = c0 + tx;
  float acc = 0.0f;
  for (int r0 = s0; r0 < T; r0 += kTile) {  // row tiles from the diagonal tile down
    const int t = r0 + ty;
    Ms[ty][tx] = (t < T && s0 + tx <= t) ? M[score_row(bh, t, T) + s0 + tx] : 0.0f;  // (r0+ty, s0+tx)
    Xs[ty][tx] = (t < T && c < hs) ? x[head_row(b, h, t, T, ldx, hs) + c] : 0.0f;    // (r0+ty, c0+tx)
    __syncthreads();
    for (int j = 0; j < kTile; ++j) acc += Ms[j][ty] * Xs[j][tx];  // sum_t M[t][t2] x_t[c]
    __syncthreads();
  }
  if (t2 < T && c < hs) out[head_row(b, h, t2, T, ldo, hs) + c] = alpha * acc;
}

// softmax_backward_naive_kernel with one warp per row: lanes walk the row 32 entries apart
// (coalesced), the dot sum_j p[j] d[j] is combined with warp_sum. Block 256 = 8 rows.
__global__ void softmax_backward_warp_kernel(float* d, const float* att, int rows, int T) {
  const int row = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= rows) return;  // the whole warp leaves: its shuffles are never reached
  const int t = row % T;
  const float* p = att + static_cast<size_t>(row) * T;
  float* g = d + static_cast<size_t>(row) * T;
  float weighted = 0.0f;
  for (int t2 = lane; t2 <= t; t2 += 32) weighted += p[t2] * g[t2];
  weighted = warp_sum(weighted);  // every lane: sum_j p[j] datt[j]
  for (int t2 = lane; t2 <= t; t2 += 32) g[t2] = p[t2] * (g[t2] - weighted);
}

void attention_backward_v2(float* dqkv, float* workspace, const float* dout, const float* qkv, const float* att,
                           int B, int T, int C, int NH) {
  check_attention_sizes("backward v2", B, T, C, NH);
  check_backward_workspace("v2", workspace);
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int C3 = 3 * C;
  const int tiles = ceil_div(T, kTile);
  const int channel_tiles = ceil_div(hs, kTile);
  const auto heads = static_cast<unsigned>(B * NH);
  const dim3 block(kTile, kTile);
  // datt = dOut . V^T (lower triangle) into the workspace
  launch("lower_abt_tiled_kernel", lower_abt_tiled_kernel, dim3(tiles, tiles, heads), block, 0, workspace, dout, C,
         qkv + 2 * C, C3, T, C, NH);
  // dpreatt, in place
  const int rows = B * NH * T;
  const int rows_per_block = 8;  // 256 threads
  launch("softmax_backward_warp_kernel", softmax_backward_warp_kernel, dim3(ceil_div(rows, rows_per_block)),
         dim3(32 * rows_per_block), 0, workspace, att, rows, T);
  const float* dp = workspace;
  // dq = dP . K * scale;  dk = dP^T . Q * scale;  dv = P^T . dOut
  const dim3 grid(channel_tiles, tiles, heads);
  launch("lower_times_tiled_kernel", lower_times_tiled_kernel, grid, block, 0, dqkv, C3, dp, qkv + C, C3, T, C, NH,
         scale);
  launch("lower_t_times_tiled_kernel", lower_t_times_tiled_kernel, grid, block, 0, dqkv + C, C3, dp, qkv, C3, T, C,
         NH, scale);
  launch("lower_t_times_tiled_kernel", lower_t_times_tiled_kernel, grid, block, 0, dqkv + 2 * C, C3, att, dout, C, T,
         C, NH, 1.0f);
}

}  // namespace

void add_attention(Kernels& k) {
  k.attention = {
      {1, "unfused, naive", "scores, softmax, P.V as three kernels through a (B,NH,T,T) workspace",
        attention_v1, {NNLAB_SM_MAXWELL}, scores_workspace},
      {2, "unfused, tiled", "32x32 shared-memory tiles for both products, a warp per softmax row: the T^2 "
                                "matrix still makes 4 trips through memory", attention_v2, {NNLAB_SM_MAXWELL}, scores_workspace},
      {3, "fused (flash)", "one kernel, key tiles in shared memory, online softmax in registers: no T^2 "
                               "matrix, no workspace", attention_v3, {NNLAB_SM_MAXWELL}, no_workspace},
  };
  k.attention_backward = {
      {1, "naive", "datt, softmax backward, dq/dk/dv as three kernels through a (B,NH,T,T) workspace, a "
                       "thread per entry, row or output", attention_backward_v1, {NNLAB_SM_MAXWELL}, scores_workspace},
      {2, "tiled", "the four products in 32x32 shared-memory tiles (tiles above the diagonal skipped), a "
                       "warp per softmax-backward row", attention_backward_v2, {NNLAB_SM_MAXWELL}, scores_workspace},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
