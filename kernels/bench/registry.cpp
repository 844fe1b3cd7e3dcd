// kernels/bench/registry.cpp: the list of ops `nnlab bench` can run.
#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "kernels/bench/ops.h"
#include "kernels/ceilings.h"

namespace kernels::bench {

const std::vector<harness::OpBench>& ops() {
  static const std::vector<harness::OpBench> all = {
      matmul_bench(),
      cos2_bench(),
      bias_gelu_bench(),
      softmax_bench(),
      layernorm_bench(),
      matvec_bench(),
      int8_gemm_bench(),
      attention_decode_bench(),
      encoder_bench(),
      encoder_backward_bench(),
      layernorm_backward_bench(),
      residual_layernorm_bench(),
      linear_bench(),
      linear_backward_bench(),
      linear_gelu_bench(),
      attention_bench(),
      attention_backward_bench(),
      gelu_bench(),
      gelu_backward_bench(),
      residual_bench(),
      dropout_bench(),
      dropout_backward_bench(),
      crossentropy_bench(),
      crossentropy_backward_bench(),
      adamw_bench(),
      sum_squares_bench(),
      scale_bench(),
      rmsnorm_bench(),
      rmsnorm_backward_bench(),
      rope_bench(),
      rope_backward_bench(),
      swiglu_bench(),
      swiglu_backward_bench(),
  };
  return all;
}

const harness::OpBench& op(const std::string& name) {
  std::string known;
  for (const harness::OpBench& o : ops()) {
    if (o.name == name) return o;
    known += (known.empty() ? "" : ", ") + o.name;
  }
  throw std::invalid_argument("unknown op '" + name + "': the bench knows " + known);
}

// ---- helpers the op descriptions share ----------------------------------------------------

std::vector<size_t> parse_dims(const std::string& op, const std::string& size, size_t count,
                               const std::string& help) {
  constexpr size_t kLimit = size_t{1} << 30;
  auto bad = [&]() {
    std::ostringstream os;
    os << op << " size '" << size << "': write " << help;
    return std::invalid_argument(os.str());
  };
  std::vector<size_t> dims;
  size_t product = 1;
  size_t pos = 0;
  while (true) {
    const size_t x = size.find('x', pos);
    std::string part = size.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    size_t unit = 1;
    if (!part.empty() && (part.back() == 'K' || part.back() == 'M')) {
      unit = part.back() == 'K' ? size_t{1} << 10 : size_t{1} << 20;
      part.pop_back();
    }
    const bool digits = std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (part.empty() || part.size() > 10 || !digits) throw bad();
    const size_t value = std::stoull(part) * unit;
    if (value < 1 || value > kLimit) throw bad();
    product *= value;
    if (product > kLimit) throw bad();
    dims.push_back(value);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (dims.size() != count) throw bad();
  return dims;
}

std::string short_count(size_t n) {
  std::ostringstream os;
  if (n >= (size_t{1} << 20) && n % (size_t{1} << 20) == 0) {
    os << (n >> 20) << "M";
  } else if (n >= (size_t{1} << 10) && n % (size_t{1} << 10) == 0) {
    os << (n >> 10) << "K";
  } else {
    os << n;
  }
  return os.str();
}

bool fits_in_cache(double bytes) { return bytes <= 0.5 * static_cast<double>(last_level_cache_bytes()); }

}  // namespace kernels::bench
