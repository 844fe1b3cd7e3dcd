// kernels/cuda/matmul.cu: the CUDA matmul ladder of lesson 09, and the one the GPT trainer's
// linear layers run (gpt/backend_cuda.cpp). Every rung has one signature (kernels/cuda/
// device.h: MatmulFn):
//
//   C (M,N) = op(A) (M,K) . op(B) (K,N) (+ bias[col]),  or C += that (accumulate)
//   op(A) = A stored (M,K), or with trans_a A stored (K,M);  op(B) = B stored (K,N), or with
//   trans_b B stored (N,K); fp32 in memory, row-major. The trainer's three products:
//   forward   out  = inp . W^T + b        trans_b, bias
//   dinp      dinp = dout . W             plain
//   dweight   dW  += dout^T . inp         trans_a, accumulate
//
// Lesson 09 climbs the plain product C = A.B (no transposes, bias or accumulate): each rung
// keeps the arithmetic (2MNK FLOPs) and changes where the operands come from: DRAM, L2,
// shared memory, registers, and at the end tensor cores. v1 computes every form (it is the
// plain loop, the reference); v2-v8 compute the plain product only (Requirements::plain_only:
// they throw Error for anything else, and the bench skips them on the other forms); v9-v11
// add the transposes, bias and accumulate to v7's and v8's design, and are what the trainer
// runs (--precision fp32: v9, tf32: v10, bf16: v11).
//
//   v1 naive          one thread per C[i][j], threadIdx.x running DOWN a column of C: the 32
//                     threads of a warp read 32 different rows of A and write 32 rows of C,
//                     32 memory transactions where one would do (uncoalesced); every form
//   v2 coalesced      threadIdx.x runs ALONG a row of C: a warp reads 32 consecutive floats
//                     of B (one transaction), one A value (a broadcast), writes 128 contiguous
//                     bytes of C; same code, only the index mapping changes
//   v3 shared tiles   32x32 tiles of A and B staged in shared memory: each global element is
//                     read once per tile instead of once per thread that needs it (32x less
//                     global traffic); now shared memory bandwidth bounds it (2 loads per FMA)
//   v4 1D blocking    64x64 block tile, BK = 8, each thread 8 outputs down a column: one B
//                     value from shared memory serves 8 FMAs held in registers (~1.1 shared
//                     loads per FMA instead of 2)
//   v5 2D blocking    128x128 block tile, BK = 8, 8x8 outputs per thread: per k, 8 A and 8 B
//                     values in registers feed 64 FMAs (outer product; 0.25 loads per FMA)
//   v6 float4         A's tile stored transposed in shared memory (its column is contiguous),
//                     global loads, shared reads and C stores 16 bytes at a time: 4x fewer
//                     load/store instructions; falls back to guarded scalar loads when K or N
//                     is not a multiple of 4 or a pointer is not 16-byte aligned
//   v7 warp tiles     the same 128x128 tile, BK = 16, each warp owns a 64x32 sub-tile and each
//                     lane 2x2 sub-tiles of 4x4: a warp's shared-memory reads touch 4-8
//                     consecutive float4s (broadcasts, no bank conflicts) instead of v6's
//                     strided ones, and half as many barriers per FMA
//   v8 tensor cores   TF32 wmma fragments (m16n16k8, fp32 accumulate) instead of FMAs: each
//                     warp a 64x32 tile of 4x2 fragments; inputs rounded to a 10-bit mantissa,
//                     so results differ from fp32 by 1e-4..1e-3 relative (compute capability 8.0)
//   v9 any layout     v7's warp tiles with every form: the transposes are done while a tile is
//                     copied into shared memory (both tiles k-major there whatever the layout
//                     in global memory, each layout read along its contiguous dimension), so
//                     the inner loop is v7's for every layout; the next tile is fetched into
//                     registers while the current one is multiplied; bias and accumulate are
//                     applied when C is written; 64x64 tiles when 128x128 ones would leave
//                     multiprocessors idle (the dweight product: a small C with a long K).
//                     The trainer's fp32 matmul
//   v10 TF32 cores    v9's tiles and loading, the multiply on tensor cores as v8: wmma
//                     m16n16k8 TF32 fragments, fp32 accumulate (compute capability 8.0)
//   v11 BF16 cores    the same with wmma m16n16k16 __nv_bfloat16 fragments: inputs rounded to
//                     an 8-bit mantissa (relative error up to 2^-9 each), half the shared
//                     memory per tile, fp32 accumulate (compute capability 8.0)
//
// bias_backward (the bias gradient of the linear layer: dbias (OC) += column sums of dout
// (N,OC)), a ladder of its own:
//   v1 naive          one thread per column, looping down all N rows: OC threads in all
//                     (384 for the GPT's projections), far too few to fill a GPU
//   v2 column strips  a block per strip of 32 columns, its 32 x 32 threads splitting the
//                     rows: a warp reads 32 consecutive floats of a row (coalesced), 4 rows
//                     in flight per thread, then a fixed-order tree in shared memory
//
// Figures: not yet measured on a GPU (`nnlab cuda bench matmul` prints them with cuBLAS
// beside, in pure fp32, TF32 and BF16).
//
// Determinism: every output is summed by one thread (or one warp's mma chain) in k order,
// with no atomics, so runs repeat bit for bit; v9's two tile sizes even give the same bits
// (each C element's k loop is the same). Every version is correct for any M, N, K >= 1
// (each matrix under 2^31 elements, so int indices do): tiles that hang over an edge load
// zeros there and store nothing there. Static __shared__ arrays throughout: the tiles'
// sizes are compile-time constants.
//
// The plain loop every version computes:
//   for i < M: for j < N: C[i][j] (+)= sum_k op(A)[i][k] op(B)[k][j] + bias[j]
//   op(A)[i][k] = trans_a ? A[k][i] : A[i][k];   op(B)[k][j] = trans_b ? B[j][k] : B[k][j]
//
// Oldest GPU: compute capability 5.0 for v1-v7, v9 and bias_backward v1, v2
// (NNLAB_SM_MAXWELL: fp32 FMAs, static shared memory up to 16 KB, float4); 8.0 for v8, v10
// and v11 (NNLAB_SM_AMPERE: TF32 and BF16 wmma), whose kernels are guarded by the same
// NNLAB_SM_AMPERE and are only a trap when compiled for an older GPU. Compile-checked for
// 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
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
void check_sizes(const char* version, int M, int N, int K) {
  const long long limit = 2147483647LL;
  if (M < 1 || N < 1 || K < 1 || 1LL * M * K > limit || 1LL * K * N > limit || 1LL * M * N > limit) {
    throw Error(std::string("matmul ") + version + ": M=" + std::to_string(M) + " N=" + std::to_string(N) +
                " K=" + std::to_string(K) + ": each must be >= 1 and each matrix under 2^31 elements");
  }
}

// The lesson's rungs v2-v8 compute C = A.B and nothing else: asked for a transpose, a bias
// or accumulate they refuse rather than compute something else.
void check_plain(const char* version, const MatmulArgs& args) {
  if (args.trans_a || args.trans_b || args.accumulate || args.bias != nullptr) {
    throw Error(std::string("matmul ") + version +
                " computes the plain product C = A.B only (a lesson-09 rung): transposes, bias and accumulate "
                "are v1's and v9-v11's");
  }
}

void check_bias_backward_sizes(const char* version, int N, int OC) {
  if (N < 1 || OC < 1 || 1LL * N * OC > 2147483647LL) {
    throw Error(std::string("bias_backward ") + version + ": N=" + std::to_string(N) + " OC=" + std::to_string(OC) +
                ": each must be >= 1 and dout under 2^31 elements");
  }
}

// Whether the float4 paths (v6-v11) may move 16 bytes at a time: every stored row of A, B
// and C (and the bias) must start on a 16-byte boundary, i.e. each pointer is 16-byte
// aligned and each row length (A: K, or M with trans_a; B: N, or K with trans_b; C: N) a
// multiple of 4. cudaMalloc gives 256-byte alignment; an offset pointer (a view into a
// bigger buffer) may not have it.
bool can_use_float4(const float* C, const float* A, const float* B, int M, int N, int K, const MatmulArgs& args) {
  const int lda = args.trans_a ? M : K;
  const int ldb = args.trans_b ? K : N;
  return aligned16(C) && aligned16(A) && aligned16(B) && (args.bias == nullptr || aligned16(args.bias)) &&
         lda % 4 == 0 && ldb % 4 == 0 && N % 4 == 0;
}

}  // namespace

// ---- v1: naive, uncoalesced ------------------------------------------------------------------
// Thread (x, y) of block (bx, by) computes C[bx*32 + x][by*32 + y]: consecutive threads of a
// warp (consecutive x) own consecutive ROWS of one column. At each k the warp reads
// A[row][k] for 32 rows, K floats apart: 32 separate 32-byte sectors for 128 useful bytes.
// The reference rung: it reads op(A) and op(B) straight from global memory whatever their
// layout, and adds the bias and the old C when asked.

__global__ void matmul_naive_kernel(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // runs down a column of C
  const int col = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (row >= M || col >= N) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) {
    const float a = args.trans_a ? A[k * M + row] : A[row * K + k];  // op(A)[row][k]: A stored (K,M) or (M,K)
    const float b = args.trans_b ? B[col * K + k] : B[k * N + col];  // op(B)[k][col]: B stored (N,K) or (K,N)
    sum += a * b;  // C[i][j] = sum_k op(A)[i][k] op(B)[k][j]
  }
  if (args.bias) sum += args.bias[col];
  float* c = C + row * N + col;
  *c = args.accumulate ? *c + sum : sum;
}

void matmul_v1(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v1", M, N, K);
  const dim3 block(32, 32);
  const dim3 grid(ceil_div(M, 32), ceil_div(N, 32));  // x over rows of C, y over columns
  launch("matmul_naive", matmul_naive_kernel, grid, block, 0, C, A, B, M, N, K, args);
}

// ---- v2: coalesced -----------------------------------------------------------------------
// The same kernel with x and y swapped: consecutive threads own consecutive COLUMNS of one
// row. At each k the warp reads B[k][col..col+31] (128 contiguous bytes, one transaction)
// and one A[row][k] (the same address for all 32: a broadcast), and stores 128 contiguous
// bytes of C.

__global__ void matmul_coalesced_kernel(float* C, const float* A, const float* B, int M, int N, int K) {
  const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // runs along a row of C
  const int row = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (row >= M || col >= N) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) {
    sum += A[row * K + k] * B[k * N + col];
  }
  C[row * N + col] = sum;
}

void matmul_v2(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v2", M, N, K);
  check_plain("v2", args);
  const dim3 block(32, 32);
  const dim3 grid(ceil_div(N, 32), ceil_div(M, 32));  // x over columns of C, y over rows
  launch("matmul_coalesced", matmul_coalesced_kernel, grid, block, 0, C, A, B, M, N, K);
}

// ---- v3: shared-memory tiles -------------------------------------------------------------
// A 32x32 block of threads computes a 32x32 tile of C. It walks K in steps of 32: the block
// copies a 32x32 tile of A and one of B into shared memory (each thread one element of
// each, coalesced), waits, and every thread reads its row of the A tile and column of the B
// tile from there. Each global element is now read by one thread per tile instead of 32.
//
//   for k0 in 0, 32, ...:   As = A[row0 : row0+32][k0 : k0+32],  Bs = B[k0 : k0+32][col0 : col0+32]
//                           C[row][col] += sum_k As[ty][k] Bs[k][tx]

constexpr int kSmemTile = 32;

__global__ void matmul_smem_kernel(float* C, const float* A, const float* B, int M, int N, int K) {
  constexpr int T = kSmemTile;
  __shared__ float As[T][T];  // As[r][k] = A[row0 + r][k0 + k]   (32,32)
  __shared__ float Bs[T][T];  // Bs[k][c] = B[k0 + k][col0 + c]   (32,32)
  const int tx = static_cast<int>(threadIdx.x);
  const int ty = static_cast<int>(threadIdx.y);
  const int row = static_cast<int>(blockIdx.y) * T + ty;
  const int col = static_cast<int>(blockIdx.x) * T + tx;
  // Threads outside C keep going: they load their share of the tiles and must reach every
  // __syncthreads. They only skip the final store.
  float sum = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;    // zeros past the edges
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;  // add nothing to the sum
    __syncthreads();  // the tiles are complete
    for (int k = 0; k < T; ++k) {
      sum += As[ty][k] * Bs[k][tx];  // As[ty][k]: broadcast in the warp; Bs[k][tx]: consecutive banks
    }
    __syncthreads();  // everyone is done reading before the next tiles overwrite them
  }
  if (row < M && col < N) C[row * N + col] = sum;
}

void matmul_v3(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v3", M, N, K);
  check_plain("v3", args);
  const dim3 block(kSmemTile, kSmemTile);
  const dim3 grid(ceil_div(N, kSmemTile), ceil_div(M, kSmemTile));
  launch("matmul_smem", matmul_smem_kernel, grid, block, 0, C, A, B, M, N, K);
}

// ---- v4: 1D register blocking ------------------------------------------------------------
// v3 does two shared loads per FMA, and shared memory is slower than the FMA units. Here a
// block of 512 threads computes a 64x64 tile (BM x BN) of C walking K in steps of BK = 8,
// and each thread computes TM = 8 outputs down one column: per k it loads one B value
// into a register and reuses it for 8 FMAs (the A values are broadcasts).

constexpr int kV4BM = 64, kV4BN = 64, kV4BK = 8, kV4TM = 8;
constexpr int kV4Threads = kV4BM * kV4BN / kV4TM;  // 512
static_assert(kV4BM * kV4BK == kV4Threads && kV4BK * kV4BN == kV4Threads, "one element of each tile per thread");

__global__ void __launch_bounds__(kV4Threads) matmul_blocktile_1d_kernel(float* C, const float* A, const float* B,
                                                                           int M, int N, int K) {
  constexpr int BM = kV4BM, BN = kV4BN, BK = kV4BK, TM = kV4TM;
  __shared__ float As[BM][BK];  // (64,8):  As[r][k] = A[row0 + r][k0 + k]
  __shared__ float Bs[BK][BN];  // (8,64):  Bs[k][c] = B[k0 + k][col0 + c]
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * BM;
  const int col0 = static_cast<int>(blockIdx.x) * BN;
  const int tcol = t % BN;  // 0..63: this thread's column of the tile
  const int trow = t / BN;  // 0..7:  its rows are trow*TM .. trow*TM + 7
  // The loaders: thread t copies As[a_r][a_c] and Bs[b_r][b_c].
  const int a_r = t / BK, a_c = t % BK;  // (64,8): 8 consecutive k per row of A
  const int b_r = t / BN, b_c = t % BN;  // (8,64): 64 consecutive columns of B, coalesced
  float acc[TM] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    const int ar = row0 + a_r, ak = k0 + a_c;
    As[a_r][a_c] = (ar < M && ak < K) ? A[ar * K + ak] : 0.0f;
    const int bk = k0 + b_r, bc = col0 + b_c;
    Bs[b_r][b_c] = (bk < K && bc < N) ? B[bk * N + bc] : 0.0f;
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k][tcol];  // one shared load ...
      for (int i = 0; i < TM; ++i) {
        acc[i] += As[trow * TM + i][k] * b;  // ... 8 FMAs (As: one address per warp, a broadcast)
      }
    }
    __syncthreads();
  }
  const int c = col0 + tcol;
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + trow * TM + i;
    if (r < M && c < N) C[r * N + c] = acc[i];
  }
}

void matmul_v4(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v4", M, N, K);
  check_plain("v4", args);
  const dim3 grid(ceil_div(N, kV4BN), ceil_div(M, kV4BM));
  launch("matmul_blocktile_1d", matmul_blocktile_1d_kernel, grid, dim3(kV4Threads), 0, C, A, B, M, N, K);
}

// ---- v5: 2D register blocking ------------------------------------------------------------
// Each of 256 threads computes an 8x8 patch (TM x TN) of a 128x128 tile. Per k it loads 8
// values of A's column and 8 of B's row into registers and accumulates their outer
// product: 16 shared loads for 64 FMAs, and 64 accumulators that live in registers.
//
//   acc (TM,TN) += regA (TM) x regB (TN)   for each k of the tile

constexpr int kV5BM = 128, kV5BN = 128, kV5BK = 8, kV5TM = 8, kV5TN = 8;
constexpr int kV5Threads = (kV5BM / kV5TM) * (kV5BN / kV5TN);  // 16 x 16 = 256

__global__ void __launch_bounds__(kV5Threads) matmul_blocktile_2d_kernel(float* C, const float* A, const float* B,
                                                                           int M, int N, int K) {
  constexpr int BM = kV5BM, BN = kV5BN, BK = kV5BK, TM = kV5TM, TN = kV5TN, NT = kV5Threads;
  __shared__ float As[BM][BK];  // (128,8): As[r][k] = A[row0 + r][k0 + k]
  __shared__ float Bs[BK][BN];  // (8,128): Bs[k][c] = B[k0 + k][col0 + c]
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * BM;
  const int col0 = static_cast<int>(blockIdx.x) * BN;
  const int trow = t / (BN / TN);  // 0..15: rows trow*8 .. +7 of the tile
  const int tcol = t % (BN / TN);  // 0..15: columns tcol*8 .. +7
  float acc[TM][TN] = {};
  float regA[TM], regB[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    // Each tile has 1024 elements: 4 per thread, consecutive threads on consecutive addresses.
    for (int i = 0; i < BM * BK / NT; ++i) {
      const int idx = t + i * NT;
      const int r = idx / BK, k = idx % BK;  // (128,8)
      As[r][k] = (row0 + r < M && k0 + k < K) ? A[(row0 + r) * K + k0 + k] : 0.0f;
    }
    for (int i = 0; i < BK * BN / NT; ++i) {
      const int idx = t + i * NT;
      const int k = idx / BN, c = idx % BN;  // (8,128)
      Bs[k][c] = (k0 + k < K && col0 + c < N) ? B[(k0 + k) * N + col0 + c] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      for (int i = 0; i < TM; ++i) regA[i] = As[trow * TM + i][k];
      for (int j = 0; j < TN; ++j) regB[j] = Bs[k][tcol * TN + j];
      for (int i = 0; i < TM; ++i) {
        for (int j = 0; j < TN; ++j) acc[i][j] += regA[i] * regB[j];
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + trow * TM + i;
    if (r >= M) break;
    for (int j = 0; j < TN; ++j) {
      const int c = col0 + tcol * TN + j;
      if (c < N) C[r * N + c] = acc[i][j];
    }
  }
}

void matmul_v5(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v5", M, N, K);
  check_plain("v5", args);
  const dim3 grid(ceil_div(N, kV5BN), ceil_div(M, kV5BM));
  launch("matmul_blocktile_2d", matmul_blocktile_2d_kernel, grid, dim3(kV5Threads), 0, C, A, B, M, N, K);
}

// ---- float4 loads and stores with edges (v6-v11) -----------------------------------------
// Elements (r, c .. c+3) of a row-major (rows, cols) matrix X, zeros outside it. With
// kVec4 (cols % 4 == 0, X 16-byte aligned, c a multiple of 4) the four are all inside or
// all outside a row, so one 16-byte load does; otherwise four guarded scalar loads.
template <bool kVec4>
__device__ __forceinline__ float4 load4(const float* X, int r, int c, int rows, int cols) {
  if (r >= rows) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float* p = X + r * cols + c;
  if constexpr (kVec4) {
    if (c < cols) return *reinterpret_cast<const float4*>(p);
    return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  } else {
    return make_float4(c < cols ? p[0] : 0.0f, c + 1 < cols ? p[1] : 0.0f, c + 2 < cols ? p[2] : 0.0f,
                       c + 3 < cols ? p[3] : 0.0f);
  }
}

// Stores v into (r, c .. c+3) of X, the part inside it.
template <bool kVec4>
__device__ __forceinline__ void store4(float* X, int r, int c, int rows, int cols, float4 v) {
  if (r >= rows) return;
  float* p = X + r * cols + c;
  if constexpr (kVec4) {
    if (c < cols) *reinterpret_cast<float4*>(p) = v;
  } else {
    if (c < cols) p[0] = v.x;
    if (c + 1 < cols) p[1] = v.y;
    if (c + 2 < cols) p[2] = v.z;
    if (c + 3 < cols) p[3] = v.w;
  }
}

// ---- v6: float4 loads, A transposed in shared memory ------------------------------------------
// v5's tiles and 8x8 per thread, with 16-byte memory operations everywhere:
//   - global loads: each thread copies one float4 of A's tile and one of B's (v5: 4 + 4
//     scalar loads);
//   - A's tile is stored transposed, As[k][r]: the 8 values of A's column a thread needs at
//     step k are then contiguous, two float4 reads (v5: 8 scalar reads down a column);
//   - B's row segment likewise two float4 reads, and C is written as float4.
// Fewer instructions for the same bytes: the load/store units issue a quarter as many.

constexpr int kV6BM = 128, kV6BN = 128, kV6BK = 8, kV6TM = 8, kV6TN = 8;
constexpr int kV6Threads = (kV6BM / kV6TM) * (kV6BN / kV6TN);  // 256
static_assert(kV6BM * kV6BK / 4 == kV6Threads && kV6BK * kV6BN / 4 == kV6Threads, "one float4 of each tile per thread");

template <bool kVec4>
__global__ void __launch_bounds__(kV6Threads) matmul_vec4_kernel(float* C, const float* A, const float* B, int M,
                                                                   int N, int K) {
  constexpr int BM = kV6BM, BN = kV6BN, BK = kV6BK, TM = kV6TM, TN = kV6TN;
  __align__(16) __shared__ float As[BK][BM];  // (8,128): As[k][r] = A[row0 + r][k0 + k], transposed
  __align__(16) __shared__ float Bs[BK][BN];  // (8,128): Bs[k][c] = B[k0 + k][col0 + c]
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * BM;
  const int col0 = static_cast<int>(blockIdx.x) * BN;
  const int trow = t / (BN / TN);  // 0..15
  const int tcol = t % (BN / TN);  // 0..15
  const int a_r = t / (BK / 4), a_k = t % (BK / 4) * 4;  // A tile (128,8) as (128,2) float4s
  const int b_k = t / (BN / 4), b_c = t % (BN / 4) * 4;  // B tile (8,128) as (8,32) float4s
  float acc[TM][TN] = {};
  float regA[TM], regB[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    const float4 a = load4<kVec4>(A, row0 + a_r, k0 + a_k, M, K);
    As[a_k + 0][a_r] = a.x;  // transposing store: 4 scalar writes
    As[a_k + 1][a_r] = a.y;
    As[a_k + 2][a_r] = a.z;
    As[a_k + 3][a_r] = a.w;
    *reinterpret_cast<float4*>(&Bs[b_k][b_c]) = load4<kVec4>(B, k0 + b_k, col0 + b_c, K, N);
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      for (int i = 0; i < TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&As[k][trow * TM + i]);
        regA[i] = v.x;
        regA[i + 1] = v.y;
        regA[i + 2] = v.z;
        regA[i + 3] = v.w;
      }
      for (int j = 0; j < TN; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tcol * TN + j]);
        regB[j] = v.x;
        regB[j + 1] = v.y;
        regB[j + 2] = v.z;
        regB[j + 3] = v.w;
      }
      for (int i = 0; i < TM; ++i) {
        for (int j = 0; j < TN; ++j) acc[i][j] += regA[i] * regB[j];
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i) {
    for (int j = 0; j < TN; j += 4) {
      const float4 v = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
      store4<kVec4>(C, row0 + trow * TM + i, col0 + tcol * TN + j, M, N, v);
    }
  }
}

void matmul_v6(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v6", M, N, K);
  check_plain("v6", args);
  const dim3 grid(ceil_div(N, kV6BN), ceil_div(M, kV6BM));
  if (can_use_float4(C, A, B, M, N, K, args)) {
    launch("matmul_vec4", matmul_vec4_kernel<true>, grid, dim3(kV6Threads), 0, C, A, B, M, N, K);
  } else {
    launch("matmul_vec4 (scalar edges)", matmul_vec4_kernel<false>, grid, dim3(kV6Threads), 0, C, A, B, M, N, K);
  }
}

// ---- v7: warp tiling ---------------------------------------------------------------------
// The 128x128 block tile is split among the 8 warps as 2 x 4 warp tiles of 64x32; a warp
// covers its tile in 2 x 2 steps of a 32x16 sub-tile, where lane (lr, lc) of an 8 x 4
// arrangement owns a 4x4 patch. A thread still computes 64 outputs (2x2 patches of 4x4),
// but what a warp reads from shared memory at each k is now:
//   A: 8 distinct float4s (lr = 0..7), consecutive: 128 bytes, no bank conflict;
//   B: 4 distinct float4s (lc = 0..3), consecutive, each a broadcast to 8 lanes;
// where v6's warp read 16 float4s of B 32 bytes apart (2-way bank conflicts). BK = 16
// halves the barriers per FMA. The hierarchy block -> warp -> thread is how CUTLASS tiles,
// and the shape v8's tensor cores need (a warp owns fragments).
//
//   C tile (128,128) = warps (2,4) x warp tile (64,32)
//   warp tile (64,32) = sub-tiles (2,2) x (32,16);  sub-tile (32,16) = lanes (8,4) x (4,4)

constexpr int kV7BM = 128, kV7BN = 128, kV7BK = 16;
constexpr int kV7WM = 64, kV7WN = 32;                  // warp tile
constexpr int kV7TM = 4, kV7TN = 4;                    // per lane, per sub-tile
constexpr int kV7LanesM = 8, kV7LanesN = 4;            // lanes of a warp as 8 x 4
constexpr int kV7SubM = kV7LanesM * kV7TM;             // 32
constexpr int kV7SubN = kV7LanesN * kV7TN;             // 16
constexpr int kV7IterM = kV7WM / kV7SubM;              // 2
constexpr int kV7IterN = kV7WN / kV7SubN;              // 2
constexpr int kV7WarpsN = kV7BN / kV7WN;               // 4
constexpr int kV7Threads = 32 * (kV7BM / kV7WM) * kV7WarpsN;  // 256
static_assert(kV7LanesM * kV7LanesN == 32, "a warp is 32 lanes");
static_assert(kV7BM * kV7BK / 4 == 2 * kV7Threads && kV7BK * kV7BN / 4 == 2 * kV7Threads, "two float4 per thread");

template <bool kVec4>
__global__ void __launch_bounds__(kV7Threads) matmul_warptile_kernel(float* C, const float* A, const float* B, int M,
                                                                       int N, int K) {
  constexpr int BM = kV7BM, BN = kV7BN, BK = kV7BK, TM = kV7TM, TN = kV7TN, NT = kV7Threads;
  constexpr int IM = kV7IterM, IN = kV7IterN;
  __align__(16) __shared__ float As[BK][BM];  // (16,128): As[k][r] = A[row0 + r][k0 + k], transposed
  __align__(16) __shared__ float Bs[BK][BN];  // (16,128): Bs[k][c] = B[k0 + k][col0 + c]
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * BM;
  const int col0 = static_cast<int>(blockIdx.x) * BN;
  const int warp = t / 32, lane = t % 32;
  const int warp_r = warp / kV7WarpsN * kV7WM;  // 0, 64:          the warp tile's first row
  const int warp_c = warp % kV7WarpsN * kV7WN;  // 0, 32, 64, 96:  its first column
  const int lane_r = lane / kV7LanesN * TM;     // 0, 4, .., 28:   the lane's patch in a sub-tile
  const int lane_c = lane % kV7LanesN * TN;     // 0, 4, 8, 12
  float acc[IM][IN][TM][TN] = {};
  float regA[IM][TM], regB[IN][TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = 0; i < 2; ++i) {
      const int idx = t + i * NT;
      const int r = idx / (BK / 4), k = idx % (BK / 4) * 4;  // A tile (128,16) as (128,4) float4s
      const float4 a = load4<kVec4>(A, row0 + r, k0 + k, M, K);
      As[k + 0][r] = a.x;
      As[k + 1][r] = a.y;
      As[k + 2][r] = a.z;
      As[k + 3][r] = a.w;
      const int bk = idx / (BN / 4), c = idx % (BN / 4) * 4;  // B tile (16,128) as (16,32) float4s
      *reinterpret_cast<float4*>(&Bs[bk][c]) = load4<kVec4>(B, k0 + bk, col0 + c, K, N);
    }
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      for (int im = 0; im < IM; ++im) {
        const float4 v = *reinterpret_cast<const float4*>(&As[k][warp_r + im * kV7SubM + lane_r]);
        regA[im][0] = v.x;
        regA[im][1] = v.y;
        regA[im][2] = v.z;
        regA[im][3] = v.w;
      }
      for (int in = 0; in < IN; ++in) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[k][warp_c + in * kV7SubN + lane_c]);
        regB[in][0] = v.x;
        regB[in][1] = v.y;
        regB[in][2] = v.z;
        regB[in][3] = v.w;
      }
      for (int im = 0; im < IM; ++im) {
        for (int in = 0; in < IN; ++in) {
          for (int i = 0; i < TM; ++i) {
            for (int j = 0; j < TN; ++j) acc[im][in][i][j] += regA[im][i] * regB[in][j];
          }
        }
      }
    }
    __syncthreads();
  }
  for (int im = 0; im < IM; ++im) {
    for (int in = 0; in < IN; ++in) {
      for (int i = 0; i < TM; ++i) {
        const int r = row0 + warp_r + im * kV7SubM + lane_r + i;
        const int c = col0 + warp_c + in * kV7SubN + lane_c;
        const float* a = acc[im][in][i];
        store4<kVec4>(C, r, c, M, N, make_float4(a[0], a[1], a[2], a[3]));
      }
    }
  }
}

void matmul_v7(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v7", M, N, K);
  check_plain("v7", args);
  const dim3 grid(ceil_div(N, kV7BN), ceil_div(M, kV7BM));
  if (can_use_float4(C, A, B, M, N, K, args)) {
    launch("matmul_warptile", matmul_warptile_kernel<true>, grid, dim3(kV7Threads), 0, C, A, B, M, N, K);
  } else {
    launch("matmul_warptile (scalar edges)", matmul_warptile_kernel<false>, grid, dim3(kV7Threads), 0, C, A, B, M,
           N, K);
  }
}

// ---- v8: tensor cores, TF32 --------------------------------------------------------------
// Since compute capability 8.0 a warp can multiply a 16x8 tile of A by an 8x16 tile of B
// into a 16x16 fp32 accumulator in one instruction (mma_sync), with A and B in TF32: fp32's
// 8-bit exponent and a 10-bit mantissa (fp32 has 23). nvcuda::wmma exposes it as opaque
// per-warp "fragments": which lane holds which element is unspecified, so code only
// loads, multiplies and stores whole fragments, all 32 lanes together.
//
// The tiling is v7's: a 128x128 block tile, 8 warps as 2 x 4 warp tiles of 64x32, each warp
// tile 4 x 2 accumulator fragments of 16x16. Tiles of A and B go through shared memory (as
// TF32, rounded once there with __float_to_tf32); per k-step of 8 a warp loads 4 A and 2 B
// fragments and issues 8 mma_syncs. At the end each fragment is stored to a per-warp 16x16
// staging area and copied to C with bounds checks: store_matrix_sync straight into C would
// need C's rows 32-byte aligned and whole 16x16 tiles inside C.
//
//   C tile (128,128) = warps (2,4) x warp tile (64,32) = warps x fragments (4,2) x (16,16)
//   acc[i][j] (16,16) += a[i] (16,8) . b[j] (8,16)      for kk = 0, 8 of each BK = 16

constexpr int kV8BM = 128, kV8BN = 128, kV8BK = 16;
constexpr int kV8WM = 64, kV8WN = 32;                  // warp tile
constexpr int kV8WarpsN = kV8BN / kV8WN;               // 4
constexpr int kV8Warps = (kV8BM / kV8WM) * kV8WarpsN;  // 8
constexpr int kV8Threads = 32 * kV8Warps;              // 256
static_assert(kV8BM * kV8BK / 4 == 2 * kV8Threads && kV8BK * kV8BN / 4 == 2 * kV8Threads, "two float4 per thread");

template <bool kVec4>
__global__ void __launch_bounds__(kV8Threads) matmul_tf32_kernel(float* C, const float* A, const float* B, int M,
                                                                   int N, int K) {
#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_AMPERE)
  namespace wmma = nvcuda::wmma;
  constexpr int BM = kV8BM, BN = kV8BN, BK = kV8BK, NT = kV8Threads;
  constexpr int FM = kV8WM / 16, FN = kV8WN / 16;  // 4 x 2 fragments per warp
  // Shared rows padded by 4 floats: wmma wants ldm a multiple of 4 (16 bytes) and fragment
  // pointers 32-byte aligned (both hold: see the offsets below), and the padding staggers
  // consecutive rows over the banks.
  constexpr int LDA = BK + 4;  // 20
  constexpr int LDB = BN + 4;  // 132
  __align__(128) __shared__ float As[BM][LDA];            // (128,16+4): As[r][k] = tf32(A[row0 + r][k0 + k])
  __align__(128) __shared__ float Bs[BK][LDB];            // (16,128+4): Bs[k][c] = tf32(B[k0 + k][col0 + c])
  __align__(128) __shared__ float Cs[kV8Warps][16 * 16];  // one 16x16 staging tile per warp
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * BM;
  const int col0 = static_cast<int>(blockIdx.x) * BN;
  const int warp = t / 32, lane = t % 32;
  const int warp_r = warp / kV8WarpsN * kV8WM;  // 0, 64
  const int warp_c = warp % kV8WarpsN * kV8WN;  // 0, 32, 64, 96

  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[FM][FN];
  for (int i = 0; i < FM; ++i) {
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a[FM];
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b[FN];

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = 0; i < 2; ++i) {
      const int idx = t + i * NT;
      const int r = idx / (BK / 4), k = idx % (BK / 4) * 4;  // A tile (128,16) as (128,4) float4s
      const float4 va = load4<kVec4>(A, row0 + r, k0 + k, M, K);
      As[r][k + 0] = wmma::__float_to_tf32(va.x);
      As[r][k + 1] = wmma::__float_to_tf32(va.y);
      As[r][k + 2] = wmma::__float_to_tf32(va.z);
      As[r][k + 3] = wmma::__float_to_tf32(va.w);
      const int bk = idx / (BN / 4), c = idx % (BN / 4) * 4;  // B tile (16,128) as (16,32) float4s
      const float4 vb = load4<kVec4>(B, k0 + bk, col0 + c, K, N);
      Bs[bk][c + 0] = wmma::__float_to_tf32(vb.x);
      Bs[bk][c + 1] = wmma::__float_to_tf32(vb.y);
      Bs[bk][c + 2] = wmma::__float_to_tf32(vb.z);
      Bs[bk][c + 3] = wmma::__float_to_tf32(vb.w);
    }
    __syncthreads();
    for (int kk = 0; kk < BK; kk += 8) {
      // Fragment pointers: row offsets are multiples of 16 rows (16 * 20 * 4 = 1280 bytes in
      // As; 8 * 132 * 4 = 4224 bytes in Bs), column offsets multiples of 8 floats: all
      // 32-byte aligned.
      for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(a[i], &As[warp_r + i * 16][kk], LDA);
      for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][warp_c + j * 16], LDB);
      for (int i = 0; i < FM; ++i) {
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }

  // Epilogue: fragment -> this warp's staging tile -> C, the part inside C. Each lane copies
  // 8 of the 256 elements; 16 consecutive lanes write one 64-byte row segment of C.
  float* stage = Cs[warp];
  for (int i = 0; i < FM; ++i) {
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();  // every lane's part of the tile is in shared memory
      for (int e = lane; e < 16 * 16; e += 32) {
        const int r = row0 + warp_r + i * 16 + e / 16;
        const int c = col0 + warp_c + j * 16 + e % 16;
        if (r < M && c < N) C[r * N + c] = stage[e];
      }
      __syncwarp();  // every lane has read the tile before the next store overwrites it
    }
  }
#else
  // Below compute capability 8.0 there is no TF32 mma: the version's min_sm (NNLAB_SM_AMPERE,
  // the guard's) keeps it from being launched there, and the kernel is only a trap.
  (void)C, (void)A, (void)B, (void)M, (void)N, (void)K;
  needs_newer_gpu<NNLAB_SM_AMPERE>();
#endif
}

void matmul_v8(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v8", M, N, K);
  check_plain("v8", args);
  const dim3 grid(ceil_div(N, kV8BN), ceil_div(M, kV8BM));
  if (can_use_float4(C, A, B, M, N, K, args)) {
    launch("matmul_tf32", matmul_tf32_kernel<true>, grid, dim3(kV8Threads), 0, C, A, B, M, N, K);
  } else {
    launch("matmul_tf32 (scalar edges)", matmul_tf32_kernel<false>, grid, dim3(kV8Threads), 0, C, A, B, M, N, K);
  }
}

namespace {

// ---- what the any-layout versions (v9-v11) share --------------------------------------------------
//
// Block tiles. Each block computes a BM x BN tile of C walking K in steps of BK; its warps
// are arranged WarpsM x WarpsN, each owning a WM x WN warp tile.
template <int BM_, int BN_, int WarpsM_, int WarpsN_, int MinBlocks_>
struct MatmulTiles {
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
// 8 warps as 2 x 4 warp tiles of 64x32 (v7, v8), at most 128 registers per thread
// (64 of them accumulators) so that two blocks fit on a multiprocessor.
using BigTiles = MatmulTiles<128, 128, 2, 4, 2>;
// 4 warps as 2 x 2 warp tiles of 32x32: 4x as many blocks for the same C.
using SmallTiles = MatmulTiles<64, 64, 2, 2, 4>;

// The big tiles unless their grid has fewer blocks than the GPU holds at once (two per
// multiprocessor): then some multiprocessors would sit idle for the whole product, which is
// the dweight form (M = OC, N = C: 36 big tiles at the GPT's 1536 x 384 on a GPU with 132
// multiprocessors; 144 small ones). Splitting K across blocks would add parallelism too,
// but needs a second pass or atomics to sum the parts, and MatmulFn has no workspace.
bool use_small_tiles(int M, int N) {
  const long long big = 1LL * ceil_div(M, BigTiles::BM) * ceil_div(N, BigTiles::BN);
  return big < 2LL * multiprocessors();
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
      v[i] = load4<kVec4>(X, k0 + k, x0 + x, K, XN);
    } else {
      const int x = idx / (BK / 4), k = idx % (BK / 4) * 4;  // the tile (BX,BK) as (BX,BK/4) float4s
      v[i] = load4<kVec4>(X, x0 + x, k0 + k, XN, K);
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
__device__ __forceinline__ void store_out4(float* C, int r, int c, int M, int N, float4 v, const MatmulArgs& args) {
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

using TiledKernel = void (*)(float*, const float*, const float*, int, int, int, MatmulArgs);

// Launches one of a tiled version's four kernels: big or small tiles, float4 or scalar edges.
template <template <class, bool> class Kernel>
void launch_tiled(const char* name, float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  const bool small = use_small_tiles(M, N);
  const bool vec4 = can_use_float4(C, A, B, M, N, K, args);
  TiledKernel kernel = nullptr;
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

// ---- v9: any layout, fp32 warp tiles, transposes while staging ------------------------------------------
// v7's warp tiling: the warp tile (WM,WN) is covered in (WM/32) x (WN/16) steps of a
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
    matmul_tiles_fp32_kernel(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
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
  static TiledKernel get() { return matmul_tiles_fp32_kernel<Tiles, kVec4>; }
};

void matmul_v9(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v9", M, N, K);
  launch_tiled<Fp32Kernel>("matmul_tiles_fp32", C, A, B, M, N, K, args);
}

// ---- v10, v11: any layout on tensor cores ----------------------------------------------------------------
// v9's block tiles, warp tiles and tile loading; each warp tile is (WM/16) x (WN/16)
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
// TF32 (v10): m16n16k8, tiles of floats holding TF32 values (rows padded by 4 floats: ldm a
// multiple of 16 bytes). BF16 (v11): m16n16k16, tiles of __nv_bfloat16 (padded by 8: 16
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
    matmul_tiles_tensor_kernel(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
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
  static TiledKernel get() { return matmul_tiles_tensor_kernel<Tiles, Tf32Math, kVec4>; }
};
template <class Tiles, bool kVec4>
struct Bf16Kernel {
  static TiledKernel get() { return matmul_tiles_tensor_kernel<Tiles, Bf16Math, kVec4>; }
};

void matmul_v10(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v10", M, N, K);
  launch_tiled<Tf32Kernel>("matmul_tiles_tf32", C, A, B, M, N, K, args);
}

void matmul_v11(float* C, const float* A, const float* B, int M, int N, int K, MatmulArgs args) {
  check_sizes("v11", M, N, K);
  launch_tiled<Bf16Kernel>("matmul_tiles_bf16", C, A, B, M, N, K, args);
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

void add_matmul(Kernels& k) {
  // plain_only (Requirements' second field): v2-v8 compute C = A.B alone, lesson 09's product.
  k.matmul = {
      {1, "naive", "one thread per C element, threadIdx.x down a column: uncoalesced loads of A; every form",
        matmul_v1, {NNLAB_SM_MAXWELL}},
      {2, "coalesced", "threadIdx.x along a row of C: a warp reads B and writes C contiguously",
        matmul_v2, {NNLAB_SM_MAXWELL, true}},
      {3, "shared-memory tiles", "32x32 tiles of A and B in shared memory: 32x less global traffic",
        matmul_v3, {NNLAB_SM_MAXWELL, true}},
      {4, "1D register blocking", "64x64 tile, 8 outputs per thread down a column: 8 FMAs per shared load of B",
        matmul_v4, {NNLAB_SM_MAXWELL, true}},
      {5, "2D register blocking", "128x128 tile, 8x8 outputs per thread: an outer product of 8+8 registers",
        matmul_v5, {NNLAB_SM_MAXWELL, true}},
      {6, "float4", "16-byte loads and stores, A transposed in shared memory: 4x fewer memory instructions",
        matmul_v6, {NNLAB_SM_MAXWELL, true}},
      {7, "warp tiling", "each warp a 64x32 sub-tile: conflict-free float4 shared reads, BK=16",
        matmul_v7, {NNLAB_SM_MAXWELL, true}},
      {8, "tensor cores (TF32)", "wmma m16n16k8 TF32 fragments, fp32 accumulate: 10-bit mantissa inputs",
        matmul_v8, {NNLAB_SM_AMPERE, true}},
      {9, "any layout (fp32)",
        "v7's warp tiles with transposes made while staging in shared memory, bias and accumulate in the store, "
        "next tile prefetched, 64x64 tiles when 128x128 would idle multiprocessors",
        matmul_v9, {NNLAB_SM_MAXWELL}},
      {10, "any layout (TF32)",
        "v9's tiles on tensor cores: wmma m16n16k8 TF32 fragments, fp32 accumulate: 10-bit mantissas", matmul_v10, {NNLAB_SM_AMPERE}},
      {11, "any layout (BF16)",
        "v9's tiles on tensor cores: wmma m16n16k16 bf16 fragments, fp32 accumulate, 8-bit mantissas",
        matmul_v11, {NNLAB_SM_AMPERE}},
  };
  k.bias_backward = {
      {1, "naive", "one thread per column looping over all rows: OC threads in all",
        bias_backward_v1, {NNLAB_SM_MAXWELL}},
      {2, "column strips",
        "a block per 32 columns, rows split over 32 thread rows, coalesced, fixed-order shared-memory tree",
        bias_backward_v2, {NNLAB_SM_MAXWELL}},
  };
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
