// nn/classify.cpp: a batch through softmax + cross-entropy, and a whole-dataset evaluation
// (nn/classify.h).
#include "nn/classify.h"

#include <cmath>

#include "nn/check.h"
#include "nn/ops.h"
#include "nn/tensor.h"

namespace nn {

float ClassifyBatch::forward(const float* logits, const int32_t* y, int B, int V) {
  probs.resize(static_cast<size_t>(B) * static_cast<size_t>(V));
  losses.resize(static_cast<size_t>(B));
  pred.resize(static_cast<size_t>(B));
  const float loss = softmax_cross_entropy_forward(probs.data(), losses.data(), logits, y, B, V);
  argmax_rows(pred.data(), logits, B, V);
  return loss;
}

int64_t ClassifyBatch::correct(const int32_t* y, int B) const {
  int64_t n = 0;
  for (int b = 0; b < B; ++b) n += pred[static_cast<size_t>(b)] == y[b];
  return n;
}

const float* ClassifyBatch::backward(const int32_t* y, int B, int V) {
  dlogits.resize(static_cast<size_t>(B) * static_cast<size_t>(V));
  softmax_cross_entropy_backward(dlogits.data(), probs.data(), y, B, V);
  return dlogits.data();
}

EvalResult evaluate_classifier(const std::function<const float*(const float* x, int B)>& forward,
                               const ImageDataset& ds, int batch_size) {
  NN_CHECK(ds.size() > 0, "evaluate_classifier: the dataset "
                              << (ds.images_path.empty() ? std::string("given") : ds.images_path)
                              << " holds no images: nothing to evaluate");
  EvalResult r;
  BatchLoader loader(ds, batch_size, /*shuffle=*/false, /*seed=*/0);
  loader.start_epoch();
  Tensor x;
  std::vector<int32_t> y;
  const int V = ds.num_classes;
  ClassifyBatch batch;
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int B = loader.next(x, y); B > 0; B = loader.next(x, y)) {
    loss_sum += static_cast<double>(batch.forward(forward(x.data(), B), y.data(), B, V)) * B;
    correct += batch.correct(y.data(), B);
    for (int b = 0; b < B; ++b) {
      const auto i = static_cast<size_t>(b);
      r.predictions.push_back(batch.pred[i]);
      r.confidence.push_back(batch.probs[i * static_cast<size_t>(V) + static_cast<size_t>(batch.pred[i])]);
    }
  }
  r.loss = loss_sum / static_cast<double>(ds.size());
  r.accuracy = static_cast<double>(correct) / static_cast<double>(ds.size());
  // A NaN anywhere (weights, inputs) makes the loss NaN while argmax still picks some class:
  // the accuracy would look like a result. It is not one.
  NN_CHECK(std::isfinite(r.loss), "the model's mean loss over the " << ds.size() << " images is " << r.loss
                                      << ": its weights or its inputs hold NaN or infinity, so its predictions "
                                         "mean nothing (a diverged run, or a damaged checkpoint?)");
  return r;
}

void check_params_finite(const std::vector<Param>& params, const std::string& where) {
  for (const Param& p : params) {
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) {
      NN_CHECK(std::isfinite(p.data[i]), where << ": tensor '" << p.name << "' " << shape_str(p.shape) << " holds "
                                               << p.data[i] << " at flat index " << i
                                               << ": a model with NaN or infinite weights computes nothing meaningful");
    }
  }
}

}  // namespace nn
