// Tests of exercise 36_ternary_quantize. The absmean scale and the levels of a small matrix by
// hand; an all-zero matrix (no NaN); the packing's bytes by hand; and the matvec against
// gamma * Q x computed with multiplications, on odd sizes.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "exercises/36_ternary_quantize/ternary.h"
#include "exercises/test_util.h"

TEST_CASE("ternary_quantize: absmean scale and levels by hand", "[ex36]") {
  const std::vector<float> w = {0.9f, -0.2f, 0.05f, -1.6f, 0.3f, 0.0f, 0.7f, -0.4f};
  // mean |w| = (0.9 + 0.2 + 0.05 + 1.6 + 0.3 + 0 + 0.7 + 0.4) / 8 = 4.15 / 8 = 0.51875
  // w / gamma = 1.73, -0.39, 0.096, -3.08, 0.578, 0, 1.35, -0.77 -> 1, 0, 0, -1, 1, 0, 1, -1
  const std::vector<int> want = {1, 0, 0, -1, 1, 0, 1, -1};
  std::vector<int8_t> q(w.size() + 2, 99);
  const float gamma = ex::ternary_quantize(q.data(), w.data(), static_cast<int>(w.size()));
  INFO("gamma: got " << gamma << ", want 0.51875 (the mean of |w|)");
  if (ex_test::close(gamma, 1.6, 0, 1e-5)) FAIL("Likely cause: gamma is the largest |w| (absmax), not the mean");
  CHECK(ex_test::close(gamma, 0.51875, 0, 1e-5));
  for (size_t i = 0; i < w.size(); ++i) {
    INFO("q[" << i << "] for w = " << w[i] << ": got " << int(q[i]) << ", want " << want[i]);
    CHECK(int(q[i]) == want[i]);
  }
  CHECK(q[w.size()] == 99);  // nothing written past the end
}

TEST_CASE("ternary_quantize: an all-zero matrix gives gamma 0 and zeros", "[ex36]") {
  const std::vector<float> w(12, 0.0f);
  std::vector<int8_t> q(12, 7);
  const float gamma = ex::ternary_quantize(q.data(), w.data(), 12);
  CHECK(gamma == 0.0f);
  for (int8_t v : q) CHECK(int(v) == 0);
}

TEST_CASE("ternary_pack: four weights a byte, by hand", "[ex36]") {
  const std::vector<int8_t> q = {1, -1, 0, 1, 0, 0, -1, -1};
  // byte 0: 1 | 2 << 2 | 0 << 4 | 1 << 6 = 1 + 8 + 64 = 73; byte 1: 2 << 4 | 2 << 6 = 32 + 128 = 160
  std::vector<uint8_t> p(3, 0xEE);
  ex::ternary_pack(p.data(), q.data(), 8);
  INFO("bytes: got " << int(p[0]) << ", " << int(p[1]) << "; want 73, 160");
  CHECK(int(p[0]) == 73);
  CHECK(int(p[1]) == 160);
  CHECK(int(p[2]) == 0xEE);
}

TEST_CASE("ternary_matvec: gamma Q x without a multiplication per weight", "[ex36]") {
  nn::Rng rng(36);
  const int rows = 13, cols = 52;
  const std::vector<float> w = ex_test::random_normal(rng, rows * cols), x = ex_test::random_normal(rng, cols);
  std::vector<int8_t> q(rows * cols);
  const float gamma = ex::ternary_quantize(q.data(), w.data(), rows * cols);
  std::vector<uint8_t> packed(rows * cols / 4);
  ex::ternary_pack(packed.data(), q.data(), rows * cols);
  std::vector<float> y = ex_test::output_buffer(rows);
  ex::ternary_matvec(y.data(), packed.data(), gamma, x.data(), rows, cols);
  const std::string damage = ex_test::guard_damage(y, rows, "y");
  if (!damage.empty()) FAIL(damage);
  for (int r = 0; r < rows; ++r) {
    double want = 0.0;
    for (int c = 0; c < cols; ++c) want += static_cast<double>(q[r * cols + c]) * x[c];
    want *= gamma;
    INFO("y[" << r << "]: got " << y[r] << ", want " << want);
    CHECK(ex_test::close(y[r], want, 1e-5, 1e-5));
  }
}
