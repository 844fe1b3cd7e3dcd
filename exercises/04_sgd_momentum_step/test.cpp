// Tests of exercise 04_sgd_momentum_step. The expected values come from nn::sgd_step (the
// optimizer lesson 02 trains with) and from the formulas worked by hand.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/04_sgd_momentum_step/sgd_momentum_step.h"
#include "exercises/test_util.h"
#include "nn/optim.h"
#include "nn/rng.h"

TEST_CASE("sgd_momentum_step: a worked example", "[04_sgd_momentum_step]") {
  // g = 0.5 + 0.01 * 1 = 0.51;  v = 0.9 * 0.2 + 0.51 = 0.69;  p = 1 - 0.1 * 0.69 = 0.931
  float param = 1.0f;
  float velocity = 0.2f;
  const float grad = 0.5f;
  ex::sgd_momentum_step(&param, &grad, &velocity, 1, 0.1f, 0.9f, 0.01f);
  INFO(
      "param 1, grad 0.5, velocity 0.2, lr 0.1, momentum 0.9, weight_decay 0.01:\n"
      "  g = 0.5 + 0.01 * 1 = 0.51, velocity = 0.9 * 0.2 + 0.51 = 0.69, "
      "param = 1 - 0.1 * 0.69 = 0.931");
  CAPTURE(velocity, param);
  CHECK(ex_test::close(velocity, 0.69, 1e-6, 1e-5));
  CHECK(ex_test::close(param, 0.931, 1e-6, 1e-5));
}

TEST_CASE("sgd_momentum_step: momentum 0, no decay is plain gradient descent",
          "[04_sgd_momentum_step]") {
  // With momentum 0 the velocity is just this step's gradient: param -= lr * grad. (What
  // is left in velocity does not matter then: nn::sgd_step does not even touch it.)
  std::vector<float> param = {1.0f, -2.0f, 3.0f};
  const std::vector<float> grad = {0.5f, 0.25f, -1.0f};
  std::vector<float> velocity = {9.0f, 9.0f, 9.0f};  // momentum 0 forgets the old velocity
  ex::sgd_momentum_step(param.data(), grad.data(), velocity.data(), 3, 0.1f, 0.0f, 0.0f);
  INFO(
      "param {1, -2, 3}, grad {0.5, 0.25, -1}, old velocity 9, lr 0.1, momentum 0: "
      "param -= 0.1 * grad");
  const ex_test::Comparison p =
      ex_test::compare("param", param, std::vector<double>{0.95, -2.025, 3.1}, 1e-6, 1e-5);
  INFO(p.report);
  CHECK(p.mismatches == 0);
}

TEST_CASE("sgd_momentum_step: weight decay pulls the parameter toward 0",
          "[04_sgd_momentum_step]") {
  // grad 0, velocity 0, weight_decay 0.1, lr 1: g = 0.1 p, velocity = 0.1 p, p -> 0.9 p.
  std::vector<float> param = {2.0f, -4.0f};
  const std::vector<float> grad = {0.0f, 0.0f};
  std::vector<float> velocity = {0.0f, 0.0f};
  ex::sgd_momentum_step(param.data(), grad.data(), velocity.data(), 2, 1.0f, 0.9f, 0.1f);
  INFO(
      "param {2, -4}, grad 0, velocity 0, lr 1, weight_decay 0.1: g = 0.1 * param, "
      "so param becomes 0.9 * param");
  const ex_test::Comparison p =
      ex_test::compare("param", param, std::vector<double>{1.8, -3.6}, 1e-6, 1e-5);
  INFO(p.report);
  CHECK(p.mismatches == 0);
}

TEST_CASE("sgd_momentum_step: 6 steps on n = 257 parameters, equal to nn::sgd_step",
          "[04_sgd_momentum_step]") {
  nn::Rng rng(401);
  const int64_t n = 257;                        // not a multiple of any vector width
  const nn::SgdConfig cfg{0.05f, 0.9f, 5e-3f};  // lr, momentum, weight_decay
  const std::vector<float> start = ex_test::random_normal(rng, n);

  std::vector<float> ref_param = start;
  std::vector<float> ref_velocity(n, 0.0f);
  std::vector<float> param = ex_test::output_buffer(n);  // guard elements after the end
  std::vector<float> velocity = ex_test::output_buffer(n);
  for (int64_t i = 0; i < n; ++i) {
    param[i] = start[i];
    velocity[i] = 0.0f;  // velocity starts at 0 before the first step
  }

  for (int step = 1; step <= 6; ++step) {
    const std::vector<float> grad = ex_test::random_normal(rng, n);
    nn::sgd_step(ref_param.data(), grad.data(), ref_velocity.data(), n, cfg);
    ex::sgd_momentum_step(param.data(), grad.data(), velocity.data(), n, cfg.lr, cfg.momentum,
                          cfg.weight_decay);

    INFO("after step " << step << " (lr 0.05, momentum 0.9, weight_decay 0.005; velocity "
                       << "carried over from the previous step)");
    const size_t count = static_cast<size_t>(n);
    const ex_test::Comparison v = ex_test::compare("velocity", {velocity.data(), count},
                                                   ex_test::to_double(ref_velocity), 1e-6, 1e-5);
    INFO(v.report);
    REQUIRE(v.mismatches == 0);
    const ex_test::Comparison p =
        ex_test::compare("param", {param.data(), count}, ex_test::to_double(ref_param), 1e-6, 1e-5);
    INFO(p.report);
    REQUIRE(p.mismatches == 0);
  }
  const std::string overrun =
      ex_test::guard_damage(param, n, "param") + ex_test::guard_damage(velocity, n, "velocity");
  INFO(overrun);
  CHECK(overrun.empty());
}
