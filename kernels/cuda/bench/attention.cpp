// kernels/cuda/bench/attention.cpp: causal self-attention forward and backward for the GPU
// harness (kernels/cuda/attention.cu). The forward: the unfused versions, whose (B,NH,T,T)
// score matrix goes through memory, against the fused one, which never writes it; the
// unfused ones must also leave the softmax probabilities in their workspace (the backward's
// att input), which validate checks. The backward: dqkv from dout, qkv and those
// probabilities, naive against tiled.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
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
    dev_.kernels().attention.at(v).fn(out_.data(), need ? workspace_.data() : nullptr, qkv_.data(), B_, T_, C_,
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
    harness::Check c;
    if (sampled_.empty()) {
      c = compare_device("out", out_, want_, tol);
    } else {
      const std::vector<float> got = out_.to_vector();
      c = harness::compare_at("out", got, sampled_, want_, tol);
    }
    if (workspace_bytes(v) > 0) c = harness::merge(c, check_probabilities());
    return c;
  }

 private:
  // A row (b,h,t) of the (B,NH,T,T) workspace: its offset and its t+1 live entries.
  struct ScoreRow {
    size_t offset;
    size_t length;
  };

  // The unfused versions' contract with the backward (attention.cu's header): after the
  // run, workspace row (b,h,t) holds the probabilities p[t2], t2 <= t. Compared on the rows
  // the reference computed (every row, or the sampled ones), entries listed row after row.
  // Tolerance: p in [0, 1] carries the exponential's and the scores' rounding, a few 1e-7
  // relative at these score sizes; leaving the scores, or the unnormalised exponentials,
  // there is off by far more.
  harness::Check check_probabilities() const {
    std::vector<float> got(p_want_.size());
    size_t at = 0;
    if (sampled_.empty()) {
      const std::vector<float> ws = workspace_.to_vector();  // small: the test sizes
      for (const ScoreRow& r : p_rows_) {
        std::copy_n(ws.begin() + static_cast<std::ptrdiff_t>(r.offset), r.length,
                    got.begin() + static_cast<std::ptrdiff_t>(at));
        at += r.length;
      }
    } else {  // the bench sizes: the sampled rows only, not the whole T^2 matrix
      for (const ScoreRow& r : p_rows_) {
        dev_.to_host(got.data() + at, workspace_.data() + r.offset, r.length * sizeof(float));
        at += r.length;
      }
    }
    return harness::compare("probabilities left in the workspace (rows (b,h,t) in turn, t2 <= t)", got, p_want_,
                            {1e-6, 1e-4});
  }

  // out[b, t, h*hs .. h*hs+hs-1] in double, as nn::attention_forward computes it; appends
  // the probabilities p[0..t] of the row to p_want_ and the row to p_rows_.
  void reference_row(int b, int t, int h, double* o) {
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
    p_rows_.push_back({((static_cast<size_t>(b) * NH_ + static_cast<size_t>(h)) * T_ + static_cast<size_t>(t)) *
                           static_cast<size_t>(T_),
                       static_cast<size_t>(t) + 1});
    for (const double x : s) p_want_.push_back(x / sum);
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
    if (bytes) workspace_ = Array<float>(dev_, (bytes + sizeof(float) - 1) / sizeof(float), kernels::uninitialized);
  }

  Device& dev_;
  int B_, T_, C_, NH_;
  std::vector<float> qkv_host_;
  Array<float> qkv_, out_, workspace_;
  std::vector<double> want_;     // every output, or the sampled ones
  std::vector<size_t> sampled_;  // the indices of want_ in out (empty: want_ is every output)
  std::vector<ScoreRow> p_rows_;  // the workspace rows the reference computed
  std::vector<double> p_want_;    // their probabilities, row after row
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

// ---- the backward ------------------------------------------------------------------------

namespace {

// The backward on its own: qkv random as the forward's Problem ([-3, 3]: peaked softmax
// rows), dout random in [-1, 1], and att the reference forward's probabilities in double,
// rounded to float and uploaded, with NaN above the diagonal (a version reading a masked
// entry cannot pass). The reference is nn::attention_backward's loops in double on those
// same float probabilities, so only the backward's own rounding is measured.
//
// At the test sizes every head is computed and every element of dqkv compared. At the bench
// sizes a full reference would take minutes on the CPU (and dk_t2 needs every row t >= t2
// of its head, so single entries cannot be sampled cheaply): a few whole heads (the first,
// the last and two random ones) get the reference probabilities and are compared, q, k and
// v parts; every other head gets uniform rows att[t][t2] = 1/(t+1) (a valid softmax, that of
// equal scores) so that the timed runs see ordinary numbers.
class AttentionBackwardProblem final : public Problem {
 public:
  AttentionBackwardProblem(Device& dev, int B, int T, int C, int NH, uint64_t seed)
      : dev_(dev), B_(B), T_(T), C_(C), NH_(NH), dqkv_(dev, static_cast<size_t>(B) * T * 3 * C) {
    qkv_ = random_buffer(dev, static_cast<size_t>(B) * T * 3 * C, seed, -3.0f, 3.0f, &qkv_host_);
    dout_ = random_buffer(dev, static_cast<size_t>(B) * T * C, seed + 1, -1.0f, 1.0f, &dout_host_);
    make_reference(seed);
  }

  std::string shape() const override {
    return "B=" + std::to_string(B_) + " T=" + std::to_string(T_) + " C=" + std::to_string(C_) +
           " NH=" + std::to_string(NH_) + " (hs=" + std::to_string(C_ / NH_) + ")";
  }

  // The four products only, causal: datt = dOut.V^T, dQ = dP.K, dK = dP^T.Q, dV = P^T.dOut
  // each cost hs multiply-adds per live entry (t2 <= t) of the (T,T) matrix: 4 * 2 * hs *
  // T(T+1)/2 per head. The softmax backward (3 flops per entry) is not counted.
  double flops() const override {
    return 8.0 * B_ * NH_ * (C_ / NH_) * (static_cast<double>(T_) * (T_ + 1) / 2.0);
  }

  // What a perfect cache would leave, the same for both versions: qkv (3C floats per
  // position), dout (C) read and dqkv (3C) written once; and the T(T+1)/2 live entries of
  // each head's (T,T) matrices seven times: att read twice (softmax backward, dV), datt
  // written and read (softmax backward), dpreatt written and read twice (dQ, dK).
  double bytes(size_t /*v*/) const override {
    const double io = 4.0 * B_ * static_cast<double>(T_) * 7.0 * C_;
    const double live = static_cast<double>(B_) * NH_ * (static_cast<double>(T_) * (T_ + 1) / 2.0);
    return io + 7.0 * 4.0 * live;
  }

  size_t workspace_bytes(size_t v) const override {
    const auto& version = dev_.kernels().attention_backward.at(v);
    return version.workspace ? version.workspace(B_, T_, C_, NH_) : 0;
  }

  void run(size_t v) override {
    const size_t need = workspace_bytes(v);
    if (workspace_.bytes() < need) resize_workspace(need);
    dev_.kernels().attention_backward.at(v).fn(dqkv_.data(), need ? workspace_.data() : nullptr, dout_.data(),
                                                qkv_.data(), att_.data(), B_, T_, C_, NH_);
  }

  harness::Check validate(size_t v) override {
    resize_workspace(workspace_bytes(v));
    // NaN everywhere: an element of dqkv never written (it is assigned, not accumulated),
    // or a workspace entry read before it was written, cannot pass.
    dqkv_.fill_bytes(0xFF);
    if (workspace_.size()) workspace_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    // Tolerance: every output is a float sum of up to T products, and dq, dk carry the
    // rounding of datt (a dot of hs terms, |datt| up to ~3 hs) and of the softmax
    // backward's difference datt - sum_j p_j datt_j. Float sums of n terms of size s round
    // to about sqrt(n) 2^-24 s; atol is set from the largest |reference| at this size,
    // 1e-5 of it (T = 1024: sqrt(T) 2^-24 is 2e-6), rtol 1e-4. A wrong mask, a missing
    // scale or a transposed tile is off by 1e-2 of that or more.
    const harness::Tolerance tol{1e-5 * max_abs_want_, 1e-4};
    if (sampled_.empty()) return compare_device("dqkv", dqkv_, want_, tol);
    const std::vector<float> got = dqkv_.to_vector();
    return harness::compare_at("dqkv", got, sampled_, want_, tol);
  }

 private:
  // Head (b,h): the reference forward's probabilities into att (rounded to float), then the
  // backward in double from those floats into dq, dk, dv (T, hs each), as nn::attention_*.
  void reference_head(int b, int h, std::vector<float>& att, std::vector<double>& dq, std::vector<double>& dk,
                      std::vector<double>& dv) const {
    const int hs = C_ / NH_;
    const size_t C3 = 3 * static_cast<size_t>(C_);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    const auto q = [&](int t) { return qkv_host_.data() + (static_cast<size_t>(b) * T_ + t) * C3 + static_cast<size_t>(h) * hs; };
    const auto k = [&](int t) { return q(t) + C_; };
    const auto v = [&](int t) { return q(t) + 2 * static_cast<size_t>(C_); };
    const auto g = [&](int t) {  // dout_t of head h
      return dout_host_.data() + (static_cast<size_t>(b) * T_ + t) * C_ + static_cast<size_t>(h) * hs;
    };
    const auto row = [&](int t) {
      return att.data() + ((static_cast<size_t>(b) * NH_ + static_cast<size_t>(h)) * T_ + static_cast<size_t>(t)) *
                              static_cast<size_t>(T_);
    };
    // forward: p = softmax(q_t . k_t2 * scale), t2 <= t
    std::vector<double> s(static_cast<size_t>(T_));
    for (int t = 0; t < T_; ++t) {
      double maxval = -HUGE_VAL;
      for (int t2 = 0; t2 <= t; ++t2) {
        double dot = 0.0;
        for (int d = 0; d < hs; ++d) dot += static_cast<double>(q(t)[d]) * k(t2)[d];
        s[static_cast<size_t>(t2)] = dot * scale;
        maxval = std::max(maxval, dot * scale);
      }
      double sum = 0.0;
      for (int t2 = 0; t2 <= t; ++t2) {
        s[static_cast<size_t>(t2)] = std::exp(s[static_cast<size_t>(t2)] - maxval);
        sum += s[static_cast<size_t>(t2)];
      }
      for (int t2 = 0; t2 <= t; ++t2) row(t)[t2] = static_cast<float>(s[static_cast<size_t>(t2)] / sum);
    }
    // backward, from the float probabilities
    dq.assign(static_cast<size_t>(T_) * hs, 0.0);
    dk.assign(static_cast<size_t>(T_) * hs, 0.0);
    dv.assign(static_cast<size_t>(T_) * hs, 0.0);
    std::vector<double> datt(static_cast<size_t>(T_));
    for (int t = 0; t < T_; ++t) {
      const float* p = row(t);
      double weighted = 0.0;  // sum_j p_j datt_j
      for (int t2 = 0; t2 <= t; ++t2) {  // datt[t2] = dout_t . v_t2;  dv_t2 += p[t2] dout_t
        double dot = 0.0;
        for (int d = 0; d < hs; ++d) {
          dot += static_cast<double>(g(t)[d]) * v(t2)[d];
          dv[static_cast<size_t>(t2) * hs + d] += static_cast<double>(p[t2]) * g(t)[d];
        }
        datt[static_cast<size_t>(t2)] = dot;
        weighted += static_cast<double>(p[t2]) * dot;
      }
      for (int t2 = 0; t2 <= t; ++t2) {  // dpreatt = p (datt - weighted); dq_t, dk_t2 += scale dpreatt k, q
        const double dp = static_cast<double>(p[t2]) * (datt[static_cast<size_t>(t2)] - weighted);
        for (int d = 0; d < hs; ++d) {
          dq[static_cast<size_t>(t) * hs + d] += scale * dp * k(t2)[d];
          dk[static_cast<size_t>(t2) * hs + d] += scale * dp * q(t)[d];
        }
      }
    }
  }

  void make_reference(uint64_t seed) {
    const int hs = C_ / NH_;
    const size_t n_att = static_cast<size_t>(B_) * NH_ * T_ * T_;
    std::vector<float> att(n_att, std::numeric_limits<float>::quiet_NaN());  // above the diagonal: NaN
    const bool full = static_cast<double>(B_) * NH_ * T_ * T_ * hs <= 64e6;
    std::vector<std::pair<int, int>> heads;  // (b, h) with a reference
    if (full) {
      for (int b = 0; b < B_; ++b) {
        for (int h = 0; h < NH_; ++h) heads.emplace_back(b, h);
      }
      want_.assign(static_cast<size_t>(B_) * T_ * 3 * C_, 0.0);
    } else {
      std::mt19937_64 rng(seed ^ 0xbacc0ULL);
      heads = {{0, 0}, {B_ - 1, NH_ - 1}};
      while (heads.size() < 4) {
        const std::pair<int, int> pick{static_cast<int>(rng() % static_cast<uint64_t>(B_)),
                                       static_cast<int>(rng() % static_cast<uint64_t>(NH_))};
        if (std::find(heads.begin(), heads.end(), pick) == heads.end()) heads.push_back(pick);
      }
      // every head uniform first; the sampled ones are overwritten with the reference below
      for (size_t r = 0; r < n_att / static_cast<size_t>(T_); ++r) {
        const int t = static_cast<int>(r % static_cast<size_t>(T_));
        for (int t2 = 0; t2 <= t; ++t2) att[r * static_cast<size_t>(T_) + static_cast<size_t>(t2)] = 1.0f / static_cast<float>(t + 1);
      }
    }
    std::vector<double> dq, dk, dv;
    for (const auto& [b, h] : heads) {
      reference_head(b, h, att, dq, dk, dv);
      for (int t = 0; t < T_; ++t) {
        const size_t base = (static_cast<size_t>(b) * T_ + static_cast<size_t>(t)) * 3 * C_ + static_cast<size_t>(h) * hs;
        for (int part = 0; part < 3; ++part) {
          const std::vector<double>& from = part == 0 ? dq : part == 1 ? dk : dv;
          for (int d = 0; d < hs; ++d) {
            const size_t i = base + static_cast<size_t>(part) * C_ + static_cast<size_t>(d);
            const double w = from[static_cast<size_t>(t) * hs + d];
            max_abs_want_ = std::max(max_abs_want_, std::fabs(w));
            if (full) {
              want_[i] = w;
            } else {
              sampled_.push_back(i);
              want_.push_back(w);
            }
          }
        }
      }
    }
    att_ = Array<float>(dev_, att, kernels::uninitialized);
  }

  void resize_workspace(size_t bytes) {
    if (workspace_.bytes() == bytes) return;
    workspace_.reset();  // free first: never hold two T^2 buffers at once
    if (bytes) workspace_ = Array<float>(dev_, (bytes + sizeof(float) - 1) / sizeof(float), kernels::uninitialized);
  }

  Device& dev_;
  int B_, T_, C_, NH_;
  std::vector<float> qkv_host_, dout_host_;
  Array<float> qkv_, dout_, att_, dqkv_, workspace_;
  std::vector<double> want_;     // every element of dqkv, or those of the sampled heads
  std::vector<size_t> sampled_;  // the indices of want_ in dqkv (empty: want_ is every element)
  double max_abs_want_ = 0.0;
};

}  // namespace

Op attention_backward_op() {
  Op op;
  op.name = "attention_backward";
  op.summary = "causal self-attention backward: dqkv from dout and the forward's probabilities, through a T^2 "
               "workspace, naive vs shared-memory tiles";
  // The nanoGPT Shakespeare config (hs = 64; att and the workspace 96 MiB each), and the
  // same tokens at 4x the context (384 MiB each).
  op.sizes = {"64x256x384x6", "16x1024x384x6"};
  // T not a multiple of 32 (13: one partial tile; 37: a full and a partial one); hs = 8, 16
  // and 40 (two channel tiles, the second partial).
  op.test_sizes = {"2x13x24x3", "1x37x48x3", "1x37x80x2"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().attention_backward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<size_t> d =
        kernels::bench::parse_dims("attention_backward", size, 4, "BxTxCxNH, e.g. 64x256x384x6");
    if (d[2] % d[3] != 0) {
      throw std::invalid_argument("attention_backward size '" + size + "': C=" + std::to_string(d[2]) +
                                  " is not divisible by NH=" + std::to_string(d[3]));
    }
    return std::make_unique<AttentionBackwardProblem>(dev, static_cast<int>(d[0]), static_cast<int>(d[1]),
                                                      static_cast<int>(d[2]), static_cast<int>(d[3]), seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
