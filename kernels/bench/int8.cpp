// kernels/bench/int8.cpp: the int8 GEMM ladder (kernels/int8_gemm.h) for the harness, with
// the fp32 sgemm (kernels::sgemm, the same NT product on the same values as floats) as the
// peer, so one run puts int8 and fp32 operations per second side by side.
//
// Sizes: "N" (M = N = K) or "MxNxK". C (M, N) int32 = A (M, K) . B (N, K)^T, A in
// [-128, 127], B in [-127, 127] (the contract). "FLOPs" here are integer operations, 2 per
// multiply-add: the GFLOP/s column reads as GOP/s. The roofline's peak is the fp32 FMA
// peak, so an int8 rung can show more than 100% of it: compare with the int8 peak
// (kernels::measure_int8_peak, printed by `nnlab bench int8_gemm` above the table). Figures
// measured with it: kernels/int8_gemm.cpp's header.
//
// Validation before timing: every int8 rung must equal the exact integer sums (computed
// here, per sampled entry) with zero tolerance; the fp32 peer gets fp32's tolerance (its sums
// are exact while they stay below 2^24, e.g. up to K ~ 1000 at these magnitudes).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/int8_gemm.h"
#include "kernels/matmul.h"

namespace kernels::bench {

using harness::Check;

namespace {

constexpr const char* kHelp = "N (M = N = K) or MxNxK, e.g. 1024 or 1x4096x4096";

struct Int8Shape {
  int M = 0, N = 0, K = 0;
};

Int8Shape parse_int8_shape(const std::string& size) {
  const size_t count = static_cast<size_t>(std::count(size.begin(), size.end(), 'x')) + 1;
  if (count != 1 && count != 3) throw std::invalid_argument("int8_gemm size '" + size + "': write " + kHelp);
  const std::vector<size_t> d = parse_dims("int8_gemm", size, count, kHelp);
  Int8Shape s;
  s.M = static_cast<int>(d[0]);
  s.N = static_cast<int>(count == 3 ? d[1] : d[0]);
  s.K = static_cast<int>(count == 3 ? d[2] : d[0]);
  if (s.K > (1 << 16)) throw std::invalid_argument("int8_gemm size '" + size + "': K must be <= 65536 (int32 sums)");
  return s;
}

std::vector<harness::Variant> int8_variants() {
  std::vector<harness::Variant> out = harness::variants_of(int8_gemm_versions());
  out.push_back({"sgemm-fp32", "sgemm", "kernels::sgemm on the same values as floats (NT): the fp32 baseline", true});
  return out;
}

class Int8GemmProblem : public harness::Problem {
 public:
  Int8GemmProblem(const Int8Shape& s, uint64_t seed) : s_(s) {
    const size_t na = static_cast<size_t>(s.M) * s.K, nb = static_cast<size_t>(s.N) * s.K;
    a_.resize(na);
    b_.resize(nb);
    harness::Random rng(seed);
    for (int8_t& v : a_) v = static_cast<int8_t>(static_cast<int>(rng.next_u64() % 256) - 128);
    for (int8_t& v : b_) v = static_cast<int8_t>(static_cast<int>(rng.next_u64() % 255) - 127);
    af_.assign(a_.begin(), a_.end());
    bf_.assign(b_.begin(), b_.end());
    c_.resize(static_cast<size_t>(s.M) * s.N + kGuard);
    cf_.resize(static_cast<size_t>(s.M) * s.N + kGuard);
    choose_samples(seed + 1);
  }

  std::string shape() const override {
    std::ostringstream os;
    if (s_.M == s_.N && s_.N == s_.K) {
      os << "M=N=K=" << s_.M;
    } else {
      os << "M=" << s_.M << " N=" << s_.N << " K=" << s_.K;
    }
    os << " int8";
    return os.str();
  }
  double flops() const override { return 2.0 * s_.M * s_.N * s_.K; }  // integer ops, 2 per multiply-add
  double bytes(size_t variant) const override {
    const double elems_in = static_cast<double>(s_.M) * s_.K + static_cast<double>(s_.N) * s_.K;
    const double out = static_cast<double>(s_.M) * s_.N * 4;
    return is_sgemm(variant) ? 4.0 * elems_in + out : elems_in + out;
  }

  void run(size_t variant) override {
    if (is_sgemm(variant)) {
      sgemm(Trans::No, Trans::Yes, s_.M, s_.N, s_.K, 1.0f, af_.data(), s_.K, bf_.data(), s_.K, 0.0f, cf_.data(), s_.N);
      return;
    }
    int8_gemm_versions()[variant].fn(c_.data(), a_.data(), b_.data(), s_.M, s_.N, s_.K);
  }

  Check validate(size_t variant) override {
    const size_t nc = static_cast<size_t>(s_.M) * s_.N;
    std::fill(c_.begin(), c_.end(), kSentinel);
    std::fill(cf_.begin(), cf_.end(), NAN);
    run(variant);
    Check c;
    const bool fp = is_sgemm(variant);
    for (size_t idx : samples_) {
      const int64_t want = exact(static_cast<int>(idx / static_cast<size_t>(s_.N)), static_cast<int>(idx % static_cast<size_t>(s_.N)));
      const double got = fp ? static_cast<double>(cf_[idx]) : static_cast<double>(c_[idx]);
      const double err = std::fabs(got - static_cast<double>(want));
      const double tol = fp ? 1e-6 * s_.K * 127.0 * 128.0 : 0.0;  // int8 rungs: exact
      ++c.checked;
      c.max_abs_err = std::max(c.max_abs_err, std::isnan(err) ? INFINITY : err);
      if (!(err <= tol)) {
        if (++c.mismatches <= 5) {
          std::ostringstream os;
          os << "C[" << idx << "] = " << got << " but the exact sum is " << want << "\n";
          c.report += os.str();
        }
      }
    }
    for (size_t i = nc; i < nc + kGuard; ++i) {
      const bool damaged = fp ? !std::isnan(cf_[i]) : c_[i] != kSentinel;
      if (damaged) {
        ++c.mismatches;
        c.report += "C was written past its end (index " + std::to_string(i) + ")\n";
        break;
      }
    }
    return c;
  }

 private:
  static constexpr size_t kGuard = 16;
  static constexpr int32_t kSentinel = 0x5A5A5A5A;
  bool is_sgemm(size_t variant) const { return variant >= int8_gemm_versions().size(); }

  int64_t exact(int m, int n) const {
    int64_t s = 0;
    for (int k = 0; k < s_.K; ++k)
      s += static_cast<int64_t>(a_[static_cast<size_t>(m) * s_.K + k]) * b_[static_cast<size_t>(n) * s_.K + k];
    return s;
  }

  // harness::product_samples: all of C for small products, else the edges and 4096 entries.
  void choose_samples(uint64_t seed) { samples_ = harness::product_samples(s_.M, s_.N, s_.K, seed); }

  Int8Shape s_;
  std::vector<int8_t> a_, b_;
  std::vector<float> af_, bf_;
  std::vector<int32_t> c_;
  std::vector<float> cf_;
  std::vector<size_t> samples_;
};

}  // namespace

harness::OpBench int8_gemm_bench() {
  harness::OpBench op;
  op.name = "int8_gemm";
  op.summary = "C = A.B^T in int8 with int32 sums (W8A8), the ladder to AVX-512 VNNI, fp32 sgemm beside it";
  op.size_help = kHelp;
  op.default_sizes = {"1024", "16x4096x4096", "2048"};
  op.quick_sizes = {"67x45x33", "9x130x131"};
  op.variants = int8_variants();
  op.check_size = [](const std::string& size) { parse_int8_shape(size); };
  op.make = [](const std::string& size, uint64_t seed) -> std::unique_ptr<harness::Problem> {
    return std::make_unique<Int8GemmProblem>(parse_int8_shape(size), seed);
  };
  // v1 at 2048^3: ~8 G multiply-adds one at a time, about 10 s per run.
  op.too_slow = [](size_t variant, const harness::Problem& p) {
    return variant == 0 && p.flops() > 2.0 * 1024 * 1024 * 1024;
  };
  return op;
}

}  // namespace kernels::bench
