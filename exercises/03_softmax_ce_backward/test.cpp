// Tests of exercise 03_softmax_ce_backward. The expected values come from nn/'s reference
// ops in double (nn::softmax_forward, nn::softmax_cross_entropy_backward); one test checks
// the gradient against finite differences of the loss itself.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/03_softmax_ce_backward/softmax_ce_backward.h"
#include "exercises/test_util.h"
#include "nn/gradcheck.h"
#include "nn/ops.h"
#include "nn/rng.h"

namespace {

// The reference gradient in double: probs = softmax(logits), then (probs - onehot) / B.
std::vector<double> reference(const std::vector<float>& logits, const std::vector<int32_t>& targets,
                              int B, int V) {
  const std::vector<double> x = ex_test::to_double(logits);
  std::vector<double> probs(x.size()), dlogits(x.size());
  nn::softmax_forward<double>(probs.data(), x.data(), B, V);
  nn::softmax_cross_entropy_backward<double>(dlogits.data(), probs.data(), targets.data(), B, V);
  return dlogits;
}

// Runs the exercise's function on a fresh NaN-filled, guarded buffer and checks it.
void check_against_reference(const std::vector<float>& logits, const std::vector<int32_t>& targets,
                             int B, int V, double atol, double rtol) {
  const size_t n = static_cast<size_t>(B) * V;
  const std::vector<double> want = reference(logits, targets, B, V);
  std::vector<float> dlogits = ex_test::output_buffer(n);
  ex::softmax_ce_backward(dlogits.data(), logits.data(), targets.data(), B, V);

  INFO("B = " << B << " rows, V = " << V << " classes; dlogits (B, V), index b * V + v");
  const ex_test::Comparison c =
      ex_test::compare("dlogits", {dlogits.data(), n}, want, atol, rtol, [&](size_t i) {
        std::ostringstream os;
        const size_t b = i / V;
        os << "row b = " << b << ", class v = " << i % V << ", logit " << logits[i]
           << ", target of this row " << targets[b];
        return os.str();
      });
  INFO(c.report);
  CHECK(c.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(dlogits, n, "dlogits");
  INFO(overrun);
  CHECK(overrun.empty());
}

}  // namespace

TEST_CASE("softmax_ce_backward: a worked example", "[03_softmax_ce_backward]") {
  // Equal logits: p = (1/3, 1/3, 1/3). Target 1: dlogits = (1/3, 1/3 - 1, 1/3) / B, B = 1.
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f};
  const std::vector<int32_t> targets = {1};
  const std::vector<double> want = {1.0 / 3.0, -2.0 / 3.0, 1.0 / 3.0};
  std::vector<float> dlogits = ex_test::output_buffer(3);
  ex::softmax_ce_backward(dlogits.data(), logits.data(), targets.data(), 1, 3);
  INFO("logits = {0, 0, 0}, target 1, B = 1: p = {1/3, 1/3, 1/3}, expected {1/3, -2/3, 1/3}");
  const ex_test::Comparison c = ex_test::compare("dlogits", {dlogits.data(), 3}, want, 1e-7, 1e-5);
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("softmax_ce_backward: the gradient of a MEAN loss is divided by B",
          "[03_softmax_ce_backward]") {
  // The same row twice, B = 2: each row's gradient is half of what it is alone.
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<int32_t> targets = {1, 1};
  const std::vector<double> want = {1.0 / 6.0, -1.0 / 3.0, 1.0 / 6.0,
                                    1.0 / 6.0, -1.0 / 3.0, 1.0 / 6.0};
  std::vector<float> dlogits = ex_test::output_buffer(6);
  ex::softmax_ce_backward(dlogits.data(), logits.data(), targets.data(), 2, 3);
  INFO("two rows of logits {0, 0, 0}, targets {1, 1}, B = 2: expected {1/6, -1/3, 1/6} per row");
  const ex_test::Comparison c = ex_test::compare("dlogits", {dlogits.data(), 6}, want, 1e-7, 1e-5);
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("softmax_ce_backward: random logits, B = 7, V = 13, against nn/ in double",
          "[03_softmax_ce_backward]") {
  nn::Rng rng(301);
  const int B = 7, V = 13;  // not round numbers
  const std::vector<float> logits = ex_test::random_normal(rng, static_cast<size_t>(B) * V, 3.0f);
  std::vector<int32_t> targets(B);
  for (int32_t& t : targets) t = static_cast<int32_t>(rng.below(V));
  targets[0] = 0;      // the first class
  targets[1] = V - 1;  // and the last are targets too
  check_against_reference(logits, targets, B, V, 1e-6, 1e-4);
}

TEST_CASE("softmax_ce_backward: each row of the gradient sums to 0", "[03_softmax_ce_backward]") {
  // sum_v (p_v - [v == t]) = 1 - 1 = 0: probabilities sum to 1, the one-hot sums to 1.
  nn::Rng rng(302);
  const int B = 5, V = 11;
  const std::vector<float> logits = ex_test::random_normal(rng, static_cast<size_t>(B) * V, 2.0f);
  std::vector<int32_t> targets(B);
  for (int32_t& t : targets) t = static_cast<int32_t>(rng.below(V));
  std::vector<float> dlogits = ex_test::output_buffer(static_cast<size_t>(B) * V);
  ex::softmax_ce_backward(dlogits.data(), logits.data(), targets.data(), B, V);
  for (int b = 0; b < B; ++b) {
    double sum = 0.0;
    for (int v = 0; v < V; ++v) sum += static_cast<double>(dlogits[static_cast<size_t>(b) * V + v]);
    INFO("row b = " << b << ": sum_v dlogits[b][v] = " << sum << ", expected 0");
    CHECK(ex_test::close(sum, 0.0, 1e-6, 0.0));
  }
}

TEST_CASE("softmax_ce_backward: logits of +-1000 stay finite (subtract the row max)",
          "[03_softmax_ce_backward]") {
  // exp(1000) = inf in float (and in double): without subtracting the max, p = inf / inf = NaN.
  // exp(-1000) = 0: a row of only -1000s gives 0 / 0 = NaN without it, too.
  const int B = 4, V = 4;
  const std::vector<float> logits = {
      1000.0f,  999.0f,   -1000.0f, 0.0f,     // target 1: p ~ (0.73, 0.27, 0, 0)
      1000.0f,  1000.0f,  1000.0f,  1000.0f,  // target 2: p = 1/4 each
      -1000.0f, -1000.0f, -1000.0f, -999.0f,  // target 0
      0.0f,     0.0f,     1000.0f,  0.0f,     // target 2, and it is certain: gradient ~ 0
  };
  const std::vector<int32_t> targets = {1, 2, 0, 2};
  check_against_reference(logits, targets, B, V, 1e-6, 1e-4);
}

TEST_CASE("softmax_ce_backward: matches finite differences of the mean loss (double)",
          "[03_softmax_ce_backward]") {
  // The definition of the gradient: nudge one logit by +-h, recompute the mean loss with
  // nn::softmax_cross_entropy_forward in double, divide the change by 2h.
  nn::Rng rng(303);
  const int B = 3, V = 5;
  const size_t n = static_cast<size_t>(B) * V;
  std::vector<double> x(n);
  for (double& v : x) v = rng.normal(0.0f, 2.0f);
  const std::vector<int32_t> targets = {4, 0, 2};
  std::vector<double> probs(n), losses(B);
  auto loss = [&] {
    return nn::softmax_cross_entropy_forward<double>(probs.data(), losses.data(), x.data(),
                                                     targets.data(), B, V);
  };
  const std::vector<float> logits(x.begin(), x.end());
  std::vector<float> dlogits = ex_test::output_buffer(n);
  ex::softmax_ce_backward(dlogits.data(), logits.data(), targets.data(), B, V);
  // Your gradient is float (about 7 digits), hence the tolerance of 1e-6 + 1e-4 relative.
  const std::vector<double> analytic(dlogits.begin(),
                                     dlogits.begin() + static_cast<std::ptrdiff_t>(n));
  const nn::GradCheckResult g = nn::check_gradient(loss, x, analytic, 1e-6, 1e-6, 1e-4);
  INFO(g.report);
  CHECK(g.ok);
}
