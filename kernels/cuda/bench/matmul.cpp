// kernels/cuda/bench/matmul.cpp: the CUDA matmul ladder (kernels/cuda/matmul.cu: matmul v1-v11
// and bias_backward) for the GPU harness, with cuBLAS beside matmul on a GPU: "cublas" (pure
// fp32, the peer of v1-v7 and v9), "cublas-tf32" (v8's and v10's) and "cublas-bf16" (v11's).
// On the plain product the fp32 and TF32 peers are cublasSgemm, in pure fp32
// (CUBLAS_DEFAULT_MATH) and with CUBLAS_TF32_TENSOR_OP_MATH; on the other forms, and for
// BF16, cublasGemmEx (kernels/cuda/bench/cublas.h).
//
// matmul sizes, two spellings:
//   "N" (M = N = K) or "MxNxK", each 1..2^30 ("4K" = 4096): the plain product C = A.B, the
//   lesson's, which every version runs;
//   "[form] M=<m> N=<n> K=<k> [ta] [tb] [bias] [acc]", words separated by spaces:
//     M, N, K     the product's dimensions, each 1..2^30 (K and M suffixes: "16K" = 16384)
//     ta, tb      A stored (K,M), B stored (N,K), read transposed (MatmulArgs::trans_a, trans_b)
//     bias        a bias (N) added to every row;  acc  C += the result (MatmulArgs::accumulate)
//     form        optional, first: fwd, dinp or dw, a name for which of the GPT's products it
//                 is (it sets nothing: the flags say it)
//   which v1 and v9-v11 run; v2-v8 compute the plain product only and are skipped on a form
//   with a transpose, bias or accumulate (Requirements::plain_only).
// Each matrix under 2^31 elements. The default GPU sizes: the lesson's squares, then the
// three products of the GPT's widest linear layer (the MLP's fc, C = 384 -> 4C = 1536) at the
// nanoGPT Shakespeare config, B*T = 64*256 = 16384 rows:
//   fwd  out  (16384,1536) = inp (16384,384) . W (1536,384)^T + b
//   dinp dinp (16384,384)  = dout (16384,1536) . W (1536,384)
//   dw   dW   (1536,384)  += dout (16384,1536)^T . inp (16384,384)
// The reference is in double: every entry for small products, a sample (the four edges,
// where partial tiles live, and 4096 random entries) for big ones. With acc, C starts random,
// so C = instead of C += fails.
//
// bias_backward sizes: "NxOC" (rows x columns of dout): the GPT's 16384 x 384 (attention
// projection, MLP projection) and 16384 x 1536 (fc). dbias starts random (it accumulates).
//
// Every validation runs twice: on the buffers as allocated (16-byte aligned), then with
// every pointer one float further on (the kernels' scalar paths, whatever the sizes), each
// time checking that the float just outside the output was not written.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims, short_count
#include "kernels/cuda/bench/cublas.h"
#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

namespace {

using harness::Check;
using harness::Tolerance;

// ---- sizes ------------------------------------------------------------------------------------

struct MatmulSize {
  std::string form;  // "fwd", "dinp", "dw" or ""
  int M = 0, N = 0, K = 0;
  MatmulArgs args;   // bias: set to the Problem's buffer when `bias` is on
  bool bias = false;
  // The lesson's product C = A.B: what every version computes.
  bool plain() const { return !args.trans_a && !args.trans_b && !args.accumulate && !bias; }
};

// One dimension, 1..2^30 with K and M suffixes (parse_dims caps the product of the numbers
// it reads at 2^30, which 4096x4096x4096 exceeds: the numbers are read one at a time).
size_t parse_dim(const std::string& text, const std::string& help) {
  return kernels::bench::parse_dims("matmul", text, 1, help)[0];
}

void check_elements(const size_t d[3], const std::function<std::invalid_argument(const std::string&)>& bad) {
  const size_t limit = static_cast<size_t>(std::numeric_limits<int>::max());
  if (d[0] * d[2] > limit || d[2] * d[1] > limit || d[0] * d[1] > limit) {
    throw bad("each matrix must have under 2^31 elements");
  }
}

MatmulSize parse_matmul_size(const std::string& size) {
  const std::string help =
      "N (M = N = K), MxNxK, or [fwd|dinp|dw] M=<m> N=<n> K=<k> [ta] [tb] [bias] [acc]; e.g. 4096, 67x45x33, "
      "'dw M=1536 N=384 K=16K ta acc'";
  std::function<std::invalid_argument(const std::string&)> bad = [&](const std::string& why) {
    return std::invalid_argument("matmul size '" + size + "': " + why + " (write " + help + ")");
  };
  MatmulSize s;
  size_t dims[3] = {0, 0, 0};  // M, N, K
  if (size.find('=') == std::string::npos) {
    // "N" or "MxNxK"
    std::vector<size_t> d;
    size_t pos = 0;
    while (true) {
      const size_t x = size.find('x', pos);
      const std::string part = size.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      try {
        d.push_back(parse_dim(part, help));
      } catch (const std::invalid_argument&) {
        throw bad("each number must be 1..2^30 (K and M suffixes allowed)");
      }
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    if (d.size() == 1) d = {d[0], d[0], d[0]};
    if (d.size() != 3) throw bad("one number or three");
    dims[0] = d[0];
    dims[1] = d[1];
    dims[2] = d[2];
  } else {
    std::istringstream words(size);
    std::string w;
    bool first = true;
    while (words >> w) {
      const size_t eq = w.find('=');
      if (eq != std::string::npos) {
        const std::string key = w.substr(0, eq);
        const int which = key == "M" ? 0 : key == "N" ? 1 : key == "K" ? 2 : -1;
        if (which < 0) throw bad("unknown dimension '" + key + "'");
        if (dims[which] != 0) throw bad(key + " given twice");
        try {
          dims[which] = parse_dim(w.substr(eq + 1), help);
        } catch (const std::invalid_argument&) {
          throw bad(key + " must be a number 1..2^30");
        }
      } else if (w == "ta" || w == "tb" || w == "bias" || w == "acc") {
        bool& flag = w == "ta" ? s.args.trans_a : w == "tb" ? s.args.trans_b : w == "bias" ? s.bias : s.args.accumulate;
        if (flag) throw bad("'" + w + "' given twice");
        flag = true;
      } else if (first && (w == "fwd" || w == "dinp" || w == "dw")) {
        s.form = w;
      } else {
        throw bad("unknown word '" + w + "'");
      }
      first = false;
    }
    if (dims[0] == 0 || dims[1] == 0 || dims[2] == 0) throw bad("M, N and K are all needed");
  }
  check_elements(dims, bad);
  s.M = static_cast<int>(dims[0]);
  s.N = static_cast<int>(dims[1]);
  s.K = static_cast<int>(dims[2]);
  return s;
}

// "M=N=K=4096", "M=67 N=45 K=33" for the plain product; "fwd M=16K N=1536 K=384 tb bias".
std::string matmul_shape(const MatmulSize& s) {
  std::ostringstream os;
  if (s.plain() && s.form.empty()) {
    if (s.M == s.N && s.N == s.K) {
      os << "M=N=K=" << s.M;
    } else {
      os << "M=" << s.M << " N=" << s.N << " K=" << s.K;
    }
    return os.str();
  }
  if (!s.form.empty()) os << s.form << " ";
  os << "M=" << kernels::bench::short_count(static_cast<size_t>(s.M))
     << " N=" << kernels::bench::short_count(static_cast<size_t>(s.N))
     << " K=" << kernels::bench::short_count(static_cast<size_t>(s.K));
  if (s.args.trans_a) os << " ta";
  if (s.args.trans_b) os << " tb";
  if (s.bias) os << " bias";
  if (s.args.accumulate) os << " acc";
  return os.str();
}

// ---- the variants -----------------------------------------------------------------------------

const char* const kCublas = "cublas";
const char* const kCublasTf32 = "cublas-tf32";
const char* const kCublasBf16 = "cublas-bf16";

std::vector<Variant> matmul_variants(Device& dev) {
  std::vector<Variant> out = variants_of(dev.kernels().matmul);
  std::string why;
  if (!dev.info().emulated && cublas_available(dev, &why)) {
    out.push_back({kCublas, "cuBLAS SGEMM",
                    "cublasSgemm in pure fp32 (CUBLAS_DEFAULT_MATH; cublasGemmEx + cublasSger for a bias on the "
                    "other forms): the peer of v1-v7, v9",
                    true, {50}});
    out.push_back({kCublasTf32, "cuBLAS SGEMM (TF32)",
                    "cublasSgemm with CUBLAS_TF32_TENSOR_OP_MATH (cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 on "
                    "the other forms): the peer of v8, v10",
                    true, {80}});
    out.push_back({kCublasBf16, "cuBLAS GEMM (BF16)", "cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_16BF: v11's peer",
                    true, {80}});
  }
  return out;
}

// How a variant rounds its inputs: its name says so (v8, v10, v11, the cuBLAS tensor-core
// peers).
enum class Rounding { fp32, tf32, bf16 };
Rounding rounding_of(const Variant& v) {
  if (v.name.find("TF32") != std::string::npos) return Rounding::tf32;
  if (v.name.find("BF16") != std::string::npos) return Rounding::bf16;
  return Rounding::fp32;
}

// ---- validation helpers -----------------------------------------------------------------------

// The window [at, at + n) of out (n + 1 floats) against want at the sampled indices, and the
// one float outside the window must still hold the 0xFF fill (a write past the end at = 0,
// or before the start at = 1, changes it).
Check compare_window_at(const std::string& name, const Array<float>& out, size_t at, size_t n,
                        const std::vector<size_t>& samples, const std::vector<double>& want, Tolerance tol) {
  const std::vector<float> host = out.to_vector();
  Check c = harness::compare_at(name, std::span<const float>(host.data() + at, n), samples, want, tol);
  uint32_t bits = 0;
  std::memcpy(&bits, &host[at == 0 ? n : 0], sizeof bits);
  if (bits != 0xFFFFFFFFu) {
    ++c.mismatches;
    c.report += name + ": the float " + (at == 0 ? "after the end" : "before the start") + " of it was overwritten\n";
  }
  return c;
}

// A device copy of `host` as allocated (aligned) and one float further on (shifted).
struct TwoCopies {
  Array<float> aligned, shifted;
  TwoCopies() = default;
  TwoCopies(Device& dev, const std::vector<float>& host) : aligned(dev, host), shifted(dev, host.size() + 1) {
    dev.from_host(shifted.data() + 1, host.data(), host.size() * sizeof(float));
  }
  const float* at(size_t offset) const { return offset == 0 ? aligned.data() : shifted.data() + 1; }
};

// ---- matmul --------------------------------------------------------------------------------

class MatmulProblem final : public Problem {
 public:
  MatmulProblem(Device& dev, MatmulSize s, uint64_t seed)
      : dev_(dev), s_(std::move(s)), variants_(matmul_variants(dev)), c_(dev, elements_c() + 1) {
    host_a_.resize(static_cast<size_t>(s_.M) * s_.K);
    host_b_.resize(static_cast<size_t>(s_.K) * s_.N);
    harness::fill_random(host_a_, seed, -1.0f, 1.0f);
    harness::fill_random(host_b_, seed + 1, -1.0f, 1.0f);
    a_ = TwoCopies(dev, host_a_);
    b_ = TwoCopies(dev, host_b_);
    if (s_.bias) {
      host_bias_.resize(static_cast<size_t>(s_.N));
      harness::fill_random(host_bias_, seed + 2, -1.0f, 1.0f);
      bias_ = TwoCopies(dev, host_bias_);
      if (variants_.size() > dev.kernels().matmul.size()) ones_ = Array<float>(dev, std::vector<float>(s_.M, 1.0f), kernels::uninitialized);
    }
    if (s_.args.accumulate) {
      host_c0_.resize(elements_c());
      harness::fill_random(host_c0_, seed + 3, -1.0f, 1.0f);
    }
    choose_samples(seed + 4);
    want_.resize(samples_.size());
    for (size_t i = 0; i < samples_.size(); ++i) {
      want_[i] = entry(static_cast<int>(samples_[i] / s_.N), static_cast<int>(samples_[i] % s_.N));
    }
  }

  std::string shape() const override { return matmul_shape(s_); }
  double flops() const override { return 2.0 * s_.M * s_.N * s_.K; }
  // Compulsory traffic: A, B (and the bias) read once, C written once (read too with acc).
  double bytes(size_t) const override {
    const double c = static_cast<double>(elements_c()) * (s_.args.accumulate ? 2.0 : 1.0);
    return 4.0 * (static_cast<double>(s_.M) * s_.K + static_cast<double>(s_.K) * s_.N + c + (s_.bias ? s_.N : 0));
  }

  void run(size_t v) override { run_at(v, 0); }

  // Lesson 09's rungs v2-v8 compute the plain product only (Requirements::plain_only).
  std::string unsupported(size_t v) const override {
    if (variants_.at(v).needs.plain_only && !s_.plain()) {
      return "computes the plain product C = A.B only (a lesson-09 rung), not " + matmul_shape(s_);
    }
    return "";
  }

  Check validate(size_t v) override {
    Check c;
    for (size_t at : {size_t{0}, size_t{1}}) {
      c_.fill_bytes(0xFF);  // NaN: an entry never written fails (with acc, C0 goes in the window)
      if (s_.args.accumulate) dev_.from_host(c_.data() + at, host_c0_.data(), host_c0_.size() * sizeof(float));
      run_at(v, at);
      dev_.synchronize();
      const char* name = at == 0 ? "C" : "C (every pointer 4 bytes past 16-byte alignment)";
      c = harness::merge(
          c, compare_window_at(name, c_, at, elements_c(), samples_, want_, tolerance(variants_.at(v))));
    }
    return c;
  }

 private:
  size_t elements_c() const { return static_cast<size_t>(s_.M) * s_.N; }

  // Variant v with every pointer `at` floats into its buffer.
  void run_at(size_t v, size_t at) {
    MatmulArgs args = s_.args;
    args.bias = s_.bias ? bias_.at(at) : nullptr;
    float* C = c_.data() + at;
    const auto& table = dev_.kernels().matmul;
    if (v < table.size()) {
      table[v].fn(C, a_.at(at), b_.at(at), s_.M, s_.N, s_.K, args);
      return;
    }
    const std::string& id = variants_.at(v).id;
    const CublasMath math = id == kCublasTf32   ? CublasMath::tf32
                            : id == kCublasBf16 ? CublasMath::bf16
                                                : CublasMath::fp32;
    if (s_.plain() && math != CublasMath::bf16) {  // the lesson's peer: cublasSgemm, as it always was
      cublas_sgemm(C, a_.at(at), b_.at(at), s_.M, s_.N, s_.K, math == CublasMath::tf32);
    } else {
      cublas_gemm(C, a_.at(at), b_.at(at), s_.M, s_.N, s_.K, args, ones_.data(), math);
    }
  }

  // The inputs are uniform in [-1, 1), so a product a b has |a b| ~ 1/3 (rms) and a missing
  // or doubled term moves an entry by that much.
  // fp32: K products summed in fp32 (and the bias, C0 added): rounding stays well under
  // 1e-6 K + 1e-5 relative (at K = 45: ~1e-5 of entries of size ~2).
  // TF32: each input rounded to a 10-bit mantissa (relative error up to 2^-11), so each
  // product is off by ~1.3e-4 rms in a random direction and the sum of K by ~1.3e-4 sqrt(K):
  // 2e-3 sqrt(K) is ~15 of those standard deviations (7 if an implementation truncates
  // instead of rounding), still 0.06 at K = 1024.
  // BF16: an 8-bit mantissa, relative error up to 2^-9 per operand (8x TF32's), so ~5e-4 rms
  // per product and ~5e-4 sqrt(K) for the sum: 8e-3 sqrt(K) is ~15 standard deviations again
  // (0.05 at K = 45, 1.0 at K = 16384 where entries are ~40): a wrong tile or k-step is
  // caught, a single missing product at large K may not be.
  Tolerance tolerance(const Variant& v) const {
    const double sqrt_k = std::sqrt(static_cast<double>(s_.K));
    switch (rounding_of(v)) {
      case Rounding::tf32:
        return {2e-3 * sqrt_k, 1e-4};
      case Rounding::bf16:
        return {8e-3 * sqrt_k, 1e-3};
      case Rounding::fp32:
        break;
    }
    return {1e-6 * s_.K, 1e-5};
  }

  // C[i][j] in double: C0 (with acc) + sum_k op(A)[i][k] op(B)[k][j] + bias[j].
  double entry(int i, int j) const {
    const size_t M = static_cast<size_t>(s_.M), N = static_cast<size_t>(s_.N), K = static_cast<size_t>(s_.K);
    double sum = 0.0;
    for (size_t k = 0; k < K; ++k) {
      const double a = s_.args.trans_a ? host_a_[k * M + i] : host_a_[i * K + k];  // A (K,M) or (M,K)
      const double b = s_.args.trans_b ? host_b_[j * K + k] : host_b_[k * N + j];  // B (N,K) or (K,N)
      sum += a * b;
    }
    if (s_.bias) sum += host_bias_[static_cast<size_t>(j)];
    if (s_.args.accumulate) sum += host_c0_[static_cast<size_t>(i) * N + j];
    return sum;
  }

  // harness::product_samples: all entries when M N K <= 2^26 (the test sizes); else the four
  // edges (where partial tiles live) and 4096 random entries.
  void choose_samples(uint64_t seed) { samples_ = harness::product_samples(s_.M, s_.N, s_.K, seed); }

  Device& dev_;
  MatmulSize s_;
  std::vector<Variant> variants_;
  TwoCopies a_, b_, bias_;
  Array<float> c_, ones_;
  std::vector<float> host_a_, host_b_, host_bias_, host_c0_;
  std::vector<size_t> samples_;
  std::vector<double> want_;
};

// ---- bias_backward --------------------------------------------------------------------------

class BiasBackwardProblem final : public Problem {
 public:
  BiasBackwardProblem(Device& dev, int N, int OC, uint64_t seed)
      : dev_(dev), N_(N), OC_(OC), dbias_(dev, static_cast<size_t>(OC) + 1) {
    std::vector<float> dout(static_cast<size_t>(N) * OC);
    harness::fill_random(dout, seed, -1.0f, 1.0f);
    dout_ = TwoCopies(dev, dout);
    dbias0_.resize(static_cast<size_t>(OC));
    harness::fill_random(dbias0_, seed + 1, -1.0f, 1.0f);
    want_.assign(dbias0_.begin(), dbias0_.end());
    for (size_t n = 0; n < static_cast<size_t>(N); ++n) {
      for (size_t c = 0; c < static_cast<size_t>(OC); ++c) want_[c] += dout[n * OC + c];
    }
    samples_.resize(static_cast<size_t>(OC));
    for (size_t c = 0; c < samples_.size(); ++c) samples_[c] = c;
  }
  std::string shape() const override {
    return "N=" + kernels::bench::short_count(static_cast<size_t>(N_)) +
           " OC=" + kernels::bench::short_count(static_cast<size_t>(OC_));
  }
  double flops() const override { return 0.0; }  // one add per element: about bytes
  // dout read once, dbias read and written.
  double bytes(size_t) const override { return 4.0 * (static_cast<double>(N_) * OC_ + 2.0 * OC_); }
  void run(size_t v) override { run_at(v, 0); }
  Check validate(size_t v) override {
    // A float sum of N terms in [-1, 1) (one thread's running sum, partial sums of row
    // groups) errs by about N roundings of partial sums of size ~sqrt(N): N u in all, so
    // 4 N u (1e-3 at N = 16384; a missing row moves a sum by ~0.5).
    const Tolerance tol{4.0 * N_ * 0x1p-24 + 1e-6, 1e-5};
    Check c;
    for (size_t at : {size_t{0}, size_t{1}}) {
      dbias_.fill_bytes(0xFF);
      dev_.from_host(dbias_.data() + at, dbias0_.data(), dbias0_.size() * sizeof(float));
      run_at(v, at);
      dev_.synchronize();
      const char* name = at == 0 ? "dbias" : "dbias (every pointer 4 bytes past 16-byte alignment)";
      c = harness::merge(c, compare_window_at(name, dbias_, at, static_cast<size_t>(OC_), samples_, want_, tol));
    }
    return c;
  }

 private:
  void run_at(size_t v, size_t at) {
    dev_.kernels().bias_backward.at(v).fn(dbias_.data() + at, dout_.at(at), N_, OC_);
  }
  Device& dev_;
  int N_, OC_;
  TwoCopies dout_;
  Array<float> dbias_;
  std::vector<float> dbias0_;
  std::vector<size_t> samples_;
  std::vector<double> want_;
};

}  // namespace

Op matmul_op() {
  Op op;
  op.name = "matmul";
  op.summary = "C (+)= op(A).op(B) + bias: coalescing, shared-memory tiles, register blocking, float4, warp tiles, "
               "TF32 tensor cores, then any layout in fp32, TF32 and BF16 (the trainer's); cuBLAS beside";
  op.sizes = {"1024", "4096", "fwd M=16384 N=1536 K=384 tb bias", "dinp M=16384 N=384 K=1536",
              "dw M=1536 N=384 K=16384 ta acc"};
  // The plain product (every version): a square one, one with every dimension ragged
  // against every tile and K, N not multiples of 4 (the scalar fallback of v6-v11), one on
  // the float4 path with K ragged against BK, and one on the float4 path with M and N ragged
  // against the 128x128 tiles. Then the other forms (v1, v9-v11): small and odd (M, N, K
  // against every tile edge, K odd: the scalar paths) in each layout, with and without bias
  // and accumulate; then multiples of 4 (the float4 paths; the shifted run takes the scalar
  // ones) with M > 128 (on the emulator's one multiprocessor: v9's 128x128 tiles; the others
  // run the 64x64 ones), and a 1x1x1.
  op.test_sizes = {"64",
                   "67x45x33",
                   "M=37 N=29 K=45",
                   "128x256x40",
                   "100x132x20",
                   "fwd M=37 N=29 K=45 tb bias",
                   "dw M=29 N=37 K=45 ta acc",
                   "M=37 N=29 K=45 ta tb bias acc",
                   "M=132 N=68 K=20 tb bias",
                   "M=64 N=36 K=52 ta acc",
                   "M=1 N=1 K=1 bias acc"};
  op.variants = [](Device& dev) { return matmul_variants(dev); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<MatmulProblem>(dev, parse_matmul_size(size), seed);
  };
  return op;
}

Op bias_backward_op() {
  Op op;
  op.name = "bias_backward";
  op.summary = "dbias += the column sums of dout: a thread per column, then column strips with a fixed-order tree";
  op.sizes = {"16384x384", "16384x1536"};
  // Rows not a multiple of the 32 row groups nor of their 4-row unroll, columns not a
  // multiple of the 32-column strip; one row; one column.
  op.test_sizes = {"37x29", "301x70", "1x33", "70x1"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().bias_backward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<size_t> d = kernels::bench::parse_dims("bias_backward", size, 2, "NxOC, e.g. 16384x384");
    return std::make_unique<BiasBackwardProblem>(dev, static_cast<int>(d[0]), static_cast<int>(d[1]), seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
