// Tests of exercise 05_linear_backward. The expected values come from
// nn::linear_backward<double>; one test checks all three gradients against finite
// differences of a loss built on nn::linear_forward<double>.
#include <catch2/catch.hpp>

#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/05_linear_backward/linear_backward.h"
#include "exercises/test_util.h"
#include "nn/gradcheck.h"
#include "nn/ops.h"
#include "nn/rng.h"

namespace {

// "row b = 1, column c = 4" for element i of a (rows, cols) matrix.
std::string where(size_t i, int cols, const char* row_name, const char* col_name) {
  std::ostringstream os;
  os << row_name << " = " << i / cols << ", " << col_name << " = " << i % cols;
  return os.str();
}

}  // namespace

TEST_CASE("linear_backward: a worked example", "[05_linear_backward]") {
  // B = 1, C = 2, OC = 1: out = 3 x0 + 4 x1 + bias. With inp = (1, 2) and dout = 0.5:
  //   dinp = 0.5 * (3, 4) = (1.5, 2),  dweight = 0.5 * (1, 2) = (0.5, 1),  dbias = 0.5
  const std::vector<float> inp = {1.0f, 2.0f};
  const std::vector<float> weight = {3.0f, 4.0f};
  const std::vector<float> dout = {0.5f};
  std::vector<float> dinp = ex_test::output_buffer(2);
  std::vector<float> dweight = ex_test::output_buffer(2, 0.0f);
  std::vector<float> dbias = ex_test::output_buffer(1, 0.0f);
  ex::linear_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                      weight.data(), 1, 2, 1);
  INFO("inp = (1, 2), weight = (3, 4), dout = 0.5; dweight and dbias started at 0");
  const ex_test::Comparison a =
      ex_test::compare("dinp", {dinp.data(), 2}, std::vector<double>{1.5, 2.0}, 1e-6, 1e-5);
  const ex_test::Comparison w =
      ex_test::compare("dweight", {dweight.data(), 2}, std::vector<double>{0.5, 1.0}, 1e-6, 1e-5);
  const ex_test::Comparison b =
      ex_test::compare("dbias", {dbias.data(), 1}, std::vector<double>{0.5}, 1e-6, 1e-5);
  INFO(a.report << w.report << b.report);
  CHECK(a.mismatches + w.mismatches + b.mismatches == 0);
}

TEST_CASE("linear_backward: random B = 5, C = 7, OC = 3, against nn::linear_backward<double>",
          "[05_linear_backward]") {
  nn::Rng rng(501);
  const int B = 5, C = 7, OC = 3;  // not round numbers
  const size_t nx = static_cast<size_t>(B) * C, nw = static_cast<size_t>(OC) * C;
  const size_t ny = static_cast<size_t>(B) * OC;
  const std::vector<float> inp = ex_test::random_normal(rng, nx);
  const std::vector<float> weight = ex_test::random_normal(rng, nw, 0.5f);
  const std::vector<float> dout = ex_test::random_normal(rng, ny);
  // Gradients left over from an earlier batch: dweight and dbias must ADD to them.
  const std::vector<float> old_dweight = ex_test::random_normal(rng, nw);
  const std::vector<float> old_dbias = ex_test::random_normal(rng, OC);

  // The reference, in double, starting from the same leftovers.
  std::vector<double> want_dinp(nx);
  std::vector<double> want_dweight = ex_test::to_double(old_dweight);
  std::vector<double> want_dbias = ex_test::to_double(old_dbias);
  const std::vector<double> inp_d = ex_test::to_double(inp), weight_d = ex_test::to_double(weight);
  const std::vector<double> dout_d = ex_test::to_double(dout);
  nn::linear_backward<double>(want_dinp.data(), want_dweight.data(), want_dbias.data(),
                              dout_d.data(), inp_d.data(), weight_d.data(), B, C, OC);

  std::vector<float> dinp = ex_test::output_buffer(nx);  // NaN: must be assigned
  std::vector<float> dweight = ex_test::output_buffer(nw);
  std::vector<float> dbias = ex_test::output_buffer(OC);
  for (size_t i = 0; i < nw; ++i) dweight[i] = old_dweight[i];
  for (int o = 0; o < OC; ++o) dbias[o] = old_dbias[o];
  ex::linear_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                      weight.data(), B, C, OC);

  SECTION("dinp (B, C) is assigned") {
    const ex_test::Comparison c =
        ex_test::compare("dinp", {dinp.data(), nx}, want_dinp, 1e-5, 1e-4,
                         [&](size_t i) { return where(i, C, "row b", "input c"); });
    INFO(c.report);
    CHECK(c.mismatches == 0);
  }
  SECTION("dweight (OC, C) is accumulated: it started with an earlier batch's gradient") {
    const ex_test::Comparison c =
        ex_test::compare("dweight", {dweight.data(), nw}, want_dweight, 1e-5, 1e-4, [&](size_t i) {
          std::ostringstream os;
          os << where(i, C, "neuron o", "input c") << ", started at " << old_dweight[i];
          return os.str();
        });
    INFO(c.report);
    CHECK(c.mismatches == 0);
  }
  SECTION("dbias (OC) is accumulated: it started with an earlier batch's gradient") {
    const ex_test::Comparison c = ex_test::compare("dbias", {dbias.data(), static_cast<size_t>(OC)},
                                                   want_dbias, 1e-5, 1e-4, [&](size_t i) {
                                                     std::ostringstream os;
                                                     os << "started at " << old_dbias[i];
                                                     return os.str();
                                                   });
    INFO(c.report);
    CHECK(c.mismatches == 0);
  }
  SECTION("nothing is written past the end of an output") {
    const std::string overrun = ex_test::guard_damage(dinp, nx, "dinp") +
                                ex_test::guard_damage(dweight, nw, "dweight") +
                                ex_test::guard_damage(dbias, OC, "dbias");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}

TEST_CASE("linear_backward: dinp == nullptr and dbias == nullptr are skipped",
          "[05_linear_backward]") {
  // The first layer needs no dinp (nothing below it learns), and a layer may have no bias.
  // If this test crashes, your code writes through a null pointer.
  nn::Rng rng(502);
  const int B = 3, C = 4, OC = 2;
  const std::vector<float> inp = ex_test::random_normal(rng, static_cast<size_t>(B) * C);
  const std::vector<float> weight = ex_test::random_normal(rng, static_cast<size_t>(OC) * C);
  const std::vector<float> dout = ex_test::random_normal(rng, static_cast<size_t>(B) * OC);
  std::vector<double> want_dweight(static_cast<size_t>(OC) * C, 0.0);
  const std::vector<double> inp_d = ex_test::to_double(inp), weight_d = ex_test::to_double(weight);
  const std::vector<double> dout_d = ex_test::to_double(dout);
  nn::linear_backward<double>(nullptr, want_dweight.data(), nullptr, dout_d.data(), inp_d.data(),
                              weight_d.data(), B, C, OC);
  std::vector<float> dweight = ex_test::output_buffer(want_dweight.size(), 0.0f);
  ex::linear_backward(nullptr, dweight.data(), nullptr, dout.data(), inp.data(), weight.data(), B,
                      C, OC);
  const ex_test::Comparison c =
      ex_test::compare("dweight", {dweight.data(), want_dweight.size()}, want_dweight, 1e-5, 1e-4);
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("linear_backward: matches finite differences of L = sum r * (x W^T + b) (double)",
          "[05_linear_backward]") {
  // With dout = r, the three gradients must be the slopes of L with respect to x, W and b.
  nn::Rng rng(503);
  const int B = 3, C = 5, OC = 4;
  std::vector<double> x(static_cast<size_t>(B) * C), w(static_cast<size_t>(OC) * C), b(OC),
      r(static_cast<size_t>(B) * OC), y(static_cast<size_t>(B) * OC);
  for (double& v : x) v = rng.normal();  // float values, so the float copies are exact
  for (double& v : w) v = rng.normal();
  for (double& v : b) v = rng.normal();
  for (double& v : r) v = rng.normal();
  auto loss = [&] {
    nn::linear_forward<double>(y.data(), x.data(), w.data(), b.data(), B, C, OC);
    double sum = 0.0;
    for (size_t i = 0; i < y.size(); ++i) sum += r[i] * y[i];
    return sum;
  };
  const std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), rf(r.begin(), r.end());
  std::vector<float> dx = ex_test::output_buffer(x.size());
  std::vector<float> dw = ex_test::output_buffer(w.size(), 0.0f);
  std::vector<float> db = ex_test::output_buffer(b.size(), 0.0f);
  ex::linear_backward(dx.data(), dw.data(), db.data(), rf.data(), xf.data(), wf.data(), B, C, OC);
  const auto as_double = [](const std::vector<float>& v, size_t n) {
    return std::vector<double>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
  };
  SECTION("dL/dinp") {
    const nn::GradCheckResult g =
        nn::check_gradient(loss, x, as_double(dx, x.size()), 1e-6, 1e-5, 1e-4);
    INFO(g.report);
    CHECK(g.ok);
  }
  SECTION("dL/dweight") {
    const nn::GradCheckResult g =
        nn::check_gradient(loss, w, as_double(dw, w.size()), 1e-6, 1e-5, 1e-4);
    INFO(g.report);
    CHECK(g.ok);
  }
  SECTION("dL/dbias") {
    const nn::GradCheckResult g =
        nn::check_gradient(loss, b, as_double(db, b.size()), 1e-6, 1e-5, 1e-4);
    INFO(g.report);
    CHECK(g.ok);
  }
}
