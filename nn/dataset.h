// nn/dataset.h: image-classification datasets (MNIST-format) and a seeded batch loader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/rng.h"
#include "nn/tensor.h"

namespace nn {

struct ImageDataset {
  Tensor images;                // (N, rows * cols), pixel / 255 in [0, 1]
  std::vector<int32_t> labels;  // (N), in [0, num_classes)
  int rows = 0;
  int cols = 0;
  int num_classes = 10;
  std::string images_path, labels_path;  // the files it came from (for messages), or empty
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// Reads an IDX image file and its IDX label file; checks that they agree on N, that the
// images are 3-D and that every label is in [0, num_classes).
ImageDataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                              int num_classes = 10);

// A test (or validation) set must fit the model built for `train`: images of the same rows
// and columns, and labels over the same classes. nn::Error naming both image files and the
// difference otherwise: a model sized from one set and fed the other would read past the
// end of its buffers (a crash) or mix pixels of neighbouring images (garbage losses).
void check_same_format(const ImageDataset& train, const ImageDataset& test);

// Finds the directory holding a named MNIST-format dataset ("fashion-mnist" or "mnist").
// Looks, in order, at: `dir` if not empty; $NNLAB_DATA/<name>; <repo>/data/<name> for each
// root of nn::repo_roots() (io/repo_paths.h: the tree above the executable, then the tree
// it was built from); /usr/share/datasets/<name> (Debian's dataset-fashion-mnist package). A directory counts
// when it holds train-images-idx3-ubyte (optionally .gz). Throws nn::Error listing the
// places tried and how to get the data (apt package or scripts/fetch_data.py).
// A non-empty `dir` is the only place looked at (`dir` itself, or `dir`/<name>): an
// explicit directory without the data is an error, never a silent fallback elsewhere.
std::string find_dataset_dir(const std::string& name, const std::string& dir = "");

// Loads split "train" or "test" (train-*/t10k-* files, .gz or not) from a dataset directory.
ImageDataset load_mnist_split(const std::string& dir, const std::string& split);
// Both splits, checked against each other (check_same_format) before anything trains.
struct TrainTest {
  ImageDataset train, test;
};
TrainTest load_mnist_train_test(const std::string& dir);

// Fashion-MNIST's ten class names, index = label.
const std::vector<std::string>& fashion_mnist_classes();

// Standardising pixels with the TRAINING set's mean and standard deviation: inputs centred
// on 0 with unit spread keep the first layer's pre-activations in a range where ReLU units
// neither all die nor all saturate early on. The test set gets the same (training) stats.
struct PixelStats {
  float mean = 0.0f;
  float std = 1.0f;
};
PixelStats pixel_stats(const ImageDataset& ds);       // over every pixel of every image
void standardise(ImageDataset& ds, PixelStats stats);  // p = (p - mean) / std, in place

// Keeps the first n examples (n <= 0 or n >= size keeps all): short runs in tests/notebooks.
void truncate_dataset(ImageDataset& ds, int64_t n);

// Yields shuffled mini-batches, copied into contiguous buffers. Same seed, same order.
class BatchLoader {
 public:
  BatchLoader(const ImageDataset& ds, int batch_size, bool shuffle, uint64_t seed);
  // Starts a new pass over the data (reshuffles when shuffling).
  void start_epoch();
  // Fills x (B, rows*cols) and y (B); returns the number of rows B (the last batch may be
  // smaller), or 0 at the end of the epoch.
  int next(Tensor& x, std::vector<int32_t>& y);
  int64_t batches_per_epoch() const;

 private:
  const ImageDataset& ds_;
  int batch_size_;
  bool shuffle_;
  Rng rng_;
  std::vector<int32_t> order_;
  int64_t cursor_ = 0;
};

}  // namespace nn
