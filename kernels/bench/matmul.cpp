// kernels/bench/matmul.cpp: the sgemm ladder (kernels/matmul.h) for the harness, with
// OpenBLAS's sgemm as the peer when the build found it (NNLAB_HAVE_OPENBLAS).
//
// Sizes: "1024" (M = N = K = 1024) or "MxNxK", optionally followed by the transposes of A
// and B as two letters: "128x256x784nt" is C (128,256) = A (128,784) . B^T with B (256,784),
// a linear layer's forward pass.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/matmul.h"

#if defined(NNLAB_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace kernels::bench {

using harness::Check;
using harness::GuardedBuffer;

namespace {

struct Shape {
  int M = 0, N = 0, K = 0;
  Trans ta = Trans::No, tb = Trans::No;
};

Shape parse_shape(const std::string& size) {
  std::string s = size;
  Shape shape;
  auto trans_of = [](char c) { return c == 't' || c == 'T' ? Trans::Yes : Trans::No; };
  auto is_tn = [](char c) { return c == 't' || c == 'n' || c == 'T' || c == 'N'; };
  if (s.size() > 2 && is_tn(s[s.size() - 1]) && is_tn(s[s.size() - 2])) {
    shape.ta = trans_of(s[s.size() - 2]);
    shape.tb = trans_of(s[s.size() - 1]);
    s.resize(s.size() - 2);
  }
  std::vector<int> dims;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t x = s.find('x', pos);
    const std::string part = s.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || value < 1 || value > 1 << 16) {
      throw std::invalid_argument("matmul size '" + size +
                                  "': write N (a square N^3 product) or MxNxK, each 1..65536, "
                                  "optionally followed by nn/nt/tn/tt");
    }
    dims.push_back(value);
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (dims.size() == 1) dims = {dims[0], dims[0], dims[0]};
  if (dims.size() != 3) throw std::invalid_argument("matmul size '" + size + "': expected N or MxNxK");
  shape.M = dims[0];
  shape.N = dims[1];
  shape.K = dims[2];
  return shape;
}

// The variants: every version of the ladder, then the peer.
std::vector<harness::Variant> matmul_variants() {
  std::vector<harness::Variant> out = harness::variants_of(sgemm_versions());
  if (have_openblas()) out.push_back({"openblas", "OpenBLAS", "cblas_sgemm, the peer", true});
  return out;
}

class MatmulProblem : public harness::Problem {
 public:
  MatmulProblem(const Shape& s, uint64_t seed)
      : s_(s),
        a_(static_cast<size_t>(s.M) * s.K),
        b_(static_cast<size_t>(s.K) * s.N),
        c_(static_cast<size_t>(s.M) * s.N) {
    harness::fill_random(a_.span(), seed);
    harness::fill_random(b_.span(), seed + 1);
    choose_samples(seed + 2);
  }

  std::string shape() const override {
    std::ostringstream os;
    if (s_.M == s_.N && s_.N == s_.K) {
      os << "M=N=K=" << s_.M;
    } else {
      os << "M=" << s_.M << " N=" << s_.N << " K=" << s_.K;
    }
    if (s_.ta == Trans::Yes || s_.tb == Trans::Yes) {
      os << " " << (s_.ta == Trans::Yes ? "A^T" : "A") << (s_.tb == Trans::Yes ? ".B^T" : ".B");
    }
    return os.str();
  }
  double flops() const override { return 2.0 * s_.M * s_.N * s_.K; }
  // Compulsory traffic: read A and B once, write C once (beta = 0).
  double bytes(size_t) const override {
    return 4.0 * (static_cast<double>(s_.M) * s_.K + static_cast<double>(s_.K) * s_.N +
                  static_cast<double>(s_.M) * s_.N);
  }

  void run(size_t variant) override {
    const int lda = s_.ta == Trans::No ? s_.K : s_.M;
    const int ldb = s_.tb == Trans::No ? s_.N : s_.K;
    if (variant < sgemm_versions().size()) {
      sgemm_versions()[variant].fn(s_.ta, s_.tb, s_.M, s_.N, s_.K, 1.0f, a_.data(), lda, b_.data(), ldb,
                                   0.0f, c_.data(), s_.N);
      return;
    }
#if defined(NNLAB_HAVE_OPENBLAS)
    cblas_sgemm(CblasRowMajor, s_.ta == Trans::Yes ? CblasTrans : CblasNoTrans,
                s_.tb == Trans::Yes ? CblasTrans : CblasNoTrans, s_.M, s_.N, s_.K, 1.0f, a_.data(), lda,
                b_.data(), ldb, 0.0f, c_.data(), s_.N);
#endif
  }

  Check validate(size_t variant) override {
    std::fill(c_.data(), c_.data() + c_.size(), GuardedBuffer::kNaN);  // beta = 0 must overwrite
    run(variant);
    // The sampled entries in double. Rounding of K float products of size <= 1 stays well
    // under 1e-6 * K; a missing or doubled term is off by ~0.3.
    std::vector<double> want(samples_.size());
    for (size_t s = 0; s < samples_.size(); ++s) {
      want[s] = entry(static_cast<int>(samples_[s] / s_.N), static_cast<int>(samples_[s] % s_.N));
    }
    Check c = harness::compare_at("C", c_.span(), samples_, want, {1e-6 * s_.K, 1e-5});
    const std::string damage = c_.guard_damage("C");
    if (!damage.empty()) {
      ++c.mismatches;
      c.report += damage;
    }
    return c;
  }

  void set_threads(int threads) override {
    omp_set_num_threads(threads);
#if defined(NNLAB_HAVE_OPENBLAS)
    openblas_set_num_threads(threads);
#endif
  }

 private:
  // C[i][j] of op(A) . op(B), in double.
  double entry(int i, int j) const {
    double sum = 0.0;
    const int lda = s_.ta == Trans::No ? s_.K : s_.M;
    const int ldb = s_.tb == Trans::No ? s_.N : s_.K;
    for (int k = 0; k < s_.K; ++k) {
      const float a = s_.ta == Trans::No ? a_.data()[static_cast<size_t>(i) * lda + k]
                                         : a_.data()[static_cast<size_t>(k) * lda + i];
      const float b = s_.tb == Trans::No ? b_.data()[static_cast<size_t>(k) * ldb + j]
                                         : b_.data()[static_cast<size_t>(j) * ldb + k];
      sum += static_cast<double>(a) * b;
    }
    return sum;
  }

  // Which entries of C the reference computes: harness::product_samples (all of them for small
  // products; else the edges and 4096 random ones, so validating 2048^3 costs milliseconds).
  void choose_samples(uint64_t seed) { samples_ = harness::product_samples(s_.M, s_.N, s_.K, seed); }

  Shape s_;
  GuardedBuffer a_, b_, c_;
  std::vector<size_t> samples_;
};

}  // namespace

bool have_openblas() {
#if defined(NNLAB_HAVE_OPENBLAS)
  return true;
#else
  return false;
#endif
}

std::string openblas_config() {
#if defined(NNLAB_HAVE_OPENBLAS)
  return openblas_get_config();
#else
  return "";
#endif
}

harness::OpBench matmul_bench() {
  harness::OpBench op;
  op.name = "matmul";
  op.summary = "C = A.B in fp32 (sgemm), the ladder from loops to SIMD and threads";
  op.size_help = "N (M = N = K) or MxNxK, optionally + nn/nt/tn/tt for the transposes";
  op.default_sizes = {"256", "1024", "2048"};
  op.quick_sizes = {"67x45x33", "129x130x131nt"};
  op.variants = matmul_variants();
  op.check_size = [](const std::string& size) { parse_shape(size); };
  op.make = [](const std::string& size, uint64_t seed) -> std::unique_ptr<harness::Problem> {
    return std::make_unique<MatmulProblem>(parse_shape(size), seed);
  };
  // The first rungs take seconds to minutes past 1024^3 (v1 at 2048^3: ~1 minute per run).
  op.too_slow = [](size_t variant, const harness::Problem& p) {
    const double n3 = 2.0 * 1024 * 1024 * 1024;
    return (variant == 0 && p.flops() > n3) || (variant == 1 && p.flops() > 8 * n3);
  };
  return op;
}

}  // namespace kernels::bench
