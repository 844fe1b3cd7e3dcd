// Tests of kernels/int8_gemm.h: every int8 GEMM version in this build's table equals v1 bit
// for bit (integers: no tolerance) on sizes that are multiples of nothing (M, N, K odd and
// prime-ish, K up to a few thousand), with the extremes (A in [-128, 127] including -128,
// B in [-127, 127] including +-127: the contract), sentinels after C; v1 itself against a
// hand-computed product; quantize_rows_int8's round trip (error <= s / 2) and all-zero rows;
// w8a8_linear against a double reference on the quantised values. scripts/test_simd_paths.sh
// reruns this file with AVX2 only (v1..v3) and with the portable flags (v1, v2).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ceilings.h"
#include "kernels/int8_gemm.h"
#include "kernels/splitmix64.h"

namespace {

// n int8s uniform in [lo, hi], then the extremes planted at a few places.
std::vector<int8_t> random_int8(size_t n, uint64_t seed, int lo, int hi) {
  std::vector<int8_t> v(n);
  uint64_t s = seed;
  for (int8_t& x : v) {
    s = kernels::splitmix64(s);
    x = static_cast<int8_t>(lo + static_cast<int>((s >> 33) % static_cast<uint64_t>(hi - lo + 1)));
  }
  if (n > 0) v[0] = static_cast<int8_t>(lo);
  if (n > 1) v[n - 1] = static_cast<int8_t>(hi);
  if (n > 2) v[n / 2] = static_cast<int8_t>(lo);
  return v;
}

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed;
  for (float& x : v) {
    s = kernels::splitmix64(s);
    x = static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  return v;
}

}  // namespace

TEST_CASE("int8_gemm v1 by hand", "[int8]") {
  // A (2, 3), B (2, 3): C = A B^T
  const std::vector<int8_t> A = {1, -2, 3, -128, 127, 0};
  const std::vector<int8_t> B = {4, 5, -6, -127, 127, 2};
  std::vector<int32_t> C(4, 12345);
  kernels::int8_gemm_v1(C.data(), A.data(), B.data(), 2, 2, 3);
  CHECK(C[0] == 4 - 10 - 18);
  CHECK(C[1] == -127 - 254 + 6);
  CHECK(C[2] == -512 + 635 + 0);
  CHECK(C[3] == 128 * 127 + 127 * 127 + 0);
}

TEST_CASE("int8_gemm: every version equals v1 exactly on odd sizes and extremes", "[int8]") {
  const auto& versions = kernels::int8_gemm_versions();
  REQUIRE(versions.size() >= 2);
  CHECK(versions.front().number == 1);
  struct Size { int M, N, K; };
  const Size sizes[] = {{1, 1, 1}, {1, 37, 3}, {3, 5, 7}, {7, 33, 65}, {9, 31, 129}, {13, 47, 1001},
                        {17, 70, 2053}, {1, 257, 768}, {33, 65, 4099}, {64, 64, 64}};
  for (const Size& sz : sizes) {
    const auto A = random_int8(static_cast<size_t>(sz.M) * sz.K, 11 + sz.K, -128, 127);
    const auto B = random_int8(static_cast<size_t>(sz.N) * sz.K, 23 + sz.N, -127, 127);
    const size_t nc = static_cast<size_t>(sz.M) * sz.N;
    std::vector<int32_t> want(nc);
    kernels::int8_gemm_v1(want.data(), A.data(), B.data(), sz.M, sz.N, sz.K);
    for (const auto& v : versions) {
      constexpr int32_t kSentinel = 0x5A5A5A5A;
      std::vector<int32_t> got(nc + 16, kSentinel);
      v.fn(got.data(), A.data(), B.data(), sz.M, sz.N, sz.K);
      size_t bad = 0, first = nc;
      for (size_t i = 0; i < nc; ++i)
        if (got[i] != want[i]) {
          ++bad;
          if (first == nc) first = i;
        }
      INFO(v.id() << " " << v.name << " M=" << sz.M << " N=" << sz.N << " K=" << sz.K << ": " << bad
                  << " mismatches, first at " << first << " (got " << (bad ? got[first] : 0) << ", want "
                  << (bad ? want[first] : 0) << ")");
      CHECK(bad == 0);
      for (size_t i = nc; i < nc + 16; ++i) CHECK(got[i] == kSentinel);
    }
  }
}

TEST_CASE("int8_gemm: the largest sums (all -128 x -127 / 127 x 127) stay exact", "[int8]") {
  const int M = 3, N = 35, K = 4100;
  std::vector<int8_t> A(static_cast<size_t>(M) * K, -128), B(static_cast<size_t>(N) * K, -127);
  for (int k = 0; k < K; ++k) A[static_cast<size_t>(K) + k] = 127;  // row 1: 127 x -127
  std::vector<int32_t> want(static_cast<size_t>(M) * N);
  kernels::int8_gemm_v1(want.data(), A.data(), B.data(), M, N, K);
  CHECK(want[0] == 128 * 127 * K);
  CHECK(want[static_cast<size_t>(N)] == -127 * 127 * K);
  for (const auto& v : kernels::int8_gemm_versions()) {
    std::vector<int32_t> got(want.size());
    v.fn(got.data(), A.data(), B.data(), M, N, K);
    INFO(v.id() << " " << v.name);
    CHECK(got == want);
  }
}

TEST_CASE("quantize_rows_int8: round trip within s/2, all-zero rows, range", "[int8]") {
  const int rows = 5, cols = 77;
  std::vector<float> x = random_floats(static_cast<size_t>(rows) * cols, 5);
  for (int c = 0; c < cols; ++c) x[static_cast<size_t>(2) * cols + c] = 0.0f;  // row 2 all zero
  x[3] = 9.5f;                                                               // row 0: one outlier
  std::vector<int8_t> q(x.size());
  std::vector<float> s(rows, -1.0f);
  kernels::quantize_rows_int8(x.data(), rows, cols, q.data(), s.data());
  CHECK(s[2] == 0.0f);
  CHECK(std::fabs(s[0] - 9.5f / 127.0f) < 1e-7f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r) * cols + c;
      CHECK(q[i] != -128);  // the range is [-127, 127]: the AVX2 rung's contract for B
      const double back = static_cast<double>(s[static_cast<size_t>(r)]) * q[i];
      INFO("row " << r << " col " << c << ": x " << x[i] << " back " << back);
      CHECK(std::fabs(back - x[i]) <= 0.5 * s[static_cast<size_t>(r)] * (1 + 1e-5) + 1e-12);
      if (r == 2) CHECK(q[i] == 0);
    }
  CHECK(q[3] == 127);
}

TEST_CASE("w8a8_linear matches a double reference on the quantised values", "[int8]") {
  const int M = 6, N = 41, K = 203;
  std::vector<float> x = random_floats(static_cast<size_t>(M) * K, 7);
  for (int k = 0; k < K; ++k) x[static_cast<size_t>(4) * K + k] = 0.0f;  // an all-zero token
  const std::vector<float> w = random_floats(static_cast<size_t>(N) * K, 8);
  const std::vector<float> bias = random_floats(static_cast<size_t>(N), 9);
  std::vector<int8_t> wq(w.size()), xq(x.size());
  std::vector<float> ws(N), xs(M);
  kernels::quantize_rows_int8(w.data(), N, K, wq.data(), ws.data());
  kernels::quantize_rows_int8(x.data(), M, K, xq.data(), xs.data());
  std::vector<unsigned char> scratch(kernels::w8a8_scratch_bytes(M, N, K));
  std::vector<float> y(static_cast<size_t>(M) * N, NAN);
  kernels::w8a8_linear(y.data(), x.data(), wq.data(), ws.data(), bias.data(), M, N, K, scratch.data());
  double worst_vs_float = 0.0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double dot = 0.0, exact = 0.0;
      for (int k = 0; k < K; ++k) {
        dot += static_cast<double>(xq[static_cast<size_t>(m) * K + k]) * wq[static_cast<size_t>(n) * K + k];
        exact += static_cast<double>(x[static_cast<size_t>(m) * K + k]) * w[static_cast<size_t>(n) * K + k];
      }
      const double want = static_cast<double>(xs[static_cast<size_t>(m)]) * ws[static_cast<size_t>(n)] * dot + bias[static_cast<size_t>(n)];
      const float got = y[static_cast<size_t>(m) * N + n];
      INFO("y[" << m << "][" << n << "] = " << got << ", reference " << want);
      CHECK(std::fabs(got - want) <= 1e-5 + 1e-5 * std::fabs(want));
      if (m == 4) CHECK(got == bias[static_cast<size_t>(n)]);
      worst_vs_float = std::max(worst_vs_float, std::fabs(got - (exact + bias[static_cast<size_t>(n)])));
    }
  // and the quantisation error itself is small against fp32's answer (|dot| ~ sqrt(K)/3)
  CHECK(worst_vs_float < 0.1);
}

TEST_CASE("measure_int8_peak returns a positive rate and names its instruction", "[int8]") {
  const double peak = kernels::measure_int8_peak(1, 0.02);
  INFO(kernels::int8_peak_method() << ": " << peak / 1e9 << " GOP/s");
  CHECK(std::isfinite(peak));
  CHECK(peak > 1e8);  // any machine of this century does 0.1 G int8 multiply-adds per second
  CHECK(std::string(kernels::int8_peak_method()).size() > 3);
}
