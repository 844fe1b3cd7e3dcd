// kernels/cuda/bench/crossentropy.cpp: the GPT's loss and its gradient
// (kernels/cuda/crossentropy.cu) for the GPU harness: softmax, loss and backward as three
// kernels against one fused kernel.
//
// Sizes: "NxV", N rows of logits over a vocabulary of V. The default "4096x50304": the GPT's
// logits for 4096 tokens (824 MB of logits, as much again of dlogits).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims, short_count
#include "kernels/cuda/bench/ops.h"

namespace kernels::cuda::bench {

namespace {

class CrossEntropyProblem final : public Problem {
 public:
  CrossEntropyProblem(Device& dev, size_t N, size_t V, uint64_t seed)
      : dev_(dev), N_(N), V_(V), losses_(dev, N), dlogits_(dev, N * V), want_losses_(N), want_dlogits_(N * V) {
    // [-8, 8]: probabilities spread over e^16 ~ 1e7, as a trained model's logits do.
    std::vector<float> x;
    logits_ = random_buffer(dev, N * V, seed, -8.0f, 8.0f, &x);
    std::vector<int> t(N);
    harness::Random rng(seed ^ 0x7a5c3e1d2b4f6081ull);
    for (int& target : t) target = static_cast<int>(rng.next_u64() % V);
    targets_ = Array<int>(dev, t, kernels::uninitialized);
    // loss = log sum_v exp(x_v - max) + max - x_t;  dlogits_v = (p_v - [v == t]) / N, in double
    for (size_t n = 0; n < N; ++n) {
      const float* row = x.data() + n * V;
      double* d = want_dlogits_.data() + n * V;
      double m = row[0];
      for (size_t v = 1; v < V; ++v) m = std::max(m, static_cast<double>(row[v]));
      double sum = 0.0;
      for (size_t v = 0; v < V; ++v) {
        d[v] = std::exp(row[v] - m);
        sum += d[v];
      }
      const size_t target = static_cast<size_t>(t[n]);
      want_losses_[n] = std::log(sum) + m - row[target];
      for (size_t v = 0; v < V; ++v) d[v] = (d[v] / sum - (v == target ? 1.0 : 0.0)) / static_cast<double>(N);
    }
  }

  std::string shape() const override {
    return "N=" + kernels::bench::short_count(N_) + " V=" + kernels::bench::short_count(V_);
  }
  // One exp per element: not FLOPs worth counting. GB/s only.
  double flops() const override { return 0.0; }
  // Per element of (N,V): unfused (v1) reads the logits twice and writes the probabilities
  // (softmax kernel), then reads and writes them again (backward kernel): 20 B; fused (v2)
  // reads the logits twice and writes dlogits once: 12 B. Per row: the target and the loss
  // (v1 also reads the target's probability, and the backward kernel the target again).
  // Told apart by the version's name, not its place in the table.
  double bytes(size_t v) const override {
    const bool unfused = std::string(dev_.kernels().crossentropy.at(v).name) == "unfused";
    const double per_element = unfused ? 20.0 : 12.0;
    const double per_row = unfused ? 16.0 : 8.0;
    return per_element * static_cast<double>(N_ * V_) + per_row * static_cast<double>(N_);
  }
  void run(size_t v) override {
    dev_.kernels().crossentropy.at(v).fn(losses_.data(), dlogits_.data(), logits_.data(), targets_.data(),
                                          static_cast<int>(N_), static_cast<int>(V_));
  }

  // losses (2 to 24 here): the row's sum of exps is split over 256 threads (<= 197 terms
  // each at V = 50304) and merged in a tree, relative error ~1e-6; its log, or v1's log of
  // the target's float probability, moves the loss by about that much: 1e-5 absolute and
  // relative. dlogits: relative only (every entry is a normal float, down to ~1e-14 at the
  // default size); the same sum's error, plus two roundings: 1e-4.
  harness::Check validate(size_t v) override {
    losses_.fill_bytes(0xFF);
    dlogits_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    harness::Check c = compare_device("losses", losses_, want_losses_, {1e-5, 1e-5});
    return harness::merge(c, compare_device("dlogits", dlogits_, want_dlogits_, {0.0, 1e-4}));
  }

 private:
  Device& dev_;
  size_t N_, V_;
  Array<float> logits_, losses_, dlogits_;
  Array<int> targets_;
  std::vector<double> want_losses_, want_dlogits_;
};

}  // namespace

Op crossentropy_op() {
  Op op;
  op.name = "crossentropy";
  op.summary = "losses and dlogits from logits: softmax, loss, backward as three kernels vs one fused kernel";
  op.sizes = {"4096x50304"};
  op.test_sizes = {"7x1000", "33x67", "5x4099"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().crossentropy); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    const std::vector<size_t> d = kernels::bench::parse_dims("crossentropy", size, 2, "NxV, e.g. 4096x50304");
    return std::make_unique<CrossEntropyProblem>(dev, d[0], d[1], seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
