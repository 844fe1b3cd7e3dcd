// Tests of exercise 10_rnn_step_backward. The expected values come from
// nn::rnn_cell_backward<double> and nn::rnn_backward<double>; one test checks every
// gradient against finite differences of a loss built on nn::rnn_cell_forward<double>.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/10_rnn_step_backward/rnn_step_backward.h"
#include "exercises/test_util.h"
#include "nn/gradcheck.h"
#include "nn/recurrent.h"
#include "nn/rng.h"

namespace {

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

// "row b = 1, column c = 4" for element i of a (rows, cols) matrix.
std::string where(size_t i, int cols, const char* row_name, const char* col_name) {
  std::ostringstream os;
  os << row_name << " = " << i / static_cast<size_t>(cols) << ", " << col_name << " = "
     << i % static_cast<size_t>(cols);
  return os.str();
}

void check(const ex_test::Comparison& c) {
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

}  // namespace

TEST_CASE("rnn_step_backward: a worked example, B = C = H = 1", "[10_rnn_step_backward]") {
  // x = 1, h_prev = 0.5, Wx = 0.5, Wh = -1, b = 0.2: z = 0.5 - 0.5 + 0.2 = 0.2, h = tanh(0.2).
  // With dh = 2: dz = 2 (1 - h^2), then dx = dz * Wx, dh_prev = dz * Wh, dWx = dz * x,
  // dWh = dz * h_prev, db = dz.
  const float x = 1.0f, h_prev = 0.5f, Wx = 0.5f, Wh = -1.0f, dh = 2.0f;
  const auto h = static_cast<float>(std::tanh(0.2));
  const double dz = 2.0 * (1.0 - static_cast<double>(h) * h);
  std::vector<float> dx = ex_test::output_buffer(1), dhp = ex_test::output_buffer(1);
  std::vector<float> dWx = ex_test::output_buffer(1, 0.0f), dWh = ex_test::output_buffer(1, 0.0f),
                     db = ex_test::output_buffer(1, 0.0f);
  ex::rnn_step_backward(dx.data(), dhp.data(), dWx.data(), dWh.data(), db.data(), &dh, &h, &x,
                        &h_prev, &Wx, &Wh, 1, 1, 1);
  INFO("h = tanh(0.2) = " << h << ", dh = 2, so dz = dh * (1 - h^2) = " << dz);
  check(ex_test::compare("dx", {dx.data(), 1}, std::vector<double>{dz * 0.5}, 1e-6, 1e-5));
  check(ex_test::compare("dh_prev", {dhp.data(), 1}, std::vector<double>{-dz}, 1e-6, 1e-5));
  check(ex_test::compare("dWx", {dWx.data(), 1}, std::vector<double>{dz}, 1e-6, 1e-5));
  check(ex_test::compare("dWh", {dWh.data(), 1}, std::vector<double>{dz * 0.5}, 1e-6, 1e-5));
  check(ex_test::compare("db", {db.data(), 1}, std::vector<double>{dz}, 1e-6, 1e-5));
}

TEST_CASE("rnn_step_backward: random B = 3, C = 5, H = 4, against nn::rnn_cell_backward<double>",
          "[10_rnn_step_backward]") {
  nn::Rng rng(1001);
  const int B = 3, C = 5, H = 4;  // not round numbers, and C != H: a swapped index shows
  const std::vector<float> x = ex_test::random_normal(rng, sz(B, C));
  const std::vector<float> h_prev = ex_test::random_normal(rng, sz(B, H), 0.5f);
  const std::vector<float> Wx = ex_test::random_normal(rng, sz(H, C), 0.5f);
  const std::vector<float> Wh = ex_test::random_normal(rng, sz(H, H), 0.5f);
  const std::vector<float> bias = ex_test::random_normal(rng, static_cast<size_t>(H), 0.5f);
  const std::vector<float> dh = ex_test::random_normal(rng, sz(B, H));
  // The forward step, in float, gives the h the backward reads.
  std::vector<float> h(sz(B, H));
  nn::rnn_cell_forward<float>(h.data(), x.data(), h_prev.data(), Wx.data(), Wh.data(), bias.data(),
                              B, C, H);
  // Gradients left over from later steps: dWx, dWh, db must ADD to them.
  const std::vector<float> old_dWx = ex_test::random_normal(rng, sz(H, C));
  const std::vector<float> old_dWh = ex_test::random_normal(rng, sz(H, H));
  const std::vector<float> old_db = ex_test::random_normal(rng, static_cast<size_t>(H));

  using ex_test::to_double;
  std::vector<double> want_dx(sz(B, C)), want_dhp(sz(B, H));
  std::vector<double> want_dWx = to_double(old_dWx), want_dWh = to_double(old_dWh),
                      want_db = to_double(old_db);
  const std::vector<double> dh_d = to_double(dh), h_d = to_double(h), x_d = to_double(x),
                            hp_d = to_double(h_prev), Wx_d = to_double(Wx), Wh_d = to_double(Wh);
  nn::rnn_cell_backward<double>(want_dx.data(), want_dhp.data(), want_dWx.data(), want_dWh.data(),
                                want_db.data(), dh_d.data(), h_d.data(), x_d.data(), hp_d.data(),
                                Wx_d.data(), Wh_d.data(), B, C, H);

  std::vector<float> dx = ex_test::output_buffer(sz(B, C));  // NaN: must be assigned
  std::vector<float> dhp = ex_test::output_buffer(sz(B, H));
  std::vector<float> dWx = ex_test::output_buffer(sz(H, C)), dWh = ex_test::output_buffer(sz(H, H)),
                     db = ex_test::output_buffer(static_cast<size_t>(H));
  std::copy(old_dWx.begin(), old_dWx.end(), dWx.begin());
  std::copy(old_dWh.begin(), old_dWh.end(), dWh.begin());
  std::copy(old_db.begin(), old_db.end(), db.begin());
  ex::rnn_step_backward(dx.data(), dhp.data(), dWx.data(), dWh.data(), db.data(), dh.data(),
                        h.data(), x.data(), h_prev.data(), Wx.data(), Wh.data(), B, C, H);

  SECTION("dx (B, C) is assigned") {
    check(ex_test::compare("dx", {dx.data(), want_dx.size()}, want_dx, 1e-5, 1e-4,
                           [&](size_t i) { return where(i, C, "row b", "input c"); }));
  }
  SECTION("dh_prev (B, H) is assigned") {
    check(ex_test::compare("dh_prev", {dhp.data(), want_dhp.size()}, want_dhp, 1e-5, 1e-4,
                           [&](size_t i) { return where(i, H, "row b", "hidden k"); }));
  }
  SECTION("dWx (H, C) is accumulated: it started with other steps' gradient") {
    check(ex_test::compare("dWx", {dWx.data(), want_dWx.size()}, want_dWx, 1e-5, 1e-4,
                           [&](size_t i) { return where(i, C, "unit j", "input c"); }));
  }
  SECTION("dWh (H, H) is accumulated") {
    check(ex_test::compare("dWh", {dWh.data(), want_dWh.size()}, want_dWh, 1e-5, 1e-4,
                           [&](size_t i) { return where(i, H, "unit j", "hidden k"); }));
  }
  SECTION("db (H) is accumulated") {
    check(ex_test::compare("db", {db.data(), want_db.size()}, want_db, 1e-5, 1e-4));
  }
  SECTION("nothing is written past the end of an output") {
    const std::string overrun =
        ex_test::guard_damage(dx, sz(B, C), "dx") + ex_test::guard_damage(dhp, sz(B, H), "dh_prev") +
        ex_test::guard_damage(dWx, sz(H, C), "dWx") + ex_test::guard_damage(dWh, sz(H, H), "dWh") +
        ex_test::guard_damage(db, static_cast<size_t>(H), "db");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}

TEST_CASE("rnn_step_backward: dx == nullptr is skipped", "[10_rnn_step_backward]") {
  // If this test crashes, your code writes through a null pointer.
  nn::Rng rng(1002);
  const int B = 2, C = 3, H = 4;
  const std::vector<float> x = ex_test::random_normal(rng, sz(B, C));
  const std::vector<float> hp = ex_test::random_normal(rng, sz(B, H));
  const std::vector<float> Wx = ex_test::random_normal(rng, sz(H, C), 0.5f);
  const std::vector<float> Wh = ex_test::random_normal(rng, sz(H, H), 0.5f);
  const std::vector<float> h = ex_test::random_normal(rng, sz(B, H), 0.3f);
  const std::vector<float> dh = ex_test::random_normal(rng, sz(B, H));
  using ex_test::to_double;
  std::vector<double> want_dhp(sz(B, H)), want_dWx(sz(H, C), 0.0), want_dWh(sz(H, H), 0.0),
      want_db(static_cast<size_t>(H), 0.0);
  const std::vector<double> dh_d = to_double(dh), h_d = to_double(h), x_d = to_double(x),
                            hp_d = to_double(hp), Wx_d = to_double(Wx), Wh_d = to_double(Wh);
  nn::rnn_cell_backward<double>(nullptr, want_dhp.data(), want_dWx.data(), want_dWh.data(),
                                want_db.data(), dh_d.data(), h_d.data(), x_d.data(), hp_d.data(),
                                Wx_d.data(), Wh_d.data(), B, C, H);
  std::vector<float> dhp = ex_test::output_buffer(sz(B, H));
  std::vector<float> dWx = ex_test::output_buffer(sz(H, C), 0.0f),
                     dWh = ex_test::output_buffer(sz(H, H), 0.0f),
                     db = ex_test::output_buffer(static_cast<size_t>(H), 0.0f);
  ex::rnn_step_backward(nullptr, dhp.data(), dWx.data(), dWh.data(), db.data(), dh.data(), h.data(),
                        x.data(), hp.data(), Wx.data(), Wh.data(), B, C, H);
  check(ex_test::compare("dh_prev", {dhp.data(), want_dhp.size()}, want_dhp, 1e-5, 1e-4));
  check(ex_test::compare("dWx", {dWx.data(), want_dWx.size()}, want_dWx, 1e-5, 1e-4));
}

TEST_CASE("rnn_step_backward: matches finite differences of L = sum r * h (double)",
          "[10_rnn_step_backward]") {
  // With dh = r, every gradient must be the slope of L with respect to that input.
  nn::Rng rng(1003);
  const int B = 3, C = 4, H = 5;
  std::vector<double> x(sz(B, C)), hp(sz(B, H)), Wx(sz(H, C)), Wh(sz(H, H)), b(static_cast<size_t>(H)),
      r(sz(B, H)), h(sz(B, H));
  for (double& v : x) v = rng.normal();  // float values, so the float copies are exact
  for (double& v : hp) v = rng.normal(0.0f, 0.5f);
  for (double& v : Wx) v = rng.normal(0.0f, 0.5f);
  for (double& v : Wh) v = rng.normal(0.0f, 0.5f);
  for (double& v : b) v = rng.normal(0.0f, 0.5f);
  for (double& v : r) v = rng.normal();
  auto loss = [&] {
    nn::rnn_cell_forward<double>(h.data(), x.data(), hp.data(), Wx.data(), Wh.data(), b.data(), B,
                                 C, H);
    double sum = 0.0;
    for (size_t i = 0; i < h.size(); ++i) sum += r[i] * h[i];
    return sum;
  };
  loss();
  const std::vector<float> xf(x.begin(), x.end()), hpf(hp.begin(), hp.end()),
      Wxf(Wx.begin(), Wx.end()), Whf(Wh.begin(), Wh.end()), rf(r.begin(), r.end()),
      hf(h.begin(), h.end());
  std::vector<float> dx = ex_test::output_buffer(x.size()), dhp = ex_test::output_buffer(hp.size());
  std::vector<float> dWx = ex_test::output_buffer(Wx.size(), 0.0f),
                     dWh = ex_test::output_buffer(Wh.size(), 0.0f),
                     db = ex_test::output_buffer(b.size(), 0.0f);
  ex::rnn_step_backward(dx.data(), dhp.data(), dWx.data(), dWh.data(), db.data(), rf.data(),
                        hf.data(), xf.data(), hpf.data(), Wxf.data(), Whf.data(), B, C, H);
  const auto as_double = [](const std::vector<float>& v, size_t n) {
    return std::vector<double>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
  };
  const auto slope_check = [&](const char* what, std::vector<double>& in, const std::vector<float>& g) {
    const nn::GradCheckResult res = nn::check_gradient(loss, in, as_double(g, in.size()), 1e-6, 1e-5, 1e-3);
    INFO(what << ": " << res.report);
    CHECK(res.ok);
  };
  SECTION("dL/dx") { slope_check("dx", x, dx); }
  SECTION("dL/dh_prev") { slope_check("dh_prev", hp, dhp); }
  SECTION("dL/dWx") { slope_check("dWx", Wx, dWx); }
  SECTION("dL/dWh") { slope_check("dWh", Wh, dWh); }
  SECTION("dL/db") { slope_check("db", b, db); }
}

TEST_CASE("rnn_step_backward: chained over 6 steps it is BPTT (nn::rnn_backward<double>)",
          "[10_rnn_step_backward]") {
  // The loop of lesson 05: from the last step to the first, dh_t = dhs_t + dh_prev of step
  // t+1, and the weight gradients of all steps add up in the same dWx, dWh, db.
  nn::Rng rng(1004);
  const int steps = 6, B = 2, C = 3, H = 5;
  const size_t bh = sz(B, H), bc = sz(B, C);
  const std::vector<float> xs = ex_test::random_normal(rng, steps * bc);
  const std::vector<float> h0 = ex_test::random_normal(rng, bh, 0.5f);
  const std::vector<float> Wx = ex_test::random_normal(rng, sz(H, C), 0.5f);
  const std::vector<float> Wh = ex_test::random_normal(rng, sz(H, H), 0.5f);
  const std::vector<float> bias = ex_test::random_normal(rng, static_cast<size_t>(H), 0.5f);
  const std::vector<float> dhs = ex_test::random_normal(rng, steps * bh);
  using ex_test::to_double;
  const std::vector<double> xs_d = to_double(xs), h0_d = to_double(h0), Wx_d = to_double(Wx),
                            Wh_d = to_double(Wh), b_d = to_double(bias), dhs_d = to_double(dhs);
  std::vector<double> hs_d(steps * bh), want_dxs(steps * bc), want_dh0(bh), want_dWx(sz(H, C), 0.0),
      want_dWh(sz(H, H), 0.0), want_db(static_cast<size_t>(H), 0.0);
  nn::rnn_forward<double>(hs_d.data(), xs_d.data(), h0_d.data(), Wx_d.data(), Wh_d.data(),
                          b_d.data(), steps, B, C, H);
  nn::rnn_backward<double>(want_dxs.data(), want_dh0.data(), want_dWx.data(), want_dWh.data(),
                           want_db.data(), dhs_d.data(), hs_d.data(), xs_d.data(), h0_d.data(),
                           Wx_d.data(), Wh_d.data(), steps, B, C, H);

  const std::vector<float> hs(hs_d.begin(), hs_d.end());
  std::vector<float> dxs(steps * bc), dWx(sz(H, C), 0.0f), dWh(sz(H, H), 0.0f),
      db(static_cast<size_t>(H), 0.0f), dh(bh), dh_next(bh, 0.0f);
  for (int t = steps - 1; t >= 0; --t) {
    for (size_t k = 0; k < bh; ++k) dh[k] = dhs[t * bh + k] + dh_next[k];
    const float* h_prev = t == 0 ? h0.data() : hs.data() + (t - 1) * bh;
    ex::rnn_step_backward(dxs.data() + t * bc, dh_next.data(), dWx.data(), dWh.data(), db.data(),
                          dh.data(), hs.data() + t * bh, xs.data() + t * bc, h_prev, Wx.data(),
                          Wh.data(), B, C, H);
  }
  check(ex_test::compare("dxs", {dxs.data(), dxs.size()}, want_dxs, 1e-5, 1e-4));
  check(ex_test::compare("dh0", {dh_next.data(), bh}, want_dh0, 1e-5, 1e-4));
  check(ex_test::compare("dWx", {dWx.data(), dWx.size()}, want_dWx, 1e-5, 1e-4));
  check(ex_test::compare("dWh", {dWh.data(), dWh.size()}, want_dWh, 1e-5, 1e-4));
  check(ex_test::compare("db", {db.data(), db.size()}, want_db, 1e-5, 1e-4));
}
