// Tests of exercise 22_rmsnorm_backward. The expected values come from
// kernels::rmsnorm_backward_v1<double> (kernels/rmsnorm.h) on the same inputs; one test works a
// 2-channel row by hand, one checks the gradients against finite differences of a loss built on
// kernels::rmsnorm_forward_v1<double>.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/22_rmsnorm_backward/rmsnorm_backward.h"
#include "exercises/test_util.h"
#include "kernels/rmsnorm.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"

namespace {

size_t sz(int a, int b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

std::string where(size_t i, int C) {
  std::ostringstream os;
  os << "row n = " << i / static_cast<size_t>(C) << ", channel c = " << i % static_cast<size_t>(C);
  return os.str();
}

}  // namespace

TEST_CASE("rmsnorm_backward: a worked example, one row of 2 channels", "[22_rmsnorm_backward]") {
  // x = {3, 4}: mean(x^2) = 12.5, rstd = 1 / sqrt(12.5 + 1e-5) ~ 0.28284, xhat ~ {0.8485, 1.1314}.
  // weight 1, dout = {1, 0}: g = {1, 0}, mean(g xhat) = xhat[0] / 2.
  // dinp = rstd (g - xhat xhat[0] / 2) ~ rstd {1 - 0.36, -0.48} ~ {0.18102, -0.13576}:
  // raising x[1] raises the rms, which shrinks out[0].
  const std::vector<float> x = {3.0f, 4.0f}, weight = {1.0f, 1.0f}, dout = {1.0f, 0.0f};
  const auto rstd = static_cast<float>(1.0 / std::sqrt(12.5 + 1e-5));
  std::vector<double> xhat(2), want(2);
  for (size_t c = 0; c < 2; ++c) xhat[c] = x[c] * static_cast<double>(rstd);
  for (size_t c = 0; c < 2; ++c) want[c] = static_cast<double>(rstd) * (dout[c] - xhat[c] * xhat[0] / 2.0);
  std::vector<float> dinp = ex_test::output_buffer(2, 0.0f), dweight = ex_test::output_buffer(2, 0.0f);
  ex::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), x.data(), weight.data(), &rstd, 1, 2);
  INFO("x = {3, 4}, weight = {1, 1}, dout = {1, 0}, rstd = " << rstd);
  const auto c = ex_test::compare("dinp", {dinp.data(), 2}, want, 1e-6, 1e-5);
  // LayerNorm's formula (with "- mean(g)") gives rstd (g - 1/2 - ...): a known mistake
  const std::string cause = ex_test::diagnose(
      {dinp.data(), 2}, want, 1e-6, 1e-5,
      {{"dinp looks like LayerNorm's backward: RMSNorm subtracts no mean, so there is no - mean(g) term",
        [&](size_t i) {
          const double ln = static_cast<double>(rstd) * (dout[i] - 0.5 - xhat[i] * xhat[0] / 2.0);
          return std::fabs(dinp[i] - ln) < 1e-5;
        }}});
  INFO(c.report << cause);
  CHECK(c.mismatches == 0);
  const auto w = ex_test::compare("dweight", {dweight.data(), 2}, std::vector<double>{xhat[0], 0.0}, 1e-6, 1e-5);
  INFO(w.report);
  CHECK(w.mismatches == 0);
}

TEST_CASE("rmsnorm_backward: random N = 5, C = 7, accumulating, against kernels::rmsnorm_backward_v1<double>",
          "[22_rmsnorm_backward]") {
  nn::Rng rng(2201);
  const int N = 5, C = 7;
  std::vector<float> inp = ex_test::random_normal(rng, sz(N, C), 2.0f);
  for (float& v : inp) v += 1.0f;
  const std::vector<float> weight = ex_test::random_normal(rng, static_cast<size_t>(C), 0.5f);
  const std::vector<float> dout = ex_test::random_normal(rng, sz(N, C));
  std::vector<float> out(sz(N, C)), rstd(static_cast<size_t>(N));
  kernels::rmsnorm_forward_v1<float>(out.data(), rstd.data(), inp.data(), weight.data(), N, C, kernels::kRmsnormEps);
  // What the buffers held before: the residual stream's gradient in dinp, earlier rows' in dweight.
  const std::vector<float> dinp0 = ex_test::random_normal(rng, sz(N, C));
  const std::vector<float> dw0 = ex_test::random_normal(rng, static_cast<size_t>(C));
  std::vector<double> want_dinp = ex_test::to_double(dinp0), want_dw = ex_test::to_double(dw0);
  const auto d = [](const std::vector<float>& v) { return ex_test::to_double(v); };
  kernels::rmsnorm_backward_v1<double>(want_dinp.data(), want_dw.data(), d(dout).data(), d(inp).data(), d(weight).data(),
                                       d(rstd).data(), N, C);
  std::vector<float> dinp = dinp0, dw = dw0;
  dinp.resize(dinp.size() + ex_test::kGuard, ex_test::kGuardValue);
  ex::rmsnorm_backward(dinp.data(), dw.data(), dout.data(), inp.data(), weight.data(), rstd.data(), N, C);
  // the usual mistake: assigning (=) instead of accumulating (+=)
  std::vector<double> assigned(sz(N, C), 0.0), assigned_w(static_cast<size_t>(C), 0.0);
  kernels::rmsnorm_backward_v1<double>(assigned.data(), assigned_w.data(), d(dout).data(), d(inp).data(),
                                       d(weight).data(), d(rstd).data(), N, C);
  const std::string cause = ex_test::diagnose(
      {dinp.data(), sz(N, C)}, want_dinp, 1e-5, 1e-4,
      {{"dinp was assigned (=) where it must accumulate (+=): the residual stream's gradient already in dinp was lost",
        [&](size_t i) { return std::fabs(dinp[i] - assigned[i]) < 1e-4; }}});
  const auto c = ex_test::compare("dinp", {dinp.data(), sz(N, C)}, want_dinp, 1e-5, 1e-4,
                                  [&](size_t i) { return where(i, C); });
  INFO(c.report << cause);
  CHECK(c.mismatches == 0);
  const auto w = ex_test::compare("dweight", {dw.data(), static_cast<size_t>(C)}, want_dw, 1e-5, 1e-4);
  INFO(w.report);
  CHECK(w.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(dinp, sz(N, C), "dinp");
  INFO(overrun);
  CHECK(overrun.empty());
}

TEST_CASE("rmsnorm_backward: the gradients match finite differences", "[22_rmsnorm_backward]") {
  // L = sum(out * r) for a random r, so dL/dout = r. The forward and L in double; your
  // backward in float, so the check allows float's rounding.
  nn::Rng rng(2202);
  const int N = 3, C = 6;
  std::vector<double> x(sz(N, C)), w(static_cast<size_t>(C)), r(sz(N, C));
  for (double& v : x) v = 0.5 + rng.normal();
  for (double& v : w) v = 1.0 + 0.3 * rng.normal();
  for (double& v : r) v = rng.normal();
  auto loss = [&] {
    std::vector<double> out(sz(N, C)), st(static_cast<size_t>(N));
    kernels::rmsnorm_forward_v1<double>(out.data(), st.data(), x.data(), w.data(), N, C, 1e-5);
    double L = 0.0;
    for (size_t i = 0; i < out.size(); ++i) L += out[i] * r[i];
    return L;
  };
  std::vector<double> out(sz(N, C)), st(static_cast<size_t>(N));
  kernels::rmsnorm_forward_v1<double>(out.data(), st.data(), x.data(), w.data(), N, C, 1e-5);
  std::vector<float> fx(x.begin(), x.end()), fw(w.begin(), w.end()), fr(r.begin(), r.end()), fst(st.begin(), st.end());
  std::vector<float> dx(sz(N, C), 0.0f), dw(static_cast<size_t>(C), 0.0f);
  ex::rmsnorm_backward(dx.data(), dw.data(), fr.data(), fx.data(), fw.data(), fst.data(), N, C);
  const nn::GradCheckResult cx = nn::check_gradient(loss, x, std::vector<double>(dx.begin(), dx.end()), 1e-6, 1e-4, 1e-3);
  INFO("dinp against finite differences:\n" << cx.report);
  CHECK(cx.ok);
  const nn::GradCheckResult cw = nn::check_gradient(loss, w, std::vector<double>(dw.begin(), dw.end()), 1e-6, 1e-4, 1e-3);
  INFO("dweight against finite differences:\n" << cw.report);
  CHECK(cw.ok);
}
