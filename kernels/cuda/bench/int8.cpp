// kernels/cuda/bench/int8.cpp: the CUDA int8 GEMM ladder (kernels/cuda/int8.cu: int8_gemm
// v1-v3) for the GPU harness, with cuBLAS's int8 GEMM beside it on a GPU ("cublas":
// cublasGemmEx, CUDA_R_8I inputs, CUDA_R_32I output, CUBLAS_COMPUTE_32I).
//
//   C (M,N) int32 = A (M,K) int8 . B (N,K)^T int8      (kernels/int8_gemm.h)
//
// Sizes: "N" (M = N = K) or "MxNxK", each 1..2^30 ("4K" = 4096), each matrix under 2^31
// elements, K <= 65536. The GPU defaults: the squares, then the GPT's widest linear layer
// (the MLP's fc, 384 -> 1536, and back) over 16384 tokens, as the matmul bench.
// The GFLOP/s column is GOP/s here: an int8 multiply-add counts 2 operations, as in every
// vendor's "TOPS".
//
// Exact validation: integers have no rounding, so every entry must equal the CPU reference
// kernels::int8_gemm_v1's bit for bit (no tolerance). For small products (M N K <= 2^26)
// every entry, computed by int8_gemm_v1 itself; for big ones the four edges (where partial
// tiles live) and 4096 random entries, each computed by the same int32 loop. The inputs are
// uniform over all of int8, -128 included (the extremes are where a wrong sign extension
// shows). C is first filled with 0x7F bytes (2139062143, larger than any sum can be), so an
// entry never written fails, and the int just past C must keep that fill. The versions run
// twice: on the buffers as allocated (16-byte aligned: the 16-byte loads when K % 16 == 0),
// then with A, B one byte and C one int further on (the byte-by-byte loads). cuBLAS runs on
// the aligned buffers only, and, when K is not a multiple of 4, on copies padded with zero
// columns to the next multiple (its int8 kernels want it; the sums are unchanged).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims, short_count
#include "kernels/cuda/bench/cublas.h"
#include "kernels/cuda/bench/ops.h"
#include "kernels/int8_gemm.h"

namespace kernels::cuda::bench {

namespace {

using harness::Check;

constexpr uint32_t kFill = 0x7F7F7F7Fu;  // what C holds before a run: no sum can be this
const char* const kCublas = "cublas";

struct Int8Size {
  int M = 0, N = 0, K = 0;
};

Int8Size parse_int8_size(const std::string& size) {
  const std::string help = "N (M = N = K) or MxNxK, K <= 65536; e.g. 4096, 17x33x64";
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("int8_gemm size '" + size + "': " + why + " (write " + help + ")");
  };
  std::vector<size_t> d;
  size_t pos = 0;
  while (true) {
    const size_t x = size.find('x', pos);
    const std::string part = size.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    try {
      d.push_back(kernels::bench::parse_dims("int8_gemm", part, 1, help)[0]);
    } catch (const std::invalid_argument&) {
      throw bad("each number must be 1..2^30 (K and M suffixes allowed)");
    }
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (d.size() == 1) d = {d[0], d[0], d[0]};
  if (d.size() != 3) throw bad("one number or three");
  const size_t limit = 2147483647u;
  if (d[0] * d[2] > limit || d[1] * d[2] > limit || d[0] * d[1] > limit) throw bad("each matrix must have under 2^31 elements");
  if (d[2] > 65536) throw bad("K at most 65536 (int32 sums of K products up to 2^14 cannot overflow)");
  return {static_cast<int>(d[0]), static_cast<int>(d[1]), static_cast<int>(d[2])};
}

std::vector<Variant> int8_variants(Device& dev) {
  std::vector<Variant> out = variants_of(dev.kernels().int8_gemm);
  std::string why;
  if (!dev.info().emulated && cublas_available(dev, &why)) {
    out.push_back({kCublas, "cuBLAS GEMM (int8)",
                   "cublasGemmEx, CUDA_R_8I inputs, CUDA_R_32I output, CUBLAS_COMPUTE_32I: the peer of v1-v3", true,
                   {NNLAB_SM_PASCAL}});
  }
  return out;
}

// A device copy of `host` (rows of K bytes) as allocated and one byte further on.
struct ByteCopies {
  Array<int8_t> aligned, shifted;
  ByteCopies() = default;
  ByteCopies(Device& dev, const std::vector<int8_t>& host) : aligned(dev, host), shifted(dev, host.size() + 1) {
    dev.from_host(shifted.data() + 1, host.data(), host.size());
  }
  const int8_t* at(size_t offset) const { return offset == 0 ? aligned.data() : shifted.data() + 1; }
};

// rows x K bytes -> rows x K4 bytes, the new columns zero.
std::vector<int8_t> pad_columns(const std::vector<int8_t>& x, int rows, int K, int K4) {
  std::vector<int8_t> out(static_cast<size_t>(rows) * K4, 0);
  for (size_t r = 0; r < static_cast<size_t>(rows); ++r) {
    std::memcpy(&out[r * K4], &x[r * K], static_cast<size_t>(K));
  }
  return out;
}

class Int8GemmProblem final : public Problem {
 public:
  Int8GemmProblem(Device& dev, Int8Size s, uint64_t seed)
      : dev_(dev), s_(s), variants_(int8_variants(dev)), c_(dev, elements_c() + 1, kernels::uninitialized) {
    host_a_ = random_bytes(static_cast<size_t>(s_.M) * s_.K, seed);
    host_b_ = random_bytes(static_cast<size_t>(s_.N) * s_.K, seed + 1);
    a_ = ByteCopies(dev, host_a_);
    b_ = ByteCopies(dev, host_b_);
    if (variants_.size() > dev.kernels().int8_gemm.size()) {  // cuBLAS is here
      k4_ = (s_.K + 3) / 4 * 4;
      if (k4_ != s_.K) {
        a4_ = Array<int8_t>(dev, pad_columns(host_a_, s_.M, s_.K, k4_));
        b4_ = Array<int8_t>(dev, pad_columns(host_b_, s_.N, s_.K, k4_));
      }
    }
    choose_samples(seed + 2);
  }

  std::string shape() const override {
    if (s_.M == s_.N && s_.N == s_.K) return "M=N=K=" + std::to_string(s_.M);
    return "M=" + kernels::bench::short_count(static_cast<size_t>(s_.M)) +
           " N=" + kernels::bench::short_count(static_cast<size_t>(s_.N)) +
           " K=" + kernels::bench::short_count(static_cast<size_t>(s_.K));
  }
  // Integer operations: a multiply-add counts 2.
  double flops() const override { return 2.0 * s_.M * s_.N * s_.K; }
  // Compulsory traffic: A and B read once (a byte each), C written once (4 bytes each).
  double bytes(size_t) const override {
    return static_cast<double>(s_.M) * s_.K + static_cast<double>(s_.N) * s_.K + 4.0 * static_cast<double>(elements_c());
  }
  void run(size_t v) override { run_at(v, 0); }

  Check validate(size_t v) override {
    Check c;
    const bool peer = variants_.at(v).peer;
    for (size_t at : {size_t{0}, size_t{1}}) {
      if (peer && at == 1) break;  // cuBLAS: the aligned buffers only
      c_.fill_bytes(0x7F);
      run_at(v, at);
      dev_.synchronize();
      const char* name = at == 0 ? "C" : "C (A, B 1 byte and C 4 bytes past 16-byte alignment)";
      c = harness::merge(c, compare_exact(name, at));
    }
    return c;
  }

 private:
  size_t elements_c() const { return static_cast<size_t>(s_.M) * s_.N; }

  static std::vector<int8_t> random_bytes(size_t n, uint64_t seed) {
    harness::Random rng(seed * 0x9E3779B97F4A7C15ull + 1);
    std::vector<int8_t> out(n);
    for (int8_t& x : out) x = static_cast<int8_t>(static_cast<int>(rng.next_u64() >> 56) - 128);
    return out;
  }

  void run_at(size_t v, size_t at) {
    int32_t* C = c_.data() + at;
    const auto& table = dev_.kernels().int8_gemm;
    if (v < table.size()) {
      table[v].fn(C, a_.at(at), b_.at(at), s_.M, s_.N, s_.K);
      return;
    }
    if (k4_ == s_.K) {
      cublas_gemm_int8(C, a_.at(0), b_.at(0), s_.M, s_.N, s_.K);
    } else {
      cublas_gemm_int8(C, a4_.data(), b4_.data(), s_.M, s_.N, k4_);
    }
  }

  // Every sampled entry equal to the reference, and the int outside the window untouched.
  Check compare_exact(const std::string& name, size_t at) const {
    const std::vector<int32_t> host = c_.to_vector();
    Check c;
    for (size_t i = 0; i < samples_.size(); ++i) {
      const int32_t got = host[at + samples_[i]];
      ++c.checked;
      if (got == want_[i]) continue;
      const double err = std::abs(static_cast<double>(got) - static_cast<double>(want_[i]));
      if (err > c.max_abs_err) c.max_abs_err = err;
      if (c.mismatches++ < 5) {
        std::ostringstream os;
        os << name << "[" << samples_[i] / s_.N << "][" << samples_[i] % s_.N << "] = " << got
           << (static_cast<uint32_t>(got) == kFill ? " (never written)" : "") << " but int8_gemm_v1 says " << want_[i]
           << "\n";
        c.report += os.str();
      }
    }
    uint32_t outside = 0;
    std::memcpy(&outside, &host[at == 0 ? elements_c() : 0], sizeof outside);
    if (outside != kFill) {
      ++c.mismatches;
      c.report += name + ": the int " + (at == 0 ? "after the end" : "before the start") + " of it was overwritten\n";
    }
    return c;
  }

  // harness::product_samples (all entries when M N K <= 2^26; else the four edges and 4096
  // random entries), each computed by kernels::int8_gemm_v1 (all) or v1's loop (the samples).
  void choose_samples(uint64_t seed) {
    const size_t N = static_cast<size_t>(s_.N), K = static_cast<size_t>(s_.K);
    samples_ = harness::product_samples(s_.M, s_.N, s_.K, seed);
    if (static_cast<double>(elements_c()) * s_.K <= 64.0 * 1024 * 1024) {  // product_samples took every entry
      want_.resize(samples_.size());
      kernels::int8_gemm_v1(want_.data(), host_a_.data(), host_b_.data(), s_.M, s_.N, s_.K);
      return;
    }
    want_.resize(samples_.size());
    for (size_t i = 0; i < samples_.size(); ++i) {
      const size_t m = samples_[i] / N, n = samples_[i] % N;
      int32_t sum = 0;
      for (size_t k = 0; k < K; ++k) sum += int32_t{host_a_[m * K + k]} * int32_t{host_b_[n * K + k]};
      want_[i] = sum;
    }
  }

  Device& dev_;
  Int8Size s_;
  std::vector<Variant> variants_;
  ByteCopies a_, b_;
  Array<int8_t> a4_, b4_;  // zero-padded to K4 columns, for cuBLAS when K % 4 != 0
  int k4_ = 0;
  Array<int32_t> c_;
  std::vector<int8_t> host_a_, host_b_;
  std::vector<size_t> samples_;
  std::vector<int32_t> want_;
};

}  // namespace

Op int8_gemm_op() {
  Op op;
  op.name = "int8_gemm";
  op.summary = "C int32 = A int8 . B int8^T (W8A8): naive, dp4a on shared-memory tiles, int8 tensor cores; exact, "
               "cuBLAS int8 beside";
  op.sizes = {"1024", "4096", "16384x1536x384", "16384x384x1536"};
  // Small and odd: M, N, K ragged against every tile and K against 4 and 16 (the byte loads
  // and the zero padding); K a multiple of 16 (the 16-byte loads; the shifted run takes the
  // byte ones) with M, N over one 128x128 tile; one entry; K = 1.
  op.test_sizes = {"17x33x64", "32x48x80", "67x45x33", "130x140x96", "5x3x7", "1x1x1", "9x20x1"};
  op.variants = [](Device& dev) { return int8_variants(dev); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<Int8GemmProblem>(dev, parse_int8_size(size), seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
