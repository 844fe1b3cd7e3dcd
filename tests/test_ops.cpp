// Every op in nn/ops.h: the backward is checked against central finite differences in
// double precision, and the float path (what training runs, through kernels::sgemm) is
// checked against the double path.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "nn/gradcheck.h"
#include "nn/ops.h"
#include "nn/rng.h"
#include "tests/gradcheck_test_util.h"

namespace {

// The losses below are a fixed random projection, L = testing::dot(y, r) = sum_i r_i y_i, so
// dL/dy = r: every output element gets a different, non-trivial upstream gradient.
void require_ok(const nn::GradCheckResult& r) {
  INFO(r.report);
  CAPTURE(r.max_abs_err, r.max_rel_err);
  REQUIRE(r.ok);
}

}  // namespace

TEST_CASE("linear backward matches finite differences (double)", "[ops][gradcheck]") {
  nn::Rng rng(1);
  const int B = 3, C = 5, OC = 4;  // not multiples of any vector width
  auto x = testing::normal_vec(rng, B * C);
  auto w = testing::normal_vec(rng, OC * C);
  auto b = testing::normal_vec(rng, OC);
  auto r = testing::normal_vec(rng, B * OC);
  std::vector<double> y(B * OC);
  auto loss = [&] {
    nn::linear_forward(y.data(), x.data(), w.data(), b.data(), B, C, OC);
    return testing::dot(y, r);
  };
  loss();
  std::vector<double> dx(B * C, 99.0), dw(OC * C, 0.0), db(OC, 0.0);
  nn::linear_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), B, C, OC);
  SECTION("d/dx") { require_ok(nn::check_gradient(loss, x, dx)); }
  SECTION("d/dW") { require_ok(nn::check_gradient(loss, w, dw)); }
  SECTION("d/db") { require_ok(nn::check_gradient(loss, b, db)); }
}

TEST_CASE("linear backward accumulates parameter gradients and assigns input gradients", "[ops]") {
  nn::Rng rng(2);
  const int B = 2, C = 3, OC = 2;
  auto x = testing::normal_vec(rng, B * C);
  auto w = testing::normal_vec(rng, OC * C);
  auto dy = testing::normal_vec(rng, B * OC);
  std::vector<double> dx1(B * C, 0.0), dw1(OC * C, 0.0), db1(OC, 0.0);
  nn::linear_backward(dx1.data(), dw1.data(), db1.data(), dy.data(), x.data(), w.data(), B, C, OC);
  // Second call on the same buffers: dW and db double, dx stays the same (assigned).
  std::vector<double> dx2(B * C, 123.0), dw2 = dw1, db2 = db1;
  nn::linear_backward(dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(), B, C, OC);
  for (size_t i = 0; i < dw1.size(); ++i) REQUIRE(dw2[i] == Approx(2 * dw1[i]));
  for (size_t i = 0; i < db1.size(); ++i) REQUIRE(db2[i] == Approx(2 * db1[i]));
  for (size_t i = 0; i < dx1.size(); ++i) REQUIRE(dx2[i] == Approx(dx1[i]));
}

TEST_CASE("float linear (kernels::sgemm) agrees with the double reference", "[ops]") {
  nn::Rng rng(3);
  const int B = 37, C = 129, OC = 67;  // odd sizes on purpose
  auto xd = testing::normal_vec(rng, B * C), wd = testing::normal_vec(rng, OC * C), bd = testing::normal_vec(rng, OC);
  auto dyd = testing::normal_vec(rng, B * OC);
  std::vector<float> xf(xd.begin(), xd.end()), wf(wd.begin(), wd.end()), bf(bd.begin(), bd.end()),
      dyf(dyd.begin(), dyd.end());
  std::vector<double> yd(B * OC), dxd(B * C), dwd(OC * C, 0.0), dbd(OC, 0.0);
  std::vector<float> yf(B * OC), dxf(B * C), dwf(OC * C, 0.0f), dbf(OC, 0.0f);
  nn::linear_forward(yd.data(), xd.data(), wd.data(), bd.data(), B, C, OC);
  nn::linear_forward(yf.data(), xf.data(), wf.data(), bf.data(), B, C, OC);
  nn::linear_backward(dxd.data(), dwd.data(), dbd.data(), dyd.data(), xd.data(), wd.data(), B, C, OC);
  nn::linear_backward(dxf.data(), dwf.data(), dbf.data(), dyf.data(), xf.data(), wf.data(), B, C, OC);
  auto compare = [](const std::vector<float>& got, const std::vector<double>& ref, const char* what) {
    int bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double tol = 1e-4 + 1e-4 * std::fabs(ref[i]);
      if (!(std::fabs(got[i] - ref[i]) <= tol)) {
        if (bad++ < 5) WARN(what << "[" << i << "] float " << got[i] << " vs double " << ref[i]);
      }
    }
    CHECK(bad == 0);
  };
  compare(yf, yd, "y");
  compare(dxf, dxd, "dx");
  compare(dwf, dwd, "dW");
  compare(dbf, dbd, "db");
}

TEST_CASE("activation backwards match finite differences (double)", "[ops][gradcheck]") {
  nn::Rng rng(4);
  const int N = 23;
  auto x = testing::normal_vec(rng, N, 2.0);
  // Keep ReLU inputs away from the kink at 0, where the derivative does not exist.
  for (double& v : x) v = std::fabs(v) < 1e-3 ? 0.5 : v;
  auto r = testing::normal_vec(rng, N);
  std::vector<double> y(N), dx(N);

  SECTION("relu") {
    auto loss = [&] { nn::relu_forward(y.data(), x.data(), N); return testing::dot(y, r); };
    loss();
    nn::relu_backward(dx.data(), r.data(), x.data(), N);
    require_ok(nn::check_gradient(loss, x, dx));
  }
  SECTION("tanh") {
    auto loss = [&] { nn::tanh_forward(y.data(), x.data(), N); return testing::dot(y, r); };
    loss();
    nn::tanh_backward(dx.data(), r.data(), y.data(), N);
    require_ok(nn::check_gradient(loss, x, dx));
  }
  SECTION("sigmoid") {
    auto loss = [&] { nn::sigmoid_forward(y.data(), x.data(), N); return testing::dot(y, r); };
    loss();
    nn::sigmoid_backward(dx.data(), r.data(), y.data(), N);
    require_ok(nn::check_gradient(loss, x, dx));
  }
}

TEST_CASE("sigmoid and softmax stay finite for huge inputs", "[ops]") {
  const double big[4] = {1000.0, -1000.0, 0.0, 1e308};
  double s[4];
  nn::sigmoid_forward(s, big, 4);
  REQUIRE(s[0] == Approx(1.0));
  REQUIRE(s[1] == Approx(0.0).margin(1e-300));
  REQUIRE(s[2] == Approx(0.5));
  REQUIRE(s[3] == Approx(1.0));
  const float logits[3] = {1000.0f, 999.0f, -1000.0f};
  float p[3];
  nn::softmax_forward(p, logits, 1, 3);
  for (float v : p) REQUIRE(std::isfinite(v));
  REQUIRE(p[0] == Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-5));
}

TEST_CASE("softmax rows sum to one", "[ops]") {
  nn::Rng rng(5);
  const int B = 4, V = 11;
  auto x = testing::normal_vec(rng, B * V, 5.0);
  std::vector<double> p(B * V);
  nn::softmax_forward(p.data(), x.data(), B, V);
  for (int b = 0; b < B; ++b) {
    double sum = 0.0;
    for (int v = 0; v < V; ++v) {
      REQUIRE(p[b * V + v] > 0.0);
      sum += p[b * V + v];
    }
    REQUIRE(sum == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("softmax + cross-entropy backward matches finite differences (double)", "[ops][gradcheck]") {
  nn::Rng rng(6);
  const int B = 5, V = 7;
  auto x = testing::normal_vec(rng, B * V, 3.0);
  const std::vector<int32_t> t = {0, 6, 3, 3, 1};
  std::vector<double> p(B * V), l(B), dx(B * V, 42.0);
  auto loss = [&] { return nn::softmax_cross_entropy_forward(p.data(), l.data(), x.data(), t.data(), B, V); };
  loss();
  nn::softmax_cross_entropy_backward(dx.data(), p.data(), t.data(), B, V);
  require_ok(nn::check_gradient(loss, x, dx));
}

TEST_CASE("cross-entropy equals -log p[target] and is large but finite for confident mistakes",
          "[ops]") {
  const float logits[2 * 3] = {2.0f, 1.0f, 0.1f, 0.0f, 0.0f, 200.0f};
  const int32_t t[2] = {0, 0};
  float p[6], l[2];
  const float mean = nn::softmax_cross_entropy_forward(p, l, logits, t, 2, 3);
  const double p0 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.0) + std::exp(0.1));
  REQUIRE(l[0] == Approx(-std::log(p0)).epsilon(1e-6));
  REQUIRE(std::isfinite(l[1]));  // p = e^-200 underflows in float; the loss must not be inf
  REQUIRE(l[1] == Approx(200.0).epsilon(1e-5));
  REQUIRE(mean == Approx((l[0] + l[1]) / 2));
}

TEST_CASE("cross-entropy rejects a label outside the classes", "[ops]") {
  const float logits[3] = {0.0f, 0.0f, 0.0f};
  const int32_t t[1] = {3};
  float p[3], l[1];
  REQUIRE_THROWS_WITH(nn::softmax_cross_entropy_forward(p, l, logits, t, 1, 3),
                      Catch::Contains("outside [0, 3)"));
}

TEST_CASE("mean-squared error backward matches finite differences (double)", "[ops][gradcheck]") {
  nn::Rng rng(7);
  const int N = 13;
  auto pred = testing::normal_vec(rng, N);
  auto target = testing::normal_vec(rng, N);
  std::vector<double> dp(N);
  auto loss = [&] { return nn::mse_forward(pred.data(), target.data(), N); };
  nn::mse_backward(dp.data(), pred.data(), target.data(), N);
  require_ok(nn::check_gradient(loss, pred, dp));
  REQUIRE(nn::mse_forward(target.data(), target.data(), N) == 0.0);
}

TEST_CASE("the gradient checker catches a wrong gradient and NaN", "[ops][gradcheck]") {
  std::vector<double> x = {1.0, 2.0, 3.0};
  auto loss = [&] { return x[0] * x[0] + 3.0 * x[1] + std::sin(x[2]); };
  const std::vector<double> right = {2.0, 3.0, std::cos(3.0)};
  REQUIRE(nn::check_gradient(loss, x, right).ok);
  std::vector<double> wrong = right;
  wrong[1] = 3.001;
  const auto r = nn::check_gradient(loss, x, wrong);
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.mismatches == 1);
  REQUIRE_THAT(r.report, Catch::Contains("[1]"));
  std::vector<double> nan = right;
  nan[2] = std::numeric_limits<double>::quiet_NaN();
  REQUIRE_FALSE(nn::check_gradient(loss, x, nan).ok);
}

TEST_CASE("argmax_rows picks the first maximum in each row", "[ops]") {
  const float logits[2 * 4] = {0.1f, 0.9f, 0.9f, -1.0f, -3.0f, -2.0f, -1.0f, -5.0f};
  int32_t pred[2];
  nn::argmax_rows(pred, logits, 2, 4);
  REQUIRE(pred[0] == 1);
  REQUIRE(pred[1] == 2);
}
