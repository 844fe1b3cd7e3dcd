// kernels/ternary.cpp: the ternary matvec ladder of kernels/ternary.h.
#include "kernels/ternary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

// GCC 12 warns "__Y may be used uninitialized" inside its own _mm512_reduce_add_ps (the
// _mm512_undefined idiom: a known false positive, as kernels/simd.h notes); not our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace kernels {

namespace {

void check_cols(int rows, int cols) {
  if (rows < 1 || cols < 4 || cols % 4 != 0)
    throw std::invalid_argument("ternary: a (" + std::to_string(rows) + ", " + std::to_string(cols) +
                                ") matrix: rows >= 1 and cols a positive multiple of 4 are required");
}

// One output: the sum over columns [c0, cols) of row `p` (packed) times x, v1's way.
inline float row_tail(const uint8_t* p, const float* x, int c0, int cols) {
  float s = 0.0f;
  for (int c = c0; c < cols; ++c) {
    const unsigned code = (p[c / 4] >> (2 * (c % 4))) & 3u;
    if (code == 1u) s += x[c];
    else if (code == 2u) s -= x[c];
  }
  return s;
}

// Row r for input xi: v2's sum (SIMD over the first columns, v1's loop for the rest).
inline float row_dot_simd(const uint8_t* p, const float* x, int cols) {
  int c = 0;
#if defined(__AVX512F__) && defined(__BMI2__)
  // Four blocks of 16 columns a step, each adding into its own "plus" and "minus" registers:
  // eight independent chains, so the adds overlap instead of waiting on one another's latency
  // (one chain would take ~2 x 4 cycles per 16 weights, far slower than the bytes arrive).
  __m512 p0 = _mm512_setzero_ps(), p1 = p0, p2 = p0, p3 = p0, m0 = p0, m1 = p0, m2 = p0, m3 = p0;
  auto step = [&](int col, __m512& pa, __m512& ma) {
    uint32_t word;
    std::memcpy(&word, p + col / 4, 4);
    const __m512 xv = _mm512_loadu_ps(x + col);
    pa = _mm512_mask_add_ps(pa, static_cast<__mmask16>(_pext_u32(word, 0x55555555u)), pa, xv);
    ma = _mm512_mask_add_ps(ma, static_cast<__mmask16>(_pext_u32(word, 0xAAAAAAAAu)), ma, xv);
  };
  for (; c + 64 <= cols; c += 64) {
    step(c, p0, m0);
    step(c + 16, p1, m1);
    step(c + 32, p2, m2);
    step(c + 48, p3, m3);
  }
  for (; c + 16 <= cols; c += 16) step(c, p0, m0);
  const __m512 plus = _mm512_add_ps(_mm512_add_ps(p0, p1), _mm512_add_ps(p2, p3));
  const __m512 minus = _mm512_add_ps(_mm512_add_ps(m0, m1), _mm512_add_ps(m2, m3));
  float s = _mm512_reduce_add_ps(_mm512_sub_ps(plus, minus));
#elif defined(__AVX2__)
  const __m256i plus_bits = _mm256_setr_epi32(1 << 0, 1 << 2, 1 << 4, 1 << 6, 1 << 8, 1 << 10, 1 << 12, 1 << 14);
  const __m256i minus_bits = _mm256_slli_epi32(plus_bits, 1);
  // Four blocks of 8 columns a step, plus and minus apart: eight independent chains, as above.
  __m256 pa[4], ma[4];
  for (int k = 0; k < 4; ++k) pa[k] = ma[k] = _mm256_setzero_ps();
  auto step = [&](int col, int k) {
    uint16_t half;
    std::memcpy(&half, p + col / 4, 2);
    const __m256i word = _mm256_set1_epi32(half);
    const __m256 plus = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(word, plus_bits), plus_bits));
    const __m256 minus = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(word, minus_bits), minus_bits));
    const __m256 xv = _mm256_loadu_ps(x + col);
    pa[k] = _mm256_add_ps(pa[k], _mm256_and_ps(xv, plus));
    ma[k] = _mm256_add_ps(ma[k], _mm256_and_ps(xv, minus));
  };
  for (; c + 32 <= cols; c += 32)
    for (int k = 0; k < 4; ++k) step(c + 8 * k, k);
  for (; c + 8 <= cols; c += 8) step(c, 0);
  const __m256 acc = _mm256_sub_ps(_mm256_add_ps(_mm256_add_ps(pa[0], pa[1]), _mm256_add_ps(pa[2], pa[3])),
                                   _mm256_add_ps(_mm256_add_ps(ma[0], ma[1]), _mm256_add_ps(ma[2], ma[3])));
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
  float s = _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
#else
  float s = 0.0f;
#endif
  return s + row_tail(p, x, c, cols);
}

}  // namespace

float ternary_pack(const float* w, int rows, int cols, uint8_t* packed) {
  check_cols(rows, cols);
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::fabs(w[i]);
  const float gamma = static_cast<float>(sum / static_cast<double>(n));
  std::fill(packed, packed + n / 4, uint8_t{0});
  for (size_t i = 0; i < n; ++i) {
    const float q = std::clamp(std::nearbyint(w[i] / (gamma + 1e-5f)), -1.0f, 1.0f);
    const unsigned code = q > 0.0f ? 1u : q < 0.0f ? 2u : 0u;
    packed[i / 4] = static_cast<uint8_t>(packed[i / 4] | (code << (2 * (i % 4))));
  }
  return gamma;
}

void ternary_unpack(const uint8_t* packed, float gamma, int rows, int cols, float* out) {
  check_cols(rows, cols);
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  for (size_t i = 0; i < n; ++i) {
    const unsigned code = (packed[i / 4] >> (2 * (i % 4))) & 3u;
    out[i] = code == 1u ? gamma : code == 2u ? -gamma : 0.0f;
  }
}

void ternary_matvec_v1(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n) {
  check_cols(rows, cols);
  const size_t row_bytes = static_cast<size_t>(cols) / 4;
  for (int i = 0; i < n; ++i)
    for (int r = 0; r < rows; ++r)
      y[static_cast<size_t>(i) * rows + r] =
          gamma * row_tail(packed + r * row_bytes, x + static_cast<size_t>(i) * cols, 0, cols);
}

void ternary_matvec_v2(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n) {
  check_cols(rows, cols);
  const size_t row_bytes = static_cast<size_t>(cols) / 4;
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i)  // the row's bytes read once from memory, then from L1 for every input
      y[static_cast<size_t>(i) * rows + r] =
          gamma * row_dot_simd(packed + r * row_bytes, x + static_cast<size_t>(i) * cols, cols);
}

void ternary_matvec_v3(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n) {
  check_cols(rows, cols);
  const size_t row_bytes = static_cast<size_t>(cols) / 4;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i)
      y[static_cast<size_t>(i) * rows + r] =
          gamma * row_dot_simd(packed + r * row_bytes, x + static_cast<size_t>(i) * cols, cols);
}

const std::vector<TernaryMatvecVersion>& ternary_matvec_versions() {
  static const std::vector<TernaryMatvecVersion> v = {
      {1, "naive", "per output, decode each 2-bit code and add or subtract x: the reference", ternary_matvec_v1},
      {2, "simd", "codes turned into masks, x added into plus and minus sums, 4 blocks of 16 (AVX-512) or 8 (AVX2) at once",
       ternary_matvec_v2},
      {3, "simd-threads", "v2's rows across OpenMP threads: more loads in flight, the socket's bandwidth",
       ternary_matvec_v3},
  };
  return v;
}

void ternary_matvec(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n) {
  ternary_matvec_v3(y, x, packed, gamma, rows, cols, n);
}

}  // namespace kernels
