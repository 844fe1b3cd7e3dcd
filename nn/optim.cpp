#include "nn/optim.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "nn/check.h"

namespace nn {

void zero_grads(const std::vector<Param>& params) {
  // p.numel() multiplies out the shape (io/shape.h, another translation unit): in the loop
  // condition it ran once per element and kept the loops from vectorising (perf put it at
  // ~1% of a lesson 06 step). Taken once per parameter here and below.
  for (const Param& p : params) {
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) {
      p.grad[i] = 0.0f;
    }
  }
}

double grad_norm(const std::vector<Param>& params) {
  double sum = 0.0;
  for (const Param& p : params) {
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) {
      sum += static_cast<double>(p.grad[i]) * p.grad[i];
    }
  }
  return std::sqrt(sum);
}

double clip_grad_norm(const std::vector<Param>& params, double max_norm) {
  const double norm = grad_norm(params);
  // Checked whether or not clipping is on: a NaN/inf gradient ruins the next step either way.
  NN_CHECK(std::isfinite(norm),
           "gradient norm is " << norm
                               << ": the gradients overflowed (exploding gradients) or hold NaN. "
                                  "Lower the learning rate, or clip with a smaller max_norm");
  if (max_norm > 0.0 && norm > max_norm) {
    // g *= max_norm / ||g||: same direction, length max_norm
    const auto scale = static_cast<float>(max_norm / norm);
    for (const Param& p : params) {
      const int64_t n = p.numel();
      for (int64_t i = 0; i < n; ++i) {
        p.grad[i] *= scale;
      }
    }
  }
  return norm;
}

namespace {
// a b + c rounded once where the machine has an FMA instruction (as the compiler contracts
// it there), twice elsewhere (where it does not).
inline float mul_add(float a, float b, float c) {
#if defined(__FMA__) || defined(__aarch64__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}
}  // namespace

void sgd_step(float* param, const float* grad, float* velocity, int64_t n, const SgdConfig& cfg) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] + cfg.weight_decay * param[i];
    if (velocity != nullptr && cfg.momentum != 0.0f) {
      velocity[i] = cfg.momentum * velocity[i] + g;  // v = mu v + g
      param[i] -= cfg.lr * velocity[i];
    } else {
      param[i] -= cfg.lr * g;
    }
  }
}

void adam_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t t,
               const AdamConfig& cfg) {
  const float bias1 = 1.0f - std::pow(cfg.beta1, static_cast<float>(t));
  const float bias2 = 1.0f - std::pow(cfg.beta2, static_cast<float>(t));
  // The settings as locals: read through cfg, the compiler must assume a store to param, m
  // or v could change them and reloads them every element, which kept this loop scalar
  // (perf: adam_step at 25% of a lesson 02 epoch). The arithmetic is the same, element by
  // element, so the results are bit-identical (nn/CMakeLists.txt: -fno-math-errno too).
  const float beta1 = cfg.beta1, beta2 = cfg.beta2, lr = cfg.lr, eps = cfg.eps, wd = cfg.weight_decay;
  // The fused multiply-adds are written out (mul_add): the scalar loop had them from the
  // compiler's contraction, and the vectorised loop must round the same way at every
  // element whatever the compiler decides for vectors. Checked: lesson 02's weights after
  // an epoch are bit-identical to the scalar loop's (ccb8a76), at 1 and 2 threads.
  for (int64_t i = 0; i < n; ++i) {
    const float g = mul_add(wd, param[i], grad[i]);                 // g + wd p
    m[i] = mul_add(beta1, m[i], (1.0f - beta1) * g);                  // beta1 m + (1 - beta1) g
    v[i] = mul_add(beta2, v[i], (1.0f - beta2) * g * g);              // beta2 v + (1 - beta2) g^2
    const float m_hat = m[i] / bias1;
    const float v_hat = v[i] / bias2;
    param[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
  }
}

Sgd::Sgd(std::vector<Param> params, SgdConfig cfg) : params_(std::move(params)), cfg_(cfg) {
  for (const Param& p : params_) {
    velocity_.emplace_back(p.shape);
  }
}

void Sgd::step() {
  for (size_t i = 0; i < params_.size(); ++i) {
    sgd_step(params_[i].data, params_[i].grad, velocity_[i].data(), params_[i].numel(), cfg_);
  }
}

Adam::Adam(std::vector<Param> params, AdamConfig cfg) : params_(std::move(params)), cfg_(cfg) {
  for (const Param& p : params_) {
    m_.emplace_back(p.shape);
    v_.emplace_back(p.shape);
  }
}

void Adam::step() {
  ++t_;
  for (size_t i = 0; i < params_.size(); ++i) {
    adam_step(params_[i].data, params_[i].grad, m_[i].data(), v_[i].data(), params_[i].numel(), t_,
              cfg_);
  }
}

float cosine_lr(float lr, float min_frac, double progress) {
  const double p = std::clamp(progress, 0.0, 1.0);
  const double lr_min = static_cast<double>(lr) * static_cast<double>(min_frac);
  return static_cast<float>(lr_min + (lr - lr_min) * 0.5 * (1.0 + std::cos(std::numbers::pi * p)));
}

}  // namespace nn
