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

#include "kernels/int8_gemm.h"
#include "kernels/vnni.h"

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

// ---- int8 activations: v4, v5 and their reference ------------------------------------------
//
// x quantised per token (per row of x) to q_x in [-127, 127] with scale s (quantize_rows_int8,
// absmax / 127); then every output is an integer dot product, exact in int32:
//   y = gamma * s * sum_c q_w[c] q_x[c]          q_w in {-1, 0, +1}
// |sum| <= 127 * cols: exact in int32 for any cols below 2^24, and as a float (the one rounding:
// float(dot), then two products) for cols up to 2^24 / 127 ~ 132k.
namespace {

// The one float expression every int8 rung ends in: the same on every path, so the floats are
// as identical as the int32 dots are.
inline float i8_output(float gamma, float sx, int32_t dot) { return (gamma * sx) * static_cast<float>(dot); }

// Row `p`'s integer dot with q over columns [c0, cols), the plain loop (the reference's, and
// v4's on builds without SIMD): codes 1 -> +q, 2 -> -q, 0 (and 3, never written) -> nothing.
inline int32_t row_tail_i8(const uint8_t* p, const int8_t* q, int c0, int cols) {
  int32_t s = 0;
  for (int c = c0; c < cols; ++c) {
    const unsigned code = (p[c / 4] >> (2 * (c % 4))) & 3u;
    if (code == 1u) s += q[c];
    else if (code == 2u) s -= q[c];
  }
  return s;
}

// Where the SIMD paths want the activations. A super-block of 256 weights is 64 code bytes, one
// cache line, one zmm (two ymm); byte j holds weights 4j .. 4j+3 in bits 0-1, 2-3, 4-5, 6-7.
// The cheapest expansion (below) takes field k of all 64 bytes at once (shift right by 2k,
// look the low bits up in a table), so register k holds, in byte j, weight 4j + k. Rather
// than shuffle the weights back into column order for every row, the activations are
// shuffled ONCE per token into that order, and the dot product does not care in which order
// its terms come:
//   qp[256b + 64k + j] = q[256b + 4j + k]           k = 0..3, j = 0..63
// A token's qp is cols rounded up to a multiple of 256, the slots past the last column 0: the
// last, partial super-block is then a full one whose missing weights meet q = 0.
constexpr bool kI8Simd =
#if (defined(__AVX512VNNI__) && defined(__AVX512BW__)) || defined(__AVX2__)
    true;
#else
    false;
#endif

// The per-call preparation every int8 rung shares: q_x (permuted and padded where a SIMD path
// reads it), the scales, and each token's sum of q_x (the +1 offset below). The buffers
// belong to the calling thread and only grow (no allocation per call once warm).
struct I8Input {
  const int8_t* q;      // (n, ld): the quantised x of each token, permuted as above (SIMD builds)
  size_t ld;            // bytes per token: cols rounded up to 256 (SIMD builds), else cols
  const float* scale;   // (n): s per token
  const int32_t* sum;   // (n): sum of the token's q
};

I8Input prepare_i8(const float* x, int n, int cols, bool permute) {
  thread_local std::vector<int8_t> raw, perm;
  thread_local std::vector<float> scale;
  thread_local std::vector<int32_t> sum;
  const size_t ucols = static_cast<size_t>(cols);
  const size_t ld = permute ? (ucols + 255) / 256 * 256 : ucols;
  raw.resize(std::max(raw.size(), static_cast<size_t>(n) * ucols));
  perm.resize(std::max(perm.size(), static_cast<size_t>(n) * ld + 64));
  scale.resize(std::max(scale.size(), static_cast<size_t>(n)));
  sum.resize(std::max(sum.size(), static_cast<size_t>(n)));
  quantize_rows_int8(x, n, cols, raw.data(), scale.data());
  // 64-byte aligned, so no 64-byte load of q straddles two cache lines (SIMD builds: ld is a
  // multiple of 256, and the SIMD paths load q with aligned loads)
  int8_t* base = perm.data() + (64 - reinterpret_cast<uintptr_t>(perm.data()) % 64) % 64;
  for (int i = 0; i < n; ++i) {
    const int8_t* src = raw.data() + static_cast<size_t>(i) * ucols;
    int8_t* dst = base + static_cast<size_t>(i) * ld;
    int32_t s = 0;
    for (size_t c = 0; c < ucols; ++c) s += src[c];
    sum[static_cast<size_t>(i)] = s;
    if (!permute) {
      std::memcpy(dst, src, ucols);
      continue;
    }
    for (size_t b = 0; b < ld; b += 256)
      for (size_t k = 0; k < 4; ++k)
        for (size_t j = 0; j < 64; ++j) {
          const size_t c = b + 4 * j + k;
          dst[b + 64 * k + j] = c < ucols ? src[c] : int8_t{0};
        }
  }
  return {base, ld, scale.data(), sum.data()};
}

// Row `p`'s integer dot with one token's prepared q (sum: that token's I8Input::sum).
//
// The multiply-add instructions take one UNSIGNED byte operand (vpdpbusd, vpmaddubsw: u8 x s8).
// Here the weights go there, shifted by one: u = q_w + 1 in {0, 1, 2} (the expansion's table
// gives u directly: code 0, 1, 2 -> 1, 2, 0), and the signed side is q_x. Then
//   sum u q_x = sum q_w q_x + sum q_x,
// and sum q_x is the same for every row: one subtraction per output, computed once per token
// (int8_gemm's v4 shifts the other operand, x + 128, and so needs 128 * (row sum of W) per row;
// with weights in {-1, 0, 1} this shift is free). Padding: a missing weight reads code 0 (u =
// 1) but meets q = 0.
//
// Software prefetch, 2 KiB of codes ahead (the next rows' once a row ends; a prefetch past the
// matrix never faults): computing a cache line of codes takes about as long as fetching one
// from DRAM on one core, so the fetches must be asked for well before the loads need them.
// Little's law: ~100 ns of DRAM latency x ~20 GB/s = ~2 KB in flight; the out-of-order window
// alone covers ~1 KB. A rough A/B on the busy VM (4096 x 4096 from DRAM, 1 thread, alternating
// rounds): 360-530 us with it, 530-750 us without.
constexpr int kPrefetchBytes = 2048;

inline int32_t row_dot_i8(const uint8_t* p, const int8_t* q, int32_t sum, int cols) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  // Per super-block of 256 weights: one 64-byte load of codes; per field k = 0..3 (64 weights):
  //   vpsrlw $2k   the 16-bit words shifted (k > 0): field k now in bits 0-1 of every byte,
  //                the bits above it its neighbours (and, in a word's low byte, bits of the
  //                high byte): ignored by the table
  //   vpermb       (AVX-512 VBMI) a 64-entry table indexed by the low 6 bits, {1, 2, 0, 1}
  //                repeated: the code's u whatever the 4 bits above it hold. Without VBMI:
  //                & 3, then vpshufb's 16-entry table (one more op; a rough A/B at 3072 x
  //                768 in cache, 1 thread: 31 us with vpermb, 36 with & 3 + vpshufb, 41 for
  //                the AVX2 path below compiled for the same CPU).
  //   vpdpbusd     the 64 multiply-adds u * q_x into field k's own int32 accumulator.
  // 2.75 vector ops + 1 load of q per 64 weights (the v2 rung spent ~4.5 cycles per 16 on
  // pext, kmov and masked adds); four accumulators, one per field: independent chains.
  const __m512i table = _mm512_set1_epi32(0x01000201);  // bytes 1, 2, 0, 1: code -> q_w + 1
#if defined(__AVX512VBMI__)
  auto lookup = [&](__m512i v) { return _mm512_permutexvar_epi8(v, table); };
#else
  const __m512i three = _mm512_set1_epi8(3);
  auto lookup = [&](__m512i v) { return _mm512_shuffle_epi8(table, _mm512_and_si512(v, three)); };
#endif
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  auto super_block = [&](__m512i codes, const int8_t* qb) {
    detail::dpbusd(a0, lookup(codes), _mm512_load_si512(qb));
    detail::dpbusd(a1, lookup(_mm512_srli_epi16(codes, 2)), _mm512_load_si512(qb + 64));
    detail::dpbusd(a2, lookup(_mm512_srli_epi16(codes, 4)), _mm512_load_si512(qb + 128));
    detail::dpbusd(a3, lookup(_mm512_srli_epi16(codes, 6)), _mm512_load_si512(qb + 192));
  };
  int c = 0;
  for (; c + 256 <= cols; c += 256) {
    _mm_prefetch(reinterpret_cast<const char*>(p + c / 4 + kPrefetchBytes), _MM_HINT_T0);
    super_block(_mm512_loadu_si512(p + c / 4), q + c);
  }
  if (c < cols) {  // the last (cols - c) / 4 code bytes; the masked load reads nothing past them
    const __mmask64 m = (uint64_t{1} << ((cols - c) / 4)) - 1;  // fewer than 64 bytes
    super_block(_mm512_maskz_loadu_epi8(m, p + c / 4), q + c);
  }
  return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3))) - sum;
#elif defined(__AVX2__)
  // The same fields from two ymm halves of the 64 code bytes: vpsrlw $2k, & 3, vpshufb's
  // table (per 128-bit lane), then vpmaddubsw (u8 x s8, pairs into int16: at most
  // 2 * 2 * 127 = 508, no saturation) and vpmaddwd with ones into int32 (once per two fields).
  const __m256i table = _mm256_set1_epi32(0x01000201);
  const __m256i three = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0;
  auto field = [&](__m256i codes, int k) {
    return _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srl_epi16(codes, _mm_cvtsi32_si128(2 * k)), three));
  };
  auto qv = [&](const int8_t* a) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(a)); };
  auto super_block = [&](const uint8_t* codes_at, const int8_t* qb) {
    for (int h = 0; h < 2; ++h) {  // bytes 32h .. 32h+31 of the 64
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes_at + 32 * h));
      const int8_t* qh = qb + 32 * h;
      // int16 sums of two fields (<= 1016 each: no overflow), widened once per pair
      const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(field(codes, 0), qv(qh)),
                                           _mm256_maddubs_epi16(field(codes, 1), qv(qh + 64)));
      const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(field(codes, 2), qv(qh + 128)),
                                           _mm256_maddubs_epi16(field(codes, 3), qv(qh + 192)));
      acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(s01, ones));
      acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(s23, ones));
    }
  };
  int c = 0;
  for (; c + 256 <= cols; c += 256) {
    _mm_prefetch(reinterpret_cast<const char*>(p + c / 4 + kPrefetchBytes), _MM_HINT_T0);
    super_block(p + c / 4, q + c);
  }
  if (c < cols) {  // the last code bytes, copied into zeros (code 0: meets q = 0 anyway)
    alignas(32) uint8_t last[64] = {};
    std::memcpy(last, p + c / 4, static_cast<size_t>(cols - c) / 4);
    super_block(last, q + c);
  }
  const __m256i acc = _mm256_add_epi32(acc0, acc1);
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
  return _mm_cvtsi128_si32(h) - sum;
#else
  (void)sum;  // portable: q is in column order, the plain loop does every column
  return row_tail_i8(p, q, 0, cols);
#endif
}

// v4 and v5: row r for every token (the row's code bytes read once from memory, then from L1
// for each further token).
void i8_rows(float* y, const uint8_t* packed, float gamma, int rows, int cols, int n, const I8Input& in, int r) {
  const size_t row_bytes = static_cast<size_t>(cols) / 4;
  for (int i = 0; i < n; ++i)
    y[static_cast<size_t>(i) * rows + r] =
        i8_output(gamma, in.scale[i],
                  row_dot_i8(packed + static_cast<size_t>(r) * row_bytes, in.q + static_cast<size_t>(i) * in.ld,
                             in.sum[i], cols));
}

}  // namespace

void ternary_matvec_int8_ref(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols,
                             int n) {
  check_cols(rows, cols);
  std::vector<int8_t> q(static_cast<size_t>(n) * static_cast<size_t>(cols));
  std::vector<float> s(static_cast<size_t>(n));
  quantize_rows_int8(x, n, cols, q.data(), s.data());
  const size_t row_bytes = static_cast<size_t>(cols) / 4;
  for (int i = 0; i < n; ++i)
    for (int r = 0; r < rows; ++r)
      y[static_cast<size_t>(i) * rows + r] =
          i8_output(gamma, s[static_cast<size_t>(i)],
                    row_tail_i8(packed + static_cast<size_t>(r) * row_bytes, q.data() + static_cast<size_t>(i) * cols,
                                0, cols));
}

void ternary_matvec_v4(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n) {
  check_cols(rows, cols);
  const I8Input in = prepare_i8(x, n, cols, kI8Simd);
  for (int r = 0; r < rows; ++r) i8_rows(y, packed, gamma, rows, cols, n, in, r);
}

void ternary_matvec_v5(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n) {
  check_cols(rows, cols);
  const I8Input in = prepare_i8(x, n, cols, kI8Simd);  // once, by the calling thread (cols * n bytes)
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) i8_rows(y, packed, gamma, rows, cols, n, in, r);
}

const std::vector<TernaryMatvecVersion>& ternary_matvec_versions() {
  static const std::vector<TernaryMatvecVersion> v = {
      {1, "naive", "per output, decode each 2-bit code and add or subtract x: the reference", ternary_matvec_v1},
      {2, "simd", "codes turned into masks, x added into plus and minus sums, 4 blocks of 16 (AVX-512) or 8 (AVX2) at once",
       ternary_matvec_v2},
      {3, "simd-threads", "v2's rows across OpenMP threads: more loads in flight, the socket's bandwidth",
       ternary_matvec_v3},
      {4, "int8-dot",
       "x quantised to int8 per token; codes expanded to int8 in registers, integer dot products (vpdpbusd / "
       "vpmaddubsw)",
       ternary_matvec_v4},
      {5, "int8-dot-threads", "v4's rows across OpenMP threads", ternary_matvec_v5},
  };
  return v;
}

void ternary_matvec(float* y, const float* x, const uint8_t* packed, float gamma, int rows, int cols, int n) {
  ternary_matvec_v3(y, x, packed, gamma, rows, cols, n);
}

}  // namespace kernels
