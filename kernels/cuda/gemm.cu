// kernels/cuda/gemm.cu: the GPT's linear layers (kernels/cuda/device.h: GemmFn, BiasBackwardFn).
// matmul.cu's ladder teaches C = A.B; this is the general form the trainer calls
// (gpt/backend_cuda.cpp), one launcher for the three products of a linear layer:
//
//   C (M,N) = op(A) (M,K) . op(B) (K,N) (+ bias[col]),  or C += that (accumulate)
//   forward   out  = inp . W^T + b        trans_b, bias
//   dinp      dinp = dout . W             plain
//   dweight   dW  += dout^T . inp         trans_a, accumulate
//
// gemm versions:
//   v1 naive          one thread per C element (threadIdx.x along a row of C), op(A) and
//                     op(B) read straight from global memory whatever their layout; the
//                     reference every other version is checked against
//   v2 fp32 tiles     matmul v7's design (warp tiles, 4x4 patches per lane, BK = 16) with
//                     the transposes done while a tile is copied into shared memory: both
//                     tiles are stored k-major there (As[k][row], Bs[k][col]) whatever the
//                     layout in global memory, and each layout is read along its own
//                     contiguous dimension (coalesced, float4 when aligned). So the inner
//                     loop is the same code for every layout. The next tile is fetched into
//                     registers while the current one is multiplied; bias and accumulate
//                     are applied when C is written. 128x128 block tiles, or 64x64 when the
//                     big ones would leave multiprocessors idle (the dweight product:
//                     M = OC, N = C is a small C with a long K)
//   v3 TF32 cores     v2's tiles and loading, the multiply on tensor cores: wmma m16n16k8
//                     TF32 fragments (inputs rounded to a 10-bit mantissa when stored to
//                     shared memory), fp32 accumulate (compute capability 8.0)
//   v4 BF16 cores     the same with wmma m16n16k16 __nv_bfloat16 fragments: inputs rounded
//                     to an 8-bit mantissa (relative error up to 2^-9 each), half the shared
//                     memory per tile, fp32 accumulate (compute capability 8.0)
//
// bias_backward versions (dbias (OC) += column sums of dout (N,OC)):
//   v1 naive          one thread per column, looping down all N rows: OC threads in all
//                     (384 for the GPT's projections), far too few to fill a GPU
//   v2 column strips  a block per strip of 32 columns, its 32 x 32 threads splitting the
//                     rows: a warp reads 32 consecutive floats of a row (coalesced), 4 rows
//                     in flight per thread, then a fixed-order tree in shared memory
//
// Figures: not yet measured on a GPU (`nnlab cuda bench gemm` prints them, cuBLAS beside).
//
// Determinism: every output is summed by one thread (or one warp's mma chain) in k order,
// with no atomics, so runs repeat bit for bit; v2's two tile sizes even give the same bits
// (each C element's k loop is the same). Every version is correct for any M, N, K >= 1
// (each matrix under 2^31 elements, so int indices do): tiles hanging over an edge load
// zeros there and store nothing there.
//
// The plain loop every gemm version computes:
//   for i < M: for j < N: C[i][j] (+)= sum_k op(A)[i][k] op(B)[k][j] + bias[j]
//   op(A)[i][k] = trans_a ? A[k][i] : A[i][k];   op(B)[k][j] = trans_b ? B[j][k] : B[k][j]
//
// Oldest GPU: compute capability 5.0 for gemm v1, v2 and bias_backward v1, v2
// (NNLAB_SM_MAXWELL); 8.0 for gemm v3 and v4 (NNLAB_SM_AMPERE: TF32 and BF16 wmma), whose
// kernels are guarded by the same NNLAB_SM_AMPERE and are only a trap when compiled for an older
// GPU. Compile-checked for 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

#include <cstdint>
#include <string>

#if defined(NNLAB_EMULATED)
#include "kernels/cuda/emu/wmma.h"  // nvcuda::wmma and __nv_bfloat16
#else
#include <cuda_bf16.h>
#include <mma.h>
#endif

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

// Every launcher checks the sizes first: a grid of 0 blocks is an invalid launch, and int
// indices must not overflow.
void check_gemm_sizes(const char* version, int M, int N, int K) {
  const long long limit = 2147483647LL;
  if (M < 1 || N < 1 || K < 1 || 1LL * M * K > limit || 1LL * K * N > limit || 1LL * M * N > limit) {
    throw Error(std::string("gemm ") + version + ": M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + ": each must be >= 1 and each matrix under 2^31 elements");
  }
}

void check_bias_backward_sizes(const char* version, int N, int OC) {
  if (N < 1 || OC < 1 || 1LL * N * OC > 2147483647LL) {
    throw Error(std::string("bias_backward ") + version + ": N=" + std::to_string(N) + " OC=" + std::to_string(OC) +
                ": each must be >= 1 and dout under 2^31 elements");
  }
}

// Whether v2-v4 may move 16 bytes at a time: every stored row of A, B and C (and the bias)
// must start on a 16-byte boundary, i.e. each pointer is 16-byte aligned and each row
// length (A: K, or M with trans_a; B: N, or K with trans_b; C: N) a multiple of 4.
bool can_use_float4(const float* C, const float* A, const float* B, int M, int N, int K, const GemmArgs& args) {
  const int lda = args.trans_a ? M : K;
  const int ldb = args.trans_b ? K : N;
  return aligned16(C) && aligned16(A) && aligned16(B) && (args.bias == nullptr || aligned16(args.bias)) &&
         lda % 4 == 0 && ldb % 4 == 0 && N % 4 == 0;
}

// ---- gemm v1: naive -----------------------------------------------------------------------
// Thread (x, y) of block (bx, by) computes C[by*8 + y][bx*32 + x]: a warp owns 32
// consecutive columns of one row. Coalescing depends on the layout: op(B) plain reads
// B[k][col..col+31] (one transaction), with trans_b B[col..col+31][k] (32 rows, 32
// transactions); op(A) is one address per warp either way (a broadcast).

constexpr int kNaiveX = 32, kNaiveY = 8;

__global__ void gemm_naive_kernel(float* C, const float* A, const float* B, int M, int N, int K, GemmArgs args) {
  const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int row = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (row >= M || col >= N) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) {
    const float a = args.trans_a ? A[k * M + row] : A[row * K + k];  // op(A)[row][k]: A (K,M) or (M,K)
    const float b = args.trans_b ? B[col * K + k] : B[k * N + col];  // op(B)[k][col]: B (N,K) or (K,N)
    sum += a * b;
  }
  if (args.bias) sum += args.bias[col];
  float* c = C + row * N + col;
  *c = args.accumulate ? *c + sum : sum;
}

void gemm_v1(float* C, const float* A, const float* B, int M, int N, int K, GemmArgs args) {
  check_gemm_sizes("v1", M, N, K);
  const dim3 grid(ceil_div(N, kNaiveX), ceil_div(M, kNaiveY));
  launch("gemm_naive", gemm_naive_kernel, grid, dim3(kNaiveX, kNaiveY), 0, C, A, B, M, N, K, args);
}

// ---- what the tiled versions (v2-v4) share --------------------------------------------------
//
// Block tiles. Each block computes a BM x BN tile of C walking K in steps of BK; its warps
// are arranged WarpsM x WarpsN, each owning a WM x WN warp tile.
template <int BM_, int BN_, int WarpsM_, int WarpsN_, int MinBlocks_>
struct GemmTiles {
  static constexpr int BM = BM_, BN = BN_, BK = 16;
  // __launch_bounds__'s second number: the compiler keeps registers low enough for this many
  // blocks per multiprocessor (65536 / (MinBlocks * Threads) registers per thread at most).
  static constexpr int MinBlocks = MinBlocks_;
  static constexpr int WarpsM = WarpsM_, WarpsN = WarpsN_;
  static constexpr int Warps = WarpsM * WarpsN, Threads = 32 * Warps;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;
  // Each tile of op(A) (BK,BM) and op(B) (BK,BN) is copied as float4s: this many per thread.
  static constexpr int LoadsA = BK * BM / 4 / Threads, LoadsB = BK * BN / 4 / Threads;
  static_assert(LoadsA * 4 * Threads == BK * BM && LoadsB * 4 * Threads == BK * BN, "whole float4s per thread");
  static_assert(WM % 32 == 0 && WN % 16 == 0, "warp tiles of 32x16 sub-tiles (and 16x16 fragments)");
};
// 8 warps as 2 x 4 warp tiles of 64x32 (matmul v7, v8), at most 128 registers per thread
// (64 of them accumulators) so that two blocks fit on a multiprocessor.
using BigTiles = GemmTiles<128, 128, 2, 4, 2>;
// 4 warps as 2 x 2 warp tiles of 32x32: 4x as many blocks for the same C.
using SmallTiles = GemmTiles<64, 64, 2, 2, 4>;

// The big tiles unless their grid has fewer blocks than the GPU holds at once (two per
// multiprocessor): then some multiprocessors would sit idle for the whole product, which is
// the dweight form (M = OC, N = C: 36 big tiles at the GPT's 1536 x 384 on a GPU with 132
// multiprocessors; 144 small ones). Splitting K across blocks would add parallelism too,
// but needs a second pass or atomics to sum the parts, and GemmFn has no workspace.
bool use_small_tiles(int M, int N) {
  const long long big = 1LL * ceil_div(M, BigTiles::BM) * ceil_div(N, BigTiles::BN);
  return big < 2LL * multiprocessors();
}

// Elements (r, c .. c+3) of a row-major (rows, cols) matrix X, zeros outside it. With
// kVec4 (cols % 4 == 0, X 16-byte aligned, c a multiple of 4) the four are all inside or
// all outside a row, so one 16-byte load does; otherwise four guarded scalar loads.
template <bool kVec4>
__device__ __forceinline__ float4 load_row4(const float* X, int r, int c, int rows, int cols) {
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (r >= rows || c >= cols) return zero;
  const float* p = X + r * cols + c;
  if constexpr (kVec4) {
    return *reinterpret_cast<const float4*>(p);
  } else {
    return make_float4(p[0], c + 1 < cols ? p[1] : 0.0f, c + 2 < cols ? p[2] : 0.0f, c + 3 < cols ? p[3] : 0.0f);
  }
}

// One operand's tile of BK x BX: op(A)'s (BK,BM) or op(B)'s (BK,BN), where x runs over the
// rows of C (A) or its columns (B). In shared memory it is always k-major,
//   S[k * lds + x] = op(X)[k0 + k][x0 + x],
// whatever the stored layout, which is one of two:
//   k-major  X stored (K, XN): element (k, x) at X[k * XN + x]  (A with trans_a, B plain)
//   x-major  X stored (XN, K): element (k, x) at X[x * K + k]   (A plain, B with trans_b)
// A thread copies float4s along the stored rows, consecutive threads on consecutive
// addresses (coalesced either way); an x-major tile is transposed on its way into shared
// memory (4 scalar stores per float4).
//
// fetch_tile reads this thread's share into registers, store_tile writes it to shared
// memory (converted: fp32, rounded to TF32, or to BF16): apart, so the next tile's loads are
// in flight while the current one is multiplied.
template <int BK, int BX, int NT, int kLoads, bool kVec4>
__device__ __forceinline__ void fetch_tile(float4 (&v)[kLoads], const float* X, bool k_major, int k0, int x0, int K,
                                           int XN) {
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int idx = t + i * NT;
    if (k_major) {
      const int k = idx / (BX / 4), x = idx % (BX / 4) * 4;  // the tile (BK,BX) as (BK,BX/4) float4s
      v[i] = load_row4<kVec4>(X, k0 + k, x0 + x, K, XN);
    } else {
      const int x = idx / (BK / 4), k = idx % (BK / 4) * 4;  // the tile (BX,BK) as (BX,BK/4) float4s
      v[i] = load_row4<kVec4>(X, x0 + x, k0 + k, XN, K);
    }
  }
}

template <int BK, int BX, int NT, int kLoads, class T, class Convert>
__device__ __forceinline__ void store_tile(T* S, int lds, const float4 (&v)[kLoads], bool k_major, Convert convert) {
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int idx = t + i * NT;
    if (k_major) {
      const int k = idx / (BX / 4), x = idx % (BX / 4) * 4;
      T* p = S + k * lds + x;  // 4 consecutive x: one 16-byte store for floats (lds, x multiples of 4)
      if constexpr (sizeof(T) == 4) {
        *reinterpret_cast<float4*>(p) = make_float4(convert(v[i].x), convert(v[i].y), convert(v[i].z), convert(v[i].w));
      } else {
        p[0] = convert(v[i].x);
        p[1] = convert(v[i].y);
        p[2] = convert(v[i].z);
        p[3] = convert(v[i].w);
      }
    } else {
      const int x = idx / (BK / 4), k = idx % (BK / 4) * 4;
      T* p = S + k * lds + x;  // 4 consecutive k: down a column of S (the transpose)
      p[0 * lds] = convert(v[i].x);
      p[1 * lds] = convert(v[i].y);
      p[2 * lds] = convert(v[i].z);
      p[3 * lds] = convert(v[i].w);
    }
  }
}

struct KeepFp32 {
  __device__ float operator()(float x) const { return x; }
};

// C[r][c .. c+3] = v + bias[c .. c+3], or += that with accumulate: the part inside C.
template <bool kVec4>
__device__ __forceinline__ void store_out4(float* C, int r, int c, int M, int N, float4 v, const GemmArgs& args) {
  if (r >= M || c >= N) return;
  float* p = C + r * N + c;
  if constexpr (kVec4) {  // the four are inside C (N % 4 == 0), and C, bias are 16-byte aligned
    if (args.bias) {
      const float4 b = *reinterpret_cast<const float4*>(args.bias + c);
      v = make_float4(v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w);
    }
    if (args.accumulate) {
      const float4 old = *reinterpret_cast<const float4*>(p);
      v = make_float4(old.x + v.x, old.y + v.y, old.z + v.z, old.w + v.w);
    }
    *reinterpret_cast<float4*>(p) = v;
  } else {
    const float out[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (c + j >= N) break;
      float x = out[j];
      if (args.bias) x += args.bias[c + j];
      p[j] = args.accumulate ? p[j] + x : x;
    }
  }
}

using GemmKernel = void (*)(float*, const float*, const float*, int, int, int, GemmArgs);

// Launches one of a tiled version's four kernels: big or small tiles, float4 or scalar edges.
template <template <class, bool> class Kernel>
void launch_tiled(const char* name, float* C, const float* A, const float* B, int M, int N, int K, GemmArgs args) {
  const bool small = use_small_tiles(M, N);
  const bool vec4 = can_use_float4(C, A, B, M, N, K, args);
  GemmKernel kernel = nullptr;
  dim3 grid, block;
  if (small) {
    kernel = vec4 ? Kernel<SmallTiles, true>::get() : Kernel<SmallTiles, false>::get();
    grid = dim3(ceil_div(N, SmallTiles::BN), ceil_div(M, SmallTiles::BM));
    block = dim3(SmallTiles::Threads);
  } else {
    kernel = vec4 ? Kernel<BigTiles, true>::get() : Kernel<BigTiles, false>::get();
    grid = dim3(ceil_div(N, BigTiles::BN), ceil_div(M, BigTiles::BM));
    block = dim3(BigTiles::Threads);
  }
  const std::string full = std::string(name) + (small ? " 64x64" : " 128x128") + (vec4 ? "" : " (scalar edges)");
  launch(full.c_str(), kernel, grid, block, 0, C, A, B, M, N, K, args);
}

// ---- gemm v2: fp32 tiles, transposes while staging ------------------------------------------
// matmul v7's warp tiling: the warp tile (WM,WN) is covered in (WM/32) x (WN/16) steps of a
// 32x16 sub-tile where lane (lr, lc) of an 8 x 4 arrangement owns a 4x4 patch. Per k a lane
// reads 4 values of As's row k and 4 of Bs's (float4s: a warp reads 8 + 4 consecutive
// float4s, no bank conflicts) and does their outer product.
//
//   C tile (BM,BN) = warps (WarpsM,WarpsN) x warp tile (WM,WN)
//   warp tile (WM,WN) = sub-tiles (WM/32, WN/16) x (32,16);  sub-tile (32,16) = lanes (8,4) x (4,4)
//   acc[im][in][i][j] += As[k][warp_r + im*32 + lane_r + i] * Bs[k][warp_c + in*16 + lane_c + j]
//
// Shared rows are padded by 4 floats: the x-major (transposing) stores then hit 2 banks
// where they would hit 1 (a 4-way conflict becomes 2-way), and rows stay 16-byte aligned.

template <class Tiles, bool kVec4>
__global__ void __launch_bounds__(Tiles::Threads, Tiles::MinBlocks)
    gemm_fp32_kernel(float* C, const float* A, const float* B, int M, int N, int K, GemmArgs args) {
  constexpr int BM = Tiles::BM, BN = Tiles::BN, BK = Tiles::BK, NT = Tiles::Threads;
  constexpr int IM = Tiles::WM / 32, IN = Tiles::WN / 16;  // sub-tiles per warp tile
  constexpr int LA = Tiles::LoadsA, LB = Tiles::LoadsB;
  constexpr int LDA = BM + 4, LDB = BN + 4;
  __align__(16) __shared__ float As[BK * LDA];  // (BK,BM+4): As[k][r] = op(A)[row0 + r][k0 + k]
  __align__(16) __shared__ float Bs[BK * LDB];  // (BK,BN+4): Bs[k][c] = op(B)[k0 + k][col0 + c]
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * BM;
  const int col0 = static_cast<int>(blockIdx.x) * BN;
  const int warp = t / 32, lane = t % 32;
  const int warp_r = warp / Tiles::WarpsN * Tiles::WM;  // the warp tile's first row in the block tile
  const int warp_c = warp % Tiles::WarpsN * Tiles::WN;  // its first column
  const int lane_r = lane / 4 * 4;                      // 0, 4, .., 28: the lane's patch in a sub-tile
  const int lane_c = lane % 4 * 4;                      // 0, 4, 8, 12
  const bool a_k_major = args.trans_a;   // A stored (K,M)
  const bool b_k_major = !args.trans_b;  // B stored (K,N)

  float acc[IM][IN][4][4] = {};
  float regA[IM][4], regB[IN][4];
  float4 nextA[LA], nextB[LB];  // this thread's share of the next tiles, in flight
  fetch_tile<BK, BM, NT, LA, kVec4>(nextA, A, a_k_major, 0, row0, K, M);
  fetch_tile<BK, BN, NT, LB, kVec4>(nextB, B, b_k_major, 0, col0, K, N);
  for (int k0 = 0; k0 < K; k0 += BK) {
    store_tile<BK, BM, NT, LA>(As, LDA, nextA, a_k_major, KeepFp32{});
    store_tile<BK, BN, NT, LB>(Bs, LDB, nextB, b_k_major, KeepFp32{});
    __syncthreads();  // the tiles are complete
    if (k0 + BK < K) {  // start the next tiles' loads: they arrive while the FMAs below run
      fetch_tile<BK, BM, NT, LA, kVec4>(nextA, A, a_k_major, k0 + BK, row0, K, M);
      fetch_tile<BK, BN, NT, LB, kVec4>(nextB, B, b_k_major, k0 + BK, col0, K, N);
    }
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int im = 0; im < IM; ++im) {
        const float4 v = *reinterpret_cast<const float4*>(&As[k * LDA + warp_r + im * 32 + lane_r]);
        regA[im][0] = v.x;
        regA[im][1] = v.y;
        regA[im][2] = v.z;
        regA[im][3] = v.w;
      }
#pragma unroll
      for (int in = 0; in < IN; ++in) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[k * LDB + warp_c + in * 16 + lane_c]);
        regB[in][0] = v.x;
        regB[in][1] = v.y;
        regB[in][2] = v.z;
        regB[in][3] = v.w;
      }
#pragma unroll
      for (int im = 0; im < IM; ++im) {
#pragma unroll
        for (int in = 0; in < IN; ++in) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[im][in][i][j] += regA[im][i] * regB[in][j];
          }
        }
      }
    }
    __syncthreads();  // everyone is done reading before the next tiles overwrite them
  }
  // Epilogue: bias and accumulate on the way out, each lane's rows 16 bytes at a time.
#pragma unroll
  for (int im = 0; im < IM; ++im) {
#pragma unroll
    for (int in = 0; in < IN; ++in) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = row0 + warp_r + im * 32 + lane_r + i;
        const int c = col0 + warp_c + in * 16 + lane_c;
        const float* a = acc[im][in][i];
        store_out4<kVec4>(C, r, c, M, N, make_float4(a[0], a[1], a[2], a[3]), args);
      }
    }
  }
}

template <class Tiles, bool kVec4>
struct Fp32Kernel {
  static GemmKernel get() { return gemm_fp32_kernel<Tiles, kVec4>; }
};

void gemm_v2(float* C, const float* A, const float* B, int M, int N, int K, GemmArgs args) {
  check_gemm_sizes("v2", M, N, K);
  launch_tiled<Fp32Kernel>("gemm_fp32", C, A, B, M, N, K, args);
}

// ---- gemm v3, v4: tensor cores ----------------------------------------------------------------
// v2's block tiles, warp tiles and tile loading; each warp tile is (WM/16) x (WN/16)
// accumulator fragments of 16x16, and per k-step a warp loads WM/16 fragments of op(A) and
// WN/16 of op(B) from shared memory and issues their products. The tiles are k-major in
// shared memory, so op(A)'s fragment (16 rows x k) is read col_major (element (r, k) at
// As[k][r]) and op(B)'s row_major (element (k, c) at Bs[k][c]). The inputs are rounded once,
// when stored to shared memory. At the end each fragment goes through a per-warp 16x16
// staging tile to C (bias, accumulate and bounds there): store_matrix_sync straight into C
// would need whole 16x16 tiles inside C and 32-byte aligned rows.
//
//   C tile (BM,BN) = warps (WarpsM,WarpsN) x warp tile (WM,WN) = warps x fragments (WM/16,WN/16) x (16,16)
//   acc[i][j] (16,16) += a[i] (16,kStep) . b[j] (kStep,16)   for each k-step of each BK = 16
//
// TF32 (v3): m16n16k8, tiles of floats holding TF32 values (rows padded by 4 floats: ldm a
// multiple of 16 bytes). BF16 (v4): m16n16k16, tiles of __nv_bfloat16 (padded by 8: 16
// bytes again), half the shared memory, one mma per k-step of 16 where TF32 needs two.
// Fragment pointers: rows k = 0 or 8 of the tile (8 * 132 * 4, 8 * 68 * 4 bytes: multiples
// of 32) and columns multiples of 16 elements (64 or 32 bytes): all 32-byte aligned, as
// wmma requires.

struct Tf32Math {};
struct Bf16Math {};
template <class Math>
struct TensorMath;  // defined where tensor cores exist (the kernel is a trap elsewhere)

#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_AMPERE)
template <>
struct TensorMath<Tf32Math> {
  using Smem = float;  // TF32 values in fp32 storage
  static constexpr int kStep = 8, kPad = 4;
  using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8, nvcuda::wmma::precision::tf32,
                                       nvcuda::wmma::col_major>;
  using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 8, nvcuda::wmma::precision::tf32,
                                       nvcuda::wmma::row_major>;
  using Acc = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float>;
  struct Convert {  // round to nearest TF32, ties away from zero
    __device__ float operator()(float x) const { return nvcuda::wmma::__float_to_tf32(x); }
  };
};
template <>
struct TensorMath<Bf16Math> {
  using Smem = __nv_bfloat16;
  static constexpr int kStep = 16, kPad = 8;
  using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major>;
  using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major>;
  using Acc = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;
  struct Convert {  // round to nearest bf16, ties to even
    __device__ __nv_bfloat16 operator()(float x) const { return __float2bfloat16(x); }
  };
};
#endif

template <class Tiles, class MathTag, bool kVec4>
__global__ void __launch_bounds__(Tiles::Threads, Tiles::MinBlocks)
    gemm_tensor_kernel(float* C, const float* A, const float* B, int M, int N, int K, GemmArgs args) {
#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_AMPERE)
  namespace wmma = nvcuda::wmma;
  using Math = TensorMath<MathTag>;
  using T = typename Math::Smem;
  constexpr int BM = Tiles::BM, BN = Tiles::BN, BK = Tiles::BK, NT = Tiles::Threads;
  constexpr int FM = Tiles::WM / 16, FN = Tiles::WN / 16;  // fragments per warp tile
  constexpr int LA = Tiles::LoadsA, LB = Tiles::LoadsB;
  constexpr int LDA = BM + Math::kPad, LDB = BN + Math::kPad;
  static_assert(BK % Math::kStep == 0, "whole k-steps per tile");
  __align__(128) __shared__ T As[BK * LDA];                   // (BK,BM+pad): As[k][r] = round(op(A)[row0 + r][k0 + k])
  __align__(128) __shared__ T Bs[BK * LDB];                   // (BK,BN+pad): Bs[k][c] = round(op(B)[k0 + k][col0 + c])
  __align__(128) __shared__ float Cs[Tiles::Warps][16 * 16];  // one 16x16 staging tile per warp
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * BM;
  const int col0 = static_cast<int>(blockIdx.x) * BN;
  const int warp = t / 32, lane = t % 32;
  const int warp_r = warp / Tiles::WarpsN * Tiles::WM;
  const int warp_c = warp % Tiles::WarpsN * Tiles::WN;
  const bool a_k_major = args.trans_a;
  const bool b_k_major = !args.trans_b;
  const typename Math::Convert convert{};

  typename Math::Acc acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  typename Math::FragA a[FM];
  typename Math::FragB b[FN];
  float4 nextA[LA], nextB[LB];
  fetch_tile<BK, BM, NT, LA, kVec4>(nextA, A, a_k_major, 0, row0, K, M);
  fetch_tile<BK, BN, NT, LB, kVec4>(nextB, B, b_k_major, 0, col0, K, N);
  for (int k0 = 0; k0 < K; k0 += BK) {
    store_tile<BK, BM, NT, LA>(As, LDA, nextA, a_k_major, convert);
    store_tile<BK, BN, NT, LB>(Bs, LDB, nextB, b_k_major, convert);
    __syncthreads();
    if (k0 + BK < K) {
      fetch_tile<BK, BM, NT, LA, kVec4>(nextA, A, a_k_major, k0 + BK, row0, K, M);
      fetch_tile<BK, BN, NT, LB, kVec4>(nextB, B, b_k_major, k0 + BK, col0, K, N);
    }
#pragma unroll
    for (int kk = 0; kk < BK; kk += Math::kStep) {
#pragma unroll
      for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(a[i], As + kk * LDA + warp_r + i * 16, LDA);
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(b[j], Bs + kk * LDB + warp_c + j * 16, LDB);
#pragma unroll
      for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }

  // Epilogue: fragment -> this warp's staging tile -> C. Each lane moves 2 of the tile's 64
  // float4s; 4 consecutive lanes cover one 64-byte row segment of C.
  float* stage = Cs[warp];
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();  // every lane's part of the tile is in shared memory
#pragma unroll
      for (int q = lane; q < 16 * 16 / 4; q += 32) {
        const int rr = q / 4, cc = q % 4 * 4;  // the staging tile (16,16) as (16,4) float4s
        const float4 v = *reinterpret_cast<const float4*>(stage + rr * 16 + cc);
        store_out4<kVec4>(C, row0 + warp_r + i * 16 + rr, col0 + warp_c + j * 16 + cc, M, N, v, args);
      }
      __syncwarp();  // every lane has read the tile before the next store overwrites it
    }
  }
#else
  // Below compute capability 8.0 there is no TF32 or BF16 mma: the version's min_sm
  // (NNLAB_SM_AMPERE, the guard's) keeps it from being launched there, and the kernel is
  // only a trap.
  (void)C, (void)A, (void)B, (void)M, (void)N, (void)K, (void)args;
  needs_newer_gpu<NNLAB_SM_AMPERE>();
#endif
}

template <class Tiles, bool kVec4>
struct Tf32Kernel {
  static GemmKernel get() { return gemm_tensor_kernel<Tiles, Tf32Math, kVec4>; }
};
template <class Tiles, bool kVec4>
struct Bf16Kernel {
  static GemmKernel get() { return gemm_tensor_kernel<Tiles, Bf16Math, kVec4>; }
};

void gemm_v3(float* C, const float* A, const float* B, int M, int N, int K, GemmArgs args) {
  check_gemm_sizes("v3", M, N, K);
  launch_tiled<Tf32Kernel>("gemm_tf32", C, A, B, M, N, K, args);
}

void gemm_v4(float* C, const float* A, const float* B, int M, int N, int K, GemmArgs args) {
  check_gemm_sizes("v4", M, N, K);
  launch_tiled<Bf16Kernel>("gemm_bf16", C, A, B, M, N, K, args);
}

// ---- bias_backward v1: a thread per column --------------------------------------------------
// dbias[c] += sum_n dout[n][c]. Consecutive threads own consecutive columns, so each row is
// read coalesced, but there are only OC threads (a few warps), each walking all N rows.

constexpr int kBiasNaiveBlock = 128;

__global__ void bias_backward_naive_kernel(float* dbias, const float* dout, int N, int OC) {
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= OC) return;
  float sum = 0.0f;
  for (int n = 0; n < N; ++n) sum += dout[n * OC + c];  // dout (N,OC)
  dbias[c] += sum;
}

void bias_backward_v1(float* dbias, const float* dout, int N, int OC) {
  check_bias_backward_sizes("v1", N, OC);
  launch("bias_backward_naive", bias_backward_naive_kernel, dim3(ceil_div(OC, kBiasNaiveBlock)),
         dim3(kBiasNaiveBlock), 0, dbias, dout, N, OC);
}

// ---- bias_backward v2: column strips, rows split across threads -----------------------------
// Block b owns columns b*32 .. b*32+31; thread (x, y) of its 32 x 32 sums column b*32 + x
// over rows y, y + 32, y + 64, ... (a warp = one y: 32 consecutive floats of a row, one
// 128-byte transaction), keeping 4 rows' loads in flight in 4 partial sums. Then the 32
// partial sums of each column are added by a tree over y in shared memory, the same pairs in
// the same order every run (no atomics): deterministic.
//
//   partial[y][x] = sum_{n = y mod 32} dout[n][b*32 + x];   dbias[b*32 + x] += sum_y partial[y][x]
//
// The grid is OC / 32 blocks (12 at OC = 384): more parallel than v1 by the 32 row groups,
// still short of filling a big GPU; splitting the rows over blocks too would need a second
// pass (a workspace) or atomics.

constexpr int kStrip = 32, kRowGroups = 32;

__global__ void __launch_bounds__(kStrip * kRowGroups)
    bias_backward_strip_kernel(float* dbias, const float* dout, int N, int OC) {
  __shared__ float partial[kRowGroups][kStrip];  // (32,32): a row group's sum of each column
  const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
  const int c = static_cast<int>(blockIdx.x) * kStrip + x;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  if (c < OC) {
    int n = y;
    for (; n + 3 * kRowGroups < N; n += 4 * kRowGroups) {  // 4 independent loads in flight
      s0 += dout[n * OC + c];
      s1 += dout[(n + kRowGroups) * OC + c];
      s2 += dout[(n + 2 * kRowGroups) * OC + c];
      s3 += dout[(n + 3 * kRowGroups) * OC + c];
    }
    for (; n < N; n += kRowGroups) s0 += dout[n * OC + c];
  }
  partial[y][x] = (s0 + s1) + (s2 + s3);
  __syncthreads();
  for (int stride = kRowGroups / 2; stride > 0; stride /= 2) {
    if (y < stride) partial[y][x] += partial[y + stride][x];
    __syncthreads();
  }
  if (y == 0 && c < OC) dbias[c] += partial[0][x];
}

void bias_backward_v2(float* dbias, const float* dout, int N, int OC) {
  check_bias_backward_sizes("v2", N, OC);
  launch("bias_backward_strip", bias_backward_strip_kernel, dim3(ceil_div(OC, kStrip)), dim3(kStrip, kRowGroups), 0,
         dbias, dout, N, OC);
}

}  // namespace

// ---- the table ---------------------------------------------------------------------------

void add_gemm(Kernels& k) {
  k.gemm = {
      {{"v1", "naive", "one thread per C element, any layout read straight from global memory",
        NNLAB_SM_MAXWELL},
       gemm_v1},
      {{"v2", "fp32 tiles",
        "warp-tiled 128x128 / 64x64 tiles, transposes made while staging in shared memory, float4 loads, next tile "
        "prefetched",
        NNLAB_SM_MAXWELL},
       gemm_v2},
      {{"v3", "tensor cores (TF32)", "v2's tiles on wmma m16n16k8 TF32 fragments, fp32 accumulate: 10-bit mantissas",
        NNLAB_SM_AMPERE},
       gemm_v3},
      {{"v4", "tensor cores (BF16)",
        "v2's tiles on wmma m16n16k16 bf16 fragments, fp32 accumulate: 8-bit mantissas, half the shared memory",
        NNLAB_SM_AMPERE},
       gemm_v4},
  };
  k.bias_backward = {
      {{"v1", "naive", "one thread per column looping over all rows: OC threads in all",
        NNLAB_SM_MAXWELL},
       bias_backward_v1},
      {{"v2", "column strips",
        "a block per 32 columns, rows split over 32 thread rows, coalesced, fixed-order shared-memory tree",
        NNLAB_SM_MAXWELL},
       bias_backward_v2},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
