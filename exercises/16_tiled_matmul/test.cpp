// Tests of exercise 16_tiled_matmul. They run on the CUDA emulator (on the GPU in
// ex_16_tiled_matmul_gpu). The expected values come from the plain i-j-k loop in double
// precision; sizes are not multiples of the 16 x 16 tile, so the edge tiles must be padded
// with zeros, and K spans several tiles, so both barriers matter.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/16_tiled_matmul/tiled_matmul.h"
#include "exercises/test_util.h"
#include "kernels/cuda/device.h"  // kernels::cuda::Error
#include "nn/rng.h"

namespace {

// The reference: i-j-k, one dot product per element, summed in double.
std::vector<double> reference_matmul(const std::vector<float>& A, const std::vector<float>& B,
                                     int M, int N, int K) {
  const auto m = static_cast<size_t>(M), n = static_cast<size_t>(N), k = static_cast<size_t>(K);
  std::vector<double> C(m * n, 0.0);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (size_t p = 0; p < k; ++p) {
        sum += static_cast<double>(A[i * k + p]) * static_cast<double>(B[p * n + j]);
      }
      C[i * n + j] = sum;
    }
  }
  return C;
}

// Runs matmul_tiled on random A (M, K), B (K, N) into a NaN-filled C and compares with the
// double reference. Returns what went wrong, "" when nothing did.
std::string check_random(int M, int N, int K, uint64_t seed) {
  nn::Rng rng(seed);
  const auto m = static_cast<size_t>(M), n = static_cast<size_t>(N), k = static_cast<size_t>(K);
  const std::vector<float> A = ex_test::random_normal(rng, m * k);
  const std::vector<float> B = ex_test::random_normal(rng, k * n);
  const std::vector<double> want = reference_matmul(A, B, M, N, K);
  std::vector<float> C(m * n, ex_test::kNaN);
  std::ostringstream os;
  os << "M = " << M << ", N = " << N << ", K = " << K << " (grid of " << (N + 15) / 16 << " x "
     << (M + 15) / 16 << " blocks of 16 x 16, " << (K + 15) / 16 << " tiles along k)";
  try {
    ex::matmul_tiled(C.data(), A.data(), B.data(), M, N, K);
  } catch (const kernels::cuda::Error& e) {
    return os.str() + ": the kernel failed:\n  " + e.what() + "\n";
  }
  // Float rounding over K products of size ~1: about K * 6e-8 * sqrt(K); atol covers sums
  // that cancel to near 0. A wrong tile or a missing term is off by ~1, far above this.
  const ex_test::Comparison c =
      ex_test::compare("C", {C.data(), m * n}, want, 1e-4, 1e-4, [&](size_t e) {
        std::ostringstream where;
        where << "row " << e / n << ", column " << e % n << ": block (" << e % n / 16 << ", "
              << e / n / 16 << "), thread (" << e % n % 16 << ", " << e / n % 16
              << "); NaN = never written";
        return where.str();
      });
  if (c.mismatches == 0) return "";
  return os.str() + ":\n" + c.report;
}

void check_shape(int M, int N, int K, uint64_t seed) {
  const std::string problem = check_random(M, N, K, seed);
  INFO(problem);
  CHECK(problem.empty());
}

}  // namespace

TEST_CASE("matmul_tiled: a worked example, (2,3) . (3,2)", "[16_tiled_matmul]") {
  // A = [1 2 3]   B = [1 0]   C = A . B = [1 + 0 + 15   0 + 2 + 18] = [16 20]
  //     [4 5 6]       [0 1]               [4 + 0 + 30   0 + 5 + 36]   [34 41]
  //                   [5 6]
  // One block; one tile along k, of which 3 columns of As and 3 rows of Bs exist: the other
  // 13 must be loaded as 0, or they add garbage to the sums.
  const std::vector<float> A = {1, 2, 3, 4, 5, 6}, B = {1, 0, 0, 1, 5, 6};
  std::vector<float> C(4, ex_test::kNaN);
  std::string error;
  try {
    ex::matmul_tiled(C.data(), A.data(), B.data(), 2, 2, 3);
  } catch (const kernels::cuda::Error& e) {
    error = e.what();
  }
  if (!error.empty()) FAIL("the kernel failed:\n  " << error);
  INFO("A = [1 2 3; 4 5 6], B = [1 0; 0 1; 5 6]: expected C = [16 20; 34 41]");
  const ex_test::Comparison c =
      ex_test::compare("C", {C.data(), 4}, std::vector<double>{16, 20, 34, 41}, 0.0, 0.0);
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("matmul_tiled: sizes the 16 x 16 tile does not divide", "[16_tiled_matmul]") {
  SECTION("1 x 1 x 1") { check_shape(1, 1, 1, 1601); }
  SECTION("M = 17, N = 19, K = 13: edge tiles in every direction, one tile along k") {
    check_shape(17, 19, 13, 1602);
  }
  SECTION("M = 33, N = 5, K = 16: exactly one tile along k") { check_shape(33, 5, 16, 1603); }
  SECTION("M = 16, N = 16, K = 16: one whole tile") { check_shape(16, 16, 16, 1604); }
  SECTION("M = 1, N = 40, K = 7: a single row") { check_shape(1, 40, 7, 1605); }
}

TEST_CASE("matmul_tiled: K of several tiles (where a missing second __syncthreads shows)",
          "[16_tiled_matmul]") {
  // With more than one tile along k, barrier 2 is what keeps the loads of tile k0 + 16 from
  // overwriting tile k0 while other threads still multiply it. The emulator runs a block's
  // threads in turn, each to its next barrier, so without barrier 2 thread 0 overwrites
  // As[0][0] and Bs[0][0] before thread 1 has used them: wrong every time, here.
  SECTION("M = 20, N = 21, K = 70: 5 tiles along k, the last one 6 deep") {
    check_shape(20, 21, 70, 1611);
  }
  SECTION("M = 48, N = 32, K = 64: whole tiles everywhere, 4 along k") {
    check_shape(48, 32, 64, 1612);
  }
  SECTION("M = 37, N = 45, K = 33: 3 tiles along k, the last one 1 deep") {
    check_shape(37, 45, 33, 1613);
  }
}

TEST_CASE("matmul_tiled: K = 0 gives C = 0 (an empty sum)", "[16_tiled_matmul]") {
  std::vector<float> C(6, ex_test::kNaN);
  std::string error;
  try {
    ex::matmul_tiled(C.data(), nullptr, nullptr, 2, 3, 0);
  } catch (const kernels::cuda::Error& e) {
    error = e.what();
  }
  if (!error.empty()) FAIL("the kernel failed:\n  " << error);
  const ex_test::Comparison c =
      ex_test::compare("C", {C.data(), 6}, std::vector<double>(6, 0.0), 0.0, 0.0);
  INFO(c.report);
  CHECK(c.mismatches == 0);
}
