// Tests of exercise 06_matmul_loop_order. The expected values come from the plain i-j-k
// loop in double precision (the reference); the loop order under test must not change
// the result beyond float rounding. (Whether it is faster is for the benchmark, not for
// a test: these tests only check that the answer is right.)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/06_matmul_loop_order/matmul_loop_order.h"
#include "exercises/test_util.h"
#include "nn/rng.h"

namespace {

// The reference: i-j-k, one dot product per element, summed in double.
std::vector<double> reference_matmul(const std::vector<float>& A, const std::vector<float>& B,
                                     int M, int K, int N) {
  std::vector<double> C(static_cast<size_t>(M) * static_cast<size_t>(N));
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double sum = 0.0;
      for (int k = 0; k < K; ++k) {
        sum += static_cast<double>(A[static_cast<size_t>(i) * K + k]) *
               static_cast<double>(B[static_cast<size_t>(k) * N + j]);
      }
      C[static_cast<size_t>(i) * N + j] = sum;
    }
  }
  return C;
}

// "C[i][j] with i = 1, j = 4" for element e of C (M, N).
std::string where(size_t e, int N) {
  std::ostringstream os;
  os << "row i = " << e / static_cast<size_t>(N) << ", column j = " << e % static_cast<size_t>(N);
  return os.str();
}

// Runs matmul_ikj on random A (M, K), B (K, N) into a C that starts as `fill`, and
// compares with the double reference. Returns what went wrong, "" when nothing did.
std::string check_random(int M, int K, int N, uint64_t seed, float fill) {
  nn::Rng rng(seed);
  const size_t na = static_cast<size_t>(M) * K, nb = static_cast<size_t>(K) * N;
  const size_t nc = static_cast<size_t>(M) * N;
  const std::vector<float> A = ex_test::random_normal(rng, na);
  const std::vector<float> B = ex_test::random_normal(rng, nb);
  const std::vector<double> want = reference_matmul(A, B, M, K, N);
  std::vector<float> C = ex_test::output_buffer(nc, fill);
  ex::matmul_ikj(C.data(), A.data(), B.data(), M, K, N);
  // Float rounding over K terms of size ~1: atol covers sums that cancel to near 0.
  const ex_test::Comparison c = ex_test::compare("C", {C.data(), nc}, want, 1e-4, 1e-4,
                                                 [&](size_t e) { return where(e, N); });
  std::ostringstream os;
  if (c.mismatches > 0) {
    os << "M = " << M << ", K = " << K << ", N = " << N << ", C started as " << fill << ":\n"
       << c.report;
  }
  if (c.mismatches > 0 && std::isfinite(fill)) {  // name the bug only when the numbers show it
    const double start = fill;
    os << ex_test::diagnose(
        {C.data(), nc}, want, 1e-4, 1e-4,
        {{"each wrong element is the right value + " + std::to_string(fill).substr(0, 4) +
              ", the value C held before: set each row of C to 0 before adding into it\n",
          [&](size_t e) { return ex_test::close(C[e], want[e] + start, 1e-4, 1e-4); }},
         {"the wrong elements were never written: they still hold the value C started with\n",
          [&](size_t e) { return C[e] == fill; }}});
  }
  os << ex_test::guard_damage(C, nc, "C");
  return os.str();
}

}  // namespace

TEST_CASE("matmul_ikj: a worked example, (2,3) x (3,2)", "[06_matmul_loop_order]") {
  // A = [1 2 3]    B = [ 1  0]    C = A B = [1*1 + 2*2 + 3*0   1*0 + 2*1 + 3*(-1)] = [5 -1]
  //     [4 5 6]        [ 2  1]              [4*1 + 5*2 + 6*0   4*0 + 5*1 + 6*(-1)]   [14 -1]
  //                    [ 0 -1]
  const std::vector<float> A = {1, 2, 3, 4, 5, 6};
  const std::vector<float> B = {1, 0, 2, 1, 0, -1};
  std::vector<float> C = ex_test::output_buffer(4);
  ex::matmul_ikj(C.data(), A.data(), B.data(), 2, 3, 2);
  INFO("A = [1 2 3; 4 5 6] (2,3), B = [1 0; 2 1; 0 -1] (3,2): expected C = [5 -1; 14 -1]");
  const ex_test::Comparison c =
      ex_test::compare("C", {C.data(), 4}, std::vector<double>{5, -1, 14, -1}, 0.0, 0.0,
                       [](size_t e) { return where(e, 2); });
  INFO(c.report);
  CHECK(c.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(C, 4, "C");
  INFO(overrun);
  CHECK(overrun.empty());
}

TEST_CASE("matmul_ikj: random sizes that are not round numbers, against a double reference",
          "[06_matmul_loop_order]") {
  // C starts as NaN: every element must be written, and written with =, not +=.
  SECTION("M = 7, K = 13, N = 5") {
    const std::string problem = check_random(7, 13, 5, 601, ex_test::kNaN);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("M = 1, K = 131, N = 1: a single dot product") {
    const std::string problem = check_random(1, 131, 1, 602, ex_test::kNaN);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("M = 33, K = 17, N = 29") {
    const std::string problem = check_random(33, 17, 29, 603, ex_test::kNaN);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("M = 5, K = 1, N = 3: an outer product") {
    const std::string problem = check_random(5, 1, 3, 604, ex_test::kNaN);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("M = 3, K = 2, N = 70: rows longer than a cache line") {
    const std::string problem = check_random(3, 2, 70, 605, ex_test::kNaN);
    INFO(problem);
    CHECK(problem.empty());
  }
}

TEST_CASE("matmul_ikj: C is overwritten, not accumulated into", "[06_matmul_loop_order]") {
  // A C left over from earlier work (7.0 everywhere) must not leak into the result.
  SECTION("C starts at 7") {
    const std::string problem = check_random(6, 11, 9, 611, 7.0f);
    INFO("C started filled with 7.0: every element must be assigned, whatever C held");
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("calling it twice on the same C gives the same C") {
    nn::Rng rng(612);
    const int M = 4, K = 5, N = 6;
    const std::vector<float> A = ex_test::random_normal(rng, static_cast<size_t>(M) * K);
    const std::vector<float> B = ex_test::random_normal(rng, static_cast<size_t>(K) * N);
    const std::vector<double> want = reference_matmul(A, B, M, K, N);
    std::vector<float> C = ex_test::output_buffer(static_cast<size_t>(M) * N);
    ex::matmul_ikj(C.data(), A.data(), B.data(), M, K, N);
    ex::matmul_ikj(C.data(), A.data(), B.data(), M, K, N);
    INFO("after the second call C must still be A B, not 2 A B");
    const ex_test::Comparison c = ex_test::compare("C", {C.data(), want.size()}, want, 1e-4, 1e-4,
                                                   [&](size_t e) { return where(e, N); });
    INFO(c.report);
    CHECK(c.mismatches == 0);
  }
}

TEST_CASE("matmul_ikj: K = 0 gives C = 0 (an empty sum)", "[06_matmul_loop_order]") {
  // No k to sum over: every C[i][j] is 0. A and B are empty and must not be read.
  const int M = 3, N = 4;
  const std::vector<float> A, B;
  std::vector<float> C = ex_test::output_buffer(static_cast<size_t>(M) * N);  // NaN
  ex::matmul_ikj(C.data(), A.data(), B.data(), M, 0, N);
  const ex_test::Comparison c =
      ex_test::compare("C", {C.data(), static_cast<size_t>(M) * N},
                       std::vector<double>(static_cast<size_t>(M) * N, 0.0), 0.0, 0.0,
                       [&](size_t e) { return where(e, N); });
  INFO(c.report);
  CHECK(c.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(C, static_cast<size_t>(M) * N, "C");
  INFO(overrun);
  CHECK(overrun.empty());
}
