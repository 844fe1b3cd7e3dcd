// kernels/bench/bias_gelu.cpp: out = gelu(inp + bias) (kernels/bias_gelu.h) for the
// harness: two passes against one, from L1-sized to GPT-2's MLP activations.
//
// Sizes: "BxOC" (rows of the matmul output x its width), each optionally with K or M.
#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/bias_gelu.h"

namespace kernels::bench {

using harness::Check;
using harness::GuardedBuffer;

namespace {

std::vector<harness::Variant> bias_gelu_variants() {
  std::vector<harness::Variant> out = harness::variants_of(bias_gelu_versions());
  return out;
}

// gelu with the tanh approximation, in double, as GPT-2 defines it.
double gelu_reference(double x) {
  const double sqrt_2_over_pi = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
}

class BiasGeluProblem : public harness::Problem {
 public:
  BiasGeluProblem(int B, int OC, uint64_t seed)
      : B_(B), OC_(OC), n_(static_cast<size_t>(B) * static_cast<size_t>(OC)), inp_(n_), bias_(OC), out_(n_),
        want_(n_) {
    // Pre-activations of a trained MLP are O(1); [-4, 4] spans GELU's curved part and
    // both of its tails.
    harness::fill_random(inp_.span(), seed, -3.0f, 3.0f);
    harness::fill_random(bias_.span(), seed + 1, -1.0f, 1.0f);
    for (size_t i = 0; i < n_; ++i) {
      const double pre = static_cast<double>(inp_.data()[i]) + bias_.data()[i % static_cast<size_t>(OC)];
      want_[i] = gelu_reference(pre);
    }
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "B=" << short_count(static_cast<size_t>(B_)) << " OC=" << short_count(static_cast<size_t>(OC_));
    return os.str();
  }
  // GELU's cost is an exp and a division, not FLOPs worth counting: GB/s only.
  double flops() const override { return 0.0; }
  // v1: read inp, write out, read out, write out = 16 B/element; v2: 8. Plus bias once.
  double bytes(size_t variant) const override {
    const double per_element = variant == 0 ? 16.0 : 8.0;
    return per_element * static_cast<double>(n_) + 4.0 * OC_;
  }
  bool flush_between_runs() const override { return !fits_in_cache(8.0 * static_cast<double>(n_)); }

  void run(size_t variant) override {
    bias_gelu_versions()[variant].fn(out_.data(), inp_.data(), bias_.data(), B_, OC_);
  }

  Check validate(size_t variant) override {
    std::fill(out_.data(), out_.data() + n_, GuardedBuffer::kNaN);
    run(variant);
    // poly_exp's ~2e-7 relative error moves gelu by at most |x| / 4 times it (< 1e-6
    // here), plus the float rounding of inp + bias and of the result.
    Check c = harness::compare("out", out_.span(), want_, {2e-6, 1e-6});
    const std::string damage = out_.guard_damage("out");
    if (!damage.empty()) {
      ++c.mismatches;
      c.report += damage;
    }
    return c;
  }

 private:
  int B_, OC_;
  size_t n_;
  GuardedBuffer inp_, bias_, out_;
  std::vector<double> want_;
};

}  // namespace

harness::OpBench bias_gelu_bench() {
  harness::OpBench op;
  op.name = "bias_gelu";
  op.summary = "out = gelu(inp + bias) after a matmul: two passes vs one fused pass";
  op.size_help = "BxOC (rows x width of the matmul output), e.g. 8192x3072";
  // Per buffer: 16 KB (L1), 768 KB (L2/L3), 6 MB (L3), 96 MB (memory: GPT-2 small's MLP,
  // B*T = 8*1024 rows of 4*768).
  op.default_sizes = {"4x1024", "64x3072", "512x3072", "8192x3072"};
  op.quick_sizes = {"7x33", "5x1003"};
  op.variants = bias_gelu_variants();
  op.make = [](const std::string& size, uint64_t seed) -> std::unique_ptr<harness::Problem> {
    const std::vector<size_t> d = parse_dims("bias_gelu", size, 2, "BxOC, e.g. 8192x3072");
    return std::make_unique<BiasGeluProblem>(static_cast<int>(d[0]), static_cast<int>(d[1]), seed);
  };
  return op;
}

}  // namespace kernels::bench
