// Lesson 02, part 3 end to end on a small dataset the test makes: 10 classes of 12x12
// images, each class a bright bar at its own place plus noise. The real program runs
// (data loading, training, evaluation, log, checkpoint, predictions) in well under a second.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>

#include "lessons/02-backprop/backprop.h"
#include "nn/checkpoint.h"
#include "nn/dataset.h"
#include "io/idx.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

// Class c: a 2-pixel-wide bar, horizontal for c < 5 at row 2c+1, vertical for c >= 5 at
// column 2(c-5)+1, on a noisy background.
void make_split(const fs::path& dir, const std::string& prefix, int n, uint64_t seed, int R = 12, int C = 12) {
  nn::Rng rng(seed);
  std::vector<uint8_t> images(static_cast<size_t>(n) * R * C), labels(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(rng.below(10));
    labels[static_cast<size_t>(i)] = static_cast<uint8_t>(label);
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) {
        const bool on = label < 5 ? (r / 2 == label) : (c / 2 == label - 5);
        const float v = (on ? 200.0f : 30.0f) + rng.normal(0.0f, 25.0f);
        images[(static_cast<size_t>(i) * R + r) * C + c] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
      }
    }
  }
  nn::write_idx((dir / (prefix + "-images-idx3-ubyte")).string(), {n, R, C}, images);
  nn::write_idx((dir / (prefix + "-labels-idx1-ubyte")).string(), {n}, labels);
}

struct Fixture {
  // A directory of its own per test (removed at the end): ctest runs tests in parallel, and
  // a shared fixed path let one test's files vanish under another.
  testing::TempDir root{"lesson02-train"};
  fs::path data = root.path / "data";
  fs::path out = root.path / "out";
  Fixture() {
    fs::create_directories(data);
    make_split(data, "train", 1000, 1);
    make_split(data, "t10k", 300, 2);
  }

  lesson02::Options options() const {
    lesson02::Options o;
    o.part = "train";
    o.data_dir = data.string();
    o.out_dir = out.string();
    o.hidden = {32};
    o.epochs = 3;
    o.batch_size = 50;
    o.threads = 1;
    return o;
  }
};

// Runs part 3 with its output captured into `printed` (also when it throws).
int run_quietly(const lesson02::Options& o, std::string& printed) {
  testing::CaptureCout capture;
  struct SaveOnExit {
    testing::CaptureCout& capture;
    std::string& printed;
    ~SaveOnExit() { printed = capture.text(); }
  } save{capture, printed};
  return lesson02::run_train_part(o);
}

}  // namespace

TEST_CASE("lesson 02 training learns, logs, checkpoints and predicts", "[lesson02][train]") {
  Fixture f;
  std::string printed;
  REQUIRE(run_quietly(f.options(), printed) == 0);
  INFO(printed);
  REQUIRE_THAT(printed, Catch::Contains("epoch  3/3"));
  REQUIRE_THAT(printed, Catch::Contains("test accuracy"));

  // the log: one epoch record per epoch, the last one accurate
  std::ifstream log(f.out / "log.jsonl");
  std::string line, last_epoch;
  int epoch_records = 0;
  while (std::getline(log, line)) {
    if (line.find("\"kind\": \"epoch\"") != std::string::npos) {
      ++epoch_records;
      last_epoch = line;
    }
  }
  REQUIRE(epoch_records == 3);
  const auto pos = last_epoch.find("\"test_acc\": ");
  REQUIRE(pos != std::string::npos);
  const double test_acc = std::stod(last_epoch.substr(pos + 12));
  CAPTURE(last_epoch);
  REQUIRE(test_acc > 0.95);  // the bars are easy to tell apart; a broken backward stays near 0.1

  // the checkpoint: every layer with its shape, and the metadata
  const nn::Checkpoint ck = nn::load_safetensors((f.out / "mlp.safetensors").string());
  REQUIRE(ck.tensors.at("fc1.weight").shape() == nn::Shape{32, 144});
  REQUIRE(ck.tensors.at("fc2.weight").shape() == nn::Shape{10, 32});
  REQUIRE(ck.tensors.at("fc2.bias").shape() == nn::Shape{10});
  REQUIRE(ck.metadata.at("epoch") == "3");
  REQUIRE(ck.metadata.at("sizes") == "144-32-10");

  // predictions: a header and one row per test image
  std::ifstream pred(f.out / "predictions.csv");
  int rows = 0;
  std::getline(pred, line);
  REQUIRE(line == "index,label,prediction,confidence");
  while (std::getline(pred, line)) ++rows;
  REQUIRE(rows == 300);
}

TEST_CASE("lesson 02 training is reproducible from its seed", "[lesson02][train]") {
  Fixture f;
  auto opts = f.options();
  opts.epochs = 1;
  std::string printed;
  auto read_weights = [&] {
    const nn::Checkpoint ck = nn::load_safetensors((f.out / "mlp.safetensors").string());
    const nn::Tensor& w = ck.tensors.at("fc1.weight");
    return std::vector<float>(w.data(), w.data() + w.numel());
  };
  REQUIRE(run_quietly(opts, printed) == 0);
  const auto first = read_weights();
  REQUIRE(run_quietly(opts, printed) == 0);
  REQUIRE(read_weights() == first);  // bit for bit
  opts.seed += 1;
  REQUIRE(run_quietly(opts, printed) == 0);
  REQUIRE(read_weights() != first);
}

TEST_CASE("a diverging run stops with a clear message and keeps the last good checkpoint",
          "[lesson02][train]") {
  Fixture f;
  auto opts = f.options();
  opts.epochs = 1;
  std::string printed;
  REQUIRE(run_quietly(opts, printed) == 0);  // a good checkpoint exists
  const auto good = nn::load_safetensors((f.out / "mlp.safetensors").string());

  opts.epochs = 2;
  opts.optimizer = "sgd";
  opts.momentum = 0.0f;
  opts.lr = 1e4f;  // absurd: the weights explode to inf and the loss to NaN
  opts.lr_min_frac = 1.0f;
  REQUIRE_THROWS_WITH(run_quietly(opts, printed), Catch::Contains("the loss became") &&
                                                      Catch::Contains("--lr"));
  // the previous run's checkpoint is untouched
  const auto after = nn::load_safetensors((f.out / "mlp.safetensors").string());
  REQUIRE(after.metadata == good.metadata);
}

// Test images of another size than the training images: the model is sized from the
// training set, so evaluating it on 1x1 images read far past their buffer (SIGSEGV) and
// smaller mismatches mixed neighbouring images into garbage losses. Now the two splits
// are compared before anything is built.
TEST_CASE("lesson 02 refuses test images of another size than the training images", "[lesson02][train]") {
  Fixture f;
  auto opts = f.options();
  opts.epochs = 1;
  for (const auto& [R, C] : {std::pair{1, 1}, std::pair{12, 11}, std::pair{16, 16}}) {
    make_split(f.data, "t10k", 300, 2, R, C);
    std::string printed;
    const std::string error = testing::error_of([&] { run_quietly(opts, printed); });
    INFO(R << "x" << C << ": " << printed);
    REQUIRE_THAT(error, Catch::Contains("the test images") &&
                            Catch::Contains(std::to_string(R) + "x" + std::to_string(C) + " pixels") &&
                            Catch::Contains("training images") && Catch::Contains("12x12") &&
                            Catch::Contains((f.data / "t10k-images-idx3-ubyte").string()));
    REQUIRE_FALSE(fs::exists(f.out / "mlp.safetensors"));  // refused before training, nothing written
  }
}

// The input layer is sized from the images: 4096x4096 images make an MLP of 537M parameters
// (8.6 GB with gradients and Adam's state), an allocation that ends in the kernel killing the
// process. It is refused, with the image size and the file, before anything is allocated.
TEST_CASE("lesson 02 refuses images that would make a model too large to hold", "[lesson02][train]") {
  Fixture f;
  const int n = 2, R = 4096, C = 4096;
  const std::vector<uint8_t> images(static_cast<size_t>(n) * R * C, 100), labels = {1, 2};
  for (const char* prefix : {"train", "t10k"}) {
    nn::write_idx((f.data / (std::string(prefix) + "-images-idx3-ubyte")).string(), {n, R, C}, images);
    nn::write_idx((f.data / (std::string(prefix) + "-labels-idx1-ubyte")).string(), {n}, labels);
  }
  std::string printed;
  REQUIRE_THAT(testing::error_of([&] { run_quietly(f.options(), printed); }),
               Catch::Contains("4096x4096 images") && Catch::Contains("GiB") && Catch::Contains("28x28") &&
                   Catch::Contains((f.data / "train-images-idx3-ubyte").string()));
}

// The loss is checked before each update, so the LAST update of an epoch could turn the
// weights into NaN unseen: the epoch's evaluation then printed an accuracy computed from
// NaN logits and the NaN weights were saved over the last good checkpoint. (A NaN learning
// rate cannot come from the command line any more, FiniteRange refuses it; a program that
// calls the part directly can still pass one, and so can an optimizer that blows up.)
TEST_CASE("lesson 02 never saves non-finite weights over the last good checkpoint", "[lesson02][train]") {
  Fixture f;
  auto opts = f.options();
  opts.epochs = 1;
  std::string printed;
  REQUIRE(run_quietly(opts, printed) == 0);
  const auto good = nn::load_safetensors((f.out / "mlp.safetensors").string());

  opts.batch_size = 1000;  // the whole training set: one step per epoch, no loss after the update
  opts.lr = std::numeric_limits<float>::quiet_NaN();
  const std::string error = testing::error_of([&] { run_quietly(opts, printed); });
  INFO(printed);
  REQUIRE_THAT(error, Catch::Contains("the weights after epoch 1") && Catch::Contains("nan") &&
                          Catch::Contains("fc1.weight") && Catch::Contains("last good checkpoint") &&
                          Catch::Contains((f.out / "mlp.safetensors").string()));
  const auto after = nn::load_safetensors((f.out / "mlp.safetensors").string());
  REQUIRE(after.metadata == good.metadata);
  const nn::Tensor& w0 = good.tensors.at("fc1.weight");
  const nn::Tensor& w1 = after.tensors.at("fc1.weight");
  REQUIRE(std::equal(w0.data(), w0.data() + w0.numel(), w1.data()));
  REQUIRE_THAT(printed, !Catch::Contains("test acc"));  // no accuracy computed from NaN
}

// The real thing, briefly: one epoch on the full Fashion-MNIST from Debian's package
// (or wherever find_dataset_dir finds it). Tagged [slow]: ~10-20 s on 2 cores.
TEST_CASE("lesson 02 learns real Fashion-MNIST in one epoch", "[lesson02][train][slow]") {
  std::string dir;
  try {
    dir = nn::find_dataset_dir("fashion-mnist");
  } catch (const nn::Error& e) {
    WARN("SKIPPED: Fashion-MNIST not installed (" << e.what() << ")");
    return;
  }
  const fs::path out = fs::temp_directory_path() / "nnlab-test-lesson02-real";
  lesson02::Options o;
  o.part = "train";
  o.data_dir = dir;
  o.out_dir = out.string();
  o.epochs = 1;
  std::string printed;
  REQUIRE(run_quietly(o, printed) == 0);
  INFO(printed);
  const nn::Checkpoint ck = nn::load_safetensors((out / "mlp.safetensors").string());
  const double acc = std::stod(ck.metadata.at("test_accuracy"));
  REQUIRE(acc > 0.84);  // one epoch of the default run; a broken backward stays near 0.10
  fs::remove_all(out);
}
