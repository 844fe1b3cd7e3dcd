// tests/gradcheck_test_util.h: what the gradient-check tests share (random inputs in
// double, a dot product, the check that a gradient is right AND not trivially zero, and the
// central difference of a whole model's loss in one of its float parameters).
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "nn/gradcheck.h"
#include "nn/rng.h"

namespace testing {

// (f(p + h) - f(p - h)) / 2h with p changed in place and restored: the derivative of a scalar
// function (a model's loss, a dot product with the output) in one float it reads.
template <class F>
double central_difference(float& p, float h, F&& f) {
  const float saved = p;
  p = saved + h;
  const double fp = f();
  p = saved - h;
  const double fm = f();
  p = saved;
  return (fp - fm) / (2.0 * h);
}

// n draws of scale * N(0, 1).
inline std::vector<double> normal_vec(nn::Rng& rng, size_t n, double scale = 1.0) {
  std::vector<double> v(n);
  for (double& x : v) x = scale * rng.normal();
  return v;
}

// n draws uniform in [lo, hi).
inline std::vector<double> uniform_vec(nn::Rng& rng, size_t n, double lo = -1.0, double hi = 1.0) {
  std::vector<double> v(n);
  for (double& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The finite-difference check passed, and g (the analytic gradient it checked) is far from zero,
// so it did not pass by accident.
inline void require_grad(const nn::GradCheckResult& res, const std::vector<double>& g) {
  INFO(res.report);
  CAPTURE(res.max_abs_err, res.max_rel_err);
  REQUIRE(res.ok);
  REQUIRE(dot(g, g) > 1e-4);
}

}  // namespace testing
