// Data parallelism at the level of one training step (gpt/model.h: StepOptions::comm; lesson 14):
// N ranks, each with its own micro-batches, take the same step as one process accumulating all
// N K micro-batches. The ranks here are threads (kernels/comm.h: run_ranks), so the test needs no
// MPI; tests/CMakeLists.txt runs the real trainer under mpirun.
//
// Equality: the ranks end with the same bits (every rank applies the same all-reduced gradient).
// Against one process: the same up to rounding. The single process sums a weight's gradient
// over micro-batches in one order (inside each product's accumulation), the ranks in another
// (each rank's own, then across ranks), and float addition is not associative; AdamW divides by
// sqrt(v), which makes those last-bit differences in a gradient into differences of a step's
// size where v is small. After 4 steps at lr 1e-3 the weights (of size ~0.02) agree to 1e-5:
// measured 4.3e-7 (2 ranks) and 1.2e-7 (3 ranks), 20x under the tolerance; ranks that skip the
// all-reduce are 1e-4 and more apart (the last test).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

#include "gpt/model.h"
#include "gpt/train.h"
#include "nn/check.h"
#include "kernels/comm.h"
#include "nn/rng.h"

namespace {

gpt::GPTConfig tiny() {
  gpt::GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 12;
  c.dropout = 0.1f;  // the dropout masks travel with the micro-batch index too
  return c;
}

constexpr int B = 3, T = 8, kSteps = 4;

// micro-batch `index` of the run: tokens and targets a pure function of the index
gpt::MicroBatch batch(int64_t index, std::vector<int32_t>& x, std::vector<int32_t>& y) {
  nn::Rng rng(1000 + static_cast<uint64_t>(index));
  x.resize(B * T);
  y.resize(B * T);
  for (auto& t : x) t = static_cast<int32_t>(rng.below(11));
  for (auto& t : y) t = static_cast<int32_t>(rng.below(11));
  return {x.data(), y.data(), 77 + static_cast<uint64_t>(index)};
}

// kSteps steps; step s uses micro-batches s*N*K + rank*K + k (k < K). Returns the weights.
// zero: ZeRO stage 1 (the optimizer sharded over comm); clip: StepOptions::grad_clip;
// moments: the full AdamW moments at the end (m then v; gathered from the shards with zero).
struct RunOptions {
  bool zero = false;
  float clip = 1.0f;
  gpt::FullMoments* moments = nullptr;
  int64_t* moment_floats = nullptr;  // the floats of m this rank holds
};
std::vector<float> run(int rank, int ranks, int K, kernels::comm::Comm* comm, kernels::comm::AllreduceFn allreduce,
                       std::vector<double>* losses = nullptr, const RunOptions& ro = {}) {
  omp_set_num_threads(1);
  gpt::GPT m = gpt::gpt_create(tiny());
  gpt::gpt_init_weights(m, 5);
  if (ro.zero) gpt::gpt_shard_optimizer(m, *comm);
  if (ro.moment_floats != nullptr) *ro.moment_floats = static_cast<int64_t>(m.m_memory.size());
  auto be = gpt::make_backend("cpu");
  gpt::StepOptions o;
  o.lr = 1e-3f;
  o.grad_clip = ro.clip;
  o.comm = comm;
  o.allreduce = allreduce;
  std::vector<std::vector<int32_t>> xs(static_cast<size_t>(K)), ys(static_cast<size_t>(K));
  for (int s = 0; s < kSteps; ++s) {
    std::vector<gpt::MicroBatch> micro;
    for (int k = 0; k < K; ++k)
      micro.push_back(batch(static_cast<int64_t>(s) * ranks * K + rank * K + k, xs[static_cast<size_t>(k)],
                            ys[static_cast<size_t>(k)]));
    const gpt::StepResult r = gpt::train_step(m, *be, micro, B, T, o);
    if (losses != nullptr) losses->push_back(r.loss);
  }
  if (ro.moments != nullptr) {
    std::unique_ptr<kernels::comm::Comm> local = kernels::comm::make_local_comm();  // (unsharded: not used)
    *ro.moments = gpt::gpt_gather_moments(m, comm != nullptr ? *comm : *local);
  }
  return std::vector<float>(m.params_memory.data(), m.params_memory.data() + m.params_memory.size());
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  return d;
}

}  // namespace

TEST_CASE("gpt data parallel: N ranks x K micro-batches take the step of one process with N K", "[gpt][comm]") {
  for (int ranks : {2, 3}) {
    for (const char* version : {"ring", "library"}) {
      const int K = 2;
      std::vector<double> ref_losses;
      const std::vector<float> ref = run(0, 1, ranks * K, nullptr, kernels::comm::allreduce_library, &ref_losses);
      std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
      std::vector<std::vector<double>> losses(static_cast<size_t>(ranks));
      const kernels::comm::AllreduceFn fn = kernels::comm::allreduce_version(version).fn;
      kernels::comm::run_ranks(ranks, [&](kernels::comm::Comm& c) {
        const size_t r = static_cast<size_t>(c.rank());
        got[r] = run(c.rank(), ranks, K, &c, fn, &losses[r]);
      });
      INFO(ranks << " ranks, all-reduce " << version << ": max |rank 0 - one process| " << max_diff(got[0], ref));
      for (int r = 1; r < ranks; ++r) REQUIRE(got[static_cast<size_t>(r)] == got[0]);  // bit for bit
      CHECK(max_diff(got[0], ref) <= 1e-5);
      CHECK((max_diff(got[0], ref) > 0.0 || ranks == 2));  // 3 ranks sum in another order somewhere
      for (int s = 0; s < kSteps; ++s) CHECK(losses[0][static_cast<size_t>(s)] == Approx(ref_losses[static_cast<size_t>(s)]).epsilon(1e-5));
    }
  }
}

TEST_CASE("gpt data parallel: the test can fail (ranks that skip the all-reduce drift apart)", "[gpt][comm]") {
  const int ranks = 2, K = 1;
  const std::vector<float> ref = run(0, 1, ranks * K, nullptr, kernels::comm::allreduce_library);
  std::vector<std::vector<float>> got(ranks);
  // the bug it stands for: each rank steps on its own gradient, never summed across the ranks
  static kernels::comm::AllreduceFn skipped = [](kernels::comm::Comm&, float*, int64_t) {};
  kernels::comm::run_ranks(ranks, [&](kernels::comm::Comm& c) {
    got[static_cast<size_t>(c.rank())] = run(c.rank(), ranks, K, &c, skipped);
  });
  INFO("max |rank 0 - reference| " << max_diff(got[0], ref) << ", |rank 0 - rank 1| " << max_diff(got[0], got[1]));
  CHECK(max_diff(got[0], got[1]) > 1e-4);
  CHECK(max_diff(got[0], ref) > 1e-4);
}

TEST_CASE("gpt data parallel: check_replicas passes equal weights and stops every rank on a diverged one",
          "[gpt][comm]") {
  for (bool diverge : {false, true}) {
    std::vector<std::string> errors(3);
    kernels::comm::run_ranks(3, [&](kernels::comm::Comm& c) {
      gpt::GPT m = gpt::gpt_create(tiny());
      gpt::gpt_init_weights(m, 5);
      if (diverge && c.rank() == 2) m.params_memory.data()[17] += 1e-7f;  // one weight, one ulp or so
      try {
        gpt::check_replicas(m, c, 40);
      } catch (const nn::Error& e) {
        errors[static_cast<size_t>(c.rank())] = e.what();
      }
    });
    for (const std::string& e : errors) {
      INFO(e);
      if (diverge) {
        CHECK_THAT(e, Catch::Contains("at step 40 the weights of rank 2 differ from rank 0's"));
      } else {
        CHECK(e.empty());
      }
    }
  }
}

// ZeRO stage 1: the ring's reduce-scatter, AdamW on the own shard, the all-gather of the weights.
// Without clipping every float goes through the same operations in the same order as plain
// data parallelism with the ring all-reduce (the reduce-scatter's sums are the ring's, AdamW is
// elementwise), so the weights and the gathered moments are the SAME bits. With clipping the
// norm is summed shard by shard then across ranks, not over the whole buffer at once: the clip
// factor differs in its last bits, and the weights by rounding (held to 1e-6; measured below).
TEST_CASE("gpt ZeRO-1: sharded AdamW takes the ring data-parallel step, with 1 / N of the moments per rank",
          "[gpt][comm][zero]") {
  for (int ranks : {2, 3}) {
    for (float clip : {0.0f, 0.05f}) {
      const int K = 2;
      std::vector<std::vector<float>> plain(static_cast<size_t>(ranks)), zero(static_cast<size_t>(ranks));
      std::vector<gpt::FullMoments> plain_m(static_cast<size_t>(ranks)), zero_m(static_cast<size_t>(ranks));
      std::vector<double> plain_loss, zero_loss, ignore;
      std::vector<int64_t> floats(static_cast<size_t>(ranks));
      kernels::comm::run_ranks(ranks, [&](kernels::comm::Comm& c) {
        const size_t r = static_cast<size_t>(c.rank());
        RunOptions po;
        po.clip = clip;
        po.moments = &plain_m[r];
        plain[r] = run(c.rank(), ranks, K, &c, kernels::comm::allreduce_ring, r == 0 ? &plain_loss : &ignore, po);
        RunOptions zo = po;
        zo.zero = true;
        zo.moments = &zero_m[r];
        zo.moment_floats = &floats[r];
        zero[r] = run(c.rank(), ranks, K, &c, kernels::comm::allreduce_ring, r == 0 ? &zero_loss : &ignore, zo);
      });
      INFO(ranks << " ranks, clip " << clip << ": max |ZeRO-1 - plain| " << max_diff(zero[0], plain[0]));
      for (int r = 1; r < ranks; ++r) REQUIRE(zero[static_cast<size_t>(r)] == zero[0]);
      const int64_t n = static_cast<int64_t>(plain[0].size());
      int64_t held = 0;
      for (int r = 0; r < ranks; ++r) {
        // each rank's moments: its chunk of the ring, n / N floats (one more for the first n % N)
        CHECK(floats[static_cast<size_t>(r)] == n / ranks + (((r + 1) % ranks) < n % ranks ? 1 : 0));
        held += floats[static_cast<size_t>(r)];
        CHECK(zero_m[static_cast<size_t>(r)].m == zero_m[0].m);
      }
      CHECK(held == n);  // every moment held once, by one rank
      if (clip == 0.0f) {
        CHECK(zero[0] == plain[0]);
        CHECK(zero_m[0].m == plain_m[0].m);
        CHECK(zero_m[0].v == plain_m[0].v);
      } else {
        CHECK(max_diff(zero[0], plain[0]) <= 1e-6);
        CHECK(max_diff(zero_m[0].v, plain_m[0].v) <= 1e-9);
      }
      CHECK(max_diff(zero[0], run(0, 1, K, nullptr, kernels::comm::allreduce_ring)) > 0.0);  // it trained
      for (size_t s = 0; s < plain_loss.size(); ++s) CHECK(zero_loss[s] == Approx(plain_loss[s]).epsilon(1e-6));
    }
  }
}

TEST_CASE("gpt ZeRO-1: a sharded model refuses the unsharded step and a second sharding", "[gpt][comm][zero]") {
  kernels::comm::run_ranks(2, [&](kernels::comm::Comm& c) {
    gpt::GPT m = gpt::gpt_create(tiny());
    gpt::gpt_shard_optimizer(m, c);
    CHECK(m.sharded);
    auto be = gpt::make_backend("cpu");
    CHECK_THROWS_WITH(gpt::gpt_adamw_step(m, *be, {}, 1e-3f), Catch::Contains("sharded"));
    CHECK_THROWS_WITH(gpt::gpt_shard_optimizer(m, c), Catch::Contains("already sharded"));
    CHECK_THROWS_WITH(gpt::gpt_move_to(m, gpt::host_memory()), Catch::Contains("sharded"));
  });
  // one rank: nothing to shard
  auto local = kernels::comm::make_local_comm();
  gpt::GPT m = gpt::gpt_create(tiny());
  gpt::gpt_shard_optimizer(m, *local);
  CHECK_FALSE(m.sharded);
  CHECK(static_cast<int64_t>(m.m_memory.size()) == m.num_params);
}
