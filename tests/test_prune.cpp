// Pruning (gpt/prune.h): magnitude pruning zeros exactly round(s n) of each matrix, the
// smallest |w|; 2:4 keeps the 2 largest of every 4; embeddings, LayerNorms and biases are
// untouched; masks re-apply; the fine-tune keeps the zeros and lowers the loss.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/model.h"
#include "gpt/prune.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace {

gpt::GPT tiny_model(uint64_t seed) {
  gpt::GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 20;  // rows of 20 and 80: 2:4 groups, and n not a round number
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, seed);
  return m;
}

bool is_prunable(const std::string& name) {
  for (const char* s : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const std::string suffix(s);
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  }
  return false;
}

// Biases are 0 at initialisation and LayerNorms 1/0: give every parameter a distinct random
// value, so "untouched" is a real check.
void randomize(gpt::GPT& m, uint64_t seed) {
  nn::Rng rng(seed);
  for (int64_t i = 0; i < m.num_params; ++i) m.params_memory.data()[i] = rng.normal(0.0f, 0.1f);
}

}  // namespace

TEST_CASE("prune: magnitude zeros exactly round(s n) of each matrix, the smallest |w|", "[prune]") {
  for (const double s : {0.0, 0.25, 0.5, 0.75, 0.9}) {
    INFO("sparsity " << s);
    gpt::GPT m = tiny_model(3);
    randomize(m, 4);
    // ties at the threshold: some equal magnitudes, of both signs
    for (int i = 0; i < 10; ++i) m.params_memory.data()[m.slices[4].offset + i] = (i % 2 ? 0.01f : -0.01f);
    const std::vector<float> before(m.params_memory.data(), m.params_memory.data() + m.num_params);
    const gpt::PruneMask mask = gpt::prune_model(m, gpt::PruneKind::magnitude, s);
    REQUIRE(static_cast<int64_t>(mask.keep.size()) == m.num_params);
    const float* w = m.params_memory.data();
    int64_t total = 0, zeros = 0;
    int matrices = 0;
    for (const gpt::ParamSlice& sl : m.slices) {
      INFO(sl.name);
      if (!is_prunable(sl.name)) {
        for (int64_t i = sl.offset; i < sl.offset + sl.numel; ++i) {
          REQUIRE(w[i] == before[static_cast<size_t>(i)]);
          REQUIRE(mask.keep[static_cast<size_t>(i)] == 1);
        }
        continue;
      }
      ++matrices;
      int64_t z = 0;
      float max_pruned = 0.0f, min_kept = INFINITY;
      for (int64_t i = sl.offset; i < sl.offset + sl.numel; ++i) {
        const float orig = std::abs(before[static_cast<size_t>(i)]);
        if (mask.keep[static_cast<size_t>(i)] == 0) {
          REQUIRE(w[i] == 0.0f);
          ++z;
          max_pruned = std::max(max_pruned, orig);
        } else {
          REQUIRE(w[i] == before[static_cast<size_t>(i)]);
          min_kept = std::min(min_kept, orig);
        }
      }
      CHECK(z == std::llround(s * static_cast<double>(sl.numel)));
      CHECK(max_pruned <= min_kept);
      total += sl.numel;
      zeros += z;
    }
    CHECK(matrices == 4 * 2);
    CHECK(gpt::prunable_sparsity(m) == Approx(static_cast<double>(zeros) / static_cast<double>(total)));
    CHECK(gpt::prunable_sparsity(m) == Approx(s).margin(0.01));
  }
}

TEST_CASE("prune: 2:4 keeps the 2 largest |w| of every group of 4", "[prune]") {
  gpt::GPT m = tiny_model(5);
  randomize(m, 6);
  CHECK_FALSE(gpt::is_two_four(m));
  const std::vector<float> before(m.params_memory.data(), m.params_memory.data() + m.num_params);
  const gpt::PruneMask mask = gpt::prune_model(m, gpt::PruneKind::two_four, 0.0);
  CHECK(gpt::is_two_four(m));
  CHECK(gpt::prunable_sparsity(m) == 0.5);
  const float* w = m.params_memory.data();
  for (const gpt::ParamSlice& sl : m.slices) {
    INFO(sl.name);
    if (!is_prunable(sl.name)) {
      for (int64_t i = sl.offset; i < sl.offset + sl.numel; ++i) REQUIRE(w[i] == before[static_cast<size_t>(i)]);
      continue;
    }
    for (int64_t g = sl.offset; g < sl.offset + sl.numel; g += 4) {
      int kept = 0;
      float min_kept = INFINITY, max_pruned = 0.0f;
      for (int64_t i = g; i < g + 4; ++i) {
        const float orig = std::abs(before[static_cast<size_t>(i)]);
        if (mask.keep[static_cast<size_t>(i)] != 0) {
          ++kept;
          REQUIRE(w[i] == before[static_cast<size_t>(i)]);
          min_kept = std::min(min_kept, orig);
        } else {
          REQUIRE(w[i] == 0.0f);
          max_pruned = std::max(max_pruned, orig);
        }
      }
      REQUIRE(kept == 2);
      REQUIRE(max_pruned <= min_kept);
    }
  }
  // one more nonzero in one group breaks the pattern
  for (const gpt::ParamSlice& sl : m.slices) {
    if (!is_prunable(sl.name)) continue;
    for (int64_t i = sl.offset; i < sl.offset + 4; ++i) m.params_memory.data()[i] = 0.5f;
    break;
  }
  CHECK_FALSE(gpt::is_two_four(m));
}

TEST_CASE("prune: apply_mask zeros what the mask drops, and the errors", "[prune]") {
  gpt::GPT m = tiny_model(7);
  randomize(m, 8);
  const gpt::PruneMask mask = gpt::prune_model(m, gpt::PruneKind::magnitude, 0.5);
  // what an optimizer step would do: every weight moves, pruned ones included
  for (int64_t i = 0; i < m.num_params; ++i) m.params_memory.data()[i] += 0.25f;
  CHECK(gpt::prunable_sparsity(m) < 0.01);
  gpt::apply_mask(m, mask);
  CHECK(gpt::prunable_sparsity(m) == Approx(0.5).margin(0.001));
  for (int64_t i = 0; i < m.num_params; ++i) {
    if (mask.keep[static_cast<size_t>(i)] == 0) REQUIRE(m.params_memory.data()[i] == 0.0f);
    if (mask.keep[static_cast<size_t>(i)] != 0) REQUIRE(m.params_memory.data()[i] != 0.0f);
  }
  CHECK_THAT(testing::error_of([&] { gpt::prune_model(m, gpt::PruneKind::magnitude, 1.0); }), Catch::Contains("[0, 1)"));
  CHECK_THAT(testing::error_of([&] { gpt::prune_model(m, gpt::PruneKind::magnitude, -0.1); }), Catch::Contains("[0, 1)"));
  gpt::PruneMask short_mask;
  short_mask.keep.assign(10, 1);
  CHECK_THAT(testing::error_of([&] { gpt::apply_mask(m, short_mask); }), Catch::Contains("another model"));
  m.params_memory.data()[m.slices[4].offset] = NAN;
  CHECK_THAT(testing::error_of([&] { gpt::prune_model(m, gpt::PruneKind::two_four, 0.0); }), Catch::Contains("nan"));
  CHECK(std::string(gpt::prune_kind_name(gpt::PruneKind::two_four)) == "2:4");
  CHECK(std::string(gpt::prune_kind_name(gpt::PruneKind::magnitude)) == "magnitude");
}

TEST_CASE("prune: finetune_pruned keeps the zeros and lowers the training loss", "[prune]") {
  // a text with a short repeating pattern: quickly learnable
  std::vector<int32_t> tokens;
  const int32_t pattern[] = {1, 4, 2, 8, 5, 7, 3};
  while (tokens.size() < 2000) {
    for (const int32_t t : pattern) tokens.push_back(t);
  }
  auto be = gpt::make_cpu_backend();
  for (const gpt::PruneKind kind : {gpt::PruneKind::magnitude, gpt::PruneKind::two_four}) {
    INFO(gpt::prune_kind_name(kind));
    gpt::GPT m = tiny_model(9);
    const gpt::PruneMask mask = gpt::prune_model(m, kind, 0.5);
    gpt::FinetuneOptions o;
    o.steps = 30;
    o.lr = 1e-2f;
    o.batch_size = 4;
    const std::vector<float> losses = gpt::finetune_pruned(m, *be, mask, tokens, o);
    REQUIRE(losses.size() == 30);
    double last = 0.0;
    for (size_t i = 25; i < 30; ++i) last += losses[i] / 5.0;
    INFO("first loss " << losses[0] << ", mean of the last 5 " << last);
    CHECK(last < losses[0] - 1.0);
    for (int64_t i = 0; i < m.num_params; ++i) {
      if (mask.keep[static_cast<size_t>(i)] == 0) REQUIRE(m.params_memory.data()[i] == 0.0f);
    }
    if (kind == gpt::PruneKind::two_four) CHECK(gpt::is_two_four(m));
    CHECK(gpt::prunable_sparsity(m) >= 0.5);
  }
  gpt::GPT m = tiny_model(9);
  gpt::PruneMask wrong;
  wrong.keep.assign(3, 1);
  CHECK_THAT(testing::error_of([&] { gpt::finetune_pruned(m, *be, wrong, tokens, {}); }), Catch::Contains("mask"));
}
