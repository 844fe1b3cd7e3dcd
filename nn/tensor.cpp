#include "nn/tensor.h"

#include <algorithm>

#include "nn/rng.h"

namespace nn {

// Uninitialised, then one pass writing `fill` (as std::vector(n, fill) did).
Tensor::Tensor(Shape shape, float fill)
    : shape_(std::move(shape)),
      data_(kernels::host_memory(), static_cast<size_t>(numel_of(shape_)), kernels::uninitialized) {
  std::fill(data_.begin(), data_.end(), fill);
}

Tensor::Tensor(Shape shape, const std::vector<float>& data) : shape_(std::move(shape)) {
  NN_CHECK(static_cast<int64_t>(data.size()) == numel_of(shape_),
           "a tensor of shape " << shape_str(shape_) << " needs " << numel_of(shape_) << " floats, got " << data.size());
  data_ = kernels::Array<float>(kernels::host_memory(), data);
}

Tensor Tensor::uniform(Shape shape, Rng& rng, float lo, float hi) {
  Tensor t(std::move(shape));
  for (float& v : t.data_) {
    v = rng.uniform(lo, hi);
  }
  return t;
}

Tensor Tensor::normal(Shape shape, Rng& rng, float mean, float std) {
  Tensor t(std::move(shape));
  for (float& v : t.data_) {
    v = rng.normal(mean, std);
  }
  return t;
}

void Tensor::fill(float value) { std::fill(data_.begin(), data_.end(), value); }

void Tensor::reshape(Shape shape) {
  NN_CHECK(numel_of(shape) == numel(), "cannot reshape " << shape_str(shape_) << " ("
                                           << numel() << " elements) to " << shape_str(shape));
  shape_ = std::move(shape);
}

TensorView Tensor::rows(int64_t begin, int64_t end) {
  NN_CHECK(ndim() >= 1, "rows() needs a tensor with at least one axis");
  NN_CHECK(0 <= begin && begin <= end && end <= shape_[0],
           "rows [" << begin << ", " << end << ") out of range for shape " << shape_str(shape_));
  Shape s = shape_;
  s[0] = end - begin;
  const int64_t row_size = numel() / std::max<int64_t>(shape_[0], 1);
  return {data() + begin * row_size, s};
}

}  // namespace nn
