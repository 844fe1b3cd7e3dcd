// kernels/cuda/bench/matmul.cpp: the CUDA matmul ladder (kernels/cuda/matmul.cu) for the GPU
// harness, with cuBLAS as the peer on a GPU: "cublas" (pure fp32) and "cublas-tf32"
// (tensor cores, v8's peer).
//
// Sizes: "N" (M = N = K) or "MxNxK", each 1..2^30 ("4K" = 4096), each matrix under 2^31
// elements. The reference is in double: every entry for small products, a sample (the
// four edges, where partial tiles live, and 4096 random entries) for big ones.
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims
#include "kernels/cuda/bench/cublas.h"
#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

namespace {

struct Dims {
  int M = 0, N = 0, K = 0;
};

Dims parse_matmul_size(const std::string& size) {
  const std::string help = "N (M = N = K) or MxNxK, e.g. 4096 or 67x45x33";
  auto bad = [&](const std::string& why) { return std::invalid_argument("matmul size '" + size + "': " + why); };
  // parse_dims caps the product of the numbers at 2^30, which 4096x4096x4096 exceeds:
  // read the numbers one at a time.
  std::vector<size_t> d;
  size_t pos = 0;
  while (true) {
    const size_t x = size.find('x', pos);
    const std::string part = size.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    try {
      d.push_back(kernels::bench::parse_dims("matmul", part, 1, help)[0]);
    } catch (const std::invalid_argument&) {
      throw bad("write " + help + " (each number 1..2^30, K and M suffixes allowed)");
    }
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (d.size() == 1) d = {d[0], d[0], d[0]};
  if (d.size() != 3) throw bad("write " + help);
  const size_t limit = static_cast<size_t>(std::numeric_limits<int>::max());
  if (d[0] * d[2] > limit || d[2] * d[1] > limit || d[0] * d[1] > limit) {
    throw bad("each matrix must have under 2^31 elements");
  }
  return {static_cast<int>(d[0]), static_cast<int>(d[1]), static_cast<int>(d[2])};
}

// The peers, after the table's versions.
const char* const kCublas = "cublas";
const char* const kCublasTf32 = "cublas-tf32";

std::vector<Variant> matmul_variants(Device& dev) {
  std::vector<Variant> out = variants_of(dev.kernels().matmul);
  std::string why;
  if (!dev.info().emulated && cublas_available(dev, &why)) {
    out.push_back({{kCublas, "cuBLAS SGEMM", "cublasSgemm in pure fp32 (CUBLAS_DEFAULT_MATH): the peer of v1-v7", 50},
                   true});
    out.push_back(
        {{kCublasTf32, "cuBLAS SGEMM (TF32)", "cublasSgemm with CUBLAS_TF32_TENSOR_OP_MATH: the peer of v8", 80},
         true});
  }
  return out;
}

// Whether a variant rounds its inputs to TF32: its name says so (v8, cublas-tf32).
bool uses_tf32(const Variant& v) {
  return v.info.name.find("TF32") != std::string::npos || v.info.id.find("tf32") != std::string::npos;
}

class MatmulProblem final : public Problem {
 public:
  MatmulProblem(Device& dev, Dims d, uint64_t seed)
      : dev_(dev), d_(d), variants_(matmul_variants(dev)), c_(dev, static_cast<size_t>(d.M) * d.N) {
    a_ = random_buffer(dev, static_cast<size_t>(d.M) * d.K, seed, -1.0f, 1.0f, &host_a_);
    b_ = random_buffer(dev, static_cast<size_t>(d.K) * d.N, seed + 1, -1.0f, 1.0f, &host_b_);
    choose_samples(seed + 2);
    want_.resize(samples_.size());
    for (size_t s = 0; s < samples_.size(); ++s) {
      want_[s] = entry(static_cast<int>(samples_[s] / d_.N), static_cast<int>(samples_[s] % d_.N));
    }
  }

  std::string shape() const override {
    std::ostringstream os;
    if (d_.M == d_.N && d_.N == d_.K) {
      os << "M=N=K=" << d_.M;
    } else {
      os << "M=" << d_.M << " N=" << d_.N << " K=" << d_.K;
    }
    return os.str();
  }
  double flops() const override { return 2.0 * d_.M * d_.N * d_.K; }
  // Compulsory traffic, the same for every version: read A and B once, write C once. What
  // the early versions re-read beyond that is what the ladder removes.
  double bytes(size_t) const override {
    return 4.0 * (static_cast<double>(d_.M) * d_.K + static_cast<double>(d_.K) * d_.N +
                  static_cast<double>(d_.M) * d_.N);
  }

  void run(size_t v) override {
    const auto& table = dev_.kernels().matmul;
    if (v < table.size()) {
      table[v].run(c_.data(), a_.data(), b_.data(), d_.M, d_.N, d_.K);
      return;
    }
    const std::string& id = variants_.at(v).info.id;
    cublas_sgemm(c_.data(), a_.data(), b_.data(), d_.M, d_.N, d_.K, id == kCublasTf32);
  }

  harness::Check validate(size_t v) override {
    c_.fill_bytes(0xFF);  // NaN: an entry never written fails
    run(v);
    dev_.synchronize();
    const std::vector<float> got = c_.to_host();
    return harness::compare_at("C", got, samples_, want_, tolerance(variants_.at(v)));
  }

 private:
  // fp32: K products of numbers in [-1, 1) summed in fp32; rounding stays well under
  // 1e-6 * K, while a missing or doubled term is off by ~0.3.
  // TF32: each input is rounded to a 10-bit mantissa (relative error up to 2^-11), so each
  // product is off by ~1.3e-4 (rms, for |a b| ~ 1/3) in a random direction, and the sum of
  // K of them by ~1.3e-4 sqrt(K) (a random walk): 2e-3 sqrt(K) is ~15 of those standard
  // deviations (7 if an implementation truncates instead of rounding), still 0.06 at
  // K = 1024: a wrong tile or a missing k-step is caught, a single missing product at large
  // K may not be.
  harness::Tolerance tolerance(const Variant& v) const {
    if (uses_tf32(v)) return {2e-3 * std::sqrt(static_cast<double>(d_.K)), 1e-4};
    return {1e-6 * d_.K, 1e-5};
  }

  // C[i][j] in double.
  double entry(int i, int j) const {
    double sum = 0.0;
    for (int k = 0; k < d_.K; ++k) {
      sum += static_cast<double>(host_a_[static_cast<size_t>(i) * d_.K + k]) *
             host_b_[static_cast<size_t>(k) * d_.N + j];
    }
    return sum;
  }

  // Which entries of C the reference computes: all of them when M N K <= 2^26 (the test
  // sizes); else the four edges (where partial tiles live) and 4096 random entries (every
  // tile of a blocked kernel, and every thread's position in it, is hit many times over),
  // so the reference of a 4096^3 product costs ~20K x 4096 multiply-adds, not 2^36.
  void choose_samples(uint64_t seed) {
    const size_t total = static_cast<size_t>(d_.M) * d_.N;
    if (static_cast<double>(total) * d_.K <= 64.0 * 1024 * 1024) {
      samples_.resize(total);
      for (size_t i = 0; i < total; ++i) samples_[i] = i;
      return;
    }
    for (int j = 0; j < d_.N; ++j) {
      samples_.push_back(static_cast<size_t>(j));                            // first row
      samples_.push_back(static_cast<size_t>(d_.M - 1) * d_.N + j);          // last row
    }
    for (int i = 0; i < d_.M; ++i) {
      samples_.push_back(static_cast<size_t>(i) * d_.N);                     // first column
      samples_.push_back(static_cast<size_t>(i) * d_.N + d_.N - 1);          // last column
    }
    harness::Random rng(seed);
    for (int r = 0; r < 4096; ++r) samples_.push_back(rng.next_u64() % total);
  }

  Device& dev_;
  Dims d_;
  std::vector<Variant> variants_;
  Buffer<float> a_, b_, c_;
  std::vector<float> host_a_, host_b_;
  std::vector<size_t> samples_;
  std::vector<double> want_;
};

}  // namespace

Op matmul_op() {
  Op op;
  op.name = "matmul";
  op.summary = "C = A.B in fp32: coalescing, shared-memory tiles, register blocking, float4, warp tiles, TF32 "
               "tensor cores; cuBLAS beside";
  op.sizes = {"1024", "4096"};
  // A square one, one with every dimension ragged against every tile and K, N not multiples
  // of 4 (the scalar fallback of v6-v8), one on the float4 path with K ragged against BK,
  // and one on the float4 path with M and N ragged against the 128x128 tiles.
  op.test_sizes = {"64", "67x45x33", "128x256x40", "100x132x20"};
  op.variants = [](Device& dev) { return matmul_variants(dev); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<MatmulProblem>(dev, parse_matmul_size(size), seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
