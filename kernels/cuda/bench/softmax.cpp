// kernels/cuda/bench/softmax.cpp: row-wise softmax (kernels/cuda/softmax.cu) for the GPU
// harness: one thread per row (three passes, then online) against a warp and a block per row.
//
// Sizes: "rowsxcols". The defaults: "4096x50304" (the GPT's logits, a vocabulary of 50304,
// for 4096 tokens: 824 MB each way) and "16384x1024" (short rows, as attention's T x T
// scores have: the same bytes spread over 4x the rows).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims, short_count
#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

namespace {

class SoftmaxProblem final : public Problem {
 public:
  SoftmaxProblem(Device& dev, size_t rows, size_t cols, uint64_t seed)
      : dev_(dev), rows_(rows), cols_(cols), n_(rows * cols), out_(dev, n_ + 1), want_(n_) {
    // [-8, 8]: probabilities spread over e^16 ~ 1e7, as a trained model's logits do.
    std::vector<float> host;
    in_ = random_buffer(dev, n_, seed, -8.0f, 8.0f, &host);
    // The same input again, one float into its buffer: validate runs every version on it
    // too, so v4's float4 path meets a start that is 4- but not 16-byte aligned.
    in_shifted_ = Array<float>(dev, n_ + 1, kernels::uninitialized);
    dev.from_host(in_shifted_.data() + 1, host.data(), n_ * sizeof(float));
    // softmax(x)_j = exp(x_j - max) / sum_k exp(x_k - max), in double
    for (size_t r = 0; r < rows; ++r) {
      const float* x = host.data() + r * cols;
      double* want = want_.data() + r * cols;
      double m = x[0];
      for (size_t j = 1; j < cols; ++j) m = std::max(m, static_cast<double>(x[j]));
      double sum = 0.0;
      for (size_t j = 0; j < cols; ++j) {
        want[j] = std::exp(x[j] - m);
        sum += want[j];
      }
      for (size_t j = 0; j < cols; ++j) want[j] /= sum;
    }
  }

  std::string shape() const override {
    return "rows=" + kernels::bench::short_count(rows_) + " cols=" + kernels::bench::short_count(cols_);
  }
  // One exp per element: not FLOPs worth counting. GB/s only.
  double flops() const override { return 0.0; }
  // Every pass over a row counted as a trip to memory: three-pass (v1) reads x three times
  // and writes y once, 16 B/element; the online versions read x twice, 12 B/element.
  // (Whether L2 serves the re-reads of a 197 KB row is for the measurement to show.) Told
  // apart by the version's name, not its place in the table.
  double bytes(size_t v) const override {
    const bool three_pass = std::string(dev_.kernels().softmax.at(v).name) == "three-pass";
    return (three_pass ? 16.0 : 12.0) * static_cast<double>(n_);
  }
  void run(size_t v) override { run_at(v, 0); }

  // Relative: probabilities range over 1e7 (atol only keeps the tiniest from failing on
  // rounding). The row's sum is the weak spot: one thread adding cols floats (v1, v2)
  // drifts like cols * eps at worst; measured on the CPU, the worst of 1000 random rows
  // was 5.4e-5 relative at cols = 50304 and 6e-6 at 4099. rtol = 1e-5 + 4e-9 cols leaves
  // 3-4x margin at both (2.1e-4, 2.6e-5); the warp and block versions split the sum and do
  // better.
  harness::Check validate(size_t v) override {
    const harness::Tolerance tol{1e-12, 1e-5 + 4e-9 * static_cast<double>(cols_)};
    return validate_aligned_and_shifted(dev_, out_, n_, want_, tol, [&](size_t at) { run_at(v, at); });
  }

 private:
  // at = 0: the aligned buffers; at = 1: input and output one float into theirs.
  void run_at(size_t v, size_t at) {
    const float* in = at == 0 ? in_.data() : in_shifted_.data() + 1;
    dev_.kernels().softmax.at(v).fn(out_.data() + at, in, static_cast<int>(rows_), static_cast<int>(cols_));
  }

  Device& dev_;
  size_t rows_, cols_, n_;
  Array<float> in_, in_shifted_, out_;
  std::vector<double> want_;
};

}  // namespace

Op softmax_op() {
  Op op;
  op.name = "softmax";
  op.summary = "softmax of each row: thread per row (3 passes, online), warp per row, block per row with float4";
  op.sizes = {"4096x50304", "16384x1024"};
  op.test_sizes = {"7x1000", "33x67", "5x4099"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().softmax); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<size_t> d = kernels::bench::parse_dims("softmax", size, 2, "rowsxcols, e.g. 4096x50304");
    return std::make_unique<SoftmaxProblem>(dev, d[0], d[1], seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
