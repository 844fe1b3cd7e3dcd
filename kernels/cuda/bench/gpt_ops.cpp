// kernels/cuda/bench/gpt_ops.cpp: the GPT's small ops (kernels/cuda/gpt_ops.cu) for the GPU
// harness: encoder forward and backward, gelu backward, dropout, multiply, add, scale,
// cross-entropy loss and backward from probabilities, and the deterministic sum.
//
// Sizes are the GPT's (nanoGPT's Shakespeare config: B = 64, T = 256, C = 384, V = 65, so
// N = B*T = 16384 positions): the encoder "BxTxCxV", the element-wise ops n = N * 4C = 24M
// (the MLP's hidden activations), the cross-entropy "NxV". The test sizes are small and odd.
//
// References: plain loops in double. Where the op is one IEEE operation per element (add,
// multiply, scale, the encoder's wte + wpe, dropout's mask and product) the double result
// rounded to float IS the float result (a double holds the exact sum or product of two floats
// to within far less than half a float ulp), and the comparison is exact. Dropout's mask is
// compared bit for bit with the mask's definition (kernels/cuda/device.h: DropoutForwardFn,
// which is nn::dropout_forward's), written out below from that definition: kernels/ knows
// nothing of nn/, and tests/test_cuda_kernels.cpp checks the kernel's mask against nn's.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims, short_count
#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

namespace {

using harness::Check;
using harness::Tolerance;

constexpr Tolerance kExact{0.0, 0.0};
constexpr double kUnitRoundoff = 0x1p-24;  // float: relative error of one rounding

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// A copy of host one float into a new buffer of n + 1: a start 4- but not 16-byte aligned.
Array<float> shifted_copy(Device& dev, const std::vector<float>& host) {
  Array<float> b(dev, host.size() + 1, kernels::uninitialized);
  dev.from_host(b.data() + 1, host.data(), host.size() * sizeof(float));
  return b;
}

std::string n_shape(size_t n) { return "n=" + kernels::bench::short_count(n); }

size_t parse_n(const std::string& op, const std::string& size) {
  return kernels::bench::parse_dims(op, size, 1, "n, e.g. 24M")[0];
}

// Token ids (n) in [0, V), skewed as text is: about a quarter are id 0 (a space), and id
// V - 1 never occurs when V > 1 (its dwte row must come back untouched).
std::vector<int> token_ids(size_t n, int V, uint64_t seed) {
  harness::Random rng(seed ^ 0x5bd1e9955bd1e995ull);
  const uint64_t used = V > 1 ? static_cast<uint64_t>(V - 1) : 1;
  std::vector<int> ids(n);
  for (int& id : ids) {
    const uint64_t r = rng.next_u64();
    id = r % 4 == 0 ? 0 : static_cast<int>((r >> 2) % used);
  }
  return ids;
}

// ---- encoder forward ------------------------------------------------------------------------

std::vector<int> parse_encoder(const std::string& op, const std::string& size) {
  const std::vector<size_t> d = kernels::bench::parse_dims(op, size, 4, "BxTxCxV, e.g. 64x256x384x65");
  return {static_cast<int>(d[0]), static_cast<int>(d[1]), static_cast<int>(d[2]), static_cast<int>(d[3])};
}

std::string encoder_shape(int B, int T, int C, int V) {
  std::ostringstream os;
  os << "B=" << B << " T=" << T << " C=" << C << " V=" << V;
  return os.str();
}

class EncoderForwardProblem final : public Problem {
 public:
  EncoderForwardProblem(Device& dev, int B, int T, int C, int V, uint64_t seed)
      : dev_(dev), B_(B), T_(T), C_(C), V_(V), out_(dev, elements()) {
    const size_t BT = static_cast<size_t>(B) * static_cast<size_t>(T);
    const std::vector<int> ids = token_ids(BT, V, seed);
    inp_ = Array<int>(dev, ids, kernels::uninitialized);
    std::vector<float> wte, wpe;
    wte_ = random_buffer(dev, static_cast<size_t>(V) * static_cast<size_t>(C), seed + 1, -1.0f, 1.0f, &wte);
    wpe_ = random_buffer(dev, static_cast<size_t>(T) * static_cast<size_t>(C), seed + 2, -1.0f, 1.0f, &wpe);
    // out[b,t,c] = wte[id,c] + wpe[t,c]: one float addition, so the double sum rounded to
    // float is the kernel's result exactly.
    want_.resize(elements());
    const size_t Cs = static_cast<size_t>(C);
    for (size_t bt = 0; bt < BT; ++bt) {
      const size_t id = static_cast<size_t>(ids[bt]);
      const size_t t = bt % static_cast<size_t>(T);
      for (size_t c = 0; c < Cs; ++c) {
        want_[bt * Cs + c] = static_cast<float>(static_cast<double>(wte[id * Cs + c]) + wpe[t * Cs + c]);
      }
    }
  }
  std::string shape() const override { return encoder_shape(B_, T_, C_, V_); }
  double flops() const override { return 0.0; }
  // Per element: read wte[id,c] and wpe[t,c] (both tables are small: from cache after the
  // first touch, but counted), write out: 12 B. Plus the ids.
  double bytes(size_t) const override {
    return 12.0 * static_cast<double>(elements()) + 4.0 * static_cast<double>(B_) * T_;
  }
  void run(size_t v) override {
    dev_.kernels().encoder_forward.at(v).fn(out_.data(), inp_.data(), wte_.data(), wpe_.data(), B_, T_, C_);
  }
  Check validate(size_t v) override {
    out_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    return compare_device("out", out_, want_, kExact);
  }

 private:
  size_t elements() const { return static_cast<size_t>(B_) * static_cast<size_t>(T_) * static_cast<size_t>(C_); }
  Device& dev_;
  int B_, T_, C_, V_;
  Array<int> inp_;
  Array<float> wte_, wpe_, out_;
  std::vector<double> want_;
};

// ---- encoder backward -----------------------------------------------------------------------

class EncoderBackwardProblem final : public Problem {
 public:
  EncoderBackwardProblem(Device& dev, int B, int T, int C, int V, uint64_t seed)
      : dev_(dev), B_(B), T_(T), C_(C), V_(V) {
    const size_t BT = static_cast<size_t>(B) * static_cast<size_t>(T);
    const size_t Cs = static_cast<size_t>(C);
    const std::vector<int> ids = token_ids(BT, V, seed);
    inp_ = Array<int>(dev, ids, kernels::uninitialized);
    std::vector<float> dy;
    dout_ = random_buffer(dev, BT * Cs, seed + 1, -1.0f, 1.0f, &dy);
    // Both gradients ACCUMULATE: they start from known values, and so do the references.
    dwte0_.resize(static_cast<size_t>(V) * Cs);
    dwpe0_.resize(static_cast<size_t>(T) * Cs);
    harness::fill_random(dwte0_, seed + 2);
    harness::fill_random(dwpe0_, seed + 3);
    dwte_ = Array<float>(dev, dwte0_, kernels::uninitialized);
    dwpe_ = Array<float>(dev, dwpe0_, kernels::uninitialized);

    // Two references, nn::encoder_backward's loop (b, t in order, += onto the old value):
    //   in double, with a tolerance for the float sums;
    //   in float, in that order: both versions add in exactly this order, so they must
    //   match it bit for bit (the determinism the GPT's CPU/GPU parity relies on).
    want_dwte_ = to_double(dwte0_);
    want_dwpe_ = to_double(dwpe0_);
    std::vector<float> seq_dwte = dwte0_, seq_dwpe = dwpe0_;
    std::vector<double> abs_dwte(dwte0_.size()), abs_dwpe(dwpe0_.size());
    for (size_t i = 0; i < dwte0_.size(); ++i) abs_dwte[i] = std::fabs(static_cast<double>(dwte0_[i]));
    for (size_t i = 0; i < dwpe0_.size(); ++i) abs_dwpe[i] = std::fabs(static_cast<double>(dwpe0_[i]));
    for (size_t bt = 0; bt < BT; ++bt) {
      const size_t tok = static_cast<size_t>(ids[bt]) * Cs;
      const size_t pos = (bt % static_cast<size_t>(T)) * Cs;
      for (size_t c = 0; c < Cs; ++c) {
        const float d = dy[bt * Cs + c];
        want_dwte_[tok + c] += d;
        want_dwpe_[pos + c] += d;
        seq_dwte[tok + c] += d;
        seq_dwpe[pos + c] += d;
        abs_dwte[tok + c] += std::fabs(static_cast<double>(d));
        abs_dwpe[pos + c] += std::fabs(static_cast<double>(d));
      }
    }
    seq_dwte_ = to_double(seq_dwte);
    seq_dwpe_ = to_double(seq_dwpe);
    // A float running sum of k terms errs by at most k u times the sum of |terms| (loosely);
    // k <= N here: N u sum|terms| per entry, taken at the worst entry.
    const double k = static_cast<double>(BT) * kUnitRoundoff;
    dwte_tol_ = {1e-7 + k * *std::max_element(abs_dwte.begin(), abs_dwte.end()), 0.0};
    dwpe_tol_ = {1e-7 + k * *std::max_element(abs_dwpe.begin(), abs_dwpe.end()), 0.0};
  }
  std::string shape() const override { return encoder_shape(B_, T_, C_, V_); }
  double flops() const override { return 2.0 * static_cast<double>(B_) * T_ * C_; }  // two adds per element
  // dout read twice (once for dwte, once for dwpe), dwte and dwpe read and written once, the
  // ids once: what a perfect cache leaves. v1 re-reads every id for every (token, channel),
  // v2 for every (token, 128-channel strip): those re-reads are cache hits, not counted.
  double bytes(size_t) const override {
    const double elements = static_cast<double>(B_) * T_ * C_;
    return 8.0 * elements + 8.0 * (static_cast<double>(V_) + T_) * C_ + 4.0 * static_cast<double>(B_) * T_;
  }
  void run(size_t v) override {
    dev_.kernels().encoder_backward.at(v).fn(dwte_.data(), dwpe_.data(), dout_.data(), inp_.data(), B_, T_, C_, V_);
  }
  Check validate(size_t v) override {
    dwte_.upload(dwte0_);
    dwpe_.upload(dwpe0_);
    run(v);
    dev_.synchronize();
    Check c = compare_device("dwte", dwte_, want_dwte_, dwte_tol_);
    c = harness::merge(c, compare_device("dwpe", dwpe_, want_dwpe_, dwpe_tol_));
    c = harness::merge(c, compare_device("dwte (bit for bit nn's float loop)", dwte_, seq_dwte_, kExact));
    return harness::merge(c, compare_device("dwpe (bit for bit nn's float loop)", dwpe_, seq_dwpe_, kExact));
  }

 private:
  Device& dev_;
  int B_, T_, C_, V_;
  Array<int> inp_;
  Array<float> dout_, dwte_, dwpe_;
  std::vector<float> dwte0_, dwpe0_;
  std::vector<double> want_dwte_, want_dwpe_, seq_dwte_, seq_dwpe_;
  Tolerance dwte_tol_, dwpe_tol_;
};

// ---- gelu backward ----------------------------------------------------------------------------

// gelu'(x) for gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), in double.
double gelu_grad_ref(double x) {
  const double pi = 3.14159265358979323846;
  const double s = std::sqrt(2.0 / pi);
  const double k = 0.044715;
  const double th = std::tanh(s * (x + k * x * x * x));
  const double du = s * (1.0 + 3.0 * k * x * x);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

class GeluBackwardProblem final : public Problem {
 public:
  GeluBackwardProblem(Device& dev, size_t n, uint64_t seed) : dev_(dev), n_(n), dinp_(dev, n + 1), want_(n) {
    // x in [-5, 5]: both tails and the bend; dout in [-1, 1].
    std::vector<float> x, dy;
    inp_ = random_buffer(dev, n, seed, -5.0f, 5.0f, &x);
    dout_ = random_buffer(dev, n, seed + 1, -1.0f, 1.0f, &dy);
    inp_shifted_ = shifted_copy(dev, x);
    dout_shifted_ = shifted_copy(dev, dy);
    for (size_t i = 0; i < n; ++i) want_[i] = static_cast<double>(dy[i]) * gelu_grad_ref(x[i]);
  }
  std::string shape() const override { return n_shape(n_); }
  // ~25 FLOPs and a tanh per element against 12 bytes: memory-bound; GB/s only.
  double flops() const override { return 0.0; }
  double bytes(size_t) const override { return 12.0 * static_cast<double>(n_); }  // read dout, inp; write dinp
  void run(size_t v) override { run_at(v, 0); }
  // tanhf's 2 ulp reach the result through 0.5 (1 + th) (up to 1e-7 absolute) and through
  // 0.5 x (1 - th^2) du, where 1 - th^2 cancels and |0.5 x du| reaches ~9 at |x| = 5: about
  // 2 ulp(1) * 9 ~ 2e-6 absolute at worst, times |dout| <= 1. Elsewhere a few ulp: rtol 1e-5.
  Check validate(size_t v) override {
    return validate_aligned_and_shifted(dev_, dinp_, n_, want_, {3e-6, 1e-5}, [&](size_t at) { run_at(v, at); });
  }

 private:
  // Aligned, or every pointer one float in (v2's fallback to v1).
  void run_at(size_t v, size_t at) {
    const float* dy = at == 0 ? dout_.data() : dout_shifted_.data() + 1;
    const float* x = at == 0 ? inp_.data() : inp_shifted_.data() + 1;
    dev_.kernels().gelu_backward.at(v).fn(dinp_.data() + at, dy, x, n_);
  }
  Device& dev_;
  size_t n_;
  Array<float> inp_, dout_, inp_shifted_, dout_shifted_, dinp_;
  std::vector<double> want_;
};

// ---- dropout forward ----------------------------------------------------------------------------

// The dropout mask's uniform number for element i: output number i (0-based) of SplitMix64
// started at state `seed` (all arithmetic on uint64_t, wrapping mod 2^64), its top 24 bits
// as an integer times 2^-24 (exact in float, always < 1). nn/transformer.h states the same
// definition for nn::dropout_uniform.
float dropout_uniform_reference(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;  // the state after i + 1 steps
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return static_cast<float>(static_cast<uint32_t>(z >> 40)) * 0x1.0p-24f;
}

// nn::dropout_forward's mask and output for (seed, p): mask_i = u_i < p ? 0 : 1 / (1 - p).
void dropout_reference(const std::vector<float>& x, float p, uint64_t seed, std::vector<double>& mask,
                       std::vector<double>& out) {
  const float keep = 1.0f / (1.0f - p);  // nn: F(1) / (F(1) - F(p)), F = float
  mask.resize(x.size());
  out.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float m = dropout_uniform_reference(seed, static_cast<uint64_t>(i)) < p ? 0.0f : keep;
    mask[i] = m;
    out[i] = static_cast<float>(static_cast<double>(x[i]) * m);  // one float multiply: exact
  }
}

class DropoutForwardProblem final : public Problem {
 public:
  DropoutForwardProblem(Device& dev, size_t n, uint64_t seed)
      : dev_(dev), n_(n), seed_(0x9E3779B97F4A7C15ull * (seed + 11)), out_(dev, n), mask_(dev, n) {
    inp_ = random_buffer(dev, n, seed, -1.0f, 1.0f, &x_);
  }
  std::string shape() const override { return n_shape(n_); }
  double flops() const override { return 0.0; }
  double bytes(size_t) const override { return 12.0 * static_cast<double>(n_); }  // read inp; write out, mask
  // p = 0.2: the Shakespeare config's dropout.
  void run(size_t v) override { dev_.kernels().dropout_forward.at(v).fn(out_.data(), mask_.data(), inp_.data(), n_, 0.2f, seed_); }
  // Three runs, each compared exactly (0 mismatches): p = 0.2 into a separate output,
  // p = 0 (mask all 1, out == inp), and p = 0.5 in place (out aliasing inp).
  Check validate(size_t v) override {
    const auto& fn = dev_.kernels().dropout_forward.at(v).fn;
    std::vector<double> want_mask, want_out;
    Check c;
    for (float p : {0.2f, 0.0f}) {
      out_.fill_bytes(0xFF);
      mask_.fill_bytes(0xFF);
      fn(out_.data(), mask_.data(), inp_.data(), n_, p, seed_ + (p == 0.0f ? 1 : 0));
      dev_.synchronize();
      dropout_reference(x_, p, seed_ + (p == 0.0f ? 1 : 0), want_mask, want_out);
      const std::string at = p == 0.0f ? " (p = 0)" : " (p = 0.2)";
      c = harness::merge(c, compare_device("mask" + at, mask_, want_mask, kExact));
      c = harness::merge(c, compare_device("out" + at, out_, want_out, kExact));
    }
    // In place: out is the input buffer itself.
    out_.upload(x_);
    mask_.fill_bytes(0xFF);
    fn(out_.data(), mask_.data(), out_.data(), n_, 0.5f, seed_ + 2);
    dev_.synchronize();
    dropout_reference(x_, 0.5f, seed_ + 2, want_mask, want_out);
    c = harness::merge(c, compare_device("mask (p = 0.5, in place)", mask_, want_mask, kExact));
    return harness::merge(c, compare_device("out (p = 0.5, in place)", out_, want_out, kExact));
  }

 private:
  Device& dev_;
  size_t n_;
  uint64_t seed_;
  std::vector<float> x_;
  Array<float> inp_, out_, mask_;
};

// ---- multiply, add, scale ---------------------------------------------------------------------

enum class Elementwise { multiply, add, scale };

// One IEEE operation per element: the double result rounded to float is the float result,
// compared exactly. add also runs in place (out = a), scale always does.
class ElementwiseProblem final : public Problem {
 public:
  ElementwiseProblem(Device& dev, Elementwise kind, size_t n, uint64_t seed)
      : dev_(dev), kind_(kind), n_(n), out_(dev, n) {
    a_ = random_buffer(dev, n, seed, -2.0f, 2.0f, &a0_);
    b_ = random_buffer(dev, n, seed + 1, -2.0f, 2.0f, &b0_);
    want_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const double a = a0_[i], b = b0_[i];
      const double r = kind == Elementwise::multiply ? a * b : kind == Elementwise::add ? a + b : a * kScale;
      want_[i] = static_cast<float>(r);
    }
  }
  std::string shape() const override { return n_shape(n_); }
  double flops() const override { return static_cast<double>(n_); }
  // multiply, add: read a, b, write out (12 B); scale: read and write x (8 B).
  double bytes(size_t) const override { return (kind_ == Elementwise::scale ? 8.0 : 12.0) * static_cast<double>(n_); }
  void run(size_t v) override {
    const Kernels& k = dev_.kernels();
    switch (kind_) {
      case Elementwise::multiply: k.multiply.at(v).fn(out_.data(), a_.data(), b_.data(), n_); break;
      case Elementwise::add: k.add.at(v).fn(out_.data(), a_.data(), b_.data(), n_); break;
      case Elementwise::scale: k.scale.at(v).fn(out_.data(), kScale, n_); break;
    }
  }
  Check validate(size_t v) override {
    if (kind_ == Elementwise::scale) {
      out_.upload(a0_);  // x *= s in place
    } else {
      out_.fill_bytes(0xFF);
    }
    run(v);
    dev_.synchronize();
    Check c = compare_device("out", out_, want_, kExact);
    if (kind_ == Elementwise::add) {  // out aliasing a: the residual stream added in place
      out_.upload(a0_);
      dev_.kernels().add.at(v).fn(out_.data(), out_.data(), b_.data(), n_);
      dev_.synchronize();
      c = harness::merge(c, compare_device("out (in place, out = a)", out_, want_, kExact));
    }
    return c;
  }

 private:
  static constexpr float kScale = 0.3f;  // not a power of two: the product rounds
  Device& dev_;
  Elementwise kind_;
  size_t n_;
  std::vector<float> a0_, b0_;
  Array<float> a_, b_, out_;
  std::vector<double> want_;
};

Op elementwise_op(const std::string& name, Elementwise kind, const std::string& summary) {
  Op op;
  op.name = name;
  op.summary = summary;
  op.sizes = {"24M"};
  op.test_sizes = {"1", "1001", "4099"};
  op.variants = [kind](Device& dev) {
    const Kernels& k = dev.kernels();
    return kind == Elementwise::multiply ? variants_of(k.multiply)
           : kind == Elementwise::add    ? variants_of(k.add)
                                         : variants_of(k.scale);
  };
  op.make = [name, kind](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<ElementwiseProblem>(dev, kind, parse_n(name, size), seed);
  };
  return op;
}

// ---- cross-entropy loss and backward, from probabilities ---------------------------------------

std::string rows_shape(size_t N, size_t V) {
  return "N=" + kernels::bench::short_count(N) + " V=" + kernels::bench::short_count(V);
}

// probs (N,V): the softmax of logits in [-8, 8] (a spread of e^16, as a trained model's),
// computed in double and rounded to float, as a softmax version would leave them; targets (N).
void softmax_inputs(size_t N, size_t V, uint64_t seed, std::vector<float>& probs, std::vector<int>& targets) {
  std::vector<float> x(N * V);
  harness::fill_random(x, seed, -8.0f, 8.0f);
  probs.resize(N * V);
  for (size_t n = 0; n < N; ++n) {
    const float* row = x.data() + n * V;
    double m = row[0];
    for (size_t v = 1; v < V; ++v) m = std::max(m, static_cast<double>(row[v]));
    double sum = 0.0;
    for (size_t v = 0; v < V; ++v) sum += std::exp(row[v] - m);
    for (size_t v = 0; v < V; ++v) probs[n * V + v] = static_cast<float>(std::exp(row[v] - m) / sum);
  }
  targets.resize(N);
  harness::Random rng(seed ^ 0x7a5c3e1d2b4f6081ull);
  for (int& t : targets) t = static_cast<int>(rng.next_u64() % V);
}

class CrossEntropyLossProblem final : public Problem {
 public:
  CrossEntropyLossProblem(Device& dev, size_t N, size_t V, uint64_t seed)
      : dev_(dev), N_(N), V_(V), losses_(dev, N), want_(N) {
    std::vector<float> p;
    std::vector<int> t;
    softmax_inputs(N, V, seed, p, t);
    probs_ = Array<float>(dev, p, kernels::uninitialized);
    targets_ = Array<int>(dev, t, kernels::uninitialized);
    // loss = -log p[target], of the float probability the kernel reads
    for (size_t n = 0; n < N; ++n) want_[n] = -std::log(static_cast<double>(p[n * V + static_cast<size_t>(t[n])]));
  }
  std::string shape() const override { return rows_shape(N_, V_); }
  double flops() const override { return 0.0; }
  // Per row: the target, one probability (a 32-byte sector, really), the loss.
  double bytes(size_t) const override { return 12.0 * static_cast<double>(N_); }
  void run(size_t v) override {
    dev_.kernels().crossentropy_loss.at(v).fn(losses_.data(), probs_.data(), targets_.data(), static_cast<int>(N_),
                                               static_cast<int>(V_));
  }
  // logf is within 1 ulp of its result (CUDA's, and the emulator's libm): rtol 1e-6.
  Check validate(size_t v) override {
    losses_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    return compare_device("losses", losses_, want_, {1e-7, 1e-6});
  }

 private:
  Device& dev_;
  size_t N_, V_;
  Array<float> probs_, losses_;
  Array<int> targets_;
  std::vector<double> want_;
};

class CrossEntropyBackwardProblem final : public Problem {
 public:
  CrossEntropyBackwardProblem(Device& dev, size_t N, size_t V, uint64_t seed)
      : dev_(dev), N_(N), V_(V), scale_(0.75f / static_cast<float>(N)), dlogits_(dev, N * V), want_(N * V) {
    std::vector<float> p;
    std::vector<int> t;
    softmax_inputs(N, V, seed, p, t);
    probs_ = Array<float>(dev, p, kernels::uninitialized);
    targets_ = Array<int>(dev, t, kernels::uninitialized);
    // dlogits = (p - [v == target]) * scale, in double (scale = dloss / N, dloss = 0.75 here)
    for (size_t n = 0; n < N; ++n) {
      for (size_t v = 0; v < V; ++v) {
        const double indicator = v == static_cast<size_t>(t[n]) ? 1.0 : 0.0;
        want_[n * V + v] = (static_cast<double>(p[n * V + v]) - indicator) * scale_;
      }
    }
  }
  std::string shape() const override { return rows_shape(N_, V_); }
  double flops() const override { return 2.0 * static_cast<double>(N_ * V_); }
  double bytes(size_t) const override { return 8.0 * static_cast<double>(N_ * V_) + 4.0 * static_cast<double>(N_); }
  void run(size_t v) override {
    dev_.kernels().crossentropy_backward.at(v).fn(dlogits_.data(), probs_.data(), targets_.data(),
                                                   static_cast<int>(N_), static_cast<int>(V_), scale_);
  }
  // Two float roundings (the subtraction, the product): 2 u relative, and every entry is far
  // from float's underflow.
  Check validate(size_t v) override {
    dlogits_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    return compare_device("dlogits", dlogits_, want_, {0.0, 2.5 * kUnitRoundoff});
  }

 private:
  Device& dev_;
  size_t N_, V_;
  float scale_;
  Array<float> probs_, dlogits_;
  Array<int> targets_;
  std::vector<double> want_;
};

Op crossentropy_rows_op(const std::string& name, const std::string& summary, bool backward) {
  Op op;
  op.name = name;
  op.summary = summary;
  op.sizes = {"16384x65"};
  op.test_sizes = {"7x65", "33x67", "5x1001", "300x3"};
  op.variants = [backward](Device& dev) {
    return backward ? variants_of(dev.kernels().crossentropy_backward) : variants_of(dev.kernels().crossentropy_loss);
  };
  op.make = [name, backward](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<size_t> d = kernels::bench::parse_dims(name, size, 2, "NxV, e.g. 16384x65");
    if (backward) return std::make_unique<CrossEntropyBackwardProblem>(dev, d[0], d[1], seed);
    return std::make_unique<CrossEntropyLossProblem>(dev, d[0], d[1], seed);
  };
  return op;
}

// ---- sum ------------------------------------------------------------------------------------------

class SumProblem final : public Problem {
 public:
  SumProblem(Device& dev, size_t n, uint64_t seed)
      : dev_(dev), n_(n), out_(dev, 1), workspace_(dev, kSumWorkspaceDoubles) {
    std::vector<float> x;
    x_ = random_buffer(dev, n, seed, -1.0f, 1.0f, &x);
    // The references in long double (a 64-bit mantissa on x86; double elsewhere), in order.
    long double sum = 0.0L, squares = 0.0L, abs_sum = 0.0L;
    for (float v : x) {
      sum += v;
      squares += static_cast<long double>(v) * v;
      abs_sum += std::fabs(static_cast<long double>(v));
    }
    want_sum_ = static_cast<double>(sum);
    want_squares_ = static_cast<double>(squares);
    abs_sum_ = static_cast<double>(abs_sum);
  }
  std::string shape() const override { return n_shape(n_); }
  double flops() const override { return 2.0 * static_cast<double>(n_); }  // squares: a multiply-add each
  double bytes(size_t) const override { return 4.0 * static_cast<double>(n_); }
  // squares = true: the gradient norm, what the GPT sums most.
  void run(size_t v) override {
    dev_.kernels().sum.at(v).fn(out_.data(), workspace_.data(), x_.data(), n_, true);
  }
  // Both modes; each against the reference at 1e-12 of the sum of |terms| (a double sum of n
  // terms in any order errs by well under n 2^-53 of that), and run twice: the same bits.
  Check validate(size_t v) override {
    Check c;
    for (bool squares : {false, true}) {
      const double first = run_once(v, squares);
      const double second = run_once(v, squares);
      const double want = squares ? want_squares_ : want_sum_;
      const double tol = 1e-12 * (squares ? want_squares_ : abs_sum_) + 1e-300;
      const std::string what = squares ? "sum of squares" : "sum";
      ++c.checked;
      const double err = std::fabs(first - want);
      if (!(err <= tol)) {  // NaN fails too
        ++c.mismatches;
        std::ostringstream os;
        os.precision(17);
        os << what << " = " << first << " but the reference says " << want << " (error " << err << " > " << tol
           << ")\n";
        c.report += os.str();
      }
      if (!std::isnan(err)) c.max_abs_err = std::max(c.max_abs_err, err);
      if (std::bit_cast<uint64_t>(first) != std::bit_cast<uint64_t>(second)) {
        ++c.mismatches;
        c.report += what + ": two runs gave different bits (not deterministic)\n";
      }
    }
    return c;
  }

 private:
  double run_once(size_t v, bool squares) {
    out_.fill_bytes(0xFF);  // NaN until written
    workspace_.fill_bytes(0xFF);
    dev_.kernels().sum.at(v).fn(out_.data(), workspace_.data(), x_.data(), n_, squares);
    dev_.synchronize();
    return out_.to_vector()[0];
  }
  Device& dev_;
  size_t n_;
  Array<float> x_;
  Array<double> out_, workspace_;
  double want_sum_ = 0.0, want_squares_ = 0.0, abs_sum_ = 0.0;
};

}  // namespace

Op encoder_forward_op() {
  Op op;
  op.name = "encoder_forward";
  op.summary = "out = wte[id] + wpe[t]: one thread per output float (single version)";
  op.sizes = {"64x256x384x65"};
  op.test_sizes = {"3x7x33x5", "2x37x130x65"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().encoder_forward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<int> d = parse_encoder("encoder_forward", size);
    return std::make_unique<EncoderForwardProblem>(dev, d[0], d[1], d[2], d[3], seed);
  };
  return op;
}

Op encoder_backward_op() {
  Op op;
  op.name = "encoder_backward";
  op.summary = "dwte, dwpe += dout: thread per (token, channel) scanning every id vs block per token compacting "
               "its positions; both deterministic, bit-identical";
  op.sizes = {"64x256x384x65"};
  // 5x211: N = 1055, past one 1024-id chunk of v2; C = 133: a second, mostly idle strip;
  // 2x600x40x3: three tokens, so hundreds of hits per chunk.
  op.test_sizes = {"3x7x33x5", "5x211x133x65", "2x600x40x3"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().encoder_backward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<int> d = parse_encoder("encoder_backward", size);
    return std::make_unique<EncoderBackwardProblem>(dev, d[0], d[1], d[2], d[3], seed);
  };
  return op;
}

Op gelu_backward_op() {
  Op op;
  op.name = "gelu_backward";
  op.summary = "dinp = dout * gelu'(inp): thread per element vs float4 grid-stride";
  op.sizes = {"24M"};
  op.test_sizes = {"1", "1001", "4099"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().gelu_backward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<GeluBackwardProblem>(dev, parse_n("gelu_backward", size), seed);
  };
  return op;
}

Op dropout_forward_op() {
  Op op;
  op.name = "dropout_forward";
  op.summary = "out = inp * mask, the mask a counter-based hash of (seed, i): nn's bit for bit (single version)";
  op.sizes = {"24M"};
  op.test_sizes = {"1", "1001", "4099"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().dropout_forward); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<DropoutForwardProblem>(dev, parse_n("dropout_forward", size), seed);
  };
  return op;
}

Op multiply_op() {
  return elementwise_op("multiply", Elementwise::multiply, "out = a * b (the dropout backward; single version)");
}

Op add_op() {
  return elementwise_op("add", Elementwise::add, "out = a + b (the residual add, in place too; single version)");
}

Op scale_op() { return elementwise_op("scale", Elementwise::scale, "x *= s (gradient clipping; single version)"); }

Op crossentropy_loss_op() {
  return crossentropy_rows_op("crossentropy_loss", "losses = -log probs[target], one thread per row (single version)",
                              false);
}

Op crossentropy_backward_op() {
  return crossentropy_rows_op("crossentropy_backward",
                              "dlogits = (probs - onehot) * scale, one thread per element (single version)", true);
}

Op sum_op() {
  Op op;
  op.name = "sum";
  op.summary = "sum (of squares) in double, deterministic: one block vs fixed-count partial blocks + one final block";
  op.sizes = {"24M"};
  // 20001, 70001: 3 and 9 partial blocks for v2 (8192 elements each at least).
  op.test_sizes = {"1", "1001", "20001", "70001"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().sum); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<SumProblem>(dev, parse_n("sum", size), seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
