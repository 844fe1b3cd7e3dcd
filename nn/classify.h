// nn/classify.h: what every image classifier's training loop shares (lessons 02 and 04):
// one batch through softmax + cross-entropy with its buffers and the accuracy count, and
// the evaluation of a model over a whole dataset.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/dataset.h"
#include "nn/optim.h"

namespace nn {

// Softmax cross-entropy over a batch of logits (nn::softmax_cross_entropy_*), with the
// buffers kept from batch to batch.
struct ClassifyBatch {
  std::vector<float> probs;    // (B, V)
  std::vector<float> losses;   // (B)
  std::vector<float> dlogits;  // (B, V)
  std::vector<int32_t> pred;   // (B): argmax of each row of logits
  // The mean loss of logits (B, V) against labels y (B); fills probs, losses and pred.
  float forward(const float* logits, const int32_t* y, int B, int V);
  // How many of the last forward's B predictions equal y.
  int64_t correct(const int32_t* y, int B) const;
  // d(mean loss)/d logits of the last forward, ASSIGNED into dlogits; returns its data.
  const float* backward(const int32_t* y, int B, int V);
};

struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;
  std::vector<int32_t> predictions;
  std::vector<float> confidence;  // the probability the model gave its prediction
};

// Runs `forward(x, B) -> logits (B, V)` over the dataset in order, batch_size images at a
// time: mean loss, accuracy, and every prediction with its confidence. nn::Error for an
// empty dataset, and when the loss is not finite (NaN weights or inputs: the accuracy would
// be argmax over NaN, a number that looks like a result and is none).
EvalResult evaluate_classifier(const std::function<const float*(const float* x, int B)>& forward,
                               const ImageDataset& ds, int batch_size);

// Every parameter value must be finite before it is saved or used: nn::Error naming `where`
// (e.g. "checkpoint out/cnn.safetensors", "the weights after epoch 3"), the tensor and the
// first bad index otherwise.
void check_params_finite(const std::vector<Param>& params, const std::string& where);

}  // namespace nn
