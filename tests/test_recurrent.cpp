// nn/recurrent.h: the RNN and LSTM cells and their sequence loops (BPTT), the Recurrent
// layer, and clip_grad_norm (nn/optim.h).
//   - every backward against central finite differences in double (nn/gradcheck.h);
//   - the float path (kernels::sgemm) against the double path, at odd sizes;
//   - the sequence loops against the cells called step by step, forward and backward;
//   - the gradient rule: parameter gradients accumulate, activation gradients are assigned;
//   - dh_norms, and the vanishing gradient they exist to show;
//   - the layer's carried state (truncated BPTT) and its parameters.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/recurrent_cell.h"
#include "nn/check.h"
#include "nn/gradcheck.h"
#include "nn/optim.h"
#include "nn/recurrent.h"
#include "nn/rng.h"

namespace {

using Vec = std::vector<double>;
using FVec = std::vector<float>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr float kGuard = -7.25f;  // after each float output buffer: a write past the end changes it
constexpr int kGuardN = 4;

Vec random_vec(nn::Rng& rng, size_t n, double scale = 1.0) {
  Vec v(n);
  for (double& x : v) x = scale * rng.normal();
  return v;
}

FVec to_float(const Vec& v) { return FVec(v.begin(), v.end()); }

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }
size_t sz(int a, int b, int c) { return sz(a, b) * static_cast<size_t>(c); }

// L = sum_i r_i y_i: dL/dy = r, a different non-trivial upstream gradient for every element.
double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

void require_ok(const nn::GradCheckResult& r) {
  INFO(r.report);
  CAPTURE(r.max_abs_err, r.max_rel_err);
  REQUIRE(r.ok);
}

// |got - want| <= atol + rtol |want| for every element (NaN fails); prints the first misses.
template <typename G>
void require_close(const std::vector<G>& got, const Vec& want, double atol, double rtol,
                   const std::string& what) {
  REQUIRE(got.size() >= want.size());
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (!(std::fabs(g - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      if (bad < 5) os << "  " << what << "[" << i << "] = " << g << ", expected " << want[i] << "\n";
      ++bad;
    }
  }
  INFO(what << ": " << bad << " of " << want.size() << " elements off\n" << os.str());
  REQUIRE(bad == 0);
}

// A float output buffer of n elements, pre-filled (NaN by default), with guard values after.
FVec out_buf(size_t n, float fill = kNaNf) {
  FVec v(n + kGuardN, kGuard);
  for (size_t i = 0; i < n; ++i) v[i] = fill;
  return v;
}
void require_guard(const FVec& v, size_t n, const char* what) {
  for (size_t i = n; i < v.size(); ++i) {
    INFO(what << "[" << i << "] written past the end (" << n << " elements)");
    REQUIRE(v[i] == kGuard);
  }
}

// Random weights and inputs of one recurrent problem, in double. G = 1 (RNN) or 4 (LSTM).
struct Problem {
  int steps, B, C, H, G;
  Vec xs, h0, c0, Wx, Wh, b, dhs;
  Problem(nn::Rng& rng, int steps_, int B_, int C_, int H_, int G_, double wscale = 0.5)
      : steps(steps_), B(B_), C(C_), H(H_), G(G_) {
    xs = random_vec(rng, sz(steps, B, C));
    h0 = random_vec(rng, sz(B, H), 0.5);
    c0 = random_vec(rng, sz(B, H), 0.5);
    Wx = random_vec(rng, sz(G * H, C), wscale);
    Wh = random_vec(rng, sz(G * H, H), wscale);
    b = random_vec(rng, static_cast<size_t>(G * H), 0.5);
    dhs = random_vec(rng, sz(steps, B, H));
  }
};

}  // namespace

// =======================================================================================
// Finite differences (double)
// =======================================================================================

TEST_CASE("rnn_cell_backward matches finite differences (double)", "[recurrent][gradcheck]") {
  nn::Rng rng(101);
  const int B = 3, C = 4, H = 5;
  Vec x = random_vec(rng, sz(B, C)), hp = random_vec(rng, sz(B, H));
  Vec Wx = random_vec(rng, sz(H, C), 0.5), Wh = random_vec(rng, sz(H, H), 0.5);
  Vec b = random_vec(rng, H, 0.5), R = random_vec(rng, sz(B, H));
  Vec h(sz(B, H));
  auto loss = [&] {
    nn::rnn_cell_forward(h.data(), x.data(), hp.data(), Wx.data(), Wh.data(), b.data(), B, C, H);
    return dot(h, R);  // L = sum(h * R)
  };
  loss();
  Vec dx(x.size(), kNaN), dhp(hp.size(), kNaN), dWx(Wx.size(), 0.0), dWh(Wh.size(), 0.0),
      db(b.size(), 0.0);
  nn::rnn_cell_backward(dx.data(), dhp.data(), dWx.data(), dWh.data(), db.data(), R.data(),
                        h.data(), x.data(), hp.data(), Wx.data(), Wh.data(), B, C, H);
  SECTION("dx") { require_ok(nn::check_gradient(loss, x, dx)); }
  SECTION("dh_prev") { require_ok(nn::check_gradient(loss, hp, dhp)); }
  SECTION("dWx") { require_ok(nn::check_gradient(loss, Wx, dWx)); }
  SECTION("dWh") { require_ok(nn::check_gradient(loss, Wh, dWh)); }
  SECTION("db") { require_ok(nn::check_gradient(loss, b, db)); }
}

TEST_CASE("lstm_cell_backward matches finite differences (double)", "[recurrent][gradcheck]") {
  nn::Rng rng(102);
  const int B = 3, C = 4, H = 5;
  Vec x = random_vec(rng, sz(B, C)), hp = random_vec(rng, sz(B, H)), cp = random_vec(rng, sz(B, H));
  Vec Wx = random_vec(rng, sz(4 * H, C), 0.5), Wh = random_vec(rng, sz(4 * H, H), 0.5);
  Vec b = random_vec(rng, 4 * H, 0.5);
  Vec R1 = random_vec(rng, sz(B, H)), R2 = random_vec(rng, sz(B, H));
  Vec h(sz(B, H)), c(sz(B, H)), gates(sz(B, 4 * H));
  auto loss = [&] {
    nn::lstm_cell_forward(h.data(), c.data(), gates.data(), x.data(), hp.data(), cp.data(),
                          Wx.data(), Wh.data(), b.data(), B, C, H);
    return dot(h, R1) + dot(c, R2);  // L = sum(h * R1) + sum(c * R2)
  };
  loss();
  Vec dx(x.size(), kNaN), dhp(hp.size(), kNaN), dcp(cp.size(), kNaN);
  Vec dWx(Wx.size(), 0.0), dWh(Wh.size(), 0.0), db(b.size(), 0.0);
  nn::lstm_cell_backward(dx.data(), dhp.data(), dcp.data(), dWx.data(), dWh.data(), db.data(),
                         R1.data(), R2.data(), gates.data(), c.data(), cp.data(), x.data(),
                         hp.data(), Wx.data(), Wh.data(), B, C, H);
  SECTION("dx") { require_ok(nn::check_gradient(loss, x, dx)); }
  SECTION("dh_prev") { require_ok(nn::check_gradient(loss, hp, dhp)); }
  SECTION("dc_prev") { require_ok(nn::check_gradient(loss, cp, dcp)); }
  SECTION("dWx") { require_ok(nn::check_gradient(loss, Wx, dWx)); }
  SECTION("dWh") { require_ok(nn::check_gradient(loss, Wh, dWh)); }
  SECTION("db") { require_ok(nn::check_gradient(loss, b, db)); }
}

TEST_CASE("lstm_cell_backward with dc == nullptr is dc = 0 (double)", "[recurrent][gradcheck]") {
  // The last step of a sequence has no gradient arriving at c from a later step.
  nn::Rng rng(103);
  const int B = 2, C = 3, H = 4;
  Vec x = random_vec(rng, sz(B, C)), hp = random_vec(rng, sz(B, H)), cp = random_vec(rng, sz(B, H));
  Vec Wx = random_vec(rng, sz(4 * H, C), 0.5), Wh = random_vec(rng, sz(4 * H, H), 0.5);
  Vec b = random_vec(rng, 4 * H, 0.5), R = random_vec(rng, sz(B, H));
  Vec h(sz(B, H)), c(sz(B, H)), gates(sz(B, 4 * H));
  auto loss = [&] {
    nn::lstm_cell_forward(h.data(), c.data(), gates.data(), x.data(), hp.data(), cp.data(),
                          Wx.data(), Wh.data(), b.data(), B, C, H);
    return dot(h, R);
  };
  loss();
  Vec dx(x.size(), kNaN), dhp(hp.size(), kNaN), dcp(cp.size(), kNaN);
  Vec dWx(Wx.size(), 0.0), dWh(Wh.size(), 0.0), db(b.size(), 0.0);
  nn::lstm_cell_backward(dx.data(), dhp.data(), dcp.data(), dWx.data(), dWh.data(), db.data(),
                         R.data(), static_cast<const double*>(nullptr), gates.data(), c.data(),
                         cp.data(), x.data(), hp.data(), Wx.data(), Wh.data(), B, C, H);
  SECTION("dc_prev") { require_ok(nn::check_gradient(loss, cp, dcp)); }
  SECTION("dWh") { require_ok(nn::check_gradient(loss, Wh, dWh)); }
}

TEST_CASE("rnn_backward (BPTT) matches finite differences over 5 steps (double)",
          "[recurrent][gradcheck]") {
  nn::Rng rng(104);
  Problem p(rng, 5, 3, 4, 5, 1);
  const int steps = p.steps, B = p.B, C = p.C, H = p.H;
  Vec hs(sz(steps, B, H));
  auto loss = [&] {
    nn::rnn_forward(hs.data(), p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), p.b.data(),
                    steps, B, C, H);
    return dot(hs, p.dhs);  // L = sum_t sum(h_t * R_t): a gradient at every step
  };
  loss();
  Vec dxs(p.xs.size(), kNaN), dh0(p.h0.size(), kNaN);
  Vec dWx(p.Wx.size(), 0.0), dWh(p.Wh.size(), 0.0), db(p.b.size(), 0.0);
  nn::rnn_backward(dxs.data(), dh0.data(), dWx.data(), dWh.data(), db.data(), p.dhs.data(),
                   hs.data(), p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), steps, B, C, H);
  SECTION("dxs") { require_ok(nn::check_gradient(loss, p.xs, dxs)); }
  SECTION("dh0") { require_ok(nn::check_gradient(loss, p.h0, dh0)); }
  SECTION("dWx") { require_ok(nn::check_gradient(loss, p.Wx, dWx)); }
  SECTION("dWh") { require_ok(nn::check_gradient(loss, p.Wh, dWh)); }
  SECTION("db") { require_ok(nn::check_gradient(loss, p.b, db)); }
}

TEST_CASE("lstm_backward (BPTT) matches finite differences over 5 steps (double)",
          "[recurrent][gradcheck]") {
  nn::Rng rng(105);
  Problem p(rng, 5, 3, 4, 5, 4);
  const int steps = p.steps, B = p.B, C = p.C, H = p.H;
  Vec hs(sz(steps, B, H)), cs(sz(steps, B, H)), gates(sz(steps, B, 4 * H));
  auto loss = [&] {
    nn::lstm_forward(hs.data(), cs.data(), gates.data(), p.xs.data(), p.h0.data(), p.c0.data(),
                     p.Wx.data(), p.Wh.data(), p.b.data(), steps, B, C, H);
    return dot(hs, p.dhs);
  };
  loss();
  Vec dxs(p.xs.size(), kNaN), dh0(p.h0.size(), kNaN), dc0(p.c0.size(), kNaN);
  Vec dWx(p.Wx.size(), 0.0), dWh(p.Wh.size(), 0.0), db(p.b.size(), 0.0);
  nn::lstm_backward(dxs.data(), dh0.data(), dc0.data(), dWx.data(), dWh.data(), db.data(),
                    p.dhs.data(), hs.data(), cs.data(), gates.data(), p.xs.data(), p.h0.data(),
                    p.c0.data(), p.Wx.data(), p.Wh.data(), steps, B, C, H);
  SECTION("dxs") { require_ok(nn::check_gradient(loss, p.xs, dxs)); }
  SECTION("dh0") { require_ok(nn::check_gradient(loss, p.h0, dh0)); }
  SECTION("dc0") { require_ok(nn::check_gradient(loss, p.c0, dc0)); }
  SECTION("dWx") { require_ok(nn::check_gradient(loss, p.Wx, dWx)); }
  SECTION("dWh") { require_ok(nn::check_gradient(loss, p.Wh, dWh)); }
  SECTION("db") { require_ok(nn::check_gradient(loss, p.b, db)); }
}

TEST_CASE("h0 == nullptr (and c0 == nullptr) is a zero initial state", "[recurrent]") {
  nn::Rng rng(106);
  Problem p(rng, 4, 2, 3, 5, 4);
  const int steps = p.steps, B = p.B, C = p.C, H = p.H;
  const Vec zeros(sz(B, H), 0.0);
  SECTION("rnn") {
    Vec hs_null(sz(steps, B, H)), hs_zero(sz(steps, B, H));
    nn::rnn_forward(hs_null.data(), p.xs.data(), static_cast<const double*>(nullptr), p.Wx.data(),
                    p.Wh.data(), p.b.data(), steps, B, C, H);
    nn::rnn_forward(hs_zero.data(), p.xs.data(), zeros.data(), p.Wx.data(), p.Wh.data(),
                    p.b.data(), steps, B, C, H);
    require_close(hs_null, hs_zero, 0.0, 0.0, "hs");
    Vec dWh_null(sz(H, H), 0.0), dWh_zero(sz(H, H), 0.0), dWx(sz(H, C), 0.0), db(H, 0.0);
    Vec dh0_null(sz(B, H), kNaN), dh0_zero(sz(B, H), kNaN);
    nn::rnn_backward(static_cast<double*>(nullptr), dh0_null.data(), dWx.data(), dWh_null.data(),
                     db.data(), p.dhs.data(), hs_null.data(), p.xs.data(),
                     static_cast<const double*>(nullptr), p.Wx.data(), p.Wh.data(), steps, B, C, H);
    nn::rnn_backward(static_cast<double*>(nullptr), dh0_zero.data(), dWx.data(), dWh_zero.data(),
                     db.data(), p.dhs.data(), hs_zero.data(), p.xs.data(), zeros.data(),
                     p.Wx.data(), p.Wh.data(), steps, B, C, H);
    require_close(dWh_null, dWh_zero, 1e-14, 1e-12, "dWh");
    require_close(dh0_null, dh0_zero, 1e-14, 1e-12, "dh0");  // the gradient w.r.t. that zero state
  }
  SECTION("lstm") {
    const size_t n = sz(steps, B, H);
    Vec hs_null(n), cs_null(n), g_null(4 * n), hs_zero(n), cs_zero(n), g_zero(4 * n);
    nn::lstm_forward(hs_null.data(), cs_null.data(), g_null.data(), p.xs.data(),
                     static_cast<const double*>(nullptr), static_cast<const double*>(nullptr),
                     p.Wx.data(), p.Wh.data(), p.b.data(), steps, B, C, H);
    nn::lstm_forward(hs_zero.data(), cs_zero.data(), g_zero.data(), p.xs.data(), zeros.data(),
                     zeros.data(), p.Wx.data(), p.Wh.data(), p.b.data(), steps, B, C, H);
    require_close(hs_null, hs_zero, 0.0, 0.0, "hs");
    require_close(cs_null, cs_zero, 0.0, 0.0, "cs");
    Vec dWh_null(sz(4 * H, H), 0.0), dWh_zero(sz(4 * H, H), 0.0), dWx(sz(4 * H, C), 0.0),
        db(4 * H, 0.0);
    Vec dc0_null(sz(B, H), kNaN), dc0_zero(sz(B, H), kNaN);
    nn::lstm_backward(static_cast<double*>(nullptr), static_cast<double*>(nullptr),
                      dc0_null.data(), dWx.data(), dWh_null.data(), db.data(), p.dhs.data(),
                      hs_null.data(), cs_null.data(), g_null.data(), p.xs.data(),
                      static_cast<const double*>(nullptr), static_cast<const double*>(nullptr),
                      p.Wx.data(), p.Wh.data(), steps, B, C, H);
    nn::lstm_backward(static_cast<double*>(nullptr), static_cast<double*>(nullptr),
                      dc0_zero.data(), dWx.data(), dWh_zero.data(), db.data(), p.dhs.data(),
                      hs_zero.data(), cs_zero.data(), g_zero.data(), p.xs.data(), zeros.data(),
                      zeros.data(), p.Wx.data(), p.Wh.data(), steps, B, C, H);
    require_close(dWh_null, dWh_zero, 1e-14, 1e-12, "dWh");
    require_close(dc0_null, dc0_zero, 1e-14, 1e-12, "dc0");
  }
}

// =======================================================================================
// Sequence loops == the cells, step by step; dh_norms by hand
// =======================================================================================

TEST_CASE("rnn_forward/backward equal the cell called step by step: dh_norms by hand (double)",
          "[recurrent]") {
  nn::Rng rng(201);
  Problem p(rng, 6, 3, 4, 5, 1);
  const int steps = p.steps, B = p.B, C = p.C, H = p.H;
  const size_t bh = sz(B, H), bc = sz(B, C);
  Vec hs(sz(steps, B, H));
  nn::rnn_forward(hs.data(), p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), p.b.data(), steps,
                  B, C, H);
  // By hand: one cell per step, each starting from the previous step's h.
  Vec hs_cell(sz(steps, B, H));
  for (int t = 0; t < steps; ++t) {
    const double* h_prev = t == 0 ? p.h0.data() : hs_cell.data() + (t - 1) * bh;
    nn::rnn_cell_forward(hs_cell.data() + t * bh, p.xs.data() + t * bc, h_prev, p.Wx.data(),
                         p.Wh.data(), p.b.data(), B, C, H);
  }
  require_close(hs, hs_cell, 1e-14, 1e-12, "hs");

  Vec dxs(p.xs.size(), kNaN), dh0(bh, kNaN), dWx(p.Wx.size(), 0.0), dWh(p.Wh.size(), 0.0),
      db(p.b.size(), 0.0), norms(static_cast<size_t>(steps), kNaN);
  nn::rnn_backward(dxs.data(), dh0.data(), dWx.data(), dWh.data(), db.data(), p.dhs.data(),
                   hs.data(), p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), steps, B, C, H,
                   norms.data());
  // BPTT by hand: dh_t = dhs_t + (what step t+1 sent back), from the last step to the first.
  Vec dxs_c(p.xs.size()), dWx_c(p.Wx.size(), 0.0), dWh_c(p.Wh.size(), 0.0), db_c(p.b.size(), 0.0);
  Vec dh_next(bh, 0.0), dh(bh), norms_c(static_cast<size_t>(steps));
  for (int t = steps - 1; t >= 0; --t) {
    double sq = 0.0;
    for (size_t k = 0; k < bh; ++k) {
      dh[k] = p.dhs[t * bh + k] + dh_next[k];
      sq += dh[k] * dh[k];
    }
    norms_c[static_cast<size_t>(t)] = std::sqrt(sq);
    const double* h_prev = t == 0 ? p.h0.data() : hs.data() + (t - 1) * bh;
    nn::rnn_cell_backward(dxs_c.data() + t * bc, dh_next.data(), dWx_c.data(), dWh_c.data(),
                          db_c.data(), dh.data(), hs.data() + t * bh, p.xs.data() + t * bc, h_prev,
                          p.Wx.data(), p.Wh.data(), B, C, H);
  }
  require_close(dxs, dxs_c, 1e-13, 1e-12, "dxs");
  require_close(dh0, dh_next, 1e-13, 1e-12, "dh0");
  require_close(dWx, dWx_c, 1e-13, 1e-12, "dWx");
  require_close(dWh, dWh_c, 1e-13, 1e-12, "dWh");
  require_close(db, db_c, 1e-13, 1e-12, "db");
  require_close(norms, norms_c, 1e-13, 1e-12, "dh_norms");
}

TEST_CASE("lstm_forward/backward equal the cell called step by step: dh_norms by hand (double)",
          "[recurrent]") {
  nn::Rng rng(202);
  Problem p(rng, 6, 3, 4, 5, 4);
  const int steps = p.steps, B = p.B, C = p.C, H = p.H;
  const size_t bh = sz(B, H), bc = sz(B, C), bg = sz(B, 4 * H);
  Vec hs(sz(steps, B, H)), cs(hs.size()), gates(sz(steps, B, 4 * H));
  nn::lstm_forward(hs.data(), cs.data(), gates.data(), p.xs.data(), p.h0.data(), p.c0.data(),
                   p.Wx.data(), p.Wh.data(), p.b.data(), steps, B, C, H);
  Vec hs_c(hs.size()), cs_c(cs.size()), gates_c(gates.size());
  for (int t = 0; t < steps; ++t) {
    const double* h_prev = t == 0 ? p.h0.data() : hs_c.data() + (t - 1) * bh;
    const double* c_prev = t == 0 ? p.c0.data() : cs_c.data() + (t - 1) * bh;
    nn::lstm_cell_forward(hs_c.data() + t * bh, cs_c.data() + t * bh, gates_c.data() + t * bg,
                          p.xs.data() + t * bc, h_prev, c_prev, p.Wx.data(), p.Wh.data(),
                          p.b.data(), B, C, H);
  }
  require_close(hs, hs_c, 1e-14, 1e-12, "hs");
  require_close(cs, cs_c, 1e-14, 1e-12, "cs");
  require_close(gates, gates_c, 1e-14, 1e-12, "gates");

  Vec dxs(p.xs.size(), kNaN), dh0(bh, kNaN), dc0(bh, kNaN), dWx(p.Wx.size(), 0.0),
      dWh(p.Wh.size(), 0.0), db(p.b.size(), 0.0), norms(static_cast<size_t>(steps), kNaN);
  nn::lstm_backward(dxs.data(), dh0.data(), dc0.data(), dWx.data(), dWh.data(), db.data(),
                    p.dhs.data(), hs.data(), cs.data(), gates.data(), p.xs.data(), p.h0.data(),
                    p.c0.data(), p.Wx.data(), p.Wh.data(), steps, B, C, H, norms.data());
  Vec dxs_c(p.xs.size()), dWx_c(p.Wx.size(), 0.0), dWh_c(p.Wh.size(), 0.0), db_c(p.b.size(), 0.0);
  Vec dh_next(bh, 0.0), dc_next(bh, 0.0), dc_prev(bh), dh(bh), norms_c(static_cast<size_t>(steps));
  for (int t = steps - 1; t >= 0; --t) {
    double sq = 0.0;
    for (size_t k = 0; k < bh; ++k) {
      dh[k] = p.dhs[t * bh + k] + dh_next[k];
      sq += dh[k] * dh[k];
    }
    norms_c[static_cast<size_t>(t)] = std::sqrt(sq);
    const double* h_prev = t == 0 ? p.h0.data() : hs.data() + (t - 1) * bh;
    const double* c_prev = t == 0 ? p.c0.data() : cs.data() + (t - 1) * bh;
    nn::lstm_cell_backward(dxs_c.data() + t * bc, dh_next.data(), dc_prev.data(), dWx_c.data(),
                           dWh_c.data(), db_c.data(), dh.data(), dc_next.data(),
                           gates.data() + t * bg, cs.data() + t * bh, c_prev, p.xs.data() + t * bc,
                           h_prev, p.Wx.data(), p.Wh.data(), B, C, H);
    dc_next = dc_prev;
  }
  require_close(dxs, dxs_c, 1e-13, 1e-12, "dxs");
  require_close(dh0, dh_next, 1e-13, 1e-12, "dh0");
  require_close(dc0, dc_next, 1e-13, 1e-12, "dc0");
  require_close(dWx, dWx_c, 1e-13, 1e-12, "dWx");
  require_close(dWh, dWh_c, 1e-13, 1e-12, "dWh");
  require_close(db, db_c, 1e-13, 1e-12, "db");
  require_close(norms, norms_c, 1e-13, 1e-12, "dh_norms");
  // The last step's total gradient is only what came from above.
  double sq = 0.0;
  for (size_t k = 0; k < bh; ++k) sq += p.dhs[(steps - 1) * bh + k] * p.dhs[(steps - 1) * bh + k];
  REQUIRE(norms.back() == Approx(std::sqrt(sq)).epsilon(1e-12));
}

// =======================================================================================
// float (kernels::sgemm) == double
// =======================================================================================

TEST_CASE("float recurrent ops (kernels::sgemm) agree with the double reference", "[recurrent]") {
  nn::Rng rng(301);
  // Odd sizes: steps*B = 35 rows, C = 13, H = 19 (4H = 76): no multiple of 8 or 16.
  const int steps = 7, B = 5, C = 13, H = 19;
  const double tol = 2e-5;  // float rounding of sums of ~20-80 terms of size ~1

  SECTION("rnn sequence") {
    Problem p(rng, steps, B, C, H, 1, 1.0 / std::sqrt(H));
    Vec hs(sz(steps, B, H)), dxs(p.xs.size()), dh0(p.h0.size()), dWx(p.Wx.size(), 0.0),
        dWh(p.Wh.size(), 0.0), db(p.b.size(), 0.0), norms(static_cast<size_t>(steps));
    nn::rnn_forward(hs.data(), p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), p.b.data(),
                    steps, B, C, H);
    nn::rnn_backward(dxs.data(), dh0.data(), dWx.data(), dWh.data(), db.data(), p.dhs.data(),
                     hs.data(), p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), steps, B, C, H,
                     norms.data());
    const FVec xs = to_float(p.xs), h0 = to_float(p.h0), Wx = to_float(p.Wx), Wh = to_float(p.Wh),
               b = to_float(p.b), dhs = to_float(p.dhs);
    FVec hs_f(hs.size()), dxs_f(dxs.size()), dh0_f(dh0.size()), dWx_f(dWx.size(), 0.0f),
        dWh_f(dWh.size(), 0.0f), db_f(db.size(), 0.0f), norms_f(norms.size());
    nn::rnn_forward(hs_f.data(), xs.data(), h0.data(), Wx.data(), Wh.data(), b.data(), steps, B, C,
                    H);
    // backward from the DOUBLE forward's states (rounded), so only the backward is compared
    const FVec hs_r = to_float(hs);
    nn::rnn_backward(dxs_f.data(), dh0_f.data(), dWx_f.data(), dWh_f.data(), db_f.data(),
                     dhs.data(), hs_r.data(), xs.data(), h0.data(), Wx.data(), Wh.data(), steps, B,
                     C, H, norms_f.data());
    require_close(hs_f, hs, tol, tol, "hs");
    require_close(dxs_f, dxs, tol, tol, "dxs");
    require_close(dh0_f, dh0, tol, tol, "dh0");
    require_close(dWx_f, dWx, tol, tol, "dWx");
    require_close(dWh_f, dWh, tol, tol, "dWh");
    require_close(db_f, db, tol, tol, "db");
    require_close(norms_f, norms, tol, tol, "dh_norms");
  }
  SECTION("lstm sequence") {
    Problem p(rng, steps, B, C, H, 4, 1.0 / std::sqrt(H));
    const size_t n = sz(steps, B, H);
    Vec hs(n), cs(n), gates(4 * n), dxs(p.xs.size()), dh0(p.h0.size()), dc0(p.c0.size()),
        dWx(p.Wx.size(), 0.0), dWh(p.Wh.size(), 0.0), db(p.b.size(), 0.0),
        norms(static_cast<size_t>(steps));
    nn::lstm_forward(hs.data(), cs.data(), gates.data(), p.xs.data(), p.h0.data(), p.c0.data(),
                     p.Wx.data(), p.Wh.data(), p.b.data(), steps, B, C, H);
    nn::lstm_backward(dxs.data(), dh0.data(), dc0.data(), dWx.data(), dWh.data(), db.data(),
                      p.dhs.data(), hs.data(), cs.data(), gates.data(), p.xs.data(), p.h0.data(),
                      p.c0.data(), p.Wx.data(), p.Wh.data(), steps, B, C, H, norms.data());
    const FVec xs = to_float(p.xs), h0 = to_float(p.h0), c0 = to_float(p.c0), Wx = to_float(p.Wx),
               Wh = to_float(p.Wh), b = to_float(p.b), dhs = to_float(p.dhs);
    FVec hs_f(n), cs_f(n), gates_f(4 * n), dxs_f(dxs.size()), dh0_f(dh0.size()),
        dc0_f(dc0.size()), dWx_f(dWx.size(), 0.0f), dWh_f(dWh.size(), 0.0f),
        db_f(db.size(), 0.0f), norms_f(norms.size());
    nn::lstm_forward(hs_f.data(), cs_f.data(), gates_f.data(), xs.data(), h0.data(), c0.data(),
                     Wx.data(), Wh.data(), b.data(), steps, B, C, H);
    const FVec hs_r = to_float(hs), cs_r = to_float(cs), gates_r = to_float(gates);
    nn::lstm_backward(dxs_f.data(), dh0_f.data(), dc0_f.data(), dWx_f.data(), dWh_f.data(),
                      db_f.data(), dhs.data(), hs_r.data(), cs_r.data(), gates_r.data(), xs.data(),
                      h0.data(), c0.data(), Wx.data(), Wh.data(), steps, B, C, H, norms_f.data());
    require_close(hs_f, hs, tol, tol, "hs");
    require_close(cs_f, cs, tol, tol, "cs");
    require_close(gates_f, gates, tol, tol, "gates");
    require_close(dxs_f, dxs, tol, tol, "dxs");
    require_close(dh0_f, dh0, tol, tol, "dh0");
    require_close(dc0_f, dc0, tol, tol, "dc0");
    require_close(dWx_f, dWx, tol, tol, "dWx");
    require_close(dWh_f, dWh, tol, tol, "dWh");
    require_close(db_f, db, tol, tol, "db");
    require_close(norms_f, norms, tol, tol, "dh_norms");
  }
  SECTION("cells") {
    Problem p(rng, 1, B, C, H, 4, 1.0 / std::sqrt(H));
    const size_t bh = sz(B, H);
    Vec R2 = random_vec(rng, bh);
    // RNN cell: uses the first H rows of the LSTM's weights
    Vec h(bh), dx(p.xs.size()), dhp(bh), dWx(sz(H, C), 0.0), dWh(sz(H, H), 0.0), db(H, 0.0);
    nn::rnn_cell_forward(h.data(), p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), p.b.data(),
                         B, C, H);
    nn::rnn_cell_backward(dx.data(), dhp.data(), dWx.data(), dWh.data(), db.data(), p.dhs.data(),
                          h.data(), p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), B, C, H);
    const FVec x = to_float(p.xs), h0 = to_float(p.h0), c0 = to_float(p.c0), Wx = to_float(p.Wx),
               Wh = to_float(p.Wh), b = to_float(p.b), dh = to_float(p.dhs), dc = to_float(R2);
    FVec h_f(bh), dx_f(dx.size()), dhp_f(bh), dWx_f(dWx.size(), 0.0f), dWh_f(dWh.size(), 0.0f),
        db_f(db.size(), 0.0f);
    nn::rnn_cell_forward(h_f.data(), x.data(), h0.data(), Wx.data(), Wh.data(), b.data(), B, C, H);
    const FVec h_r = to_float(h);
    nn::rnn_cell_backward(dx_f.data(), dhp_f.data(), dWx_f.data(), dWh_f.data(), db_f.data(),
                          dh.data(), h_r.data(), x.data(), h0.data(), Wx.data(), Wh.data(), B, C, H);
    require_close(h_f, h, tol, tol, "rnn h");
    require_close(dx_f, dx, tol, tol, "rnn dx");
    require_close(dhp_f, dhp, tol, tol, "rnn dh_prev");
    require_close(dWx_f, dWx, tol, tol, "rnn dWx");
    require_close(dWh_f, dWh, tol, tol, "rnn dWh");
    require_close(db_f, db, tol, tol, "rnn db");

    Vec c(bh), gates(sz(B, 4 * H)), dcp(bh), lWx(p.Wx.size(), 0.0), lWh(p.Wh.size(), 0.0),
        lb(p.b.size(), 0.0);
    nn::lstm_cell_forward(h.data(), c.data(), gates.data(), p.xs.data(), p.h0.data(), p.c0.data(),
                          p.Wx.data(), p.Wh.data(), p.b.data(), B, C, H);
    nn::lstm_cell_backward(dx.data(), dhp.data(), dcp.data(), lWx.data(), lWh.data(), lb.data(),
                           p.dhs.data(), R2.data(), gates.data(), c.data(), p.c0.data(),
                           p.xs.data(), p.h0.data(), p.Wx.data(), p.Wh.data(), B, C, H);
    FVec c_f(bh), gates_f(gates.size()), dcp_f(bh), lWx_f(lWx.size(), 0.0f),
        lWh_f(lWh.size(), 0.0f), lb_f(lb.size(), 0.0f);
    nn::lstm_cell_forward(h_f.data(), c_f.data(), gates_f.data(), x.data(), h0.data(), c0.data(),
                          Wx.data(), Wh.data(), b.data(), B, C, H);
    require_close(h_f, h, tol, tol, "lstm h");
    require_close(c_f, c, tol, tol, "lstm c");
    require_close(gates_f, gates, tol, tol, "lstm gates");
    const FVec gates_r = to_float(gates), c_r = to_float(c);
    nn::lstm_cell_backward(dx_f.data(), dhp_f.data(), dcp_f.data(), lWx_f.data(), lWh_f.data(),
                           lb_f.data(), dh.data(), dc.data(), gates_r.data(), c_r.data(), c0.data(),
                           x.data(), h0.data(), Wx.data(), Wh.data(), B, C, H);
    require_close(dx_f, dx, tol, tol, "lstm dx");
    require_close(dhp_f, dhp, tol, tol, "lstm dh_prev");
    require_close(dcp_f, dcp, tol, tol, "lstm dc_prev");
    require_close(lWx_f, lWx, tol, tol, "lstm dWx");
    require_close(lWh_f, lWh, tol, tol, "lstm dWh");
    require_close(lb_f, lb, tol, tol, "lstm db");
  }
}

// =======================================================================================
// The gradient rule, in float (the sgemm path, beta = 0 vs 1)
// =======================================================================================

TEST_CASE("recurrent backwards accumulate parameter gradients and assign activation gradients",
          "[recurrent]") {
  nn::Rng rng(401);
  const int steps = 5, B = 3, C = 7, H = 9;
  SECTION("rnn_backward") {
    Problem p(rng, steps, B, C, H, 1, 0.3);
    const FVec xs = to_float(p.xs), h0 = to_float(p.h0), Wx = to_float(p.Wx), Wh = to_float(p.Wh),
               b = to_float(p.b), dhs = to_float(p.dhs);
    FVec hs(sz(steps, B, H));
    nn::rnn_forward(hs.data(), xs.data(), h0.data(), Wx.data(), Wh.data(), b.data(), steps, B, C, H);
    FVec dWx = out_buf(Wx.size(), 0.0f), dWh = out_buf(Wh.size(), 0.0f), db = out_buf(b.size(), 0.0f);
    FVec dxs1 = out_buf(xs.size()), dh01 = out_buf(h0.size());  // NaN: must be overwritten
    nn::rnn_backward(dxs1.data(), dh01.data(), dWx.data(), dWh.data(), db.data(), dhs.data(),
                     hs.data(), xs.data(), h0.data(), Wx.data(), Wh.data(), steps, B, C, H);
    const FVec dWx1 = dWx, dWh1 = dWh, db1 = db;
    FVec dxs2 = out_buf(xs.size(), 1e30f), dh02 = out_buf(h0.size(), -3.0f);  // garbage
    nn::rnn_backward(dxs2.data(), dh02.data(), dWx.data(), dWh.data(), db.data(), dhs.data(),
                     hs.data(), xs.data(), h0.data(), Wx.data(), Wh.data(), steps, B, C, H);
    for (size_t i = 0; i < Wx.size(); ++i) REQUIRE(dWx[i] == Approx(2.0f * dWx1[i]).epsilon(1e-5));
    for (size_t i = 0; i < Wh.size(); ++i) REQUIRE(dWh[i] == Approx(2.0f * dWh1[i]).epsilon(1e-5));
    for (size_t i = 0; i < b.size(); ++i) REQUIRE(db[i] == Approx(2.0f * db1[i]).epsilon(1e-5));
    for (size_t i = 0; i < xs.size(); ++i) {
      REQUIRE(std::isfinite(dxs1[i]));
      REQUIRE(dxs2[i] == dxs1[i]);
    }
    for (size_t i = 0; i < h0.size(); ++i) {
      REQUIRE(std::isfinite(dh01[i]));
      REQUIRE(dh02[i] == dh01[i]);
    }
    require_guard(dWx, Wx.size(), "dWx");
    require_guard(dWh, Wh.size(), "dWh");
    require_guard(db, b.size(), "db");
    require_guard(dxs2, xs.size(), "dxs");
    require_guard(dh02, h0.size(), "dh0");
  }
  SECTION("lstm_backward") {
    Problem p(rng, steps, B, C, H, 4, 0.3);
    const FVec xs = to_float(p.xs), h0 = to_float(p.h0), c0 = to_float(p.c0), Wx = to_float(p.Wx),
               Wh = to_float(p.Wh), b = to_float(p.b), dhs = to_float(p.dhs);
    const size_t n = sz(steps, B, H);
    FVec hs(n), cs(n), gates(4 * n);
    nn::lstm_forward(hs.data(), cs.data(), gates.data(), xs.data(), h0.data(), c0.data(), Wx.data(),
                     Wh.data(), b.data(), steps, B, C, H);
    FVec dWx = out_buf(Wx.size(), 0.0f), dWh = out_buf(Wh.size(), 0.0f), db = out_buf(b.size(), 0.0f);
    FVec dxs1 = out_buf(xs.size()), dh01 = out_buf(h0.size()), dc01 = out_buf(c0.size());
    nn::lstm_backward(dxs1.data(), dh01.data(), dc01.data(), dWx.data(), dWh.data(), db.data(),
                      dhs.data(), hs.data(), cs.data(), gates.data(), xs.data(), h0.data(),
                      c0.data(), Wx.data(), Wh.data(), steps, B, C, H);
    const FVec dWx1 = dWx, dWh1 = dWh, db1 = db;
    FVec dxs2 = out_buf(xs.size(), 1e30f), dh02 = out_buf(h0.size(), -3.0f),
         dc02 = out_buf(c0.size(), 5.0f);
    nn::lstm_backward(dxs2.data(), dh02.data(), dc02.data(), dWx.data(), dWh.data(), db.data(),
                      dhs.data(), hs.data(), cs.data(), gates.data(), xs.data(), h0.data(),
                      c0.data(), Wx.data(), Wh.data(), steps, B, C, H);
    for (size_t i = 0; i < Wx.size(); ++i) REQUIRE(dWx[i] == Approx(2.0f * dWx1[i]).epsilon(1e-5));
    for (size_t i = 0; i < Wh.size(); ++i) REQUIRE(dWh[i] == Approx(2.0f * dWh1[i]).epsilon(1e-5));
    for (size_t i = 0; i < b.size(); ++i) REQUIRE(db[i] == Approx(2.0f * db1[i]).epsilon(1e-5));
    for (size_t i = 0; i < xs.size(); ++i) {
      REQUIRE(std::isfinite(dxs1[i]));
      REQUIRE(dxs2[i] == dxs1[i]);
    }
    for (size_t i = 0; i < h0.size(); ++i) {
      REQUIRE(std::isfinite(dh01[i]));
      REQUIRE(dh02[i] == dh01[i]);
      REQUIRE(std::isfinite(dc01[i]));
      REQUIRE(dc02[i] == dc01[i]);
    }
    require_guard(dWx, Wx.size(), "dWx");
    require_guard(dWh, Wh.size(), "dWh");
    require_guard(db, b.size(), "db");
    require_guard(dxs2, xs.size(), "dxs");
    require_guard(dh02, h0.size(), "dh0");
    require_guard(dc02, c0.size(), "dc0");
  }
  SECTION("the cells") {
    Problem p(rng, 1, B, C, H, 4, 0.3);
    const FVec x = to_float(p.xs), hp = to_float(p.h0), cp = to_float(p.c0), Wx = to_float(p.Wx),
               Wh = to_float(p.Wh), b = to_float(p.b), dh = to_float(p.dhs);
    const size_t bh = sz(B, H);
    // RNN cell (first H rows of the weights)
    FVec h(bh);
    nn::rnn_cell_forward(h.data(), x.data(), hp.data(), Wx.data(), Wh.data(), b.data(), B, C, H);
    FVec rWx = out_buf(sz(H, C), 0.0f), rWh = out_buf(sz(H, H), 0.0f), rb = out_buf(H, 0.0f);
    FVec dx1 = out_buf(x.size()), dhp1 = out_buf(bh), dx2 = out_buf(x.size(), 7.0f),
         dhp2 = out_buf(bh, 7.0f);
    nn::rnn_cell_backward(dx1.data(), dhp1.data(), rWx.data(), rWh.data(), rb.data(), dh.data(),
                          h.data(), x.data(), hp.data(), Wx.data(), Wh.data(), B, C, H);
    const FVec rWx1 = rWx, rb1 = rb;
    nn::rnn_cell_backward(dx2.data(), dhp2.data(), rWx.data(), rWh.data(), rb.data(), dh.data(),
                          h.data(), x.data(), hp.data(), Wx.data(), Wh.data(), B, C, H);
    for (size_t i = 0; i < sz(H, C); ++i) REQUIRE(rWx[i] == Approx(2.0f * rWx1[i]).epsilon(1e-5));
    for (int i = 0; i < H; ++i) REQUIRE(rb[i] == Approx(2.0f * rb1[i]).epsilon(1e-5));
    for (size_t i = 0; i < x.size(); ++i) REQUIRE((std::isfinite(dx1[i]) && dx2[i] == dx1[i]));
    for (size_t i = 0; i < bh; ++i) REQUIRE((std::isfinite(dhp1[i]) && dhp2[i] == dhp1[i]));
    require_guard(rWx, sz(H, C), "rnn dWx");
    require_guard(rWh, sz(H, H), "rnn dWh");
    require_guard(dx2, x.size(), "rnn dx");
    require_guard(dhp2, bh, "rnn dh_prev");
    // LSTM cell
    FVec c(bh), gates(sz(B, 4 * H));
    nn::lstm_cell_forward(h.data(), c.data(), gates.data(), x.data(), hp.data(), cp.data(),
                          Wx.data(), Wh.data(), b.data(), B, C, H);
    FVec lWx = out_buf(Wx.size(), 0.0f), lWh = out_buf(Wh.size(), 0.0f), lb = out_buf(b.size(), 0.0f);
    FVec dcp1 = out_buf(bh), dcp2 = out_buf(bh, 7.0f);
    nn::lstm_cell_backward(dx1.data(), dhp1.data(), dcp1.data(), lWx.data(), lWh.data(), lb.data(),
                           dh.data(), static_cast<const float*>(nullptr), gates.data(), c.data(),
                           cp.data(), x.data(), hp.data(), Wx.data(), Wh.data(), B, C, H);
    const FVec lWh1 = lWh, lb1 = lb;
    std::fill(dx2.begin(), dx2.begin() + static_cast<std::ptrdiff_t>(x.size()), 7.0f);
    nn::lstm_cell_backward(dx2.data(), dhp2.data(), dcp2.data(), lWx.data(), lWh.data(), lb.data(),
                           dh.data(), static_cast<const float*>(nullptr), gates.data(), c.data(),
                           cp.data(), x.data(), hp.data(), Wx.data(), Wh.data(), B, C, H);
    for (size_t i = 0; i < Wh.size(); ++i) REQUIRE(lWh[i] == Approx(2.0f * lWh1[i]).epsilon(1e-5));
    for (size_t i = 0; i < b.size(); ++i) REQUIRE(lb[i] == Approx(2.0f * lb1[i]).epsilon(1e-5));
    for (size_t i = 0; i < x.size(); ++i) REQUIRE((std::isfinite(dx1[i]) && dx2[i] == dx1[i]));
    for (size_t i = 0; i < bh; ++i) {
      REQUIRE((std::isfinite(dhp1[i]) && dhp2[i] == dhp1[i]));
      REQUIRE((std::isfinite(dcp1[i]) && dcp2[i] == dcp1[i]));
    }
    require_guard(lWx, Wx.size(), "lstm dWx");
    require_guard(lWh, Wh.size(), "lstm dWh");
    require_guard(lb, b.size(), "lstm db");
    require_guard(dcp2, bh, "lstm dc_prev");
  }
}

TEST_CASE("recurrent ops reject sizes below 1", "[recurrent]") {
  const float x[4] = {1, 2, 3, 4};
  const float* none = nullptr;
  float h[4];
  REQUIRE_THROWS_AS(nn::rnn_forward(h, x, none, x, x, x, 0, 1, 1, 1), nn::Error);
  REQUIRE_THROWS_AS(nn::rnn_forward(h, x, none, x, x, x, 1, 0, 1, 1), nn::Error);
  REQUIRE_THROWS_AS(nn::rnn_cell_forward(h, x, x, x, x, x, 1, 1, 0), nn::Error);
  REQUIRE_THROWS_WITH(nn::lstm_forward(h, h, h, x, none, none, x, x, x, 1, 1, -2, 1),
                      Catch::Contains("C = -2"));
}

// =======================================================================================
// Vanishing gradients: what dh_norms is for
// =======================================================================================

namespace {
// ||dL/dh_t|| for a loss on the LAST step only, through a layer initialised by the
// Recurrent rule. Returns norms[0] / norms[steps - 1]: how much of the gradient survives
// `steps - 1` steps back.
double surviving_fraction(nn::CellType cell, uint64_t seed, int steps) {
  nn::Rng rng(seed);
  const int B = 4, C = 8, H = 32;
  nn::Recurrent layer("r", cell, C, H, rng);
  FVec xs(sz(steps, B, C));
  for (float& v : xs) v = rng.normal();
  layer.forward(xs.data(), steps, B);
  FVec dhs(sz(steps, B, H), 0.0f);  // a gradient only at the last step
  for (size_t k = sz(steps - 1, B, H); k < dhs.size(); ++k) dhs[k] = rng.normal();
  FVec norms(static_cast<size_t>(steps));
  layer.backward(nullptr, dhs.data(), norms.data());
  return static_cast<double>(norms.front()) / static_cast<double>(norms.back());
}
}  // namespace

TEST_CASE("dh_norms show a vanishing gradient in a tanh RNN: the LSTM keeps more",
          "[recurrent]") {
  // 21 steps: the gradient at the first step has travelled 20 steps back from the loss.
  // Measured (H = 32, B = 4, the layer's U(+-1/sqrt(H)) init, seeds 11..20): the RNN keeps
  // 1.4e-6 .. 1.2e-4 of it, the LSTM (forget bias 1) 1.7e-3 .. 7.8e-3; here seeds 11, 12, 13
  // give RNN 4.5e-6, 3.6e-6, 1.2e-4 and LSTM 2.7e-3, 2.0e-3, 2.5e-3. The tightest margin is
  // seed 13: LSTM / RNN = 21 against the asserted 10. The runs are seeded, so deterministic.
  for (uint64_t seed : {11u, 12u, 13u}) {
    const double rnn = surviving_fraction(nn::CellType::RNN, seed, 21);
    const double lstm = surviving_fraction(nn::CellType::LSTM, seed, 21);
    CAPTURE(seed, rnn, lstm);
    CHECK(rnn < 1e-3);
    CHECK(lstm > 10.0 * rnn);
  }
}

// =======================================================================================
// The Recurrent layer
// =======================================================================================

TEST_CASE("parse_cell and cell_name", "[recurrent]") {
  REQUIRE(nn::parse_cell("rnn") == nn::CellType::RNN);
  REQUIRE(nn::parse_cell("lstm") == nn::CellType::LSTM);
  REQUIRE(std::string(nn::cell_name(nn::CellType::RNN)) == "rnn");
  REQUIRE(std::string(nn::cell_name(nn::CellType::LSTM)) == "lstm");
  REQUIRE_THROWS_AS(nn::parse_cell("gru"), nn::Error);
  REQUIRE_THROWS_WITH(nn::parse_cell("gru"), Catch::Contains("gru") && Catch::Contains("rnn") &&
                                                 Catch::Contains("lstm"));
}

TEST_CASE("Recurrent: parameters, names, shapes and the initialisation", "[recurrent]") {
  const int C = 6, H = 10;
  const float k = 1.0f / std::sqrt(static_cast<float>(H));
  for (nn::CellType cell : {nn::CellType::RNN, nn::CellType::LSTM}) {
    const int64_t G = cell == nn::CellType::LSTM ? 4 : 1;
    CAPTURE(nn::cell_name(cell));
    nn::Rng rng(501);
    nn::Recurrent layer("enc", cell, C, H, rng);
    REQUIRE(layer.cell() == cell);
    REQUIRE(layer.input_size() == C);
    REQUIRE(layer.hidden_size() == H);
    REQUIRE(layer.name() == "enc");
    const std::vector<nn::Param> ps = layer.params();
    REQUIRE(ps.size() == 3);
    REQUIRE(ps[0].name == "enc.Wx");
    REQUIRE(ps[1].name == "enc.Wh");
    REQUIRE(ps[2].name == "enc.b");
    REQUIRE(ps[0].shape == nn::Shape{G * H, C});
    REQUIRE(ps[1].shape == nn::Shape{G * H, H});
    REQUIRE(ps[2].shape == nn::Shape{G * H});
    REQUIRE(ps[0].data == layer.Wx.data());
    REQUIRE(ps[0].grad == layer.dWx.data());
    REQUIRE(ps[1].grad == layer.dWh.data());
    REQUIRE(ps[2].grad == layer.db.data());
    REQUIRE(layer.num_params() == G * H * C + G * H * H + G * H);
    // Weights in [-1/sqrt(H), 1/sqrt(H)], not all equal; gradients start at zero.
    for (const nn::Tensor* w : {&layer.Wx, &layer.Wh}) {
      float lo = 1.0f, hi = -1.0f;
      for (int64_t i = 0; i < w->numel(); ++i) {
        lo = std::min(lo, (*w)[i]);
        hi = std::max(hi, (*w)[i]);
      }
      REQUIRE(lo >= -k);
      REQUIRE(hi <= k);
      REQUIRE(hi - lo > k);  // spread over the range, not a constant
    }
    for (const nn::Param& p : ps) {
      for (int64_t i = 0; i < p.numel(); ++i) REQUIRE(p.grad[i] == 0.0f);
    }
    // b = 0, except the LSTM's forget gate (the second block of H) = 1.
    for (int64_t i = 0; i < G * H; ++i) {
      const bool forget = cell == nn::CellType::LSTM && i >= H && i < 2 * H;
      REQUIRE(layer.b[i] == (forget ? 1.0f : 0.0f));
    }
  }
  nn::Rng rng(502);
  REQUIRE_THROWS_AS(nn::Recurrent("bad", nn::CellType::RNN, 0, 4, rng), nn::Error);
  REQUIRE_THROWS_AS(nn::Recurrent("bad", nn::CellType::LSTM, 3, 0, rng), nn::Error);
}

TEST_CASE("Recurrent: the carried state joins chunks into one sequence", "[recurrent]") {
  const int C = 5, H = 7, B = 3, s1 = 4, s2 = 3;
  for (nn::CellType cell : {nn::CellType::RNN, nn::CellType::LSTM}) {
    CAPTURE(nn::cell_name(cell));
    nn::Rng data_rng(601);
    FVec xs(sz(s1 + s2, B, C));
    for (float& v : xs) v = data_rng.normal();
    nn::Rng rng_a(602), rng_b(602);  // same seed: same weights
    nn::Recurrent chunked("a", cell, C, H, rng_a), whole("b", cell, C, H, rng_b);
    REQUIRE(chunked.h_state().empty());

    const float* h1 = chunked.forward(xs.data(), s1, B);
    const FVec hs1(h1, h1 + sz(s1, B, H));
    // The carried state is the chunk's last step.
    REQUIRE(chunked.h_state() == FVec(hs1.end() - static_cast<std::ptrdiff_t>(sz(B, H)), hs1.end()));
    REQUIRE(chunked.c_state().size() == (cell == nn::CellType::LSTM ? sz(B, H) : 0));
    const float* h2 = chunked.forward(xs.data() + sz(s1, B, C), s2, B);
    const FVec hs2(h2, h2 + sz(s2, B, H));
    const float* hw = whole.forward(xs.data(), s1 + s2, B);
    const Vec want(hw, hw + sz(s1 + s2, B, H));
    FVec joined = hs1;
    joined.insert(joined.end(), hs2.begin(), hs2.end());
    require_close(joined, want, 1e-6, 1e-5, "chunk 1 + chunk 2 vs one sequence");
    require_close(chunked.h_state(), Vec(whole.h_state().begin(), whole.h_state().end()), 1e-6,
                  1e-5, "h_state");
    require_close(chunked.c_state(), Vec(whole.c_state().begin(), whole.c_state().end()), 1e-6,
                  1e-5, "c_state");
    // The second chunk did start from a non-zero state: otherwise this test proves nothing.
    double state_norm = 0.0;
    for (float v : hs1) state_norm += static_cast<double>(v) * v;
    REQUIRE(state_norm > 0.1);
  }
}

TEST_CASE("Recurrent: reset_state and a new batch size start from zeros", "[recurrent]") {
  const int C = 4, H = 6, steps = 3;
  for (nn::CellType cell : {nn::CellType::RNN, nn::CellType::LSTM}) {
    CAPTURE(nn::cell_name(cell));
    nn::Rng data_rng(701);
    FVec xs(sz(steps, 3, C));
    for (float& v : xs) v = data_rng.normal();
    nn::Rng rng_a(702), rng_b(702);
    nn::Recurrent layer("a", cell, C, H, rng_a), fresh("b", cell, C, H, rng_b);
    const float* f = fresh.forward(xs.data(), steps, 2);
    const Vec want2(f, f + sz(steps, 2, H));

    layer.forward(xs.data(), steps, 2);
    const float* again = layer.forward(xs.data(), steps, 2);  // from the carried state: differs
    FVec carried(again, again + sz(steps, 2, H));
    bool differs = false;
    for (size_t i = 0; i < want2.size(); ++i) {
      differs = differs || carried[i] != static_cast<float>(want2[i]);
    }
    REQUIRE(differs);

    layer.reset_state();
    for (float v : layer.h_state()) REQUIRE(v == 0.0f);
    for (float v : layer.c_state()) REQUIRE(v == 0.0f);
    REQUIRE(layer.h_state().size() == sz(2, H));
    const float* after_reset = layer.forward(xs.data(), steps, 2);
    require_close(FVec(after_reset, after_reset + want2.size()), want2, 0.0, 0.0, "after reset");

    // Batch 2 -> 3: the state of 2 rows cannot continue 3 sequences; it restarts at zeros.
    nn::Rng rng_c(702);
    nn::Recurrent fresh3("c", cell, C, H, rng_c);
    const float* f3 = fresh3.forward(xs.data(), steps, 3);
    const Vec want3(f3, f3 + sz(steps, 3, H));
    const float* b3 = layer.forward(xs.data(), steps, 3);
    require_close(FVec(b3, b3 + want3.size()), want3, 0.0, 0.0, "after a batch size change");
    REQUIRE(layer.h_state().size() == sz(3, H));
  }
}

TEST_CASE("Recurrent: backward equals the free functions from the carried state (truncated BPTT)",
          "[recurrent]") {
  const int C = 5, H = 6, B = 2, s1 = 3, s2 = 4;
  for (nn::CellType cell : {nn::CellType::RNN, nn::CellType::LSTM}) {
    CAPTURE(nn::cell_name(cell));
    nn::Rng rng(801);
    nn::Recurrent layer("r", cell, C, H, rng);
    FVec xs(sz(s1 + s2, B, C)), dhs(sz(s2, B, H));
    for (float& v : xs) v = rng.normal();
    for (float& v : dhs) v = rng.normal();
    layer.forward(xs.data(), s1, B);
    const FVec h0 = layer.h_state(), c0 = layer.c_state();  // what chunk 2 starts from
    const float* x2 = xs.data() + sz(s1, B, C);
    layer.forward(x2, s2, B);
    FVec dxs = out_buf(sz(s2, B, C)), norms = out_buf(static_cast<size_t>(s2));
    layer.backward(dxs.data(), dhs.data(), norms.data());

    const int G = cell == nn::CellType::LSTM ? 4 : 1;
    FVec hs(sz(s2, B, H)), cs(sz(s2, B, H)), gates(sz(s2, B, 4 * H));
    FVec want_dxs(sz(s2, B, C)), dWx(sz(G * H, C), 0.0f), dWh(sz(G * H, H), 0.0f),
        db(static_cast<size_t>(G * H), 0.0f), want_norms(static_cast<size_t>(s2));
    if (cell == nn::CellType::RNN) {
      nn::rnn_forward(hs.data(), x2, h0.data(), layer.Wx.data(), layer.Wh.data(), layer.b.data(),
                      s2, B, C, H);
      nn::rnn_backward(want_dxs.data(), static_cast<float*>(nullptr), dWx.data(), dWh.data(),
                       db.data(), dhs.data(), hs.data(), x2, h0.data(), layer.Wx.data(),
                       layer.Wh.data(), s2, B, C, H, want_norms.data());
    } else {
      nn::lstm_forward(hs.data(), cs.data(), gates.data(), x2, h0.data(), c0.data(),
                       layer.Wx.data(), layer.Wh.data(), layer.b.data(), s2, B, C, H);
      nn::lstm_backward(want_dxs.data(), static_cast<float*>(nullptr),
                        static_cast<float*>(nullptr), dWx.data(), dWh.data(), db.data(),
                        dhs.data(), hs.data(), cs.data(), gates.data(), x2, h0.data(), c0.data(),
                        layer.Wx.data(), layer.Wh.data(), s2, B, C, H, want_norms.data());
    }
    const auto as_vec = [](const FVec& v) { return Vec(v.begin(), v.end()); };
    require_close(dxs, as_vec(want_dxs), 1e-6, 1e-5, "dxs");
    require_close(norms, as_vec(want_norms), 1e-6, 1e-5, "dh_norms");
    require_close(FVec(layer.dWx.span().begin(), layer.dWx.span().end()), as_vec(dWx), 1e-6, 1e-5,
                  "dWx");
    require_close(FVec(layer.dWh.span().begin(), layer.dWh.span().end()), as_vec(dWh), 1e-6, 1e-5,
                  "dWh");
    require_close(FVec(layer.db.span().begin(), layer.db.span().end()), as_vec(db), 1e-6, 1e-5,
                  "db");
    require_guard(dxs, want_dxs.size(), "dxs");
    require_guard(norms, want_norms.size(), "dh_norms");
    // A second backward accumulates the parameter gradients (the rule of nn/ops.h).
    layer.backward(nullptr, dhs.data());
    for (size_t i = 0; i < db.size(); ++i) {
      REQUIRE(layer.db[static_cast<int64_t>(i)] == Approx(2.0f * db[i]).epsilon(1e-5));
    }
  }
  nn::Rng rng(802);
  nn::Recurrent unused("u", nn::CellType::LSTM, 2, 3, rng);
  const float dh[3] = {1, 2, 3};
  REQUIRE_THROWS_WITH(unused.backward(nullptr, dh), Catch::Contains("before forward"));
}

// =======================================================================================
// clip_grad_norm
// =======================================================================================

namespace {
struct Grads {
  FVec w = {3.0f, 0.0f, -4.0f, 1.0f};  // a norm that is easy to compute: sqrt(9+16+1+...)
  FVec b = {2.0f, -2.0f};
  FVec wd = FVec(4, 0.0f), bd = FVec(2, 0.0f);
  std::vector<nn::Param> params() {
    return {{"w", nn::Shape{2, 2}, wd.data(), w.data()}, {"b", nn::Shape{2}, bd.data(), b.data()}};
  }
};
}  // namespace

TEST_CASE("clip_grad_norm: returns the norm before clipping and clips to max_norm", "[recurrent][optim]") {
  const double norm = std::sqrt(9.0 + 16.0 + 1.0 + 4.0 + 4.0);  // sqrt(34)
  SECTION("above max_norm: scaled to exactly max_norm, same direction") {
    Grads g;
    const FVec w0 = g.w, b0 = g.b;
    const double before = nn::clip_grad_norm(g.params(), 2.0);
    REQUIRE(before == Approx(norm).epsilon(1e-12));
    REQUIRE(nn::grad_norm(g.params()) == Approx(2.0).epsilon(1e-6));
    const double scale = 2.0 / norm;
    for (size_t i = 0; i < w0.size(); ++i) REQUIRE(g.w[i] == Approx(w0[i] * scale).epsilon(1e-6));
    for (size_t i = 0; i < b0.size(); ++i) REQUIRE(g.b[i] == Approx(b0[i] * scale).epsilon(1e-6));
  }
  SECTION("below max_norm: untouched") {
    Grads g;
    const FVec w0 = g.w, b0 = g.b;
    REQUIRE(nn::clip_grad_norm(g.params(), 10.0) == Approx(norm).epsilon(1e-12));
    REQUIRE(g.w == w0);
    REQUIRE(g.b == b0);
  }
  SECTION("max_norm <= 0 disables clipping") {
    for (double off : {0.0, -1.0}) {
      Grads g;
      const FVec w0 = g.w;
      REQUIRE(nn::clip_grad_norm(g.params(), off) == Approx(norm).epsilon(1e-12));
      REQUIRE(g.w == w0);
    }
  }
  SECTION("a NaN or inf gradient throws, clipping on or off") {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      for (double max_norm : {1.0, 0.0}) {
        Grads g;
        g.b[1] = bad;
        REQUIRE_THROWS_AS(nn::clip_grad_norm(g.params(), max_norm), nn::Error);
      }
    }
  }
}

// =======================================================================================
// The cell's element-wise rungs (kernels/recurrent_cell.h): every rung against v1
// =======================================================================================
// Sizes that are not multiples of any vector width (H = 1, 7, 33, 53) next to the lessons'
// 256, inputs over a wide range (|z| up to ~20: the saturated ends of sigmoid and tanh),
// outputs pre-filled with NaN and guarded after their end, c_prev / dc as nullptr, and dc
// aliasing dc_prev as BPTT calls it. Tolerance: poly_exp's relative error (<= 1e-6) through
// one division and a few products.

TEST_CASE("every LSTM / RNN element-wise rung matches v1 at odd sizes", "[recurrent][kernels]") {
  nn::Rng rng(91);
  const double tol = 2e-6;
  for (const auto& [B, H] : std::vector<std::pair<int, int>>{{1, 1}, {3, 7}, {5, 33}, {2, 53}, {32, 256}}) {
    CAPTURE(B, H);
    const size_t bh = sz(B, H), bg = sz(B, 4 * H);
    const Vec z = random_vec(rng, bg, 6.0), b = random_vec(rng, sz(4, H), 1.0);
    const Vec cp = random_vec(rng, bh, 1.5), dh = random_vec(rng, bh), dc = random_vec(rng, bh);
    const FVec zf = to_float(z), bf = to_float(b), cpf = to_float(cp), dhf = to_float(dh), dcf = to_float(dc);
    for (bool with_prev : {true, false}) {
      CAPTURE(with_prev);
      // The reference: v1 in float.
      FVec h1 = out_buf(bh), c1 = out_buf(bh), g1 = zf;
      kernels::lstm_pointwise_forward_v1(h1.data(), c1.data(), g1.data(), with_prev ? cpf.data() : nullptr,
                                         bf.data(), B, H);
      FVec dz1 = out_buf(bg), dcp1 = out_buf(bh);
      kernels::lstm_pointwise_backward_v1(dz1.data(), dcp1.data(), dhf.data(), with_prev ? dcf.data() : nullptr,
                                          g1.data(), c1.data(), with_prev ? cpf.data() : nullptr, B, H);
      FVec r1 = zf;
      kernels::rnn_pointwise_forward_v1(r1.data(), bf.data(), B, H);
      const Vec h1d(h1.begin(), h1.begin() + static_cast<ptrdiff_t>(bh)), c1d(c1.begin(), c1.begin() + static_cast<ptrdiff_t>(bh));
      const Vec g1d(g1.begin(), g1.end()), dz1d(dz1.begin(), dz1.begin() + static_cast<ptrdiff_t>(bg));
      const Vec dcp1d(dcp1.begin(), dcp1.begin() + static_cast<ptrdiff_t>(bh)), r1d(r1.begin(), r1.end());
      for (const auto& v : kernels::lstm_pointwise_forward_versions()) {
        INFO("lstm forward " << v.id() << " " << v.name);
        FVec h = out_buf(bh), c = out_buf(bh), g = zf;
        g.insert(g.end(), kGuardN, kGuard);
        v.fn(h.data(), c.data(), g.data(), with_prev ? cpf.data() : nullptr, bf.data(), B, H);
        require_close(h, h1d, tol, tol, "h");
        require_close(c, c1d, tol, tol, "c");
        require_close(g, g1d, tol, tol, "gates");
        require_guard(h, bh, "h");
        require_guard(c, bh, "c");
        require_guard(g, bg, "gates");
      }
      for (const auto& v : kernels::lstm_pointwise_backward_versions()) {
        INFO("lstm backward " << v.id() << " " << v.name);
        FVec dz = out_buf(bg), dcp = out_buf(bh);
        v.fn(dz.data(), dcp.data(), dhf.data(), with_prev ? dcf.data() : nullptr, g1.data(), c1.data(),
             with_prev ? cpf.data() : nullptr, B, H);
        require_close(dz, dz1d, tol, tol, "dz");
        require_close(dcp, dcp1d, tol, tol, "dc_prev");
        require_guard(dz, bg, "dz");
        require_guard(dcp, bh, "dc_prev");
        // dc_prev in the same buffer as dc (how lstm_backward calls it), and skipped.
        FVec inout = dcf;
        FVec dz2 = out_buf(bg);
        v.fn(dz2.data(), inout.data(), dhf.data(), inout.data(), g1.data(), c1.data(), cpf.data(), B, H);
        FVec dz_ref = out_buf(bg), dcp_ref = out_buf(bh);
        kernels::lstm_pointwise_backward_v1(dz_ref.data(), dcp_ref.data(), dhf.data(), dcf.data(), g1.data(),
                                            c1.data(), cpf.data(), B, H);
        require_close(inout, Vec(dcp_ref.begin(), dcp_ref.begin() + static_cast<ptrdiff_t>(bh)), tol, tol,
                      "dc_prev aliasing dc");
        require_close(dz2, Vec(dz_ref.begin(), dz_ref.begin() + static_cast<ptrdiff_t>(bg)), tol, tol,
                      "dz with dc aliased");
        FVec dz3 = out_buf(bg);
        v.fn(dz3.data(), nullptr, dhf.data(), dcf.data(), g1.data(), c1.data(), cpf.data(), B, H);
        require_close(dz3, Vec(dz_ref.begin(), dz_ref.begin() + static_cast<ptrdiff_t>(bg)), tol, tol,
                      "dz without dc_prev");
      }
      for (const auto& v : kernels::rnn_pointwise_forward_versions()) {
        INFO("rnn forward " << v.id() << " " << v.name);
        FVec r = zf;
        r.insert(r.end(), kGuardN, kGuard);
        v.fn(r.data(), bf.data(), B, H);
        require_close(r, r1d, tol, tol, "h");
        require_guard(r, bg, "h");
      }
    }
  }
}

TEST_CASE("the cell's v1 rungs in double match the definitions (sigmoid, tanh)", "[recurrent][kernels]") {
  // One unit, no batch: the gates by hand from the formulas in kernels/recurrent_cell.h.
  const double z[4] = {0.3, -1.2, 2.5, -0.4}, b[4] = {0.1, 1.0, -0.5, 0.2}, cp = 0.7;
  double g[4] = {z[0], z[1], z[2], z[3]}, h = kNaN, c = kNaN;
  kernels::lstm_pointwise_forward_v1(&h, &c, g, &cp, b, 1, 1);
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  const double i = sig(0.4), f = sig(-0.2), gg = std::tanh(2.0), o = sig(-0.2);
  REQUIRE(g[0] == Approx(i).epsilon(1e-14));
  REQUIRE(g[1] == Approx(f).epsilon(1e-14));
  REQUIRE(g[2] == Approx(gg).epsilon(1e-14));
  REQUIRE(g[3] == Approx(o).epsilon(1e-14));
  REQUIRE(c == Approx(f * cp + i * gg).epsilon(1e-14));
  REQUIRE(h == Approx(o * std::tanh(f * cp + i * gg)).epsilon(1e-14));
  double r = 0.25;
  const double rb = -1.0;
  kernels::rnn_pointwise_forward_v1(&r, &rb, 1, 1);
  REQUIRE(r == Approx(std::tanh(-0.75)).epsilon(1e-14));
}

TEST_CASE("the float LSTM and RNN sequence loops give bit-identical results at 1 and 2 threads",
          "[recurrent][determinism]") {
  nn::Rng rng(92);
  const int steps = 6, B = 32, C = 13, H = 520;  // B*H past kMinParallelElems: the cell rungs thread
  for (int G : {1, 4}) {
    CAPTURE(G);
    const Problem p(rng, steps, B, C, H, G, 0.1);
    const FVec xs = to_float(p.xs), h0 = to_float(p.h0), c0 = to_float(p.c0), Wx = to_float(p.Wx),
               Wh = to_float(p.Wh), b = to_float(p.b), dhs = to_float(p.dhs);
    std::vector<FVec> outs[2];
    for (int threads : {1, 2}) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      FVec hs(sz(steps, B, H)), cs(sz(steps, B, H)), gates(sz(steps, B, 4 * H)), dxs(sz(steps, B, C));
      FVec dh0(sz(B, H)), dc0(sz(B, H)), dWx(Wx.size(), 0.0f), dWh(Wh.size(), 0.0f), db(b.size(), 0.0f);
      if (G == 1) {
        nn::rnn_forward(hs.data(), xs.data(), h0.data(), Wx.data(), Wh.data(), b.data(), steps, B, C, H);
        nn::rnn_backward(dxs.data(), dh0.data(), dWx.data(), dWh.data(), db.data(), dhs.data(), hs.data(),
                         xs.data(), h0.data(), Wx.data(), Wh.data(), steps, B, C, H);
      } else {
        nn::lstm_forward(hs.data(), cs.data(), gates.data(), xs.data(), h0.data(), c0.data(), Wx.data(), Wh.data(),
                         b.data(), steps, B, C, H);
        nn::lstm_backward(dxs.data(), dh0.data(), dc0.data(), dWx.data(), dWh.data(), db.data(), dhs.data(),
                          hs.data(), cs.data(), gates.data(), xs.data(), h0.data(), c0.data(), Wx.data(),
                          Wh.data(), steps, B, C, H);
      }
      omp_set_num_threads(saved);
      outs[threads - 1] = {hs, cs, gates, dxs, dh0, dc0, dWx, dWh, db};
    }
    for (size_t k = 0; k < outs[0].size(); ++k) {
      CAPTURE(k);
      REQUIRE(outs[0][k] == outs[1][k]);
    }
  }
}
