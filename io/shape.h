// io/shape.h: a tensor's shape, its element count and its printed form. One definition for
// the whole tree: nn/tensor.h includes it (nn::Tensor's shape) and io/safetensors.cpp uses it
// (a file's tensor shapes), so the two agree on sizes and on the wording of their errors.
// It lives in io/ because io/ sits below nn/ (scripts/check_layers.py): nn/ may include io/,
// never the other way round.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nn {

using Shape = std::vector<int64_t>;

// The product of the dimensions; nn::Error for a negative one.
int64_t numel_of(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(64, 784)"

}  // namespace nn
