// Tests of exercise 01_neuron_forward. The expected values come from nn/'s reference ops
// in double precision: nn::linear_forward<double>, then nn::sigmoid_forward<double>.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <vector>

#include "exercises/01_neuron_forward/neuron_forward.h"
#include "exercises/test_util.h"
#include "nn/ops.h"
#include "nn/rng.h"

namespace {

// The reference: sigmoid(b + sum_i w_i x_i) in double.
double reference_neuron(const std::vector<float>& x, const std::vector<float>& w, float b) {
  const int n = static_cast<int>(x.size());
  const std::vector<double> xd(x.begin(), x.end());
  const std::vector<double> wd(w.begin(), w.end());
  const double bd = b;
  double z = 0.0;
  double y = 0.0;
  nn::linear_forward<double>(&z, xd.data(), wd.data(), &bd, 1, n, 1);  // one row, one neuron
  nn::sigmoid_forward<double>(&y, &z, 1);
  return y;
}

}  // namespace

TEST_CASE("neuron_forward: a worked example", "[01_neuron_forward]") {
  // z = 0.1 + 0.5*1 + (-1)*2 + 0.25*3 = -0.65, y = 1 / (1 + exp(0.65)) = 0.34298...
  const std::vector<float> x = {1.0f, 2.0f, 3.0f};
  const std::vector<float> w = {0.5f, -1.0f, 0.25f};
  const float b = 0.1f;
  const double want = 1.0 / (1.0 + std::exp(0.65));
  const float got = ex::neuron_forward(x.data(), w.data(), b, 3);
  INFO("x = {1, 2, 3}, w = {0.5, -1, 0.25}, b = 0.1: z = -0.65, so y = sigmoid(-0.65)");
  CAPTURE(got, want);
  CHECK(ex_test::close(got, want, 1e-6, 1e-5));
}

TEST_CASE("neuron_forward: z = 0 gives exactly 0.5, and the bias counts", "[01_neuron_forward]") {
  const std::vector<float> x = {2.0f, -1.0f};
  const std::vector<float> w = {1.0f, 2.0f};
  {
    INFO("x = {2, -1}, w = {1, 2}, b = 0: z = 2 - 2 = 0, so y = sigmoid(0) = 0.5");
    const float got = ex::neuron_forward(x.data(), w.data(), 0.0f, 2);
    CAPTURE(got);
    CHECK(got == 0.5f);
  }
  {
    INFO("x = {2, -1}, w = {1, 2}, b = 1.5: z = 1.5, so y = sigmoid(1.5) = 0.8175744...");
    const float got = ex::neuron_forward(x.data(), w.data(), 1.5f, 2);
    const double want = 1.0 / (1.0 + std::exp(-1.5));
    CAPTURE(got, want);
    CHECK(ex_test::close(got, want, 1e-6, 1e-5));
  }
  {
    INFO("n = 0 inputs: z is just the bias, b = -2, so y = sigmoid(-2) = 0.1192029...");
    const float got = ex::neuron_forward(x.data(), w.data(), -2.0f, 0);
    const double want = 1.0 / (1.0 + std::exp(2.0));
    CAPTURE(got, want);
    CHECK(ex_test::close(got, want, 1e-6, 1e-5));
  }
}

TEST_CASE("neuron_forward: random inputs, n = 37", "[01_neuron_forward]") {
  nn::Rng rng(101);
  const int n = 37;  // not a multiple of any vector width
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<float> x = ex_test::random_normal(rng, n);
    const std::vector<float> w = ex_test::random_normal(rng, n, 0.3f);
    const float b = rng.normal();
    const double want = reference_neuron(x, w, b);
    const float got = ex::neuron_forward(x.data(), w.data(), b, n);
    INFO("trial " << trial << " of 20 (random x, w, b)");
    CAPTURE(got, want);
    REQUIRE(ex_test::close(got, want, 1e-6, 1e-5));
  }
}

TEST_CASE("neuron_forward: far in the tails, z = +-100, the result is 1 or 0, never NaN",
          "[01_neuron_forward]") {
  // exp(100) overflows float to inf. 1 / (1 + exp(-z)) still gives the right limits
  // (1 / (1 + inf) = 0); a formula like exp(z) / (1 + exp(z)) gives inf / inf = NaN.
  const std::vector<float> x = {1.0f};
  const std::vector<float> w = {1.0f};
  for (const float z : {100.0f, -100.0f, 30.0f, -30.0f}) {
    const float got = ex::neuron_forward(x.data(), w.data(), z - 1.0f, 1);  // z = (z - 1) + 1*1
    const double want = reference_neuron(x, w, z - 1.0f);
    INFO("z = " << z << ": sigmoid(z) = " << want);
    CAPTURE(got);
    CHECK(ex_test::close(got, want, 1e-6, 1e-5));
  }
}

TEST_CASE("layer_forward: random layers, compared with nn::linear_forward + sigmoid",
          "[01_neuron_forward]") {
  nn::Rng rng(102);
  struct Shape {
    int B, C, OC;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{5, 7, 3}, Shape{13, 33, 10}}) {
    const int B = s.B, C = s.C, OC = s.OC;
    const std::vector<float> inp = ex_test::random_normal(rng, static_cast<size_t>(B) * C);
    const std::vector<float> weight =
        ex_test::random_normal(rng, static_cast<size_t>(OC) * C, 0.4f);
    const std::vector<float> bias = ex_test::random_normal(rng, static_cast<size_t>(OC));
    const size_t n_out = static_cast<size_t>(B) * OC;

    std::vector<double> z(n_out), want(n_out);
    const std::vector<double> inp_d = ex_test::to_double(inp);
    const std::vector<double> weight_d = ex_test::to_double(weight);
    const std::vector<double> bias_d = ex_test::to_double(bias);
    nn::linear_forward<double>(z.data(), inp_d.data(), weight_d.data(), bias_d.data(), B, C, OC);
    nn::sigmoid_forward<double>(want.data(), z.data(), static_cast<int64_t>(n_out));

    std::vector<float> out = ex_test::output_buffer(n_out);  // NaN: unwritten outputs fail
    ex::layer_forward(out.data(), inp.data(), weight.data(), bias.data(), B, C, OC);

    INFO("B = " << B << " rows, C = " << C << " inputs, OC = " << OC << " neurons; out (B, OC)");
    const ex_test::Comparison c =
        ex_test::compare("out", {out.data(), n_out}, want, 1e-6, 1e-5, [&](size_t i) {
          std::ostringstream os;
          os << "row b = " << i / OC << ", neuron o = " << i % OC << ", z = " << z[i];
          return os.str();
        });
    INFO(c.report);
    CHECK(c.mismatches == 0);
    const std::string overrun = ex_test::guard_damage(out, n_out, "out");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}
