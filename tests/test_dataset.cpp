// nn/dataset: IDX pairs into an ImageDataset, finding the data on disk, the seeded batch
// loader, and (when installed, as in CI) the real Fashion-MNIST.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "nn/check.h"
#include "nn/dataset.h"
#include "io/idx.h"
#include "nn/rng.h"
#include "nn/tensor.h"

namespace fs = std::filesystem;
using namespace testing;  // TempDir, error_of, read_bytes, write_bytes (tests/test_util.h)
using Catch::Contains;

namespace {

// A tiny MNIST-format split in `dir`: n images of 2 x 3 pixels, pixel (i, p) = 40 i + p
// (mod 256), label i % 10.
void write_split(const fs::path& dir, const std::string& prefix, int n) {
  fs::create_directories(dir);
  std::vector<uint8_t> px, lab;
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < 6; ++p) px.push_back(static_cast<uint8_t>((40 * i + p) % 256));
    lab.push_back(static_cast<uint8_t>(i % 10));
  }
  nn::write_idx((dir / (prefix + "-images-idx3-ubyte")).string(), {n, 2, 3}, px);
  nn::write_idx((dir / (prefix + "-labels-idx1-ubyte")).string(), {n}, lab);
}

// An in-memory dataset whose row i is (i, i + 0.5, i + 0.25, ...): any row of a batch
// says which example it came from.
nn::ImageDataset numbered_dataset(int n, int d) {
  nn::ImageDataset ds;
  ds.rows = 1;
  ds.cols = d;
  ds.images = nn::Tensor({n, d});
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) ds.images.at(i, j) = static_cast<float>(i) + 1.0f / static_cast<float>(j + 1);
    ds.labels.push_back((i * 7) % 10);
  }
  return ds;
}

// One epoch of indices, recovered from the batches' first column, checking each row and
// label against the dataset on the way.
std::vector<int> epoch_order(nn::BatchLoader& loader, const nn::ImageDataset& ds, std::vector<int>* sizes = nullptr) {
  std::vector<int> order;
  nn::Tensor x({1, 1});  // deliberately the wrong shape: next() must fix it
  std::vector<int32_t> y;
  const int64_t d = ds.images.dim(1);
  while (const int b = loader.next(x, y)) {
    REQUIRE(x.ndim() == 2);
    REQUIRE(x.dim(0) == b);
    REQUIRE(x.dim(1) == d);
    REQUIRE(y.size() == static_cast<size_t>(b));
    for (int r = 0; r < b; ++r) {
      const int idx = static_cast<int>(x.at(r, 0)) - 1;  // column 0 holds i + 1/1
      REQUIRE(idx >= 0);
      REQUIRE(idx < ds.size());
      for (int64_t j = 0; j < d; ++j) REQUIRE(x.at(r, j) == ds.images.at(idx, j));
      REQUIRE(y[static_cast<size_t>(r)] == ds.labels[static_cast<size_t>(idx)]);
      order.push_back(idx);
    }
    if (sizes) sizes->push_back(b);
  }
  return order;
}

bool is_permutation_of_range(std::vector<int> v, int n) {
  if (static_cast<int>(v.size()) != n) return false;
  std::sort(v.begin(), v.end());
  for (int i = 0; i < n; ++i) {
    if (v[static_cast<size_t>(i)] != i) return false;
  }
  return true;
}

}  // namespace

// ---- loading ---------------------------------------------------------------------------

TEST_CASE("dataset: load_idx_dataset scales pixels to [0,1] and keeps labels", "[dataset]") {
  TempDir tmp("dataset");
  write_split(tmp.path, "train", 7);
  const nn::ImageDataset ds =
      nn::load_idx_dataset(tmp.file("train-images-idx3-ubyte"), tmp.file("train-labels-idx1-ubyte"));
  REQUIRE(ds.size() == 7);
  REQUIRE(ds.rows == 2);
  REQUIRE(ds.cols == 3);
  REQUIRE(ds.num_classes == 10);
  REQUIRE(ds.images.shape() == nn::Shape{7, 6});
  for (int i = 0; i < 7; ++i) {
    REQUIRE(ds.labels[static_cast<size_t>(i)] == i % 10);
    for (int p = 0; p < 6; ++p) {
      REQUIRE(ds.images.at(i, p) == static_cast<float>((40 * i + p) % 256) / 255.0f);
    }
  }
  REQUIRE(ds.images.at(6, 0) == 240.0f / 255.0f);
}

TEST_CASE("dataset: load_idx_dataset refuses mismatched files", "[dataset]") {
  TempDir tmp("dataset");
  write_split(tmp.path, "train", 5);
  write_split(tmp.path, "t10k", 4);
  const std::string img = tmp.file("train-images-idx3-ubyte");
  const std::string lab = tmp.file("train-labels-idx1-ubyte");

  SECTION("labels as images, images as labels") {
    REQUIRE_THAT(error_of([&] { nn::load_idx_dataset(lab, img); }),
                 Contains(lab) && Contains("has 1 dimensions, expected 3") && Contains("swap"));
    REQUIRE_THAT(error_of([&] { nn::load_idx_dataset(img, img); }),
                 Contains(img) && Contains("has 3 dimensions, expected 1"));
  }
  SECTION("different N") {
    const std::string other = tmp.file("t10k-labels-idx1-ubyte");
    REQUIRE_THAT(error_of([&] { nn::load_idx_dataset(img, other); }),
                 Contains(img) && Contains(other) && Contains("holds 5 images") && Contains("holds 4 labels"));
  }
  SECTION("a label out of range") {
    REQUIRE_THAT(error_of([&] { nn::load_idx_dataset(img, lab, 4); }),
                 Contains(lab) && Contains("label 4 at index 4 is outside [0, 4)"));
    const std::string bad = tmp.file("bad-labels");
    nn::write_idx(bad, {5}, {0, 1, 2, 200, 3});
    REQUIRE_THAT(error_of([&] { nn::load_idx_dataset(img, bad); }),
                 Contains(bad) && Contains("label 200 at index 3"));
  }
  SECTION("a missing file") {
    const std::string none = tmp.file("nothing-here");
    REQUIRE_THAT(error_of([&] { nn::load_idx_dataset(img, none); }), Contains(none) && Contains("not found"));
  }
}

// A training loop sizes its model from the training images and feeds it the test images:
// two splits of other sizes crashed lessons 02 and 04 (SIGSEGV with 1x1 test images) or
// gave garbage losses. load_mnist_train_test compares them before anything is built.
TEST_CASE("dataset: the train and test splits must agree on image size and classes", "[dataset]") {
  TempDir tmp("dataset");
  write_split(tmp.path, "train", 6);
  auto write_test = [&](int rows, int cols, int n) {
    std::vector<uint8_t> px(static_cast<size_t>(n * rows * cols), 7), lab(static_cast<size_t>(n), 3);
    nn::write_idx(tmp.file("t10k-images-idx3-ubyte"), {n, rows, cols}, px);
    nn::write_idx(tmp.file("t10k-labels-idx1-ubyte"), {n}, lab);
  };
  write_test(2, 3, 4);
  const nn::TrainTest ok = nn::load_mnist_train_test(tmp.path.string());
  REQUIRE(ok.train.size() == 6);
  REQUIRE(ok.test.size() == 4);
  REQUIRE(ok.test.images_path == tmp.file("t10k-images-idx3-ubyte"));

  for (const auto& [rows, cols] : {std::pair{1, 1}, std::pair{3, 2}, std::pair{2, 4}, std::pair{256, 256}}) {
    write_test(rows, cols, 2);
    INFO(rows << "x" << cols);
    REQUIRE_THAT(error_of([&] { nn::load_mnist_train_test(tmp.path.string()); }),
                 Contains(tmp.file("t10k-images-idx3-ubyte")) && Contains(tmp.file("train-images-idx3-ubyte")) &&
                     Contains(std::to_string(rows) + "x" + std::to_string(cols) + " pixels") && Contains("2x3"));
  }

  // In memory: another number of classes, a label outside them, an empty set.
  nn::ImageDataset a = ok.train, b = ok.test;
  REQUIRE_NOTHROW(nn::check_same_format(a, b));
  b.num_classes = 5;
  REQUIRE_THAT(error_of([&] { nn::check_same_format(a, b); }), Contains("5 classes") && Contains("10"));
  b = ok.test;
  b.labels[1] = 12;
  REQUIRE_THAT(error_of([&] { nn::check_same_format(a, b); }),
               Contains("label 12 at index 1") && Contains(tmp.file("t10k-labels-idx1-ubyte")));
  b = ok.test;
  b.labels.clear();
  b.images = nn::Tensor({0, 6});
  REQUIRE_THAT(error_of([&] { nn::check_same_format(a, b); }), Contains("holds no images"));
}

TEST_CASE("dataset: load_mnist_split picks train-* or t10k-*, plain or .gz", "[dataset]") {
  TempDir tmp("dataset");
  write_split(tmp.path, "train", 9);
  write_split(tmp.path, "t10k", 3);
  const nn::ImageDataset train = nn::load_mnist_split(tmp.path.string(), "train");
  const nn::ImageDataset test = nn::load_mnist_split(tmp.path.string(), "test");
  REQUIRE(train.size() == 9);
  REQUIRE(test.size() == 3);
  REQUIRE(train.labels[8] == 8);

  REQUIRE_THAT(error_of([&] { nn::load_mnist_split(tmp.path.string(), "validation"); }),
               Contains("unknown split 'validation'") && Contains("train or test"));

  fs::remove(tmp.path / "t10k-labels-idx1-ubyte");
  REQUIRE_THAT(error_of([&] { nn::load_mnist_split(tmp.path.string(), "test"); }),
               Contains(tmp.path.string()) && Contains("t10k-labels-idx1-ubyte") && Contains("(nor t10k-labels-idx1-ubyte.gz)"));
  // a directory where the file should be is named as such, not as a missing file
  fs::create_directories(tmp.path / "t10k-labels-idx1-ubyte");
  REQUIRE_THAT(error_of([&] { nn::load_mnist_split(tmp.path.string(), "test"); }),
               Contains("a directory where the file t10k-labels-idx1-ubyte should be"));
  fs::remove(tmp.path / "t10k-labels-idx1-ubyte");

  // Only the .gz name present: load_mnist_split must pick it (and, without zlib, say so).
  fs::rename(tmp.path / "train-labels-idx1-ubyte", tmp.path / "train-labels-idx1-ubyte.gz");
  if (nn::idx_gzip_supported()) {
    // A plain IDX file under a .gz name is refused as "not gzip": proof the .gz file was tried.
    REQUIRE_THAT(error_of([&] { nn::load_mnist_split(tmp.path.string(), "train"); }),
                 Contains("train-labels-idx1-ubyte.gz") && Contains("not gzip-compressed"));
  } else {
    REQUIRE_THAT(error_of([&] { nn::load_mnist_split(tmp.path.string(), "train"); }),
                 Contains("train-labels-idx1-ubyte.gz") && Contains("no zlib"));
  }
}

TEST_CASE("dataset: fashion_mnist_classes and truncate_dataset", "[dataset]") {
  const auto& names = nn::fashion_mnist_classes();
  REQUIRE(names == std::vector<std::string>{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                                            "Shirt", "Sneaker", "Bag", "Ankle boot"});

  nn::ImageDataset ds = numbered_dataset(10, 4);
  nn::truncate_dataset(ds, 0);  // keeps all
  REQUIRE(ds.size() == 10);
  nn::truncate_dataset(ds, 10);
  REQUIRE(ds.size() == 10);
  nn::truncate_dataset(ds, 25);
  REQUIRE(ds.size() == 10);
  nn::truncate_dataset(ds, 3);
  REQUIRE(ds.size() == 3);
  REQUIRE(ds.images.shape() == nn::Shape{3, 4});
  const nn::ImageDataset ref = numbered_dataset(10, 4);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(ds.labels[static_cast<size_t>(i)] == ref.labels[static_cast<size_t>(i)]);
    for (int j = 0; j < 4; ++j) REQUIRE(ds.images.at(i, j) == ref.images.at(i, j));
  }
}

// ---- finding the data ------------------------------------------------------------------

TEST_CASE("dataset: find_dataset_dir searches dir, or $NNLAB_DATA then the defaults", "[dataset]") {
  TempDir tmp("dataset");
  const std::string name = "nnlab-test-set";  // a name no real install has

  SECTION("the given directory itself, or <dir>/<name>") {
    write_split(tmp.path / "mine", "train", 2);
    REQUIRE(nn::find_dataset_dir(name, (tmp.path / "mine").string()) == (tmp.path / "mine").string());
    write_split(tmp.path / name, "train", 2);
    REQUIRE(nn::find_dataset_dir(name, tmp.path.string()) == (tmp.path / name).string());
  }
  SECTION("$NNLAB_DATA/<name>, with only .gz files") {
    fs::create_directories(tmp.path / name);
    std::ofstream(tmp.path / name / "train-images-idx3-ubyte.gz") << "x";
    ScopedEnv env("NNLAB_DATA", tmp.path.string());
    REQUIRE(nn::find_dataset_dir(name) == (tmp.path / name).string());
    // An explicit directory wins...
    write_split(tmp.path / "first", "train", 2);
    REQUIRE(nn::find_dataset_dir(name, (tmp.path / "first").string()) == (tmp.path / "first").string());
    // ...and is the only place looked at: no silent fallback to $NNLAB_DATA.
    const std::string wrong = (tmp.path / "typo").string();
    REQUIRE_THAT(error_of([&] { nn::find_dataset_dir(name, wrong); }),
                 Contains("dataset " + name + " not found") && Contains(wrong) &&
                     !Contains((tmp.path / name).string() + ",") && Contains("leave out the data directory"));
  }
  SECTION("not found: every default place tried is listed") {
    ScopedEnv env("NNLAB_DATA", (tmp.path / "env").string());
    const std::string msg = error_of([&] { nn::find_dataset_dir(name); });
    REQUIRE_THAT(msg, Contains("dataset " + name + " not found") && Contains((tmp.path / "env" / name).string()) &&
                          Contains((fs::path(NNLAB_SOURCE_DIR) / "data" / name).string()) &&
                          Contains((fs::path("/usr/share/datasets") / name).string()) &&
                          Contains("set NNLAB_DATA"));
  }
  SECTION("not found in the given directory: it and <dir>/<name> are listed") {
    const std::string given = (tmp.path / "given").string();
    const std::string msg = error_of([&] { nn::find_dataset_dir(name, given); });
    REQUIRE_THAT(msg, Contains(given + ", " + (fs::path(given) / name).string() + ".") &&
                          !Contains("/usr/share/datasets"));
  }
  SECTION("not found: the hint says how to get mnist (no Debian package)") {
    const std::string msg = error_of([&] { nn::find_dataset_dir("mnist", (tmp.path / "x").string()); });
    REQUIRE_THAT(msg, Contains("download it: python3 scripts/fetch_data.py mnist (into data/mnist)"));
    REQUIRE_THAT(msg, !Contains("apt-get"));
  }
  SECTION("not found: the hint says how to get fashion-mnist (apt or the script)") {
    const std::string msg = error_of([&] { nn::find_dataset_dir("fashion-mnist", (tmp.path / "x").string()); });
    REQUIRE_THAT(msg, Contains("install Debian's package: sudo apt-get install dataset-fashion-mnist, or download "
                               "it: python3 scripts/fetch_data.py fashion-mnist (into data/fashion-mnist)"));
  }
}

// ---- the batch loader ------------------------------------------------------------------

TEST_CASE("BatchLoader: every example once per epoch, last batch partial, then 0", "[dataset]") {
  const nn::ImageDataset ds = numbered_dataset(103, 5);
  nn::BatchLoader loader(ds, 10, true, 42);
  REQUIRE(loader.batches_per_epoch() == 11);
  std::vector<int> sizes;
  const std::vector<int> order = epoch_order(loader, ds, &sizes);
  REQUIRE(is_permutation_of_range(order, 103));
  REQUIRE(sizes == std::vector<int>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3});
  nn::Tensor x;
  std::vector<int32_t> y;
  REQUIRE(loader.next(x, y) == 0);  // stays at the end until start_epoch()

  loader.start_epoch();
  const std::vector<int> order2 = epoch_order(loader, ds);
  REQUIRE(is_permutation_of_range(order2, 103));
  REQUIRE(order2 != order);  // reshuffled

  nn::BatchLoader exact(ds, 103, true, 1);
  REQUIRE(exact.batches_per_epoch() == 1);
  nn::BatchLoader single(ds, 1, true, 1);
  REQUIRE(single.batches_per_epoch() == 103);
}

TEST_CASE("BatchLoader: same seed same order, different seeds differ, no shuffle in order", "[dataset]") {
  const nn::ImageDataset ds = numbered_dataset(50, 3);
  nn::BatchLoader a(ds, 8, true, 7), b(ds, 8, true, 7), c(ds, 8, true, 8);
  std::vector<int> oa = epoch_order(a, ds), ob = epoch_order(b, ds), oc = epoch_order(c, ds);
  REQUIRE(oa == ob);
  REQUIRE(oa != oc);
  std::vector<int> identity(50);
  for (int i = 0; i < 50; ++i) identity[static_cast<size_t>(i)] = i;
  REQUIRE(oa != identity);
  // The second epoch repeats too.
  a.start_epoch();
  b.start_epoch();
  REQUIRE(epoch_order(a, ds) == epoch_order(b, ds));

  nn::BatchLoader plain(ds, 8, false, 7);
  REQUIRE(epoch_order(plain, ds) == identity);
  plain.start_epoch();
  REQUIRE(epoch_order(plain, ds) == identity);
}

TEST_CASE("BatchLoader: bad batch size, empty dataset", "[dataset]") {
  const nn::ImageDataset ds = numbered_dataset(5, 2);
  REQUIRE_THAT(error_of([&] { nn::BatchLoader bad(ds, 0, true, 1); }), Contains("batch size must be positive, got 0"));
  nn::ImageDataset empty;
  nn::BatchLoader loader(empty, 4, true, 1);
  REQUIRE(loader.batches_per_epoch() == 0);
  nn::Tensor x;
  std::vector<int32_t> y;
  REQUIRE(loader.next(x, y) == 0);
}

// ---- the real thing --------------------------------------------------------------------

TEST_CASE("dataset: the installed Fashion-MNIST loads with the known statistics", "[dataset]") {
  std::string dir;
  try {
    dir = nn::find_dataset_dir("fashion-mnist");
  } catch (const nn::Error& e) {
    WARN("Fashion-MNIST not installed, skipping (sudo apt-get install dataset-fashion-mnist): " << e.what());
    return;
  }
  if (!nn::idx_gzip_supported() && !fs::exists(fs::path(dir) / "train-images-idx3-ubyte")) {
    WARN("Fashion-MNIST in " << dir << " is gzipped and this build has no zlib: skipping");
    return;
  }
  const nn::ImageDataset train = nn::load_mnist_split(dir, "train");
  const nn::ImageDataset test = nn::load_mnist_split(dir, "test");
  REQUIRE(train.images.shape() == nn::Shape{60000, 784});
  REQUIRE(test.images.shape() == nn::Shape{10000, 784});
  REQUIRE(train.rows == 28);
  REQUIRE(train.cols == 28);

  // Both splits are balanced: 6000 / 1000 of each class. The first labels are known.
  std::vector<int> count_train(10, 0), count_test(10, 0);
  for (int32_t l : train.labels) {
    REQUIRE((l >= 0 && l < 10));
    ++count_train[static_cast<size_t>(l)];
  }
  for (int32_t l : test.labels) {
    REQUIRE((l >= 0 && l < 10));
    ++count_test[static_cast<size_t>(l)];
  }
  REQUIRE(count_train == std::vector<int>(10, 6000));
  REQUIRE(count_test == std::vector<int>(10, 1000));
  REQUIRE(std::vector<int32_t>(train.labels.begin(), train.labels.begin() + 5) == std::vector<int32_t>{9, 0, 0, 3, 0});
  REQUIRE(nn::fashion_mnist_classes()[static_cast<size_t>(train.labels[0])] == "Ankle boot");

  // Pixels in [0, 1]; the byte sums (pixel * 255, exact) match the files'.
  double sum = 0.0;
  int64_t byte_sum = 0;
  float lo = 1.0f, hi = 0.0f;
  for (float v : train.images.span()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    byte_sum += static_cast<int64_t>(std::lround(static_cast<double>(v) * 255.0));
  }
  REQUIRE(lo == 0.0f);
  REQUIRE(hi == 1.0f);
  const double mean = sum / static_cast<double>(train.images.numel());
  REQUIRE(std::abs(mean - 0.2860) < 0.0005);
  REQUIRE(byte_sum == 3431114169LL);
  int64_t first_test_image = 0;
  for (int p = 0; p < 784; ++p) first_test_image += std::lround(static_cast<double>(test.images.at(0, p)) * 255.0);
  REQUIRE(first_test_image == 33456);
}
