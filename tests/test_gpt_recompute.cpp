// Activation recomputation (gpt/model.h: gpt_set_recompute; lesson 14). The forward keeps
// each block's output and one layer's activations; the backward runs each block's forward
// again from its stored input. The recomputed activations are the first forward's bits (the
// same kernels on the same inputs, the same dropout seed), so the gradients must EQUAL those
// of a run that stores every layer and runs the same unfused ops: compared bit for bit here,
// on both CPU backends, for GPT-2 with dropout, GPT-2 with flash attention and Llama with
// grouped-query attention. And the memory: what the model allocates is what
// memory_breakdown(..., recompute) says, and less than storing once L > 1.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace {

gpt::GPTConfig config_named(const std::string& which) {
  gpt::GPTConfig c;
  c.vocab_size = 13;
  c.block_size = 8;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 16;
  if (which == "gpt2 dropout") c.dropout = 0.2f;
  if (which == "gpt2 flash") c.attention = gpt::AttentionKind::flash;
  if (which == "llama gqa") {
    c.arch = gpt::Arch::llama;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.bias = false;
    c.tie_embeddings = false;
  }
  return c;
}

struct Batch {
  std::vector<int32_t> x, y;
};
Batch batch(int B, int T, uint64_t seed) {
  nn::Rng rng(seed);
  Batch b;
  b.x.resize(static_cast<size_t>(B) * T);
  b.y.resize(b.x.size());
  for (auto& t : b.x) t = static_cast<int32_t>(rng.below(13));
  for (auto& t : b.y) t = static_cast<int32_t>(rng.below(13));
  return b;
}

std::vector<float> host(const gpt::Array<float>& a) { return std::vector<float>(a.data(), a.data() + a.size()); }

}  // namespace

TEST_CASE("recompute: the gradients are the bits of a run that stores every layer", "[gpt][recompute]") {
  const std::string which = GENERATE(as<std::string>{}, "gpt2 dropout", "gpt2 flash", "llama gqa");
  const std::string backend = GENERATE(as<std::string>{}, "naive", "cpu");
  CAPTURE(which, backend);
  const gpt::GPTConfig c = config_named(which);
  auto be = gpt::make_backend(backend);
  gpt::GPT stored = gpt::gpt_create(c);
  gpt::gpt_init_weights(stored, 3);
  gpt::GPT recomputed = stored;
  gpt::gpt_set_recompute(recomputed, true);
  // two micro-batches accumulated, then a smaller (B, T): the slices are re-pointed, not re-made
  const int shapes[3][2] = {{2, 8}, {2, 8}, {1, 5}};
  for (int s = 0; s < 3; ++s) {
    const Batch b = batch(shapes[s][0], shapes[s][1], 40 + static_cast<uint64_t>(s));
    if (s == 2) {
      gpt::gpt_zero_grad(stored);
      gpt::gpt_zero_grad(recomputed);
    }
    for (gpt::GPT* m : {&stored, &recomputed}) {
      gpt::gpt_forward(*m, *be, b.x.data(), b.y.data(), shapes[s][0], shapes[s][1], /*train=*/true,
                       /*dropout_seed=*/9 + static_cast<uint64_t>(s), gpt::Fusion::unfused);
      gpt::gpt_backward(*m, *be, 0.5f);
    }
    REQUIRE(stored.mean_loss == recomputed.mean_loss);
    const std::vector<float> g0 = host(stored.grads_memory), g1 = host(recomputed.grads_memory);
    REQUIRE(g0.size() == g1.size());
    int64_t differing = 0;
    for (size_t i = 0; i < g0.size(); ++i) differing += std::memcmp(&g0[i], &g1[i], sizeof(float)) != 0;
    CHECK(differing == 0);
  }
  // the same logits too (the head reads LN_f of the last block's output, kept in block_outputs)
  const std::vector<float> l0(stored.acts.logits, stored.acts.logits + 5 * c.vocab_size);
  const std::vector<float> l1(recomputed.acts.logits, recomputed.acts.logits + 5 * c.vocab_size);
  CHECK(l0 == l1);
}

TEST_CASE("recompute: the model holds what memory_breakdown says, L B T C floats more than one layer", "[gpt][recompute]") {
  gpt::GPTConfig c = config_named("gpt2 dropout");
  c.n_layer = 4;
  auto be = gpt::make_backend("cpu");
  const int B = 2, T = 8;
  const Batch b = batch(B, T, 1);
  int64_t held[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    gpt::GPT m = gpt::gpt_create(c);
    gpt::gpt_init_weights(m, 1);
    gpt::gpt_set_recompute(m, r == 1);
    gpt::gpt_forward(m, *be, b.x.data(), b.y.data(), B, T, /*train=*/true, 1);
    held[r] = static_cast<int64_t>((m.acts_memory.size() + m.block_outputs.size()) * sizeof(float));
    CHECK(held[r] == gpt::memory_breakdown(c, B, T, be->keeps_preatt(), r == 1).activations);
  }
  // one layer's slice instead of four, plus the four block outputs
  const gpt::MemoryBreakdown one = gpt::memory_breakdown(c, B, T, true, true);
  const gpt::MemoryBreakdown all = gpt::memory_breakdown(c, B, T, true, false);
  CHECK(held[1] < held[0]);
  CHECK(one.activations < all.activations);
  gpt::GPTConfig c1 = c;
  c1.n_layer = 1;
  const int64_t per_layer = (all.activations - gpt::memory_breakdown(c1, B, T, true, false).activations) / 3;
  CHECK(all.activations - one.activations == 3 * per_layer - 4LL * B * T * c.n_embd * 4);
}

TEST_CASE("recompute: switching it on or off re-makes the activations, and the views are refused", "[gpt][recompute]") {
  const gpt::GPTConfig c = config_named("gpt2 flash");
  auto be = gpt::make_backend("cpu");
  const Batch b = batch(2, 8, 2);
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, 2);
  gpt::gpt_forward(m, *be, b.x.data(), b.y.data(), 2, 8);
  const float loss = m.mean_loss;
  CHECK_FALSE(gpt::activation_views(m).empty());
  gpt::gpt_set_recompute(m, true);
  gpt::gpt_forward(m, *be, b.x.data(), b.y.data(), 2, 8);
  CHECK(m.block_outputs.size() == static_cast<size_t>(c.n_layer) * 2 * 8 * c.n_embd);
  CHECK(std::fabs(m.mean_loss - loss) < 1e-6f);  // fused (first) against unfused: rounding only
  CHECK_THROWS_WITH(gpt::activation_views(m), Catch::Contains("recomputation"));
  gpt::gpt_set_recompute(m, false);
  gpt::gpt_forward(m, *be, b.x.data(), b.y.data(), 2, 8);
  CHECK(m.block_outputs.empty());
  CHECK(gpt::activation_views(m).size() > static_cast<size_t>(c.n_layer));
}
