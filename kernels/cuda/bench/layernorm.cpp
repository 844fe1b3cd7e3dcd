// kernels/cuda/bench/layernorm.cpp: layernorm forward, backward and residual + layernorm
// (kernels/cuda/layernorm.cu) for the GPU harness.
//
// Sizes: "NxC" (rows x channels). The GPU defaults are GPT-2 small's activations at B = 32,
// T = 1024 (32768 x 768, 96 MB per tensor) and a wider model's (8192 x 4096, 128 MB): both far
// beyond the 50 MB L2 of an H100, so every pass really goes to memory. The test sizes are small
// and odd: C not a multiple of 4 or 32 (v3's fallback, ragged lanes), one float4 per lane with
// idle lanes (100), the largest register row (4096) and just past it (4100), more rows than
// the emulator's one-SM grid has warps (70: backward v2's grid-stride loop), and for the
// backward a C past its shared-memory bound (6145). "NxC:nobias" passes bias (and dbias)
// as nullptr, the GPT's --bias false: the test sizes run it on every path (v1, v2's warps,
// v3's registers, backward v2's fallback), and the GPT's own size is among the GPU sizes.
//
// Inputs: x uniform in [-1, 1), every third row shifted by +10. There mean^2 / var = 300, so
// the plain one-pass var = E[x^2] - E[x]^2 in float loses 2-3 of its 7 digits: forward v2
// with the shift taken out (K = 0) misses the rstd tolerance below at 7x33 and 70x100. The
// kernels' shifted or two-pass statistics must not.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims, short_count
#include "kernels/cuda/bench/ops.h"
#include "kernels/layernorm.h"  // layernorm_reference: the CPU's three-pass formula in double

namespace kernels::cuda::bench {

namespace {

using harness::Check;
using harness::Tolerance;

constexpr double kUnitRoundoff = 0x1p-24;  // float: relative error of one rounding

std::string rows_shape(int N, int C, bool bias) {
  std::ostringstream os;
  os << "N=" << kernels::bench::short_count(static_cast<size_t>(N))
     << " C=" << kernels::bench::short_count(static_cast<size_t>(C)) << (bias ? "" : " no bias");
  return os.str();
}

// "NxC", or "NxC:nobias": bias (and dbias) passed as nullptr, the GPT's --bias false.
struct Rows {
  int N = 0, C = 0;
  bool bias = true;
};

Rows parse_rows(const std::string& op, const std::string& size) {
  const std::string suffix = ":nobias";
  const bool nobias = size.size() > suffix.size() && size.compare(size.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string dims = nobias ? size.substr(0, size.size() - suffix.size()) : size;
  const std::vector<size_t> d = kernels::bench::parse_dims(op, dims, 2, "NxC or NxC:nobias, e.g. 32768x768");
  return {static_cast<int>(d[0]), static_cast<int>(d[1]), !nobias};
}

// x (N,C): uniform in [-1, 1), rows n % 3 == 2 shifted by +10 (see the header).
std::vector<float> layernorm_input(int N, int C, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(N) * static_cast<size_t>(C));
  harness::fill_random(x, seed, -1.0f, 1.0f);
  for (int n = 2; n < N; n += 3) {
    float* row = x.data() + static_cast<size_t>(n) * static_cast<size_t>(C);
    for (int c = 0; c < C; ++c) row[c] += 10.0f;
  }
  return x;
}

// Whether forward v3 / residual v2 keep the row in registers at this C (else they run the
// two-read fallback; cudaMalloc'd buffers are always 16-byte aligned). layernorm.cu's bound.
bool row_in_registers(int C) { return C % 4 == 0 && C <= 4096; }

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The forward's reference and the tolerances that follow from float arithmetic on it.
struct ForwardReference {
  std::vector<double> out, mean, rstd;
  Tolerance out_tol, mean_tol, rstd_tol;
};

ForwardReference forward_reference(const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b, int N, int C) {
  const LayernormReference ref = layernorm_reference(x.data(), w.data(), b.data(), N, C);
  ForwardReference r;
  r.out = ref.out;
  r.mean = ref.mean;
  r.rstd = ref.rstd;
  double max_x = 0.0, max_w = 0.0, max_rstd = 0.0, max_xhat = 0.0;
  for (float v : x) max_x = std::max(max_x, std::fabs(static_cast<double>(v)));
  for (float v : w) max_w = std::max(max_w, std::fabs(static_cast<double>(v)));
  for (int n = 0; n < N; ++n) {
    max_rstd = std::max(max_rstd, ref.rstd[static_cast<size_t>(n)]);
    for (int c = 0; c < C; ++c) {
      const double xv = x[static_cast<size_t>(n) * static_cast<size_t>(C) + static_cast<size_t>(c)];
      const double xhat = (xv - ref.mean[static_cast<size_t>(n)]) * ref.rstd[static_cast<size_t>(n)];
      max_xhat = std::max(max_xhat, std::fabs(xhat));
    }
  }
  // A float sum of C terms of size <= max|x| (one thread's running sum, or 32 lanes' sums and
  // a shuffle tree) errs by about sqrt(C) roundings of the running total: 4 sqrt(C) u max|x| on
  // the mean leaves room for the sequential v1. The variance sums are of deviations (two-pass
  // or shifted), so their relative error is ~sqrt(C) u too; rsqrtf adds 2 ulp.
  const double sqrt_c = std::sqrt(static_cast<double>(C));
  const double mean_atol = 4.0 * sqrt_c * kUnitRoundoff * max_x;
  const double rstd_rtol = 8.0 * sqrt_c * kUnitRoundoff + 2e-6;
  r.mean_tol = {mean_atol, 1e-6};
  r.rstd_tol = {0.0, rstd_rtol};
  // out = (x - mean) * rstd * w + b: the mean's error times rstd |w|, rstd's relative error
  // times |xhat w|, and 1e-5 for the rounding of the few operations per element.
  r.out_tol = {1e-5 + mean_atol * max_rstd * max_w + rstd_rtol * max_xhat * max_w, 1e-5};
  return r;
}

// ---- layernorm forward ------------------------------------------------------------------------

class LayernormForwardProblem final : public Problem {
 public:
  LayernormForwardProblem(Device& dev, int N, int C, bool bias, uint64_t seed)
      : dev_(dev), N_(N), C_(C), with_bias_(bias), out_(dev, elements()), mean_(dev, static_cast<size_t>(N)),
        rstd_(dev, static_cast<size_t>(N)) {
    const std::vector<float> x = layernorm_input(N, C, seed);
    std::vector<float> w, b;
    inp_ = Array<float>(dev, x, kernels::uninitialized);
    weight_ = random_buffer(dev, static_cast<size_t>(C), seed + 1, 0.5f, 1.5f, &w);
    bias_ = random_buffer(dev, static_cast<size_t>(C), seed + 2, -0.5f, 0.5f, &b);
    if (!bias) b.assign(static_cast<size_t>(C), 0.0f);  // no bias: the reference adds zeros
    ref_ = forward_reference(x, w, b, N, C);
  }
  std::string shape() const override { return rows_shape(N_, C_, with_bias_); }
  // As the algorithm states it: mean (1 add), variance (sub + FMA), normalise (sub, mul, FMA):
  // 8 FLOPs per element, however a version arranges them (kernels/bench/layernorm.cpp).
  double flops() const override { return 8.0 * static_cast<double>(elements()); }
  // Per element, every pass over the row counted as a trip (a re-read may hit L1/L2, and then
  // the GB/s figure overstates DRAM traffic: that is the cost v3 removes):
  //   v1 three passes = read x 3 times + write out: 16 B;  v2: read x twice + write: 12 B;
  //   v3: read x once + write: 8 B (12 where it falls back to v2).
  // Plus weight and bias read once, mean and rstd written once.
  double bytes(size_t v) const override {
    const double per_element = v == 0 ? 16.0 : (v == 1 || !row_in_registers(C_)) ? 12.0 : 8.0;
    return per_element * static_cast<double>(elements()) + 8.0 * C_ + 8.0 * N_;
  }
  void run(size_t v) override {
    dev_.kernels().layernorm_forward.at(v).fn(out_.data(), mean_.data(), rstd_.data(), inp_.data(),
                                               weight_.data(), with_bias_ ? bias_.data() : nullptr, N_, C_);
  }
  Check validate(size_t v) override {
    out_.fill_bytes(0xFF);
    mean_.fill_bytes(0xFF);
    rstd_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    Check c = compare_device("out", out_, ref_.out, ref_.out_tol);
    c = harness::merge(c, compare_device("mean", mean_, ref_.mean, ref_.mean_tol));
    return harness::merge(c, compare_device("rstd", rstd_, ref_.rstd, ref_.rstd_tol));
  }

 private:
  size_t elements() const { return static_cast<size_t>(N_) * static_cast<size_t>(C_); }
  Device& dev_;
  int N_, C_;
  bool with_bias_;
  Array<float> inp_, weight_, bias_, out_, mean_, rstd_;
  ForwardReference ref_;
};

// ---- layernorm backward -----------------------------------------------------------------------

class LayernormBackwardProblem final : public Problem {
 public:
  LayernormBackwardProblem(Device& dev, int N, int C, bool bias, uint64_t seed)
      : dev_(dev), N_(N), C_(C), with_bias_(bias) {
    const size_t n = elements();
    const std::vector<float> x = layernorm_input(N, C, seed);
    std::vector<float> w(static_cast<size_t>(C)), b(static_cast<size_t>(C), 0.0f), dy;
    harness::fill_random(w, seed + 1, 0.5f, 1.5f);
    // mean and rstd as the forward pass saved them: the exact statistics rounded to float.
    const LayernormReference fwd = layernorm_reference(x.data(), w.data(), b.data(), N, C);
    std::vector<float> mean(fwd.mean.begin(), fwd.mean.end()), rstd(fwd.rstd.begin(), fwd.rstd.end());
    inp_ = Array<float>(dev, x, kernels::uninitialized);
    weight_ = Array<float>(dev, w, kernels::uninitialized);
    mean_ = Array<float>(dev, mean, kernels::uninitialized);
    rstd_ = Array<float>(dev, rstd, kernels::uninitialized);
    dout_ = random_buffer(dev, n, seed + 2, -1.0f, 1.0f, &dy);
    // The three outputs ACCUMULATE: they start from these known values, and so does the reference.
    dinp0_.resize(n);
    dweight0_.resize(static_cast<size_t>(C));
    dbias0_.resize(static_cast<size_t>(C));
    harness::fill_random(dinp0_, seed + 3);
    harness::fill_random(dweight0_, seed + 4);
    harness::fill_random(dbias0_, seed + 5);
    dinp_ = Array<float>(dev, dinp0_, kernels::uninitialized);
    dweight_ = Array<float>(dev, dweight0_, kernels::uninitialized);
    dbias_ = Array<float>(dev, dbias0_, kernels::uninitialized);

    // The reference: nn::layernorm_backward's formulas, in double, from the float mean/rstd.
    //   xhat = (x - mean) rstd,  g = dout w,  dinp += rstd (g - mean(g) - xhat mean(g xhat))
    //   dweight += sum_n dout xhat,  dbias += sum_n dout
    want_dinp_ = to_double(dinp0_);
    want_dweight_ = to_double(dweight0_);
    want_dbias_ = to_double(dbias0_);
    std::vector<double> abs_dweight(static_cast<size_t>(C), 0.0), abs_dbias(static_cast<size_t>(C), 0.0);
    for (int r = 0; r < N; ++r) {
      const size_t row = static_cast<size_t>(r) * static_cast<size_t>(C);
      const double m = mean[static_cast<size_t>(r)];
      const double s = rstd[static_cast<size_t>(r)];
      double g_mean = 0.0, gxhat_mean = 0.0;
      for (int c = 0; c < C; ++c) {
        const size_t i = row + static_cast<size_t>(c);
        const double g = static_cast<double>(dy[i]) * w[static_cast<size_t>(c)];
        g_mean += g;
        gxhat_mean += g * (x[i] - m) * s;
      }
      g_mean /= C;
      gxhat_mean /= C;
      for (int c = 0; c < C; ++c) {
        const size_t i = row + static_cast<size_t>(c);
        const size_t ci = static_cast<size_t>(c);
        const double xhat = (x[i] - m) * s;
        const double g = static_cast<double>(dy[i]) * w[ci];
        want_dinp_[i] += s * (g - g_mean - xhat * gxhat_mean);
        want_dweight_[ci] += dy[i] * xhat;
        want_dbias_[ci] += dy[i];
        abs_dweight[ci] += std::fabs(dy[i] * xhat);
        abs_dbias[ci] += std::fabs(static_cast<double>(dy[i]));
      }
    }
    // dinp: each row's two means are float sums of C zero-mean terms (error ~1e-7), the rest is
    // the rounding of a few operations on terms <= ~10: 2e-5. dweight, dbias: float sums over
    // the N rows (v1: one atomic after another; v2: per block, then per block; v3: per row
    // slice, then over the 32 slices): 16 u times the sum of |terms| bounds their rounding
    // with room to spare.
    const double sum_w = *std::max_element(abs_dweight.begin(), abs_dweight.end());
    const double sum_b = *std::max_element(abs_dbias.begin(), abs_dbias.end());
    dinp_tol_ = {2e-5, 1e-5};
    dweight_tol_ = {1e-6 + 16.0 * kUnitRoundoff * sum_w, 1e-5};
    dbias_tol_ = {1e-6 + 16.0 * kUnitRoundoff * sum_b, 1e-5};
  }
  std::string shape() const override { return rows_shape(N_, C_, with_bias_); }
  // Per element: xhat (2), g (1), the two sums (3) in pass 1; xhat, g again (3), dinp (5),
  // dweight and dbias (3) in pass 2: 16 FLOPs as written.
  double flops() const override { return 16.0 * static_cast<double>(elements()); }
  // Per element both versions read dout and x in each of two passes (16 B) and read and write
  // dinp (8 B). v1 adds 2 global atomics per element (a read-modify-write of 4 B each, in L2:
  // 16 B); v2 adds 2 atomics per block per column (its grid: at most 8 blocks per SM, about
  // nothing next to N). Plus weight, mean, rstd read.
  // v3: no atomics; its second kernel reads dout and x once more: 32 B.
  double bytes(size_t v) const override {
    const double per_element = v == 2 ? 32.0 : v == 0 || C_ > 6144 ? 40.0 : 24.0;
    return per_element * static_cast<double>(elements()) + 4.0 * C_ + 8.0 * N_;
  }
  void run(size_t v) override {
    dev_.kernels().layernorm_backward.at(v).fn(dinp_.data(), dweight_.data(), with_bias_ ? dbias_.data() : nullptr,
                                                dout_.data(),
                                                inp_.data(), weight_.data(), mean_.data(), rstd_.data(), N_, C_);
  }
  Check validate(size_t v) override {
    dinp_.upload(dinp0_);
    dweight_.upload(dweight0_);
    dbias_.upload(dbias0_);
    run(v);
    dev_.synchronize();
    Check c = compare_device("dinp", dinp_, want_dinp_, dinp_tol_);
    c = harness::merge(c, compare_device("dweight", dweight_, want_dweight_, dweight_tol_));
    if (with_bias_) c = harness::merge(c, compare_device("dbias", dbias_, want_dbias_, dbias_tol_));
    // The deterministic version promises the same bits every run: run it again and compare
    // exactly (v1, v2's float atomics may legitimately differ on a GPU).
    if (std::string(dev_.kernels().layernorm_backward.at(v).name) == "deterministic") {
      const std::vector<float> dinp1 = dinp_.to_vector(), dweight1 = dweight_.to_vector(), dbias1 = dbias_.to_vector();
      dinp_.upload(dinp0_);
      dweight_.upload(dweight0_);
      dbias_.upload(dbias0_);
      run(v);
      dev_.synchronize();
      c = harness::merge(c, compare_device("dinp (second run)", dinp_, to_double(dinp1), {0.0, 0.0}));
      c = harness::merge(c, compare_device("dweight (second run)", dweight_, to_double(dweight1), {0.0, 0.0}));
      c = harness::merge(c, compare_device("dbias (second run)", dbias_, to_double(dbias1), {0.0, 0.0}));
    }
    return c;
  }

 private:
  size_t elements() const { return static_cast<size_t>(N_) * static_cast<size_t>(C_); }
  Device& dev_;
  int N_, C_;
  bool with_bias_;
  Array<float> inp_, weight_, mean_, rstd_, dout_, dinp_, dweight_, dbias_;
  std::vector<float> dinp0_, dweight0_, dbias0_;
  std::vector<double> want_dinp_, want_dweight_, want_dbias_;
  Tolerance dinp_tol_, dweight_tol_, dbias_tol_;
};

// ---- residual + layernorm ---------------------------------------------------------------------

class ResidualLayernormProblem final : public Problem {
 public:
  ResidualLayernormProblem(Device& dev, int N, int C, bool with_bias, uint64_t seed)
      : dev_(dev), N_(N), C_(C), with_bias_(with_bias), residual_(dev, elements()), out_(dev, elements()),
        mean_(dev, static_cast<size_t>(N)), rstd_(dev, static_cast<size_t>(N)) {
    const std::vector<float> a = layernorm_input(N, C, seed);
    std::vector<float> b, w, bias;
    a_ = Array<float>(dev, a, kernels::uninitialized);
    b_ = random_buffer(dev, elements(), seed + 1, -1.0f, 1.0f, &b);
    weight_ = random_buffer(dev, static_cast<size_t>(C), seed + 2, 0.5f, 1.5f, &w);
    bias_ = random_buffer(dev, static_cast<size_t>(C), seed + 3, -0.5f, 0.5f, &bias);
    if (!with_bias) bias.assign(static_cast<size_t>(C), 0.0f);  // no bias: the reference adds zeros
    // residual = a + b in float, as the kernels round it: the layernorm is of that.
    std::vector<float> r(elements());
    for (size_t i = 0; i < r.size(); ++i) r[i] = a[i] + b[i];
    want_residual_ = to_double(r);
    ref_ = forward_reference(r, w, bias, N, C);
  }
  std::string shape() const override { return rows_shape(N_, C_, with_bias_); }
  double flops() const override { return 9.0 * static_cast<double>(elements()); }  // the add + 8
  // Per element: v1 reads a, b and writes residual (12 B), then forward v2 reads it twice and
  // writes out (12 B): 24 B. v2 reads a, b, writes residual and out: 16 B (20 where it falls
  // back: it reads the residual back once). Plus weight, bias, mean, rstd.
  double bytes(size_t v) const override {
    const double per_element = v == 0 ? 24.0 : row_in_registers(C_) ? 16.0 : 20.0;
    return per_element * static_cast<double>(elements()) + 8.0 * C_ + 8.0 * N_;
  }
  void run(size_t v) override {
    dev_.kernels().residual_layernorm.at(v).fn(residual_.data(), out_.data(), mean_.data(), rstd_.data(),
                                                a_.data(), b_.data(), weight_.data(),
                                                with_bias_ ? bias_.data() : nullptr, N_, C_);
  }
  Check validate(size_t v) override {
    residual_.fill_bytes(0xFF);
    out_.fill_bytes(0xFF);
    mean_.fill_bytes(0xFF);
    rstd_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    // One IEEE float addition, rounded the same way on both sides: bit-identical.
    Check c = compare_device("residual", residual_, want_residual_, {0.0, 0.0});
    c = harness::merge(c, compare_device("out", out_, ref_.out, ref_.out_tol));
    c = harness::merge(c, compare_device("mean", mean_, ref_.mean, ref_.mean_tol));
    return harness::merge(c, compare_device("rstd", rstd_, ref_.rstd, ref_.rstd_tol));
  }

 private:
  size_t elements() const { return static_cast<size_t>(N_) * static_cast<size_t>(C_); }
  Device& dev_;
  int N_, C_;
  bool with_bias_;
  Array<float> a_, b_, weight_, bias_, residual_, out_, mean_, rstd_;
  std::vector<double> want_residual_;
  ForwardReference ref_;
};

}  // namespace

Op layernorm_forward_op() {
  Op op;
  op.name = "layernorm_forward";
  op.summary = "row-wise layernorm: thread per row (3 passes) vs warp per row (shifted one-pass) vs row in registers";
  op.sizes = {"32768x768", "8192x4096", "16384x384:nobias"};
  op.test_sizes = {"7x33", "70x100", "5x1030", "3x1028", "2x4096", "2x4100", "7x33:nobias", "70x100:nobias",
                   "3x1028:nobias"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().layernorm_forward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const Rows r = parse_rows("layernorm_forward", size);
    return std::make_unique<LayernormForwardProblem>(dev, r.N, r.C, r.bias, seed);
  };
  return op;
}

Op layernorm_backward_op() {
  Op op;
  op.name = "layernorm_backward";
  op.summary = "layernorm backward: global atomics per element vs warp per row with per-block shared sums vs "
               "deterministic fixed-order column sums";
  op.sizes = {"32768x768", "8192x4096", "16384x384:nobias"};
  // (No "3x6145:nobias": v2's fallback at 6145 is v1, which runs without a bias at 7x33 and
  // 70x100 itself; v3's 1024-thread blocks make 6145 columns the slowest size to emulate.)
  op.test_sizes = {"7x33", "70x100", "5x1030", "3x6145", "7x33:nobias", "70x100:nobias"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().layernorm_backward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const Rows r = parse_rows("layernorm_backward", size);
    return std::make_unique<LayernormBackwardProblem>(dev, r.N, r.C, r.bias, seed);
  };
  return op;
}

Op residual_layernorm_op() {
  Op op;
  op.name = "residual_layernorm";
  op.summary = "residual add + layernorm: two kernels (24 B/element) vs one fused kernel (16 B/element)";
  op.sizes = {"32768x768", "8192x4096", "16384x384:nobias"};
  op.test_sizes = {"7x33", "70x100", "5x1030", "3x1028", "2x4096", "2x4100", "7x33:nobias", "70x100:nobias",
                   "3x1028:nobias"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().residual_layernorm); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const Rows r = parse_rows("residual_layernorm", size);
    return std::make_unique<ResidualLayernormProblem>(dev, r.N, r.C, r.bias, seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
