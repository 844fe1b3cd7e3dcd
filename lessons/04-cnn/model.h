// Lesson 04: the small CNN trained on Fashion-MNIST, as a flat struct of layers and
// activations (llm.c style): forward fills the activations, backward walks them in reverse.
//
//   x (B, 1, 28, 28)
//   -> [conv3x3 pad 1 -> relu -> maxpool 2x2]   per entry of `channels` (default 32, 64)
//        (B,32,28,28) -> (B,32,14,14) -> (B,64,14,14) -> (B,64,7,7)
//   -> flatten (a no-op on NCHW: (B,64,7,7) is already (B,3136))
//   -> fc1 (3136 -> hidden) -> relu -> dropout -> fc2 (hidden -> 10) = logits
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/conv.h"
#include "nn/layers.h"
#include "nn/rng.h"
#include "nn/tensor.h"

namespace lesson04 {

struct CnnConfig {
  int in_channels = 1;
  int height = 28;
  int width = 28;
  std::vector<int> channels = {32, 64};  // one conv block per entry
  int hidden = 128;                      // fc1's width
  int classes = 10;
  float dropout = 0.0f;                  // probability of zeroing an fc1 unit while training
};

// "32-64"
std::string join_ints(const std::vector<int>& v);

// ---- dropout (inverted): the one op this lesson adds besides conv and pool ----------------
// Training: out_i = inp_i * mask_i, mask_i = 0 with probability p, else 1 / (1 - p), so the
// expected output equals the input and evaluation needs no rescaling. Backward: dinp = dout * mask.
void dropout_forward(float* out, float* mask, const float* inp, int64_t N, float p, nn::Rng& rng);
void dropout_backward(float* dinp, const float* dout, const float* mask, int64_t N);

// One conv block's activations, for a batch of B: act = relu(conv) (B, C, H, W) (the ReLU
// is fused into the convolution, so the pre-activation is never stored), pool
// (B, C, H/2, W/2) and the argmax that pooling saved.
struct ConvBlock {
  nn::Conv2d conv;
  int in_h = 0, in_w = 0;      // input size of this block
  nn::Tensor act, pool;        // (B,C,H,W), (B,C,H/2,W/2)
  std::vector<int32_t> argmax; // (B,C,H/2,W/2)
  nn::Tensor dpre, dact;       // gradients of pre and act (B,C,H,W)
  nn::Tensor dpool;            // gradient of pool (B,C,H/2,W/2)
};

// The bytes a Cnn of `cfg` holds while training on batches of `batch` images: parameters with
// their gradients and Adam's two moments (4 copies), and per image every block's buffers
// (act, dpre, dact, pool, its gradient, argmax: under 5 C_out H W floats; the convolution's
// scratch is per thread and per image) and fc1's. In double, so that no size overflows:
// programs check it before building the model (the image size comes from a file).
double cnn_training_bytes(const CnnConfig& cfg, int batch);

class Cnn {
 public:
  Cnn(CnnConfig cfg, nn::Rng& rng, uint64_t dropout_seed);

  // x (B, C*H*W) -> logits (B, classes). `train` turns dropout on. x must stay alive until
  // backward returns.
  const float* forward(const float* x, int B, bool train);
  // dlogits (B, classes) -> parameter gradients (accumulated).
  void backward(const float* dlogits, int B);

  std::vector<nn::Param> params();
  int64_t num_params();
  const CnnConfig& config() const { return cfg_; }
  // Activations of the last forward, for the notebook's feature maps.
  const std::vector<ConvBlock>& blocks() const { return blocks_; }
  int flat_features() const { return flat_; }

 private:
  void ensure_buffers(int B);
  CnnConfig cfg_;
  std::vector<ConvBlock> blocks_;
  nn::Linear fc1_, fc2_;
  int flat_ = 0;       // C*H*W after the last block
  int batch_ = 0;      // buffers are sized for this many images
  int last_B_ = 0;
  bool last_train_ = false;
  const float* input_ = nullptr;
  nn::Rng dropout_rng_;
  nn::Tensor h1_pre_, h1_act_, h1_mask_, h1_drop_, logits_;  // (B, hidden) x4, (B, classes)
  nn::Tensor dh1_drop_, dh1_act_, dh1_pre_, dflat_;          // (B, hidden) x3, (B, flat)
};

}  // namespace lesson04
