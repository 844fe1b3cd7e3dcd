// Tests of exercise 29_receding_horizon_step. The rollout against the model run in double
// (with the dead time's off-by-ones named); the gradient against central finite differences
// of the cost written out here in double (the cost is quadratic in the moves, so central
// differences are exact up to rounding: any mismatch is the gradient's); the returned cost;
// the projection onto the pump's range, and that a small projected step lowers the cost.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/29_receding_horizon_step/receding_horizon_step.h"
#include "exercises/test_util.h"
#include "nn/rng.h"

namespace {

struct Case {
  float a, b;
  int d, H;
  float lambda;
  uint64_t seed;
};

struct Data {
  ex::Horizon h;
  std::vector<float> past, ref, m;
};

Data make(const Case& c) {
  nn::Rng rng(c.seed);
  Data dt;
  dt.past = ex_test::random_normal(rng, static_cast<size_t>(c.d), 0.5f);
  dt.ref = ex_test::random_normal(rng, static_cast<size_t>(c.H));
  dt.m = ex_test::random_normal(rng, static_cast<size_t>(c.H), 0.5f);
  dt.h.a = c.a;
  dt.h.b = c.b;
  dt.h.d = c.d;
  dt.h.H = c.H;
  dt.h.lambda = c.lambda;
  dt.h.y0 = rng.normal(0.0f, 1.0f);
  dt.h.past = dt.past.data();
  dt.h.u_prev = c.d > 0 ? dt.past.back() : rng.normal(0.0f, 0.5f);
  dt.h.ref = dt.ref.data();
  return dt;
}

// The model in double; `shift` moves the input one step off (the dead time's off-by-ones).
std::vector<double> ref_rollout(const ex::Horizon& h, const std::vector<double>& m, int shift = 0) {
  std::vector<double> y(static_cast<size_t>(h.H));
  double prev = h.y0;
  for (int k = 0; k < h.H; ++k) {
    const int j = k - h.d + shift;
    double u = 0.0;
    if (j >= 0) {
      u = j < h.H ? m[static_cast<size_t>(j)] : 0.0;
    } else if (h.d + j >= 0) {
      u = h.past[h.d + j];
    } else {
      u = h.u_prev;  // before the pipe's oldest value: only a shifted (wrong) rollout asks
    }
    y[static_cast<size_t>(k)] = static_cast<double>(h.a) * prev + static_cast<double>(h.b) * u;
    prev = y[static_cast<size_t>(k)];
  }
  return y;
}

double ref_cost(const ex::Horizon& h, const std::vector<double>& m) {
  const std::vector<double> y = ref_rollout(h, m);
  double J = 0.0;
  for (int k = 0; k < h.H; ++k) {
    const double e = static_cast<double>(h.ref[k]) - y[static_cast<size_t>(k)];
    J += e * e;
  }
  for (int j = 0; j < h.H; ++j) {
    const double du = m[static_cast<size_t>(j)] - (j == 0 ? static_cast<double>(h.u_prev) : m[static_cast<size_t>(j) - 1]);
    J += static_cast<double>(h.lambda) * du * du;
  }
  return J;
}

// Central differences, exact for a quadratic up to rounding.
std::vector<double> fd_gradient(const ex::Horizon& h, const std::vector<double>& m, double eps = 1e-3) {
  std::vector<double> g(m.size());
  for (size_t j = 0; j < m.size(); ++j) {
    std::vector<double> p = m, q = m;
    p[j] += eps;
    q[j] -= eps;
    g[j] = (ref_cost(h, p) - ref_cost(h, q)) / (2.0 * eps);
  }
  return g;
}

std::string shape(const Case& c) {
  std::ostringstream os;
  os << "a = " << c.a << ", b = " << c.b << ", dead time d = " << c.d << ", horizon H = " << c.H
     << ", lambda = " << c.lambda;
  return os.str();
}

void check_rollout(const Case& c) {
  const Data dt = make(c);
  const auto H = static_cast<size_t>(c.H);
  std::vector<float> y = ex_test::output_buffer(H);
  ex::rollout(dt.h, dt.m.data(), y.data());
  const std::vector<double> md = ex_test::to_double(dt.m);
  const std::vector<double> want = ref_rollout(dt.h, md);
  const std::vector<double> early = ref_rollout(dt.h, md, +1);
  const std::vector<double> late = ref_rollout(dt.h, md, -1);
  const std::string cause = ex_test::diagnose(
      {y.data(), H}, want, 1e-5, 1e-5,
      {{"the input arrives one step early: y(t+k+1) is made by u(t+k-d), not u(t+k-d+1)",
        [&](size_t i) { return ex_test::close(y[i], early[i], 1e-5, 1e-5); }},
       {"the input arrives one step late: y(t+k+1) is made by u(t+k-d), not u(t+k-d-1)",
        [&](size_t i) { return ex_test::close(y[i], late[i], 1e-5, 1e-5); }}});
  const auto cmp = ex_test::compare("y", {y.data(), H}, want, 1e-5, 1e-5, [&](size_t k) {
    std::ostringstream os;
    os << "y(t+" << k + 1 << "), made by u(t" << (static_cast<int>(k) - c.d >= 0 ? "+" : "")
       << static_cast<int>(k) - c.d << ")";
    return os.str();
  });
  INFO(shape(c) << "\n" << cmp.report << cause);
  CHECK(cmp.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(y, H, "y");
  INFO(overrun);
  CHECK(overrun.empty());
}

void check_gradient(const Case& c) {
  const Data dt = make(c);
  const auto H = static_cast<size_t>(c.H);
  std::vector<float> grad = ex_test::output_buffer(H);
  const float J = ex::cost_gradient(dt.h, dt.m.data(), grad.data());
  const std::vector<double> md = ex_test::to_double(dt.m);
  const std::vector<double> want = fd_gradient(dt.h, md);
  const double want_J = ref_cost(dt.h, md);

  // Known mistakes, recomputed in double: no move penalty, no flow back through a (each move
  // credited only with the output it makes directly), the sign flipped.
  ex::Horizon no_penalty = dt.h;
  no_penalty.lambda = 0.0f;
  const std::vector<double> g_no_penalty = fd_gradient(no_penalty, md);
  std::vector<double> g_direct(H, 0.0);
  {
    const std::vector<double> y = ref_rollout(dt.h, md);
    for (int k = 0; k < c.H; ++k) {
      const int j = k - c.d;
      if (j >= 0) g_direct[static_cast<size_t>(j)] += c.b * -2.0 * (dt.ref[static_cast<size_t>(k)] - y[static_cast<size_t>(k)]);
    }
    for (size_t j = 0; j < H; ++j) g_direct[j] += want[j] - g_no_penalty[j];
  }
  const std::string cause = ex_test::diagnose(
      {grad.data(), H}, want, 1e-4, 1e-4,
      {{"the move penalty's part is missing: lambda (m[j] - m[j-1])^2 depends on m[j] AND on m[j-1]",
        [&](size_t i) { return ex_test::close(grad[i], g_no_penalty[i], 1e-4, 1e-4); }},
       {"each move got only the output it makes directly; y(t+k+1) feeds y(t+k+2) through a, so the "
        "backward sum is g = -2 (r - y) + a * g_next",
        [&](size_t i) { return ex_test::close(grad[i], g_direct[i], 1e-4, 1e-4); }},
       {"the sign is flipped: this is -dJ/dm (the step direction, not the gradient)",
        [&](size_t i) { return ex_test::close(grad[i], -want[i], 1e-4, 1e-4); }}});
  const auto cmp = ex_test::compare("grad", {grad.data(), H}, want, 1e-4, 1e-4, [&](size_t j) {
    std::ostringstream os;
    os << "dJ/dm[" << j << "] by central differences, m[" << j << "] = " << dt.m[j];
    return os.str();
  });
  INFO(shape(c) << "\n" << cmp.report << cause);
  CHECK(cmp.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(grad, H, "grad");
  INFO(overrun);
  CHECK(overrun.empty());
  INFO(shape(c) << "\nthe returned cost J = " << J << ", expected " << want_J);
  CHECK(ex_test::close(J, want_J, 1e-4, 1e-5));
}

}  // namespace

TEST_CASE("rollout: y(t+k+1) = a y(t+k) + b u(t+k-d), past inputs first", "[29_receding_horizon_step]") {
  check_rollout({0.95f, 0.5f, 0, 6, 0.1f, 2901});
  check_rollout({0.9f, 0.8f, 3, 11, 0.0f, 2902});
  check_rollout({0.98f, 0.3f, 5, 4, 0.5f, 2903});  // d >= H: the horizon sees only the pipe
  check_rollout({0.7f, -0.6f, 1, 9, 1.0f, 2904});
}

TEST_CASE("cost_gradient: the backward pass through the rollout matches finite differences",
          "[29_receding_horizon_step]") {
  check_gradient({0.95f, 0.5f, 0, 6, 0.1f, 2911});
  check_gradient({0.9f, 0.8f, 3, 11, 0.0f, 2912});
  check_gradient({0.98f, 0.3f, 5, 4, 0.5f, 2913});
  check_gradient({0.7f, -0.6f, 1, 9, 1.0f, 2914});
  check_gradient({0.99f, 1.2f, 2, 1, 0.2f, 2915});  // a one-step horizon
}

TEST_CASE("projected_step: a gradient step, clamped to the pump's range", "[29_receding_horizon_step]") {
  const int H = 7;
  const std::vector<float> m0 = {0.5f, 0.1f, 0.9f, 0.0f, 1.0f, 0.45f, 0.3f};
  const std::vector<float> grad = {0.2f, 3.0f, -4.0f, 1.5f, -0.5f, -0.25f, 0.0f};
  const float step = 0.1f, lo = 0.0f, hi = 1.0f;
  std::vector<float> m = ex_test::output_buffer(static_cast<size_t>(H));
  std::copy(m0.begin(), m0.end(), m.begin());
  ex::projected_step(m.data(), grad.data(), H, step, lo, hi);
  std::vector<double> want(static_cast<size_t>(H)), unclamped(static_cast<size_t>(H)),
      uphill(static_cast<size_t>(H));
  for (size_t j = 0; j < want.size(); ++j) {
    unclamped[j] = static_cast<double>(m0[j]) - step * static_cast<double>(grad[j]);
    want[j] = std::clamp(unclamped[j], 0.0, 1.0);
    uphill[j] = std::clamp(static_cast<double>(m0[j]) + step * static_cast<double>(grad[j]), 0.0, 1.0);
  }
  const std::string cause = ex_test::diagnose(
      {m.data(), want.size()}, want, 1e-6, 1e-6,
      {{"the moves were left as they were: the step changes m in place",
        [&](size_t i) { return m[i] == m0[i]; }},
       {"not clamped: a pump command outside [u_min, u_max] cannot be applied",
        [&](size_t i) { return ex_test::close(m[i], unclamped[i], 1e-6, 1e-6); }},
       {"the step went uphill: m -= step * grad (the gradient points to higher cost)",
        [&](size_t i) { return ex_test::close(m[i], uphill[i], 1e-6, 1e-6); }}});
  const auto cmp = ex_test::compare("m", {m.data(), want.size()}, want, 1e-6, 1e-6, [&](size_t j) {
    std::ostringstream os;
    os << "m = " << m0[j] << ", grad = " << grad[j] << ", step = " << step << ", range [0, 1]";
    return os.str();
  });
  INFO(cmp.report << cause);
  CHECK(cmp.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(m, static_cast<size_t>(H), "m");
  INFO(overrun);
  CHECK(overrun.empty());

  // Together: from moves inside the range, one small projected step with the gradient lowers
  // the cost (a descent step; the projection never undoes that for a convex cost and a box).
  const Case c{0.95f, 0.5f, 2, 10, 0.3f, 2921};
  Data dt = make(c);
  for (float& v : dt.m) v = std::clamp(0.5f + 0.3f * v, 0.0f, 1.0f);
  std::vector<float> g(static_cast<size_t>(c.H));
  ex::cost_gradient(dt.h, dt.m.data(), g.data());
  const double before = ref_cost(dt.h, ex_test::to_double(dt.m));
  ex::projected_step(dt.m.data(), g.data(), c.H, 0.05f, 0.0f, 1.0f);
  const double after = ref_cost(dt.h, ex_test::to_double(dt.m));
  INFO(shape(c) << "\ncost before the step " << before << ", after " << after << ": a small step must lower it");
  CHECK(after < before);
  bool inside = true;
  for (const float v : dt.m) inside = inside && v >= 0.0f && v <= 1.0f;
  CHECK(inside);
}
