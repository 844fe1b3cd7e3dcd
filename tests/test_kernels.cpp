// kernels/matmul: every sgemm version, every transpose form, validated against a float64
// reference. Inputs cannot pass by accident: random (never zero), sizes that are not
// multiples of a vector width or tile, padded leading dimensions, misaligned starts, and
// sentinel values after C that must survive.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/simd.h"
#include "nn/rng.h"

using kernels::Trans;

namespace {

struct Problem {
  Trans ta, tb;
  int M, N, K, lda, ldb, ldc;
  float alpha, beta;
};

// C (M,N) = alpha op(A) op(B) + beta C, accumulated in double.
std::vector<double> reference(const Problem& p, const float* A, const float* B, const float* C) {
  std::vector<double> out(static_cast<size_t>(p.M) * p.N);
  for (int i = 0; i < p.M; ++i) {
    for (int j = 0; j < p.N; ++j) {
      double sum = 0.0;
      for (int k = 0; k < p.K; ++k) {
        const double a = p.ta == Trans::No ? A[i * p.lda + k] : A[k * p.lda + i];
        const double b = p.tb == Trans::No ? B[k * p.ldb + j] : B[j * p.ldb + k];
        sum += a * b;
      }
      const double c = p.beta == 0.0f ? 0.0 : static_cast<double>(p.beta) * C[i * p.ldc + j];
      out[static_cast<size_t>(i) * p.N + j] = p.alpha * sum + c;
    }
  }
  return out;
}

void check_version(const kernels::SgemmVersion& v, const Problem& p, nn::Rng& rng) {
  const int a_rows = p.ta == Trans::No ? p.M : p.K;
  const int b_rows = p.tb == Trans::No ? p.K : p.N;
  constexpr int kOffset = 1;     // misaligned start: one float past an aligned allocation
  constexpr int kSentinels = 16;
  constexpr float kSentinel = -12345.0f;
  std::vector<float> a_buf(kOffset + static_cast<size_t>(a_rows) * p.lda);
  std::vector<float> b_buf(kOffset + static_cast<size_t>(b_rows) * p.ldb);
  std::vector<float> c_buf(kOffset + static_cast<size_t>(p.M) * p.ldc + kSentinels, kSentinel);
  for (float& x : a_buf) x = rng.uniform(-1.0f, 1.0f);
  for (float& x : b_buf) x = rng.uniform(-1.0f, 1.0f);
  float* A = a_buf.data() + kOffset;
  float* B = b_buf.data() + kOffset;
  float* C = c_buf.data() + kOffset;
  for (int i = 0; i < p.M; ++i) {
    for (int j = 0; j < p.N; ++j) {
      // beta = 0 must overwrite C, even NaN (BLAS semantics).
      C[i * p.ldc + j] = p.beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : rng.uniform(-1.0f, 1.0f);
    }
  }
  const std::vector<double> ref = reference(p, A, B, C);
  v.fn(p.ta, p.tb, p.M, p.N, p.K, p.alpha, A, p.lda, B, p.ldb, p.beta, C, p.ldc);

  int bad = 0;
  for (int i = 0; i < p.M; ++i) {
    for (int j = 0; j < p.N; ++j) {
      const double want = ref[static_cast<size_t>(i) * p.N + j];
      const double got = C[i * p.ldc + j];
      // float rounding over K terms of size <= 1 stays far below 1e-6 * K; a missing or
      // doubled term is off by ~0.3.
      const double tol = 1e-6 * p.K + 1e-5 * std::fabs(want);
      if (!(std::fabs(got - want) <= tol)) {  // NaN fails
        if (bad++ < 5) WARN("v" << v.number << " C[" << i << "," << j << "] = " << got << ", want " << want);
      }
    }
  }
  // Everything outside the M x N block (the row padding, the misaligned head, the
  // sentinels after the end) must be untouched.
  for (size_t idx = 0; idx < c_buf.size(); ++idx) {
    const auto pos = static_cast<int64_t>(idx) - kOffset;
    const bool inside = pos >= 0 && pos / p.ldc < p.M && pos % p.ldc < p.N;
    if (!inside && c_buf[idx] != kSentinel) {
      if (bad++ < 5) WARN("v" << v.number << " wrote outside C at buffer index " << idx);
    }
  }
  INFO("sgemm v" << v.number << " (" << v.name << ") ta=" << (p.ta == Trans::Yes) << " tb="
                 << (p.tb == Trans::Yes) << " M=" << p.M << " N=" << p.N << " K=" << p.K << " alpha="
                 << p.alpha << " beta=" << p.beta);
  REQUIRE(bad == 0);
}

}  // namespace

TEST_CASE("every sgemm version matches the float64 reference in every transpose form", "[kernels]") {
  nn::Rng rng(11);
  // Small and ragged sizes, then sizes that cross the packed versions' block edges
  // (MC = 120 rows, KC = 256 deep, NC = 2048 wide; see kernels/matmul.cpp), so the
  // second block of each loop, and a ragged last block, are exercised too.
  const int sizes[][3] = {{1, 1, 1},    {7, 5, 3},     {33, 17, 65}, {64, 64, 64},
                          {70, 129, 31}, {131, 37, 301}, {13, 2061, 9}, {250, 20, 520}};
  for (const auto& v : kernels::sgemm_versions()) {
    for (Trans ta : {Trans::No, Trans::Yes}) {
      for (Trans tb : {Trans::No, Trans::Yes}) {
        for (const auto& s : sizes) {
          const int M = s[0], N = s[1], K = s[2];
          Problem p{ta, tb, M, N, K, 0, 0, 0, 1.0f, 0.0f};
          // padded leading dimensions (+3) catch versions that assume ld == width
          p.lda = (ta == Trans::No ? K : M) + 3;
          p.ldb = (tb == Trans::No ? N : K) + 3;
          p.ldc = N + 3;
          check_version(v, p, rng);
          p.alpha = -0.5f;
          p.beta = 1.0f;
          check_version(v, p, rng);
          p.beta = 0.25f;
          check_version(v, p, rng);
        }
      }
    }
  }
}

TEST_CASE("sgemm dispatcher: edge sizes and version lookup", "[kernels]") {
  // K = 0: C = beta * C
  std::vector<float> C = {1.0f, 2.0f, 3.0f, 4.0f};
  kernels::sgemm(Trans::No, Trans::No, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2);
  REQUIRE(C == std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f});
  // M = 0 touches nothing
  kernels::sgemm(Trans::No, Trans::No, 0, 2, 3, 1.0f, nullptr, 3, nullptr, 2, 0.0f, C.data(), 2);
  REQUIRE(C[0] == 0.5f);
  REQUIRE(kernels::sgemm_version("1").number == 1);
  REQUIRE(kernels::sgemm_version("v2").number == 2);
  REQUIRE(kernels::sgemm_version("naive").number == 1);
  REQUIRE_THROWS_AS(kernels::sgemm_version("v99"), std::invalid_argument);
}

// v7 claims the arithmetic of v6 element for element (same products, same k order, same
// write-back; only where A is read from changed), and a result independent of the thread
// count (rows of C split, never k): at alpha = 1, what every layer passes, the bits must
// match, on 1 and 2 threads, and sgemm_serial must match both. Shapes: the GPT step's
// (768-row activations), and ragged ones that leave a partial row panel and column panel.
TEST_CASE("sgemm v7 gives v6's bits at alpha 1, on any thread count, and sgemm_serial too", "[kernels]") {
  nn::Rng rng(19);
  const int sizes[][3] = {{768, 128, 384}, {384, 128, 768}, {131, 37, 301}, {25, 65, 300}, {250, 20, 520}};
  const int saved = omp_get_max_threads();
  for (const auto& s : sizes) {
    for (Trans ta : {Trans::No, Trans::Yes}) {
      for (Trans tb : {Trans::No, Trans::Yes}) {
        for (float beta : {0.0f, 1.0f}) {
          const int M = s[0], N = s[1], K = s[2];
          const int lda = (ta == Trans::No ? K : M) + 1, ldb = (tb == Trans::No ? N : K) + 1;
          std::vector<float> A(static_cast<size_t>(ta == Trans::No ? M : K) * lda);
          std::vector<float> B(static_cast<size_t>(tb == Trans::No ? K : N) * ldb);
          std::vector<float> C0(static_cast<size_t>(M) * N);
          for (float& x : A) x = rng.uniform(-1.0f, 1.0f);
          for (float& x : B) x = rng.uniform(-1.0f, 1.0f);
          for (float& x : C0) x = rng.uniform(-1.0f, 1.0f);
          std::vector<float> c6 = C0, c7_1 = C0, c7_2 = C0, serial = C0;
          omp_set_num_threads(2);
          kernels::sgemm_v6(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, beta, c6.data(), N);
          kernels::sgemm_v7(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, beta, c7_2.data(), N);
          omp_set_num_threads(1);
          kernels::sgemm_v7(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, beta, c7_1.data(), N);
          omp_set_num_threads(saved);
          kernels::sgemm_serial(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, beta, serial.data(), N);
          INFO("M=" << M << " N=" << N << " K=" << K << " ta=" << (ta == Trans::Yes) << " tb=" << (tb == Trans::Yes)
                    << " beta=" << beta);
          REQUIRE(c7_2 == c6);
          REQUIRE(c7_1 == c6);
          REQUIRE(serial == c6);
        }
      }
    }
  }
}

// sgemm_bias claims the bits of the two passes it replaces (C filled with the bias on every
// row, then sgemm with beta = 1 over it): one rounding of bias + product either way. Ragged
// shapes leave partial row and column panels (the bias of a partial panel comes from its own
// copy), K = 520 spans three k blocks (the bias only on the first), both thread counts; a
// sentinel column past N (ldc = N + 1) must survive, and alpha != 1 scales the product only.
TEST_CASE("sgemm_bias equals filling C with the bias and sgemm with beta 1, bit for bit", "[kernels]") {
  nn::Rng rng(25);
  const int sizes[][3] = {{768, 384, 128}, {768, 128, 512}, {131, 37, 301}, {25, 65, 520}, {7, 3, 5}, {5, 40, 0}};
  const int saved = omp_get_max_threads();
  for (const auto& s : sizes) {
    for (Trans ta : {Trans::No, Trans::Yes}) {
      for (Trans tb : {Trans::No, Trans::Yes}) {
        for (float alpha : {1.0f, 0.5f}) {
          for (int threads : {1, 2}) {
            const int M = s[0], N = s[1], K = s[2], ldc = N + 1;
            const int lda = (ta == Trans::No ? K : M) + 1, ldb = (tb == Trans::No ? N : K) + 1;
            std::vector<float> A(static_cast<size_t>(ta == Trans::No ? M : K) * lda + 1);
            std::vector<float> B(static_cast<size_t>(tb == Trans::No ? K : N) * ldb + 1);
            std::vector<float> bias(N);
            for (float& x : A) x = rng.uniform(-1.0f, 1.0f);
            for (float& x : B) x = rng.uniform(-1.0f, 1.0f);
            for (float& x : bias) x = rng.uniform(-2.0f, 2.0f);
            std::vector<float> two_pass(static_cast<size_t>(M) * ldc, -7.0f), fused = two_pass;
            for (int i = 0; i < M; ++i)
              for (int j = 0; j < N; ++j) two_pass[static_cast<size_t>(i) * ldc + j] = bias[j];
            omp_set_num_threads(threads);
            kernels::sgemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, 1.0f, two_pass.data(), ldc);
            kernels::sgemm_bias(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, bias.data(), fused.data(),
                                ldc);
            omp_set_num_threads(saved);
            INFO("M=" << M << " N=" << N << " K=" << K << " ta=" << (ta == Trans::Yes) << " tb="
                      << (tb == Trans::Yes) << " alpha=" << alpha << " threads=" << threads);
            REQUIRE(fused == two_pass);
            for (int i = 0; i < M; ++i) REQUIRE(fused[static_cast<size_t>(i) * ldc + N] == -7.0f);
          }
        }
      }
    }
  }
}

// scripts/test_simd_paths.sh builds these tests once per SIMD level and says which path it
// means to test (NNLAB_EXPECT_SIMD); this fails when the flags did not select it (a build
// that meant AVX2 but lacked FMA would silently test the portable path twice).
TEST_CASE("the kernels run the SIMD level the build was meant to test", "[kernels][simd-level]") {
  const char* expect = std::getenv("NNLAB_EXPECT_SIMD");
  INFO("kernels/simd.h chose " << kernels::simd::Native::name << " (" << kernels::simd::Native::lanes
                               << " lanes); NNLAB_EXPECT_SIMD=" << (expect ? expect : "(not set)"));
  if (expect != nullptr && *expect != '\0') REQUIRE(std::string(kernels::simd::Native::name) == expect);
  // Whatever the level, its lane count is the register width in floats.
  const int lanes = kernels::simd::Native::lanes;
  REQUIRE((lanes == 4 || lanes == 8 || lanes == 16));
}
