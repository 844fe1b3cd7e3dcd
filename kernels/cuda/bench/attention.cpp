// kernels/cuda/bench/attention.cpp: causal self-attention forward for the GPU harness
// (kernels/cuda/attention.cu): the unfused versions, whose (B,NH,T,T) score matrix goes
// through memory, against the fused one, which never writes it.
#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims
#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

namespace {

class AttentionProblem final : public Problem {
 public:
  AttentionProblem(Device& dev, int B, int T, int C, int NH, uint64_t seed)
      : dev_(dev), B_(B), T_(T), C_(C), NH_(NH), out_(dev, static_cast<size_t>(B) * T * C) {
    // Inputs in [-3, 3]: q . k / sqrt(hs) then has a standard deviation of about 3, so the
    // softmax is peaked (a few keys dominate) and the max subtraction and the online
    // rescaling are exercised; [-1, 1] would give nearly uniform weights.
    qkv_ = random_buffer(dev, static_cast<size_t>(B) * T * 3 * C, seed, -3.0f, 3.0f, &qkv_host_);
    make_reference(seed);
  }

  std::string shape() const override {
    return "B=" + std::to_string(B_) + " T=" + std::to_string(T_) + " C=" + std::to_string(C_) +
           " NH=" + std::to_string(NH_) + " (hs=" + std::to_string(C_ / NH_) + ")";
  }

  // The two products only, causal: query t meets t+1 keys, each costing hs multiply-adds
  // for q.k and hs for p.v: 2 * 2 * hs * sum_t (t+1) = 4 hs T(T+1)/2 per head. The
  // exponentials and the softmax sums are not counted.
  double flops() const override {
    return 4.0 * B_ * NH_ * (C_ / NH_) * (static_cast<double>(T_) * (T_ + 1) / 2.0);
  }

  // Every version reads qkv (3C per position) and writes out (C per position) once. The
  // unfused ones also move the T(T+1)/2 live entries of each head's score matrix four
  // times: the scores kernel writes them, the softmax reads them and writes the
  // probabilities, P.V reads those. The fused one does none of that.
  double bytes(size_t v) const override {
    const double io = 4.0 * B_ * static_cast<double>(T_) * 4.0 * C_;
    if (workspace_bytes(v) == 0) return io;
    const double live = static_cast<double>(B_) * NH_ * (static_cast<double>(T_) * (T_ + 1) / 2.0);
    return io + 4.0 * 4.0 * live;
  }

  size_t workspace_bytes(size_t v) const override {
    const auto& version = dev_.kernels().attention.at(v);
    return version.workspace ? version.workspace(B_, T_, C_, NH_) : 0;
  }

  void run(size_t v) override {
    const size_t need = workspace_bytes(v);
    if (workspace_.bytes() < need) resize_workspace(need);  // validate() has sized it already
    dev_.kernels().attention.at(v).run(out_.data(), need ? workspace_.data() : nullptr, qkv_.data(), B_, T_, C_,
                                       NH_);
  }

  harness::Check validate(size_t v) override {
    // Exactly the workspace this version needs, none for the fused one: the device memory
    // in use then shows what each version costs (tests/test_cuda_attention.cpp checks it).
    resize_workspace(workspace_bytes(v));
    // NaN everywhere: an output never written, or a score read before it was written
    // (the masked entries above the diagonal included), cannot pass.
    out_.fill_bytes(0xFF);
    if (workspace_.size()) workspace_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    // Tolerance: out is a weighted mean of v's in [-3, 3] over up to T keys; float sums of
    // T terms round to about sqrt(T) * 2^-24 * 3 (~1e-5 at T = 4096), and the exponentials
    // of scores up to ~10 to a few 1e-7 relative. A wrong mask or a missed rescale is off by
    // 0.1 or more.
    const harness::Tolerance tol{5e-5, 1e-4};
    if (sampled_.empty()) return compare_device("out", out_, want_, tol);
    const std::vector<float> got = out_.to_host();
    return harness::compare_at("out", got, sampled_, want_, tol);
  }

 private:
  // out[b, t, h*hs .. h*hs+hs-1] in double, as nn::attention_forward computes it.
  void reference_row(int b, int t, int h, double* o) const {
    const int hs = C_ / NH_;
    const size_t C3 = 3 * static_cast<size_t>(C_);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    const float* q = qkv_host_.data() + (static_cast<size_t>(b) * T_ + t) * C3 + static_cast<size_t>(h) * hs;
    std::vector<double> s(static_cast<size_t>(t) + 1);
    double maxval = -HUGE_VAL;
    for (int t2 = 0; t2 <= t; ++t2) {  // s[t2] = q_t . k_t2 / sqrt(hs)
      const float* k = qkv_host_.data() + (static_cast<size_t>(b) * T_ + t2) * C3 + C_ + static_cast<size_t>(h) * hs;
      double dot = 0.0;
      for (int d = 0; d < hs; ++d) dot += static_cast<double>(q[d]) * k[d];
      s[static_cast<size_t>(t2)] = dot * scale;
      maxval = std::max(maxval, dot * scale);
    }
    double sum = 0.0;
    for (double& x : s) {
      x = std::exp(x - maxval);
      sum += x;
    }
    for (int d = 0; d < hs; ++d) o[d] = 0.0;
    for (int t2 = 0; t2 <= t; ++t2) {  // out_t = sum_t2 p[t2] v_t2
      const float* v = qkv_host_.data() + (static_cast<size_t>(b) * T_ + t2) * C3 + 2 * static_cast<size_t>(C_) +
                       static_cast<size_t>(h) * hs;
      const double p = s[static_cast<size_t>(t2)] / sum;
      for (int d = 0; d < hs; ++d) o[d] += p * v[d];
    }
  }

  // Every row when that is cheap (the test sizes); otherwise a sample of (b, t, h) rows,
  // always including the first and last positions, whose hs outputs are compared.
  void make_reference(uint64_t seed) {
    const int hs = C_ / NH_;
    const double work = static_cast<double>(B_) * NH_ * T_ * T_ * hs;
    if (work <= 64e6) {
      want_.assign(static_cast<size_t>(B_) * T_ * C_, 0.0);
      for (int b = 0; b < B_; ++b) {
        for (int t = 0; t < T_; ++t) {
          for (int h = 0; h < NH_; ++h) {
            reference_row(b, t, h, want_.data() + (static_cast<size_t>(b) * T_ + t) * C_ + static_cast<size_t>(h) * hs);
          }
        }
      }
      return;
    }
    std::mt19937_64 rng(seed ^ 0x5eedULL);
    std::vector<std::vector<int>> rows = {{0, 0, 0}, {B_ - 1, T_ - 1, NH_ - 1}, {0, T_ - 1, 0}};
    while (rows.size() < 256) {
      const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
      rows.push_back({pick(B_), pick(T_), pick(NH_)});
    }
    std::vector<double> o(static_cast<size_t>(hs));
    for (const auto& r : rows) {
      reference_row(r[0], r[1], r[2], o.data());
      const size_t base =
          (static_cast<size_t>(r[0]) * T_ + static_cast<size_t>(r[1])) * C_ + static_cast<size_t>(r[2]) * hs;
      for (int d = 0; d < hs; ++d) {
        sampled_.push_back(base + static_cast<size_t>(d));
        want_.push_back(o[static_cast<size_t>(d)]);
      }
    }
  }

  void resize_workspace(size_t bytes) {
    if (workspace_.bytes() == bytes) return;
    workspace_.reset();  // free first: never hold two T^2 buffers at once
    if (bytes) workspace_ = Buffer<float>(dev_, (bytes + sizeof(float) - 1) / sizeof(float));
  }

  Device& dev_;
  int B_, T_, C_, NH_;
  std::vector<float> qkv_host_;
  Buffer<float> qkv_, out_, workspace_;
  std::vector<double> want_;     // every output, or the sampled ones
  std::vector<size_t> sampled_;  // the indices of want_ in out (empty: want_ is every output)
};

}  // namespace

Op attention_op() {
  Op op;
  op.name = "attention";
  op.summary = "causal self-attention forward: scores, softmax, P.V through a T^2 workspace vs one fused "
               "flash-style kernel";
  // T >= 1024, GPT-2 small's C and heads (hs = 64): the unfused workspace is 384 MiB, 768
  // MiB and 1.5 GiB, the fused one none.
  op.sizes = {"8x1024x768x12", "4x2048x768x12", "2x4096x768x12"};
  // T not a multiple of 32 or 64; hs = 16 and 32; one batch row with 3 heads.
  op.test_sizes = {"2x33x64x4", "1x70x96x3"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().attention); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<size_t> d = kernels::bench::parse_dims("attention", size, 4, "BxTxCxNH, e.g. 8x1024x768x12");
    if (d[2] % d[3] != 0) {
      throw std::invalid_argument("attention size '" + size + "': C=" + std::to_string(d[2]) +
                                  " is not divisible by NH=" + std::to_string(d[3]));
    }
    return std::make_unique<AttentionProblem>(dev, static_cast<int>(d[0]), static_cast<int>(d[1]),
                                              static_cast<int>(d[2]), static_cast<int>(d[3]), seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
