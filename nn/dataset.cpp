// nn/dataset.cpp: MNIST-format datasets from IDX files, and the seeded batch loader.
//
// Data flows: find_dataset_dir -> load_mnist_split -> load_idx_dataset (two IDX files
// -> one ImageDataset) -> BatchLoader (shuffled, contiguous mini-batches).
#include "nn/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <numeric>
#include <sstream>

#include "nn/check.h"
#include "io/idx.h"
#include "io/repo_paths.h"

namespace nn {

namespace fs = std::filesystem;

// ---- loading -----------------------------------------------------------------------------

ImageDataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                              int num_classes) {
  NN_CHECK(num_classes >= 1 && num_classes <= 256,
           "num_classes must be in [1, 256] (labels are bytes), got " << num_classes);
  const IdxArray img = read_idx(images_path);
  NN_CHECK(img.dims.size() == 3, "image file " << images_path << " has " << img.dims.size()
                                               << " dimensions, expected 3 (N, rows, cols): did you "
                                                  "swap the image and label files?");
  const IdxArray lab = read_idx(labels_path);
  NN_CHECK(lab.dims.size() == 1, "label file " << labels_path << " has " << lab.dims.size()
                                               << " dimensions, expected 1 (N): did you swap the "
                                                  "image and label files?");
  const int64_t n = img.dims[0];
  NN_CHECK(lab.dims[0] == n, "image file " << images_path << " holds " << n << " images but label file "
                                           << labels_path << " holds " << lab.dims[0]
                                           << " labels: the two files are from different sets "
                                              "(train-* with t10k-*?) or one is damaged");
  // A model's input size is an int (rows * cols features).
  NN_CHECK(img.dims[1] * img.dims[2] <= std::numeric_limits<int32_t>::max(),
           "image file " << images_path << " holds images of " << img.dims[1] << "x" << img.dims[2]
                         << " pixels: more than 2^31 - 1 per image, too large for these models");

  ImageDataset ds;
  ds.rows = static_cast<int>(img.dims[1]);
  ds.cols = static_cast<int>(img.dims[2]);
  ds.num_classes = num_classes;
  ds.images_path = images_path;
  ds.labels_path = labels_path;

  ds.labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int label = lab.data[static_cast<size_t>(i)];
    NN_CHECK(label < num_classes, "label file " << labels_path << ": label " << label << " at index " << i
                                                << " is outside [0, " << num_classes
                                                << "): wrong file, or the wrong number of classes?");
    ds.labels[static_cast<size_t>(i)] = label;
  }

  // pixel bytes 0..255 -> floats in [0, 1]
  const int64_t d = static_cast<int64_t>(ds.rows) * ds.cols;
  ds.images = Tensor({n, d});
  float* px = ds.images.data();
  for (size_t i = 0; i < img.data.size(); ++i) {
    px[i] = static_cast<float>(img.data[i]) / 255.0f;
  }
  return ds;
}

void check_same_format(const ImageDataset& train, const ImageDataset& test) {
  auto name = [](const ImageDataset& ds, const char* fallback) {
    return ds.images_path.empty() ? std::string(fallback) : ds.images_path;
  };
  const std::string a = name(train, "the training set");
  const std::string b = name(test, "the test set");
  NN_CHECK(train.size() > 0 && test.size() > 0,
           (train.size() == 0 ? a : b) << " holds no images: nothing to train on or to evaluate");
  NN_CHECK(train.rows == test.rows && train.cols == test.cols,
           "the test images " << b << " are " << test.rows << "x" << test.cols << " pixels but the training images "
                              << a << " are " << train.rows << "x" << train.cols
                              << ": a model built for one cannot read the other. Are both files from the same "
                                 "dataset? fetch them again");
  NN_CHECK(train.num_classes == test.num_classes,
           "the test set " << b << " has " << test.num_classes << " classes, the training set " << a << " "
                           << train.num_classes << ": they must be the same classification task");
  NN_CHECK(train.images.numel() == train.size() * train.rows * train.cols &&
               test.images.numel() == test.size() * test.rows * test.cols,
           "dataset images do not hold one rows x cols image per label (" << a << ", " << b << ")");
  for (const ImageDataset* ds : {&train, &test}) {
    for (size_t i = 0; i < ds->labels.size(); ++i) {
      const int32_t label = ds->labels[i];
      NN_CHECK(label >= 0 && label < ds->num_classes,
               "label " << label << " at index " << i << " of "
                        << (ds->labels_path.empty() ? std::string("a dataset") : ds->labels_path)
                        << " is outside [0, " << ds->num_classes << "): wrong file, or the wrong number of classes?");
    }
  }
}

// ---- finding the files -------------------------------------------------------------------

namespace {

// A directory holds a dataset when its training images are there, compressed or not.
bool holds_dataset(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "train-images-idx3-ubyte", ec) ||
         fs::is_regular_file(dir / "train-images-idx3-ubyte.gz", ec);
}

std::string how_to_get(const std::string& name) {
  const std::string fetch = "python3 scripts/fetch_data.py " + name + " (into data/" + name + ")";
  if (name == "fashion-mnist") {
    return "install Debian's package: sudo apt-get install dataset-fashion-mnist, or download it: " + fetch;
  }
  if (name == "mnist") {
    return "download it: " + fetch;
  }
  return "put its IDX files (train-images-idx3-ubyte[.gz], ...) in one of those directories";
}

// "" -> "", "x.gz" or "x": whichever exists, the uncompressed one first (faster to read).
std::string existing_idx_file(const fs::path& dir, const std::string& base) {
  std::error_code ec;
  const fs::path plain = dir / base;
  if (fs::is_regular_file(plain, ec)) {
    return plain.string();
  }
  const fs::path gz = dir / (base + ".gz");
  if (fs::is_regular_file(gz, ec)) {
    return gz.string();
  }
  return "";
}

}  // namespace

std::string find_dataset_dir(const std::string& name, const std::string& dir) {
  NN_CHECK(!name.empty(), "find_dataset_dir: empty dataset name (expected e.g. fashion-mnist or mnist)");
  std::vector<fs::path> tried;
  if (!dir.empty()) {
    // An explicit directory is the only place looked at: falling back to another copy
    // would silently train on data the user did not ask for.
    tried.push_back(fs::path(dir));
    tried.push_back(fs::path(dir) / name);  // also accept the data root: --data-dir data
  } else {
    // std::getenv is standard C++; MSVC merely prefers its own _dupenv_s.
    if (const char* env = std::getenv("NNLAB_DATA"); env != nullptr && env[0] != '\0') {
      tried.push_back(fs::path(env) / name);
    }
    // <repo>/data/<name>: the tree this program runs from, then the one it was built from
    // (io/repo_paths.h: a tree moved or copied after the build reads its own data).
    for (const std::string& root : repo_roots()) {
      tried.push_back(fs::path(root) / "data" / name);
    }
    tried.push_back(fs::path("/usr/share/datasets") / name);
  }

  for (const fs::path& p : tried) {
    if (holds_dataset(p)) {
      return p.string();
    }
  }
  std::ostringstream places;
  for (size_t i = 0; i < tried.size(); ++i) {
    places << (i ? ", " : "") << tried[i].string();
  }
  std::ostringstream msg;
  msg << "dataset " << name << " not found: no train-images-idx3-ubyte[.gz] in any of " << places.str()
      << ". To get it, " << how_to_get(name);
  if (dir.empty()) {
    msg << "; or set NNLAB_DATA to a directory that holds " << name << "/";
  } else {
    msg << "; or leave out the data directory to search the default places";
  }
  fail(__FILE__, __LINE__, msg.str());
}

ImageDataset load_mnist_split(const std::string& dir, const std::string& split) {
  NN_CHECK(split == "train" || split == "test",
           "unknown split '" << split << "': expected train or test");
  const std::string prefix = split == "train" ? "train" : "t10k";  // the MNIST file names
  const std::string images_base = prefix + "-images-idx3-ubyte";
  const std::string labels_base = prefix + "-labels-idx1-ubyte";
  for (const std::string& base : {images_base, labels_base}) {
    std::error_code ec;
    NN_CHECK(!fs::is_directory(fs::path(dir) / base, ec) && !fs::is_directory(fs::path(dir) / (base + ".gz"), ec),
             "dataset directory " << dir << " has a directory where the file " << base
                                  << " should be: remove it and fetch the dataset again");
  }
  const std::string images = existing_idx_file(dir, images_base);
  const std::string labels = existing_idx_file(dir, labels_base);
  NN_CHECK(!images.empty(), "dataset directory " << dir << " has no " << images_base << " (nor "
                                                 << images_base << ".gz): is the download incomplete? "
                                                                   "fetch it again");
  NN_CHECK(!labels.empty(), "dataset directory " << dir << " has no " << labels_base << " (nor "
                                                 << labels_base << ".gz): is the download incomplete? "
                                                                   "fetch it again");
  return load_idx_dataset(images, labels, 10);
}

TrainTest load_mnist_train_test(const std::string& dir) {
  TrainTest t;
  t.train = load_mnist_split(dir, "train");
  t.test = load_mnist_split(dir, "test");
  check_same_format(t.train, t.test);
  return t;
}

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

void truncate_dataset(ImageDataset& ds, int64_t n) {
  if (n <= 0 || n >= ds.size()) {
    return;
  }
  const int64_t d = ds.images.numel() / std::max<int64_t>(ds.size(), 1);
  Tensor kept({n, d});
  std::copy_n(ds.images.data(), n * d, kept.data());
  ds.images = std::move(kept);
  ds.labels.resize(static_cast<size_t>(n));
}

// ---- the batch loader --------------------------------------------------------------------

BatchLoader::BatchLoader(const ImageDataset& ds, int batch_size, bool shuffle, uint64_t seed)
    : ds_(ds), batch_size_(batch_size), shuffle_(shuffle), rng_(seed) {
  NN_CHECK(batch_size > 0, "batch size must be positive, got " << batch_size);
  NN_CHECK(ds.size() <= std::numeric_limits<int32_t>::max(),
           "dataset of " << ds.size() << " examples is too large for the loader (2^31 - 1 at most)");
  NN_CHECK(ds.size() == 0 || ds.images.numel() % ds.size() == 0,
           "dataset images " << shape_str(ds.images.shape()) << " do not split into " << ds.size()
                             << " equal rows (one per label)");
  order_.resize(static_cast<size_t>(ds.size()));
  // The first epoch is ready at once; calling start_epoch() before it is fine too.
  start_epoch();
}

void BatchLoader::start_epoch() {
  // Shuffle from the identity each time, so epoch e's order depends only on the seed and e.
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle_) {
    rng_.shuffle(std::span<int32_t>(order_));
  }
  cursor_ = 0;
}

int BatchLoader::next(Tensor& x, std::vector<int32_t>& y) {
  const int64_t n = ds_.size();
  if (cursor_ >= n) {
    return 0;
  }
  const int64_t b = std::min<int64_t>(batch_size_, n - cursor_);
  const int64_t d = ds_.images.numel() / n;
  if (x.ndim() != 2 || x.dim(0) != b || x.dim(1) != d) {
    x = Tensor({b, d});
  }
  y.resize(static_cast<size_t>(b));
  // x[r] = images[order[cursor + r]]: gather rows so each batch is one contiguous block
  for (int64_t r = 0; r < b; ++r) {
    const int32_t idx = order_[static_cast<size_t>(cursor_ + r)];
    std::copy_n(ds_.images.data() + idx * d, d, x.data() + r * d);
    y[static_cast<size_t>(r)] = ds_.labels[static_cast<size_t>(idx)];
  }
  cursor_ += b;
  return static_cast<int>(b);
}

int64_t BatchLoader::batches_per_epoch() const {
  return (ds_.size() + batch_size_ - 1) / batch_size_;
}

PixelStats pixel_stats(const ImageDataset& ds) {
  double sum = 0.0;
  double sum_sq = 0.0;
  for (float p : ds.images.span()) {
    sum += p;
    sum_sq += static_cast<double>(p) * p;
  }
  const double n = static_cast<double>(ds.images.numel());
  const double mean = sum / n;
  const double var = sum_sq / n - mean * mean;  // E[p^2] - E[p]^2, in double
  return {static_cast<float>(mean), static_cast<float>(std::sqrt(std::fmax(var, 1e-12)))};
}

void standardise(ImageDataset& ds, PixelStats stats) {
  for (float& p : ds.images.span()) p = (p - stats.mean) / stats.std;
}

}  // namespace nn
