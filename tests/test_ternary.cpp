// Tests of kernels/ternary.h: the packing by hand, the absmean scale, and every matvec version
// against v1 (and v1 against gamma Q x in double) on odd sizes, batch 1 and more, with cols
// not a multiple of the SIMD width (the tail) and the machine's SIMD path (v2, v3: AVX-512 or
// AVX2 where the build has it; scripts/test_simd_paths.sh reruns this file with AVX2 only and
// with the portable flags).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/int8_gemm.h"
#include "kernels/splitmix64.h"
#include "kernels/ternary.h"

namespace {

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

TEST_CASE("ternary_pack: absmean scale, levels and bytes by hand", "[ternary]") {
  const std::vector<float> w = {0.9f, -0.2f, 0.05f, -1.6f, 0.3f, 0.0f, 0.7f, -0.4f};
  std::vector<uint8_t> p(2, 0xFF);
  const float gamma = kernels::ternary_pack(w.data(), 1, 8, p.data());
  CHECK(std::fabs(gamma - 0.51875f) < 1e-6f);
  // levels 1, 0, 0, -1 | 1, 0, 1, -1 -> codes 1,0,0,2 | 1,0,1,2
  CHECK(int(p[0]) == (1 | 2 << 6));
  CHECK(int(p[1]) == (1 | 1 << 4 | 2 << 6));
  std::vector<float> back(8);
  kernels::ternary_unpack(p.data(), gamma, 1, 8, back.data());
  const std::vector<float> want = {gamma, 0, 0, -gamma, gamma, 0, gamma, -gamma};
  CHECK(back == want);
}

TEST_CASE("ternary_pack: a zero matrix and bad shapes", "[ternary]") {
  const std::vector<float> z(12, 0.0f);
  std::vector<uint8_t> p(3, 0xFF);
  CHECK(kernels::ternary_pack(z.data(), 3, 4, p.data()) == 0.0f);
  for (uint8_t b : p) CHECK(int(b) == 0);
  CHECK_THROWS_AS(kernels::ternary_pack(z.data(), 2, 6, p.data()), std::invalid_argument);
  std::vector<float> y(2), x(6);
  for (const auto& v : kernels::ternary_matvec_versions())
    CHECK_THROWS_AS(v.fn(y.data(), x.data(), p.data(), 1.0f, 2, 6, 1), std::invalid_argument);
}

TEST_CASE("ternary_matvec: every version agrees with gamma Q x", "[ternary]") {
  struct Shape {
    int rows, cols, n;
  };
  for (const Shape s : {Shape{1, 4, 1}, Shape{7, 20, 1}, Shape{33, 52, 3}, Shape{129, 772, 1}, Shape{64, 768, 5}}) {
    const std::vector<float> w = random_floats(static_cast<size_t>(s.rows) * s.cols, 11 + s.cols);
    const std::vector<float> x = random_floats(static_cast<size_t>(s.n) * s.cols, 7 + s.rows);
    std::vector<uint8_t> p(static_cast<size_t>(s.rows) * s.cols / 4);
    const float gamma = kernels::ternary_pack(w.data(), s.rows, s.cols, p.data());
    std::vector<float> q(w.size());
    kernels::ternary_unpack(p.data(), gamma, s.rows, s.cols, q.data());
    int nonzero = 0;
    for (float v : q) nonzero += v != 0.0f;
    REQUIRE(nonzero > static_cast<int>(q.size()) / 4);  // a real mix of levels, not all zero
    for (const auto& v : kernels::ternary_matvec_versions()) {
      if (v.number > 3) continue;  // v4, v5 round x to int8: their own tests below
      std::vector<float> y(static_cast<size_t>(s.n) * s.rows, NAN);
      v.fn(y.data(), x.data(), p.data(), gamma, s.rows, s.cols, s.n);
      for (int i = 0; i < s.n; ++i)
        for (int r = 0; r < s.rows; ++r) {
          double want = 0.0, mag = 0.0;
          for (int c = 0; c < s.cols; ++c) {
            want += static_cast<double>(q[static_cast<size_t>(r) * s.cols + c]) * x[static_cast<size_t>(i) * s.cols + c];
            mag += std::fabs(static_cast<double>(gamma) * x[static_cast<size_t>(i) * s.cols + c]);
          }
          const float got = y[static_cast<size_t>(i) * s.rows + r];
          INFO(v.id() << " (" << v.name << ") at " << s.rows << "x" << s.cols << " n " << s.n << ": y[" << i << "]["
                      << r << "] = " << got << ", want " << want);
          REQUIRE(std::fabs(got - want) <= 1e-5 * mag + 1e-6);
        }
    }
  }
}

TEST_CASE("ternary_matvec: v3 gives v2's bits", "[ternary]") {
  const int rows = 301, cols = 1028, n = 2;
  const std::vector<float> w = random_floats(static_cast<size_t>(rows) * cols, 5), x = random_floats(n * cols, 6);
  std::vector<uint8_t> p(static_cast<size_t>(rows) * cols / 4);
  const float gamma = kernels::ternary_pack(w.data(), rows, cols, p.data());
  std::vector<float> y2(n * rows), y3(n * rows);
  kernels::ternary_matvec_v2(y2.data(), x.data(), p.data(), gamma, rows, cols, n);
  kernels::ternary_matvec_v3(y3.data(), x.data(), p.data(), gamma, rows, cols, n);
  CHECK(y2 == y3);
}

// ---- v4, v5: int8 activations ----------------------------------------------------------------

namespace {

// The int8 rungs (v4, v5) from the table.
std::vector<kernels::TernaryMatvecVersion> int8_rungs() {
  std::vector<kernels::TernaryMatvecVersion> out;
  for (const auto& v : kernels::ternary_matvec_versions())
    if (v.number >= 4) out.push_back(v);
  return out;
}

// y (n * rows) from fn, with a sentinel after the outputs (an overrun would change it).
std::vector<float> run_rung(kernels::TernaryMatvecFn fn, const std::vector<float>& x, const std::vector<uint8_t>& p,
                            float gamma, int rows, int cols, int n) {
  std::vector<float> y(static_cast<size_t>(n) * rows + 1, NAN);
  y.back() = 12345.0f;
  fn(y.data(), x.data(), p.data(), gamma, rows, cols, n);
  CHECK(y.back() == 12345.0f);
  y.pop_back();
  return y;
}

}  // namespace

TEST_CASE("ternary_matvec v4 v5: the int8 reference's bits on odd shapes", "[ternary]") {
  REQUIRE(int8_rungs().size() == 2);
  struct Shape {
    int rows, cols;
  };
  // cols: below one 64-block, a multiple of 4 not of 64 (the tail), several blocks plus a tail,
  // not a multiple of the 4-block unroll; rows not a multiple of anything
  for (const Shape s : {Shape{1, 4}, Shape{3, 60}, Shape{7, 68}, Shape{33, 196}, Shape{129, 772}, Shape{17, 1028},
                        Shape{65, 320}}) {
    const std::vector<float> w = random_floats(static_cast<size_t>(s.rows) * s.cols, 21 + s.cols);
    std::vector<uint8_t> p(static_cast<size_t>(s.rows) * s.cols / 4);
    const float gamma = kernels::ternary_pack(w.data(), s.rows, s.cols, p.data());
    for (int n = 1; n <= 5; ++n) {
      std::vector<float> x = random_floats(static_cast<size_t>(n) * s.cols, 31 + s.rows + n);
      for (size_t k = 0; k < x.size(); k += 7) x[k] *= 9.0f;  // outliers: most q_x small, a few at +-127
      std::vector<float> ref(static_cast<size_t>(n) * s.rows, NAN);
      kernels::ternary_matvec_int8_ref(ref.data(), x.data(), p.data(), gamma, s.rows, s.cols, n);
      for (float v : ref) REQUIRE(std::isfinite(v));
      for (const auto& v : int8_rungs()) {
        const std::vector<float> y = run_rung(v.fn, x, p, gamma, s.rows, s.cols, n);
        for (size_t k = 0; k < y.size(); ++k) {
          INFO(v.id() << " (" << v.name << ") at " << s.rows << "x" << s.cols << " n " << n << ": y[" << k
                      << "] = " << y[k] << ", reference " << ref[k]);
          REQUIRE(y[k] == ref[k]);
        }
      }
    }
  }
}

TEST_CASE("ternary_matvec int8 reference: within the quantisation bound of v1", "[ternary]") {
  // y_int8 - y_v1 = gamma sum_c q_w[c] (s q_x[c] - x[c]), |s q_x - x| <= s / 2 (round to nearest;
  // q_x never clamps, max |x| / s = 127), so |difference| <= gamma * s / 2 * (nonzero weights of
  // the row), plus v1's own float rounding. The bound is tight enough to fail: forgetting the
  // sum q_x correction, a wrong permutation or a wrong scale each miss it by far.
  const int rows = 97, cols = 516, n = 3;
  const std::vector<float> w = random_floats(static_cast<size_t>(rows) * cols, 41);
  const std::vector<float> x = random_floats(static_cast<size_t>(n) * cols, 42);
  std::vector<uint8_t> p(static_cast<size_t>(rows) * cols / 4);
  const float gamma = kernels::ternary_pack(w.data(), rows, cols, p.data());
  std::vector<float> q(w.size());
  kernels::ternary_unpack(p.data(), gamma, rows, cols, q.data());
  std::vector<int8_t> qx(x.size());
  std::vector<float> sx(n);
  kernels::quantize_rows_int8(x.data(), n, cols, qx.data(), sx.data());
  std::vector<float> y1(static_cast<size_t>(n) * rows);
  kernels::ternary_matvec_v1(y1.data(), x.data(), p.data(), gamma, rows, cols, n);
  double worst = 0.0;  // the largest |difference| / bound seen: the bound must not be vacuous
  for (const auto& v : int8_rungs()) {
    const std::vector<float> y = run_rung(v.fn, x, p, gamma, rows, cols, n);
    for (int i = 0; i < n; ++i)
      for (int r = 0; r < rows; ++r) {
        int nonzero = 0;
        double mag = 0.0;
        for (int c = 0; c < cols; ++c) {
          nonzero += q[static_cast<size_t>(r) * cols + c] != 0.0f;
          mag += std::fabs(static_cast<double>(gamma) * x[static_cast<size_t>(i) * cols + c]);
        }
        const double bound = gamma * (sx[static_cast<size_t>(i)] / 2.0) * nonzero * (1.0 + 1e-4) + 1e-5 * mag + 1e-6;
        const size_t k = static_cast<size_t>(i) * rows + r;
        const double diff = std::fabs(static_cast<double>(y[k]) - y1[k]);
        INFO(v.id() << " y[" << i << "][" << r << "] = " << y[k] << ", v1 " << y1[k] << ", bound " << bound);
        REQUIRE(diff <= bound);
        worst = std::max(worst, diff / bound);
      }
  }
  // the rounding errors are random, so their sum is ~sqrt(nonzero) of the worst case: well
  // inside, yet not zero (a test of the bound, not of equality)
  CHECK(worst > 0.001);
  CHECK(worst < 0.5);
}

TEST_CASE("ternary_matvec v4 v5: zero rows, zero inputs and extremes", "[ternary]") {
  const int rows = 5, cols = 4100, n = 3;  // 64 blocks + a 4-column tail
  const size_t rb = cols / 4;
  std::vector<uint8_t> p(static_cast<size_t>(rows) * rb);
  // row 0 all +1 (code 1: 0x55), row 1 all -1 (code 2: 0xAA), row 2 all zero, row 3 +1/-1
  // alternating (0x99: codes 1, 2, 1, 2), row 4 every weight code 3 (never written by the
  // packer: read as 0 by every version)
  const uint8_t fill[rows] = {0x55, 0xAA, 0x00, 0x99, 0xFF};
  for (int r = 0; r < rows; ++r) std::fill_n(p.begin() + static_cast<long>(r * rb), rb, fill[r]);
  // token 0: x = 1 everywhere (q = 127, the largest |sum|: 127 * cols); token 1: all zero
  // (s = 0: y must be 0, not NaN); token 2: x = -3.5 everywhere (q = -127)
  std::vector<float> x(static_cast<size_t>(n) * cols);
  for (int c = 0; c < cols; ++c) {
    x[c] = 1.0f;
    x[static_cast<size_t>(cols) + c] = 0.0f;
    x[2 * static_cast<size_t>(cols) + c] = -3.5f;
  }
  const float gamma = 0.75f;
  std::vector<float> ref(static_cast<size_t>(n) * rows);
  kernels::ternary_matvec_int8_ref(ref.data(), x.data(), p.data(), gamma, rows, cols, n);
  const float s0 = 1.0f / 127.0f, s2 = 3.5f / 127.0f;
  const float want[n][rows] = {
      {(gamma * s0) * (127.0f * cols), (gamma * s0) * (-127.0f * cols), 0.0f, 0.0f, 0.0f},
      {0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
      {(gamma * s2) * (-127.0f * cols), (gamma * s2) * (127.0f * cols), 0.0f, 0.0f, 0.0f}};
  for (int i = 0; i < n; ++i)
    for (int r = 0; r < rows; ++r) {
      INFO("reference y[" << i << "][" << r << "] = " << ref[static_cast<size_t>(i) * rows + r]);
      CHECK(ref[static_cast<size_t>(i) * rows + r] == want[i][r]);
    }
  for (const auto& v : int8_rungs()) {
    const std::vector<float> y = run_rung(v.fn, x, p, gamma, rows, cols, n);
    for (size_t k = 0; k < y.size(); ++k) {
      INFO(v.id() << " y[" << k << "] = " << y[k] << ", reference " << ref[k]);
      CHECK(y[k] == ref[k]);
    }
  }
}
