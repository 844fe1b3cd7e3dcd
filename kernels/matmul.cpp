// kernels/matmul.cpp: the sgemm ladder, one idea per rung. What each rung changes and
// the bottleneck it attacks is in kernels/matmul.h (with the figures it reached); here,
// the code, in ladder order, each rung below the one it improves on.
//
// The plain loop every version computes (no transposes, for reading):
//   for i < M: for j < N: C[i][j] = alpha * sum_k A[i][k] * B[k][j] + beta * C[i][j]
#include "kernels/matmul.h"

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "kernels/simd.h"
#include "kernels/versions.h"

namespace kernels {

namespace {

// op(A)[i][k] and op(B)[k][j] read through the transposes.
inline float a_at(Trans ta, const float* A, int lda, int i, int k) {
  return ta == Trans::No ? A[static_cast<ptrdiff_t>(i) * lda + k]
                         : A[static_cast<ptrdiff_t>(k) * lda + i];
}
inline float b_at(Trans tb, const float* B, int ldb, int k, int j) {
  return tb == Trans::No ? B[static_cast<ptrdiff_t>(k) * ldb + j]
                         : B[static_cast<ptrdiff_t>(j) * ldb + k];
}

// C = beta * C, with beta = 0 meaning "overwrite" (BLAS semantics: NaN in C is not kept).
void scale_c(int M, int N, float beta, float* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<ptrdiff_t>(i) * ldc;
    for (int j = 0; j < N; ++j) {
      c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
  }
}

// op(B) as a (K, N) row-major matrix: B itself when not transposed, else a copy. The
// streaming rungs (v2, v3) need rows of op(B) to be unit-stride; O(K*N) copies buy
// O(M*N*K) streaming multiply-adds.
struct RowMajorB {
  const float* data;
  int ld;
  std::vector<float> copy;
};
void as_row_major(Trans tb, const float* B, int ldb, int K, int N, RowMajorB& out) {
  if (tb == Trans::No) {
    out.data = B;
    out.ld = ldb;
    return;
  }
  out.copy.resize(static_cast<size_t>(K) * static_cast<size_t>(N));
  for (int j = 0; j < N; ++j) {
    for (int k = 0; k < K; ++k) {
      out.copy[static_cast<size_t>(k) * N + j] = B[static_cast<ptrdiff_t>(j) * ldb + k];
    }
  }
  out.data = out.copy.data();
  out.ld = N;
}

}  // namespace

// ---- v1: naive i-j-k ----------------------------------------------------------------
void sgemm_v1(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) {
        sum += a_at(ta, A, lda, i, k) * b_at(tb, B, ldb, k, j);  // B walked down a column
      }
      float& c = C[static_cast<ptrdiff_t>(i) * ldc + j];
      c = alpha * sum + (beta == 0.0f ? 0.0f : beta * c);
    }
  }
}

// ---- v2: loop order i-k-j --------------------------------------------------------------
void sgemm_v2(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  RowMajorB b;
  as_row_major(tb, B, ldb, K, N, b);
  scale_c(M, N, beta, C, ldc);
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<ptrdiff_t>(i) * ldc;  // (N,) row i of C
    for (int k = 0; k < K; ++k) {
      const float a = alpha * a_at(ta, A, lda, i, k);              // op(A)[i][k]
      const float* brow = b.data + static_cast<ptrdiff_t>(k) * b.ld;  // (N,) row k of op(B)
      // C[i,:] += a * B[k,:]: an axpy, unit stride in both, no sum to reorder, so the
      // compiler vectorises it under strict IEEE rules.
      for (int j = 0; j < N; ++j) {
        c[j] += a * brow[j];
      }
    }
  }
}

// ---- v3: cache blocking --------------------------------------------------------------------
// v2 streams all of B (K x N floats) through the cache for every row i: at 1024^2 that is
// 4 MB per row, far more than L2, so every row re-reads B from L3 or memory. Blocking
// reuses a KB x NB block of B (128 KB: fits the 512 KB - 1 MB L2 of current x86 cores)
// for every row of C before moving on, and a row segment of C (NB floats = 1 KB) stays in
// L1 while KB multiply-adds land on it.
namespace {
constexpr int kV3BlockK = 128;  // KB
constexpr int kV3BlockN = 256;  // NB
}  // namespace

void sgemm_v3(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  RowMajorB b;
  as_row_major(tb, B, ldb, K, N, b);
  scale_c(M, N, beta, C, ldc);
  for (int j0 = 0; j0 < N; j0 += kV3BlockN) {
    const int nb = std::min(kV3BlockN, N - j0);
    for (int k0 = 0; k0 < K; k0 += kV3BlockK) {
      const int kb = std::min(kV3BlockK, K - k0);
      // The block B[k0:k0+kb, j0:j0+nb] (KB,NB) now serves every row of C.
      for (int i = 0; i < M; ++i) {
        float* c = C + static_cast<ptrdiff_t>(i) * ldc + j0;  // (NB,) in L1
        for (int k = k0; k < k0 + kb; ++k) {
          const float a = alpha * a_at(ta, A, lda, i, k);
          const float* brow = b.data + static_cast<ptrdiff_t>(k) * b.ld + j0;  // (NB,) in L2
          for (int j = 0; j < nb; ++j) {
            c[j] += a * brow[j];
          }
        }
      }
    }
  }
}

// ---- v4-v6: packed panels and a register-blocked micro-kernel ---------------------------
// v3 still does one load and one store of C for every multiply-add: the inner loop is
// limited by loads/stores, not by the FMA units. The fix (Goto & van de Geijn 2008,
// the design of BLIS and OpenBLAS) keeps an MR x NR tile of C in REGISTERS for a whole
// run over k, so each step loads MR floats of A and NR floats of B and does MR*NR FMAs.
// To make those loads unit-stride and cache-resident, A and B are first copied
// ("packed") into the order the micro-kernel reads them:
//
//   for jc in steps of NC:                      B block (KC, NC) -> L3
//     for pc in steps of KC:
//       pack op(B)[pc:+KC, jc:+NC] into panels of NR columns: Bp (NC/NR, KC, NR)
//       for ic in steps of MC:                  A block (MC, KC) -> L2
//         pack alpha*op(A)[ic:+MC, pc:+KC] into panels of MR rows: Ap (MC/MR, KC, MR)
//         for jr in steps of NR:                B micro-panel (KC, NR) -> L1
//           for ir in steps of MR:
//             C[ic+ir:+MR, jc+jr:+NR] (+)= Ap panel (KC, MR)^T . Bp panel (KC, NR)
//
// Packing also absorbs the transposes (every form packs to the same layout), alpha
// (folded into Ap), and ragged edges (panels are zero-padded to MR and NR).
namespace {

// The micro-kernel's tile: MR rows x NR columns, NR = 2 vectors. With AVX2 (8 lanes):
// 6 x 16 -> 12 accumulator registers + 2 for B + 1 for a broadcast of A = 15 of the 16 ymm
// registers. 12 independent FMA chains also cover the FMA latency x ports (4 x 2 = 8)
// that the ceilings' FMA loop showed is needed to reach peak.
constexpr int kMR = 6;
template <class V>
constexpr int kNR = 2 * V::lanes;

// Block sizes: Bp micro-panel KC x NR x 4 B = 16 KB (half of a 32 KB L1d, the other half
// streams Ap); Ap block MC x KC x 4 B = 120 KB (in L2); Bp block KC x NC x 4 B = 2 MB
// (in L3). MC is a multiple of MR and NC of NR.
// Each is overridable on its own for tuning experiments (-DNNLAB_GEMM_KC=384).
#ifndef NNLAB_GEMM_KC
#define NNLAB_GEMM_KC 256
#endif
#ifndef NNLAB_GEMM_MC
#define NNLAB_GEMM_MC 120
#endif
#ifndef NNLAB_GEMM_NC
#define NNLAB_GEMM_NC 2048
#endif
constexpr int kKC = NNLAB_GEMM_KC;
constexpr int kMC = NNLAB_GEMM_MC;
constexpr int kNC = NNLAB_GEMM_NC;

// 64-byte aligned, grow-only scratch: packing buffers are reused call after call
// (allocating 2 MB per call would cost page faults on every layer of every step).
struct Scratch {
  float* data = nullptr;
  size_t capacity = 0;
  float* get(size_t n) {
    if (n > capacity) {
      ::operator delete[](data, std::align_val_t(64));
      data = static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t(64)));
      capacity = n;
    }
    return data;
  }
  ~Scratch() { ::operator delete[](data, std::align_val_t(64)); }
};

// Ap (ceil(mc/MR), kc, MR): element (r, p) of panel q is alpha * op(A)[i0 + q*MR + r][p0 + p].
void pack_a(Trans ta, const float* A, int lda, int i0, int p0, int mc, int kc, float alpha, float* Ap) {
  for (int q = 0; q < mc; q += kMR) {
    const int mr = std::min(kMR, mc - q);
    float* panel = Ap + static_cast<ptrdiff_t>(q) * kc;  // (KC, MR)
    for (int p = 0; p < kc; ++p) {
      for (int r = 0; r < mr; ++r) panel[p * kMR + r] = alpha * a_at(ta, A, lda, i0 + q + r, p0 + p);
      for (int r = mr; r < kMR; ++r) panel[p * kMR + r] = 0.0f;  // pad the ragged edge
    }
  }
}

// Bp (ceil(nc/NR), kc, NR): element (p, c) of panel q is op(B)[p0 + p][j0 + q*NR + c].
template <int NR>
void pack_b_panel(Trans tb, const float* B, int ldb, int p0, int j0, int nr, int kc, float* panel) {
  for (int p = 0; p < kc; ++p) {
    for (int c = 0; c < nr; ++c) panel[p * NR + c] = b_at(tb, B, ldb, p0 + p, j0 + c);
    for (int c = nr; c < NR; ++c) panel[p * NR + c] = 0.0f;
  }
}

// The write-back shared by both micro-kernels: C tile (mr, nr) = tile + beta * C, where
// `tile` is the (MR, NR) result; only C's (mr, nr) corner is touched.
template <int NR>
void store_tile(const float* tile, float* C, int ldc, float beta, int mr, int nr) {
  for (int r = 0; r < mr; ++r) {
    float* c = C + static_cast<ptrdiff_t>(r) * ldc;
    for (int j = 0; j < nr; ++j) {
      c[j] = beta == 0.0f ? tile[r * NR + j] : tile[r * NR + j] + beta * c[j];
    }
  }
}

// v4's micro-kernel, plain C++: the MR x NR tile is a local array the compiler may keep
// in registers and may vectorise (the j loop is unit-stride over B). Whether it does is
// up to the compiler: lesson 03 measures what it made of it.
void micro_kernel_portable(int kc, const float* Ap, const float* Bp, float* C, int ldc, float beta,
                           int mr, int nr) {
  constexpr int NR = 16;
  float acc[kMR * NR] = {};  // (MR, NR): the tile of C
  for (int p = 0; p < kc; ++p) {
    const float* a = Ap + p * kMR;  // (MR,) column p of the A panel
    const float* b = Bp + p * NR;   // (NR,) row p of the B panel
    for (int r = 0; r < kMR; ++r) {
#pragma omp simd
      for (int j = 0; j < NR; ++j) {
        acc[r * NR + j] += a[r] * b[j];
      }
    }
  }
  store_tile<NR>(acc, C, ldc, beta, mr, nr);
}

// C tile (mr, nr) (+)= Ap panel^T (MR, KC) . Bp panel (KC, NR), accumulated in registers.
// `beta` is the caller's beta on the first k block and 1 after it (0: overwrite C).
template <class V>
void micro_kernel(int kc, const float* Ap, const float* Bp, float* C, int ldc, float beta, int mr, int nr) {
  using reg = typename V::reg;
  constexpr int W = V::lanes, NR = kNR<V>;
  reg acc[kMR][2];  // the MR x NR tile of C, in registers
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = V::zero();
    acc[r][1] = V::zero();
    // The C tile is needed only after the k loop: ask for its lines now, so the misses
    // (rows of C are ldc floats apart: a new page each, often) overlap the FMAs.
    simd::prefetch(C + static_cast<ptrdiff_t>(r) * ldc);
    simd::prefetch(C + static_cast<ptrdiff_t>(r) * ldc + NR - 1);
  }
#pragma GCC unroll 4
  for (int p = 0; p < kc; ++p) {
    const reg b0 = V::load(Bp + p * NR);      // B[p][0:W]
    const reg b1 = V::load(Bp + p * NR + W);  // B[p][W:2W]
    for (int r = 0; r < kMR; ++r) {
      const reg a = V::set1(Ap[p * kMR + r]);  // A[r][p], broadcast to every lane
      acc[r][0] = V::fma(a, b0, acc[r][0]);
      acc[r][1] = V::fma(a, b1, acc[r][1]);
    }
  }
  // Write back. A full tile goes straight to C; an edge tile through a small buffer so
  // nothing outside C's (mr, nr) corner is touched.
  if (mr == kMR && nr == NR) {
    for (int r = 0; r < kMR; ++r) {
      float* c = C + static_cast<ptrdiff_t>(r) * ldc;
      if (beta == 0.0f) {
        V::store(c, acc[r][0]);
        V::store(c + W, acc[r][1]);
      } else {
        const reg vb = V::set1(beta);
        V::store(c, V::fma(vb, V::load(c), acc[r][0]));
        V::store(c + W, V::fma(vb, V::load(c + W), acc[r][1]));
      }
    }
    return;
  }
  alignas(64) float tile[kMR * NR];
  for (int r = 0; r < kMR; ++r) {
    V::store(tile + r * NR, acc[r][0]);
    V::store(tile + r * NR + W, acc[r][1]);
  }
  store_tile<NR>(tile, C, ldc, beta, mr, nr);
}

// Portable<W> (no SIMD on this build, or v4 on purpose) runs the plain-loop micro-kernel.
template <class V>
constexpr bool kIsPortable = V::portable;

// The five loops around the micro-kernel. With `threaded`, they all run inside one OpenMP
// parallel region: the team packs each B block together, then every thread packs and
// multiplies its own band of rows of A and C (sgemm_v6 below says why rows). Without it,
// the same code runs on one thread (the `omp for` and `omp barrier` become no-ops).
template <class V>
void gemm_packed(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc, bool threaded) {
  constexpr int NR = kNR<V>;
  static_assert(!kIsPortable<V> || NR == 16, "micro_kernel_portable is 6 x 16");
  static_assert(kMC % kMR == 0 && kNC % NR == 0, "blocks must hold whole panels");
  static thread_local Scratch b_scratch;  // the caller's: shared by the team below
  float* Bp = b_scratch.get(static_cast<size_t>(kKC) * kNC);
  const int team = threaded ? omp_get_max_threads() : 1;

#pragma omp parallel num_threads(team) if (team > 1)
  {
    static thread_local Scratch a_scratch;  // each thread's own Ap block
    float* Ap = a_scratch.get(static_cast<size_t>(kMC) * kKC);
    for (int jc = 0; jc < N; jc += kNC) {
      const int nc = std::min(kNC, N - jc);
      for (int pc = 0; pc < K; pc += kKC) {
        const int kc = std::min(kKC, K - pc);
        const float beta_here = pc == 0 ? beta : 1.0f;  // later k blocks add to C
        // Pack B: panels split across threads; the implicit barrier at the end of the
        // `omp for` makes the whole Bp visible before anyone reads it.
#pragma omp for schedule(static)
        for (int jr = 0; jr < nc; jr += NR) {
          pack_b_panel<NR>(tb, B, ldb, pc, jc + jr, std::min(NR, nc - jr), kc,
                           Bp + static_cast<ptrdiff_t>(jr) * kc);
        }
        // Split the rows of C: thread t takes a contiguous band of MR-row panels, and
        // walks it in MC-row blocks. Each thread packs only its own A (no sharing, no
        // barrier) and every thread reads all of Bp (in L3, shared).
        const int panels = (M + kMR - 1) / kMR;
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int first = panels * t / nt * kMR, last = std::min(M, panels * (t + 1) / nt * kMR);
        for (int ic = first; ic < last; ic += kMC) {
          const int mc = std::min(kMC, last - ic);
          pack_a(ta, A, lda, ic, pc, mc, kc, alpha, Ap);
          for (int jr = 0; jr < nc; jr += NR) {
            const int nr = std::min(NR, nc - jr);
            const float* bpanel = Bp + static_cast<ptrdiff_t>(jr) * kc;  // (KC, NR) in L1
            for (int ir = 0; ir < mc; ir += kMR) {
              const int mr = std::min(kMR, mc - ir);
              float* c = C + static_cast<ptrdiff_t>(ic + ir) * ldc + jc + jr;
              const float* apanel = Ap + static_cast<ptrdiff_t>(ir) * kc;  // (KC, MR) in L2
              if constexpr (kIsPortable<V>) {
                micro_kernel_portable(kc, apanel, bpanel, c, ldc, beta_here, mr, nr);
              } else {
                micro_kernel<V>(kc, apanel, bpanel, c, ldc, beta_here, mr, nr);
              }
            }
          }
        }
        // Nobody may repack Bp for the next k block while another thread still reads it.
#pragma omp barrier
      }
    }
  }
}

// Waking threads costs microseconds: below this many multiply-adds, one thread wins.
constexpr double kMinThreadedWork = 64.0 * 64.0 * 64.0;

}  // namespace

// ---- v4: packed panels + register-blocked micro-kernel, portable C++ -------------------
void sgemm_v4(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  gemm_packed<simd::Portable<8>>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, false);
}

// ---- v5: the same micro-kernel in this CPU's SIMD intrinsics ---------------------------
void sgemm_v5(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  gemm_packed<simd::Native>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, false);
}

// ---- v6: v5 on every core (OpenMP) -------------------------------------------------------
// Which loop to split: the rows of C (the ic/ir loops). Each thread then packs only its
// own rows of A and writes only its own rows of C: no two threads ever write the same
// cache line of C, and the only shared data, Bp, is read-only between barriers.
// Splitting the k loop instead would make threads add into the same C (a reduction).
void sgemm_v6(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  const bool threaded = static_cast<double>(M) * N * K > kMinThreadedWork && M >= 2 * kMR;
  gemm_packed<simd::Native>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threaded);
}

// ---- v7: A read in place, a taller tile, B packed with whole-vector copies ---------------
// At the GPT step's shapes (768-row activations, N = 128-512) v6 loses ~30% of the FMA
// peak, and most of it is packing, not multiplying: packing copies each of the M*K
// elements of A one float at a time (index arithmetic and a transpose test per float),
// ~1 ns each, and with N = 128 every packed element of A then feeds only N = 128
// multiply-adds (4 micro-panels of B). 768x128x384: 295K floats of A packed (~0.3 ms)
// for 0.65 ms of FMAs at peak.
//
// v7 makes three changes, each of which keeps every C element's arithmetic exactly v6's
// (the same products, added in the same k order, the same write-back), so v7 and v6
// agree bit for bit whenever alpha = 1 (every caller in nn/ and gpt/):
//   1. A is never packed. The micro-kernel broadcasts op(A)[i][k] straight from the
//      caller's matrix: with A not transposed it reads MR row streams (unit stride in k),
//      with A^T one row of MR adjacent floats per k. Both are cache-friendly: MR streams
//      are well within what the prefetchers track, and an MC x KC block of A stays in L2
//      for the N/NR micro-panels of B that reuse it. alpha is applied at the write-back
//      (skipped when 1). A ragged last row panel (mr < MR) is copied into a zero-padded
//      (KC, MR) panel, so no row outside A is ever read.
//   2. On AVX-512 (32 registers) the tile is 12 x 32: 24 accumulators + 2 B vectors + 1
//      broadcast = 27 registers, so each B load feeds 12 FMAs instead of 6 and each
//      broadcast 2. (AVX2 has 16 registers: 6 x 16 stays; NEON and portable too.)
//   3. B panels are packed with whole-vector copies when B is not transposed (a row of
//      a panel is NR contiguous floats), and column by column (contiguous reads) when it is.
namespace {

// The tile's rows per form of A. 12 (AVX-512, A^T): op(A)'s 12 values for one k are 12
// adjacent floats. With A not transposed they come from 12 rows lda apart, and at lda = 1024
// (4 KB) 12 streams map to the same L1 set, more than its 8 ways: 12 x 32 then ran at 87
// GFLOP/s at 1024^3 against 98 for 6 x 32, so row-major A keeps 6 rows.
template <class V>
constexpr int kMR7T = (!V::portable && V::lanes == 16) ? 12 : kMR;  // op(A) = A^T
template <class V>
constexpr int kMR7N = kMR;                                           // op(A) = A

// The ragged last row panel, (kc, MR): edge[p * MR + r] = op(A)[i0 + r][p0 + p], zero for r >= mr.
template <int MR>
void pack_a_edge(Trans ta, const float* A, int lda, int i0, int p0, int mr, int kc, float* edge) {
  for (int p = 0; p < kc; ++p) {
    for (int r = 0; r < MR; ++r) edge[p * MR + r] = r < mr ? a_at(ta, A, lda, i0 + r, p0 + p) : 0.0f;
  }
}

// Bp panel (kc, NR) from op(B)[p0:+kc, j0:+nr], zero-padded to NR columns.
template <class V>
void pack_b_panel_v7(Trans tb, const float* B, int ldb, int p0, int j0, int nr, int kc, float* panel) {
  constexpr int W = V::lanes, NR = kNR<V>;
  if (nr != NR) {
    pack_b_panel<NR>(tb, B, ldb, p0, j0, nr, kc, panel);
    return;
  }
  if (tb == Trans::No) {
    for (int p = 0; p < kc; ++p) {
      const float* row = B + static_cast<ptrdiff_t>(p0 + p) * ldb + j0;  // (NR,) of row p0+p
      V::store(panel + p * NR, V::load(row));
      V::store(panel + p * NR + W, V::load(row + W));
    }
    return;
  }
  // op(B) = B^T: column c of the panel is row j0+c of B, contiguous in k.
  for (int c = 0; c < NR; ++c) {
    const float* col = B + static_cast<ptrdiff_t>(j0 + c) * ldb + p0;  // (kc,)
    for (int p = 0; p < kc; ++p) panel[p * NR + c] = col[p];
  }
}

// C tile (mr, nr) = alpha * op(A)[MR rows, kc] . Bp panel (kc, NR) + beta * C, + bias[0..nr)
// on every row when bias is not null (sgemm_bias's epilogue: the caller passes it with beta =
// 0, on the first k block only; bias + product in one rounding, no pass of its own).
// kRowMajorA: op(A)[r][p] = A[r * sa + p] (A not transposed, sa = lda); otherwise
// op(A)[r][p] = A[p * sa + r] (A^T, sa = lda, or a packed edge panel with sa = MR).
template <class V, int MR, bool kRowMajorA>
void micro_kernel_v7(int kc, const float* A, ptrdiff_t sa, const float* Bp, float* C, int ldc, float alpha,
                     float beta, int mr, int nr, const float* bias = nullptr) {
  using reg = typename V::reg;
  constexpr int W = V::lanes, NR = kNR<V>;
  reg acc[MR][2];  // the MR x NR tile of C, in registers
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = V::zero();
    acc[r][1] = V::zero();
  }
  for (int r = 0; r < mr; ++r) {
    simd::prefetch(C + static_cast<ptrdiff_t>(r) * ldc);
    simd::prefetch(C + static_cast<ptrdiff_t>(r) * ldc + NR - 1);
  }
#pragma GCC unroll 4
  for (int p = 0; p < kc; ++p) {
    const reg b0 = V::load(Bp + p * NR);      // B[p][0:W]
    const reg b1 = V::load(Bp + p * NR + W);  // B[p][W:2W]
    for (int r = 0; r < MR; ++r) {
      const float a_rp = kRowMajorA ? A[r * sa + p] : A[p * sa + r];  // op(A)[r][p]
      const reg a = V::set1(a_rp);
      acc[r][0] = V::fma(a, b0, acc[r][0]);
      acc[r][1] = V::fma(a, b1, acc[r][1]);
    }
  }
  if (alpha != 1.0f) {
    const reg va = V::set1(alpha);
    for (int r = 0; r < MR; ++r) {
      acc[r][0] = V::mul(va, acc[r][0]);
      acc[r][1] = V::mul(va, acc[r][1]);
    }
  }
  if (bias != nullptr) {  // b + sum: the same single rounding as beta = 1 over a C filled with b
    reg b0, b1;
    if (nr == NR) {
      b0 = V::load(bias);
      b1 = V::load(bias + W);
    } else {
      alignas(64) float row[NR] = {};
      std::copy(bias, bias + nr, row);
      b0 = V::load(row);
      b1 = V::load(row + W);
    }
    for (int r = 0; r < MR; ++r) {
      acc[r][0] = V::add(acc[r][0], b0);
      acc[r][1] = V::add(acc[r][1], b1);
    }
  }
  if (mr == MR && nr == NR) {
    for (int r = 0; r < MR; ++r) {
      float* c = C + static_cast<ptrdiff_t>(r) * ldc;
      if (beta == 0.0f) {
        V::store(c, acc[r][0]);
        V::store(c + W, acc[r][1]);
      } else {
        const reg vb = V::set1(beta);
        V::store(c, V::fma(vb, V::load(c), acc[r][0]));
        V::store(c + W, V::fma(vb, V::load(c + W), acc[r][1]));
      }
    }
    return;
  }
  alignas(64) float tile[MR * NR];
  for (int r = 0; r < MR; ++r) {
    V::store(tile + r * NR, acc[r][0]);
    V::store(tile + r * NR + W, acc[r][1]);
  }
  store_tile<NR>(tile, C, ldc, beta, mr, nr);
}

// v6's loops without pack_a: the team packs each B block together, then each thread runs
// its band of MR-row panels over it, in MC-row blocks (the A block then stays in L2 for
// every micro-panel of B).
template <class V, int MR>
void gemm_v7(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
             int ldb, float beta, float* C, int ldc, bool threaded, const float* bias = nullptr) {
  constexpr int NR = kNR<V>;
  constexpr int MC = kMC / MR * MR;  // whole panels per block
  static_assert(kNC % NR == 0 && MC > 0, "blocks must hold whole panels");
  static thread_local Scratch b_scratch;  // the caller's: shared by the team below
  float* Bp = b_scratch.get(static_cast<size_t>(kKC) * kNC);
  const int team = threaded ? omp_get_max_threads() : 1;

#pragma omp parallel num_threads(team) if (team > 1)
  {
    static thread_local Scratch edge_scratch;  // each thread's padded ragged panel
    float* edge = edge_scratch.get(static_cast<size_t>(kKC) * MR);
    for (int jc = 0; jc < N; jc += kNC) {
      const int nc = std::min(kNC, N - jc);
      for (int pc = 0; pc < K; pc += kKC) {
        const int kc = std::min(kKC, K - pc);
        const float beta_here = pc == 0 ? beta : 1.0f;  // later k blocks add to C
        const bool with_bias = bias != nullptr && pc == 0;  // the bias: on the first k block
#pragma omp for schedule(static)
        for (int jr = 0; jr < nc; jr += NR) {
          pack_b_panel_v7<V>(tb, B, ldb, pc, jc + jr, std::min(NR, nc - jr), kc,
                             Bp + static_cast<ptrdiff_t>(jr) * kc);
        }
        const int panels = (M + MR - 1) / MR;
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int first = panels * t / nt * MR, last = std::min(M, panels * (t + 1) / nt * MR);
        for (int ic = first; ic < last; ic += MC) {
          const int mc = std::min(MC, last - ic);
          // A ragged last panel (only ever the matrix's last rows): zero-padded copy,
          // alpha left for the write-back like the in-place panels.
          const int full = mc / MR * MR;
          if (full < mc) pack_a_edge<MR>(ta, A, lda, ic + full, pc, mc - full, kc, edge);
          for (int jr = 0; jr < nc; jr += NR) {
            const int nr = std::min(NR, nc - jr);
            const float* bpanel = Bp + static_cast<ptrdiff_t>(jr) * kc;  // (KC, NR) in L1
            const float* bcols = with_bias ? bias + jc + jr : nullptr;  // this column panel's bias
            for (int ir = 0; ir < full; ir += MR) {
              float* c = C + static_cast<ptrdiff_t>(ic + ir) * ldc + jc + jr;
              if (ta == Trans::No) {
                const float* a = A + static_cast<ptrdiff_t>(ic + ir) * lda + pc;  // (MR, KC), rows lda apart
                micro_kernel_v7<V, MR, true>(kc, a, lda, bpanel, c, ldc, alpha, beta_here, MR, nr, bcols);
              } else {
                const float* a = A + static_cast<ptrdiff_t>(pc) * lda + ic + ir;  // (KC, MR), rows lda apart
                micro_kernel_v7<V, MR, false>(kc, a, lda, bpanel, c, ldc, alpha, beta_here, MR, nr, bcols);
              }
            }
            if (full < mc) {
              float* c = C + static_cast<ptrdiff_t>(ic + full) * ldc + jc + jr;
              micro_kernel_v7<V, MR, false>(kc, edge, MR, bpanel, c, ldc, alpha, beta_here, mc - full, nr, bcols);
            }
          }
        }
#pragma omp barrier
      }
    }
  }
}

}  // namespace

namespace {
void gemm_v7_native(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
                    const float* B, int ldb, float beta, float* C, int ldc, bool threaded, const float* bias = nullptr) {
  using V = simd::Native;
  if (ta == Trans::No) {
    gemm_v7<V, kMR7N<V>>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threaded, bias);
  } else {
    gemm_v7<V, kMR7T<V>>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threaded, bias);
  }
}
}  // namespace

void sgemm_v7(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  const bool threaded = static_cast<double>(M) * N * K > kMinThreadedWork && M >= 2 * kMR;
  gemm_v7_native(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threaded);
}

// ---- dispatch -----------------------------------------------------------------------------
void sgemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) {
    return;
  }
  if (K == 0) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  sgemm_v7(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm_serial(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) {
    return;
  }
  if (K == 0) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  gemm_v7_native(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, false);
}

void sgemm_bias(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, const float* bias, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // C = bias on every row
    for (int i = 0; i < M; ++i) std::copy(bias, bias + N, C + static_cast<ptrdiff_t>(i) * ldc);
    return;
  }
  const bool threaded = static_cast<double>(M) * N * K > kMinThreadedWork && M >= 2 * kMR;
  gemm_v7_native(ta, tb, M, N, K, alpha, A, lda, B, ldb, 0.0f, C, ldc, threaded, bias);
}

const std::vector<SgemmVersion>& sgemm_versions() {
  static const std::vector<SgemmVersion> versions = {
      {1, "naive", "i-j-k triple loop, one dot product per output", &sgemm_v1},
      {2, "loop-order", "i-k-j: unit-stride inner loop over rows of B and C", &sgemm_v2},
      {3, "cache-blocked", "v2 over KB x NB blocks of B that stay in L2", &sgemm_v3},
      {4, "packed-portable", "packed panels + 6x16 register tile, portable C++", &sgemm_v4},
      {5, "packed-simd", "the same micro-kernel in SIMD intrinsics", &sgemm_v5},
      {6, "threads", "v5 with rows of C split across OpenMP threads", &sgemm_v6},
      {7, "direct-a", "v6 reading A in place (no A packing), 12x32 tile on AVX-512", &sgemm_v7},
  };
  return versions;
}

const SgemmVersion& sgemm_version(const std::string& number_or_name) {
  return find_version(sgemm_versions(), number_or_name, "sgemm");
}

}  // namespace kernels
