// kernels/cuda/bench/elementwise.cpp: the element-wise ops for the GPU harness: cos2 (the
// fusion demo), gelu, bias + gelu (kernels/cuda/elementwise.cu).
#include <cmath>
#include <stdexcept>

#include "kernels/bench/ops.h"  // parse_dims, short_count
#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

namespace {

// ---- cos2 -------------------------------------------------------------------------------

class Cos2Problem final : public Problem {
 public:
  Cos2Problem(Device& dev, size_t n, uint64_t seed) : dev_(dev), n_(n), out_(dev, n) {
    std::vector<float> host;
    in_ = random_buffer(dev, n, seed, -3.0f, 3.0f, &host);
    want_.resize(n);
    for (size_t i = 0; i < n; ++i) want_[i] = std::cos(std::cos(static_cast<double>(host[i])));
  }
  std::string shape() const override { return "n=" + kernels::bench::short_count(n_); }
  double flops() const override { return 0.0; }
  // v1 (two kernels): read in, write out, read out, write out; v2 (fused): read, write.
  double bytes(size_t v) const override { return static_cast<double>(n_) * 4.0 * (v == 0 ? 4.0 : 2.0); }
  void run(size_t v) override { dev_.kernels().cos2.at(v).run(out_.data(), in_.data(), static_cast<int>(n_)); }
  harness::Check validate(size_t v) override {
    out_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    return compare_device("out", out_, want_, {1e-5, 1e-5});
  }

 private:
  Device& dev_;
  size_t n_;
  Buffer<float> in_, out_;
  std::vector<double> want_;
};

}  // namespace

Op cos2_op() {
  Op op;
  op.name = "cos2";
  op.summary = "out = cos(cos(x)): two kernels (4 memory trips) vs one fused kernel (2 trips)";
  op.sizes = {"64M"};
  op.test_sizes = {"1000", "4099"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().cos2); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const size_t n = kernels::bench::parse_dims("cos2", size, 1, "n, e.g. 64M")[0];
    return std::make_unique<Cos2Problem>(dev, n, seed);
  };
  return op;
}

// ---- gelu, bias + gelu (to be written) -----------------------------------------------------

Op gelu_op() {
  Op op;
  op.name = "gelu";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().gelu); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("gelu: not written yet");
  };
  return op;
}

Op bias_gelu_op() {
  Op op;
  op.name = "bias_gelu";
  op.summary = "(to be written)";
  op.variants = [](Device& dev) { return variants_of(dev.kernels().bias_gelu); };
  op.make = [](Device&, const std::string&, uint64_t) -> std::unique_ptr<Problem> {
    throw std::invalid_argument("bias_gelu: not written yet");
  };
  return op;
}

}  // namespace kernels::cuda::bench
