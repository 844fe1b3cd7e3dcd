// kernels/cuda/bench/adamw.cpp: one AdamW step (kernels/cuda/adamw.cu) for the GPU harness.
//
// Sizes: "n" parameters, e.g. "124M" (GPT-2 small has 124M: one optimizer step over all of it,
// 3.6 GB of traffic) or "16M"; "n+k" starts every buffer k floats past a 16-byte boundary,
// as a slice at an odd offset of a flat parameter buffer would: v2 then takes its scalar loop.
// The state is mid-training: m and v nonzero, t = 20 (bias corrections still far from 1),
// weight decay on.
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims, short_count
#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

namespace {

using harness::Check;

class AdamWProblem final : public Problem {
 public:
  AdamWProblem(Device& dev, size_t n, size_t offset, uint64_t seed)
      : dev_(dev), n_(n), offset_(offset), p_(dev, n + offset), m_(dev, n + offset), v_(dev, n + offset),
        g_(dev, n + offset) {
    args_.lr = 1e-3f;
    args_.beta1 = 0.9f;
    args_.beta2 = 0.999f;
    args_.eps = 1e-8f;
    args_.weight_decay = 0.1f;
    args_.t = 20;
    const size_t total = n + offset;
    p0_.resize(total);
    m0_.resize(total);
    v0_.resize(total);
    std::vector<float> g(total);
    harness::fill_random(p0_, seed, -1.0f, 1.0f);
    harness::fill_random(m0_, seed + 1, -0.1f, 0.1f);
    harness::fill_random(v0_, seed + 2, 1e-6f, 1e-2f);  // a second moment is never negative
    harness::fill_random(g, seed + 3, -1.0f, 1.0f);
    g_.upload(g);

    // The reference: PyTorch's formula (gpt/backend.h) in double, from the same float inputs.
    const double lr = args_.lr, b1 = args_.beta1, b2 = args_.beta2, eps = args_.eps, wd = args_.weight_decay;
    const double t = args_.t;
    const double step_size = lr / (1.0 - std::pow(b1, t));
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, t));
    want_p_.resize(n);
    want_m_.resize(n);
    want_v_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t j = offset + i;
      const double gi = g[j];
      const double m = b1 * m0_[j] + (1.0 - b1) * gi;
      const double v = b2 * v0_[j] + (1.0 - b2) * gi * gi;
      want_p_[i] = p0_[j] * (1.0 - lr * wd) - step_size * m / (std::sqrt(v) / bc2_sqrt + eps);
      want_m_[i] = m;
      want_v_[i] = v;
    }
  }
  std::string shape() const override {
    return "n=" + kernels::bench::short_count(n_) + (offset_ ? " offset=" + std::to_string(offset_) : "");
  }
  // decay (1), m (3), v (4), sqrt, divide, add eps, step_size * m / denom, subtract (5): 13 per
  // parameter, as v2 writes it.
  double flops() const override { return 13.0 * static_cast<double>(n_); }
  // Both versions: read p, m, v, g, write p, m, v: 28 B per parameter.
  double bytes(size_t) const override { return 28.0 * static_cast<double>(n_); }
  void run(size_t v) override {
    dev_.kernels().adamw.at(v).fn(p_.data() + offset_, m_.data() + offset_, v_.data() + offset_,
                                   g_.data() + offset_, n_, args_);
  }
  Check validate(size_t v) override {
    p_.upload(p0_);  // the update is in place: start every run from the same state
    m_.upload(m0_);
    v_.upload(v0_);
    run(v);
    dev_.synchronize();
    // p is O(1), rounded to float twice (6e-8 each); v1's device powf errs by up to 2 ulp on
    // b2^t, which moves 1 - b2^t = 0.02 by ~6e-6 relative, the step (<= 0.02) by ~6e-8.
    // m = b1 m + (1 - b1) g adds two float products of size <= 0.1 that may nearly cancel:
    // a few roundings of 0.1 (6e-9 each) in absolute terms. v's two terms are positive: relative.
    Check c = compare_range("p", p_, want_p_, {2e-7, 1e-6});
    c = harness::merge(c, compare_range("m", m_, want_m_, {2e-8, 1e-6}));
    return harness::merge(c, compare_range("v", v_, want_v_, {1e-12, 1e-6}));
  }

 private:
  // Compares [offset, offset + n) of a device buffer with the reference.
  Check compare_range(const std::string& name, const Array<float>& got, const std::vector<double>& want,
                      harness::Tolerance tol) const {
    const std::vector<float> host = got.to_vector();
    return harness::compare(name, std::span<const float>(host).subspan(offset_, n_), want, tol);
  }

  Device& dev_;
  size_t n_, offset_;
  Array<float> p_, m_, v_, g_;
  AdamWArgs args_;
  std::vector<float> p0_, m0_, v0_;
  std::vector<double> want_p_, want_m_, want_v_;
};

}  // namespace

Op adamw_op() {
  Op op;
  op.name = "adamw";
  op.summary = "AdamW step: thread per param with per-thread powf vs float4 grid-stride with host-side constants";
  op.sizes = {"124M", "16M"};
  // 1001 and 4099: n % 4 != 0 (v2's scalar tail); 4099+1: unaligned buffers (v2's scalar loop).
  op.test_sizes = {"1001", "4099", "4099+1"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().adamw); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const size_t plus = size.find('+');
    const std::string help = "n or n+offset (floats, 0-3), e.g. 124M or 4099+1";
    const size_t n = kernels::bench::parse_dims("adamw", size.substr(0, plus), 1, help)[0];
    size_t offset = 0;
    if (plus != std::string::npos) {
      const std::string k = size.substr(plus + 1);
      if (k.size() != 1 || k[0] < '0' || k[0] > '3') {
        throw std::invalid_argument("adamw size '" + size + "': write " + help);
      }
      offset = static_cast<size_t>(k[0] - '0');
    }
    return std::make_unique<AdamWProblem>(dev, n, offset, seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
