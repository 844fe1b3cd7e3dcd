// nn/optim.h: optimizers. Each update is a free function over plain buffers (what the
// lessons step through), and a small class that keeps its state for a list of Params.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/tensor.h"

namespace nn {

// A trainable buffer and its gradient: what layers expose and optimizers update.
struct Param {
  std::string name;  // "fc1.weight": the key in checkpoints
  Shape shape;
  float* data = nullptr;
  float* grad = nullptr;
  int64_t numel() const { return numel_of(shape); }
};

void zero_grads(const std::vector<Param>& params);
// sqrt(sum of squared gradient entries) over all params: for logs and clipping.
double grad_norm(const std::vector<Param>& params);
// Gradient clipping by global norm: if grad_norm(params) > max_norm, scales every gradient
// by max_norm / norm, so the step keeps its direction but not its size. Returns the norm
// BEFORE clipping (what training logs show). max_norm <= 0 disables clipping. A non-finite
// norm throws nn::Error (an exploding gradient became inf/NaN: clipping cannot save it).
double clip_grad_norm(const std::vector<Param>& params, double max_norm);

// ---- SGD with momentum ---------------------------------------------------------------
//   v = momentum * v + (grad + weight_decay * param)
//   param -= lr * v
struct SgdConfig {
  float lr = 0.1f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
};
void sgd_step(float* param, const float* grad, float* velocity, int64_t n, const SgdConfig& cfg);

// ---- Adam (Kingma & Ba, 2015) ---------------------------------------------------------
//   m = beta1 m + (1 - beta1) g             first moment: a running mean of gradients
//   v = beta2 v + (1 - beta2) g^2           second moment: a running mean of squares
//   m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t)   bias correction (m, v start at 0)
//   param -= lr * m_hat / (sqrt(v_hat) + eps)
// weight_decay here is the L2 term added to g (Adam); decoupled decay (AdamW) is gpt/'s.
struct AdamConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};
// t is the 1-based step count.
void adam_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t t,
               const AdamConfig& cfg);

// ---- learning-rate schedule -------------------------------------------------------------
// Cosine decay from lr to lr * min_frac over the run, progress in [0, 1]:
//   lr(p) = lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2
// Big steps while the loss is far from a minimum, small ones to settle into it.
float cosine_lr(float lr, float min_frac, double progress);

class Sgd {
 public:
  Sgd(std::vector<Param> params, SgdConfig cfg);
  void step();
  void zero_grad() { zero_grads(params_); }
  SgdConfig& config() { return cfg_; }

 private:
  std::vector<Param> params_;
  SgdConfig cfg_;
  std::vector<Tensor> velocity_;
};

class Adam {
 public:
  Adam(std::vector<Param> params, AdamConfig cfg);
  void step();
  void zero_grad() { zero_grads(params_); }
  AdamConfig& config() { return cfg_; }
  int64_t steps() const { return t_; }

 private:
  std::vector<Param> params_;
  AdamConfig cfg_;
  std::vector<Tensor> m_, v_;
  int64_t t_ = 0;
};

}  // namespace nn
