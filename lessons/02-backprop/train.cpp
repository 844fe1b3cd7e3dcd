// Lesson 02, part 3: the nn/ library in matrix form, trained on Fashion-MNIST.
//
// One training step, with the shapes for the default 784-256-128-10 network and B = 128:
//   x (B,784) -> fc1 -> relu -> (B,256) -> fc2 -> relu -> (B,128) -> fc3 -> logits (B,10)
//   loss = mean_b -log softmax(logits_b)[label_b]
//   dlogits = (probs - onehot) / B                        softmax_cross_entropy_backward
//   Mlp::backward walks the layers in reverse: linear_backward, relu_backward, ...
//   Adam updates every parameter from its gradient      nn/optim.cpp
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "lessons/02-backprop/backprop.h"
#include "nn/check.h"
#include "nn/checkpoint.h"
#include "nn/classify.h"
#include "nn/dataset.h"
#include "nn/layers.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "io/progress.h"

namespace lesson02 {

namespace {

// ---- evaluation -------------------------------------------------------------------------
// The whole test set in order (nn/classify.h): mean loss, accuracy, every prediction.
nn::EvalResult evaluate(nn::Mlp& model, const nn::ImageDataset& ds, int batch_size) {
  return nn::evaluate_classifier([&](const float* x, int B) { return model.forward(x, B); }, ds, batch_size);
}

std::string join_sizes(const std::vector<int>& sizes) {
  std::ostringstream os;
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? "-" : "") << sizes[i];
  return os.str();
}



// The bytes the MLP of `sizes` holds while training on batches of `batch` images: weights
// and biases with their gradients and Adam's two moments (4 copies), and per image each
// layer's pre-activation, activation and their gradients. In double: no size overflows.
double mlp_training_bytes(const std::vector<int>& sizes, int batch) {
  double params = 0.0, per_image = sizes.front();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    params += static_cast<double>(sizes[i]) * sizes[i + 1] + sizes[i + 1];
    per_image += 4.0 * sizes[i + 1];
  }
  return 4.0 * (4.0 * params + static_cast<double>(batch) * per_image);
}

// The input layer is sized from the images (a file): a model this machine cannot be expected
// to hold is refused before it is allocated (tens of GB end in the kernel killing the
// process, not in a message).
constexpr double kMaxModelBytes = 4.0 * 1024 * 1024 * 1024;

}  // namespace

// ---- the training run ---------------------------------------------------------------------
int run_train_part(const Options& o) {
  std::cout << "== Part 3: an MLP in matrix form (nn/), trained on " << o.dataset << " ==\n";
  if (o.threads > 0) omp_set_num_threads(o.threads);

  // Data.
  const std::string dir = nn::find_dataset_dir(o.dataset, o.data_dir);
  // Both splits, checked against each other: the same image size and classes.
  nn::TrainTest data = nn::load_mnist_train_test(dir);
  nn::ImageDataset& train = data.train;
  nn::ImageDataset& test = data.test;
  nn::truncate_dataset(train, o.limit_train);
  nn::truncate_dataset(test, o.limit_test);
  const nn::PixelStats stats = nn::pixel_stats(train);
  nn::standardise(train, stats);
  nn::standardise(test, stats);
  const int D = train.rows * train.cols;
  std::cout << "data      " << dir << ": " << train.size() << " train, " << test.size()
            << " test images of " << train.rows << "x" << train.cols << " (pixel mean "
            << nn::format_fixed(stats.mean, 4) << ", std " << nn::format_fixed(stats.std, 4) << ")\n";

  // Model.
  nn::MlpConfig cfg;
  cfg.sizes = {D};
  for (int h : o.hidden) cfg.sizes.push_back(h);
  cfg.sizes.push_back(train.num_classes);
  cfg.activation = nn::parse_activation(o.activation);
  const int eval_batch = 1000;
  // the largest batch the loaders will hand the model: no more than a split holds
  const int64_t largest_batch = std::max(std::min<int64_t>(o.batch_size, train.size()),
                                         std::min<int64_t>(eval_batch, test.size()));
  const double model_bytes = mlp_training_bytes(cfg.sizes, static_cast<int>(largest_batch));
  NN_CHECK(model_bytes <= kMaxModelBytes,
           "an MLP " << join_sizes(cfg.sizes) << " for the " << train.rows << "x" << train.cols << " images of "
                     << train.images_path << " would hold about " << std::fixed << std::setprecision(1)
                     << model_bytes / (1024.0 * 1024 * 1024)
                     << " GiB (weights, gradients, Adam's state, activations), more than the 4 GiB this lesson builds. "
                        "It is made for 28x28 images: check the dataset, or use smaller --hidden layers or --batch-size");
  nn::Rng rng(o.seed);
  nn::Mlp model(cfg, rng);
  std::vector<nn::Param> params = model.params();
  std::cout << "model     MLP " << join_sizes(cfg.sizes) << ", " << o.activation << ", "
            << model.num_params() << " parameters\n";

  // Optimizer: one of the two, holding its state (Adam: m and v; SGD: the velocity).
  std::optional<nn::Adam> adam;
  std::optional<nn::Sgd> sgd;
  if (o.optimizer == "adam") {
    adam.emplace(params, nn::AdamConfig{o.lr, 0.9f, 0.999f, 1e-8f, o.weight_decay});
  } else {
    sgd.emplace(params, nn::SgdConfig{o.lr, o.momentum, o.weight_decay});
  }
  std::cout << "optimizer " << o.optimizer << ", lr " << o.lr << " cosine-decayed to "
            << o.lr * o.lr_min_frac << ", batch " << o.batch_size << ", " << o.epochs
            << " epochs, seed " << o.seed << ", " << omp_get_max_threads() << " threads\n";

  // Outputs.
  std::filesystem::create_directories(o.out_dir);
  const std::string log_path = o.out_dir + "/log.jsonl";
  const std::string ckpt_path = o.out_dir + "/mlp.safetensors";
  const std::string pred_path = o.out_dir + "/predictions.csv";
  nn::MetricsLog log(log_path);
  std::cout << "writing   " << log_path << ", " << ckpt_path << ", " << pred_path << "\n";

  nn::BatchLoader loader(train, o.batch_size, /*shuffle=*/true, o.seed);
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * o.epochs;
  const int V = train.num_classes;
  nn::Tensor x;
  std::vector<int32_t> y;
  nn::ClassifyBatch batch;  // softmax + cross-entropy buffers, accuracy count (nn/classify.h)
  int64_t step = 0;
  double train_seconds = 0.0;
  nn::EvalResult test_result;

  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    std::ostringstream label;
    label << "epoch " << std::setw(2) << epoch << "/" << o.epochs;
    nn::ProgressBar bar(label.str(), steps_per_epoch, std::cout, 5.0);
    loader.start_epoch();
    double loss_sum = 0.0;
    int64_t seen = 0;
    int64_t correct = 0;
    float lr = o.lr;
    for (int B = loader.next(x, y); B > 0; B = loader.next(x, y)) {
      lr = nn::cosine_lr(o.lr, o.lr_min_frac,
                         static_cast<double>(step) / static_cast<double>(std::max<int64_t>(total_steps, 1)));

      // forward: logits (B,V), then the loss
      const float* logits = model.forward(x.data(), B);
      const float loss = batch.forward(logits, y.data(), B, V);
      NN_CHECK(std::isfinite(loss), "the loss became " << loss << " at epoch " << epoch << ", step "
                                        << step << ": the learning rate " << lr
                                        << " is probably too high (try --lr " << o.lr / 10
                                        << "). The last good checkpoint, if any, is kept at "
                                        << ckpt_path);
      correct += batch.correct(y.data(), B);
      loss_sum += static_cast<double>(loss) * B;
      seen += B;

      // backward: gradients of the mean loss w.r.t. every parameter (accumulated into
      // zeroed buffers, see the gradient rule in nn/ops.h)
      nn::zero_grads(params);
      model.backward(batch.backward(y.data(), B, V), B);

      // update, with this step's learning rate
      if (adam) {
        adam->config().lr = lr;
        adam->step();
      } else {
        sgd->config().lr = lr;
        sgd->step();
      }
      ++step;

      const double seconds = bar.elapsed_s();
      bar.update(seen / o.batch_size,
                 {{"loss", nn::format_fixed(loss_sum / static_cast<double>(seen), 4)},
                  {"acc", nn::format_percent(static_cast<double>(correct) / static_cast<double>(seen))},
                  {"img/s", nn::format_si(static_cast<double>(seen) / std::max(seconds, 1e-9))}});
      if (step % 50 == 0) {
        log.write(nn::MetricsLog::Record()
                      .add("kind", std::string("step"))
                      .add("epoch", epoch)
                      .add("step", step)
                      .add("lr", static_cast<double>(lr))
                      .add("loss", static_cast<double>(loss)));
      }
    }
    const double epoch_seconds = bar.elapsed_s();
    train_seconds += epoch_seconds;
    const double train_loss = loss_sum / static_cast<double>(seen);
    const double train_acc = static_cast<double>(correct) / static_cast<double>(seen);
    // The last update of the epoch came after the last loss check: the weights themselves
    // must be finite before they are evaluated or saved over the previous epoch's.
    nn::check_params_finite(params, "the weights after epoch " + std::to_string(epoch) +
                                        " (not saved: the learning rate " + std::to_string(lr) +
                                        " is probably too high; the last good checkpoint, if any, is kept at " +
                                        ckpt_path + ")");
    test_result = evaluate(model, test, eval_batch);
    bar.finish({{"loss", nn::format_fixed(train_loss, 4)},
                {"acc", nn::format_percent(train_acc)},
                {"test loss", nn::format_fixed(test_result.loss, 4)},
                {"test acc", nn::format_percent(test_result.accuracy)},
                {"img/s", nn::format_si(static_cast<double>(seen) / epoch_seconds)}});
    log.write(nn::MetricsLog::Record()
                  .add("kind", std::string("epoch"))
                  .add("epoch", epoch)
                  .add("step", step)
                  .add("lr", static_cast<double>(lr))
                  .add("train_loss", train_loss)
                  .add("train_acc", train_acc)
                  .add("test_loss", test_result.loss)
                  .add("test_acc", test_result.accuracy)
                  .add("images_per_s", static_cast<double>(seen) / epoch_seconds)
                  .add("elapsed_s", train_seconds));

    // Checkpoint after every epoch: written to a temporary file, then renamed, so an
    // interrupted run keeps the previous epoch's weights.
    nn::save_params(ckpt_path, params,
                    {{"model", "mlp"},
                     {"sizes", join_sizes(cfg.sizes)},
                     {"activation", o.activation},
                     {"dataset", o.dataset},
                     {"epoch", std::to_string(epoch)},
                     {"pixel_mean", std::to_string(stats.mean)},
                     {"pixel_std", std::to_string(stats.std)},
                     {"test_accuracy", std::to_string(test_result.accuracy)}});
  }

  // Predictions for the notebook: which test images the model gets wrong, and how sure it was.
  std::ofstream pred_file(pred_path);
  NN_CHECK(pred_file.is_open(), "cannot write " << pred_path);
  pred_file << "index,label,prediction,confidence\n";
  for (int64_t i = 0; i < test.size(); ++i) {
    pred_file << i << "," << test.labels[static_cast<size_t>(i)] << ","
              << test_result.predictions[static_cast<size_t>(i)] << ","
              << test_result.confidence[static_cast<size_t>(i)] << "\n";
  }

  std::cout << "result    test accuracy " << nn::format_percent(test_result.accuracy) << " (" << test.size()
            << " images), test loss " << nn::format_fixed(test_result.loss, 4) << ", trained in "
            << nn::format_duration(train_seconds) << " ("
            << nn::format_si(static_cast<double>(train.size()) * o.epochs / train_seconds)
            << " img/s)\n";
  return 0;
}

}  // namespace lesson02
