// Lesson 04: the CNN's forward and backward, as calls to the op pairs of nn/conv.h and
// nn/ops.h. Step into Cnn::forward in a debugger and each line is one op.
#include "lessons/04-cnn/model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>

#include "kernels/conv.h"
#include "nn/check.h"
#include "nn/ops.h"

namespace lesson04 {

std::string join_ints(const std::vector<int>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "-" : "") << v[i];
  return os.str();
}

// ---- dropout --------------------------------------------------------------------------------
void dropout_forward(float* out, float* mask, const float* inp, int64_t N, float p, nn::Rng& rng) {
  const float keep_scale = 1.0f / (1.0f - p);  // E[mask] = (1 - p) * 1/(1 - p) = 1
  for (int64_t i = 0; i < N; ++i) {
    mask[i] = rng.uniform() < p ? 0.0f : keep_scale;
    out[i] = inp[i] * mask[i];
  }
}

void dropout_backward(float* dinp, const float* dout, const float* mask, int64_t N) {
  for (int64_t i = 0; i < N; ++i) dinp[i] = dout[i] * mask[i];  // d(x m)/dx = m
}

// ---- the model ------------------------------------------------------------------------------
namespace {

int flat_size(const CnnConfig& cfg) {
  NN_CHECK(!cfg.channels.empty(), "the CNN needs at least one conv block (--channels)");
  int h = cfg.height, w = cfg.width;
  for (size_t l = 0; l < cfg.channels.size(); ++l) {
    NN_CHECK(h >= 2 && w >= 2, "after " << l << " conv blocks the image is " << h << "x" << w
                                        << ": too small for another 2x2 max-pool; use fewer --channels");
    h /= 2;
    w /= 2;
  }
  return cfg.channels.back() * h * w;
}

}  // namespace

double cnn_training_bytes(const CnnConfig& cfg, int batch) {
  double params = 0.0, per_image = 0.0;
  double c = cfg.in_channels, h = cfg.height, w = cfg.width;
  for (int oc : cfg.channels) {
    params += static_cast<double>(oc) * c * 9.0 + oc;         // conv3x3 weight and bias
    per_image += 5.0 * oc * h * w;                            // act, dpre, dact, pool and dpool, argmax
    c = oc;
    h = std::floor(h / 2.0);
    w = std::floor(w / 2.0);
  }
  const double flat = c * h * w;
  params += flat * cfg.hidden + cfg.hidden + static_cast<double>(cfg.hidden) * cfg.classes + cfg.classes;
  per_image += 2.0 * flat + 7.0 * cfg.hidden + cfg.classes;  // dflat, the fc buffers, logits
  return 4.0 * (4.0 * params + static_cast<double>(batch) * per_image);
}

Cnn::Cnn(CnnConfig cfg, nn::Rng& rng, uint64_t dropout_seed)
    : cfg_(std::move(cfg)),
      fc1_("fc1", flat_size(cfg_), cfg_.hidden, rng),
      fc2_("fc2", cfg_.hidden, cfg_.classes, rng, nn::Activation::Sigmoid /* Glorot: no ReLU after */),
      flat_(flat_size(cfg_)),
      dropout_rng_(dropout_seed) {
  NN_CHECK(cfg_.dropout >= 0.0f && cfg_.dropout < 1.0f, "dropout must be in [0, 1), got " << cfg_.dropout);
  int c = cfg_.in_channels, h = cfg_.height, w = cfg_.width;
  blocks_.reserve(cfg_.channels.size());
  for (size_t l = 0; l < cfg_.channels.size(); ++l) {
    ConvBlock block{nn::Conv2d("conv" + std::to_string(l + 1), c, cfg_.channels[l], 3, 1, 1, rng),
                    h, w, {}, {}, {}, {}, {}, {}};
    blocks_.push_back(std::move(block));
    c = cfg_.channels[l];
    h /= 2;
    w /= 2;
  }
  // fc1/fc2 were made before the convs (member order), so the draw order is fc1, fc2,
  // conv1, conv2: fixed, which is all reproducibility needs.
}

void Cnn::ensure_buffers(int B) {
  if (B <= batch_) return;
  batch_ = B;
  for (ConvBlock& k : blocks_) {
    const int64_t C = k.conv.out_channels;
    k.act = nn::Tensor({B, C, k.in_h, k.in_w});
    k.dpre = nn::Tensor({B, C, k.in_h, k.in_w});
    k.dact = nn::Tensor({B, C, k.in_h, k.in_w});
    k.pool = nn::Tensor({B, C, k.in_h / 2, k.in_w / 2});
    k.dpool = nn::Tensor({B, C, k.in_h / 2, k.in_w / 2});
    k.argmax.assign(static_cast<size_t>(k.pool.numel()), 0);
  }
  const int Hd = cfg_.hidden;
  h1_pre_ = nn::Tensor({B, Hd});
  h1_act_ = nn::Tensor({B, Hd});
  h1_mask_ = nn::Tensor({B, Hd});
  h1_drop_ = nn::Tensor({B, Hd});
  dh1_drop_ = nn::Tensor({B, Hd});
  dh1_act_ = nn::Tensor({B, Hd});
  dh1_pre_ = nn::Tensor({B, Hd});
  dflat_ = nn::Tensor({B, flat_});
  logits_ = nn::Tensor({B, cfg_.classes});
}

const float* Cnn::forward(const float* x, int B, bool train) {
  ensure_buffers(B);
  input_ = x;
  last_B_ = B;
  last_train_ = train;
  const float* h = x;  // (B, C, H, W) of the current block's input
  for (ConvBlock& k : blocks_) {
    // act = max(0, conv(h) + bias), pool = max over 2x2 of act, in one pass per image
    // (kernels::conv2d_relu_maxpool2x2_forward): the ReLU and the pooling run while the
    // image's act is still in cache. The same numbers as conv, relu_forward, then
    // nn::maxpool2d_forward(K = stride = 2), bit for bit.
    k.conv.forward_relu_maxpool2x2(k.act.data(), k.pool.data(), k.argmax.data(), h, B, k.in_h, k.in_w);
    h = k.pool.data();
  }
  // flatten: h is (B, C, H/2, W/2) in NCHW = (B, flat_) row-major. Nothing to do.
  const int64_t nh = static_cast<int64_t>(B) * cfg_.hidden;
  fc1_.forward(h1_pre_.data(), h, B);                             // (B, hidden)
  nn::relu_forward(h1_act_.data(), h1_pre_.data(), nh);
  const float* fc2_in = h1_act_.data();
  if (train && cfg_.dropout > 0.0f) {
    dropout_forward(h1_drop_.data(), h1_mask_.data(), h1_act_.data(), nh, cfg_.dropout, dropout_rng_);
    fc2_in = h1_drop_.data();
  }
  fc2_.forward(logits_.data(), fc2_in, B);                        // (B, classes)
  return logits_.data();
}

void Cnn::backward(const float* dlogits, int B) {
  NN_CHECK(input_ != nullptr && B == last_B_, "Cnn::backward called without a matching forward");
  const int64_t nh = static_cast<int64_t>(B) * cfg_.hidden;
  const bool dropped = last_train_ && cfg_.dropout > 0.0f;
  // fc2: dlogits (B,classes) -> d(fc2 input) (B,hidden)
  fc2_.backward(dh1_drop_.data(), dlogits, dropped ? h1_drop_.data() : h1_act_.data(), B);
  if (dropped) {
    dropout_backward(dh1_act_.data(), dh1_drop_.data(), h1_mask_.data(), nh);
  } else {
    std::copy(dh1_drop_.data(), dh1_drop_.data() + nh, dh1_act_.data());
  }
  nn::relu_backward(dh1_pre_.data(), dh1_act_.data(), h1_pre_.data(), nh);
  // fc1: its input was the last block's pool output, seen as (B, flat_)
  fc1_.backward(dflat_.data(), dh1_pre_.data(), blocks_.back().pool.data(), B);
  // The conv blocks in reverse. dflat_ IS the gradient of the last pool (same bytes, NCHW).
  const float* dpool = dflat_.data();
  for (size_t l = blocks_.size(); l-- > 0;) {
    ConvBlock& k = blocks_[l];
    const int C = k.conv.out_channels;
    const int64_t n = static_cast<int64_t>(B) * C * k.in_h * k.in_w;
    kernels::maxpool2x2_backward(k.dact.data(), dpool, k.argmax.data(), B, C, k.in_h, k.in_w);
    // act > 0 exactly where pre = conv + bias > 0: the ReLU's mask, without keeping pre
    nn::relu_backward(k.dpre.data(), k.dact.data(), k.act.data(), n);
    // The first block needs no gradient for the image itself: dinp = nullptr skips it.
    float* dinp = l == 0 ? nullptr : blocks_[l - 1].dpool.data();
    k.conv.backward(dinp, k.dpre.data(), B, k.in_h, k.in_w);
    if (l > 0) dpool = blocks_[l - 1].dpool.data();
  }
}

std::vector<nn::Param> Cnn::params() {
  std::vector<nn::Param> all;
  for (ConvBlock& k : blocks_) {
    for (nn::Param& p : k.conv.params()) all.push_back(p);
  }
  for (nn::Param& p : fc1_.params()) all.push_back(p);
  for (nn::Param& p : fc2_.params()) all.push_back(p);
  return all;
}

int64_t Cnn::num_params() {
  int64_t n = 0;
  for (const nn::Param& p : params()) n += p.numel();
  return n;
}

}  // namespace lesson04
