// nn/layers.h: layers that own their parameters and call the ops in nn/ops.h.
//
// A layer keeps (weights, gradients) and nothing clever: forward and backward are a few
// calls to op pairs, so a student stepping through Mlp::backward lands in
// linear_backward / relu_backward and sees the loops.
#pragma once

#include <string>
#include <vector>

#include "nn/optim.h"
#include "nn/rng.h"
#include "nn/tensor.h"

namespace nn {

enum class Activation { ReLU, Tanh, Sigmoid };
Activation parse_activation(const std::string& name);  // "relu" | "tanh" | "sigmoid"
const char* activation_name(Activation a);

// y = x W^T + b
struct Linear {
  std::string name;
  int in_features = 0;
  int out_features = 0;
  Tensor weight;   // (out, in)
  Tensor bias;     // (out)
  Tensor dweight;  // (out, in)
  Tensor dbias;    // (out)

  // Weights ~ U(-a, a) with a = sqrt(6 / in) for ReLU (He et al. 2015: keeps the variance
  // of activations roughly constant through ReLU layers) and a = sqrt(6 / (in + out))
  // otherwise (Glorot & Bengio 2010). Biases start at zero.
  Linear(std::string layer_name, int in, int out, Rng& rng, Activation next = Activation::ReLU);
  void forward(float* out, const float* inp, int B) const;                  // inp (B,in) -> out (B,out)
  void backward(float* dinp, const float* dout, const float* inp, int B);   // grads accumulate
  std::vector<Param> params();
};

struct MlpConfig {
  std::vector<int> sizes = {784, 256, 128, 10};  // input, hidden..., output
  Activation activation = Activation::ReLU;      // between layers, not after the last
};

// A multi-layer perceptron: Linear -> act -> Linear -> act -> ... -> Linear (logits).
class Mlp {
 public:
  Mlp(MlpConfig cfg, Rng& rng);

  // x (B, sizes[0]) -> logits (B, sizes.back()). Keeps what backward needs; x must stay
  // alive until backward returns.
  const float* forward(const float* x, int B);
  // dlogits (B, sizes.back()) -> parameter gradients (accumulated). With dx, also the
  // gradient w.r.t. the input x (B, sizes[0]), assigned: what a caller needs to backprop
  // through the network into what fed it (lesson 13's MPC optimises the pump moves that
  // a plant model reads; the weights' gradients are accumulated all the same).
  void backward(const float* dlogits, int B, float* dx = nullptr);

  std::vector<Param> params();
  const MlpConfig& config() const { return cfg_; }
  int64_t num_params() const;
  std::vector<Linear>& layers() { return layers_; }

 private:
  void ensure_buffers(int B);
  MlpConfig cfg_;
  std::vector<Linear> layers_;
  const float* input_ = nullptr;
  int batch_ = 0;
  // per layer l: pre_[l] = layer output before the activation (B, out_l),
  // post_[l] = after it (B, out_l; the last layer has no activation, post = pre).
  std::vector<Tensor> pre_, post_, dpre_, dpost_;
};

}  // namespace nn
