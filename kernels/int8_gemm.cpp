// kernels/int8_gemm.cpp: the int8 products of kernels/int8_gemm.h, a ladder from plain loops
// to AVX-512 VNNI, each rung giving v1's int32s bit for bit (integers: no tolerance).
//
//   C (M, N) int32 = A (M, K) int8 . B (N, K) int8 ^T
//
// The plain loop every rung replaces:
//   for m, for n: C[m][n] = sum_k A[m][k] * B[n][k]
//
// What the hardware offers for int8 (and why each rung looks the way it does):
//   AVX2 vpmaddubsw   32 products u8 x s8 -> 16 int16 pair sums, SATURATING at int16. Our
//                     operands are both signed, so we feed |a| (u8) and b with a's sign
//                     (vpsignb): |a| * sign(b, a) = a * b, and a pair sum is at most
//                     2 * 128 * 127 = 32512 < 32767: it never saturates. vpsignb negates b,
//                     so b = -128 would wrap: B must stay in [-127, 127] (the quantiser's range).
//                     vpmaddwd with ones then widens the pairs into int32 sums of 4.
//   AVX-512 VNNI      vpdpbusd: 64 products u8 x s8, 4 at a time summed straight into 16
//                     int32 accumulators, no saturation, one instruction. The u8 side is A
//                     shifted by 128 (a ^ 0x80 = a + 128 in [0, 255]):
//                       sum (a + 128) b = sum a b + 128 sum b,
//                     so each output subtracts 128 * (row sum of B) once at the end.
//   NEON sdot         vdotq_s32: s8 x s8, 4 products into each of 4 int32 lanes: no trick.
//
// Versions (the table lists the rungs this build has; `int8_gemm` is the last):
//   v1 naive         plain loops, int32 sums: the reference.
//   v2 blocked       plain C++: a 4 x 4 tile of outputs in 16 int32 sums, each A and B row
//                    loaded once per tile instead of once per output (4x fewer loads), rows of
//                    tiles across OpenMP threads. Every machine runs it; the compiler
//                    vectorises the k loop as it can.
//   v3 avx2-maddubs  (x86 with AVX2) v2's tile at 2 x 4, 32 k per step with vpmaddubsw +
//                    vpmaddwd (the sign trick above); 8 ymm accumulators of int32, summed
//                    across lanes once per output.
//   v3 neon-sdot     (ARM with the dot-product extension, instead of the AVX2 rung) 16 k per
//                    vdotq_s32, one output at a time. NOT RUN on the machines this code was
//                    written on (x86 only): kept small so it is right by reading.
//   v4 avx512-vnni   (x86 with AVX-512 VNNI and BW) a packed, register-blocked micro-kernel:
//                    B packed once per call into panels of 32 columns with k in groups of 4
//                    (one zmm = 4 k x 16 columns, what vpdpbusd wants), A packed as u8
//                    (a + 128) rows; the micro-kernel holds an 8 x 32 block of C in 16 zmm
//                    accumulators for the whole K, each step broadcasting 4 bytes of one A
//                    row against two zmm of B: 16 vpdpbusd per 8 broadcasts + 2 loads.
//                    Packing and panels across OpenMP threads; the packed copies live in
//                    grow-only buffers of the calling thread (no allocation per call).
// Figures: `nnlab bench int8_gemm -s 1024 -t 2 1 --repeats 9` on the 2-core Zen 4 VM (AVX-512
// VNNI), medians, in a quiet minute (fp32 FMA peak 216 GFLOP/s on 2 threads, 117 on 1):
//   2 threads: v1 35, v2 95, v3 157, v4 617 GOP/s; sgemm (fp32, same run) 155 GFLOP/s:
//              v4 = 4.0x sgemm (five more runs of v4 and sgemm alone: 3.9-4.3x).
//   1 thread:  v1 35, v2 55, v3 114, v4 370 GOP/s; sgemm 93 GFLOP/s: v4 = 4.0x.
//   Ceilings: int8 vpdpbusd peak 469 GOP/s on 1 thread, 830-897 on 2; fp32 FMA 117 / 216-230
//   GFLOP/s: 4x, since a 512-bit vpdpbusd does 64 multiply-adds where an FMA does 16. v4
//   reaches ~75% of its roof, sgemm 72-80% of its own. With the second core busy (other
//   builds), 2-thread figures drop to ~1-thread ones for both (v4 126-204, sgemm 50-55).
//   v4's history: 134 GOP/s (1 thread) with _mm512_dpbusd_epi32 as GCC 12 compiles it (copies
//   and stack spills of the accumulators, see dpbusd below); ~200 once the epilogue stopped
//   indexing the accumulators at run time; 330-370 with the in-place inline-assembly vpdpbusd.
#include "kernels/int8_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <omp.h>

#if defined(__AVX2__) || (defined(__AVX512VNNI__) && defined(__AVX512BW__))
#include <immintrin.h>
#endif
#if defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>
#endif

#include "kernels/vnni.h"

namespace kernels {

namespace {
// Below this many multiply-adds a product is done by one thread (thread start-up costs more).
constexpr double kMinThreaded = 1 << 18;
bool threaded(int M, int N, int K) {
  return static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) >= kMinThreaded;
}
size_t at(int row, int ld) { return static_cast<size_t>(row) * static_cast<size_t>(ld); }
}  // namespace

// ---- v1: plain loops ------------------------------------------------------------------------
void int8_gemm_v1(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      int32_t s = 0;
      for (int k = 0; k < K; ++k)
        s += static_cast<int32_t>(A[at(m, K) + static_cast<size_t>(k)]) *
             static_cast<int32_t>(B[at(n, K) + static_cast<size_t>(k)]);
      C[at(m, N) + static_cast<size_t>(n)] = s;
    }
}

// ---- v2: a register tile in plain C++ ---------------------------------------------------------
namespace {

// C[m0 .. m0+RM) x [n0 .. n0+RN): RM * RN int32 sums over the whole K, each loaded A and B
// byte used RN (RM) times.
template <int RM, int RN>
void tile_portable(int32_t* C, const int8_t* A, const int8_t* B, int m0, int n0, int N, int K) {
  int32_t acc[RM][RN] = {};
  const int8_t* a[RM];
  const int8_t* b[RN];
  for (int i = 0; i < RM; ++i) a[i] = A + at(m0 + i, K);
  for (int j = 0; j < RN; ++j) b[j] = B + at(n0 + j, K);
  for (int k = 0; k < K; ++k)
    for (int i = 0; i < RM; ++i)
      for (int j = 0; j < RN; ++j) acc[i][j] += static_cast<int32_t>(a[i][k]) * static_cast<int32_t>(b[j][k]);
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) C[at(m0 + i, N) + static_cast<size_t>(n0 + j)] = acc[i][j];
}

// Runs tile<RM, RN> over C, the ragged edges with 1-row / 1-column tiles, the row blocks
// across threads (each output written by exactly one thread).
template <int RM, int RN, void (*Full)(int32_t*, const int8_t*, const int8_t*, int, int, int, int),
          void (*One)(int32_t*, const int8_t*, const int8_t*, int, int, int, int)>
void tiled(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  const int mblocks = (M + RM - 1) / RM;
#pragma omp parallel for schedule(static) if (threaded(M, N, K))
  for (int mb = 0; mb < mblocks; ++mb) {
    const int m0 = mb * RM;
    if (m0 + RM <= M) {
      int n0 = 0;
      for (; n0 + RN <= N; n0 += RN) Full(C, A, B, m0, n0, N, K);
      for (; n0 < N; ++n0)
        for (int m = m0; m < m0 + RM; ++m) One(C, A, B, m, n0, N, K);
    } else {
      for (int m = m0; m < M; ++m)
        for (int n = 0; n < N; ++n) One(C, A, B, m, n, N, K);
    }
  }
}

}  // namespace

void int8_gemm_v2(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  tiled<4, 4, tile_portable<4, 4>, tile_portable<1, 1>>(C, A, B, M, N, K);
}

// ---- v3 (x86): AVX2 vpmaddubsw with the sign trick -----------------------------------------
#if defined(__AVX2__)
namespace {

// 8 int32 lanes -> their sum.
int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));  // lanes 2,3 onto 0,1
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));  // lane 1 onto 0
  return _mm_cvtsi128_si32(s);
}

template <int RM, int RN>
void tile_avx2(int32_t* C, const int8_t* A, const int8_t* B, int m0, int n0, int N, int K) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[RM][RN];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm256_setzero_si256();
  const int8_t* a[RM];
  const int8_t* b[RN];
  for (int i = 0; i < RM; ++i) a[i] = A + at(m0 + i, K);
  for (int j = 0; j < RN; ++j) b[j] = B + at(n0 + j, K);
  int k = 0;
  for (; k + 32 <= K; k += 32) {
    __m256i va[RM], abs_a[RM];
    for (int i = 0; i < RM; ++i) {
      va[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i] + k));
      abs_a[i] = _mm256_abs_epi8(va[i]);  // |a| as u8: -128 -> 0x80 = 128, still right
    }
    for (int j = 0; j < RN; ++j) {
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[j] + k));
      for (int i = 0; i < RM; ++i) {
        // |a| * (b with a's sign) = a * b; pairs summed to int16 (<= 32512: no saturation),
        // then pairs of those to int32.
        const __m256i pairs = _mm256_maddubs_epi16(abs_a[i], _mm256_sign_epi8(vb, va[i]));
        acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(pairs, ones));
      }
    }
  }
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < RN; ++j) {
      int32_t s = hsum_epi32(acc[i][j]);
      for (int kk = k; kk < K; ++kk) s += static_cast<int32_t>(a[i][kk]) * static_cast<int32_t>(b[j][kk]);
      C[at(m0 + i, N) + static_cast<size_t>(n0 + j)] = s;
    }
}

}  // namespace

void int8_gemm_v3(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  // 2 x 4 tile: 8 accumulators + 2 |a| + 2 a + 1 b + ones = 14 of the 16 ymm registers.
  tiled<2, 4, tile_avx2<2, 4>, tile_avx2<1, 1>>(C, A, B, M, N, K);
}
#endif

// ---- v3 (ARM): NEON sdot -------------------------------------------------------------------------
// Not run where this was written (x86): one output at a time, 16 k per vdotq_s32.
#if defined(__ARM_FEATURE_DOTPROD)
void int8_gemm_neon(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
#pragma omp parallel for schedule(static) if (threaded(M, N, K))
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const int8_t* a = A + at(m, K);
      const int8_t* b = B + at(n, K);
      int32x4_t acc = vdupq_n_s32(0);
      int k = 0;
      for (; k + 16 <= K; k += 16) acc = vdotq_s32(acc, vld1q_s8(a + k), vld1q_s8(b + k));
      int32_t s = vaddvq_s32(acc);
      for (; k < K; ++k) s += static_cast<int32_t>(a[k]) * static_cast<int32_t>(b[k]);
      C[at(m, N) + static_cast<size_t>(n)] = s;
    }
}
#endif

// ---- v4: AVX-512 VNNI, packed panels, 8 x 32 micro-kernel ------------------------------------
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
namespace {

constexpr int kMR = 8;   // rows of A per micro-kernel (8 broadcasts per k-group)
constexpr int kNR = 32;  // columns of B per panel: two zmm of 16 int32 outputs
// 16 accumulators (8 x 2 zmm) + 2 B loads + 1 broadcast = 19 of the 32 zmm registers. Zen 4
// runs a 512-bit vpdpbusd as two 256-bit halves; 16 independent chains cover its latency.

// acc += dot4(a, b) in place: kernels/vnni.h's one line of inline assembly (GCC 12 compiles
// _mm512_dpbusd_epi32 into copies and stack spills of the accumulators; see there).
using detail::dpbusd;

// B (N, K) -> panels: panel p holds columns n = 32p .. 32p+31 as [K4][32][4] bytes
// (K4 = K rounded up to 4, /4): for each group of 4 k, the 4 bytes of each of 32 columns in
// turn, so two zmm loads give vpdpbusd 4 k x 16 columns each. Columns past N and k past K are
// 0. corr[j] = 128 * sum_k B[n][k] (0 past N): the +128 correction. One panel per call (the
// panels are packed in parallel).
void pack_b_panel(const int8_t* B, int N, int K, int K4, int p, int8_t* dst, int32_t* corr) {
  if (p * kNR + kNR > N || K % 4 != 0)  // the buffer is reused: zero the padding first
    std::memset(dst, 0, static_cast<size_t>(K4) * 4 * kNR);
  for (int j = 0; j < kNR; ++j) {
    const int n = p * kNR + j;
    if (n >= N) {
      corr[j] = 0;
      continue;
    }
    const int8_t* src = B + at(n, K);
    int32_t s = 0;
    for (int k = 0; k < K; ++k) s += src[k];
    corr[j] = 128 * s;
    int k = 0;
    for (; k + 4 <= K; k += 4)  // 4 bytes of column n for k-group k/4
      std::memcpy(dst + (static_cast<size_t>(k / 4) * kNR + static_cast<size_t>(j)) * 4, src + k, 4);
    for (; k < K; ++k) dst[(static_cast<size_t>(k / 4) * kNR + static_cast<size_t>(j)) * 4 + static_cast<size_t>(k % 4)] = src[k];
  }
}

// A (M, K) rows m0 .. m0+kMR -> u8 rows a + 128 of 4 * K4 bytes; rows past M are 128 (a = 0),
// bytes past K too (they meet B's zero padding anyway).
void pack_a_block(const int8_t* A, int M, int K, int K4, int m0, uint8_t* packed) {
  const size_t ld = static_cast<size_t>(K4) * 4;
  for (int m = m0; m < m0 + kMR; ++m) {
    uint8_t* dst = packed + static_cast<size_t>(m) * ld;
    int k = 0;
    if (m < M)
      for (; k < K; ++k) dst[k] = static_cast<uint8_t>(static_cast<uint8_t>(A[at(m, K) + static_cast<size_t>(k)]) ^ 0x80u);
    for (; k < K4 * 4; ++k) dst[k] = 0x80;
  }
}

// C rows m0 .. m0+rows (rows <= kMR), columns n0 .. n0+cols (cols <= kNR) of the product,
// from packed A rows (ld bytes each) and one packed B panel. The whole K in registers.
void micro_vnni(int32_t* C, int N, const uint8_t* a, size_t ld, const int8_t* panel, const int32_t* corr, int K4,
                int m0, int rows, int n0, int cols) {
  // The accumulators are indexed by constants only (loops of fixed trip count, unrolled), so
  // the compiler keeps all 16 in registers; an index known only at run time (the ragged
  // last rows) would push the array to the stack and the loop would store it every step.
  __m512i acc[kMR][2];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  for (int kq = 0; kq < K4; ++kq) {
    // (4 k, 16 columns) x 2: the panel's next 128 bytes
    const __m512i b0 = _mm512_loadu_si512(panel + static_cast<size_t>(kq) * 4 * kNR);
    const __m512i b1 = _mm512_loadu_si512(panel + static_cast<size_t>(kq) * 4 * kNR + 64);
    const uint8_t* ak = a + static_cast<size_t>(kq) * 4;
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      int32_t four;  // 4 bytes of row i, k = 4 kq .. 4 kq + 3, broadcast to all 16 lanes
      std::memcpy(&four, ak + static_cast<size_t>(i) * ld, 4);
      const __m512i va = _mm512_set1_epi32(four);
      dpbusd(acc[i][0], va, b0);
      dpbusd(acc[i][1], va, b1);
    }
  }
  // sum (a + 128) b - 128 sum b = sum a b, into a tile on the stack (constant indices), then
  // the rows and columns that exist into C.
  const __m512i corr0 = _mm512_loadu_si512(corr);
  const __m512i corr1 = _mm512_loadu_si512(corr + 16);
  alignas(64) int32_t tile[kMR][kNR];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    _mm512_store_si512(tile[i], _mm512_sub_epi32(acc[i][0], corr0));
    _mm512_store_si512(tile[i] + 16, _mm512_sub_epi32(acc[i][1], corr1));
  }
  for (int i = 0; i < rows; ++i)
    std::memcpy(C + at(m0 + i, N) + static_cast<size_t>(n0), tile[i], static_cast<size_t>(cols) * sizeof(int32_t));
}

}  // namespace

void int8_gemm_v4(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  if (M <= 0 || N <= 0) return;
  const int K4 = (K + 3) / 4;
  const int panels = (N + kNR - 1) / kNR;
  const int mblocks = (M + kMR - 1) / kMR;
  const size_t lda = static_cast<size_t>(K4) * 4;
  // Packed copies, B's once per call (a real layer would pack its weights once, at load
  // time). The buffers belong to the calling thread and only grow: a fresh 1 MiB allocation
  // per call costs its page faults and zero-filling every time (measured: ~1.5 ms of a 5 ms
  // 1024^3 product on 2 threads, when packing was also one thread's job).
  thread_local std::vector<int8_t> bp;
  thread_local std::vector<int32_t> corr;
  thread_local std::vector<uint8_t> ap;
  bp.resize(std::max(bp.size(), static_cast<size_t>(panels) * lda * kNR));
  corr.resize(std::max(corr.size(), static_cast<size_t>(panels) * kNR));
  ap.resize(std::max(ap.size(), static_cast<size_t>(mblocks) * kMR * lda));
  int8_t* bpd = bp.data();
  int32_t* corrd = corr.data();
  uint8_t* apd = ap.data();
  const bool par = threaded(M, N, K);
#pragma omp parallel if (par)
  {
    // Packing split as the products are below (static): a thread packs the panels it uses.
#pragma omp for schedule(static) nowait
    for (int p = 0; p < panels; ++p)
      pack_b_panel(B, N, K, K4, p, bpd + static_cast<size_t>(p) * lda * kNR, corrd + static_cast<size_t>(p) * kNR);
#pragma omp for schedule(static)  // its barrier: both packs done before any product
    for (int mb = 0; mb < mblocks; ++mb) pack_a_block(A, M, K, K4, mb * kMR, apd);
    // Each (panel, row block) writes its own outputs. Panels outermost: one thread's panel
    // (K * 32 bytes: 32 KiB at K = 1024) stays in L1/L2 while the row blocks stream past it.
#pragma omp for schedule(static) collapse(2)
    for (int p = 0; p < panels; ++p)
      for (int mb = 0; mb < mblocks; ++mb) {
        const int m0 = mb * kMR, n0 = p * kNR;
        micro_vnni(C, N, apd + static_cast<size_t>(m0) * lda, lda, bpd + static_cast<size_t>(p) * lda * kNR,
                   corrd + n0, K4, m0, std::min(kMR, M - m0), n0, std::min(kNR, N - n0));
      }
  }
}
#endif

// ---- the table ------------------------------------------------------------------------------------
const std::vector<Int8GemmVersion>& int8_gemm_versions() {
  static const std::vector<Int8GemmVersion> v = {
      {1, "naive", "plain loops, int32 sums: the reference", int8_gemm_v1},
      {2, "blocked", "plain C++ 4 x 4 register tile (each loaded row used 4 times), row blocks across threads",
       int8_gemm_v2},
#if defined(__AVX2__)
      {3, "avx2-maddubs", "2 x 4 tile, 32 k per vpmaddubsw + vpmaddwd (|a| times b with a's sign)", int8_gemm_v3},
#elif defined(__ARM_FEATURE_DOTPROD)
      {3, "neon-sdot", "16 k per vdotq_s32, one output at a time (untested on x86 machines)", int8_gemm_neon},
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
      {4, "avx512-vnni", "packed panels, 8 x 32 micro-kernel of vpdpbusd (a + 128, minus 128 sum b), threads",
       int8_gemm_v4},
#endif
  };
  return v;
}

void int8_gemm(int32_t* C, const int8_t* A, const int8_t* B, int M, int N, int K) {
  int8_gemm_versions().back().fn(C, A, B, M, N, K);
}

// ---- quantisation and the W8A8 linear layer ----------------------------------------------------------
void quantize_rows_int8(const float* x, int rows, int cols, int8_t* q, float* scales) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + at(r, cols);
    float amax = 0.0f;
    for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(xr[c]));
    const float s = amax / 127.0f;
    scales[r] = s;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    int8_t* qr = q + at(r, cols);
    for (int c = 0; c < cols; ++c) {
      const float v = std::nearbyint(xr[c] * inv);
      qr[c] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  }
}

size_t w8a8_scratch_bytes(int M, int N, int K) {
  const size_t m = static_cast<size_t>(M);
  return m * static_cast<size_t>(K) + 64 + m * sizeof(float) + 64 + m * static_cast<size_t>(N) * sizeof(int32_t);
}

void w8a8_linear(float* y, const float* x, const int8_t* Wq, const float* w_scales, const float* bias, int M,
                 int N, int K, void* scratch) {
  auto* base = static_cast<unsigned char*>(scratch);
  auto align64 = [](size_t n) { return (n + 63) / 64 * 64; };
  int8_t* xq = reinterpret_cast<int8_t*>(base);
  size_t off = align64(static_cast<size_t>(M) * K);
  float* sx = reinterpret_cast<float*>(base + off);
  off += align64(static_cast<size_t>(M) * sizeof(float));
  int32_t* acc = reinterpret_cast<int32_t*>(base + off);
  quantize_rows_int8(x, M, K, xq, sx);
  int8_gemm(acc, xq, Wq, M, N, K);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const size_t i = static_cast<size_t>(m) * N + n;
      y[i] = sx[m] * w_scales[n] * static_cast<float>(acc[i]) + (bias ? bias[n] : 0.0f);
    }
}

}  // namespace kernels
