// kernels/cuda/bench/elementwise.cpp: the element-wise ops for the GPU harness: cos2 (the
// fusion demo), gelu, bias + gelu (kernels/cuda/elementwise.cu).
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
  void run(size_t v) override { dev_.kernels().cos2.at(v).fn(out_.data(), in_.data(), static_cast<int>(n_)); }
  harness::Check validate(size_t v) override {
    out_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    return compare_device("out", out_, want_, {1e-5, 1e-5});
  }

 private:
  Device& dev_;
  size_t n_;
  Array<float> in_, out_;
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

// ---- gelu, bias + gelu ----------------------------------------------------------------------

namespace {

// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in double.
double gelu_ref(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// tanhf is within 2 ulp; where 1 + tanh(u) cancels (x from -3 to -5 here) that is up to
// 0.5 |x| 2 ulp(1) ~ 6e-7 absolute on a result near 0: atol 1e-6; elsewhere a few ulp of
// the result: rtol 1e-5.
constexpr harness::Tolerance kGeluTol{1e-6, 1e-5};

// A copy of host one float into a new buffer of n + 1: a start 4- but not 16-byte aligned.
Array<float> shifted_copy(Device& dev, const std::vector<float>& host) {
  Array<float> b(dev, host.size() + 1, kernels::uninitialized);
  dev.from_host(b.data() + 1, host.data(), host.size() * sizeof(float));
  return b;
}

class GeluProblem final : public Problem {
 public:
  GeluProblem(Device& dev, size_t n, uint64_t seed) : dev_(dev), n_(n), out_(dev, n + 1), want_(n) {
    // [-5, 5]: both tails (gelu ~ 0 and gelu ~ x) and the bend between them.
    std::vector<float> host;
    in_ = random_buffer(dev, n, seed, -5.0f, 5.0f, &host);
    in_shifted_ = shifted_copy(dev, host);
    for (size_t i = 0; i < n; ++i) want_[i] = gelu_ref(host[i]);
  }
  std::string shape() const override { return "n=" + kernels::bench::short_count(n_); }
  // ~20 FLOPs and a tanh per element, against 8 bytes: memory-bound; GB/s only.
  double flops() const override { return 0.0; }
  // Both versions read and write each element once; v2 only moves them in fewer, wider
  // instructions.
  double bytes(size_t) const override { return static_cast<double>(n_) * 8.0; }
  void run(size_t v) override { run_at(v, 0); }
  // Aligned, then with input and output one float into their buffers (v2's fallback).
  harness::Check validate(size_t v) override {
    return validate_aligned_and_shifted(dev_, out_, n_, want_, kGeluTol, [&](size_t at) { run_at(v, at); });
  }

 private:
  void run_at(size_t v, size_t at) {
    const float* in = at == 0 ? in_.data() : in_shifted_.data() + 1;
    dev_.kernels().gelu.at(v).fn(out_.data() + at, in, static_cast<int>(n_));
  }

  Device& dev_;
  size_t n_;
  Array<float> in_, in_shifted_, out_;
  std::vector<double> want_;
};

class BiasGeluProblem final : public Problem {
 public:
  BiasGeluProblem(Device& dev, size_t rows, size_t cols, uint64_t seed)
      : dev_(dev), rows_(rows), cols_(cols), n_(rows * cols), out_(dev, n_ + 1), want_(n_) {
    // inp in [-4, 4], bias in [-1, 1]: pre-activations over [-5, 5], as GeluProblem.
    std::vector<float> inp, bias;
    inp_ = random_buffer(dev, n_, seed, -4.0f, 4.0f, &inp);
    bias_ = random_buffer(dev, cols, seed + 1, -1.0f, 1.0f, &bias);
    inp_shifted_ = shifted_copy(dev, inp);
    bias_shifted_ = shifted_copy(dev, bias);
    // out = gelu(inp + bias[col]), in double
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) {
        want_[r * cols + c] = gelu_ref(static_cast<double>(inp[r * cols + c]) + static_cast<double>(bias[c]));
      }
    }
  }
  std::string shape() const override {
    return "rows=" + kernels::bench::short_count(rows_) + " cols=" + kernels::bench::short_count(cols_);
  }
  double flops() const override { return 0.0; }
  // Unfused (v1): read inp, write out (bias add), read out, write out (gelu): 16 B/element;
  // fused (v2, v3): read inp, write out: 8 B. The bias (cols floats) is read once. Told
  // apart by the version's name, not its place in the table.
  double bytes(size_t v) const override {
    const bool unfused = std::string(dev_.kernels().bias_gelu.at(v).name) == "unfused";
    return (unfused ? 16.0 : 8.0) * static_cast<double>(n_) + 4.0 * static_cast<double>(cols_);
  }
  void run(size_t v) override { run_at(v, 0); }
  // Aligned, then with inp, bias and out one float into their buffers (v3's fallback).
  harness::Check validate(size_t v) override {
    return validate_aligned_and_shifted(dev_, out_, n_, want_, kGeluTol, [&](size_t at) { run_at(v, at); });
  }

 private:
  void run_at(size_t v, size_t at) {
    const float* inp = at == 0 ? inp_.data() : inp_shifted_.data() + 1;
    const float* bias = at == 0 ? bias_.data() : bias_shifted_.data() + 1;
    dev_.kernels().bias_gelu.at(v).fn(out_.data() + at, inp, bias, static_cast<int>(rows_), static_cast<int>(cols_));
  }

  Device& dev_;
  size_t rows_, cols_, n_;
  Array<float> inp_, bias_, inp_shifted_, bias_shifted_, out_;
  std::vector<double> want_;
};

}  // namespace

Op gelu_op() {
  Op op;
  op.name = "gelu";
  op.summary = "out = gelu(x), tanh form: one element per thread vs float4 with a grid-stride loop";
  op.sizes = {"64M"};
  op.test_sizes = {"1000", "4099", "3"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().gelu); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const size_t n = kernels::bench::parse_dims("gelu", size, 1, "n, e.g. 64M")[0];
    return std::make_unique<GeluProblem>(dev, n, seed);
  };
  return op;
}

Op bias_gelu_op() {
  Op op;
  op.name = "bias_gelu";
  op.summary = "out = gelu(inp + bias): bias add then gelu (4 trips) vs fused (2 trips) vs fused with float4";
  // 16384 x 3072: the GPT-2 small MLP's hidden layer (4 x 768) for 16 x 1024 tokens, 48M floats.
  op.sizes = {"16384x3072"};
  op.test_sizes = {"7x1000", "33x67", "5x4099"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().bias_gelu); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<size_t> d = kernels::bench::parse_dims("bias_gelu", size, 2, "rowsxcols, e.g. 16384x3072");
    return std::make_unique<BiasGeluProblem>(dev, d[0], d[1], seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
