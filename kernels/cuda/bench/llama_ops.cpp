// kernels/cuda/bench/llama_ops.cpp: the modern (Llama) block's ops (kernels/cuda/llama_ops.cu)
// for the GPU harness: RMSNorm forward and backward, RoPE forward and backward, SwiGLU forward
// and backward.
//
// References: the CPU ladders' v1 (kernels/rmsnorm.h, rope.h, swiglu.h) in double, on the same
// float inputs (RoPE: on the same float tables the device reads). Tolerances are stated per
// problem with the reason. Sizes: RMSNorm "NxC", RoPE "BxTxNHxHS" on q inside a qkv buffer
// (B, T, 3C) at stride 3C from position 5 (so k and v must come back untouched, and the offset
// is exercised), SwiGLU "NxH" on the halves of a fused gate_up projection (N, 2H). GPU sizes:
// nanoGPT's Shakespeare config (N = B*T = 16384, C = 384, 6 heads of 64) and a Llama-7B-wide row.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims
#include "kernels/cuda/bench/ops.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace kernels::cuda::bench {

namespace {

using harness::Check;
using harness::Tolerance;

constexpr double kUnitRoundoff = 0x1p-24;  // float: relative error of one rounding
constexpr int kRopePos0 = 5;               // a KV cache already holding 5 tokens

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::string dims(const std::vector<const char*>& names, const std::vector<size_t>& d) {
  std::ostringstream os;  // (not string +: GCC 12 warns falsely, -Wrestrict)
  for (size_t i = 0; i < d.size(); ++i) os << (i ? " " : "") << names[i] << "=" << d[i];
  return os.str();
}

// ---- RMSNorm forward ------------------------------------------------------------------------------

class RmsnormForwardProblem final : public Problem {
 public:
  RmsnormForwardProblem(Device& dev, int N, int C, uint64_t seed)
      : dev_(dev), N_(N), C_(C), out_(dev, static_cast<size_t>(N) * C), rstd_(dev, static_cast<size_t>(N)) {
    std::vector<float> x, w;
    inp_ = random_buffer(dev, static_cast<size_t>(N) * C, seed, -2.0f, 2.0f, &x);
    weight_ = random_buffer(dev, static_cast<size_t>(C), seed + 1, 0.5f, 1.5f, &w);
    const std::vector<double> xd = to_double(x), wd = to_double(w);
    want_out_.resize(x.size());
    want_rstd_.resize(static_cast<size_t>(N));
    kernels::rmsnorm_forward_v1(want_out_.data(), want_rstd_.data(), xd.data(), wd.data(), N, C,
                                static_cast<double>(kernels::kRmsnormEps));
    // A float sum of C positive terms errs by at most C u relative (any order: no cancellation);
    // the square root halves it; the scaling adds two roundings.
    tol_ = {1e-7, 4.0 * kUnitRoundoff + static_cast<double>(C) * kUnitRoundoff};
  }
  std::string shape() const override { return dims({"N", "C"}, {size_t(N_), size_t(C_)}); }
  double flops() const override { return 0.0; }  // 4 FLOPs per 8 bytes: memory-bound, GB/s only
  double bytes(size_t) const override { return 8.0 * static_cast<double>(N_) * C_; }  // read x once, write out
  void run(size_t v) override {
    dev_.kernels().rmsnorm_forward.at(v).fn(out_.data(), rstd_.data(), inp_.data(), weight_.data(), N_, C_,
                                            kernels::kRmsnormEps);
  }
  Check validate(size_t v) override {
    out_.fill_bytes(0xFF);  // NaN: an element never written fails
    rstd_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    return harness::merge(compare_device("out", out_, want_out_, tol_), compare_device("rstd", rstd_, want_rstd_, tol_));
  }

 private:
  Device& dev_;
  int N_, C_;
  Array<float> out_, rstd_, inp_, weight_;
  std::vector<double> want_out_, want_rstd_;
  Tolerance tol_;
};

// ---- RMSNorm backward -----------------------------------------------------------------------------

class RmsnormBackwardProblem final : public Problem {
 public:
  RmsnormBackwardProblem(Device& dev, int N, int C, uint64_t seed) : dev_(dev), N_(N), C_(C) {
    const size_t n = static_cast<size_t>(N) * C;
    std::vector<float> dy, x, w;
    dout_ = random_buffer(dev, n, seed, -1.0f, 1.0f, &dy);
    inp_ = random_buffer(dev, n, seed + 1, -2.0f, 2.0f, &x);
    weight_ = random_buffer(dev, static_cast<size_t>(C), seed + 2, 0.5f, 1.5f, &w);
    // rstd as the float forward gives it: the backward's input, the same bits on both sides
    std::vector<float> scratch(n), rstd(static_cast<size_t>(N));
    kernels::rmsnorm_forward_v1(scratch.data(), rstd.data(), x.data(), w.data(), N, C, kernels::kRmsnormEps);
    rstd_ = Array<float>(dev, rstd, kernels::uninitialized);
    // Both gradients ACCUMULATE: known random starts, on the device and in the reference.
    dinp0_.resize(n);
    dweight0_.resize(static_cast<size_t>(C));
    harness::fill_random(dinp0_, seed + 3);
    harness::fill_random(dweight0_, seed + 4);
    dinp_ = Array<float>(dev, dinp0_, kernels::uninitialized);
    dweight_ = Array<float>(dev, dweight0_, kernels::uninitialized);
    want_dinp_ = to_double(dinp0_);
    want_dweight_ = to_double(dweight0_);
    const std::vector<double> dyd = to_double(dy), xd = to_double(x), wd = to_double(w), rd = to_double(rstd);
    kernels::rmsnorm_backward_v1(want_dinp_.data(), want_dweight_.data(), dyd.data(), xd.data(), wd.data(), rd.data(),
                                 N, C);
    // dinp: the float sum of C terms g xhat errs by at most C u sum|g xhat|; it reaches dinp
    // times rstd |xhat| / C. Taken at the worst row, plus a few roundings of the result.
    // dweight: a float running sum of N terms onto the start errs by at most N u sum|terms|.
    double dinp_bound = 0.0;
    std::vector<double> abs_dw = to_double(dweight0_);
    for (double& a : abs_dw) a = std::fabs(a);
    for (int r = 0; r < N; ++r) {
      double sum_abs = 0.0, max_xhat = 0.0;
      for (int c = 0; c < C; ++c) {
        const size_t i = static_cast<size_t>(r) * C + c;
        const double xhat = xd[i] * rd[r];
        sum_abs += std::fabs(dyd[i] * wd[c] * xhat);
        max_xhat = std::max(max_xhat, std::fabs(xhat));
        abs_dw[c] += std::fabs(dyd[i] * xhat);
      }
      dinp_bound = std::max(dinp_bound, rd[r] * max_xhat * C * kUnitRoundoff * sum_abs / C);
    }
    dinp_tol_ = {1e-6 + 2.0 * dinp_bound, 1e-6};
    dweight_tol_ = {1e-7 + static_cast<double>(N) * kUnitRoundoff * *std::max_element(abs_dw.begin(), abs_dw.end()),
                    0.0};
  }
  std::string shape() const override { return dims({"N", "C"}, {size_t(N_), size_t(C_)}); }
  double flops() const override { return 0.0; }
  // read dout, inp (twice: dinp's kernel and dweight's), dinp; write dinp: 20 B per element
  double bytes(size_t) const override { return 20.0 * static_cast<double>(N_) * C_; }
  void run(size_t v) override {
    dev_.kernels().rmsnorm_backward.at(v).fn(dinp_.data(), dweight_.data(), dout_.data(), inp_.data(),
                                             weight_.data(), rstd_.data(), N_, C_);
  }
  Check validate(size_t v) override {
    dinp_.upload(dinp0_);
    dweight_.upload(dweight0_);
    run(v);
    dev_.synchronize();
    return harness::merge(compare_device("dinp", dinp_, want_dinp_, dinp_tol_),
                          compare_device("dweight", dweight_, want_dweight_, dweight_tol_));
  }

 private:
  Device& dev_;
  int N_, C_;
  Array<float> dout_, inp_, weight_, rstd_, dinp_, dweight_;
  std::vector<float> dinp0_, dweight0_;
  std::vector<double> want_dinp_, want_dweight_;
  Tolerance dinp_tol_, dweight_tol_;
};

// ---- RoPE -------------------------------------------------------------------------------------------

class RopeProblem final : public Problem {
 public:
  RopeProblem(Device& dev, bool backward, int B, int T, int NH, int hs, uint64_t seed)
      : dev_(dev), backward_(backward), B_(B), T_(T), NH_(NH), hs_(hs), C_(NH * hs) {
    const size_t n = static_cast<size_t>(B) * T * 3 * C_;  // the qkv buffer
    const size_t table = static_cast<size_t>(T + kRopePos0) * (hs / 2);
    std::vector<float> cos(table), sin(table), x;
    kernels::rope_tables(cos.data(), sin.data(), T + kRopePos0, hs);
    cos_ = Array<float>(dev, cos, kernels::uninitialized);
    sin_ = Array<float>(dev, sin, kernels::uninitialized);
    inp_ = random_buffer(dev, n, seed, -1.0f, 1.0f, &x);
    start_.resize(n);
    harness::fill_random(start_, seed + 1);
    out_ = Array<float>(dev, start_, kernels::uninitialized);
    // Out of place: the start with q replaced by its rotation. In place: x with q rotated.
    const std::vector<double> xd = to_double(x), cd = to_double(cos), sd = to_double(sin);
    want_apart_ = to_double(start_);
    want_inplace_ = xd;
    auto rotate = backward ? &kernels::rope_backward_v1<double> : &kernels::rope_forward_v1<double>;
    rotate(want_apart_.data(), xd.data(), cd.data(), sd.data(), B, T, NH, hs, 3 * C_, kRopePos0);
    rotate(want_inplace_.data(), xd.data(), cd.data(), sd.data(), B, T, NH, hs, 3 * C_, kRopePos0);
    x_ = std::move(x);
  }
  std::string shape() const override {
    return dims({"B", "T", "NH", "HS"}, {size_t(B_), size_t(T_), size_t(NH_), size_t(hs_)});
  }
  double flops() const override { return 0.0; }
  double bytes(size_t) const override { return 8.0 * static_cast<double>(B_) * T_ * C_; }  // read q, write q
  void run(size_t v) override { call(v, out_.data(), inp_.data()); }
  // Each output is one rounding of a two-term sum of products of floats (|x| <= 1, |cos|, |sin|
  // <= 1): within 2 ulp of 1 absolute, whatever contraction into FMAs the compiler chose.
  Check validate(size_t v) override {
    const Tolerance tol{4.0 * kUnitRoundoff, 0.0};
    out_.upload(start_);
    run(v);
    dev_.synchronize();
    Check c = compare_device("out (k and v untouched)", out_, want_apart_, tol);
    out_.upload(x_);  // in place, on the qkv buffer itself
    call(v, out_.data(), out_.data());
    dev_.synchronize();
    return harness::merge(c, compare_device("in place", out_, want_inplace_, tol));
  }

 private:
  void call(size_t v, float* out, const float* inp) {
    const auto& table = backward_ ? dev_.kernels().rope_backward : dev_.kernels().rope_forward;
    table.at(v).fn(out, inp, cos_.data(), sin_.data(), B_, T_, NH_, hs_, 3 * C_, kRopePos0);
  }
  Device& dev_;
  bool backward_;
  int B_, T_, NH_, hs_, C_;
  Array<float> cos_, sin_, inp_, out_;
  std::vector<float> start_, x_;
  std::vector<double> want_apart_, want_inplace_;
};

// ---- SwiGLU -------------------------------------------------------------------------------------------

class SwigluProblem final : public Problem {
 public:
  SwigluProblem(Device& dev, bool backward, int N, int H, uint64_t seed)
      : dev_(dev), backward_(backward), N_(N), H_(H) {
    const size_t n = static_cast<size_t>(N) * H;
    std::vector<float> proj, dy;
    proj_ = random_buffer(dev, 2 * n, seed, -8.0f, 8.0f, &proj);  // (N, 2H) = [g | u] per row
    dout_ = random_buffer(dev, n, seed + 1, -1.0f, 1.0f, &dy);
    out_ = Array<float>(dev, backward ? 2 * n : n);
    const std::vector<double> pd = to_double(proj), dyd = to_double(dy);
    want_.resize(backward ? 2 * n : n);
    if (backward) {
      kernels::swiglu_backward_v1(want_.data(), want_.data() + H, dyd.data(), pd.data(), pd.data() + H, N, H, 2 * H);
    } else {
      kernels::swiglu_forward_v1(want_.data(), pd.data(), pd.data() + H, N, H, 2 * H);
    }
  }
  std::string shape() const override { return dims({"N", "H"}, {size_t(N_), size_t(H_)}); }
  double flops() const override { return 0.0; }
  // forward: read g, u, write out; backward: read dout, g, u, write dg, du
  double bytes(size_t) const override { return (backward_ ? 20.0 : 12.0) * static_cast<double>(N_) * H_; }
  void run(size_t v) override {
    if (backward_) {
      dev_.kernels().swiglu_backward.at(v).fn(out_.data(), out_.data() + H_, dout_.data(), proj_.data(),
                                              proj_.data() + H_, N_, H_, 2 * H_);
    } else {
      dev_.kernels().swiglu_forward.at(v).fn(out_.data(), proj_.data(), proj_.data() + H_, N_, H_, 2 * H_);
    }
  }
  // expf is within 2 ulp (CUDA's, without fast math; glibc's in the emulator: 1): a few ulp of
  // the result relative. Where silu'(g) = s (1 + g (1 - s)) crosses 0 (g ~ -1.28) the sum cancels
  // terms of size ~1, times |dout u| <= 8: 4e-6 absolute covers 8 ulp of that.
  Check validate(size_t v) override {
    out_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    const Tolerance tol = backward_ ? Tolerance{4e-6, 1e-5} : Tolerance{1e-7, 2e-6};
    return compare_device(backward_ ? "dproj" : "out", out_, want_, tol);
  }

 private:
  Device& dev_;
  bool backward_;
  int N_, H_;
  Array<float> proj_, dout_, out_;
  std::vector<double> want_;
};

std::vector<int> ints(const std::vector<size_t>& d) {
  std::vector<int> out;
  for (size_t x : d) out.push_back(static_cast<int>(x));
  return out;
}

}  // namespace

Op rmsnorm_forward_op() {
  Op op;
  op.name = "rmsnorm_forward";
  op.summary = "RMSNorm forward: thread per row vs warp per row";
  op.sizes = {"16384x384", "8192x4096"};
  op.test_sizes = {"7x33", "45x77", "5x300"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().rmsnorm_forward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const auto d = ints(kernels::bench::parse_dims("rmsnorm_forward", size, 2, "NxC, e.g. 16384x384"));
    return std::make_unique<RmsnormForwardProblem>(dev, d[0], d[1], seed);
  };
  return op;
}

Op rmsnorm_backward_op() {
  Op op;
  op.name = "rmsnorm_backward";
  op.summary = "RMSNorm backward: dinp by thread vs warp per row, dweight by column in row order";
  op.sizes = {"16384x384", "8192x4096"};
  op.test_sizes = {"7x33", "45x77", "5x300"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().rmsnorm_backward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const auto d = ints(kernels::bench::parse_dims("rmsnorm_backward", size, 2, "NxC, e.g. 16384x384"));
    return std::make_unique<RmsnormBackwardProblem>(dev, d[0], d[1], seed);
  };
  return op;
}

namespace {
Op rope_op(bool backward) {
  Op op;
  op.name = backward ? "rope_backward" : "rope_forward";
  op.summary = backward ? "RoPE backward (the inverse rotation), thread per pair (single version)"
                        : "RoPE forward on q inside qkv, rotate_half pairs, thread per pair (single version)";
  op.sizes = {"64x256x6x64"};
  op.test_sizes = {"2x7x3x10", "3x5x2x38"};
  op.variants = [backward](Device& dev) {
    return variants_of(backward ? dev.kernels().rope_backward : dev.kernels().rope_forward);
  };
  op.make = [backward](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const auto d = ints(kernels::bench::parse_dims(backward ? "rope_backward" : "rope_forward", size, 4,
                                                   "BxTxNHxHS (HS even), e.g. 64x256x6x64"));
    if (d[3] % 2 != 0) throw std::invalid_argument("rope: HS = " + std::to_string(d[3]) + " must be even (pairs)");
    return std::make_unique<RopeProblem>(dev, backward, d[0], d[1], d[2], d[3], seed);
  };
  return op;
}

Op swiglu_op(bool backward) {
  Op op;
  op.name = backward ? "swiglu_backward" : "swiglu_forward";
  op.summary = backward ? "SwiGLU backward into the fused gate_up gradient, thread per element (single version)"
                        : "SwiGLU silu(g) u from a fused gate_up projection, thread per element (single version)";
  op.sizes = {"16384x1024"};
  op.test_sizes = {"7x37", "45x77"};
  op.variants = [backward](Device& dev) {
    return backward ? variants_of(dev.kernels().swiglu_backward) : variants_of(dev.kernels().swiglu_forward);
  };
  op.make = [backward](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const auto d = ints(kernels::bench::parse_dims(backward ? "swiglu_backward" : "swiglu_forward", size, 2,
                                                   "NxH, e.g. 16384x1024"));
    return std::make_unique<SwigluProblem>(dev, backward, d[0], d[1], seed);
  };
  return op;
}
}  // namespace

Op rope_forward_op() { return rope_op(false); }
Op rope_backward_op() { return rope_op(true); }
Op swiglu_forward_op() { return swiglu_op(false); }
Op swiglu_backward_op() { return swiglu_op(true); }

}  // namespace kernels::cuda::bench
