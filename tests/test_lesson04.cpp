// Lesson 04 end to end on a small dataset the test makes (as tests/test_lesson02_train.cpp):
// 10 classes of 12x12 images, each class a bright bar at its own place plus noise. The real
// program runs: data loading, training, evaluation, log, checkpoint, confusion matrix,
// feature maps; then the checkpoint is evaluated, and a wrong one refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "lessons/04-cnn/cnn.h"
#include "lessons/04-cnn/model.h"
#include "nn/checkpoint.h"
#include "nn/dataset.h"
#include "io/idx.h"
#include "nn/rng.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

void make_split(const fs::path& dir, const std::string& prefix, int n, uint64_t seed, int R = 12, int C = 12) {
  nn::Rng rng(seed);
  std::vector<uint8_t> images(static_cast<size_t>(n) * R * C), labels(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(rng.below(10));
    labels[static_cast<size_t>(i)] = static_cast<uint8_t>(label);
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) {
        const bool on = label < 5 ? (r / 2 == label + 1 || r / 2 == label) : (c / 2 == label - 5);
        const float v = (on ? 200.0f : 30.0f) + rng.normal(0.0f, 25.0f);
        images[(static_cast<size_t>(i) * R + r) * C + c] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
      }
    }
  }
  nn::write_idx((dir / (prefix + "-images-idx3-ubyte")).string(), {n, R, C}, images);
  nn::write_idx((dir / (prefix + "-labels-idx1-ubyte")).string(), {n}, labels);
}

struct Fixture {
  testing::TempDir root{"lesson04"};
  fs::path data = root.path / "data";
  fs::path out = root.path / "out";
  Fixture() {
    fs::create_directories(data);
    make_split(data, "train", 400, 1);
    make_split(data, "t10k", 200, 2);
  }
  lesson04::Options options() const {
    lesson04::Options o;
    o.part = "train";
    o.data_dir = data.string();
    o.out_dir = out.string();
    o.channels = {4, 8};
    o.hidden = 16;
    o.epochs = 6;
    o.batch_size = 20;
    o.lr = 3e-3f;
    o.dropout = 0.0f;
    o.threads = 1;
    return o;
  }
};

// Runs a part with its output captured into `printed` (also when it throws).
int run_quietly(int (*part)(const lesson04::Options&), const lesson04::Options& o, std::string& printed) {
  testing::CaptureCout capture;
  struct SaveOnExit {
    testing::CaptureCout& capture;
    std::string& printed;
    ~SaveOnExit() { printed = capture.text(); }
  } save{capture, printed};
  return part(o);
}

std::vector<std::string> epoch_records(const fs::path& log_path) {
  std::ifstream log(log_path);
  std::vector<std::string> out;
  for (std::string line; std::getline(log, line);) {
    if (line.find("\"kind\": \"epoch\"") != std::string::npos) out.push_back(line);
  }
  return out;
}

double field(const std::string& record, const std::string& key) {
  const auto pos = record.find("\"" + key + "\": ");
  REQUIRE(pos != std::string::npos);
  return std::stod(record.substr(pos + key.size() + 4));
}

}  // namespace

TEST_CASE("lesson 04 conv part: loops and im2col agree on the hand-made image", "[lesson04]") {
  lesson04::Options o;
  o.trace = true;
  std::string printed;
  REQUIRE(run_quietly(&lesson04::run_conv_part, o, printed) == 0);
  INFO(printed);
  REQUIRE_THAT(printed, Catch::Contains("max |loops - im2col| = 0.00"));
  REQUIRE_THAT(printed, Catch::Contains("trace of out[3][2]"));
  REQUIRE_THAT(printed, Catch::Contains("argmax"));
}

TEST_CASE("lesson 04 bench part validates, times and writes bench.json", "[lesson04]") {
  testing::TempDir dir("lesson04-bench");
  lesson04::Options o;
  o.out_dir = dir.path.string();
  o.bench_batch = 2;
  o.repeats = 1;
  o.channels = {8, 16};
  std::string printed;
  REQUIRE(run_quietly(&lesson04::run_bench_part, o, printed) == 0);
  INFO(printed);
  const std::string json = testing::read_text(dir.file("bench.json"));
  REQUIRE_THAT(json, Catch::Contains("\"layer\": \"conv1\""));
  REQUIRE_THAT(json, Catch::Contains("\"layer\": \"conv2\""));
  REQUIRE_THAT(json, Catch::Contains("\"pass\": \"backward\""));
}

TEST_CASE("lesson 04 training learns, logs, checkpoints and writes the notebook's files", "[lesson04][train]") {
  Fixture f;
  std::string printed;
  REQUIRE(run_quietly(&lesson04::run_train_part, f.options(), printed) == 0);
  INFO(printed);
  REQUIRE_THAT(printed, Catch::Contains("epoch  6/6"));
  const auto epochs = epoch_records(f.out / "log.jsonl");
  REQUIRE(epochs.size() == 6);
  CAPTURE(epochs.front(), epochs.back());
  REQUIRE(field(epochs.back(), "train_loss") < 0.5 * field(epochs.front(), "train_loss"));
  REQUIRE(field(epochs.back(), "test_acc") > 0.9);  // bars are easy; a broken backward stays near 0.1

  const nn::Checkpoint ck = nn::load_safetensors((f.out / "cnn.safetensors").string());
  REQUIRE(ck.tensors.at("conv1.weight").shape() == nn::Shape{4, 1, 3, 3});
  REQUIRE(ck.tensors.at("conv2.weight").shape() == nn::Shape{8, 4, 3, 3});
  REQUIRE(ck.tensors.at("fc1.weight").shape() == nn::Shape{16, 8 * 3 * 3});  // 12 -> 6 -> 3
  REQUIRE(ck.metadata.at("model") == "cnn");
  REQUIRE(ck.metadata.at("channels") == "4-8");

  // the confusion matrix: a header and 10 rows whose counts add up to the test set
  std::ifstream conf(f.out / "confusion.csv");
  std::string line;
  std::getline(conf, line);
  REQUIRE_THAT(line, Catch::StartsWith("true\\predicted,0,1"));
  int rows = 0;
  long total = 0;
  while (std::getline(conf, line)) {
    ++rows;
    std::stringstream cells(line);
    std::string cell;
    std::getline(cells, cell, ',');
    while (std::getline(cells, cell, ',')) total += std::stol(cell);
  }
  REQUIRE(rows == 10);
  REQUIRE(total == 200);
  const nn::Checkpoint feats = nn::load_safetensors((f.out / "features.safetensors").string());
  REQUIRE(feats.tensors.at("conv1.act").shape() == nn::Shape{4, 12, 12});
  REQUIRE(feats.tensors.at("conv2.pool").shape() == nn::Shape{8, 3, 3});
  REQUIRE(fs::exists(f.out / "per_class.csv"));

  SECTION("the checkpoint evaluates to the same accuracy") {
    auto o = f.options();
    o.part = "eval";
    REQUIRE(run_quietly(&lesson04::run_eval_part, o, printed) == 0);
    const double acc = field(epochs.back(), "test_acc");
    std::ostringstream want;
    want << "test accuracy " << std::fixed << std::setprecision(2) << 100.0 * acc << "%";
    REQUIRE_THAT(printed, Catch::Contains(want.str()));
  }
  SECTION("a checkpoint of a different model is refused with a clear error") {
    auto o = f.options();
    o.part = "eval";
    o.channels = {4, 6};  // another width: conv2.weight has another shape
    REQUIRE_THAT(testing::error_of([&] { run_quietly(&lesson04::run_eval_part, o, printed); }),
                 Catch::Contains("different model"));
    // a lesson-02 style MLP checkpoint
    std::vector<float> w(10 * 144, 0.5f), b(10, 0.0f);
    const std::string mlp = (f.out / "mlp.safetensors").string();
    nn::save_safetensors(mlp, {{"fc1.weight", {10, 144}, w.data()}, {"fc1.bias", {10}, b.data()}});
    o = f.options();
    o.part = "eval";
    o.checkpoint = mlp;
    REQUIRE_THAT(testing::error_of([&] { run_quietly(&lesson04::run_eval_part, o, printed); }),
                 Catch::Contains("different model"));
  }
}

// The model is sized from the training images; test images of another size read past
// their buffer (1x1: SIGSEGV) or mixed images into garbage losses. Now refused up front.
TEST_CASE("lesson 04 refuses test images of another size than the training images", "[lesson04][train]") {
  Fixture f;
  auto o = f.options();
  o.epochs = 1;
  for (const auto& [R, C] : {std::pair{1, 1}, std::pair{12, 10}}) {
    make_split(f.data, "t10k", 200, 2, R, C);
    std::string printed;
    for (auto* part : {&lesson04::run_train_part, &lesson04::run_eval_part}) {
      const std::string error = testing::error_of([&] { run_quietly(part, o, printed); });
      INFO(R << "x" << C << ": " << printed);
      REQUIRE_THAT(error, Catch::Contains("the test images") &&
                              Catch::Contains(std::to_string(R) + "x" + std::to_string(C) + " pixels") &&
                              Catch::Contains("12x12"));
    }
    REQUIRE_FALSE(fs::exists(f.out / "cnn.safetensors"));
  }
}

// The model is sized from the images: 8 images of 2048x2048 need ~7 GB of conv buffers with
// the fixture's small CNN. Refused with the image size and the file, before anything is
// allocated, in both parts.
TEST_CASE("lesson 04 refuses images that would make a model too large to hold", "[lesson04][train]") {
  Fixture f;
  const int n = 8, R = 2048, C = 2048;
  const std::vector<uint8_t> images(static_cast<size_t>(n) * R * C, 100), labels = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const char* prefix : {"train", "t10k"}) {
    nn::write_idx((f.data / (std::string(prefix) + "-images-idx3-ubyte")).string(), {n, R, C}, images);
    nn::write_idx((f.data / (std::string(prefix) + "-labels-idx1-ubyte")).string(), {n}, labels);
  }
  std::string printed;
  for (auto* part : {&lesson04::run_train_part, &lesson04::run_eval_part}) {
    REQUIRE_THAT(testing::error_of([&] { run_quietly(part, f.options(), printed); }),
                 Catch::Contains("2048x2048 images") && Catch::Contains("GiB") && Catch::Contains("28x28") &&
                     Catch::Contains((f.data / "train-images-idx3-ubyte").string()));
  }
  // the estimate is the model's: a 28x28 default CNN at batch 250 is far below the limit
  lesson04::CnnConfig small;
  REQUIRE(lesson04::cnn_training_bytes(small, 250) < 1e9);
  lesson04::CnnConfig big = small;
  big.height = big.width = 2048;
  REQUIRE(lesson04::cnn_training_bytes(big, 250) > 4.0 * 1024 * 1024 * 1024);
}

// Part eval trusts nothing in a checkpoint: NaN weights gave a plausible loss and
// "accuracy 15.00%" with exit 0, and pixel_mean "nan" (or "0.2x") was read with std::stof.
TEST_CASE("lesson 04 eval refuses a checkpoint with NaN weights or bad metadata, naming file and key",
          "[lesson04][train]") {
  Fixture f;
  auto o = f.options();
  o.epochs = 1;
  std::string printed;
  REQUIRE(run_quietly(&lesson04::run_train_part, o, printed) == 0);
  const std::string good_path = (f.out / "cnn.safetensors").string();
  const nn::Checkpoint good = nn::load_safetensors(good_path);
  o.part = "eval";
  o.checkpoint = (f.out / "edited.safetensors").string();

  // Writes `good` with its metadata changed by `edit` and one weight set to `w00`, then
  // returns the error part eval gives on it.
  auto eval_error = [&](const std::function<void(std::map<std::string, std::string>&)>& edit, float w00) {
    std::map<std::string, std::string> meta = good.metadata;
    meta.erase("nnlab.checksum");  // the writer computes both checksums anew (nn/checkpoint.h)
    meta.erase("nnlab.header_checksum");
    edit(meta);
    std::vector<nn::TensorRef> refs;
    std::vector<float> conv1(good.tensors.at("conv1.weight").data(),
                             good.tensors.at("conv1.weight").data() + good.tensors.at("conv1.weight").numel());
    conv1[3] = w00;
    for (const auto& [name, t] : good.tensors) {
      refs.push_back({name, t.shape(), name == "conv1.weight" ? conv1.data() : t.data()});
    }
    // A damaged checkpoint on purpose: the writer refuses NaN unless told (nn/checkpoint.h).
    nn::save_safetensors(o.checkpoint, refs, meta, nn::NonFinite::Allow);
    return testing::error_of([&] { run_quietly(&lesson04::run_eval_part, o, printed); });
  };
  auto keep = [](std::map<std::string, std::string>&) {};
  const float w = good.tensors.at("conv1.weight").data()[3];

  SECTION("the unedited copy evaluates") {
    REQUIRE(eval_error(keep, w) == "<no nn::Error was thrown>");
  }
  SECTION("a NaN or infinite weight") {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      const std::string error = eval_error(keep, bad);
      REQUIRE_THAT(error, Catch::Contains(o.checkpoint) && Catch::Contains("'conv1.weight'") &&
                              Catch::Contains("index 3"));
      REQUIRE_THAT(printed, !Catch::Contains("test accuracy"));
    }
  }
  SECTION("pixel statistics that are not finite numbers, or not plausible") {
    const std::pair<const char*, const char*> cases[] = {
        {"pixel_mean", "nan"}, {"pixel_mean", "inf"}, {"pixel_mean", "0.2x"}, {"pixel_mean", ""},
        {"pixel_std", "nan"},  {"pixel_std", "0"},    {"pixel_std", "-0.3"},  {"pixel_mean", "7"}};
    for (const auto& [key, value] : cases) {
      const std::string error = eval_error([&](auto& m) { m[key] = value; }, w);
      INFO(key << " = '" << value << "'");
      REQUIRE_THAT(error, Catch::Contains(o.checkpoint) && Catch::Contains(std::string("'") + key + "'"));
      REQUIRE_THAT(printed, !Catch::Contains("test accuracy"));
    }
    REQUIRE_THAT(eval_error([](auto& m) { m.erase("pixel_std"); }, w), Catch::Contains("both or neither"));
  }
  SECTION("the other keys: model, widths, dataset, epoch, accuracy") {
    REQUIRE_THAT(eval_error([](auto& m) { m["model"] = "mlp"; }, w), Catch::Contains("'model'") && Catch::Contains("not 'cnn'"));
    REQUIRE_THAT(eval_error([](auto& m) { m["channels"] = "4-9"; }, w), Catch::Contains("'channels'") && Catch::Contains("--channels 4-8"));
    REQUIRE_THAT(eval_error([](auto& m) { m["hidden"] = "16.5"; }, w), Catch::Contains("'hidden'") && Catch::Contains("whole number"));
    REQUIRE_THAT(eval_error([](auto& m) { m["dataset"] = "mnist"; }, w), Catch::Contains("'dataset'") && Catch::Contains("fashion-mnist"));
    REQUIRE_THAT(eval_error([](auto& m) { m["epoch"] = "-5"; }, w), Catch::Contains("'epoch'"));
    REQUIRE_THAT(eval_error([](auto& m) { m["test_accuracy"] = "nan"; }, w), Catch::Contains("'test_accuracy'"));
  }
}

TEST_CASE("lesson 04 training is reproducible from its seed", "[lesson04][train]") {
  Fixture f;
  auto o = f.options();
  o.epochs = 1;
  o.dropout = 0.3f;  // the dropout masks and the augmentation come from the seed too
  o.shift = 1;
  o.flip = true;
  std::string printed;
  auto run_once = [&] {
    REQUIRE(run_quietly(&lesson04::run_train_part, o, printed) == 0);
    const nn::Checkpoint ck = nn::load_safetensors((f.out / "cnn.safetensors").string());
    const nn::Tensor& w = ck.tensors.at("conv1.weight");
    return std::make_pair(field(epoch_records(f.out / "log.jsonl").back(), "train_loss"),
                          std::vector<float>(w.data(), w.data() + w.numel()));
  };
  const auto first = run_once();
  fs::remove_all(f.out);
  const auto second = run_once();
  REQUIRE(second.first == first.first);    // the same loss
  REQUIRE(second.second == first.second);  // the same weights, bit for bit
  fs::remove_all(f.out);
  o.seed += 1;
  const auto other = run_once();
  REQUIRE(other.second != first.second);
}

TEST_CASE("lesson 04: a missing dataset is a clear error from the program", "[lesson04][cli]") {
  const auto r = testing::run_program("nnlab", "lesson04 --part train --data-dir /nonexistent/nnlab-data --epochs 1");
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Catch::Contains("error: "));
  REQUIRE_THAT(r.output, Catch::Contains("/nonexistent/nnlab-data"));
  REQUIRE_THAT(r.output, Catch::Contains("fetch_data.py"));
  const auto e = testing::run_program("lesson04", "--part eval --data-dir /nonexistent/nnlab-data");
  REQUIRE(e.status == 1);
}

// The real thing, briefly: one epoch on 6000 Fashion-MNIST images. Tagged [slow].
TEST_CASE("lesson 04 learns real Fashion-MNIST", "[lesson04][train][slow]") {
  std::string dir;
  try {
    dir = nn::find_dataset_dir("fashion-mnist");
  } catch (const nn::Error& e) {
    WARN("SKIPPED: Fashion-MNIST not installed (" << e.what() << ")");
    return;
  }
  testing::TempDir out("lesson04-real");
  lesson04::Options o;
  o.data_dir = dir;
  o.out_dir = out.path.string();
  o.epochs = 1;
  o.limit_train = 6000;
  o.limit_test = 2000;
  std::string printed;
  REQUIRE(run_quietly(&lesson04::run_train_part, o, printed) == 0);
  INFO(printed);
  const nn::Checkpoint ck = nn::load_safetensors(out.file("cnn.safetensors"));
  REQUIRE(std::stod(ck.metadata.at("test_accuracy")) > 0.70);  // a broken backward stays near 0.10
}

TEST_CASE("lesson 04's README quotes what the conv part prints and names its ops and exercise",
          "[lesson04][docs]") {
  const std::string readme = testing::read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/04-cnn/README.md");
  lesson04::Options o;
  std::string printed;
  REQUIRE(run_quietly(&lesson04::run_conv_part, o, printed) == 0);
  // the feature map quoted in section 2, line by line
  for (const char* line : {"        0    1    1    0    0    0   -1   -1",
                           "        0    3    3    0    0    0   -3   -3",
                           "        0    4    4    0    0    0   -4   -4"}) {
    INFO(line);
    REQUIRE_THAT(readme, Catch::Contains(line));
    REQUIRE_THAT(printed, Catch::Contains(line));
  }
  for (const char* name : {"conv2d_forward_loops", "conv2d_backward_loops", "im2col", "col2im",
                           "conv2d_forward_im2col", "maxpool2d_forward", "maxpool2d_backward",
                           "09_conv2d_forward", "--part conv", "--part bench", "--part train",
                           "--part eval", "--part speed", "kernels/conv.h", "conv2d_forward_v4",
                           "maxpool2x2_forward", "cnn_torch.py"}) {
    INFO(name);
    REQUIRE_THAT(readme, Catch::Contains(name));
  }
}
