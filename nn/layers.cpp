#include "nn/layers.h"

#include <cmath>

#include "nn/check.h"
#include "nn/ops.h"

namespace nn {

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::ReLU;
  if (name == "tanh") return Activation::Tanh;
  if (name == "sigmoid") return Activation::Sigmoid;
  NN_CHECK(false, "unknown activation '" << name << "': use relu, tanh or sigmoid");
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::ReLU: return "relu";
    case Activation::Tanh: return "tanh";
    case Activation::Sigmoid: return "sigmoid";
  }
  return "?";
}

// ---- Linear -----------------------------------------------------------------------
Linear::Linear(std::string layer_name, int in, int out, Rng& rng, Activation next)
    : name(std::move(layer_name)), in_features(in), out_features(out),
      weight({out, in}), bias({out}), dweight({out, in}), dbias({out}) {
  NN_CHECK(in > 0 && out > 0, "layer " << name << " needs positive sizes, got " << in << " -> " << out);
  const double fan = next == Activation::ReLU ? in : (in + out);
  const auto a = static_cast<float>(std::sqrt(6.0 / fan));
  weight = Tensor::uniform({out, in}, rng, -a, a);
}

void Linear::forward(float* out, const float* inp, int B) const {
  linear_forward(out, inp, weight.data(), bias.data(), B, in_features, out_features);
}

void Linear::backward(float* dinp, const float* dout, const float* inp, int B) {
  linear_backward(dinp, dweight.data(), dbias.data(), dout, inp, weight.data(), B, in_features,
                  out_features);
}

std::vector<Param> Linear::params() {
  return {{name + ".weight", weight.shape(), weight.data(), dweight.data()},
          {name + ".bias", bias.shape(), bias.data(), dbias.data()}};
}

// ---- Mlp ----------------------------------------------------------------------------
Mlp::Mlp(MlpConfig cfg, Rng& rng) : cfg_(std::move(cfg)) {
  NN_CHECK(cfg_.sizes.size() >= 2, "an MLP needs at least an input and an output size");
  for (size_t l = 0; l + 1 < cfg_.sizes.size(); ++l) {
    layers_.emplace_back("fc" + std::to_string(l + 1), cfg_.sizes[l], cfg_.sizes[l + 1], rng,
                         cfg_.activation);
  }
}

void Mlp::ensure_buffers(int B) {
  if (B <= batch_) return;
  batch_ = B;
  pre_.clear();
  post_.clear();
  dpre_.clear();
  dpost_.clear();
  for (const Linear& layer : layers_) {
    const Shape s = {B, layer.out_features};
    pre_.emplace_back(s);
    post_.emplace_back(s);
    dpre_.emplace_back(s);
    dpost_.emplace_back(s);
  }
}

static void activation_forward(Activation a, float* out, const float* inp, int64_t n) {
  switch (a) {
    case Activation::ReLU: relu_forward(out, inp, n); break;
    case Activation::Tanh: tanh_forward(out, inp, n); break;
    case Activation::Sigmoid: sigmoid_forward(out, inp, n); break;
  }
}

static void activation_backward(Activation a, float* dinp, const float* dout, const float* inp,
                                const float* out, int64_t n) {
  switch (a) {
    case Activation::ReLU: relu_backward(dinp, dout, inp, n); break;
    case Activation::Tanh: tanh_backward(dinp, dout, out, n); break;
    case Activation::Sigmoid: sigmoid_backward(dinp, dout, out, n); break;
  }
}

const float* Mlp::forward(const float* x, int B) {
  ensure_buffers(B);
  input_ = x;
  const float* h = x;  // (B, sizes[l])
  const size_t last = layers_.size() - 1;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const int64_t n = static_cast<int64_t>(B) * layers_[l].out_features;
    layers_[l].forward(pre_[l].data(), h, B);  // pre = h W^T + b
    if (l == last) return pre_[l].data();      // logits: no activation
    activation_forward(cfg_.activation, post_[l].data(), pre_[l].data(), n);
    h = post_[l].data();
  }
  return nullptr;  // unreachable: an Mlp has at least one layer
}

void Mlp::backward(const float* dlogits, int B, float* dx) {
  NN_CHECK(input_ != nullptr && B <= batch_, "Mlp::backward called without a matching forward");
  const float* dout = dlogits;  // gradient w.r.t. the current layer's output (pre-activation)
  for (size_t l = layers_.size(); l-- > 0;) {
    const float* inp = l == 0 ? input_ : post_[l - 1].data();
    float* dinp = l == 0 ? dx : dpost_[l - 1].data();  // the data's gradient only if asked
    layers_[l].backward(dinp, dout, inp, B);
    if (l == 0) break;
    const int64_t n = static_cast<int64_t>(B) * layers_[l - 1].out_features;
    activation_backward(cfg_.activation, dpre_[l - 1].data(), dpost_[l - 1].data(),
                        pre_[l - 1].data(), post_[l - 1].data(), n);
    dout = dpre_[l - 1].data();
  }
}

std::vector<Param> Mlp::params() {
  std::vector<Param> all;
  for (Linear& layer : layers_) {
    for (Param& p : layer.params()) all.push_back(p);
  }
  return all;
}

int64_t Mlp::num_params() const {
  int64_t n = 0;
  for (const Linear& layer : layers_) n += layer.weight.numel() + layer.bias.numel();
  return n;
}

}  // namespace nn
