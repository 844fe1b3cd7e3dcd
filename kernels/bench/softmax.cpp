// kernels/bench/softmax.cpp: row-wise softmax (kernels/softmax.h) for the harness: three
// passes against the online softmax, with rows from L1-sized to larger than the L3.
//
// Sizes: "rowsxcols", each optionally with K or M: "64x50257", "2x16M".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/softmax.h"

namespace kernels::bench {

using harness::Check;
using harness::GuardedBuffer;

namespace {

std::vector<harness::Variant> softmax_variants() {
  std::vector<harness::Variant> out = harness::variants_of(softmax_versions());
  return out;
}

class SoftmaxProblem : public harness::Problem {
 public:
  SoftmaxProblem(int rows, int cols, uint64_t seed)
      : rows_(rows), cols_(cols), n_(static_cast<size_t>(rows) * static_cast<size_t>(cols)), x_(n_), y_(n_),
        want_(n_) {
    // [-8, 8]: probabilities spread over e^16 ~ 1e7, as a trained model's logits do.
    harness::fill_random(x_.span(), seed, -8.0f, 8.0f);
    for (int r = 0; r < rows; ++r) {
      const float* x = x_.data() + static_cast<size_t>(r) * cols;
      double* want = want_.data() + static_cast<size_t>(r) * cols;
      const double m = *std::max_element(x, x + cols);
      double sum = 0.0;
      for (int j = 0; j < cols; ++j) sum += std::exp(x[j] - m);
      for (int j = 0; j < cols; ++j) want[j] = std::exp(x[j] - m) / sum;
    }
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "rows=" << short_count(static_cast<size_t>(rows_)) << " cols=" << short_count(static_cast<size_t>(cols_));
    return os.str();
  }
  // The work is one exp per element (two in v2, v4): not FLOPs worth counting. GB/s only.
  double flops() const override { return 0.0; }
  // Three passes (v1, v3): read x (max); read x, write y (exp); read y, write y
  // (normalise) = 20 B/element. Online (v2, v4): read x (max and sum); read x, write y =
  // 12 B/element. Told apart by the version's name, not by its place in the table.
  double bytes(size_t variant) const override {
    const std::string name = softmax_versions()[variant].name;
    const bool three_pass = name == "three-pass" || name == "three-pass-simd";
    const double per_element = three_pass ? 20.0 : 12.0;
    return per_element * static_cast<double>(n_);
  }
  bool flush_between_runs() const override { return !fits_in_cache(8.0 * static_cast<double>(n_)); }

  void run(size_t variant) override { softmax_versions()[variant].fn(y_.data(), x_.data(), rows_, cols_); }

  Check validate(size_t variant) override {
    std::fill(y_.data(), y_.data() + n_, GuardedBuffer::kNaN);
    run(variant);
    // Relative: probabilities range over 1e7. v3's and v4's float lane sums (<= 128
    // terms) stay within ~8e-6 at worst, libm's exp and poly_exp within ~2e-7.
    Check c = harness::compare("probs", y_.span(), want_, {1e-12, 1e-5});
    const std::string damage = y_.guard_damage("probs");
    if (!damage.empty()) {
      ++c.mismatches;
      c.report += damage;
    }
    return c;
  }

 private:
  int rows_, cols_;
  size_t n_;
  GuardedBuffer x_, y_;
  std::vector<double> want_;
};

}  // namespace

harness::OpBench softmax_bench() {
  harness::OpBench op;
  op.name = "softmax";
  op.summary = "row-wise softmax: three passes vs online (one pass for max and sum), scalar and SIMD";
  op.size_help = "rowsxcols, e.g. 64x50257 or 2x16M (K = 1024, M = 1024^2)";
  // Per buffer: 16 KB (L1), 256 KB (L2), 3 MB of GPT-2-vocabulary rows (L3), 32 MB of
  // 1024-wide rows (memory, but every row in L1), two 64 MB rows (every pass from memory).
  op.default_sizes = {"4x1024", "64x1024", "16x50257", "8192x1024", "2x16M"};
  // 2053 > 2 chunks of 1024: v3's and v4's chunks and ragged last chunk run too.
  op.quick_sizes = {"7x33", "3x2053"};
  op.variants = softmax_variants();
  op.make = [](const std::string& size, uint64_t seed) -> std::unique_ptr<harness::Problem> {
    const std::vector<size_t> d = parse_dims("softmax", size, 2, "rowsxcols, e.g. 64x50257");
    return std::make_unique<SoftmaxProblem>(static_cast<int>(d[0]), static_cast<int>(d[1]), seed);
  };
  return op;
}

}  // namespace kernels::bench
