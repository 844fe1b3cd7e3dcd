// Tests of exercise 34_smoothing_factors. The factors by hand for alpha 0, 0.5 and 1; dead
// channels get 1; alpha = 0.5 leaves each channel's activation and weight maxima equal (the
// migration's point); the product X W^T is unchanged after smoothing; and an outlier channel's
// per-token int8 error falls after smoothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "exercises/34_smoothing_factors/smoothing.h"
#include "exercises/test_util.h"

namespace {

std::vector<float> factors(const std::vector<float>& xm, const std::vector<float>& wm, float alpha) {
  std::vector<float> s = ex_test::output_buffer(xm.size());
  ex::smoothing_factors(s.data(), xm.data(), wm.data(), static_cast<int>(xm.size()), alpha);
  const std::string damage = ex_test::guard_damage(s, xm.size(), "s");
  if (!damage.empty()) FAIL(damage);
  s.resize(xm.size());
  return s;
}

// Rows of m (R, K) rounded to per-row symmetric int8 and back.
std::vector<float> int8_rows(const std::vector<float>& m, int R, int K) {
  std::vector<float> out(m.size());
  for (int r = 0; r < R; ++r) {
    float amax = 0.0f;
    for (int j = 0; j < K; ++j) amax = std::max(amax, std::fabs(m[r * K + j]));
    const float sc = amax / 127.0f;
    for (int j = 0; j < K; ++j) out[r * K + j] = sc > 0 ? std::nearbyint(m[r * K + j] / sc) * sc : 0.0f;
  }
  return out;
}

// The largest error of X W^T computed on int8 X (per token) and int8 W (per output channel),
// against `want` (exact, in double).
double w8a8_error(const std::vector<float>& x, const std::vector<float>& w, int T, int K, int N,
                  const std::vector<double>& want) {
  const std::vector<float> xq = int8_rows(x, T, K), wq = int8_rows(w, N, K);
  double worst = 0.0;
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      double got = 0.0;
      for (int j = 0; j < K; ++j) got += static_cast<double>(xq[t * K + j]) * wq[n * K + j];
      worst = std::max(worst, std::fabs(got - want[t * N + n]));
    }
  return worst;
}

}  // namespace

TEST_CASE("smoothing_factors: by hand at alpha 0, 0.5 and 1", "[ex34]") {
  const std::vector<float> xm = {16.0f, 1.0f, 0.25f}, wm = {0.25f, 4.0f, 1.0f};
  const std::vector<float> want0 = {4.0f, 0.25f, 1.0f};   // 1 / w_max
  const std::vector<float> want5 = {8.0f, 0.5f, 0.5f};    // sqrt(x_max / w_max)
  const std::vector<float> want1 = {16.0f, 1.0f, 0.25f};  // x_max
  const std::vector<float> got0 = factors(xm, wm, 0.0f), got5 = factors(xm, wm, 0.5f), got1 = factors(xm, wm, 1.0f);
  for (size_t j = 0; j < xm.size(); ++j) {
    INFO("channel " << j << ": x_max " << xm[j] << ", w_max " << wm[j] << "; got s = " << got0[j] << ", "
                    << got5[j] << ", " << got1[j] << " at alpha 0, 0.5, 1; want " << want0[j] << ", " << want5[j]
                    << ", " << want1[j]);
    if (ex_test::close(got5[j], std::sqrt(wm[j] / xm[j]), 0, 1e-5) && xm[j] != wm[j])
      FAIL("Likely cause: the ratio is upside down: s = x_max^alpha / w_max^(1 - alpha)");
    CHECK(ex_test::close(got0[j], want0[j], 0, 1e-5));
    CHECK(ex_test::close(got5[j], want5[j], 0, 1e-5));
    CHECK(ex_test::close(got1[j], want1[j], 0, 1e-5));
  }
}

TEST_CASE("smoothing_factors: a dead channel or a zero column gets 1", "[ex34]") {
  const std::vector<float> s = factors({0.0f, 3.0f, 0.0f}, {2.0f, 0.0f, 0.0f}, 0.5f);
  for (size_t j = 0; j < s.size(); ++j) {
    INFO("channel " << j << ": got s = " << s[j] << ", want 1 (0 or infinity would destroy the product)");
    CHECK(s[j] == 1.0f);
  }
}

TEST_CASE("smoothing_factors: alpha 0.5 equalises each channel's maxima", "[ex34]") {
  nn::Rng rng(34);
  const int K = 37;
  std::vector<float> xm(K), wm(K);
  for (int j = 0; j < K; ++j) {
    xm[j] = 0.1f + 40.0f * rng.uniform();
    wm[j] = 0.01f + rng.uniform();
  }
  const std::vector<float> s = factors(xm, wm, 0.5f);
  for (int j = 0; j < K; ++j) {
    INFO("channel " << j << ": x_max / s = " << xm[j] / s[j] << ", w_max * s = " << wm[j] * s[j]);
    CHECK(ex_test::close(xm[j] / s[j], wm[j] * s[j], 0, 1e-4));
  }
}

TEST_CASE("apply_smoothing: X W^T unchanged, and an outlier channel no longer sets the int8 scale", "[ex34]") {
  nn::Rng rng(340);
  const int T = 9, K = 23, N = 11;
  std::vector<float> x = ex_test::random_normal(rng, T * K), w = ex_test::random_normal(rng, N * K, 0.1f);
  for (int t = 0; t < T; ++t) x[t * K + 5] *= 60.0f;  // an outlier channel, in every token
  std::vector<double> want(T * N, 0.0);
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < K; ++j) want[t * N + n] += static_cast<double>(x[t * K + j]) * w[n * K + j];
  std::vector<float> xm(K, 0.0f), wm(K, 0.0f);
  for (int j = 0; j < K; ++j) {
    for (int t = 0; t < T; ++t) xm[j] = std::max(xm[j], std::fabs(x[t * K + j]));
    for (int n = 0; n < N; ++n) wm[j] = std::max(wm[j], std::fabs(w[n * K + j]));
  }
  const double err_before = w8a8_error(x, w, T, K, N, want);
  const std::vector<float> s = factors(xm, wm, 0.5f);
  std::vector<float> xs = x, ws = w;
  ex::apply_smoothing(xs.data(), T, ws.data(), N, s.data(), K);
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      double got = 0.0;
      for (int j = 0; j < K; ++j) got += static_cast<double>(xs[t * K + j]) * ws[n * K + j];
      INFO("(X/s)(W s)^T at (" << t << ", " << n << "): got " << got << ", want " << want[t * N + n]);
      if (!ex_test::close(got, want[t * N + n], 1e-4, 1e-4) && xs == x)
        FAIL("Likely cause: x was not divided by s (only w was scaled)");
      REQUIRE(ex_test::close(got, want[t * N + n], 1e-4, 1e-4));
    }
  const double err_after = w8a8_error(xs, ws, T, K, N, want);
  INFO("largest error of X W^T in W8A8: " << err_before << " before smoothing, " << err_after << " after");
  CHECK(err_after < 0.5 * err_before);
}
