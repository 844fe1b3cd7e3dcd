// kernels/simd.h: the one small SIMD abstraction every CPU kernel goes through.
//
// A SIMD register holds several floats ("lanes") and one instruction works on all of them:
// one FMA instruction on an 8-lane register does 8 multiply-adds. Which registers exist
// depends on the CPU, so this file picks one at COMPILE time from the flags the build
// passes (-march=native by default, see NNLAB_NATIVE in the top CMakeLists.txt):
//
//   Native = Avx512   16 lanes  x86 with AVX-512F                (__AVX512F__)
//          = Avx2     8 lanes   x86 with AVX2 and FMA            (__AVX2__ && __FMA__)
//          = Neon     4 lanes   ARM (aarch64 always has it)      (__ARM_NEON)
//          = Portable<8>        anything else: plain C++ loops over 8 floats
//
// Portable<W> is always available, on every machine, and every kernel that uses Native can
// also be instantiated with it: that is the scalar fallback, and the tests run it here too,
// so it cannot rot. It is not "scalar" in the machine-code sense: the compiler's
// auto-vectoriser is free to turn its loops into SIMD, and lesson 03 measures how far that
// gets compared with the hand-written intrinsics.
//
// Each type has the same static functions, so a kernel written as a template over V reads
// the same for all of them:
//   V::zero(), V::set1(x), V::load(p), V::store(p, a)   (unaligned: no alignment assumed)
//   V::add(a, b), V::sub(a, b), V::mul(a, b), V::div(a, b), V::min(a, b), V::max(a, b)
//   V::fma(a, b, c) = a * b + c, rounded once on the FMA targets (twice for Portable)
//   V::abs(a), V::round(a)                              round: to nearest, ties to even
//   V::sqrt(a)                                          correctly rounded, as std::sqrt
//   V::exp2i(k)      2^k for integral k in [-126, 127], written straight into the exponent
//                    bits (k = -127 gives 0); the scaling step of exp (kernels/elementwise.h)
//   V::sum(a), V::hmax(a)                               horizontal reductions to a float
// and the loads of packed weights (kernels/decode.cpp dequantises with them), W lanes each:
//   V::load_bf16(p)  W bf16 -> float: a bf16 is the top half of an fp32 (exact)
//   V::load_i8(p)    W int8 -> float (exact)
//   V::load_i4(p, s) W 4-bit codes from W/2 bytes (lane 2j: byte j's low nibble, lane 2j+1:
//                    its high nibble) -> (code - 8) * s
// plus, where a target has them, Avx2::permute(v, idx) (lane l = v[idx[l]]), Avx2::load4(p)
// (4 floats, then 4 zeros) and Avx512::from_halves(lo, hi) (two Avx2 registers as one).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
// GCC 12 warns "__Y is (may be) used uninitialized" inside its own AVX-512 intrinsics
// (the _mm512_undefined_ps idiom: a known false positive, gone in GCC 13); silenced for
// this header's text only, which works where simd.h is the first to include it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace kernels::simd {

// ---- Portable<W>: W floats in an array, plain loops -------------------------------
template <int W>
struct Portable {
  static constexpr int lanes = W;
  static constexpr const char* name = "portable C++";
  static constexpr bool portable = true;  // no intrinsics: kernels may pick plain loops
  struct reg {
    float v[W];
  };
  static reg zero() { return set1(0.0f); }
  static reg set1(float x) {
    reg r;
    for (int i = 0; i < W; ++i) r.v[i] = x;
    return r;
  }
  static reg load(const float* p) {
    reg r;
    for (int i = 0; i < W; ++i) r.v[i] = p[i];
    return r;
  }
  static void store(float* p, reg a) {
    for (int i = 0; i < W; ++i) p[i] = a.v[i];
  }
  static reg add(reg a, reg b) {
    for (int i = 0; i < W; ++i) a.v[i] += b.v[i];
    return a;
  }
  static reg sub(reg a, reg b) {
    for (int i = 0; i < W; ++i) a.v[i] -= b.v[i];
    return a;
  }
  static reg mul(reg a, reg b) {
    for (int i = 0; i < W; ++i) a.v[i] *= b.v[i];
    return a;
  }
  static reg div(reg a, reg b) {
    for (int i = 0; i < W; ++i) a.v[i] /= b.v[i];
    return a;
  }
  static reg min(reg a, reg b) {
    for (int i = 0; i < W; ++i) a.v[i] = std::min(a.v[i], b.v[i]);
    return a;
  }
  static reg max(reg a, reg b) {
    for (int i = 0; i < W; ++i) a.v[i] = std::max(a.v[i], b.v[i]);
    return a;
  }
  static reg fma(reg a, reg b, reg c) {
    for (int i = 0; i < W; ++i) c.v[i] += a.v[i] * b.v[i];
    return c;
  }
  static reg abs(reg a) {
    for (int i = 0; i < W; ++i) a.v[i] = std::fabs(a.v[i]);
    return a;
  }
  static reg round(reg a) {
    for (int i = 0; i < W; ++i) a.v[i] = std::nearbyint(a.v[i]);  // default mode: ties to even
    return a;
  }
  static reg sqrt(reg a) {
    for (int i = 0; i < W; ++i) a.v[i] = std::sqrt(a.v[i]);
    return a;
  }
  static reg exp2i(reg k) {
    // The float 2^k has sign 0, exponent field k + 127, mantissa 0.
    for (int i = 0; i < W; ++i) {
      const auto biased = static_cast<uint32_t>(static_cast<int32_t>(k.v[i]) + 127);
      k.v[i] = std::bit_cast<float>(biased << 23);
    }
    return k;
  }
  static float sum(reg a) {
    float s = 0.0f;
    for (int i = 0; i < W; ++i) s += a.v[i];
    return s;
  }
  static float hmax(reg a) {
    float m = a.v[0];
    for (int i = 1; i < W; ++i) m = std::max(m, a.v[i]);
    return m;
  }
  static reg load_bf16(const uint16_t* p) {
    reg r;
    for (int i = 0; i < W; ++i) r.v[i] = std::bit_cast<float>(static_cast<uint32_t>(p[i]) << 16);
    return r;
  }
  static reg load_i8(const int8_t* p) {
    reg r;
    for (int i = 0; i < W; ++i) r.v[i] = static_cast<float>(p[i]);
    return r;
  }
  static reg load_i4(const uint8_t* p, float scale) {
    reg r;
    for (int i = 0; i < W; ++i) {
      const int q = ((i & 1) ? (p[i / 2] >> 4) : (p[i / 2] & 0xF)) - 8;
      r.v[i] = scale * static_cast<float>(q);
    }
    return r;
  }
};

// ---- AVX-512: 16 lanes, 32 zmm registers ------------------------------------------
#if defined(__AVX512F__)
struct Avx512 {
  static constexpr int lanes = 16;
  static constexpr const char* name = "AVX-512F";
  static constexpr bool portable = false;
  using reg = __m512;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg a) { _mm512_storeu_ps(p, a); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm512_div_ps(a, b); }
  static reg min(reg a, reg b) { return _mm512_min_ps(a, b); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg abs(reg a) { return _mm512_abs_ps(a); }
  static reg round(reg a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static reg sqrt(reg a) { return _mm512_sqrt_ps(a); }
  static reg exp2i(reg k) {
    const __m512i biased = _mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(biased, 23));
  }
  static float sum(reg a) { return _mm512_reduce_add_ps(a); }
  static float hmax(reg a) { return _mm512_reduce_max_ps(a); }
  // lanes 0..7 from lo, 8..15 from hi (the packed-weight loads are built from two AVX2 halves)
  static reg from_halves(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
  }
};
#endif

// ---- AVX2 + FMA: 8 lanes, 16 ymm registers ----------------------------------------
#if defined(__AVX2__) && defined(__FMA__)
struct Avx2 {
  static constexpr int lanes = 8;
  static constexpr const char* name = "AVX2+FMA";
  static constexpr bool portable = false;
  using reg = __m256;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg a) { _mm256_storeu_ps(p, a); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm256_div_ps(a, b); }
  static reg min(reg a, reg b) { return _mm256_min_ps(a, b); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg abs(reg a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }  // clear the sign bit
  static reg round(reg a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static reg sqrt(reg a) { return _mm256_sqrt_ps(a); }
  static reg exp2i(reg k) {
    const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
  }
  static float sum(reg a) {
    // (8) -> (4): add the high half onto the low half, then (4) -> (1) with shuffles.
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
    return _mm_cvtss_f32(s);
  }
  static float hmax(reg a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 0x55));
    return _mm_cvtss_f32(m);
  }
  // bf16: widening u16 -> u32 and shifting left by 16 IS the conversion (no rounding).
  static reg load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));  // 8 x u16
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // int8: sign-extend 8 x i8 to i32, convert to float.
  static reg load_i8(const int8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));  // 8 x i8
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
  // int4: doubling every byte (b0 b0 b1 b1 ...) and widening to 8 x u32 puts byte j in lanes
  // 2j and 2j+1; shifting the odd lanes right by 4 and masking leaves each lane its nibble.
  static reg load_i4(const uint8_t* p, float scale) {
    uint32_t four = 0;
    std::memcpy(&four, p, 4);
    const __m128i b = _mm_cvtsi32_si128(static_cast<int>(four));
    const __m256i lanes = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(b, b));
    const __m256i nib = _mm256_and_si256(_mm256_srlv_epi32(lanes, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)),
                                         _mm256_set1_epi32(0xF));
    const __m256 q = _mm256_cvtepi32_ps(_mm256_sub_epi32(nib, _mm256_set1_epi32(8)));
    return _mm256_mul_ps(q, _mm256_set1_ps(scale));
  }
  // 4 floats in lanes 0..3, zeros in 4..7.
  static reg load4(const float* p) { return _mm256_zextps128_ps256(_mm_loadu_ps(p)); }
  // lane l = v[idx[l]], idx 32-byte aligned (a table row).
  static reg permute(reg v, const int32_t* idx) {
    return _mm256_permutevar8x32_ps(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(idx)));
  }
};
#endif

// ---- NEON: 4 lanes, 32 q registers ------------------------------------------------
#if defined(__ARM_NEON)
struct Neon {
  static constexpr int lanes = 4;
  static constexpr const char* name = "NEON";
  static constexpr bool portable = false;
  using reg = float32x4_t;
  static reg zero() { return vdupq_n_f32(0.0f); }
  static reg set1(float x) { return vdupq_n_f32(x); }
  static reg load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, reg a) { vst1q_f32(p, a); }
  static reg add(reg a, reg b) { return vaddq_f32(a, b); }
  static reg sub(reg a, reg b) { return vsubq_f32(a, b); }
  static reg mul(reg a, reg b) { return vmulq_f32(a, b); }
  static reg div(reg a, reg b) { return vdivq_f32(a, b); }
  static reg min(reg a, reg b) { return vminq_f32(a, b); }
  static reg max(reg a, reg b) { return vmaxq_f32(a, b); }
  static reg fma(reg a, reg b, reg c) { return vfmaq_f32(c, a, b); }
  static reg abs(reg a) { return vabsq_f32(a); }
  static reg round(reg a) { return vrndnq_f32(a); }
  static reg sqrt(reg a) { return vsqrtq_f32(a); }
  static reg exp2i(reg k) {
    const int32x4_t biased = vaddq_s32(vcvtnq_s32_f32(k), vdupq_n_s32(127));
    return vreinterpretq_f32_s32(vshlq_n_s32(biased, 23));
  }
  static float sum(reg a) { return vaddvq_f32(a); }
  static float hmax(reg a) { return vmaxvq_f32(a); }
  // The packed-weight loads: Portable's lane arithmetic, then one vector load.
  static reg load_bf16(const uint16_t* p) { return from_portable(Portable<4>::load_bf16(p)); }
  static reg load_i8(const int8_t* p) { return from_portable(Portable<4>::load_i8(p)); }
  static reg load_i4(const uint8_t* p, float scale) { return from_portable(Portable<4>::load_i4(p, scale)); }
  static reg from_portable(const Portable<4>::reg& r) { return vld1q_f32(r.v); }
};
#endif

// ---- the compile-time choice --------------------------------------------------------
#if defined(__AVX512F__)
using Native = Avx512;
#elif defined(__AVX2__) && defined(__FMA__)
using Native = Avx2;
#elif defined(__ARM_NEON)
using Native = Neon;
#else
using Native = Portable<8>;
#endif

// A hint to start loading the cache line at p (for writing) before it is needed; a no-op
// where the compiler has no such builtin.
inline void prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 1, 3);
#else
  (void)p;
#endif
}

// What this build's kernels use, for banners and benchmark records: "AVX2+FMA".
inline const char* native_name() { return Native::name; }

}  // namespace kernels::simd
