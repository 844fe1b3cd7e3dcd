// Tests of exercise 14_adamw_step. The expected values come from a two-step example worked
// by hand, from an independent loop in double written here, and (without weight decay,
// where AdamW is Adam) from nn::adam_step.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "exercises/14_adamw_step/adamw_step.h"
#include "exercises/test_util.h"
#include "nn/optim.h"
#include "nn/rng.h"

namespace {

void check(const ex_test::Comparison& c) {
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

// The reference: the same formula in double, written as plainly as it reads.
struct RefAdamW {
  std::vector<double> param, m, v;
  void step(const std::vector<float>& grad, double lr, double beta1, double beta2, double eps,
            double wd, int64_t t) {
    const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(t));
    const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(t));
    for (size_t i = 0; i < param.size(); ++i) {
      const double g = grad[i];
      param[i] = param[i] - lr * wd * param[i];
      m[i] = beta1 * m[i] + (1.0 - beta1) * g;
      v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
      const double m_hat = m[i] / bias1;
      const double v_hat = v[i] / bias2;
      param[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

}  // namespace

TEST_CASE("adamw_step: a worked example, two steps", "[14_adamw_step]") {
  // param 1, lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0.1; grads 0.5 then -0.25.
  // Step 1 (t = 1): decay: p = 1 - 0.1 * 0.1 * 1 = 0.99
  //   m = 0.1 * 0.5 = 0.05, v = 0.001 * 0.25 = 0.00025
  //   step = (0.1 / 0.1) * 0.05 / (sqrt(0.00025) / sqrt(0.001) + 1e-8) = 0.05 / 0.5 = 0.1
  //   p = 0.99 - 0.1 = 0.89   (the first step of Adam is lr * sign(g): m_hat / sqrt(v_hat) = 1)
  // Step 2 (t = 2): decay: p = 0.89 - 0.01 * 0.89 = 0.8811
  //   m = 0.9 * 0.05 + 0.1 * (-0.25) = 0.02, v = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225
  //   step = (0.1 / 0.19) * 0.02 / (sqrt(0.00031225) / sqrt(0.001999) + 1e-8)
  //        = 0.5263158 * 0.02 / 0.3952254 = 0.0266337
  //   p = 0.8811 - 0.0266337 = 0.8544663
  float param = 1.0f, m = 0.0f, v = 0.0f;
  const float g1 = 0.5f, g2 = -0.25f;
  ex::adamw_step(&param, &g1, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, 1);
  {
    INFO("after step 1 (t = 1): expected m = 0.05, v = 0.00025, param = 0.89");
    CAPTURE(m, v, param);
    CHECK(ex_test::close(m, 0.05, 1e-7, 1e-5));
    CHECK(ex_test::close(v, 0.00025, 1e-9, 1e-5));
    CHECK(ex_test::close(param, 0.89, 1e-6, 1e-5));
  }
  ex::adamw_step(&param, &g2, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, 2);
  {
    INFO("after step 2 (t = 2): expected m = 0.02, v = 0.00031225, param = 0.8544663");
    CAPTURE(m, v, param);
    CHECK(ex_test::close(m, 0.02, 1e-7, 1e-5));
    CHECK(ex_test::close(v, 0.00031225, 1e-9, 1e-5));
    CHECK(ex_test::close(param, 0.8544662986878463, 1e-6, 1e-5));
  }
}

TEST_CASE("adamw_step: the decay is decoupled: with a zero gradient param shrinks by lr * wd",
          "[14_adamw_step]") {
  // grad 0, m = v = 0: the Adam step is 0 / (0 + eps) = 0, only the decay acts:
  // param *= 1 - lr * weight_decay = 1 - 0.1 * 0.1 = 0.99. (Adam's L2 decay would instead
  // feed weight_decay * param into m and v and step by lr: 2 -> 1.9.)
  std::vector<float> param = {2.0f, -4.0f};
  const std::vector<float> grad = {0.0f, 0.0f};
  std::vector<float> m = {0.0f, 0.0f}, v = {0.0f, 0.0f};
  ex::adamw_step(param.data(), grad.data(), m.data(), v.data(), 2, 0.1f, 0.9f, 0.999f, 1e-8f, 0.1f,
                 1);
  INFO("param {2, -4}, grad 0, lr 0.1, weight_decay 0.1: param becomes 0.99 * param");
  check(ex_test::compare("param", param, std::vector<double>{1.98, -3.96}, 1e-6, 1e-5));
  check(ex_test::compare("m", m, std::vector<double>{0.0, 0.0}, 0.0, 0.0));
  check(ex_test::compare("v", v, std::vector<double>{0.0, 0.0}, 0.0, 0.0));
}

TEST_CASE("adamw_step: 6 steps on n = 257 parameters, against an independent loop",
          "[14_adamw_step]") {
  const float wd = GENERATE(0.0f, 0.05f);  // wd = 0: AdamW without decay is plain Adam
  CAPTURE(wd);
  nn::Rng rng(1401);
  const int64_t n = 257;  // not a multiple of any vector width
  const auto count = static_cast<size_t>(n);
  const float lr = 0.01f, beta1 = 0.9f, beta2 = 0.99f, eps = 1e-8f;
  const std::vector<float> start = ex_test::random_normal(rng, count);

  RefAdamW ref{ex_test::to_double(start), std::vector<double>(count, 0.0),
               std::vector<double>(count, 0.0)};
  std::vector<float> param = ex_test::output_buffer(count);  // guard elements after the end
  std::vector<float> m = ex_test::output_buffer(count), v = ex_test::output_buffer(count);
  for (size_t i = 0; i < count; ++i) {
    param[i] = start[i];
    m[i] = 0.0f;  // m and v start at 0 before the first step
    v[i] = 0.0f;
  }
  for (int64_t t = 1; t <= 6; ++t) {
    const std::vector<float> grad = ex_test::random_normal(rng, count);
    ref.step(grad, lr, beta1, beta2, eps, wd, t);
    ex::adamw_step(param.data(), grad.data(), m.data(), v.data(), n, lr, beta1, beta2, eps, wd, t);
    INFO("after step t = " << t << " (lr 0.01, beta1 0.9, beta2 0.99, eps 1e-8, weight_decay "
                           << wd << "; m and v carried over from the previous step)");
    const ex_test::Comparison cm = ex_test::compare("m", {m.data(), count}, ref.m, 1e-6, 1e-5);
    INFO(cm.report);
    REQUIRE(cm.mismatches == 0);
    const ex_test::Comparison cv = ex_test::compare("v", {v.data(), count}, ref.v, 1e-7, 1e-5);
    INFO(cv.report);
    REQUIRE(cv.mismatches == 0);
    const ex_test::Comparison cp =
        ex_test::compare("param", {param.data(), count}, ref.param, 1e-5, 1e-5);
    INFO(cp.report);
    REQUIRE(cp.mismatches == 0);
  }
  const std::string overrun = ex_test::guard_damage(param, count, "param") +
                              ex_test::guard_damage(m, count, "m") +
                              ex_test::guard_damage(v, count, "v");
  INFO(overrun);
  CHECK(overrun.empty());
}

TEST_CASE("adamw_step: with weight_decay 0 it is nn::adam_step", "[14_adamw_step]") {
  nn::Rng rng(1402);
  const int64_t n = 33;
  const auto count = static_cast<size_t>(n);
  const nn::AdamConfig cfg{0.02f, 0.9f, 0.999f, 1e-8f, 0.0f};  // lr, beta1, beta2, eps, wd
  std::vector<float> ref_param = ex_test::random_normal(rng, count);
  std::vector<float> param = ref_param;
  std::vector<float> ref_m(count, 0.0f), ref_v(count, 0.0f), m(count, 0.0f), v(count, 0.0f);
  for (int64_t t = 1; t <= 4; ++t) {
    const std::vector<float> grad = ex_test::random_normal(rng, count, 2.0f);
    nn::adam_step(ref_param.data(), grad.data(), ref_m.data(), ref_v.data(), n, t, cfg);
    ex::adamw_step(param.data(), grad.data(), m.data(), v.data(), n, cfg.lr, cfg.beta1, cfg.beta2,
                   cfg.eps, 0.0f, t);
    INFO("after step t = " << t);
    check(ex_test::compare("param", param, ex_test::to_double(ref_param), 1e-6, 1e-5));
  }
}
