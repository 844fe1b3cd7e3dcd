// Tests of exercise 02_relu_backward. The expected values come from nn::relu_backward;
// one test checks the gradient against finite differences of the loss in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/02_relu_backward/relu_backward.h"
#include "exercises/test_util.h"
#include "nn/gradcheck.h"
#include "nn/ops.h"
#include "nn/rng.h"

namespace {

std::string describe(const std::vector<float>& inp, const std::vector<float>& dout, size_t i) {
  std::ostringstream os;
  os << "inp[" << i << "] = " << inp[i] << ", dout[" << i << "] = " << dout[i];
  return os.str();
}

// The bugs the numbers can show, for ex_test::diagnose: dinp started as `fill`.
std::vector<ex_test::Cause> likely_causes(std::span<const float> got, std::span<const double> want,
                                          const std::vector<float>& inp,
                                          const std::vector<float>& dout, float fill) {
  std::vector<ex_test::Cause> causes;
  if (std::isnan(fill)) {
    causes.push_back({"the wrong elements are NaN, the value dinp started with: they were never "
                      "written, or added into (+=) instead of assigned (=).",
                      [=](size_t i) { return std::isnan(got[i]); }});
  } else {
    causes.push_back({"dinp was accumulated into (+=): every wrong element is the right value + " +
                          std::to_string(fill).substr(0, 3) +
                          ", the value dinp held before. Assign it (=).",
                      [=](size_t i) { return got[i] == static_cast<float>(want[i] + fill); }});
    causes.push_back({"the wrong elements were never written: they still hold the value dinp "
                      "started with.",
                      [=](size_t i) { return got[i] == fill; }});
  }
  causes.push_back({"the gradient passes where inp[i] == 0: relu's slope at 0 is taken as 0 here, "
                    "so the test must be inp[i] > 0 (strict), not inp[i] >= 0.",
                    [=, &inp, &dout](size_t i) { return inp[i] == 0.0f && got[i] == dout[i]; }});
  causes.push_back({"the gradient is gated by dout[i] instead of by the forward's input inp[i].",
                    [=, &dout](size_t i) { return got[i] == (dout[i] > 0.0f ? dout[i] : 0.0f); }});
  return causes;
}

}  // namespace

TEST_CASE("relu_backward: a worked example", "[02_relu_backward]") {
  const std::vector<float> inp = {-2.0f, 3.0f, 0.5f, -0.1f};
  const std::vector<float> dout = {10.0f, 20.0f, 30.0f, 40.0f};
  const std::vector<double> want = {0.0, 20.0, 30.0, 0.0};  // blocked where inp <= 0
  std::vector<float> dinp = ex_test::output_buffer(4);
  ex::relu_backward(dinp.data(), dout.data(), inp.data(), 4);
  INFO("inp = {-2, 3, 0.5, -0.1}, dout = {10, 20, 30, 40}: expected dinp = {0, 20, 30, 0}");
  const std::span<const float> got{dinp.data(), 4};
  const ex_test::Comparison c = ex_test::compare("dinp", got, want, 0.0, 0.0,
                                                 [&](size_t i) { return describe(inp, dout, i); });
  INFO(c.report << ex_test::diagnose(got, want, 0.0, 0.0,
                                     likely_causes(got, want, inp, dout, ex_test::kNaN)));
  CHECK(c.mismatches == 0);
}

TEST_CASE("relu_backward: at inp == 0 the gradient is 0 (the convention of nn::relu_backward)",
          "[02_relu_backward]") {
  // 0 and -0 are both "not > 0"; the smallest positive float is > 0 and lets dout through.
  const std::vector<float> inp = {0.0f, -0.0f, 1e-45f, -1e-45f};
  const std::vector<float> dout = {5.0f, 6.0f, 7.0f, 8.0f};
  const std::vector<double> want = {0.0, 0.0, 7.0, 0.0};
  std::vector<float> dinp = ex_test::output_buffer(4);
  ex::relu_backward(dinp.data(), dout.data(), inp.data(), 4);
  const ex_test::Comparison c = ex_test::compare("dinp", {dinp.data(), 4}, want, 0.0, 0.0,
                                                 [&](size_t i) { return describe(inp, dout, i); });
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("relu_backward: random inputs, N = 1003, equal to nn::relu_backward",
          "[02_relu_backward]") {
  nn::Rng rng(201);
  const int64_t N = 1003;  // not a multiple of any vector width
  std::vector<float> inp = ex_test::random_normal(rng, N);
  for (int64_t i = 0; i < N; i += 10) inp[i] = 0.0f;  // some exact zeros too
  const std::vector<float> dout = ex_test::random_normal(rng, N);

  std::vector<float> reference(N);
  nn::relu_backward<float>(reference.data(), dout.data(), inp.data(), N);

  // Start from garbage (7.0): dinp must be ASSIGNED, every element, not accumulated into.
  std::vector<float> dinp = ex_test::output_buffer(N, 7.0f);
  ex::relu_backward(dinp.data(), dout.data(), inp.data(), N);

  INFO("dinp started filled with 7.0 (it must be assigned, every element)");
  const std::vector<double> want = ex_test::to_double(reference);
  const std::span<const float> got{dinp.data(), static_cast<size_t>(N)};
  const ex_test::Comparison c = ex_test::compare("dinp", got, want, 0.0, 0.0,
                                                 [&](size_t i) { return describe(inp, dout, i); });
  // Name the bug the numbers show (a cause must explain every wrong element).
  const std::string cause =
      ex_test::diagnose(got, want, 0.0, 0.0, likely_causes(got, want, inp, dout, 7.0f));
  INFO(c.report << cause);
  CHECK(c.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(dinp, N, "dinp");
  INFO(overrun);
  CHECK(overrun.empty());
}

TEST_CASE("relu_backward: N = 0 writes nothing", "[02_relu_backward]") {
  const float inp = 1.0f;
  const float dout = 1.0f;
  std::vector<float> dinp = ex_test::output_buffer(0);
  ex::relu_backward(dinp.data(), &dout, &inp, 0);
  const std::string overrun = ex_test::guard_damage(dinp, 0, "dinp");
  INFO(overrun);
  CHECK(overrun.empty());
}

TEST_CASE("relu_backward: matches finite differences of L = sum_i r_i relu(x_i) (double)",
          "[02_relu_backward]") {
  // The definition of a gradient: nudge x_i by +-h, watch the loss. With dout = r, your
  // dinp must equal dL/dx. (Inputs are kept away from 0, where relu has a kink.)
  nn::Rng rng(202);
  const int64_t N = 41;
  std::vector<double> x(N), r(N);
  for (int64_t i = 0; i < N; ++i) {
    const double mag = 0.05 + rng.uniform();
    x[i] = rng.uniform() < 0.5f ? -mag : mag;
    r[i] = rng.normal();
  }
  auto loss = [&] {
    double sum = 0.0;
    for (int64_t i = 0; i < N; ++i) sum += r[i] * (x[i] > 0.0 ? x[i] : 0.0);
    return sum;
  };
  std::vector<float> xf(x.begin(), x.end()), rf(r.begin(), r.end());
  std::vector<float> dinp = ex_test::output_buffer(N);
  ex::relu_backward(dinp.data(), rf.data(), xf.data(), N);
  const std::vector<double> analytic(dinp.begin(), dinp.begin() + N);
  const nn::GradCheckResult g = nn::check_gradient(loss, x, analytic, 1e-6, 1e-6, 1e-5);
  INFO(g.report);
  CHECK(g.ok);
}
