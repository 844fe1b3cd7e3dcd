// Tests of exercise 11_lstm_cell_forward. The expected values come from
// nn::lstm_cell_forward<double> and nn::lstm_forward<double>, and in the worked example
// from the formulas written out.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/11_lstm_cell_forward/lstm_cell_forward.h"
#include "exercises/test_util.h"
#include "nn/recurrent.h"
#include "nn/rng.h"

namespace {

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

void check(const ex_test::Comparison& c) {
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

// "row b = 1, gate f, unit j = 2" for element i of gates (B, 4H).
std::string gate_of(size_t i, int H) {
  const char* names[4] = {"i (input)", "f (forget)", "g (candidate)", "o (output)"};
  const size_t G = 4 * static_cast<size_t>(H);
  const size_t r = i % G;
  std::ostringstream os;
  os << "row b = " << i / G << ", gate " << names[r / static_cast<size_t>(H)]
     << ", unit j = " << r % static_cast<size_t>(H);
  return os.str();
}

}  // namespace

TEST_CASE("lstm_cell_forward: a worked example, B = C = H = 1", "[11_lstm_cell_forward]") {
  const float x = 1.0f, h_prev = 0.4f, c_prev = -0.6f;
  const std::vector<float> Wx = {0.5f, -1.0f, 2.0f, 1.0f};   // rows i, f, g, o
  const std::vector<float> Wh = {0.25f, 0.5f, -0.5f, 1.0f};
  const std::vector<float> b = {0.0f, 1.0f, 0.0f, -0.5f};
  // z_r = b_r + x Wx_r + h_prev Wh_r
  double z[4];
  for (int r = 0; r < 4; ++r) z[r] = double(b[r]) + double(x) * Wx[r] + double(h_prev) * Wh[r];
  const double i = sigmoid(z[0]), f = sigmoid(z[1]), g = std::tanh(z[2]), o = sigmoid(z[3]);
  const double c = f * c_prev + i * g;
  const double h = o * std::tanh(c);
  std::vector<float> hb = ex_test::output_buffer(1), cb = ex_test::output_buffer(1),
                     gates = ex_test::output_buffer(4);
  ex::lstm_cell_forward(hb.data(), cb.data(), gates.data(), &x, &h_prev, &c_prev, Wx.data(),
                        Wh.data(), b.data(), 1, 1, 1);
  INFO("z = (" << z[0] << ", " << z[1] << ", " << z[2] << ", " << z[3] << "): i = sigmoid(z0) = "
               << i << ", f = sigmoid(z1) = " << f << ", g = tanh(z2) = " << g
               << ", o = sigmoid(z3) = " << o << "; c = f * (-0.6) + i * g = " << c
               << ", h = o * tanh(c) = " << h);
  check(ex_test::compare("gates", {gates.data(), 4}, std::vector<double>{i, f, g, o}, 1e-6, 1e-5,
                         [](size_t k) { return gate_of(k, 1); }));
  check(ex_test::compare("c", {cb.data(), 1}, std::vector<double>{c}, 1e-6, 1e-5));
  check(ex_test::compare("h", {hb.data(), 1}, std::vector<double>{h}, 1e-6, 1e-5));
}

TEST_CASE("lstm_cell_forward: the gate order is [i f g o]", "[11_lstm_cell_forward]") {
  // Zero weights: z = b, so each gate shows its own bias through its own squash.
  const int B = 2, C = 3, H = 2;
  const std::vector<float> x(sz(B, C), 1.0f), hp(sz(B, H), 1.0f), cp(sz(B, H), 0.5f);
  const std::vector<float> Wx(sz(4 * H, C), 0.0f), Wh(sz(4 * H, H), 0.0f);
  const std::vector<float> b = {2.0f, 2.0f, -1.0f, -1.0f, 0.5f, 0.5f, 3.0f, 3.0f};
  std::vector<double> want;
  for (int row = 0; row < B; ++row) {
    for (int j = 0; j < H; ++j) want.push_back(sigmoid(2.0));
    for (int j = 0; j < H; ++j) want.push_back(sigmoid(-1.0));
    for (int j = 0; j < H; ++j) want.push_back(std::tanh(0.5));
    for (int j = 0; j < H; ++j) want.push_back(sigmoid(3.0));
  }
  std::vector<float> h = ex_test::output_buffer(sz(B, H)), c = ex_test::output_buffer(sz(B, H)),
                     gates = ex_test::output_buffer(sz(B, 4 * H));
  ex::lstm_cell_forward(h.data(), c.data(), gates.data(), x.data(), hp.data(), cp.data(), Wx.data(),
                        Wh.data(), b.data(), B, C, H);
  INFO("b = (i: 2, 2 | f: -1, -1 | g: 0.5, 0.5 | o: 3, 3) and all weights 0, so gates = "
       "(sigmoid(2), sigmoid(-1), tanh(0.5), sigmoid(3)), each H = 2 wide, per row");
  check(ex_test::compare("gates", {gates.data(), want.size()}, want, 1e-6, 1e-5,
                         [&](size_t k) { return gate_of(k, H); }));
}

TEST_CASE("lstm_cell_forward: random B = 3, C = 5, H = 4, against nn::lstm_cell_forward<double>",
          "[11_lstm_cell_forward]") {
  nn::Rng rng(1101);
  const int B = 3, C = 5, H = 4;  // not round numbers, and C != H: a swapped index shows
  const std::vector<float> x = ex_test::random_normal(rng, sz(B, C));
  const std::vector<float> hp = ex_test::random_normal(rng, sz(B, H), 0.5f);
  const std::vector<float> cp = ex_test::random_normal(rng, sz(B, H));
  const std::vector<float> Wx = ex_test::random_normal(rng, sz(4 * H, C), 0.5f);
  const std::vector<float> Wh = ex_test::random_normal(rng, sz(4 * H, H), 0.5f);
  const std::vector<float> b = ex_test::random_normal(rng, static_cast<size_t>(4 * H), 0.5f);
  using ex_test::to_double;
  const std::vector<double> x_d = to_double(x), hp_d = to_double(hp), cp_d = to_double(cp),
                            Wx_d = to_double(Wx), Wh_d = to_double(Wh), b_d = to_double(b);
  std::vector<double> want_h(sz(B, H)), want_c(sz(B, H)), want_gates(sz(B, 4 * H));
  nn::lstm_cell_forward<double>(want_h.data(), want_c.data(), want_gates.data(), x_d.data(),
                                hp_d.data(), cp_d.data(), Wx_d.data(), Wh_d.data(), b_d.data(), B,
                                C, H);
  std::vector<float> h = ex_test::output_buffer(sz(B, H)), c = ex_test::output_buffer(sz(B, H)),
                     gates = ex_test::output_buffer(sz(B, 4 * H));  // NaN: must be assigned
  ex::lstm_cell_forward(h.data(), c.data(), gates.data(), x.data(), hp.data(), cp.data(), Wx.data(),
                        Wh.data(), b.data(), B, C, H);
  SECTION("gates (B, 4H): the activations i, f, g, o") {
    check(ex_test::compare("gates", {gates.data(), want_gates.size()}, want_gates, 1e-5, 1e-4,
                           [&](size_t k) { return gate_of(k, H); }));
  }
  SECTION("c (B, H) = f * c_prev + i * g") {
    check(ex_test::compare("c", {c.data(), want_c.size()}, want_c, 1e-5, 1e-4));
  }
  SECTION("h (B, H) = o * tanh(c)") {
    check(ex_test::compare("h", {h.data(), want_h.size()}, want_h, 1e-5, 1e-4));
  }
  SECTION("nothing is written past the end of an output") {
    const std::string overrun = ex_test::guard_damage(h, sz(B, H), "h") +
                                ex_test::guard_damage(c, sz(B, H), "c") +
                                ex_test::guard_damage(gates, sz(B, 4 * H), "gates");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}

TEST_CASE("lstm_cell_forward: stepped over 5 steps it is nn::lstm_forward<double>",
          "[11_lstm_cell_forward]") {
  // Each step starts from the previous step's h and c: the loop of lesson 06.
  nn::Rng rng(1102);
  const int steps = 5, B = 2, C = 3, H = 6;
  const size_t bh = sz(B, H), bc = sz(B, C), bg = sz(B, 4 * H);
  const std::vector<float> xs = ex_test::random_normal(rng, steps * bc);
  const std::vector<float> h0 = ex_test::random_normal(rng, bh, 0.5f);
  const std::vector<float> c0 = ex_test::random_normal(rng, bh, 0.5f);
  const std::vector<float> Wx = ex_test::random_normal(rng, sz(4 * H, C), 0.4f);
  const std::vector<float> Wh = ex_test::random_normal(rng, sz(4 * H, H), 0.4f);
  const std::vector<float> b = ex_test::random_normal(rng, static_cast<size_t>(4 * H), 0.5f);
  using ex_test::to_double;
  const std::vector<double> xs_d = to_double(xs), h0_d = to_double(h0), c0_d = to_double(c0),
                            Wx_d = to_double(Wx), Wh_d = to_double(Wh), b_d = to_double(b);
  std::vector<double> want_hs(steps * bh), want_cs(steps * bh), want_gates(steps * bg);
  nn::lstm_forward<double>(want_hs.data(), want_cs.data(), want_gates.data(), xs_d.data(),
                           h0_d.data(), c0_d.data(), Wx_d.data(), Wh_d.data(), b_d.data(), steps,
                           B, C, H);
  std::vector<float> hs(steps * bh), cs(steps * bh), gates(steps * bg);
  for (int t = 0; t < steps; ++t) {
    const float* h_prev = t == 0 ? h0.data() : hs.data() + (t - 1) * bh;
    const float* c_prev = t == 0 ? c0.data() : cs.data() + (t - 1) * bh;
    ex::lstm_cell_forward(hs.data() + t * bh, cs.data() + t * bh, gates.data() + t * bg,
                          xs.data() + t * bc, h_prev, c_prev, Wx.data(), Wh.data(), b.data(), B, C,
                          H);
  }
  check(ex_test::compare("hs", {hs.data(), hs.size()}, want_hs, 1e-5, 1e-4));
  check(ex_test::compare("cs", {cs.data(), cs.size()}, want_cs, 1e-5, 1e-4));
}
