#include "io/shape.h"

#include <sstream>

#include "nn/check.h"

namespace nn {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    NN_CHECK(d >= 0, "tensor dimensions must be non-negative, got " << shape_str(shape));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    os << (i ? ", " : "") << shape[i];
  }
  os << ")";
  return os.str();
}

}  // namespace nn
