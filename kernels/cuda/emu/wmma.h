// kernels/cuda/emu/wmma.h: the part of CUDA's <mma.h> (nvcuda::wmma, the warp-level
// tensor-core API) and <cuda_bf16.h> that the tensor-core kernels use (TF32: matmul v8 and
// v10; BF16: matmul v11, kernels/cuda/matmul.cu; int8: int8_gemm v3, kernels/cuda/int8.cu),
// for the emulator. Include after
// kernels/cuda/cuda.h, in emulated builds only; nvcc builds include <mma.h> and
// <cuda_bf16.h>.
//
//   fragment<matrix_a,    16,16,8,  precision::tf32, row_major | col_major>
//   fragment<matrix_b,    16,16,8,  precision::tf32, row_major | col_major>
//   fragment<accumulator, 16,16,8,  float>
//   fragment<matrix_a,    16,16,16, __nv_bfloat16,   row_major | col_major>
//   fragment<matrix_b,    16,16,16, __nv_bfloat16,   row_major | col_major>
//   fragment<accumulator, 16,16,16, float>
//   fragment<matrix_a,    16,16,16, signed char,     row_major | col_major>
//   fragment<matrix_b,    16,16,16, signed char,     row_major | col_major>
//   fragment<accumulator, 16,16,16, int>
//   fill_fragment, load_matrix_sync, mma_sync, store_matrix_sync (mem_row_major |
//   mem_col_major), __float_to_tf32
//   __nv_bfloat16, __float2bfloat16, __bfloat162float (global namespace, as in CUDA)
//
// The design, and why:
//   - Which lane holds which element of a fragment is unspecified in CUDA (code may only
//     loop over frag.x[0 .. num_elements) element-wise, e.g. to convert or scale), so any
//     layout is a legal one. Here every lane holds the whole tile, row-major, and computes
//     the whole product redundantly: the simplest layout there is, and a kernel that
//     relied on a particular layout would be wrong on a GPU anyway.
//   - load/store/mma/fill are collective on a GPU (every lane of the warp must call them,
//     converged, with the same arguments), so each one starts with __syncwarp(): called
//     from divergent code (some lanes returned, or took another branch) the emulator
//     reports a misuse or a deadlock naming the thread, as a GPU would hang or compute
//     garbage.
//   - TF32 is fp32 with the low 13 mantissa bits dropped (8-bit exponent, 10-bit
//     mantissa). __float_to_tf32 rounds to nearest, ties away from zero (PTX cvt.rna.tf32);
//     mma_sync reads only the top 19 bits of each input (truncation), as the hardware does
//     with inputs that were not converted, and accumulates in fp32.
//   - BF16 is the top 16 bits of an fp32 (8-bit exponent, 7 stored mantissa bits, so 8
//     significant bits). __float2bfloat16 rounds to nearest, ties to even (CUDA's
//     cvt.rn.bf16.f32), NaN stays a NaN. A product of two bf16 values has at most 16
//     significant bits, so it is exact in fp32: mma_sync multiplies exactly and sums in
//     fp32, in k order (the hardware's order and rounding inside one mma are its own:
//     results may differ from a GPU's in the low bits of the fp32 sum).
//   - int8 (compute capability 7.2): signed char inputs, int32 accumulator. Integer
//     arithmetic is exact, so here the emulator and a GPU must agree bit for bit: mma_sync
//     sums the 16 products into c in int32, wrapping on overflow as the hardware's adds do
//     (the satf argument, saturation, is not modelled: nothing here asks for it).
// Not modelled: any other shape or precision (half, uint8, int4, fp64), accumulator loads,
// speed.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#if !defined(NNLAB_EMULATED)
#error "kernels/cuda/emu/wmma.h is the emulator's; nvcc builds include <mma.h> and <cuda_bf16.h>"
#endif

// ---- BF16 (CUDA's <cuda_bf16.h>: global namespace) -------------------------------------------
// The bits of the top half of an fp32. An aggregate: convert with the two functions below
// (CUDA's type also converts implicitly; kernels here always say which rounding they mean).
struct __nv_bfloat16 {
  uint16_t bits;
};

// Round to nearest, ties to even: add 0x7FFF plus the lowest kept bit, then drop the low
// 16 bits. Exactly half of the dropped unit carries only when the kept part is odd. A
// carry out of the mantissa bumps the exponent (the right answer), up to inf; inf stays
// inf; a NaN becomes the quiet NaN 0x7FFF (adding could carry a NaN's payload into inf).
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) return {0x7FFF};
  u += 0x7FFFu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}

// Exact: the bf16 bits become the top half of an fp32.
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace nvcuda::wmma {

// ---- tags --------------------------------------------------------------------------------
struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
namespace precision {
struct tf32;
}
enum layout_t { mem_row_major, mem_col_major };

// ---- TF32 rounding -------------------------------------------------------------------------
namespace detail {
inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
constexpr uint32_t kTf32Mask = 0xFFFFE000u;  // sign, 8 exponent bits, top 10 mantissa bits
// What an mma reads of an fp32 input: the top 19 bits (the low 13 are ignored).
inline float truncate_tf32(float x) { return float_of(bits_of(x) & kTf32Mask); }
}  // namespace detail

// Rounds to the nearest TF32 value, ties away from zero (cvt.rna.tf32.f32): adding half of
// the dropped unit (bit 12) carries into the kept bits exactly when the dropped part is
// >= half. A carry out of the mantissa bumps the exponent (the right answer), up to inf.
// NaN and inf pass through.
inline float __float_to_tf32(float in) {
  const uint32_t u = detail::bits_of(in);
  if ((u & 0x7F800000u) == 0x7F800000u) return in;  // inf or NaN
  return detail::float_of((u + 0x1000u) & detail::kTf32Mask);
}

// ---- fragments: every lane holds the whole tile, row-major --------------------------------
template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment;

// T: the element type (CUDA's fragment::element_type): float for TF32 and the accumulator,
// __nv_bfloat16 for BF16.
template <int Rows, int Cols, class T = float>
struct frag_tile {
  using element_type = T;
  enum { rows = Rows, cols = Cols, num_elements = Rows * Cols };
  T x[Rows * Cols];
  T& at(int r, int c) { return x[r * Cols + c]; }
  const T& at(int r, int c) const { return x[r * Cols + c]; }
};

// TF32: A is M x K = 16 x 8, B is K x N = 8 x 16, the accumulator M x N = 16 x 16. The
// Layout of A and B says how load_matrix_sync reads memory, not how the fragment stores it.
template <class Layout>
class fragment<matrix_a, 16, 16, 8, precision::tf32, Layout> : public frag_tile<16, 8> {};
template <class Layout>
class fragment<matrix_b, 16, 16, 8, precision::tf32, Layout> : public frag_tile<8, 16> {};
template <>
class fragment<accumulator, 16, 16, 8, float, void> : public frag_tile<16, 16> {};

// BF16: A 16 x 16, B 16 x 16, accumulator 16 x 16 (a distinct type from TF32's, as in CUDA).
template <class Layout>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, Layout> : public frag_tile<16, 16, __nv_bfloat16> {};
template <class Layout>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, Layout> : public frag_tile<16, 16, __nv_bfloat16> {};
template <>
class fragment<accumulator, 16, 16, 16, float, void> : public frag_tile<16, 16> {};

// int8: A 16 x 16 and B 16 x 16 of signed char, the accumulator 16 x 16 of int (int8_t is
// signed char, so int8_t pointers load them).
template <class Layout>
class fragment<matrix_a, 16, 16, 16, signed char, Layout> : public frag_tile<16, 16, signed char> {};
template <class Layout>
class fragment<matrix_b, 16, 16, 16, signed char, Layout> : public frag_tile<16, 16, signed char> {};
template <>
class fragment<accumulator, 16, 16, 16, int, void> : public frag_tile<16, 16, int> {};

namespace detail {
template <class L>
constexpr bool is_row_major() {
  return std::is_same_v<L, row_major>;
}
// What load_matrix_sync reads for a fragment of precision T: TF32 fragments load floats.
template <class T>
struct storage {
  using type = T;
};
template <>
struct storage<precision::tf32> {
  using type = float;
};
// CUDA's rule for loads and stores: ldm a multiple of 16 bytes, the pointer 32-byte aligned
// (checked here, as on a GPU breaking it is silent garbage).
template <class S>
void check_ldm(const char* what, const S* p, unsigned ldm) {
  if ((ldm * sizeof(S)) % 16 != 0 || reinterpret_cast<uintptr_t>(p) % 32 != 0) {
    throw std::invalid_argument(std::string(what) + ": ldm must be a multiple of " + std::to_string(16 / sizeof(S)) +
                                " elements (16 bytes) and the pointer 32-byte aligned");
  }
}
// A warp-collective operation: every lane of the warp must call it, together.
inline void collective(const char* what) { ::cudaemu::syncwarp(0xffffffffu, what); }
}  // namespace detail

// ---- the collective operations -------------------------------------------------------------

// v has the fragment's element type (a float for TF32 and accumulators, an __nv_bfloat16 for
// BF16), as in CUDA.
template <class Use, int M, int N, int K, class T, class L>
void fill_fragment(fragment<Use, M, N, K, T, L>& f, const typename fragment<Use, M, N, K, T, L>::element_type& v) {
  detail::collective("wmma::fill_fragment");
  for (auto& e : f.x) e = v;
}

// Loads A or B: element (r, c) of the tile is p[r * ldm + c] when row_major, p[c * ldm + r]
// when col_major. ldm counts elements and must be a multiple of 16 bytes (4 floats, 8
// bf16s); p must be 32-byte aligned (CUDA's rule for both; checked here as on a GPU it is
// silent garbage).
template <class Use, int K, class T, class L>
void load_matrix_sync(fragment<Use, 16, 16, K, T, L>& f, const typename detail::storage<T>::type* p, unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>, "accumulator loads are not modelled");
  detail::collective("wmma::load_matrix_sync");
  detail::check_ldm("wmma::load_matrix_sync", p, ldm);
  for (int r = 0; r < f.rows; ++r) {
    for (int c = 0; c < f.cols; ++c) {
      const size_t at = detail::is_row_major<L>() ? static_cast<size_t>(r) * ldm + c : static_cast<size_t>(c) * ldm + r;
      f.at(r, c) = p[at];
    }
  }
}

// Stores the accumulator (float, or int for int8): element (r, c) to p[r * ldm + c]
// (mem_row_major) or p[c * ldm + r] (mem_col_major). Every lane writes the same values.
template <int K, class T>
void store_matrix_sync(T* p, const fragment<accumulator, 16, 16, K, T>& f, unsigned ldm, layout_t layout) {
  detail::collective("wmma::store_matrix_sync");
  detail::check_ldm("wmma::store_matrix_sync", p, ldm);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) {
      const size_t at = layout == mem_row_major ? static_cast<size_t>(r) * ldm + c : static_cast<size_t>(c) * ldm + r;
      p[at] = f.at(r, c);
    }
  }
}

// d = a . b + c: d (16,16) = a (16,8) . b (8,16) + c (16,16), products of TF32 inputs,
// summed in fp32. d may be c.
template <class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 8, float>& d, const fragment<matrix_a, 16, 16, 8, precision::tf32, LA>& a,
              const fragment<matrix_b, 16, 16, 8, precision::tf32, LB>& b,
              const fragment<accumulator, 16, 16, 8, float>& c) {
  detail::collective("wmma::mma_sync");
  fragment<accumulator, 16, 16, 8, float> out;
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      float sum = c.at(i, j);
      for (int k = 0; k < 8; ++k) {
        sum = std::fma(detail::truncate_tf32(a.at(i, k)), detail::truncate_tf32(b.at(k, j)), sum);
      }
      out.at(i, j) = sum;
    }
  }
  d = out;
}

// d = a . b + c: d (16,16) = a (16,16) . b (16,16) + c (16,16), BF16 inputs. Each product is
// exact in fp32 (8 x 8 significant bits), so the fma adds it to the fp32 sum unrounded.
template <class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA>& a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  detail::collective("wmma::mma_sync");
  fragment<accumulator, 16, 16, 16, float> out;
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      float sum = c.at(i, j);
      for (int k = 0; k < 16; ++k) sum = std::fma(__bfloat162float(a.at(i, k)), __bfloat162float(b.at(k, j)), sum);
      out.at(i, j) = sum;
    }
  }
  d = out;
}

// d = a . b + c: d (16,16) = a (16,16) . b (16,16) + c (16,16), signed 8-bit inputs, int32
// sums: exact (each product fits in 15 bits), wrapping like the hardware's 32-bit adds.
template <class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, int>& d, const fragment<matrix_a, 16, 16, 16, signed char, LA>& a,
              const fragment<matrix_b, 16, 16, 16, signed char, LB>& b, const fragment<accumulator, 16, 16, 16, int>& c) {
  detail::collective("wmma::mma_sync");
  fragment<accumulator, 16, 16, 16, int> out;
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      uint32_t sum = static_cast<uint32_t>(c.at(i, j));
      for (int k = 0; k < 16; ++k) sum += static_cast<uint32_t>(int{a.at(i, k)} * int{b.at(k, j)});
      out.at(i, j) = static_cast<int>(sum);
    }
  }
  d = out;
}

}  // namespace nvcuda::wmma
