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
// Speeds: not yet measured on a GPU.
#include <cfloat>
#include <cmath>
#include <string>

#include "kernels/cuda/cuda.h"
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
// are written or read; the rest is never touched (a GPU would not clear it either).
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

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
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
    for (int i = static_cast<int>(threadIdx.x); i < kBc * HS; i += kBr) {
      const int j = i / HS;  // key within the tile
      const int d = i % HS;  // channel
      const bool in = k0 + j < T && d < hs;
      const size_t at = static_cast<size_t>(k0 + j) * 3 * C + d;
      Ks[j][d] = in ? head[at + C] : 0.0f;      // (k0+j, d)
      Vs[j][d] = in ? head[at + 2 * C] : 0.0f;  // (k0+j, d)
    }
    __syncthreads();

    if (active && k0 <= t) {  // else every key of the tile is after t: nothing to add
      const int valid = min(kBc, t - k0 + 1);  // keys k0 .. k0+valid-1 are <= t (and < T)
      // s_j = q_t . k_j (already scaled), for the whole tile; the masked ones are not used.
      float s[kBc];
      float tile_max = -FLT_MAX;
#pragma unroll
      for (int j = 0; j < kBc; ++j) {
        float dot = 0.0f;
#pragma unroll
        for (int d = 0; d < HS; ++d) dot += q[d] * Ks[j][d];
        s[j] = dot;
        if (j < valid) tile_max = fmaxf(tile_max, dot);
      }
      // Rescale what was summed under the old max (exp(-FLT_MAX - m_new) = 0 the first time).
      const float m_new = fmaxf(m, tile_max);
      const float correction = expf(m - m_new);
      l *= correction;
#pragma unroll
      for (int d = 0; d < HS; ++d) o[d] *= correction;
      // Add this tile: p_j = exp(s_j - m_new); l += p_j; o += p_j v_j.
#pragma unroll
      for (int j = 0; j < kBc; ++j) {
        const float p = j < valid ? expf(s[j] - m_new) : 0.0f;
        l += p;
#pragma unroll
        for (int d = 0; d < HS; ++d) o[d] += p * Vs[j][d];
      }
      m = m_new;
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

}  // namespace

void add_attention(Kernels& k) {
  k.attention = {
      {{"v1", "unfused, naive", "scores, softmax, P.V as three kernels through a (B,NH,T,T) workspace", 50},
       attention_v1, scores_workspace},
      {{"v2", "unfused, tiled", "32x32 shared-memory tiles for both products, a warp per softmax row: the T^2 "
                                "matrix still makes 4 trips through memory", 50},
       attention_v2, scores_workspace},
      {{"v3", "fused (flash)", "one kernel, key tiles in shared memory, online softmax in registers: no T^2 "
                               "matrix, no workspace", 50},
       attention_v3, no_workspace},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
