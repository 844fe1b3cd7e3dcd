// Lesson 04, part 3: the CNN of model.h trained on Fashion-MNIST; part 4: evaluating a
// saved checkpoint. The loop is lesson 02's (lessons/02-backprop/train.cpp), with a
// convolutional model, dropout and optional augmentation:
//   x (B,1,28,28) -> Cnn::forward -> logits (B,10) -> softmax cross-entropy -> loss
//   dlogits = (probs - onehot) / B -> Cnn::backward -> Adam step (cosine-decayed lr)
// After the last epoch: test-set evaluation, per-class accuracy, confusion matrix, and one
// test image's feature maps, written to --out-dir for notebooks/04-cnn.ipynb.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "lessons/04-cnn/cnn.h"
#include "lessons/04-cnn/model.h"
#include "kernels/clock.h"
#include "nn/check.h"
#include "nn/checkpoint.h"
#include "nn/classify.h"
#include "nn/dataset.h"
#include "nn/numbers.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "io/progress.h"

namespace lesson04 {

namespace {

// ---- data -------------------------------------------------------------------------------
// Pixels are standardised with the training set's mean and spread (nn::pixel_stats, as in
// lesson 02).

// Augmentation, training batches only: each image moved by (dy, dx) in [-shift, shift]
// and/or mirrored left-right, the uncovered border filled with the background value. A
// shirt moved two pixels is still a shirt: the model sees more variety than 60000 images.
void augment(float* x, int B, int H, int W, int shift, bool flip, float background, nn::Rng& rng) {
  std::vector<float> src(static_cast<size_t>(H) * W);
  for (int b = 0; b < B; ++b) {
    float* img = x + static_cast<std::ptrdiff_t>(b) * H * W;
    const int dy = shift > 0 ? static_cast<int>(rng.below(static_cast<uint32_t>(2 * shift + 1))) - shift : 0;
    const int dx = shift > 0 ? static_cast<int>(rng.below(static_cast<uint32_t>(2 * shift + 1))) - shift : 0;
    const bool mirror = flip && rng.below(2) == 1;
    if (dy == 0 && dx == 0 && !mirror) continue;
    std::copy(img, img + H * W, src.begin());
    for (int h = 0; h < H; ++h) {
      for (int w = 0; w < W; ++w) {
        const int sh = h - dy;
        const int sw0 = w - dx;
        const int sw = mirror ? W - 1 - sw0 : sw0;
        const bool inside = sh >= 0 && sh < H && sw >= 0 && sw < W;
        img[h * W + w] = inside ? src[static_cast<size_t>(sh * W + sw)] : background;
      }
    }
  }
}

// ---- evaluation -------------------------------------------------------------------------
// The whole test set in order, in eval mode (nn/classify.h): loss, accuracy, predictions.
constexpr int kEvalBatch = 250;

nn::EvalResult evaluate(Cnn& model, const nn::ImageDataset& ds) {
  return nn::evaluate_classifier([&](const float* x, int B) { return model.forward(x, B, /*train=*/false); }, ds,
                                 kEvalBatch);
}



// A float written with every digit it needs to be read back bit for bit.
std::string exact(float v) {
  std::ostringstream os;
  os << std::setprecision(9) << v;
  return os.str();
}

CnnConfig config_from(const Options& o, const nn::ImageDataset& ds) {
  CnnConfig cfg;
  cfg.in_channels = 1;
  cfg.height = ds.rows;
  cfg.width = ds.cols;
  cfg.channels = o.channels;
  cfg.hidden = o.hidden;
  cfg.classes = ds.num_classes;
  cfg.dropout = o.dropout;
  return cfg;
}

// The files the notebook reads: predictions, per-class accuracy, confusion matrix, and the
// feature maps of one test image (index 0).
void write_evaluation(Cnn& model, const nn::ImageDataset& test, const nn::EvalResult& r,
                      const std::string& out_dir, const std::string& dataset) {
  const int V = test.num_classes;
  std::vector<int64_t> confusion(static_cast<size_t>(V) * V, 0);
  for (int64_t i = 0; i < test.size(); ++i) {
    const auto t = static_cast<size_t>(test.labels[static_cast<size_t>(i)]);
    const auto p = static_cast<size_t>(r.predictions[static_cast<size_t>(i)]);
    ++confusion[t * static_cast<size_t>(V) + p];
  }
  const std::vector<std::string>& names = nn::fashion_mnist_classes();
  auto class_name = [&](int c) {
    return dataset == "fashion-mnist" && c < static_cast<int>(names.size()) ? names[static_cast<size_t>(c)]
                                                                            : std::to_string(c);
  };

  const std::string pred_path = out_dir + "/predictions.csv";
  std::ofstream pred(pred_path);
  NN_CHECK(pred.is_open(), "cannot write " << pred_path);
  pred << "index,label,prediction,confidence\n";
  for (int64_t i = 0; i < test.size(); ++i) {
    const auto k = static_cast<size_t>(i);
    pred << i << "," << test.labels[k] << "," << r.predictions[k] << "," << r.confidence[k] << "\n";
  }

  // confusion.csv: row = true class, column = predicted class, counts.
  const std::string conf_path = out_dir + "/confusion.csv";
  std::ofstream conf(conf_path);
  NN_CHECK(conf.is_open(), "cannot write " << conf_path);
  conf << "true\\predicted";
  for (int c = 0; c < V; ++c) conf << "," << c;
  conf << "\n";
  for (int t = 0; t < V; ++t) {
    conf << t;
    for (int p = 0; p < V; ++p) conf << "," << confusion[static_cast<size_t>(t * V + p)];
    conf << "\n";
  }

  const std::string class_path = out_dir + "/per_class.csv";
  std::ofstream per_class(class_path);
  NN_CHECK(per_class.is_open(), "cannot write " << class_path);
  per_class << "class,name,correct,total,accuracy\n";
  std::cout << "per class ";
  for (int t = 0; t < V; ++t) {
    int64_t total = 0;
    for (int p = 0; p < V; ++p) total += confusion[static_cast<size_t>(t * V + p)];
    const int64_t correct = confusion[static_cast<size_t>(t * V + t)];
    const double acc = total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
    per_class << t << "," << class_name(t) << "," << correct << "," << total << "," << acc << "\n";
    std::cout << class_name(t) << " " << nn::format_percent(acc) << (t + 1 < V ? ", " : "\n");
  }

  // Feature maps of test image 0: what each conv block's filters respond to (after ReLU).
  const float* image = test.images.data();
  const float* logits = model.forward(image, 1, /*train=*/false);
  int32_t predicted = 0;
  nn::argmax_rows(&predicted, logits, 1, V);
  std::vector<nn::TensorRef> refs;
  refs.push_back({"image", {1, test.rows, test.cols}, image});
  for (const ConvBlock& k : model.blocks()) {
    refs.push_back({k.conv.name + ".act", {k.conv.out_channels, k.in_h, k.in_w}, k.act.data()});
    refs.push_back({k.conv.name + ".pool", {k.conv.out_channels, k.in_h / 2, k.in_w / 2}, k.pool.data()});
  }
  nn::save_safetensors(out_dir + "/features.safetensors", refs,
                       {{"index", "0"},
                        {"label", std::to_string(test.labels[0])},
                        {"prediction", std::to_string(predicted)}});
  std::cout << "wrote     " << pred_path << ", " << conf_path << ", " << class_path << ", "
            << out_dir << "/features.safetensors\n";
}

struct Data {
  std::string dir;
  nn::ImageDataset train, test;
  nn::PixelStats stats;
};

Data load_data(const Options& o) {
  Data d;
  d.dir = nn::find_dataset_dir(o.dataset, o.data_dir);
  // Both splits, checked against each other: the same image size and classes.
  nn::TrainTest both = nn::load_mnist_train_test(d.dir);
  d.train = std::move(both.train);
  d.test = std::move(both.test);
  nn::truncate_dataset(d.train, o.limit_train);
  nn::truncate_dataset(d.test, o.limit_test);
  d.stats = nn::pixel_stats(d.train);
  nn::standardise(d.train, d.stats);
  nn::standardise(d.test, d.stats);
  std::cout << "data      " << d.dir << ": " << d.train.size() << " train, " << d.test.size()
            << " test images of " << d.train.rows << "x" << d.train.cols << " (pixel mean "
            << nn::format_fixed(d.stats.mean, 4) << ", std " << nn::format_fixed(d.stats.std, 4) << ")\n";
  return d;
}

// The model is sized from the images (a file) and the flags: one that needs more memory than
// a student's machine can be expected to have is refused before anything is allocated (an
// allocation of tens of GB ends in the kernel killing the process, not in a message).
constexpr double kMaxModelBytes = 4.0 * 1024 * 1024 * 1024;

void check_model_size(const CnnConfig& cfg, int batch, const std::string& images) {
  const double bytes = cnn_training_bytes(cfg, batch);
  NN_CHECK(bytes <= kMaxModelBytes,
           "a CNN for the " << cfg.height << "x" << cfg.width << " images of " << images << " with --channels "
                            << join_ints(cfg.channels) << ", --hidden " << cfg.hidden << " and batches of " << batch
                            << " would hold about " << std::fixed << std::setprecision(1) << bytes / (1024.0 * 1024 * 1024)
                            << " GiB (weights, gradients, Adam's state, activations), more than the 4 GiB this lesson "
                               "builds. It is made for 28x28 images: check the dataset, or use fewer --channels, a "
                               "smaller --hidden or --batch-size");
}

std::string describe(const CnnConfig& cfg, int flat) {
  std::ostringstream os;
  os << "CNN " << cfg.in_channels << "x" << cfg.height << "x" << cfg.width;
  for (int c : cfg.channels) os << " -> [conv3x3 " << c << ", relu, maxpool2]";
  os << " -> flatten " << flat << " -> fc " << cfg.hidden << ", relu";
  if (cfg.dropout > 0.0f) os << ", dropout " << cfg.dropout;
  os << " -> fc " << cfg.classes;
  return os.str();
}

// What part eval takes from a checkpoint's metadata, each value checked: the pixel
// statistics (finite, std > 0), the epoch, and that the model, widths and dataset it names
// are the ones the flags describe. A key this lesson writes but the file lacks is fine (an
// older checkpoint); a value that does not parse or does not fit is an nn::Error naming
// the file and the key.
struct CheckpointFacts {
  bool has_stats = false;
  nn::PixelStats stats;
  long long epoch = 0;  // 0: not recorded
};

CheckpointFacts checkpoint_facts(const std::map<std::string, std::string>& meta, const std::string& path,
                                 const Options& o, const CnnConfig& cfg) {
  auto key = [&](const std::string& k) { return "checkpoint " + path + " metadata '" + k + "'"; };
  auto has = [&](const std::string& k) { return meta.count(k) == 1; };
  CheckpointFacts f;
  if (has("model")) {
    NN_CHECK(meta.at("model") == "cnn", key("model") << " is '" << meta.at("model")
                                                     << "', not 'cnn': it is not a lesson-04 CNN (a lesson-02 MLP?)");
  }
  if (has("channels")) {
    NN_CHECK(meta.at("channels") == join_ints(cfg.channels),
             key("channels") << " is '" << meta.at("channels") << "' but the flags say --channels "
                             << join_ints(cfg.channels) << ": pass the widths it was trained with");
  }
  if (has("hidden")) {
    NN_CHECK(nn::parse_int(meta.at("hidden"), key("hidden"), 1, 65536) == cfg.hidden,
             key("hidden") << " is " << meta.at("hidden") << " but the flags say --hidden " << cfg.hidden
                           << ": pass the width it was trained with");
  }
  if (has("dataset")) {
    NN_CHECK(meta.at("dataset") == o.dataset, key("dataset") << " is '" << meta.at("dataset") << "' but --dataset is "
                                                             << o.dataset << ": evaluate it on the data it learned");
  }
  if (has("epoch")) f.epoch = nn::parse_int(meta.at("epoch"), key("epoch"), 1, 1000000);
  if (has("test_accuracy")) nn::parse_finite(meta.at("test_accuracy"), key("test_accuracy"), 0.0, 1.0);
  NN_CHECK(has("pixel_mean") == has("pixel_std"),
           "checkpoint " << path << " has only one of 'pixel_mean' and 'pixel_std' in its metadata: both or neither");
  if (has("pixel_mean")) {
    // Standardised pixels are (p - mean) / std with p in [0, 1]: the mean lies in [0, 1],
    // and a std of 0 (or less) would divide by nothing.
    f.stats.mean = static_cast<float>(nn::parse_finite(meta.at("pixel_mean"), key("pixel_mean"), 0.0, 1.0));
    f.stats.std = static_cast<float>(nn::parse_finite(meta.at("pixel_std"), key("pixel_std"), 1e-6, 1.0));
    f.has_stats = true;
  }
  return f;
}

}  // namespace

// ---- the training run -----------------------------------------------------------------------
int run_train_part(const Options& o) {
  std::cout << "== Part 3: a CNN trained on " << o.dataset << " ==\n";
  if (o.threads > 0) omp_set_num_threads(o.threads);
  Data data = load_data(o);
  nn::ImageDataset& train = data.train;
  nn::ImageDataset& test = data.test;

  const CnnConfig cfg = config_from(o, train);
  // the largest batch the loaders will hand the model: no more than a split holds
  check_model_size(cfg,
                   static_cast<int>(std::max(std::min<int64_t>(o.batch_size, train.size()),
                                             std::min<int64_t>(kEvalBatch, test.size()))),
                   train.images_path);
  nn::Rng rng(o.seed);
  Cnn model(cfg, rng, /*dropout_seed=*/o.seed + 1);
  std::vector<nn::Param> params = model.params();
  std::cout << "model     " << describe(cfg, model.flat_features()) << ": " << model.num_params()
            << " parameters\n";
  nn::Adam adam(params, nn::AdamConfig{o.lr, 0.9f, 0.999f, 1e-8f, o.weight_decay});
  std::cout << "optimizer adam, lr " << o.lr << " cosine-decayed to " << o.lr * o.lr_min_frac
            << ", batch " << o.batch_size << ", " << o.epochs << " epochs, augmentation: shift "
            << o.shift << (o.flip ? ", flip" : "") << ", seed " << o.seed << ", "
            << omp_get_max_threads() << " threads\n";

  std::filesystem::create_directories(o.out_dir);
  const std::string log_path = o.out_dir + "/log.jsonl";
  const std::string ckpt_path = o.out_dir + "/cnn.safetensors";
  nn::MetricsLog log(log_path);
  NN_CHECK(log.enabled(), "cannot write " << log_path);
  std::cout << "writing   " << log_path << ", " << ckpt_path << "\n";

  nn::BatchLoader loader(train, o.batch_size, /*shuffle=*/true, o.seed);
  nn::Rng augment_rng(o.seed + 2);
  const float background = (0.0f - data.stats.mean) / data.stats.std;  // a black pixel, standardised
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
    int64_t seen = 0, correct = 0;
    float lr = o.lr;
    for (int B = loader.next(x, y); B > 0; B = loader.next(x, y)) {
      // lr(t) = lr_min + (lr - lr_min) (1 + cos(pi t / T)) / 2, as lesson 02
      lr = nn::cosine_lr(o.lr, o.lr_min_frac,
                         static_cast<double>(step) / static_cast<double>(std::max<int64_t>(total_steps, 1)));
      if (o.shift > 0 || o.flip) augment(x.data(), B, train.rows, train.cols, o.shift, o.flip, background, augment_rng);

      // forward: logits (B,V), then the loss
      const float* logits = model.forward(x.data(), B, /*train=*/true);
      const float loss = batch.forward(logits, y.data(), B, V);
      NN_CHECK(std::isfinite(loss), "the loss became " << loss << " at epoch " << epoch << ", step "
                                        << step << ": the learning rate " << lr
                                        << " is probably too high (try --lr " << o.lr / 10
                                        << "). The last good checkpoint, if any, is kept at "
                                        << ckpt_path);
      correct += batch.correct(y.data(), B);
      loss_sum += static_cast<double>(loss) * B;
      seen += B;

      // backward (gradients accumulate into zeroed buffers), then the update
      nn::zero_grads(params);
      model.backward(batch.backward(y.data(), B, V), B);
      adam.config().lr = lr;
      adam.step();
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
    test_result = evaluate(model, test);
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
                  .add("epoch_s", epoch_seconds)
                  .add("elapsed_s", train_seconds));

    // Checkpoint after every epoch (atomic: temp file + rename).
    nn::save_params(ckpt_path, params,
                    {{"model", "cnn"},
                     {"channels", join_ints(cfg.channels)},
                     {"hidden", std::to_string(cfg.hidden)},
                     {"dataset", o.dataset},
                     {"epoch", std::to_string(epoch)},
                     {"pixel_mean", exact(data.stats.mean)},
                     {"pixel_std", exact(data.stats.std)},
                     {"test_accuracy", std::to_string(test_result.accuracy)}});
  }

  write_evaluation(model, test, test_result, o.out_dir, o.dataset);
  std::cout << "result    test accuracy " << nn::format_percent(test_result.accuracy) << " (" << test.size()
            << " images), test loss " << nn::format_fixed(test_result.loss, 4) << ", trained in "
            << nn::format_duration(train_seconds) << " ("
            << nn::format_si(static_cast<double>(train.size()) * o.epochs / train_seconds)
            << " img/s)\n";
  return 0;
}

// ---- evaluating a checkpoint ---------------------------------------------------------------------
int run_eval_part(const Options& o) {
  std::cout << "== Part 4: evaluate a saved CNN on the " << o.dataset << " test set ==\n";
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const std::string path = o.checkpoint.empty() ? o.out_dir + "/cnn.safetensors" : o.checkpoint;
  // The model is built from the flags (--channels, --hidden), then the checkpoint must fit
  // it exactly: same tensor names, same shapes, nothing extra. A lesson-02 MLP checkpoint,
  // or a CNN with other widths, stops here with a message naming the difference.
  Data data = load_data(o);
  const CnnConfig cfg = config_from(o, data.train);
  check_model_size(cfg, static_cast<int>(std::min<int64_t>(kEvalBatch, data.test.size())), data.train.images_path);
  nn::Rng rng(o.seed);
  Cnn model(cfg, rng, o.seed + 1);
  const std::map<std::string, std::string> meta = nn::load_params(path, model.params());
  // A checkpoint is input like any other: its weights must be finite and every metadata
  // value this part uses must parse and make sense, each refusal naming the file and key.
  nn::check_params_finite(model.params(), "checkpoint " + path);
  const CheckpointFacts facts = checkpoint_facts(meta, path, o, cfg);
  std::cout << "model     " << describe(cfg, model.flat_features()) << ", loaded from " << path;
  if (facts.epoch > 0) std::cout << " (epoch " << facts.epoch << ")";
  std::cout << "\n";
  // The checkpoint's own pixel statistics, when it has them: the model was trained on
  // inputs standardised with those, and --limit-train may have changed ours.
  if (facts.has_stats) {
    for (float& p : data.test.images.span()) {
      p = ((p * data.stats.std + data.stats.mean) - facts.stats.mean) / facts.stats.std;
    }
  }
  std::filesystem::create_directories(o.out_dir);
  const nn::EvalResult r = evaluate(model, data.test);
  write_evaluation(model, data.test, r, o.out_dir, o.dataset);
  std::cout << "result    test accuracy " << nn::format_percent(r.accuracy) << " (" << data.test.size()
            << " images), test loss " << nn::format_fixed(r.loss, 4) << "\n";
  return 0;
}


// ---- part "speed": training and inference throughput, for the side-by-side with PyTorch ------
// The same model, batch, Adam and data as part train, without the bookkeeping: `--speed-steps`
// training steps over real shuffled batches (after 5 warm-up steps) per round, then
// `--speed-steps` forward passes of the first 250 test images in eval mode (the evaluation
// batch), `--repeats` rounds, the median printed. scripts/cnn_torch.py bench times its
// PyTorch twin the same way and prints the same line format; scripts/bench_lesson04.sh
// alternates the two.
int run_speed_part(const Options& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  Data data = load_data(o);
  const CnnConfig cfg = config_from(o, data.train);
  check_model_size(cfg, std::max(o.batch_size, kEvalBatch), data.train.images_path);
  nn::Rng rng(o.seed);
  Cnn model(cfg, rng, o.seed + 1);
  std::vector<nn::Param> params = model.params();
  nn::Adam adam(params, nn::AdamConfig{o.lr, 0.9f, 0.999f, 1e-8f, o.weight_decay});
  nn::BatchLoader loader(data.train, o.batch_size, /*shuffle=*/true, o.seed);
  kernels::warn_if_busy(std::cout);
  loader.start_epoch();
  nn::Tensor x;
  std::vector<int32_t> y;
  nn::ClassifyBatch batch;
  const int V = data.train.num_classes;
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  auto train_step = [&] {
    int B = loader.next(x, y);
    if (B != o.batch_size) {  // end of the epoch (or a short last batch): start another
      loader.start_epoch();
      B = loader.next(x, y);
    }
    const float* logits = model.forward(x.data(), B, /*train=*/true);
    const float loss = batch.forward(logits, y.data(), B, V);
    NN_CHECK(std::isfinite(loss), "speed: the loss became " << loss);
    nn::zero_grads(params);
    model.backward(batch.backward(y.data(), B, V), B);
    adam.step();
    return B;
  };
  const int eval_B = static_cast<int>(std::min<int64_t>(kEvalBatch, data.test.size()));
  const float* eval_x = data.test.images.data();
  for (int i = 0; i < 5; ++i) train_step();
  model.forward(eval_x, eval_B, /*train=*/false);
  std::vector<double> train_ips, infer_ips;
  for (int r = 0; r < o.repeats; ++r) {
    double t0 = now();
    int64_t images = 0;
    for (int i = 0; i < o.speed_steps; ++i) images += train_step();
    train_ips.push_back(static_cast<double>(images) / (now() - t0));
    t0 = now();
    for (int i = 0; i < o.speed_steps; ++i) model.forward(eval_x, eval_B, /*train=*/false);
    infer_ips.push_back(static_cast<double>(eval_B) * o.speed_steps / (now() - t0));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::cout << std::fixed << std::setprecision(0) << "speed     nnlab threads " << omp_get_max_threads()
            << " train_img_s " << median(train_ips) << " infer_img_s " << median(infer_ips) << " (batch "
            << o.batch_size << " / " << eval_B << ", median of " << o.repeats << " x " << o.speed_steps
            << " steps)\n";
  std::cout.unsetf(std::ios::floatfield);
  return 0;
}


// ---- part "grads": one forward + backward on a checkpoint, for the PyTorch parity test ----------
// The first --batch-size training images, standardised with the checkpoint's pixel statistics,
// in eval mode (no dropout: the same function on both sides), loss = mean cross-entropy.
// Writes <out-dir>/grads.txt ("loss X", then "name count" per parameter) and grads.bin (the
// gradients, float32, in that order): tests/python/test_cnn_torch.py compares them with
// scripts/cnn_torch.py grads on the same checkpoint.
int run_grads_part(const Options& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const std::string path = o.checkpoint.empty() ? o.out_dir + "/cnn.safetensors" : o.checkpoint;
  Data data = load_data(o);
  const CnnConfig cfg = config_from(o, data.train);
  const int B = static_cast<int>(std::min<int64_t>(o.batch_size, data.train.size()));
  check_model_size(cfg, B, data.train.images_path);
  nn::Rng rng(o.seed);
  Cnn model(cfg, rng, o.seed + 1);
  std::vector<nn::Param> params = model.params();
  const std::map<std::string, std::string> meta = nn::load_params(path, params);
  nn::check_params_finite(params, "checkpoint " + path);
  const CheckpointFacts facts = checkpoint_facts(meta, path, o, cfg);
  const int64_t pixels = static_cast<int64_t>(B) * data.train.rows * data.train.cols;
  std::vector<float> x(data.train.images.data(), data.train.images.data() + pixels);
  if (facts.has_stats) {
    for (float& p : x) p = ((p * data.stats.std + data.stats.mean) - facts.stats.mean) / facts.stats.std;
  }
  nn::ClassifyBatch batch;
  const float* logits = model.forward(x.data(), B, /*train=*/false);
  const float loss = batch.forward(logits, data.train.labels.data(), B, data.train.num_classes);
  nn::zero_grads(params);
  model.backward(batch.backward(data.train.labels.data(), B, data.train.num_classes), B);
  std::filesystem::create_directories(o.out_dir);
  std::ofstream txt(o.out_dir + "/grads.txt");
  std::ofstream bin(o.out_dir + "/grads.bin", std::ios::binary);
  NN_CHECK(txt.is_open() && bin.is_open(), "cannot write " << o.out_dir << "/grads.txt, grads.bin");
  txt << "loss " << exact(loss) << "\n";
  for (const nn::Param& p : params) {
    txt << p.name << " " << p.numel() << "\n";
    bin.write(reinterpret_cast<const char*>(p.grad), static_cast<std::streamsize>(p.numel() * sizeof(float)));
  }
  std::cout << "grads     loss " << exact(loss) << " on " << B << " images, written to " << o.out_dir
            << "/grads.txt, grads.bin\n";
  return 0;
}

}  // namespace lesson04
