// kernels/cuda/int8.cu: the CUDA int8 GEMM ladder of lesson 15 (W8A8 inference: issue 25).
// One signature (kernels/cuda/device.h: Int8GemmFn), the CPU's (kernels/int8_gemm.h):
//
//   C (M,N) int32 = A (M,K) int8 . B (N,K)^T int8      both row-major, K contiguous
//
// A holds quantised activations (a row per token), B a Linear layer's quantised weight as
// stored (out, in): the "NT" product of the GPT's forward. Integer products and sums are
// exact, so unlike the float ladders there is no tolerance: every rung must give
// kernels::int8_gemm_v1's int32s bit for bit (tests/test_cuda_int8.cpp, and the bench
// validates each run the same way). |C| <= K * 128 * 128 <= 2^30 for K <= 65536, the limit
// every launcher checks, so no sum can overflow.
//
//   v1 naive          one thread per C[i][j], threadIdx.x along a row of C (coalesced stores),
//                     an int32 loop over k of sign-extended byte products: the reference
//   v2 dp4a           64x64 block tiles of A and B staged in shared memory as 32-bit words
//                     (4 bytes of k each), 4x4 outputs per thread; __dp4a(a, b, c) adds the
//                     four byte products of two words to c in ONE instruction (compute
//                     capability 6.1): 4x the multiply-adds per instruction of v1's loop,
//                     and a word from shared memory now carries 4 k-steps
//   v3 tensor cores   int8 wmma (m16n16k16, signed char inputs, int32 accumulate; compute
//                     capability 7.2): v8-of-matmul's 128x128 block tile, 8 warps of 64x32,
//                     each warp 4x2 accumulator fragments, k in steps of 32 bytes
//
// Edges: every version takes any M, N >= 1 and any 1 <= K <= 65536. Tiles hanging over an
// edge are padded with zeros in shared memory (a zero byte adds nothing to a dot product), so
// v2 and v3 need no multiple of 4 or 16 anywhere; they move 16 bytes per load when K is a
// multiple of 16 and A, B are 16-byte aligned, and assemble words byte by byte otherwise.
//
// Shared-memory layout for the tensor cores: wmma wants every fragment pointer 32-byte
// aligned, and an int8 fragment is 16 bytes wide in k. In a (rows, BK) row-major tile the
// second k-step of 16 would start 16 bytes into a row: misaligned. So v3 keeps each 16-byte
// k-chunk of a tile as its own (rows, 16) array: chunk c, row r at byte c*rows*16 + r*16,
// every fragment (16 rows at a multiple of 16) 256-byte aligned, ldm = 16.
//
// Figures: not yet measured on a GPU (`nnlab cuda bench int8_gemm` prints GOP/s, an int8
// multiply-add counted as 2 operations, with cuBLAS's int8 GEMM (cublasGemmEx, CUDA_R_8I,
// CUBLAS_COMPUTE_32I) beside).
//
// Oldest GPU: compute capability 5.0 for v1 (int32 arithmetic only; NNLAB_SM_MAXWELL); 6.1
// for v2 (NNLAB_SM_PASCAL: __dp4a) and 7.2 for v3 (NNLAB_SM_XAVIER: int8 wmma), whose
// kernels are guarded by the same names and are only a trap when compiled for an older GPU.
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

#include <cstdint>
#include <string>

#if defined(NNLAB_EMULATED)
#include "kernels/cuda/emu/wmma.h"  // nvcuda::wmma, int8 fragments included
#else
#include <mma.h>
#endif

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

// Every launcher checks the sizes first: a grid of 0 blocks is an invalid launch, int indices
// must not overflow, sums must fit int32 (K <= 65536), and gridDim.y (row tiles of
// `rows_per_block`) is at most 65535.
void check_sizes(const char* version, int M, int N, int K, int rows_per_block) {
  const long long limit = 2147483647LL;
  if (M < 1 || N < 1 || K < 1 || K > 65536 || 1LL * M * K > limit || 1LL * N * K > limit || 1LL * M * N > limit ||
      (1LL * M + rows_per_block - 1) / rows_per_block > 65535) {
    throw Error(std::string("int8_gemm ") + version + ": M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + ": each must be >= 1, K <= 65536 (int32 sums cannot overflow), each " +
                "matrix under 2^31 elements, and M at most " + std::to_string(65535LL * rows_per_block) +
                " rows (65535 row tiles of " + std::to_string(rows_per_block) + ")");
  }
}

// 16-byte loads are possible when every row starts 16-byte aligned: K a multiple of 16 and
// both matrices 16-byte aligned.
bool can_load16(const int8_t* A, const int8_t* B, int K) { return K % 16 == 0 && aligned16(A) && aligned16(B); }

}  // namespace

// ---- v1: one thread per output ------------------------------------------------------------

constexpr int kV1X = 32, kV1Y = 8;  // a block: 32 columns x 8 rows of C

__global__ void int8_gemm_naive_kernel(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int i = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (i >= M || j >= N) return;
  const int8_t* a = A + static_cast<size_t>(i) * K;
  const int8_t* b = B + static_cast<size_t>(j) * K;
  int sum = 0;
  for (int k = 0; k < K; ++k) sum += static_cast<int>(a[k]) * static_cast<int>(b[k]);
  C[static_cast<size_t>(i) * N + j] = sum;
}

void int8_gemm_v1(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  check_sizes("v1", M, N, K, kV1Y);
  launch("int8_gemm_naive", int8_gemm_naive_kernel, dim3(ceil_div(N, kV1X), ceil_div(M, kV1Y)), dim3(kV1X, kV1Y), 0,
         C, A, B, M, N, K);
}

namespace {

// 16 bytes of row `row` of X (rows x K, row-major) from column k, as four words: byte
// k + 4w + l in bits 8l..8l+7 of word w (little-endian, how a 32-bit load of those bytes reads
// them, and how __dp4a numbers its lanes). Zero for bytes outside X. kVec: one 16-byte load
// (K % 16 == 0, X 16-byte aligned, k a multiple of 16: the 16 bytes are all inside or all out).
template <bool kVec>
__device__ __forceinline__ void load16(int w[4], const int8_t* X, int row, int k, int rows, int K) {
  if (kVec) {
    if (row < rows && k < K) {
      const int4 v = *reinterpret_cast<const int4*>(X + static_cast<size_t>(row) * K + k);
      w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
      w[0] = w[1] = w[2] = w[3] = 0;
    }
    return;
  }
  const int8_t* x = X + static_cast<size_t>(row < rows ? row : 0) * K;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    unsigned word = 0;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int kk = k + 4 * q + l;
      const unsigned byte = (row < rows && kk < K) ? static_cast<unsigned>(static_cast<uint8_t>(x[kk])) : 0u;
      word |= byte << (8 * l);
    }
    w[q] = static_cast<int>(word);
  }
}

}  // namespace

// ---- v2: dp4a on shared-memory tiles ------------------------------------------------------
// A block computes a 64x64 tile of C with 256 threads (16 x 16), each 4 x 4 outputs strided
// by 16 (thread (ty, tx) owns rows ty + 16i and columns tx + 16j), walking K 64 bytes (16
// words) at a time. Per word of k a thread reads 4 words of A's tile and 4 of B's and issues
// 16 __dp4a: 64 byte multiply-adds for 8 shared loads. Shared rows are padded by one word
// so the 16 threads reading 16 different rows of B's tile hit 16 different banks.
//   load: each thread one 16-byte piece of A's tile and one of B's (64 rows x 4 pieces)

constexpr int kV2BM = 64, kV2BN = 64, kV2BK = 64;  // BK in bytes
constexpr int kV2Words = kV2BK / 4;               // 16 words of k per tile row
constexpr int kV2Threads = 256;
static_assert(kV2BM * (kV2BK / 16) == kV2Threads && kV2BN * (kV2BK / 16) == kV2Threads, "one 16-byte piece each");

template <bool kVec>
__global__ void __launch_bounds__(kV2Threads) int8_gemm_dp4a_kernel(int32_t* C, const int8_t* A, const int8_t* B,
                                                                      int M, int N, int K) {
#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_PASCAL)
  __shared__ int As[kV2BM][kV2Words + 1];  // As[r][w] = bytes k0+4w .. k0+4w+3 of A's row row0 + r
  __shared__ int Bs[kV2BN][kV2Words + 1];  // Bs[c][w] = the same of B's row col0 + c (a column of C)
  const int t = static_cast<int>(threadIdx.x);
  const int tx = t % 16, ty = t / 16;
  const int row0 = static_cast<int>(blockIdx.y) * kV2BM;
  const int col0 = static_cast<int>(blockIdx.x) * kV2BN;
  const int lr = t / 4, lw = t % 4 * 4;  // this thread loads row lr, words lw .. lw + 3
  int acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0;
  }
  for (int k0 = 0; k0 < K; k0 += kV2BK) {
    int w[4];
    load16<kVec>(w, A, row0 + lr, k0 + 4 * lw, M, K);
#pragma unroll
    for (int q = 0; q < 4; ++q) As[lr][lw + q] = w[q];
    load16<kVec>(w, B, col0 + lr, k0 + 4 * lw, N, K);
#pragma unroll
    for (int q = 0; q < 4; ++q) Bs[lr][lw + q] = w[q];
    __syncthreads();
#pragma unroll
    for (int kw = 0; kw < kV2Words; ++kw) {
      int a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[ty + 16 * i][kw];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[tx + 16 * j][kw];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = row0 + ty + 16 * i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = col0 + tx + 16 * j;
      if (r < M && c < N) C[static_cast<size_t>(r) * N + c] = acc[i][j];
    }
  }
#else
  // Below compute capability 6.1 there is no dp4a: the version's min_sm (NNLAB_SM_PASCAL, the
  // guard's) keeps it from being launched there, and the kernel is only a trap.
  (void)C, (void)A, (void)B, (void)M, (void)N, (void)K;
  needs_newer_gpu<NNLAB_SM_PASCAL>();
#endif
}

void int8_gemm_v2(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  check_sizes("v2", M, N, K, kV2BM);
  const dim3 grid(ceil_div(N, kV2BN), ceil_div(M, kV2BM));
  if (can_load16(A, B, K)) {
    launch("int8_gemm_dp4a", int8_gemm_dp4a_kernel<true>, grid, dim3(kV2Threads), 0, C, A, B, M, N, K);
  } else {
    launch("int8_gemm_dp4a (byte loads)", int8_gemm_dp4a_kernel<false>, grid, dim3(kV2Threads), 0, C, A, B, M, N, K);
  }
}

// ---- v3: int8 tensor cores ----------------------------------------------------------------
// Since compute capability 7.2 a warp multiplies a 16x16 int8 tile of A by a 16x16 int8 tile
// of B into a 16x16 int32 accumulator in one mma_sync. The tiling is matmul v8's: a 128x128
// block tile, 8 warps as 2 x 4 warp tiles of 64x32, each 4 x 2 accumulator fragments; k in
// steps of BK = 32 bytes (two 16-byte chunks, each its own (rows, 16) array: see the header).
// B's tile is stored as B is, a row of B (a column of C) per row: read as matrix_b col_major
// (element (k, n) at p[n * 16 + k]). At the end each fragment goes through a per-warp 16x16
// staging tile to C with bounds checks, as in matmul v8.
//   C tile (128,128) = warps (2,4) x warp tile (64,32) = warps x fragments (4,2) x (16,16)
//   acc[i][j] (16,16) += a[i] (16,16) . b[j] (16,16)      for chunk = 0, 1 of each BK = 32

constexpr int kV3BM = 128, kV3BN = 128, kV3BK = 32;
constexpr int kV3Chunks = kV3BK / 16;
constexpr int kV3WM = 64, kV3WN = 32;                  // warp tile
constexpr int kV3WarpsN = kV3BN / kV3WN;               // 4
constexpr int kV3Warps = (kV3BM / kV3WM) * kV3WarpsN;  // 8
constexpr int kV3Threads = 32 * kV3Warps;              // 256
static_assert(kV3BM * kV3Chunks == kV3Threads && kV3BN * kV3Chunks == kV3Threads, "one 16-byte piece each");

template <bool kVec>
__global__ void __launch_bounds__(kV3Threads) int8_gemm_wmma_kernel(int32_t* C, const int8_t* A, const int8_t* B,
                                                                      int M, int N, int K) {
#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_XAVIER)
  namespace wmma = nvcuda::wmma;
  constexpr int FM = kV3WM / 16, FN = kV3WN / 16;  // 4 x 2 fragments per warp
  __align__(128) __shared__ int8_t As[kV3Chunks][kV3BM][16];  // As[c][r][l] = A[row0 + r][k0 + 16c + l]
  __align__(128) __shared__ int8_t Bs[kV3Chunks][kV3BN][16];  // Bs[c][n][l] = B[col0 + n][k0 + 16c + l]
  __align__(128) __shared__ int Cs[kV3Warps][16 * 16];        // one 16x16 staging tile per warp
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * kV3BM;
  const int col0 = static_cast<int>(blockIdx.x) * kV3BN;
  const int warp = t / 32, lane = t % 32;
  const int warp_r = warp / kV3WarpsN * kV3WM;  // 0, 64
  const int warp_c = warp % kV3WarpsN * kV3WN;  // 0, 32, 64, 96
  const int lr = t / kV3Chunks, lc = t % kV3Chunks;  // this thread loads row lr, chunk lc

  wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0);
  }
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a[FM];
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> b[FN];

  for (int k0 = 0; k0 < K; k0 += kV3BK) {
    int w[4];
    load16<kVec>(w, A, row0 + lr, k0 + 16 * lc, M, K);
    *reinterpret_cast<int4*>(&As[lc][lr][0]) = make_int4(w[0], w[1], w[2], w[3]);
    load16<kVec>(w, B, col0 + lr, k0 + 16 * lc, N, K);
    *reinterpret_cast<int4*>(&Bs[lc][lr][0]) = make_int4(w[0], w[1], w[2], w[3]);
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kV3Chunks; ++c) {
      // Fragment pointers: chunk c at c * 2048 bytes, rows at multiples of 16 * 16 = 256
      // bytes: all 32-byte aligned; ldm 16 (a multiple of 16 bytes).
#pragma unroll
      for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(a[i], &As[c][warp_r + i * 16][0], 16);
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(b[j], &Bs[c][warp_c + j * 16][0], 16);
#pragma unroll
      for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }

  // Epilogue: fragment -> this warp's staging tile -> C, the part inside C. Each lane copies
  // 8 of the 256 entries; 16 consecutive lanes write one 64-byte row segment of C.
  int* stage = Cs[warp];
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();  // every lane's part of the tile is in shared memory
      for (int e = lane; e < 16 * 16; e += 32) {
        const int r = row0 + warp_r + i * 16 + e / 16;
        const int c = col0 + warp_c + j * 16 + e % 16;
        if (r < M && c < N) C[static_cast<size_t>(r) * N + c] = stage[e];
      }
      __syncwarp();  // every lane has read the tile before the next store overwrites it
    }
  }
#else
  // Below compute capability 7.2 there is no int8 mma: the version's min_sm (NNLAB_SM_XAVIER,
  // the guard's) keeps it from being launched there, and the kernel is only a trap.
  (void)C, (void)A, (void)B, (void)M, (void)N, (void)K;
  needs_newer_gpu<NNLAB_SM_XAVIER>();
#endif
}

void int8_gemm_v3(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  check_sizes("v3", M, N, K, kV3BM);
  const dim3 grid(ceil_div(N, kV3BN), ceil_div(M, kV3BM));
  if (can_load16(A, B, K)) {
    launch("int8_gemm_wmma", int8_gemm_wmma_kernel<true>, grid, dim3(kV3Threads), 0, C, A, B, M, N, K);
  } else {
    launch("int8_gemm_wmma (byte loads)", int8_gemm_wmma_kernel<false>, grid, dim3(kV3Threads), 0, C, A, B, M, N, K);
  }
}

void add_int8(Kernels& k) {
  k.int8_gemm = {
      {1, "naive", "one thread per C[i][j]: an int32 loop over k of byte products (the reference)", int8_gemm_v1,
       {NNLAB_SM_MAXWELL}},
      {2, "dp4a tiles",
       "64x64 tiles in shared memory as 32-bit words, 4x4 outputs per thread, __dp4a: 4 byte multiply-adds "
       "per instruction",
       int8_gemm_v2, {NNLAB_SM_PASCAL}},
      {3, "int8 tensor cores",
       "128x128 tiles, wmma m16n16k16 signed char fragments, int32 accumulate (exact, as every rung)",
       int8_gemm_v3, {NNLAB_SM_XAVIER}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
