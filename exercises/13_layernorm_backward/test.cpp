// Tests of exercise 13_layernorm_backward. The expected values come from
// nn::layernorm_backward<double> (nn/transformer.h) on the same inputs; one test works a
// 3-channel row by hand, one checks every gradient against finite differences of a loss
// built on nn::layernorm_forward<double>.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/13_layernorm_backward/layernorm_backward.h"
#include "exercises/test_util.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"
#include "nn/transformer.h"

namespace {

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

// "row n = 1, channel c = 4" for element i of an (N, C) matrix.
std::string where(size_t i, int C) {
  std::ostringstream os;
  os << "row n = " << i / static_cast<size_t>(C) << ", channel c = " << i % static_cast<size_t>(C);
  return os.str();
}

void check(const ex_test::Comparison& c) {
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

}  // namespace

TEST_CASE("layernorm_backward: a worked example, one row of 3 channels",
          "[13_layernorm_backward]") {
  // x = {1, 2, 3}: mean 2, var 2/3, rstd = 1 / sqrt(2/3 + 1e-5) ~ 1.2247, xhat ~ {-1.22, 0, 1.22}.
  // weight 1 and dout = {1, 0, 0}, so g = {1, 0, 0}: mean(g) = 1/3, mean(g xhat) = xhat[0] / 3.
  // dinp[c] = rstd (g[c] - 1/3 - xhat[c] xhat[0] / 3) ~ rstd {1/6, -1/3, 1/6} ~ {0.204, -0.408, 0.204}:
  // pushing x[0] up moves out[0] up, but also the mean (which pulls on every channel).
  const std::vector<float> x = {1.0f, 2.0f, 3.0f}, weight = {1.0f, 1.0f, 1.0f};
  const std::vector<float> dout = {1.0f, 0.0f, 0.0f};
  const double rstd_d = 1.0 / std::sqrt(2.0 / 3.0 + nn::kLayernormEps);
  const float mean = 2.0f;
  const auto rstd = static_cast<float>(rstd_d);
  std::vector<double> xhat(3), want_dinp(3);
  for (size_t c = 0; c < 3; ++c) xhat[c] = (x[c] - 2.0) * static_cast<double>(rstd);
  for (size_t c = 0; c < 3; ++c) {
    want_dinp[c] = static_cast<double>(rstd) * (dout[c] - 1.0 / 3.0 - xhat[c] * xhat[0] / 3.0);
  }
  std::vector<float> dinp = ex_test::output_buffer(3, 0.0f), dweight = ex_test::output_buffer(3, 0.0f),
                     dbias = ex_test::output_buffer(3, 0.0f);
  ex::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), x.data(),
                         weight.data(), &mean, &rstd, 1, 3);
  INFO("x = {1, 2, 3}, weight = {1, 1, 1}, dout = {1, 0, 0}, mean = 2, rstd = " << rstd);
  check(ex_test::compare("dinp", {dinp.data(), 3}, want_dinp, 1e-6, 1e-5));
  check(ex_test::compare("dweight", {dweight.data(), 3}, std::vector<double>{xhat[0], 0.0, 0.0},
                         1e-6, 1e-5));
  check(ex_test::compare("dbias", {dbias.data(), 3}, std::vector<double>{1.0, 0.0, 0.0}, 1e-6,
                         1e-5));
}

TEST_CASE("layernorm_backward: random N = 5, C = 7, against nn::layernorm_backward<double>",
          "[13_layernorm_backward]") {
  nn::Rng rng(1301);
  const int N = 5, C = 7;  // not round numbers, and N != C: a swapped index shows
  std::vector<float> inp = ex_test::random_normal(rng, sz(N, C), 2.0f);
  for (float& v : inp) v += 1.5f;  // a mean far from 0: forgetting to subtract it shows
  const std::vector<float> weight = ex_test::random_normal(rng, static_cast<size_t>(C), 0.5f);
  const std::vector<float> bias = ex_test::random_normal(rng, static_cast<size_t>(C), 0.5f);
  const std::vector<float> dout = ex_test::random_normal(rng, sz(N, C));
  // The forward, in float, gives the mean and rstd the backward reads.
  std::vector<float> out(sz(N, C)), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  nn::layernorm_forward<float>(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                               bias.data(), N, C);
  // What the buffers held before: the residual stream's gradient in dinp, earlier
  // micro-batches' in dweight and dbias. All three must be ADDED to.
  const std::vector<float> old_dinp = ex_test::random_normal(rng, sz(N, C));
  const std::vector<float> old_dw = ex_test::random_normal(rng, static_cast<size_t>(C));
  const std::vector<float> old_db = ex_test::random_normal(rng, static_cast<size_t>(C));

  using ex_test::to_double;
  std::vector<double> want_dinp = to_double(old_dinp), want_dw = to_double(old_dw),
                      want_db = to_double(old_db);
  const std::vector<double> dout_d = to_double(dout), inp_d = to_double(inp),
                            w_d = to_double(weight), mean_d = to_double(mean),
                            rstd_d = to_double(rstd);
  nn::layernorm_backward<double>(want_dinp.data(), want_dw.data(), want_db.data(), dout_d.data(),
                                 inp_d.data(), w_d.data(), mean_d.data(), rstd_d.data(), N, C);

  std::vector<float> dinp = ex_test::output_buffer(sz(N, C)),
                     dweight = ex_test::output_buffer(static_cast<size_t>(C)),
                     dbias = ex_test::output_buffer(static_cast<size_t>(C));
  std::copy(old_dinp.begin(), old_dinp.end(), dinp.begin());
  std::copy(old_dw.begin(), old_dw.end(), dweight.begin());
  std::copy(old_db.begin(), old_db.end(), dbias.begin());
  ex::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                         weight.data(), mean.data(), rstd.data(), N, C);

  SECTION("dinp (N, C) is ACCUMULATED: it started with the residual stream's gradient") {
    check(ex_test::compare("dinp", {dinp.data(), want_dinp.size()}, want_dinp, 1e-5, 1e-4,
                           [&](size_t i) { return where(i, C); }));
  }
  SECTION("dweight (C) is accumulated") {
    check(ex_test::compare("dweight", {dweight.data(), want_dw.size()}, want_dw, 1e-5, 1e-4));
  }
  SECTION("dbias (C) is accumulated") {
    check(ex_test::compare("dbias", {dbias.data(), want_db.size()}, want_db, 1e-5, 1e-4));
  }
  SECTION("nothing is written past the end of an output") {
    const std::string overrun = ex_test::guard_damage(dinp, sz(N, C), "dinp") +
                                ex_test::guard_damage(dweight, static_cast<size_t>(C), "dweight") +
                                ex_test::guard_damage(dbias, static_cast<size_t>(C), "dbias");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}

TEST_CASE("layernorm_backward: matches finite differences of L = sum r * out (double)",
          "[13_layernorm_backward]") {
  // With dout = r and every gradient buffer starting at 0, each gradient must be the slope
  // of L with respect to that input.
  nn::Rng rng(1302);
  const int N = 3, C = 6;
  std::vector<double> x(sz(N, C)), w(static_cast<size_t>(C)), b(static_cast<size_t>(C)),
      r(sz(N, C)), out(sz(N, C)), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  for (double& v : x) v = rng.normal(0.5f, 1.5f);  // float values, so float copies are exact
  for (double& v : w) v = rng.normal(1.0f, 0.5f);
  for (double& v : b) v = rng.normal(0.0f, 0.5f);
  for (double& v : r) v = rng.normal();
  auto loss = [&] {
    nn::layernorm_forward<double>(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                                  b.data(), N, C);
    double sum = 0.0;
    for (size_t i = 0; i < out.size(); ++i) sum += r[i] * out[i];
    return sum;
  };
  loss();
  const std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), rf(r.begin(), r.end()),
      meanf(mean.begin(), mean.end()), rstdf(rstd.begin(), rstd.end());
  std::vector<float> dx = ex_test::output_buffer(x.size(), 0.0f),
                     dw = ex_test::output_buffer(w.size(), 0.0f),
                     db = ex_test::output_buffer(b.size(), 0.0f);
  ex::layernorm_backward(dx.data(), dw.data(), db.data(), rf.data(), xf.data(), wf.data(),
                         meanf.data(), rstdf.data(), N, C);
  const auto as_double = [](const std::vector<float>& v, size_t n) {
    return std::vector<double>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
  };
  const auto slope_check = [&](const char* what, std::vector<double>& in,
                               const std::vector<float>& g) {
    const nn::GradCheckResult res =
        nn::check_gradient(loss, in, as_double(g, in.size()), 1e-6, 1e-5, 1e-3);
    INFO(what << ": " << res.report);
    CHECK(res.ok);
  };
  SECTION("dL/dinp") { slope_check("dinp", x, dx); }
  SECTION("dL/dweight") { slope_check("dweight", w, dw); }
  SECTION("dL/dbias") { slope_check("dbias", b, db); }
}
