// kernels/bench/layernorm.cpp: layernorm forward (kernels/layernorm.h) for the harness:
// three passes against one-pass statistics, scalar and SIMD, with rows from L1-sized to
// larger than the L3.
//
// Sizes: "rowsxC", each optionally with K or M: "8192x768", "2x16M".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/layernorm.h"

namespace kernels::bench {

using harness::Check;
using harness::GuardedBuffer;

namespace {

std::vector<harness::Variant> layernorm_variants() {
  std::vector<harness::Variant> out = harness::variants_of(layernorm_versions());
  return out;
}

class LayernormProblem : public harness::Problem {
 public:
  LayernormProblem(int rows, int C, uint64_t seed)
      : rows_(rows), C_(C), n_(static_cast<size_t>(rows) * static_cast<size_t>(C)), x_(n_), w_(C), b_(C),
        y_(n_), mean_(rows), rstd_(rows) {
    harness::fill_random(x_.span(), seed, -1.0f, 1.0f);
    harness::fill_random(w_.span(), seed + 1, 0.5f, 1.5f);
    harness::fill_random(b_.span(), seed + 2, -0.5f, 0.5f);
    const LayernormReference ref = layernorm_reference(x_.data(), w_.data(), b_.data(), rows, C);
    want_y_ = ref.out;
    want_mean_ = ref.mean;
    want_rstd_ = ref.rstd;
    const double cond = ref.cond;
    // Every version rounds the mean to float before x - mean: up to ulp(mean)/2 * rstd *
    // |w| (|w| <= 1.5) of error that no float code avoids; 1e-5 for the rest.
    out_atol_ = 1e-5 + 1.2e-7 * cond * 1.5;
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "rows=" << short_count(static_cast<size_t>(rows_)) << " C=" << short_count(static_cast<size_t>(C_));
    return os.str();
  }
  // As the algorithm states it: mean (1 add), variance (sub + FMA = 3), normalise (sub,
  // mul, FMA = 4): 8 FLOPs per element, whichever way a version arranges them.
  double flops() const override { return 8.0 * static_cast<double>(n_); }
  // v1, v4: read x three times, write y = 16 B/element; v2, v3: read x twice, write y = 12.
  // Plus weight and bias once, mean and rstd once.
  double bytes(size_t variant) const override {
    const double per_element = variant == 0 || variant == 3 ? 16.0 : 12.0;
    return per_element * static_cast<double>(n_) + 8.0 * C_ + 8.0 * rows_;
  }
  bool flush_between_runs() const override { return !fits_in_cache(8.0 * static_cast<double>(n_)); }

  void run(size_t variant) override {
    layernorm_versions()[variant].fn(y_.data(), mean_.data(), rstd_.data(), x_.data(), w_.data(), b_.data(),
                                     rows_, C_);
  }

  Check validate(size_t variant) override {
    std::fill(y_.data(), y_.data() + n_, GuardedBuffer::kNaN);
    std::fill(mean_.data(), mean_.data() + rows_, GuardedBuffer::kNaN);
    std::fill(rstd_.data(), rstd_.data() + rows_, GuardedBuffer::kNaN);
    run(variant);
    Check c = harness::compare("out", y_.span(), want_y_, {out_atol_, 1e-5});
    c = harness::merge(c, harness::compare("mean", mean_.span(), want_mean_, {1e-7, 1e-6}));
    c = harness::merge(c, harness::compare("rstd", rstd_.span(), want_rstd_, {0.0, 1e-5}));
    for (const std::string& damage :
         {y_.guard_damage("out"), mean_.guard_damage("mean"), rstd_.guard_damage("rstd")}) {
      if (!damage.empty()) {
        ++c.mismatches;
        c.report += damage;
      }
    }
    return c;
  }

 private:
  int rows_, C_;
  size_t n_;
  GuardedBuffer x_, w_, b_, y_, mean_, rstd_;
  std::vector<double> want_y_, want_mean_, want_rstd_;
  double out_atol_ = 1e-5;
};

}  // namespace

harness::OpBench layernorm_bench() {
  harness::OpBench op;
  op.name = "layernorm";
  op.summary = "row-wise layernorm forward: three passes vs one-pass statistics, scalar and SIMD";
  op.size_help = "rowsxC, e.g. 8192x768 or 2x16M (K = 1024, M = 1024^2)";
  // Per buffer: 24 KB (L1), 192 KB (L2), 3 MB (L3), 24 MB (memory: GPT-2 small at B = 8,
  // T = 1024, but every row in L1), two 64 MB rows (every pass from memory).
  op.default_sizes = {"8x768", "64x768", "1024x768", "8192x768", "2x16M"};
  // 2053 > 2 chunks of 1024: v3's chunk merging and ragged last chunk run too.
  op.quick_sizes = {"7x33", "3x2053"};
  op.variants = layernorm_variants();
  op.make = [](const std::string& size, uint64_t seed) -> std::unique_ptr<harness::Problem> {
    const std::vector<size_t> d = parse_dims("layernorm", size, 2, "rowsxC, e.g. 8192x768");
    return std::make_unique<LayernormProblem>(static_cast<int>(d[0]), static_cast<int>(d[1]), seed);
  };
  return op;
}

}  // namespace kernels::bench
