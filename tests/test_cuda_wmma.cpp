// The emulator's nvcuda::wmma subset (kernels/cuda/emu/wmma.h), which the tensor-core
// kernels (matmul v8, v10: TF32; matmul v11: BF16) run on: TF32 and BF16 rounding, one
// 16x16x8 TF32 and one 16x16x16 BF16 mma against double references, both memory layouts, a
// collective called from divergent code, misaligned pointers and bad ldm.
//
// Compiled by the host compiler, so kernels/cuda/cuda.h gives the emulator and the kernels
// below run on the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/emu/wmma.h"
#include "kernels/harness.h"

using kernels::Array;
using kernels::cuda::launch;
namespace wmma = nvcuda::wmma;

namespace {

kernels::cuda::Device& dev() { return kernels::cuda::emulator(); }

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
uint32_t to_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// TF32 rounding written independently of the header: the nearest multiple of the TF32 ulp
// at x's exponent (2^(e - 10)), ties away from zero. Normal numbers only.
double tf32_reference(float x) {
  int e = 0;
  std::frexp(static_cast<double>(x), &e);  // x = f * 2^e, 0.5 <= |f| < 1
  const double ulp = std::ldexp(1.0, e - 1 - 10);
  const double q = static_cast<double>(x) / ulp;
  return std::copysign(std::floor(std::fabs(q) + 0.5), q) * ulp;
}

// D (16,16) = A (16,8) . B (8,16) + c0, by one warp. B is read row-major (ldb 16) or
// column-major (stored as B^T, ldb 8); D is stored row-major or column-major. With
// `convert`, A and B are rounded to TF32 in the fragments first (what CUDA's samples do);
// without, mma_sync sees the raw fp32 bits and ignores the low 13.
template <class LayoutB>
__global__ void one_mma(float* D, const float* A, const float* B, float c0, unsigned ldb, int col_major_out,
                        int convert) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LayoutB> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, c0);
  wmma::load_matrix_sync(a, A, 8);
  wmma::load_matrix_sync(b, B, ldb);
  if (convert) {
    for (int i = 0; i < a.num_elements; ++i) a.x[i] = wmma::__float_to_tf32(a.x[i]);
    for (int i = 0; i < b.num_elements; ++i) b.x[i] = wmma::__float_to_tf32(b.x[i]);
  }
  wmma::mma_sync(acc, a, b, acc);
  wmma::store_matrix_sync(D, acc, 16, col_major_out ? wmma::mem_col_major : wmma::mem_row_major);
}

// A fragment loaded from a pointer that is not 32-byte aligned.
__global__ void misaligned_load(const float* A) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::load_matrix_sync(a, A + 4, 8);
}

// The same mma called by half a warp: lanes 16..31 return first.
__global__ void divergent_mma(float* D, const float* A, const float* B) {
  if (threadIdx.x >= 16) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(a, A, 8);
  wmma::load_matrix_sync(b, B, 16);
  wmma::mma_sync(acc, a, b, acc);
  wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
}

struct Inputs {
  std::vector<float> a = std::vector<float>(16 * 8);   // (16,8) row-major
  std::vector<float> b = std::vector<float>(8 * 16);   // (8,16) row-major
  std::vector<float> bt = std::vector<float>(16 * 8);  // B^T (16,8) row-major = B column-major
  Inputs() {
    kernels::harness::fill_random(a, 7, -2.0f, 2.0f);
    kernels::harness::fill_random(b, 8, -2.0f, 2.0f);
    for (int k = 0; k < 8; ++k) {
      for (int j = 0; j < 16; ++j) bt[static_cast<size_t>(j * 8 + k)] = b[static_cast<size_t>(k * 16 + j)];
    }
  }
};

// D[i][j] = c0 + sum_k round(A[i][k]) round(B[k][j]) in double, round one of: TF32 to
// nearest, TF32 truncated, or none.
enum class Round { Nearest, Truncate, None };
double reference(const Inputs& in, float c0, int i, int j, Round round) {
  auto r = [&](float x) {
    if (round == Round::Nearest) return tf32_reference(x);
    if (round == Round::Truncate) return static_cast<double>(from_bits(to_bits(x) & 0xFFFFE000u));
    return static_cast<double>(x);
  };
  double sum = c0;
  for (int k = 0; k < 8; ++k) {
    sum += r(in.a[static_cast<size_t>(i * 8 + k)]) * r(in.b[static_cast<size_t>(k * 16 + j)]);
  }
  return sum;
}

}  // namespace

TEST_CASE("wmma emulation: __float_to_tf32 rounds to nearest, ties away from zero", "[cuda][emu]") {
  const float one = 1.0f;
  const float ulp = std::ldexp(1.0f, -10);  // TF32's ulp at 1
  CHECK(wmma::__float_to_tf32(one) == one);
  CHECK(wmma::__float_to_tf32(one + ulp / 2) == one + ulp);                          // a tie: away from zero
  CHECK(wmma::__float_to_tf32(-(one + ulp / 2)) == -(one + ulp));
  CHECK(wmma::__float_to_tf32(std::nextafter(one + ulp / 2, 0.0f)) == one);           // just under: down
  CHECK(wmma::__float_to_tf32(one + ulp * 3 / 4) == one + ulp);
  CHECK(wmma::__float_to_tf32(std::nextafter(2.0f, 0.0f)) == 2.0f);                  // carries into the exponent
  CHECK(std::isinf(wmma::__float_to_tf32(FLT_MAX)));                                 // past TF32's largest
  CHECK(std::isinf(wmma::__float_to_tf32(INFINITY)));
  CHECK(std::isnan(wmma::__float_to_tf32(NAN)));
  // The low 13 bits are always zero, and random values land on the independent reference.
  std::vector<float> xs(1000);
  kernels::harness::fill_random(xs, 3, -1000.0f, 1000.0f);
  for (float x : xs) {
    const float t = wmma::__float_to_tf32(x);
    CHECK((to_bits(t) & 0x1FFFu) == 0u);
    CHECK(static_cast<double>(t) == tf32_reference(x));
  }
}

TEST_CASE("wmma emulation: one 16x16x8 TF32 mma matches a double reference", "[cuda][emu]") {
  const Inputs in;
  const float c0 = 0.375f;
  Array<float> a(dev(), in.a, kernels::uninitialized), b(dev(), in.b, kernels::uninitialized),
      bt(dev(), in.bt, kernels::uninitialized), d(dev(), 16 * 16, kernels::uninitialized);
  struct Case {
    const char* what;
    bool b_col_major, d_col_major, convert;
    Round round;
  };
  const Case cases[] = {
      {"B row-major, D row-major, rounded", false, false, true, Round::Nearest},
      {"B col-major, D row-major, rounded", true, false, true, Round::Nearest},
      {"B row-major, D col-major, rounded", false, true, true, Round::Nearest},
      {"B row-major, D row-major, not rounded: truncated", false, false, false, Round::Truncate},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    d.fill_bytes(0xFF);
    if (c.b_col_major) {
      launch("one_mma", one_mma<wmma::col_major>, dim3(1), dim3(32), 0, d.data(), a.data(), bt.data(), c0, 8u,
             c.d_col_major ? 1 : 0, c.convert ? 1 : 0);
    } else {
      launch("one_mma", one_mma<wmma::row_major>, dim3(1), dim3(32), 0, d.data(), a.data(), b.data(), c0, 16u,
             c.d_col_major ? 1 : 0, c.convert ? 1 : 0);
    }
    const std::vector<float> got = d.to_vector();
    double max_err = 0.0, max_vs_fp32 = 0.0;
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 16; ++j) {
        const float g = got[static_cast<size_t>(c.d_col_major ? j * 16 + i : i * 16 + j)];
        REQUIRE(std::isfinite(g));
        max_err = std::max(max_err, std::fabs(g - reference(in, c0, i, j, c.round)));
        max_vs_fp32 = std::max(max_vs_fp32, std::fabs(g - reference(in, c0, i, j, Round::None)));
      }
    }
    // 8 products of TF32 values (each exact in fp32: 11 x 11 significant bits) summed in
    // fp32: a few ulps of sums of size ~4, so ~1e-6; the inputs' own rounding to 10 bits
    // moves the result by ~1e-3 from the fp32 product, which must show.
    CHECK(max_err < 4e-6);
    CHECK(max_vs_fp32 > 1e-4);
  }
}

TEST_CASE("wmma emulation: a collective called by part of a warp is an error", "[cuda][emu]") {
  const Inputs in;
  Array<float> a(dev(), in.a, kernels::uninitialized), b(dev(), in.b, kernels::uninitialized),
      d(dev(), 16 * 16, kernels::uninitialized);
  std::string message;
  try {
    launch("divergent_mma", divergent_mma, dim3(1), dim3(32), 0, d.data(), a.data(), b.data());
  } catch (const kernels::cuda::Error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Matchers::Contains("divergent_mma") && Catch::Matchers::Contains("wmma::") &&
                          Catch::Matchers::Contains("already returned"));
}

TEST_CASE("wmma emulation: a fragment pointer that is not 32-byte aligned is an error", "[cuda][emu]") {
  const Inputs in;
  Array<float> a(dev(), in.a, kernels::uninitialized);
  std::string message;
  try {
    launch("misaligned_load", misaligned_load, dim3(1), dim3(32), 0, a.data());
  } catch (const kernels::cuda::Error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Matchers::Contains("misaligned_load") && Catch::Matchers::Contains("32-byte aligned"));
}

// ---- BF16 (matmul v11) -------------------------------------------------------------------------

namespace {

uint16_t bf16_bits(float x) { return __float2bfloat16(x).bits; }

// BF16 rounding written independently of the header: the nearest multiple of the bf16 ulp
// at x's exponent (8 significant bits: 2^(e - 8)), ties to even (nearbyint in the default
// rounding mode). Normal numbers only.
double bf16_reference(float x) {
  int e = 0;
  std::frexp(static_cast<double>(x), &e);  // x = f * 2^e, 0.5 <= |f| < 1
  const double ulp = std::ldexp(1.0, e - 1 - 7);
  return std::nearbyint(static_cast<double>(x) / ulp) * ulp;
}

// D (16,16) = A (16,16) . B (16,16) + c0 in BF16 by one warp; A and B each read row-major
// or column-major (the matrix stored transposed), D stored row-major.
template <class LayoutA, class LayoutB>
__global__ void one_bf16_mma(float* D, const __nv_bfloat16* A, const __nv_bfloat16* B, float c0) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, c0);
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::mma_sync(acc, a, b, acc);
  wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
}

// A BF16 fragment whose ldm is a multiple of 16 bytes for floats (12) but not for bf16s.
__global__ void bf16_bad_ldm(const __nv_bfloat16* A) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::load_matrix_sync(a, A, 12);
}

}  // namespace

TEST_CASE("wmma emulation: __float2bfloat16 rounds to nearest, ties to even", "[cuda][emu]") {
  const float ulp = std::ldexp(1.0f, -7);  // bf16's ulp at 1
  auto rt = [](float x) { return __bfloat162float(__float2bfloat16(x)); };  // round trip
  CHECK(rt(1.0f) == 1.0f);
  CHECK(rt(1.0f + ulp / 2) == 1.0f);                                  // a tie, 1.0 even: down
  CHECK(rt(1.0f + 3 * ulp / 2) == 1.0f + 2 * ulp);                    // a tie, 1 + ulp odd: up
  CHECK(rt(-(1.0f + 3 * ulp / 2)) == -(1.0f + 2 * ulp));
  CHECK(rt(std::nextafter(1.0f + ulp / 2, 2.0f)) == 1.0f + ulp);      // just over half: up
  CHECK(rt(std::nextafter(1.0f + 3 * ulp / 2, 0.0f)) == 1.0f + ulp);  // just under half: down
  CHECK(rt(std::nextafter(2.0f, 0.0f)) == 2.0f);                      // carries into the exponent
  CHECK(std::isinf(rt(FLT_MAX)));                                     // past bf16's largest
  CHECK(std::isinf(rt(-INFINITY)));
  CHECK(rt(-INFINITY) < 0.0f);
  CHECK(std::isnan(rt(NAN)));
  CHECK(std::isnan(rt(from_bits(0x7FFFFFFFu))));  // a NaN whose payload would carry into inf
  CHECK(bf16_bits(0.0f) == 0u);
  CHECK(bf16_bits(-0.0f) == 0x8000u);
  // Random values land on the independent reference, and __bfloat162float is exact: the
  // bits are the float's top half.
  std::vector<float> xs(1000);
  kernels::harness::fill_random(xs, 5, -1000.0f, 1000.0f);
  for (float x : xs) {
    const float r = rt(x);
    CHECK((to_bits(r) & 0xFFFFu) == 0u);
    CHECK(to_bits(r) >> 16 == bf16_bits(x));
    CHECK(static_cast<double>(r) == bf16_reference(x));
  }
}

TEST_CASE("wmma emulation: one 16x16x16 BF16 mma matches a double reference", "[cuda][emu]") {
  std::vector<float> a(16 * 16), b(16 * 16);  // (16,16) row-major each
  kernels::harness::fill_random(a, 11, -2.0f, 2.0f);
  kernels::harness::fill_random(b, 12, -2.0f, 2.0f);
  // The bf16 inputs as stored (row-major) and transposed (what a col_major load reads).
  std::vector<__nv_bfloat16> ha(256), hat(256), hb(256), hbt(256);
  for (size_t r = 0; r < 16; ++r) {
    for (size_t c = 0; c < 16; ++c) {
      ha[r * 16 + c] = hat[c * 16 + r] = __float2bfloat16(a[r * 16 + c]);
      hb[r * 16 + c] = hbt[c * 16 + r] = __float2bfloat16(b[r * 16 + c]);
    }
  }
  Array<__nv_bfloat16> da(dev(), ha, kernels::uninitialized), dat(dev(), hat, kernels::uninitialized),
      db(dev(), hb, kernels::uninitialized), dbt(dev(), hbt, kernels::uninitialized);
  Array<float> d(dev(), 16 * 16, kernels::uninitialized);
  const float c0 = -0.625f;
  struct Case {
    const char* what;
    bool a_col_major, b_col_major;
  };
  const Case cases[] = {{"A row-major, B row-major", false, false},
                        {"A col-major, B row-major", true, false},
                        {"A row-major, B col-major", false, true},
                        {"A col-major, B col-major", true, true}};
  for (const Case& c : cases) {
    INFO(c.what);
    d.fill_bytes(0xFF);
    const __nv_bfloat16* pa = c.a_col_major ? dat.data() : da.data();
    const __nv_bfloat16* pb = c.b_col_major ? dbt.data() : db.data();
    auto kernel = one_bf16_mma<wmma::row_major, wmma::row_major>;
    if (c.a_col_major && !c.b_col_major) kernel = one_bf16_mma<wmma::col_major, wmma::row_major>;
    if (!c.a_col_major && c.b_col_major) kernel = one_bf16_mma<wmma::row_major, wmma::col_major>;
    if (c.a_col_major && c.b_col_major) kernel = one_bf16_mma<wmma::col_major, wmma::col_major>;
    launch("one_bf16_mma", kernel, dim3(1), dim3(32), 0, d.data(), pa, pb, c0);
    const std::vector<float> got = d.to_vector();
    double max_err = 0.0, max_vs_fp32 = 0.0;
    for (size_t i = 0; i < 16; ++i) {
      for (size_t j = 0; j < 16; ++j) {
        double rounded = c0, plain = c0;
        for (size_t k = 0; k < 16; ++k) {
          rounded += bf16_reference(a[i * 16 + k]) * bf16_reference(b[k * 16 + j]);
          plain += static_cast<double>(a[i * 16 + k]) * b[k * 16 + j];
        }
        const float g = got[i * 16 + j];
        REQUIRE(std::isfinite(g));
        max_err = std::max(max_err, std::fabs(g - rounded));
        max_vs_fp32 = std::max(max_vs_fp32, std::fabs(g - plain));
      }
    }
    // 16 products of bf16 values (exact in fp32: 8 x 8 significant bits) summed in fp32:
    // a few ulps of sums of size ~4-8, so ~1e-6; the inputs' own rounding to 8 bits (relative
    // error up to 2^-9 each) moves the result by ~1e-2 from the fp32 product, which must show.
    CHECK(max_err < 1e-5);
    CHECK(max_vs_fp32 > 1e-3);
  }
}

TEST_CASE("wmma emulation: a BF16 fragment's ldm must be a multiple of 8 elements", "[cuda][emu]") {
  Array<__nv_bfloat16> a(dev(), std::vector<__nv_bfloat16>(16 * 16, __float2bfloat16(1.0f)), kernels::uninitialized);
  std::string message;
  try {
    launch("bf16_bad_ldm", bf16_bad_ldm, dim3(1), dim3(32), 0, a.data());
  } catch (const kernels::cuda::Error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Matchers::Contains("bf16_bad_ldm") && Catch::Matchers::Contains("multiple of 8"));
}
