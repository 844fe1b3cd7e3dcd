// Tests of exercise 08_bias_relu_fused. The expected values are max(0, inp + bias)
// computed in double from the same float inputs; fused or not, the answer must be the
// same (how many bytes it moves is for the benchmark, not for a test).
#include <catch2/catch.hpp>

#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/08_bias_relu_fused/bias_relu_fused.h"
#include "exercises/test_util.h"
#include "nn/rng.h"

namespace {

// max(0, inp[b][o] + bias[o]) for every element of a (B, OC) matrix.
std::vector<double> reference(const std::vector<float>& inp, const std::vector<float>& bias, int B,
                              int OC) {
  std::vector<double> want(static_cast<size_t>(B) * static_cast<size_t>(OC));
  for (int b = 0; b < B; ++b) {
    for (int o = 0; o < OC; ++o) {
      const size_t i = static_cast<size_t>(b) * OC + o;
      const double v = static_cast<double>(inp[i]) + static_cast<double>(bias[o]);
      want[i] = v > 0.0 ? v : 0.0;
    }
  }
  return want;
}

// "row b = 1, column o = 4: inp = -0.5, bias[o] = 0.25" for element i.
std::string describe(const std::vector<float>& inp, const std::vector<float>& bias, int OC,
                     size_t i) {
  const size_t o = i % static_cast<size_t>(OC);
  std::ostringstream os;
  os << "row b = " << i / static_cast<size_t>(OC) << ", column o = " << o << ": inp = " << inp[i]
     << ", bias[o] = " << bias[o];
  return os.str();
}

// A random (B, OC) problem. bias is followed by padding holding the guard value, so code
// that indexes the bias by the row b (bias[b], with B > OC) reads wrong numbers and fails
// the comparison instead of reading past the end of the vector.
struct Problem {
  int B, OC;
  std::vector<float> inp, bias;
  std::vector<double> want;
};

Problem random_problem(int B, int OC, uint64_t seed) {
  nn::Rng rng(seed);
  Problem p{B, OC, {}, {}, {}};
  p.inp = ex_test::random_normal(rng, static_cast<size_t>(B) * static_cast<size_t>(OC));
  p.bias = ex_test::random_normal(rng, static_cast<size_t>(OC), 0.5f);
  p.want = reference(p.inp, p.bias, B, OC);
  p.bias.resize(static_cast<size_t>(OC) + static_cast<size_t>(B), ex_test::kGuardValue);
  return p;
}

// Runs bias_relu into a separate NaN-filled, guarded out. "" when everything matches.
std::string check_separate(const Problem& p) {
  const size_t n = p.want.size();
  std::vector<float> out = ex_test::output_buffer(n);
  ex::bias_relu(out.data(), p.inp.data(), p.bias.data(), p.B, p.OC);
  // One float add, correctly rounded: only the last bit may differ from the double sum.
  const ex_test::Comparison c =
      ex_test::compare("out", {out.data(), n}, p.want, 0.0, 1e-6,
                       [&](size_t i) { return describe(p.inp, p.bias, p.OC, i); });
  std::ostringstream os;
  if (c.mismatches > 0) os << "B = " << p.B << ", OC = " << p.OC << ":\n" << c.report;
  os << ex_test::guard_damage(out, n, "out");
  return os.str();
}

}  // namespace

TEST_CASE("bias_relu: a worked example, B = 2, OC = 3", "[08_bias_relu_fused]") {
  // inp = [-1  0.5  2  ]  bias = [0.5 -0.5 1]   inp + bias = [-0.5  0    3   ]
  //       [ 3 -4    0.25]                                    [ 3.5 -4.5  1.25]
  // max(0, .) = [0 0 3; 3.5 0 1.25]: negative -> 0, exactly 0 -> 0, positive kept.
  const std::vector<float> inp = {-1.0f, 0.5f, 2.0f, 3.0f, -4.0f, 0.25f};
  const std::vector<float> bias = {0.5f, -0.5f, 1.0f};
  std::vector<float> out = ex_test::output_buffer(6);
  ex::bias_relu(out.data(), inp.data(), bias.data(), 2, 3);
  INFO("inp = [-1 0.5 2; 3 -4 0.25], bias = [0.5 -0.5 1]: expected out = [0 0 3; 3.5 0 1.25]");
  const ex_test::Comparison c =
      ex_test::compare("out", {out.data(), 6}, std::vector<double>{0, 0, 3, 3.5, 0, 1.25}, 0.0, 0.0,
                       [&](size_t i) { return describe(inp, bias, 3, i); });
  INFO(c.report);
  CHECK(c.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(out, 6, "out");
  INFO(overrun);
  CHECK(overrun.empty());
}

TEST_CASE("bias_relu: negative, zero and positive sums", "[08_bias_relu_fused]") {
  // B = 1, OC = 6. Sums that are exactly 0 (inp = -bias) and -0 give 0; the smallest
  // positive float is > 0 and is kept; -1e-45 is < 0 and becomes 0.
  const std::vector<float> inp = {2.5f, -2.5f, -0.0f, 1e-45f, -1e-45f, -3.0f};
  const std::vector<float> bias = {-2.5f, 2.5f, 0.0f, 0.0f, 0.0f, 7.0f};
  const std::vector<double> want = {0.0, 0.0, 0.0, 1e-45f, 0.0, 4.0};
  std::vector<float> out = ex_test::output_buffer(6);
  ex::bias_relu(out.data(), inp.data(), bias.data(), 1, 6);
  const ex_test::Comparison c = ex_test::compare(
      "out", {out.data(), 6}, want, 0.0, 0.0, [&](size_t i) { return describe(inp, bias, 6, i); });
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("bias_relu: random sizes that are not round numbers, out separate from inp",
          "[08_bias_relu_fused]") {
  // out starts as NaN: every element must be written.
  SECTION("B = 5, OC = 37") {
    const std::string problem = check_separate(random_problem(5, 37, 801));
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("B = 13, OC = 7: more rows than columns (the bias goes with the column o)") {
    const std::string problem = check_separate(random_problem(13, 7, 802));
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("B = 1, OC = 1003: one long row") {
    const std::string problem = check_separate(random_problem(1, 1003, 803));
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("B = 1, OC = 1") {
    const std::string problem = check_separate(random_problem(1, 1, 804));
    INFO(problem);
    CHECK(problem.empty());
  }
}

TEST_CASE("bias_relu: in place, out == inp", "[08_bias_relu_fused]") {
  // The way a trainer calls it to save a buffer: the activations are overwritten by
  // their own max(0, x + bias).
  SECTION("B = 11, OC = 19") {
    const Problem p = random_problem(11, 19, 811);
    const size_t n = p.want.size();
    std::vector<float> buf = ex_test::output_buffer(n);
    for (size_t i = 0; i < n; ++i) buf[i] = p.inp[i];
    ex::bias_relu(buf.data(), buf.data(), p.bias.data(), p.B, p.OC);
    INFO("bias_relu(buf, buf, bias, 11, 19): buf held inp and must now hold max(0, inp + bias)");
    const ex_test::Comparison c =
        ex_test::compare("buf", {buf.data(), n}, p.want, 0.0, 1e-6,
                         [&](size_t i) { return describe(p.inp, p.bias, p.OC, i); });
    INFO(c.report);
    CHECK(c.mismatches == 0);
    const std::string overrun = ex_test::guard_damage(buf, n, "buf");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}
