// Hugging Face model directories (gpt/hf.h), offline: our models written and read back
// (both archs, GQA, tied and untied heads) with identical parameters and logits; F16 and BF16
// tensors converted exactly; every refused config key, missing, unexpected or misshapen tensor
// and NaN named in its error; a sharded model; GPT-2's hub names without "transformer.";
// and the samplers of `nnlab generate` (top-k, top-p, eos). Against transformers itself:
// tests/python/test_hf_parity.py.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/hf.h"
#include "gpt/hf_cli.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "io/safetensors.h"
#include "io/text.h"
#include "nn/rng.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

namespace {

using Catch::Matchers::Contains;
using testing::error_of;
using testing::TempDir;

gpt::GPTConfig small_gpt2(bool bias = true) {
  gpt::GPTConfig c;
  c.vocab_size = 40;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 32;
  c.bias = bias;
  return c;
}

gpt::GPTConfig small_llama(bool tied, int n_kv_head = 2) {
  gpt::GPTConfig c = small_gpt2(false);
  c.arch = gpt::Arch::llama;
  c.n_kv_head = n_kv_head;
  c.ffn_hidden = 48;
  c.tie_embeddings = tied;
  c.norm_eps = 1e-6f;
  c.rope_theta = 500.0f;
  return c;
}

gpt::GPT random_model(const gpt::GPTConfig& c, uint64_t seed) {
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, seed);
  // make the norm weights and biases non-trivial too, so a mix-up of two of them shows
  nn::Rng rng(seed + 1);
  for (const gpt::ParamSlice& s : m.slices) {
    if (s.shape.size() == 1) {
      float* p = m.params_memory.data() + s.offset;
      for (int64_t i = 0; i < s.numel; ++i) p[i] += 0.1f * (rng.uniform() - 0.5f);
    }
  }
  return m;
}

std::vector<float> params_of(const gpt::GPT& m) {
  return {m.params_memory.data(), m.params_memory.data() + m.num_params};
}

std::vector<float> logits_of(gpt::GPT& m, const std::vector<int32_t>& ids) {
  auto be = gpt::make_backend("naive");
  const int T = static_cast<int>(ids.size());
  gpt::gpt_forward(m, *be, ids.data(), nullptr, 1, T);
  return {m.acts.logits, m.acts.logits + static_cast<int64_t>(T) * m.config.vocab_size};
}

const std::vector<int32_t> kIds = {1, 5, 9, 2, 39, 0, 17, 33, 8, 8, 3};

std::string read_all(const std::string& path) { return testing::read_text(path); }
void write_all(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}
// config.json with one "key": value replaced (save_hf_model writes one key a line)
void set_key(const std::string& dir, const std::string& key, const std::string& value) {
  const std::string path = dir + "/config.json";
  std::string text = read_all(path);
  const std::string needle = "\"" + key + "\": ";
  const size_t at = text.find(needle);
  if (at == std::string::npos) {
    const size_t brace = text.find('{');
    text.insert(brace + 1, "\n  " + needle + value + ",");
  } else {
    const size_t end = text.find_first_of(",\n", at);
    text.replace(at + needle.size(), end - at - needle.size(), value);
  }
  write_all(path, text);
}

// Rewrites model.safetensors through `edit` (name -> tensor), F32, no nnlab checksums needed.
template <class Edit>
void edit_tensors(const std::string& file, Edit edit, nn::NonFinite nf = nn::NonFinite::Refuse) {
  nn::SafetensorsFile f = nn::read_safetensors(file);
  std::map<std::string, nn::SafetensorsTensor> t = f.tensors;
  edit(t);
  std::vector<nn::TensorRef> refs;
  for (const auto& [name, x] : t) refs.push_back({name, x.shape, x.data.data()});
  nn::save_safetensors(file, refs, {{"format", "pt"}}, nf);
}

// A safetensors file by hand: one tensor of `dtype` with these raw little-endian bytes.
void write_raw(const std::string& path, const std::string& dtype, int64_t n, const std::vector<uint8_t>& data) {
  std::string header = "{\"w\":{\"dtype\":\"" + dtype + "\",\"shape\":[" + std::to_string(n) +
                       "],\"data_offsets\":[0," + std::to_string(data.size()) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i)));
  f << header;
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}
std::vector<uint8_t> le16(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> b;
  for (uint16_t x : v) {
    b.push_back(static_cast<uint8_t>(x & 0xFF));
    b.push_back(static_cast<uint8_t>(x >> 8));
  }
  return b;
}

}  // namespace

// ---- round trips ---------------------------------------------------------------------------------

TEST_CASE("hf: our models written and read back: identical parameters and logits", "[hf]") {
  TempDir tmp("hf");
  struct Case {
    const char* what;
    gpt::GPTConfig c;
    const char* arch;
  };
  const Case cases[] = {{"gpt2", small_gpt2(), "GPT2LMHeadModel"},
                        {"llama GQA 4/2 tied", small_llama(true), "LlamaForCausalLM"},
                        {"llama GQA 4/2 untied", small_llama(false), "LlamaForCausalLM"},
                        {"llama multi-query untied", small_llama(false, 1), "LlamaForCausalLM"}};
  for (const Case& k : cases) {
    INFO(k.what);
    gpt::GPT m = random_model(k.c, 7);
    const std::string dir = tmp.file(k.what);
    gpt::save_hf_model(m, dir);
    REQUIRE(std::filesystem::exists(dir + "/generation_config.json"));
    REQUIRE_FALSE(std::filesystem::exists(dir + "/tokenizer.json"));
    gpt::HfModel h = gpt::load_hf_model(dir);
    REQUIRE(h.architecture == k.arch);
    REQUIRE(h.dtype == "F32");
    REQUIRE(h.model.grads_memory.empty());  // inference only: no gradients, no AdamW moments
    REQUIRE(h.model.m_memory.empty());
    const gpt::GPTConfig& c = h.model.config;
    REQUIRE(c.arch == k.c.arch);
    REQUIRE(c.n_layer == k.c.n_layer);
    REQUIRE(c.n_embd == k.c.n_embd);
    REQUIRE(gpt::kv_heads(c) == gpt::kv_heads(k.c));
    REQUIRE(gpt::mlp_hidden(c) == gpt::mlp_hidden(k.c));
    REQUIRE(c.tie_embeddings == k.c.tie_embeddings);
    REQUIRE(c.norm_eps == k.c.norm_eps);
    REQUIRE(c.rope_theta == k.c.rope_theta);
    REQUIRE(c.block_size == k.c.block_size);
    REQUIRE(params_of(h.model) == params_of(m));
    REQUIRE(logits_of(h.model, kIds) == logits_of(m, kIds));
    // with training state: ready to train
    gpt::HfModel t = gpt::load_hf_model(dir, true);
    REQUIRE(t.model.grads_memory.size() == static_cast<size_t>(t.model.num_params));
    REQUIRE(params_of(t.model) == params_of(m));
  }
}

TEST_CASE("hf: a gpt2 model without biases is written with zero biases: the same logits", "[hf]") {
  TempDir tmp("hf");
  gpt::GPT m = random_model(small_gpt2(false), 3);
  gpt::save_hf_model(m, tmp.file("m"));
  gpt::HfModel h = gpt::load_hf_model(tmp.file("m"));
  REQUIRE(h.model.config.bias);
  for (const gpt::ParamSlice& s : h.model.slices) {
    if (s.spec->needs != gpt::Needs::bias) continue;
    const float* p = h.model.params_memory.data() + s.offset;
    REQUIRE(std::all_of(p, p + s.numel, [](float x) { return x == 0.0f; }));
  }
  const std::vector<float> a = logits_of(m, kIds), b = logits_of(h.model, kIds);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(std::abs(a[i] - b[i]) <= 1e-6f * (1.0f + std::abs(a[i])));
}

TEST_CASE("hf: a tokenizer is written beside the model and read back", "[hf]") {
  TempDir tmp("hf");
  const nn::BpeTokenizer tok = nn::BpeTokenizer::train("hello hello world, hello there", 260, {"<|endoftext|>"});
  gpt::GPTConfig c = small_gpt2();
  c.vocab_size = tok.vocab_size();
  const gpt::GPT m = random_model(c, 5);
  gpt::save_hf_model(m, tmp.file("m"), &tok);
  const gpt::HfModel h = gpt::load_hf_model(tmp.file("m"));
  REQUIRE(h.tokenizer.has_value());
  REQUIRE(h.tokenizer->encode("hello world") == tok.encode("hello world"));
  REQUIRE(h.eos_id == tok.special_ids().front());
  // a tokenizer of another size than the model's vocabulary is refused
  gpt::GPT other = random_model(small_gpt2(), 5);
  REQUIRE_THAT(error_of([&] { gpt::save_hf_model(other, tmp.file("bad"), &tok); }), Contains("the tokenizer has"));
}

TEST_CASE("hf: generation_config.json gives eos, bos and the sampling defaults", "[hf]") {
  TempDir tmp("hf");
  const std::string dir = tmp.file("m");
  gpt::save_hf_model(random_model(small_gpt2(), 2), dir);
  gpt::HfModel h = gpt::load_hf_model(dir);
  REQUIRE(h.eos_id == -1);  // a character model: none
  REQUIRE(h.temperature == 1.0f);
  REQUIRE(h.top_k == 0);
  write_all(dir + "/generation_config.json",
            R"({"bos_token_id": 1, "eos_token_id": [7, 8], "top_k": 20, "top_p": 0.9, "temperature": 0.7})");
  h = gpt::load_hf_model(dir);
  REQUIRE(h.bos_id == 1);
  REQUIRE(h.eos_id == 7);
  REQUIRE(h.top_k == 20);
  REQUIRE(h.top_p == 0.9f);
  REQUIRE(h.temperature == 0.7f);
  write_all(dir + "/generation_config.json", R"({"eos_token_id": 99, "do_sample": false, "temperature": 0.7})");
  h = gpt::load_hf_model(dir);
  REQUIRE(h.eos_id == -1);  // outside the vocabulary of 40: ignored
  REQUIRE(h.temperature == 0.0f);
}

// ---- F16 and BF16 -------------------------------------------------------------------------------

TEST_CASE("hf: F16 and BF16 tensors convert exactly to float", "[hf][checkpoint]") {
  TempDir tmp("hf");
  const std::string path = tmp.file("h.safetensors");
  // what gpt/hf.h reads Hugging Face weights with (nnlab's own checkpoints refuse F16/BF16:
  // tests/test_checkpoint.cpp)
  nn::LoadOptions half;
  half.half_precision = true;
  // half: 1, -2, 1/3 rounded, 65504 (largest), 2^-14 (smallest normal), 2^-24 (smallest
  // subnormal), 1023 * 2^-24 (largest subnormal), -0
  write_raw(path, "F16", 8, le16({0x3C00, 0xC000, 0x3555, 0x7BFF, 0x0400, 0x0001, 0x03FF, 0x8000}));
  nn::SafetensorsFile f = nn::read_safetensors(path, half);
  REQUIRE(f.tensors.at("w").dtype == "F16");
  const std::vector<float> want_h = {1.0f, -2.0f, 0.333251953125f, 65504.0f, std::ldexp(1.0f, -14),
                                     std::ldexp(1.0f, -24), 1023.0f * std::ldexp(1.0f, -24), -0.0f};
  REQUIRE(f.tensors.at("w").data == want_h);
  REQUIRE(std::signbit(f.tensors.at("w").data[7]));
  // bfloat16: 1, -3, 2^-133 (a float subnormal), the largest bf16, 1 + 2^-7
  write_raw(path, "BF16", 5, le16({0x3F80, 0xC040, 0x0001, 0x7F7F, 0x3F81}));
  f = nn::read_safetensors(path, half);
  REQUIRE(f.tensors.at("w").dtype == "BF16");
  const std::vector<float> want_b = {1.0f, -3.0f, std::ldexp(1.0f, -133), 3.3895313892515355e38f, 1.0078125f};
  REQUIRE(f.tensors.at("w").data == want_b);
  // every one of the 65536 halves against the formula (sign) 2^(e-15) (1 + m/1024), or the
  // subnormal (sign) 2^-14 m/1024; inf and NaN are refused by name
  for (uint32_t bits = 0; bits < 65536; bits += 1) {
    const uint32_t e = (bits >> 10) & 0x1F, mant = bits & 0x3FF;
    if (e == 0x1F) continue;
    const double mag = e == 0 ? std::ldexp(mant / 1024.0, -14) : std::ldexp(1.0 + mant / 1024.0, static_cast<int>(e) - 15);
    const float want = static_cast<float>((bits & 0x8000) ? -mag : mag);
    if (bits % 97 != 0 && e != 0 && e != 30 && e != 1) continue;  // a sample, plus every edge exponent
    write_raw(path, "F16", 1, le16({static_cast<uint16_t>(bits)}));
    const float got = nn::read_safetensors(path, half).tensors.at("w").data[0];
    INFO("half 0x" << std::hex << bits);
    REQUIRE(got == want);
  }
  write_raw(path, "F16", 2, le16({0x3C00, 0x7C00}));
  REQUIRE_THAT(error_of([&] { nn::read_safetensors(path, half); }), Contains("tensor 'w' holds inf"));
  write_raw(path, "BF16", 2, le16({0x3C00, 0x7FC0}));
  REQUIRE_THAT(error_of([&] { nn::read_safetensors(path, half); }), Contains("tensor 'w' holds nan"));
}

TEST_CASE("hf: a model stored in F16 loads as its float values and says so", "[hf]") {
  TempDir tmp("hf");
  gpt::GPT m = random_model(small_llama(false), 9);
  const std::string dir = tmp.file("m");
  gpt::save_hf_model(m, dir);
  // rewrite every tensor as F16 by hand; the model then holds the halves' values
  nn::SafetensorsFile f = nn::read_safetensors(dir + "/model.safetensors");
  std::string header = "{";
  std::vector<uint8_t> data;
  std::map<std::string, std::vector<float>> rounded;
  for (const auto& [name, t] : f.tensors) {
    const size_t begin = data.size();
    for (float x : t.data) {
      // round to a half through the bit pattern of a value all these weights fit (|x| < 2,
      // no subnormals needed at the test's tolerance): keep 10 mantissa bits, truncating
      uint32_t u;
      std::memcpy(&u, &x, 4);
      const uint32_t sign = (u >> 16) & 0x8000u;
      const int e = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
      uint16_t h = static_cast<uint16_t>(sign);
      if (e > 0) h = static_cast<uint16_t>(sign | (static_cast<uint32_t>(e) << 10) | ((u >> 13) & 0x3FFu));
      data.push_back(static_cast<uint8_t>(h & 0xFF));
      data.push_back(static_cast<uint8_t>(h >> 8));
    }
    header += std::string(header.size() > 1 ? "," : "") + "\"" + name + "\":{\"dtype\":\"F16\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d > 0) header += ",";
      header += std::to_string(t.shape[d]);
    }
    header += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  {
    std::ofstream out(dir + "/model.safetensors", std::ios::binary | std::ios::trunc);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i)));
    out << header;
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }
  const gpt::HfModel h = gpt::load_hf_model(dir);
  REQUIRE(h.dtype == "F16");
  const std::vector<float> a = params_of(m), b = params_of(h.model);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(std::abs(a[i] - b[i]) <= std::abs(a[i]) * (1.0f / 1024) + 6.2e-5f);
}

// ---- the errors ---------------------------------------------------------------------------------

TEST_CASE("hf: every unsupported config key is an error naming it", "[hf]") {
  TempDir tmp("hf");
  const std::string g2 = tmp.file("gpt2"), ll = tmp.file("llama");
  gpt::save_hf_model(random_model(small_gpt2(), 1), g2);
  gpt::save_hf_model(random_model(small_llama(true), 1), ll);
  const std::string g2_cfg = read_all(g2 + "/config.json"), ll_cfg = read_all(ll + "/config.json");
  struct Bad {
    bool llama;
    const char* key;
    const char* value;
  };
  const Bad bad[] = {
      {true, "rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}"},
      {true, "attention_bias", "true"},
      {true, "mlp_bias", "true"},
      {true, "hidden_act", "\"gelu\""},
      {true, "head_dim", "16"},
      {true, "rope_interleaved", "true"},
      {false, "activation_function", "\"relu\""},
      {false, "scale_attn_by_inverse_layer_idx", "true"},
      {false, "reorder_and_upcast_attn", "true"},
      {false, "layer_norm_epsilon", "1e-06"},
      {false, "n_inner", "100"},
      {false, "scale_attn_weights", "false"},
      {false, "add_cross_attention", "true"},
      {false, "tie_word_embeddings", "false"},
  };
  for (const Bad& b : bad) {
    const std::string dir = b.llama ? ll : g2;
    INFO(b.key << " = " << b.value);
    write_all(dir + "/config.json", b.llama ? ll_cfg : g2_cfg);
    REQUIRE_NOTHROW(gpt::load_hf_model(dir));
    set_key(dir, b.key, b.value);
    REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }),
                 Contains(dir + "/config.json") && Contains(std::string("'") + b.key + "'") && Contains("not supported"));
  }
  // gelu_pytorch_tanh is the same function as gelu_new: accepted
  write_all(g2 + "/config.json", g2_cfg);
  set_key(g2, "activation_function", "\"gelu_pytorch_tanh\"");
  REQUIRE_NOTHROW(gpt::load_hf_model(g2));
}

TEST_CASE("hf: an unknown architecture, a missing key, bad JSON are errors naming them", "[hf]") {
  TempDir tmp("hf");
  const std::string dir = tmp.file("m");
  gpt::save_hf_model(random_model(small_llama(true), 1), dir);
  const std::string cfg = read_all(dir + "/config.json");
  std::string mistral = cfg;
  mistral.replace(mistral.find("\"LlamaForCausalLM\""), 18, "\"MistralForCausalLM\"");
  write_all(dir + "/config.json", mistral);
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }),
               Contains("unknown architecture 'MistralForCausalLM'") && Contains("LlamaForCausalLM"));
  std::string no_layers = cfg;
  no_layers.replace(no_layers.find("\"num_hidden_layers\""), std::string("\"num_hidden_layers\": 2,").size(), "");
  write_all(dir + "/config.json", no_layers);
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }), Contains("has no 'num_hidden_layers'"));
  write_all(dir + "/config.json", "{\"architectures\": [");
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }), Contains("config.json is not valid JSON"));
  std::filesystem::remove(dir + "/config.json");
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }), Contains("has no config.json"));
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(tmp.file("nowhere")); }), Contains("does not exist"));
}

TEST_CASE("hf: a missing, unexpected or misshapen tensor, and a NaN, are errors naming the tensor", "[hf]") {
  TempDir tmp("hf");
  const std::string dir = tmp.file("m");
  gpt::save_hf_model(random_model(small_llama(false), 1), dir);
  const std::string st = dir + "/model.safetensors";
  const std::string good = read_all(st);
  using Map = std::map<std::string, nn::SafetensorsTensor>;

  edit_tensors(st, [](Map& t) { t.erase("model.layers.1.mlp.up_proj.weight"); });
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }),
               Contains("tensor 'model.layers.1.mlp.up_proj.weight' is missing"));
  write_all(st, good);
  edit_tensors(st, [](Map& t) { t["model.layers.0.self_attn.q_norm.weight"] = {{32}, std::vector<float>(32, 1.0f)}; });
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }),
               Contains("unexpected tensor 'model.layers.0.self_attn.q_norm.weight'"));
  write_all(st, good);
  edit_tensors(st, [](Map& t) { t["model.layers.0.self_attn.k_proj.weight"] = {{32, 32}, std::vector<float>(1024, 0.0f)}; });
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }),
               Contains("tensor 'model.layers.0.self_attn.k_proj.weight' has shape [32, 32], but config.json says [16, 32]"));
  write_all(st, good);
  set_key(dir, "intermediate_size", "64");
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }),
               Contains("tensor 'model.layers.0.mlp.gate_proj.weight' has shape [48, 32], but config.json says [64, 32]"));
  set_key(dir, "intermediate_size", "48");
  REQUIRE_NOTHROW(gpt::load_hf_model(dir));
  edit_tensors(
      st, [](Map& t) { t["model.norm.weight"].data[3] = std::numeric_limits<float>::quiet_NaN(); }, nn::NonFinite::Allow);
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }), Contains("tensor 'model.norm.weight' holds nan"));
  write_all(st, good);
  // a tied model's file may list lm_head (transformers ties it on load): ignored
  gpt::save_hf_model(random_model(small_llama(true), 1), dir);
  edit_tensors(st, [](Map& t) { t["lm_head.weight"] = t.at("model.embed_tokens.weight"); });
  REQUIRE_NOTHROW(gpt::load_hf_model(dir));
}

TEST_CASE("hf: GPT-2 as the hub stores it: no transformer. prefix, the mask buffers", "[hf]") {
  TempDir tmp("hf");
  gpt::GPT m = random_model(small_gpt2(), 4);
  const std::string dir = tmp.file("m");
  gpt::save_hf_model(m, dir);
  using Map = std::map<std::string, nn::SafetensorsTensor>;
  edit_tensors(dir + "/model.safetensors", [](Map& t) {
    Map out;
    for (auto& [name, x] : t) out[name.substr(std::string("transformer.").size())] = x;
    for (int l = 0; l < 2; ++l) {
      out["h." + std::to_string(l) + ".attn.bias"] = {{1, 1, 16, 16}, std::vector<float>(256, 1.0f)};
      out["h." + std::to_string(l) + ".attn.masked_bias"] = {{}, {-1e4f}};
    }
    t = out;
  });
  gpt::HfModel h = gpt::load_hf_model(dir);
  REQUIRE(params_of(h.model) == params_of(m));
}

TEST_CASE("hf: a sharded model (index + shards) loads as the single file does", "[hf]") {
  TempDir tmp("hf");
  gpt::GPT m = random_model(small_llama(false), 6);
  const std::string dir = tmp.file("m");
  gpt::save_hf_model(m, dir);
  const nn::SafetensorsFile f = nn::read_safetensors(dir + "/model.safetensors");
  std::vector<nn::TensorRef> a, b;
  std::string index = "{\"metadata\": {}, \"weight_map\": {";
  bool first = true;
  for (const auto& [name, t] : f.tensors) {
    const bool in_a = name.find("layers.1") == std::string::npos;
    (in_a ? a : b).push_back({name, t.shape, t.data.data()});
    index += std::string(first ? "" : ", ") + "\"" + name + "\": \"" + (in_a ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors") + "\"";
    first = false;
  }
  index += "}}";
  nn::save_safetensors(dir + "/model-00001-of-00002.safetensors", a, {{"format", "pt"}});
  nn::save_safetensors(dir + "/model-00002-of-00002.safetensors", b, {{"format", "pt"}});
  std::filesystem::remove(dir + "/model.safetensors");
  write_all(dir + "/model.safetensors.index.json", index);
  gpt::HfModel h = gpt::load_hf_model(dir);
  REQUIRE(params_of(h.model) == params_of(m));

  // the index and the shards must agree, and a shard is a file of the directory
  std::string wrong = index;
  const std::string key = "\"model.norm.weight\": \"model-00001-of-00002.safetensors\"";
  REQUIRE(wrong.find(key) != std::string::npos);
  wrong.replace(wrong.find(key), key.size(), "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"");
  write_all(dir + "/model.safetensors.index.json", wrong);
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }), Contains("holds tensor 'model.norm.weight'"));
  std::string escape = index;
  escape.replace(escape.find(key), key.size(), "\"model.norm.weight\": \"../model-00001-of-00002.safetensors\"");
  write_all(dir + "/model.safetensors.index.json", escape);
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }), Contains("is not a file name in"));
  std::filesystem::remove(dir + "/model.safetensors.index.json");
  REQUIRE_THAT(error_of([&] { gpt::load_hf_model(dir); }), Contains("has neither model.safetensors nor"));
}

// ---- sampling -----------------------------------------------------------------------------------

TEST_CASE("hf: top-k and top-p sampling: greedy limits, never outside the kept set, defaults unchanged", "[hf][infer]") {
  nn::Rng rng(21);
  const int V = 50;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(V);
    for (float& x : logits) x = 4.0f * (rng.uniform() - 0.5f);
    const int32_t greedy = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    std::vector<int32_t> order(V);
    for (int i = 0; i < V; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    const std::set<int32_t> top5(order.begin(), order.begin() + 5);
    for (int d = 0; d < 50; ++d) {
      const float u = rng.uniform();
      gpt::GenerateOptions o;
      o.temperature = 1.0f;
      // the defaults: exactly nn::sample_from_logits
      REQUIRE(gpt::sample_token(logits.data(), V, o, u) == nn::sample_from_logits(logits.data(), V, 1.0f, u));
      o.top_k = 1;
      REQUIRE(gpt::sample_token(logits.data(), V, o, u) == greedy);
      o.top_k = 5;
      REQUIRE(top5.count(gpt::sample_token(logits.data(), V, o, u)) == 1);
      o.top_k = 0;
      o.top_p = 1e-6f;
      REQUIRE(gpt::sample_token(logits.data(), V, o, u) == greedy);
      o.temperature = 0.0f;  // greedy whatever top_p says
      o.top_p = 0.5f;
      REQUIRE(gpt::sample_token(logits.data(), V, o, u) == greedy);
    }
    // top_p: every draw is in the nucleus (the fewest most likely tokens reaching p)
    double sum = 0.0;
    for (float x : logits) sum += std::exp(static_cast<double>(x));
    std::set<int32_t> nucleus;
    double cum = 0.0;
    for (int32_t id : order) {
      nucleus.insert(id);
      cum += std::exp(static_cast<double>(logits[id])) / sum;
      if (cum >= 0.7) break;
    }
    std::set<int32_t> drawn;
    gpt::GenerateOptions o;
    o.temperature = 1.0f;
    o.top_p = 0.7f;
    for (int d = 0; d < 400; ++d) drawn.insert(gpt::sample_token(logits.data(), V, o, rng.uniform()));
    for (int32_t id : drawn) REQUIRE(nucleus.count(id) == 1);
    REQUIRE(drawn.size() > 1);  // it does sample, not collapse to greedy
  }
  gpt::GenerateOptions bad;
  bad.top_p = 0.0f;
  std::vector<float> l(4, 0.0f);
  REQUIRE_THAT(error_of([&] { gpt::sample_token(l.data(), 4, bad, 0.5f); }), Contains("top_p must be in (0, 1]"));
}

TEST_CASE("hf: window_perplexity scores each token once, from the tokens before it in its window", "[hf][infer]") {
  gpt::GPTConfig c = small_llama(false);
  gpt::GPT m = random_model(c, 12);
  auto be = gpt::make_backend("cpu");
  auto naive = gpt::make_backend("naive");
  const gpt::InferenceModel packed = gpt::pack_model(m, kernels::WeightFormat::f32, be->memory());
  gpt::Decoder dec(packed, *be);
  nn::Rng rng(4);
  std::vector<int32_t> ids(45);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.uniform() * 39.99f);
  for (const auto& [ctx, stride] : {std::pair{16, 16}, std::pair{16, 5}, std::pair{16, 1}, std::pair{9, 4}}) {
    INFO("context " << ctx << ", stride " << stride);
    const gpt::PerplexityResult r = gpt::window_perplexity(dec, ids, ctx, stride);
    // the same by hand: token t's window is the first that ends after it and after the tokens
    // earlier windows scored; its loss from a full forward over the window up to t
    double nll = 0.0;
    int64_t scored = 0;
    int prev_end = 1;
    for (int begin = 0; prev_end < static_cast<int>(ids.size()); begin += stride) {
      const int end = std::min(begin + ctx, static_cast<int>(ids.size()));
      for (int t = std::max(prev_end, begin + 1); t < end; ++t) {
        const std::vector<int32_t> win(ids.begin() + begin, ids.begin() + t + 1);
        gpt::gpt_forward(m, *naive, win.data(), win.data() + 1, 1, static_cast<int>(win.size()) - 1);
        // mean over the window's targets: the last one is token t; the difference of two sums
        const double all = static_cast<double>(m.mean_loss) * static_cast<double>(win.size() - 1);
        double before = 0.0;
        if (win.size() > 2) {
          gpt::gpt_forward(m, *naive, win.data(), win.data() + 1, 1, static_cast<int>(win.size()) - 2);
          before = static_cast<double>(m.mean_loss) * static_cast<double>(win.size() - 2);
        }
        nll += all - before;
        ++scored;
      }
      prev_end = std::max(prev_end, end);
    }
    REQUIRE(r.scored == scored);
    REQUIRE(r.bytes == scored);
    REQUIRE(r.mean_nll == Approx(nll / static_cast<double>(scored)).epsilon(1e-5));
    REQUIRE(r.perplexity == Approx(std::exp(r.mean_nll)));
    REQUIRE(r.bits_per_byte == Approx(r.mean_nll / std::log(2.0)));
  }
  // stride 1 with a full context scores every token but the first
  REQUIRE(gpt::window_perplexity(dec, ids, 16, 1).scored == static_cast<int64_t>(ids.size()) - 1);
  REQUIRE_THAT(error_of([&] { gpt::window_perplexity(dec, ids, 17, 1); }), Contains("context 17"));
}

TEST_CASE("hf: generation stops after the eos id", "[hf][infer]") {
  gpt::GPT m = random_model(small_llama(true), 8);
  auto be = gpt::make_backend("cpu");
  const gpt::InferenceModel packed = gpt::pack_model(m, kernels::WeightFormat::f32, be->memory());
  gpt::Decoder dec(packed, *be);
  gpt::GenerateOptions o;
  o.tokens = 30;
  o.temperature = 1.0f;
  const std::vector<int32_t> all = gpt::generate(dec, {1, 2, 3}, o);
  REQUIRE(all.size() == 30);
  o.eos_id = all[4];
  const size_t first = static_cast<size_t>(std::find(all.begin(), all.end(), o.eos_id) - all.begin());
  gpt::GenerateStats st;
  const std::vector<int32_t> cut = gpt::generate(dec, {1, 2, 3}, o, &st);
  REQUIRE(cut == std::vector<int32_t>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(first) + 1));
  REQUIRE(st.generated == static_cast<int>(cut.size()));
}

// ---- the commands -------------------------------------------------------------------------------

TEST_CASE("hf: nnlab export-hf, generate and perplexity on a checkpoint and its export", "[hf][cli]") {
  TempDir tmp("hf-cli");
  const std::string text = "to be or not to be, that is the question; to sleep, perchance to dream";
  const nn::CharVocab vocab = nn::build_vocab(text);
  for (const bool llama : {false, true}) {
    INFO((llama ? "llama" : "gpt2"));
    gpt::GPTConfig c = llama ? small_llama(false) : small_gpt2();
    c.vocab_size = vocab.size();
    c.block_size = 32;
    gpt::GPT m = random_model(c, 13);
    const std::string ckpt = tmp.file(llama ? "l.safetensors" : "g.safetensors");
    gpt::save_checkpoint(ckpt, m, vocab, gpt::TrainState{});
    const std::string dir = tmp.file(llama ? "l_hf" : "g_hf");
    auto r = testing::run_program("nnlab", "export-hf --checkpoint " + ckpt + " --out " + dir);
    INFO(r.output);
    REQUIRE(r.status == 0);
    REQUIRE_THAT(r.output, Contains("no tokenizer.json"));
    gpt::HfModel h = gpt::load_hf_model(dir);
    REQUIRE(params_of(h.model) == params_of(m));

    // generate: the same draws as gpt::generate on the model (ids), from the checkpoint and the export
    const std::vector<int32_t> prompt = vocab.encode("to be");
    const gpt::InferenceModel packed = gpt::pack_model(m, kernels::WeightFormat::f32);
    auto be = gpt::make_backend("cpu");
    gpt::Decoder dec(packed, *be);
    gpt::GenerateOptions o;
    o.tokens = 12;
    o.temperature = 0.9f;
    o.top_k = 5;
    o.seed = 3;
    const std::vector<int32_t> want = gpt::generate(dec, prompt, o);
    std::string ids;
    for (int32_t id : want) {
      if (!ids.empty()) ids += " ";
      ids += std::to_string(id);
    }
    for (const std::string& model : {ckpt, dir}) {
      r = testing::run_program("nnlab", "generate --model " + model + " --prompt-ids \"" +
                                            std::to_string(prompt[0]) + " " + std::to_string(prompt[1]) + " " +
                                            std::to_string(prompt[2]) + " " + std::to_string(prompt[3]) + " " +
                                            std::to_string(prompt[4]) + "\" --tokens 12 --temperature 0.9 --top-k 5 "
                                            "--seed 3 --ids");
      INFO(r.output);
      REQUIRE(r.status == 0);
      REQUIRE_THAT(r.output, Contains(ids + "\n"));
      REQUIRE_THAT(r.output, Contains("tokens/s"));
    }
    // greedy: the KV cache and a full forward per token (--no-cache) give the same ids
    const std::string greedy = "generate --model " + dir + " --prompt-ids \"3 1 4 1 5\" --tokens 10 --temperature 0 --ids";
    const auto cached = testing::run_program("nnlab", greedy);
    const auto uncached = testing::run_program("nnlab", greedy + " --no-cache");
    REQUIRE(cached.status == 0);
    REQUIRE(uncached.status == 0);
    // (stdout and stderr together: the ids are the line of digits and spaces)
    const auto ids_line = [](const std::string& out) {
      std::istringstream in(out);
      for (std::string l; std::getline(in, l);) {
        if (!l.empty() && l.find_first_not_of("0123456789 ") == std::string::npos) return l;
      }
      return std::string("<no ids>");
    };
    REQUIRE(ids_line(cached.output).size() >= 19);  // 10 ids
    REQUIRE(ids_line(cached.output) == ids_line(uncached.output));
    REQUIRE_THAT(uncached.output, Contains("no cache"));
    // text through the checkpoint's character vocabulary
    r = testing::run_program("nnlab", "generate --model " + ckpt + " --prompt \"to be\" --tokens 12 --temperature 0.9 "
                                      "--top-k 5 --seed 3");
    REQUIRE(r.status == 0);
    REQUIRE_THAT(r.output, Contains("to be" + vocab.decode(want) + "\n"));
    // the export has no tokenizer: text is refused, naming why
    r = testing::run_program("nnlab", "generate --model " + dir + " --prompt \"to be\"");
    REQUIRE(r.status != 0);
    REQUIRE_THAT(r.output, Contains("no tokenizer.json") && Contains("--prompt-ids"));

    // perplexity of a text within one window: exp of gpt_forward's mean loss on it
    const std::string file = tmp.file("text.txt");
    write_all(file, text.substr(0, 30));
    const std::vector<int32_t> tok = vocab.encode(text.substr(0, 30));
    auto naive = gpt::make_backend("naive");
    gpt::gpt_forward(m, *naive, tok.data(), tok.data() + 1, 1, 29);
    r = testing::run_program("nnlab", "perplexity --model " + ckpt + " --text " + file);
    INFO(r.output);
    REQUIRE(r.status == 0);
    REQUIRE_THAT(r.output, Contains("29 scored (29 bytes)"));
    const size_t at = r.output.find("perplexity ");
    REQUIRE(at != std::string::npos);
    // printed to 3 decimals; the loss in float (gpt_forward) and in double (the command)
    REQUIRE(std::stod(r.output.substr(at + 11)) == Approx(std::exp(static_cast<double>(m.mean_loss))).margin(1.5e-3));
  }
}

TEST_CASE("lesson12 --part hf --quick: random models written, read back exactly, run", "[hf][cli][lesson12]") {
  TempDir tmp("lesson12-hf");
  const std::string corpus = tmp.file("corpus.txt");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  write_all(corpus, text);
  const std::string json = tmp.file("out.json");
  const auto r = testing::run_program("lesson12", "--part hf --quick --threads 2 --data " + corpus + " --json " + json);
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Contains("== part hf") && Contains("tiny-gpt2") && Contains("tiny-llama") &&
                             Contains("read back: parameters identical"));
  const std::string j = testing::read_text(json);
  REQUIRE_THAT(j, Contains("\"hf\": {\"source\": \"random\"") && Contains("\"roundtrip_exact\": true") &&
                      Contains("\"architecture\": \"LlamaForCausalLM\"") && Contains("\"generated\": 8"));
  REQUIRE_THAT(j, !Contains("\"roundtrip_exact\": false"));
}
