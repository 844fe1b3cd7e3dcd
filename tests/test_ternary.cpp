// Tests of kernels/ternary.h: the packing by hand, the absmean scale, and every matvec version
// against v1 (and v1 against gamma Q x in double) on odd sizes, batch 1 and more, with cols
// not a multiple of the SIMD width (the tail) and the machine's SIMD path (v2, v3: AVX-512 or
// AVX2 where the build has it; scripts/test_simd_paths.sh reruns this file with AVX2 only and
// with the portable flags).
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

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
