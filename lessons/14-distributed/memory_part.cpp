// Lesson 14's memory parts: zero (the AdamW moments per rank under ZeRO-1) and recompute
// (activation memory against time per step).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

#include "gpt/model.h"
#include "gpt/plan.h"
#include "gpt/train.h"
#include "kernels/comm.h"
#include "lessons/14-distributed/distributed_lesson.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace lesson14 {

namespace {

// nanoGPT's CPU configuration (the trainer's defaults) at L layers.
gpt::GPTConfig cpu_config(int layers) {
  const gpt::TrainOptions o;
  gpt::GPTConfig c;
  c.n_layer = layers;
  c.n_head = o.n_head;
  c.n_embd = o.n_embd;
  c.block_size = o.block_size;
  c.vocab_size = 65;
  return c;
}

}  // namespace

int run_zero_part(const Options& opts) {
  std::cout << "\n== zero: the AdamW moments each rank holds, ZeRO stage 1 against plain data parallelism\n";
  const gpt::GPTConfig c = cpu_config(4);
  const int64_t P = gpt::num_parameters(c);
  const int most = opts.quick ? 4 : 8;
  std::printf("%zd parameters; plain data parallelism: every rank holds m and v, 8 P = %.2f MB\n", static_cast<ssize_t>(P),
              8.0 * static_cast<double>(P) / 1e6);
  std::printf("%6s %16s %16s %16s\n", "ranks", "largest rank MB", "smallest MB", "plan 8P/N MB");
  std::ostringstream rec;
  rec << "{\"params\": " << P << ", \"rows\": [";
  for (int n = 1; n <= most; ++n) {
    // N ranks as threads (kernels/comm.h), each sharding its model's moments: what each keeps
    std::vector<int64_t> bytes(static_cast<size_t>(n));
    kernels::comm::run_ranks(n, [&](kernels::comm::Comm& comm) {
      gpt::GPT m = gpt::gpt_create(c);
      gpt::gpt_shard_optimizer(m, comm);
      bytes[static_cast<size_t>(comm.rank())] =
          static_cast<int64_t>((m.m_memory.size() + m.v_memory.size()) * sizeof(float));
    });
    const int64_t hi = *std::max_element(bytes.begin(), bytes.end()), lo = *std::min_element(bytes.begin(), bytes.end());
    const double plan = gpt::plan::state_bytes_per_rank(static_cast<double>(P), gpt::plan::Precision::fp32, 1, n).optimizer;
    std::printf("%6d %16.3f %16.3f %16.3f\n", n, static_cast<double>(hi) / 1e6, static_cast<double>(lo) / 1e6, plan / 1e6);
    rec << (n > 1 ? ", " : "") << "{\"ranks\": " << n << ", \"max_bytes\": " << hi << ", \"min_bytes\": " << lo
        << ", \"plan_bytes\": " << jnum(plan) << "}";
  }
  rec << "]}";
  lessons::record_part("zero", rec.str());
  return 0;
}

int run_recompute_part(const Options& opts) {
  std::cout << "\n== recompute: activation memory against time per training step (cpu backend)\n";
  auto be = gpt::make_backend("cpu");
  const gpt::TrainOptions to;
  const int B = to.batch_size, reps = opts.quick ? 2 : 12;
  std::printf("%7s %12s %14s %14s %12s %12s %8s\n", "layers", "mode", "activations MB", "breakdown MB", "ms/step",
              "extra time", "saved");
  std::ostringstream rec;
  rec << "{\"batch\": " << B << ", \"rows\": [";
  bool first = true;
  for (int layers : opts.quick ? std::vector<int>{2} : std::vector<int>{4, 8, 16}) {
    const gpt::GPTConfig c = cpu_config(layers);
    const int T = c.block_size;
    std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
    nn::Rng rng(14);
    for (auto& t : x) t = static_cast<int32_t>(rng.below(65));
    for (auto& t : y) t = static_cast<int32_t>(rng.below(65));
    double ms[2] = {0, 0};
    int64_t held[2] = {0, 0};
    // both models step in turn, so a noisy machine slows both alike
    gpt::GPT models[2] = {gpt::gpt_create(c), gpt::gpt_create(c)};
    std::vector<double> t[2];
    for (int r = 0; r < 2; ++r) {
      gpt::gpt_init_weights(models[r], 1);
      gpt::gpt_set_recompute(models[r], r == 1);
    }
    for (int rep = 0; rep < reps + 2; ++rep) {
      for (int r = 0; r < 2; ++r) {
        gpt::StepOptions so;
        const auto t0 = std::chrono::steady_clock::now();
        gpt::train_step(models[r], *be, {{x.data(), y.data(), 1}}, B, T, so);
        if (rep >= 2) t[r].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    for (int r = 0; r < 2; ++r) {
      std::sort(t[r].begin(), t[r].end());
      ms[r] = t[r][t[r].size() / 2];
      held[r] = static_cast<int64_t>((models[r].acts_memory.size() + models[r].block_outputs.size()) * sizeof(float));
      const int64_t bd = gpt::memory_breakdown(c, B, T, be->keeps_preatt(), r == 1).activations;
      NN_CHECK(bd == held[r], "recompute: the model holds " << held[r] << " bytes of activations, memory_breakdown says "
                                                          << bd);
      std::printf("%7d %12s %14.2f %14.2f %12.2f %11.0f%% %7.0f%%\n", layers, r ? "recompute" : "store", static_cast<double>(held[r]) / 1e6,
                  static_cast<double>(bd) / 1e6, ms[r], r ? 100 * (ms[1] / ms[0] - 1) : 0.0,
                  r ? 100 * (1 - static_cast<double>(held[1]) / static_cast<double>(held[0])) : 0.0);
      rec << (first ? "" : ", ") << "{\"layers\": " << layers << ", \"recompute\": " << (r ? "true" : "false")
          << ", \"activation_bytes\": " << held[r] << ", \"ms\": " << jnum(ms[r]) << "}";
      first = false;
    }
  }
  rec << "]}";
  lessons::record_part("recompute", rec.str());
  return 0;
}

}  // namespace lesson14
