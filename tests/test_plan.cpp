// Tests of gpt/plan.h (the memory and network arithmetic of lesson 14) and `nnlab plan`
// (gpt/plan_cli.h): the closed forms against the trainer's own counts (num_parameters,
// memory_breakdown: exact, tolerance 0, since both count the same fp32 tensors), ZeRO's cut of
// the state and the GPU counts against sums done by hand in the comments, the KV cache and
// the packed formats against kernels/weight_format.h, the ring's time, fit_link on synthetic
// measurements, and every refusal.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "gpt/plan.h"
#include "gpt/plan_cli.h"
#include "kernels/weight_format.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

namespace {

using namespace gpt;
using plan::Precision;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

GPTConfig gpt2_124m() {
  GPTConfig c;
  c.vocab_size = 50257;
  c.block_size = 1024;
  c.n_layer = 12;
  c.n_head = 12;
  c.n_embd = 768;
  return c;
}

// gpt/configs/shakespeare_char_gpu.toml's model: no biases, dropout 0.2 (so dropout masks)
GPTConfig shakespeare_gpu() {
  GPTConfig c;
  c.vocab_size = 65;
  c.block_size = 256;
  c.n_layer = 6;
  c.n_head = 6;
  c.n_embd = 384;
  c.bias = false;
  c.dropout = 0.2f;
  return c;
}

// A small Llama: grouped-query heads, flash attention, an untied head, its own SwiGLU width.
GPTConfig small_llama() {
  GPTConfig c;
  c.arch = Arch::llama;
  c.vocab_size = 97;
  c.block_size = 48;
  c.n_layer = 3;
  c.n_head = 6;
  c.n_kv_head = 2;
  c.n_embd = 48;
  c.ffn_hidden = 136;
  c.bias = false;
  c.tie_embeddings = false;
  return c;
}

// The tiny default with odd B and T.
GPTConfig tiny() {
  GPTConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 14;
  c.vocab_size = 11;
  c.block_size = 9;
  return c;
}

// Parses `nnlab plan <args>` in-process; CLI11's message, or "" when it parsed.
std::string parse_error(const std::string& args, PlanCliOptions& o) {
  CLI::App app("test", "plan");
  add_plan_options(app, o);
  try {
    app.parse(args, false);
  } catch (const CLI::ParseError& e) {
    return std::string(e.what()) + " ";
  }
  return "";
}

std::string plan_text(const PlanCliOptions& o) {
  std::ostringstream os;
  print_plan(os, o);
  return os.str();
}

}  // namespace

// ---- 1. the state per parameter, and ZeRO ----------------------------------------------------

TEST_CASE("plan: 16 bytes per parameter in fp32 and in mixed precision, split as the ZeRO paper", "[plan]") {
  const plan::ParamBytes f = plan::bytes_per_param(Precision::fp32);
  CHECK(f.weights == 4);
  CHECK(f.grads == 4);
  CHECK(f.master == 0);
  CHECK(f.moments == 8);
  CHECK(f.total() == 16);
  const plan::ParamBytes m = plan::bytes_per_param(Precision::mixed);
  CHECK(m.weights == 2);
  CHECK(m.grads == 2);
  CHECK(m.optimizer() == 12);  // the paper's K = 12: fp32 master weights, momentum, variance
  CHECK(m.total() == 16);
  CHECK(plan::parse_precision("mixed") == Precision::mixed);
  CHECK_THAT(testing::error_of([] { plan::parse_precision("fp16"); }), Catch::Contains("fp32") && Catch::Contains("mixed"));
}

TEST_CASE("plan: ZeRO stages 0-3 per rank, by hand", "[plan]") {
  // 1e9 parameters, mixed, 8 ranks: weights 2e9, grads 2e9, optimizer 12e9 bytes
  const double P = 1e9;
  const double want_mixed[4] = {
      16e9,                    // stage 0: everything on every rank
      2e9 + 2e9 + 12e9 / 8,    // stage 1: 5.5e9
      2e9 + (2e9 + 12e9) / 8,  // stage 2: 3.75e9
      16e9 / 8,                // stage 3: 2e9
  };
  for (int s = 0; s <= 3; ++s) {
    INFO("stage " << s);
    CHECK(plan::state_bytes_per_rank(P, Precision::mixed, s, 8).total() == Approx(want_mixed[s]).epsilon(1e-15));
  }
  // fp32 (our trainer's ZeRO-1 shards m and v): 3e9 parameters on 4 ranks: 12e9 + 12e9 + 24e9 / 4
  const plan::StateBytes z1 = plan::state_bytes_per_rank(3e9, Precision::fp32, 1, 4);
  CHECK(z1.weights == 12e9);
  CHECK(z1.grads == 12e9);
  CHECK(z1.optimizer == 6e9);
  // one rank: every stage holds everything
  for (int s = 0; s <= 3; ++s) CHECK(plan::state_bytes_per_rank(P, Precision::fp32, s, 1).total() == 16e9);

  CHECK_THAT(testing::error_of([] { plan::state_bytes_per_rank(1e9, Precision::fp32, 4, 2); }), Catch::Contains("ZeRO stage 4"));
  CHECK_THAT(testing::error_of([] { plan::state_bytes_per_rank(1e9, Precision::fp32, 1, 0); }), Catch::Contains("ranks"));
  for (double bad : {0.0, -1e9, kNaN, static_cast<double>(INFINITY)}) {
    CHECK_THAT(testing::error_of([bad] { plan::state_bytes_per_rank(bad, Precision::fp32, 0, 1); }),
               Catch::Contains("parameters"));
  }
}

// ---- 2. the parameter and activation formulas against the model's tables ---------------------

TEST_CASE("plan: parameter_count's closed form equals num_parameters (gpt2, no biases, llama GQA untied)", "[plan]") {
  CHECK(plan::parameter_count(gpt2_124m()) == 124439808);  // GPT-2 small, the published count
  for (const GPTConfig& c : {gpt2_124m(), shakespeare_gpu(), small_llama(), tiny()}) {
    validate(c);
    INFO(arch_name(c.arch) << " L " << c.n_layer << " C " << c.n_embd << " bias " << c.bias);
    CHECK(plan::parameter_count(c) == num_parameters(c));
  }
}

// Our trainer stores everything in fp32, and the formula counts the same tensors: the bytes must
// be EQUAL (tolerance 0). A difference means a tensor was added to kActivations or kScratch
// (gpt/model.h) that the formula in gpt/plan.h does not know: teach it there.
TEST_CASE("plan: activations and scratch equal memory_breakdown exactly, stored and recomputed", "[plan]") {
  struct Case {
    const char* name;
    GPTConfig c;
    int B, T;
    bool preatt;
  };
  const Case cases[] = {
      {"tiny, odd B and T", tiny(), 3, 7, true},
      {"GPT-2 124M at B 2, T 64", gpt2_124m(), 2, 64, true},
      {"GPT-2 124M, no scores (cuda's layout)", gpt2_124m(), 1, 33, false},
      {"Shakespeare GPU config: no biases, dropout masks", shakespeare_gpu(), 4, 256, true},
      {"llama, GQA, flash attention", small_llama(), 5, 48, true},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    const plan::AttentionStore store = plan::attention_store_of(k.c, k.preatt);
    const plan::ActivationCount a = plan::count_activations(k.c, k.B, k.T, store, k.c.dropout > 0.0f);
    const MemoryBreakdown stored = memory_breakdown(k.c, k.B, k.T, k.preatt, false);
    const MemoryBreakdown rc = memory_breakdown(k.c, k.B, k.T, k.preatt, true);
    const int64_t P = plan::parameter_count(k.c);
    CHECK(stored.params == 4 * P);
    CHECK(stored.grads == 4 * P);
    CHECK(stored.adam == 8 * P);
    CHECK(stored.activations == 4 * a.stored());
    CHECK(stored.scratch == 4 * a.scratch);
    CHECK(rc.activations == 4 * a.recomputed());
    CHECK(rc.activations < stored.activations);  // the point of recomputing
  }
  // one hand count: gpt2 (C 14, NH 2, V 11) at B 3, T 7, scores and maps, no dropout
  //   a layer: 21 rows x (18 C + 4 + 2 NH T) = 21 x (252 + 4 + 28) = 5964
  //   outside: 21 rows x (2 C + 2 + 2 V + 1)  = 21 x (28 + 2 + 22 + 1) = 1113
  const plan::ActivationCount a = plan::count_activations(tiny(), 3, 7, plan::AttentionStore::scores_and_maps, false);
  CHECK(a.per_layer == 5964);
  CHECK(a.outside == 1113);
  CHECK(a.stored() == 2 * 5964 + 1113);
  CHECK(a.recomputed() == 2 * 21 * 14 + 5964 + 1113);
  CHECK_THAT(testing::error_of([] { plan::count_activations(tiny(), 0, 7, plan::AttentionStore::flash, false); }),
             Catch::Contains("B=0"));
}

// ---- 3. serving --------------------------------------------------------------------------------

TEST_CASE("plan: serving bytes per parameter match the packed formats, and the KV cache of Llama-2 7B", "[plan]") {
  // a 4096 x 4096 matrix packed: bytes / weights is the per-parameter cost
  const int rows = 4096, cols = 4096;
  for (kernels::WeightFormat f : {kernels::WeightFormat::f32, kernels::WeightFormat::bf16, kernels::WeightFormat::int8,
                                  kernels::WeightFormat::int4, kernels::WeightFormat::sparse24, kernels::WeightFormat::w8a8}) {
    INFO(kernels::format_name(f));
    const double packed = static_cast<double>(kernels::format_bytes(f, rows, cols)) / (double(rows) * cols);
    CHECK(plan::serving_bytes_per_param(f, cols) == Approx(packed).epsilon(1e-12));
  }
  CHECK(plan::serving_bytes_per_param(kernels::WeightFormat::int4) == 0.625);
  // Llama-2 7B: 32 layers, 32 KV heads of 128, 4096 tokens, bf16: 2 x 32 x 32 x 128 x 4096 x 2 = 2 GiB
  CHECK(plan::kv_cache_bytes(32, 32, 128, 4096, 1, 2.0) == 2147483648.0);
  // Llama-2 70B's 8 KV heads (of 64 query heads), 80 layers: 2 x 80 x 8 x 128 x 4096 x 8 x 2 = 10.7 GB for 8 sequences
  CHECK(plan::kv_cache_bytes(80, 8, 128, 4096, 8, 2.0) == 2.0 * 80 * 8 * 128 * 4096 * 8 * 2);
  CHECK_THAT(testing::error_of([] { plan::kv_cache_bytes(32, 0, 128, 4096, 1, 2.0); }), Catch::Contains("NKV=0"));
  // 70e9 parameters in bf16 (140e9 bytes) + 10e9 of cache on 72e9 usable: ceil(150 / 72) = 3; in int4 1
  CHECK(plan::gpus_to_serve(140e9, 10e9, 72e9) == 3);
  CHECK(plan::gpus_to_serve(70e9 * 0.625, 0, 72e9) == 1);
}

// ---- 4. how many GPUs ---------------------------------------------------------------------------

TEST_CASE("plan: GPUs to train a 7B model on 80 GB GPUs, by hand, and the smallest N by search", "[plan]") {
  // 7e9 parameters x 16 bytes = 112e9 bytes of state, fp32 or mixed alike. 80 GB at 90%: 72e9 usable.
  const double P = 7e9, usable = 80e9 * plan::kUsableFraction;
  REQUIRE(usable == Approx(72e9));
  CHECK(plan::state_bytes_per_rank(P, Precision::mixed, 0, 1).total() == Approx(112e9));
  CHECK(plan::state_bytes_per_rank(P, Precision::fp32, 0, 1).total() == Approx(112e9));
  // State only, mixed:
  //   stage 0: 112 > 72 on every rank: never
  //   stage 1: 28 (bf16 w + g) + 84 / N <= 72  ->  N >= 84 / 44 = 1.9   -> 2
  //   stage 2: 14 + 98 / N <= 72               ->  N >= 98 / 58 = 1.69  -> 2
  //   stage 3: 112 / N <= 72                   ->  N >= 1.56            -> 2
  CHECK(plan::gpus_to_train(P, Precision::mixed, 0, 0, usable) == 0);
  CHECK(plan::gpus_to_train(P, Precision::mixed, 1, 0, usable) == 2);
  CHECK(plan::gpus_to_train(P, Precision::mixed, 2, 0, usable) == 2);
  CHECK(plan::gpus_to_train(P, Precision::mixed, 3, 0, usable) == 2);
  // With 20e9 bytes of activations per rank:
  //   stage 1: 28 + 20 + 84 / N <= 72  ->  N >= 84 / 24 = 3.5   -> 4  (3 ranks: 28 + 20 + 28 = 76)
  //   stage 2: 14 + 20 + 98 / N <= 72  ->  N >= 98 / 38 = 2.58  -> 3
  //   stage 3: 20 + 112 / N <= 72      ->  N >= 112 / 52 = 2.15 -> 3
  CHECK(plan::gpus_to_train(P, Precision::mixed, 1, 20e9, usable) == 4);
  CHECK(plan::gpus_to_train(P, Precision::mixed, 2, 20e9, usable) == 3);
  CHECK(plan::gpus_to_train(P, Precision::mixed, 3, 20e9, usable) == 3);
  // fp32 stage 1: weights + grads are 56e9 unsharded; + 20e9 of activations leaves -4e9: never
  CHECK(plan::gpus_to_train(P, Precision::fp32, 1, 20e9, usable) == 0);
  // a small model fits on one GPU at every stage
  for (int s = 0; s <= 3; ++s) CHECK(plan::gpus_to_train(124e6, Precision::fp32, s, 10e9, usable) == 1);

  // The answer is the smallest N that fits, for many sizes: N fits and N - 1 does not.
  for (double params : {1.3e9, 7e9, 13e9, 70e9, 175e9}) {
    for (double act : {0.0, 5e9, 31e9}) {
      for (int s = 1; s <= 3; ++s) {
        const int64_t n = plan::gpus_to_train(params, Precision::mixed, s, act, usable);
        INFO(params << " params, " << act << " activations, stage " << s << ": " << n);
        if (n == 0) continue;  // checked below: then even a huge N does not fit
        auto per_rank = [&](int64_t k) {
          return plan::state_bytes_per_rank(params, Precision::mixed, s, static_cast<int>(k)).total() + act;
        };
        CHECK(per_rank(n) <= usable);
        if (n > 1) CHECK(per_rank(n - 1) > usable);
      }
      const int64_t never = plan::gpus_to_train(params, Precision::mixed, 1, act, usable);
      if (never == 0) CHECK(plan::state_bytes_per_rank(params, Precision::mixed, 1, 1 << 30).total() + act > usable);
    }
  }
  CHECK_THAT(testing::error_of([&] { plan::gpus_to_train(P, Precision::mixed, 1, kNaN, usable); }),
             Catch::Contains("activation"));
  CHECK_THAT(testing::error_of([&] { plan::gpus_to_train(P, Precision::mixed, 1, 0, 0); }), Catch::Contains("usable"));
  CHECK_THAT(testing::error_of([&] { plan::gpus_to_train(P, Precision::mixed, 5, 0, usable); }), Catch::Contains("ZeRO"));
}

// ---- 5. the network ------------------------------------------------------------------------------

TEST_CASE("plan: the ring all-reduce's time, ZeRO-3's 1.5x, the link presets", "[plan]") {
  // 1e9 bytes over 4 ranks at 1e10 B/s, 10 us a step: 2 x 3/4 x 0.1 s + 6 x 10 us
  CHECK(plan::ring_allreduce_seconds(1e9, 4, 1e10, 1e-5) == Approx(0.15 + 6e-5).epsilon(1e-14));
  CHECK(plan::ring_allreduce_seconds(1e9, 1, 1e10, 1e-5) == 0.0);  // one rank sends nothing
  CHECK(plan::ring_allreduce_traffic(8e9, 8) == Approx(14e9));
  // ZeRO-1 and 2: the all-reduce's bytes; ZeRO-3: 1.5 x its bandwidth term, 3 (N - 1) latencies
  for (int s : {0, 1, 2}) CHECK(plan::step_comm_seconds(1e9, 4, s, 1e10, 1e-5) == plan::ring_allreduce_seconds(1e9, 4, 1e10, 1e-5));
  CHECK(plan::step_comm_seconds(1e9, 4, 3, 1e10, 1e-5) == Approx(0.225 + 9e-5).epsilon(1e-14));
  CHECK_THAT(testing::error_of([] { plan::ring_allreduce_seconds(1e9, 4, 0, 1e-5); }), Catch::Contains("bandwidth"));
  CHECK_THAT(testing::error_of([] { plan::ring_allreduce_seconds(1e9, 4, 1e10, -1); }), Catch::Contains("latency"));
  CHECK_THAT(testing::error_of([] { plan::ring_allreduce_seconds(-5, 4, 1e10, 0); }), Catch::Contains("bytes"));
  CHECK_THAT(testing::error_of([] { plan::ring_allreduce_seconds(kNaN, 4, 1e10, 0); }), Catch::Contains("bytes"));

  // presets: advertised rates in bytes/s, planned at 80%
  CHECK(plan::find_link("nvlink").advertised_Bps == 450e9);
  CHECK(plan::find_link("ib200").advertised_Bps == 25e9);
  CHECK(plan::find_link("ib400").bandwidth_Bps() == Approx(40e9));
  CHECK(plan::find_link("eth100").advertised_Bps == 12.5e9);
  CHECK(plan::find_link("eth10").bandwidth_Bps() == Approx(1e9));
  for (const plan::Link& l : plan::link_presets()) {
    INFO(l.name);
    CHECK(l.latency_s > 0);
    CHECK_FALSE(l.latency_source.empty());
  }
  CHECK_THAT(testing::error_of([] { plan::find_link("wifi"); }),
             Catch::Contains("wifi") && Catch::Contains("nvlink") && Catch::Contains("eth10"));
}

TEST_CASE("plan: fit_link recovers a known latency and bandwidth, and refuses what it cannot fit", "[plan]") {
  const double lat = 7e-6, bw = 3.2e10;
  std::vector<plan::LinkSample> exact, noisy, one_n;
  int k = 0;
  for (int N : {2, 4, 8}) {
    for (double bytes = 1e3; bytes <= 2e9; bytes *= 7.3) {
      const double t = plan::ring_allreduce_seconds(bytes, N, bw, lat);
      exact.push_back({bytes, t, N});
      // deterministic +-3% "noise" that does not average out to zero by construction
      const double wobble = 1.0 + 0.03 * std::sin(1.7 * k++);
      noisy.push_back({bytes, t * wobble, N});
      if (N == 4) one_n.push_back({bytes, t, N});
    }
  }
  const plan::LinkFit f = plan::fit_link(exact);
  CHECK(f.latency_s == Approx(lat).epsilon(1e-9));
  CHECK(f.bandwidth_Bps == Approx(bw).epsilon(1e-9));
  CHECK(f.r2 == Approx(1.0).epsilon(1e-12));
  // one rank count: the latency term is a constant, still separable from the bytes
  const plan::LinkFit g = plan::fit_link(one_n);
  CHECK(g.latency_s == Approx(lat).epsilon(1e-9));
  CHECK(g.bandwidth_Bps == Approx(bw).epsilon(1e-9));
  // with noise: within a few percent, R^2 still high (the relative weighting keeps the latency)
  const plan::LinkFit h = plan::fit_link(noisy);
  CHECK(h.latency_s == Approx(lat).epsilon(0.05));
  CHECK(h.bandwidth_Bps == Approx(bw).epsilon(0.05));
  CHECK(h.r2 > 0.99);
  CHECK(h.r2 < 1.0);
  // two points are enough
  CHECK(plan::fit_link({exact.front(), exact.back()}).bandwidth_Bps == Approx(bw).epsilon(1e-9));

  auto err = [](std::vector<plan::LinkSample> s) { return testing::error_of([&] { plan::fit_link(s); }); };
  CHECK_THAT(err({}), Catch::Contains("at least 2"));
  CHECK_THAT(err({{1e6, 1e-3, 2}}), Catch::Contains("at least 2"));
  CHECK_THAT(err({{0, 1e-3, 2}, {1e6, 1e-3, 2}}), Catch::Contains("sample 0"));
  CHECK_THAT(err({{1e3, 1e-5, 2}, {1e6, -1e-3, 2}}), Catch::Contains("sample 1"));
  CHECK_THAT(err({{1e3, kNaN, 2}, {1e6, 1e-3, 2}}), Catch::Contains("sample 0"));
  CHECK_THAT(err({{1e3, 1e-5, 1}, {1e6, 1e-3, 1}}), Catch::Contains("ranks >= 2"));
  CHECK_THAT(err({{1e6, 1e-3, 4}, {1e6, 1.1e-3, 4}}), Catch::Contains("two different sizes"));
  CHECK_THAT(err({{1e3, 1e-3, 2}, {1e8, 1e-5, 2}}), Catch::Contains("does not grow"));
}

TEST_CASE("plan: a step on N ranks, without and with overlap, its efficiency and MFU", "[plan]") {
  plan::StepInput in;
  in.compute_s = 0.5;
  in.grad_bytes = 1e9;
  in.ranks = 4;
  in.bandwidth_Bps = 1e10;
  in.latency_s = 1e-5;
  in.flops_per_rank = 1e14;
  in.peak_flops = 4e14;
  const double comm = 0.15 + 6e-5;
  const plan::StepPrediction p = plan::predict_step(in);  // no overlap: our trainer
  CHECK(p.comm_s == Approx(comm));
  CHECK(p.step_s == Approx(0.5 + comm));
  CHECK(p.efficiency == Approx(0.5 / (0.5 + comm)));
  CHECK(p.mfu == Approx(1e14 / ((0.5 + comm) * 4e14)));
  in.overlap = true;
  CHECK(plan::predict_step(in).step_s == Approx(0.5));  // hidden behind the compute
  in.compute_s = 0.1;
  CHECK(plan::predict_step(in).step_s == Approx(comm));  // the network is the bottleneck
  in.ranks = 1;
  CHECK(plan::predict_step(in).comm_s == 0.0);
  in.compute_s = 0;
  CHECK_THAT(testing::error_of([&] { plan::predict_step(in); }), Catch::Contains("compute time"));
}

// ---- `nnlab plan` ---------------------------------------------------------------------------------

TEST_CASE("plan cli: refuses zero, negative, NaN and unknown values with a message", "[plan][cli]") {
  for (const char* bad : {"--params 0", "--params -7e9", "--params nan", "--params inf", "--params 7x", "--gpu-mem 0",
                          "--gpu-mem -80", "--gpu-mem nan", "--usable 1.5", "--usable 0", "--zero 4", "--zero -1",
                          "--nodes 0", "--layers 0", "--heads -2", "--seq 0", "--batch -1", "--link wifi",
                          "--link", "--precision fp16", "--attention sparse", "--step-ms 0", "--step-ms nan",
                          "--no-such-flag"}) {
    PlanCliOptions o;
    INFO(bad);
    CHECK_FALSE(parse_error(bad, o).empty());
  }
  PlanCliOptions ok;
  CHECK(parse_error("--params 7e9 --gpu-mem 80 --precision mixed --zero 3 --nodes 16 --link ib200", ok).empty());
  CHECK(ok.params == 7e9);
  CHECK(ok.link == "ib200");

  // what the flags alone cannot refuse: print_plan's nn::Error
  PlanCliOptions none;
  CHECK_THAT(testing::error_of([&] { plan_text(none); }), Catch::Contains("nothing to plan"));
  PlanCliOptions partial;
  partial.layers = 4;
  partial.embd = 64;
  CHECK_THAT(testing::error_of([&] { plan_text(partial); }), Catch::Contains("--heads"));
  PlanCliOptions indivisible;
  indivisible.layers = 2;
  indivisible.embd = 100;
  indivisible.heads = 3;
  CHECK_THAT(testing::error_of([&] { plan_text(indivisible); }), Catch::Contains("not divisible"));
  PlanCliOptions both;
  both.config = std::string(NNLAB_SOURCE_DIR) + "/gpt/configs/gpt2_124m.json";
  both.layers = 2;
  CHECK_THAT(testing::error_of([&] { plan_text(both); }), Catch::Contains("not both"));
}

TEST_CASE("plan cli: 7B in mixed precision: 112 GB of state, ZeRO over 8 ranks, the all-reduce", "[plan][cli]") {
  PlanCliOptions o;
  REQUIRE(parse_error("--params 7e9 --gpu-mem 80 --zero 1 --nodes 8 --link ib400 --step-ms 2000", o).empty());
  const std::string out = plan_text(o);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("mixed"));
  CHECK_THAT(out, Catch::Contains("112 GB"));   // the state on one GPU
  CHECK_THAT(out, Catch::Contains("38.5 GB"));  // ZeRO-1 over 8: 28 + 84 / 8
  CHECK_THAT(out, Catch::Contains("no shape"));
  // 14e9 bytes of bf16 gradients: 2 x 7/8 x 14e9 / 40e9 + 14 x 5 us = 612.57 ms
  CHECK_THAT(out, Catch::Contains("613 ms"));
}

TEST_CASE("plan cli: our configs' plan equals memory_breakdown to the byte", "[plan][cli]") {
  for (const char* cfg : {"gpt/configs/shakespeare_char_gpu.toml", "gpt/configs/gpt2_124m.json"}) {
    PlanCliOptions o;
    o.config = std::string(NNLAB_SOURCE_DIR) + "/" + cfg;
    o.batch = 2;
    o.seq = 128;
    const std::string out = plan_text(o);
    INFO(out);
    CHECK_THAT(out, Catch::Contains("equal to the byte"));
    CHECK_THAT(out, Catch::Contains("fp32"));
  }
}

TEST_CASE("plan cli: through the front door, bad input ends in a message and a non-zero exit", "[plan][cli]") {
  const testing::RunResult good = testing::run_program("nnlab", "plan --params 7e9 --layers 32 --embd 4096 --heads 32 "
                                                                 "--seq 2048 --batch 1 --nodes 4 --link nvlink");
  INFO(good.output);
  CHECK(good.status == 0);
  CHECK_THAT(good.output, Catch::Contains("ZeRO-3"));
  for (const char* bad : {"plan --params -1", "plan --params nan", "plan --link bogus --params 1e9", "plan"}) {
    const testing::RunResult r = testing::run_program("nnlab", bad);
    INFO(bad << ": " << r.output);
    CHECK(r.status != 0);
    CHECK_FALSE(r.output.empty());
  }
}
