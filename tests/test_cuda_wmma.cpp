// The emulator's nvcuda::wmma subset (kernels/cuda/emu/wmma.h), which the TF32 matmul
// (kernels/cuda/matmul.cu, v8) runs on: TF32 rounding, one 16x16x8 mma against a double
// reference, both memory layouts, and a collective called from divergent code.
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

using kernels::cuda::Buffer;
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
  Buffer<float> a(dev(), in.a), b(dev(), in.b), bt(dev(), in.bt), d(dev(), 16 * 16);
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
    const std::vector<float> got = d.to_host();
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
  Buffer<float> a(dev(), in.a), b(dev(), in.b), d(dev(), 16 * 16);
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
  Buffer<float> a(dev(), in.a);
  std::string message;
  try {
    launch("misaligned_load", misaligned_load, dim3(1), dim3(32), 0, a.data());
  } catch (const kernels::cuda::Error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Matchers::Contains("misaligned_load") && Catch::Matchers::Contains("32-byte aligned"));
}
