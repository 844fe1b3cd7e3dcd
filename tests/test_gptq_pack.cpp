// GPTQ's int4 weights packed for the decoder as GPTQ chose them (gpt::gptq_pack_int4,
// lesson 15): unpacked, every block Linear is gptq_model's s * q bit for bit; with RTN it is
// pack_model's int4 byte for byte; the Decoder over it gives gpt_forward's logits on the GPTQ
// model; and re-packing the GPTQ'd floats with pack_model (the old route) does NOT keep them
// all, on a model where GPTQ leaves groups without a |q| = 7 (which is why the function exists).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gpt/backend.h"
#include "gpt/compress.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "kernels/decode.h"
#include "kernels/weight_format.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace {

// llama with its own head (lm_head): the decoder looks up wte in fp32 and multiplies by the
// int4 head, and gpt_forward on a model whose lm_head is that int4 head does the same (a tied
// head would be rounded for the lookup too; see gpt::dequantized_copy)
gpt::GPT gptq_tiny_model(uint64_t seed, bool llama = false) {
  gpt::GPTConfig c;
  if (llama) {
    c.arch = gpt::Arch::llama;
    c.bias = false;
    c.n_kv_head = 1;
    c.tie_embeddings = false;
  }
  c.vocab_size = 11;
  c.block_size = 12;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 64;  // int4 packs groups of 32 columns
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, seed);
  return m;
}

std::vector<int32_t> random_tokens(int n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.next_u32() % static_cast<uint32_t>(V));
  return t;
}

std::vector<float> unpacked(const kernels::PackedWeights& p) {
  std::vector<float> w(static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols));
  kernels::unpack_weights(p.view(), w.data());
  return w;
}

const float* linear_weight(const gpt::GPT& m, gpt::Linear which, int l) {
  const gpt::ParameterTensors p = gpt::layer_params(m.params, m.config, l);
  switch (which) {
    case gpt::Linear::qkv: return p.qkvw;
    case gpt::Linear::attproj: return p.attprojw;
    case gpt::Linear::fc: return p.fcw;
    case gpt::Linear::fcproj: return p.fcprojw;
  }
  return nullptr;
}

constexpr gpt::Linear kAll[] = {gpt::Linear::qkv, gpt::Linear::attproj, gpt::Linear::fc, gpt::Linear::fcproj};

}  // namespace

TEST_CASE("gptq pack: the packed int4 matrices are GPTQ's s q bit for bit, and the decoder runs them", "[compress][gptq]") {
  const bool llama = GENERATE(false, true);
  INFO((llama ? "llama, untied head" : "gpt2"));
  gpt::GPT model = gptq_tiny_model(5, llama);
  auto be = gpt::make_backend("cpu", "fp32");
  const std::vector<int32_t> tokens = random_tokens(2000, model.config.vocab_size, 9);
  const gpt::Calibration cal = gpt::calibrate(model, *be, tokens, 4, model.config.block_size, 4, 3, true);
  gpt::GptqOptions o;  // bits 4, group 32, GPTQ
  double secs = -1.0;
  const gpt::InferenceModel packed = gpt::gptq_pack_int4(model, cal, o, gpt::host_memory(), &secs);
  CHECK(secs >= 0.0);
  gpt::GPT ref = gpt::gpt_move_to(model, gpt::host_memory());
  gpt::gptq_model(ref, cal, o);
  // the old route: pack_model on GPTQ's dequantised floats re-derives the scales
  const gpt::InferenceModel repacked = gpt::pack_model(ref, kernels::WeightFormat::int4);
  int64_t repack_changed = 0;
  for (int l = 0; l < model.config.n_layer; ++l) {
    for (gpt::Linear which : kAll) {
      const kernels::PackedWeights& p = packed.linear(which, l);
      REQUIRE(p.format == kernels::WeightFormat::int4);
      const std::vector<float> w = unpacked(p), rw = unpacked(repacked.linear(which, l));
      const float* g = linear_weight(ref, which, l);
      for (size_t i = 0; i < w.size(); ++i) {
        REQUIRE(w[i] == g[i]);
        repack_changed += rw[i] != g[i] ? 1 : 0;
      }
    }
  }
  INFO("weights pack_model re-rounded: " << repack_changed);
  CHECK(repack_changed > 0);
  // the head and everything else: pack_model's int4
  {
    const gpt::InferenceModel rtn = gpt::pack_model(model, kernels::WeightFormat::int4);
    REQUIRE(packed.head.data.bytes() == rtn.head.data.bytes());
    CHECK(std::memcmp(packed.head.data.data(), rtn.head.data.data(), rtn.head.data.bytes()) == 0);
  }
  if (!llama) return;
  // the decoder over the packed model equals gpt_forward on GPTQ's floats with the head rounded as int4 stores it
  gpt::GPT expect = gpt::gpt_move_to(ref, gpt::host_memory());
  {
    const std::vector<float> head = unpacked(packed.head);
    std::copy(head.begin(), head.end(), const_cast<float*>(gpt::head_weight(expect.params)));
  }
  const int T = model.config.block_size, V = model.config.vocab_size;
  const std::vector<int32_t> in = random_tokens(T, V, 21);
  gpt::gpt_forward(expect, *be, in.data(), nullptr, 1, T);
  const std::vector<float> want(expect.acts.logits, expect.acts.logits + static_cast<size_t>(T) * V);
  gpt::Decoder dec(packed, *be);
  double worst = 0.0;
  for (int t = 0; t < T; ++t) {
    const std::vector<float>& got = dec.step(&in[static_cast<size_t>(t)], 1, 1);
    for (int v = 0; v < V; ++v)
      worst = std::max(worst, static_cast<double>(std::fabs(got[static_cast<size_t>(v)] - want[static_cast<size_t>(t) * V + v])));
  }
  INFO("largest logit difference " << worst);
  CHECK(worst < 1e-4);
}

TEST_CASE("gptq pack: round to nearest packs exactly as pack_model's int4", "[compress][gptq]") {
  gpt::GPT model = gptq_tiny_model(8);
  gpt::GptqOptions o;
  o.gptq = false;
  const gpt::InferenceModel a = gpt::gptq_pack_int4(model, gpt::Calibration{}, o);
  const gpt::InferenceModel b = gpt::pack_model(model, kernels::WeightFormat::int4);
  for (int l = 0; l < model.config.n_layer; ++l) {
    for (gpt::Linear which : kAll) {
      const kernels::PackedWeights &pa = a.linear(which, l), &pb = b.linear(which, l);
      REQUIRE(pa.data.bytes() == pb.data.bytes());
      CHECK(std::memcmp(pa.data.data(), pb.data.data(), pb.data.bytes()) == 0);
      REQUIRE(pa.scales.size() == pb.scales.size());
      CHECK(std::memcmp(pa.scales.data(), pb.scales.data(), pb.scales.bytes()) == 0);
    }
  }
  CHECK(a.weight_bytes_per_token() == b.weight_bytes_per_token());
}

TEST_CASE("gptq pack: other bit widths and groups are refused", "[compress][gptq]") {
  gpt::GPT model = gptq_tiny_model(2);
  gpt::GptqOptions o;
  o.gptq = false;
  o.bits = 3;
  CHECK_THROWS_AS(gpt::gptq_pack_int4(model, gpt::Calibration{}, o), nn::Error);
  o.bits = 4;
  o.group = 64;
  CHECK_THROWS_AS(gpt::gptq_pack_int4(model, gpt::Calibration{}, o), nn::Error);
}
