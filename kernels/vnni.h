// kernels/vnni.h (internal): the one AVX-512 VNNI instruction the int8 kernels use, written so
// that GCC 12 compiles it well. Included by kernels/int8_gemm.cpp and kernels/ternary.cpp
// only; not part of the kernels' public API.
#pragma once

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>

namespace kernels::detail {

// acc += dot4(a, b) in place: each of the 16 int32 lanes adds the 4 products of its 4 bytes
// of a (read as UNSIGNED, 0..255) with its 4 bytes of b (SIGNED, -128..127); no saturation.
// GCC 12 compiles _mm512_dpbusd_epi32 into a copy of the accumulator, the vpdpbusd, and a
// copy back (measured in kernels/int8_gemm.cpp: 16 accumulators became 32 registers plus stack
// spills in the loop, 134 GOP/s instead of ~200 on one Zen 4 core); this one instruction of
// inline assembly says "update this register" and nothing else.
inline void dpbusd(__m512i& acc, __m512i a_u8, __m512i b_s8) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a_u8), "v"(b_s8));
}

}  // namespace kernels::detail
#endif
