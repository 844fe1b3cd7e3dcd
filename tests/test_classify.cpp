// tests/test_classify.cpp: nn::ClassifyBatch and nn::evaluate_classifier (nn/classify.h),
// the classification step lessons 02 and 04 share, and the number formats they print.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "nn/classify.h"
#include "nn/ops.h"
#include "io/progress.h"

TEST_CASE("ClassifyBatch: loss, predictions, correct count and dlogits as the ops give them", "[nn][classify]") {
  const int B = 3, V = 4;
  const std::vector<float> logits = {1, 2, 0, -1, /**/ 3, 0, 0, 0, /**/ 0, 0, 5, 1};
  const std::vector<int32_t> y = {1, 2, 2};
  nn::ClassifyBatch batch;
  const float loss = batch.forward(logits.data(), y.data(), B, V);
  std::vector<float> probs(B * V), losses(B), dlogits(B * V);
  CHECK(loss == nn::softmax_cross_entropy_forward(probs.data(), losses.data(), logits.data(), y.data(), B, V));
  CHECK(batch.probs == probs);
  CHECK(batch.pred == std::vector<int32_t>{1, 0, 2});
  CHECK(batch.correct(y.data(), B) == 2);
  nn::softmax_cross_entropy_backward(dlogits.data(), probs.data(), y.data(), B, V);
  const float* d = batch.backward(y.data(), B, V);
  CHECK(std::vector<float>(d, d + B * V) == dlogits);
}

TEST_CASE("evaluate_classifier: every image once in order, loss and accuracy over the set", "[nn][classify]") {
  nn::ImageDataset ds;
  ds.rows = 1;
  ds.cols = 2;
  ds.num_classes = 2;
  ds.images = nn::Tensor({5, 2});  // pixels: a one-hot of the class each image shows
  const float px[] = {1, 0, /**/ 0, 1, /**/ 1, 0, /**/ 0, 1, /**/ 1, 0};
  std::copy(std::begin(px), std::end(px), ds.images.data());
  ds.labels = {0, 1, 0, 0, 0};                                   // image 3 is mislabelled
  std::vector<float> logits;
  const auto forward = [&](const float* x, int B) {  // logits = 2 * pixels: predicts the pixel's class
    logits.assign(x, x + 2 * B);
    for (float& v : logits) v *= 2.0f;
    return logits.data();
  };
  const nn::EvalResult r = nn::evaluate_classifier(forward, ds, 2);  // batches of 2, 2, 1
  CHECK(r.predictions == std::vector<int32_t>{0, 1, 0, 1, 0});
  CHECK(r.accuracy == Approx(0.8));
  const double good = std::log(1.0 + std::exp(-2.0)), bad = std::log(1.0 + std::exp(2.0));
  CHECK(r.loss == Approx((4 * good + bad) / 5));
  REQUIRE(r.confidence.size() == 5);
  CHECK(r.confidence[0] == Approx(1.0 / (1.0 + std::exp(-2.0))));
}

// NaN weights give NaN logits; argmax over them still names a class, so the evaluation
// printed "accuracy 15.00%" next to a NaN (or plausible-looking) loss. Now it refuses.
TEST_CASE("evaluate_classifier refuses a non-finite loss and an empty dataset", "[nn][classify]") {
  nn::ImageDataset ds;
  ds.rows = 1;
  ds.cols = 2;
  ds.num_classes = 2;
  ds.images = nn::Tensor({3, 2}, 0.5f);
  ds.labels = {0, 1, 0};
  std::vector<float> logits;
  for (float bad : {std::nanf(""), INFINITY}) {
    const auto forward = [&](const float*, int B) {
      logits.assign(static_cast<size_t>(2 * B), 1.0f);
      logits[1] = bad;  // one logit of the first batch
      return logits.data();
    };
    INFO(bad);
    REQUIRE_THROWS_WITH(nn::evaluate_classifier(forward, ds, 2),
                        Catch::Contains("mean loss over the 3 images is") && Catch::Contains("NaN or infinity"));
  }
  nn::ImageDataset empty;
  empty.images = nn::Tensor({0, 2});
  empty.images_path = "/data/empty-idx3-ubyte";
  REQUIRE_THROWS_WITH(nn::evaluate_classifier([&](const float*, int) { return logits.data(); }, empty, 2),
                      Catch::Contains("/data/empty-idx3-ubyte") && Catch::Contains("holds no images"));
}

TEST_CASE("check_params_finite names where, the tensor and the first bad index", "[nn][classify]") {
  std::vector<float> w(6, 0.25f), b(2, 0.0f);
  const std::vector<nn::Param> params = {{"fc.weight", {2, 3}, w.data(), nullptr}, {"fc.bias", {2}, b.data(), nullptr}};
  REQUIRE_NOTHROW(nn::check_params_finite(params, "checkpoint x.safetensors"));
  b[1] = -INFINITY;
  REQUIRE_THROWS_WITH(nn::check_params_finite(params, "checkpoint x.safetensors"),
                      Catch::Contains("checkpoint x.safetensors") && Catch::Contains("'fc.bias'") &&
                          Catch::Contains("-inf") && Catch::Contains("flat index 1"));
  w[4] = std::nanf("");
  REQUIRE_THROWS_WITH(nn::check_params_finite(params, "the weights after epoch 2"),
                      Catch::Contains("'fc.weight' (2, 3)") && Catch::Contains("flat index 4"));
}

TEST_CASE("format_percent and format_fixed", "[nn][progress]") {
  CHECK(nn::format_percent(0.8956) == "89.56%");
  CHECK(nn::format_fixed(0.41236, 4) == "0.4124");
  CHECK(nn::format_fixed(2.0, 1) == "2.0");
}
