// kernels/bench/cos2.cpp: y = cos(cos(x)) (kernels/elementwise.h) for the harness: fused
// against unfused, over sizes from L1-resident to far beyond the last-level cache, with
// libm's cos as the peer that shows why the versions use a cos of their own.
//
// Sizes: n floats, "4096", "4K" (x 1024) or "64M" (x 1024^2).
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/elementwise.h"

namespace kernels::bench {

using harness::Check;
using harness::GuardedBuffer;

namespace {

// The variants: every version, then libm as the peer.
std::vector<harness::Variant> cos2_variants() {
  std::vector<harness::Variant> out = harness::variants_of(cos2_versions());
  out.push_back({"libm", "std::cos", "y = std::cos(std::cos(x)), one pass: a libm call per cos", true});
  return out;
}

class Cos2Problem : public harness::Problem {
 public:
  Cos2Problem(size_t n, uint64_t seed) : n_(n), x_(n), y_(n), tmp_(n), want_(n) {
    // [-10, 10]: every input needs a range reduction (k in -2..2), like activations do.
    harness::fill_random(x_.span(), seed, -10.0f, 10.0f);
    for (size_t i = 0; i < n; ++i) want_[i] = std::cos(std::cos(static_cast<double>(x_.data()[i])));
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "n=" << short_count(n_);
    return os.str();
  }
  // A cos is ~15 instructions of ours or a libm call: counting them as FLOPs would say
  // nothing, so none are counted and the harness reports GB/s only.
  double flops() const override { return 0.0; }
  // v1 moves x -> tmp -> y: 16 B/element; the fused versions and libm: x -> y, 8.
  double bytes(size_t variant) const override {
    const double per_element = variant == 0 ? 16.0 : 8.0;
    return per_element * static_cast<double>(n_);
  }
  // x, tmp and y: 12 B/element resident. Below half the L3, time warm caches.
  bool flush_between_runs() const override { return !fits_in_cache(12.0 * static_cast<double>(n_)); }

  void run(size_t variant) override {
    if (variant < cos2_versions().size()) {
      cos2_versions()[variant].fn(y_.data(), tmp_.data(), x_.data(), n_);
      return;
    }
    // The peer: libm's cos, float overload, one fused pass.
    const float* x = x_.data();
    float* y = y_.data();
    for (size_t i = 0; i < n_; ++i) y[i] = std::cos(std::cos(x[i]));
  }

  Check validate(size_t variant) override {
    std::fill(y_.data(), y_.data() + n_, GuardedBuffer::kNaN);  // an output never written fails
    run(variant);
    // poly_cos is within 1e-6 of cos (kernels/elementwise.h); two of them, and the outer
    // one's slope is at most 1: 2e-6.
    Check c = harness::compare("y", y_.span(), want_, {2e-6, 0.0});
    for (const std::string& damage : {y_.guard_damage("y"), tmp_.guard_damage("tmp")}) {
      if (!damage.empty()) {
        ++c.mismatches;
        c.report += damage;
      }
    }
    return c;
  }

 private:
  size_t n_;
  GuardedBuffer x_, y_, tmp_;
  std::vector<double> want_;
};

}  // namespace

harness::OpBench cos2_bench() {
  harness::OpBench op;
  op.name = "cos2";
  op.summary = "y = cos(cos(x)): two passes vs one fused pass, from L1-sized to memory-sized";
  op.size_help = "n floats, e.g. 4096, 4K or 64M (K = 1024, M = 1024^2)";
  // 16 KB (L1), 256 KB (L2), 4 MB (L3), 64 MB and 256 MB per buffer (memory).
  op.default_sizes = {"4K", "64K", "1M", "16M", "64M"};
  // 70001 > 64K: v3's threaded path runs too.
  op.quick_sizes = {"1003", "70001"};
  op.variants = cos2_variants();
  op.make = [](const std::string& size, uint64_t seed) -> std::unique_ptr<harness::Problem> {
    const std::vector<size_t> n = parse_dims("cos2", size, 1, "n floats, e.g. 4096, 4K or 64M");
    return std::make_unique<Cos2Problem>(n[0], seed);
  };
  // libm: ~20-40 ns per element; 64M elements would take seconds per run.
  op.too_slow = [](size_t variant, const harness::Problem& p) {
    return variant == cos2_versions().size() && p.bytes(variant) > 8.0 * 16 * 1024 * 1024;
  };
  return op;
}

}  // namespace kernels::bench
