// nn/tensor.h: an owning, contiguous, row-major float tensor, and a non-owning view.
//
// A Tensor is a shape plus its floats in a kernels::Array<float> in host memory (the tree's
// one owning buffer, kernels/memory.h: 64-byte aligned, for the SIMD kernels). Element (i, j, k) of a tensor of
// shape (I, J, K) lives at data()[(i * J + j) * K + k]. Ops never take a Tensor: they take
// raw pointers and named sizes (see nn/ops.h), so the same op works on a Tensor, on a
// slice of one, or on any buffer. Tensors are the containers that own those buffers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "io/shape.h"
#include "kernels/memory.h"
#include "nn/check.h"

namespace nn {

class Rng;

// Shape, numel_of, shape_str: io/shape.h (io/ reads tensors from files too).

// A window onto someone else's floats: a pointer and a shape. It does not own or free.
struct TensorView {
  float* data = nullptr;
  Shape shape;

  int64_t numel() const { return numel_of(shape); }
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i)); }
  std::span<float> span() const { return {data, static_cast<size_t>(numel())}; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, float fill = 0.0f);
  Tensor(std::initializer_list<int64_t> shape) : Tensor(Shape(shape)) {}
  // A copy of `data`: prod(shape) floats, row-major; nn::Error otherwise. (It took the
  // vector over when the storage was a std::vector; an Array cannot adopt a vector's floats.)
  Tensor(Shape shape, const std::vector<float>& data);

  // Filled from a seeded generator, e.g. for weight initialisation.
  static Tensor uniform(Shape shape, Rng& rng, float lo, float hi);
  static Tensor normal(Shape shape, Rng& rng, float mean, float std);

  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(static_cast<size_t>(i)); }
  int64_t numel() const { return static_cast<int64_t>(data_.size()); }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> span() { return {data_.data(), data_.size()}; }
  std::span<const float> span() const { return {data_.data(), data_.size()}; }

  float& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }
  // 2-D element access for readability in lessons: t.at(row, col).
  float& at(int64_t r, int64_t c) { return data_[static_cast<size_t>(r * shape_.back() + c)]; }
  float at(int64_t r, int64_t c) const { return data_[static_cast<size_t>(r * shape_.back() + c)]; }

  void fill(float value);
  // Same storage, new shape with the same number of elements.
  void reshape(Shape shape);
  // Rows [begin, end) along the first axis, as a view: a batch out of a dataset.
  TensorView rows(int64_t begin, int64_t end);
  TensorView view() { return {data(), shape_}; }

 private:
  Shape shape_;
  kernels::Array<float> data_;
};

}  // namespace nn
