// tests/test_gpt_infer.cpp: the Decoder (gpt/infer.h) against gpt_forward on the whole
// context: a prefill and token-by-token steps give the same logits at every position, on the
// naive and the cpu backend; rewinding, batches of different sequences, generation with and
// without the cache; the quantised formats against gpt_forward on dequantized_copy; the byte
// counts; the errors; and the cuda backend through the emulator.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gpt/backend_cuda.h"
#include "gpt/compress.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "kernels/cuda/device.h"
#include "kernels/decode.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace {

using kernels::WeightFormat;

gpt::GPTConfig infer_config(bool bias) {
  gpt::GPTConfig c;
  c.vocab_size = 23;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;  // int4 packs groups of 32 columns; sparse24 groups of 8
  c.bias = bias;
  return c;
}

// Every parameter N(0, 0.25): biases and LayerNorm weights away from 0 and 1 so their paths
// count, and q.k scores of order 1 so attention is far from uniform (a wrong cache position
// would change it).
gpt::GPT random_model(const gpt::GPTConfig& c, uint64_t seed) {
  gpt::GPT m = gpt::gpt_create(c);
  nn::Rng rng(seed);
  std::vector<float> p(static_cast<size_t>(m.num_params));
  for (float& x : p) x = rng.normal(0.0f, 0.25f);
  m.params_memory.upload(p.data(), p.size());
  return m;
}

std::vector<int32_t> random_ids(size_t n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
  return v;
}

// gpt_forward's logits (B, T, V) on the host
std::vector<float> forward_logits(gpt::GPT& m, gpt::Backend& be, const std::vector<int32_t>& ids, int B, int T) {
  gpt::gpt_forward(m, be, ids.data(), nullptr, B, T);
  std::vector<float> out(static_cast<size_t>(B) * T * m.config.vocab_size);
  gpt::gpt_memory(m).to_host(out.data(), m.acts.logits, out.size() * sizeof(float));
  return out;
}

// max |got - ref| / max |ref| over one (n rows x V) block each: logits are compared on
// the scale of the largest logit, as a softmax sees them
double rel_err(const float* got, const float* ref, size_t n) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - ref[i]);
    err = std::isnan(d) ? 1e30 : std::max(err, d);
    scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  }
  return scale > 0 ? err / scale : err;
}

// fp32: the decoder and gpt_forward compute the same sums in different orders (matvec vs
// matmul, attention over the cache vs the whole sequence): rounding only
constexpr double kFp32Tol = 1e-5;

void prefill_then_steps_match(gpt::Backend& be, bool bias) {
  const gpt::GPTConfig c = infer_config(bias);
  const int T = c.block_size, V = c.vocab_size;
  gpt::GPT model = random_model(c, 11);
  const auto ids = random_ids(static_cast<size_t>(T), V, 3);
  const std::vector<float> ref = forward_logits(model, be, ids, 1, T);
  const gpt::InferenceModel im = gpt::pack_model(model, WeightFormat::f32);
  gpt::Decoder dec(im, be);
  INFO(be.name() << " backend, bias " << bias);

  // the whole block in one prefill
  {
    const std::vector<float>& got = dec.step(ids.data(), 1, T);
    REQUIRE(got.size() == static_cast<size_t>(T * V));
    CHECK(rel_err(got.data(), ref.data(), got.size()) < kFp32Tol);
    CHECK(dec.pos() == T);
  }
  // a prefill of 5, then one token at a time: every position against the full forward
  dec.reset();
  CHECK(dec.pos() == 0);
  const std::vector<float>& pre = dec.step(ids.data(), 1, 5);
  CHECK(rel_err(pre.data(), ref.data(), static_cast<size_t>(5 * V)) < kFp32Tol);
  for (int t = 5; t < T; ++t) {
    INFO("position " << t);
    const std::vector<float>& got = dec.step(&ids[static_cast<size_t>(t)], 1, 1);
    REQUIRE(got.size() == static_cast<size_t>(V));
    CHECK(rel_err(got.data(), ref.data() + static_cast<size_t>(t * V), static_cast<size_t>(V)) < kFp32Tol);
    CHECK(dec.pos() == t + 1);
  }
  // chunks of 3 (what speculative decoding's verification feeds)
  dec.reset();
  for (int t = 0; t < T; t += 3) {
    const int n = std::min(3, T - t);
    INFO("chunk at " << t);
    const std::vector<float>& got = dec.step(&ids[static_cast<size_t>(t)], 1, n);
    CHECK(rel_err(got.data(), ref.data() + static_cast<size_t>(t * V), static_cast<size_t>(n * V)) < kFp32Tol);
  }
}

}  // namespace

TEST_CASE("gpt infer: Decoder logits equal gpt_forward's at every position, prefill and steps", "[gpt][infer]") {
  auto naive = gpt::make_backend("naive");
  auto cpu = gpt::make_backend("cpu");
  for (bool bias : {true, false}) {
    prefill_then_steps_match(*naive, bias);
    prefill_then_steps_match(*cpu, bias);
  }
}

TEST_CASE("gpt infer: the Decoder's fused and unfused blocks give the same logits bit for bit", "[gpt][infer]") {
  // Fused, block l + 1's LN1 is computed by block l's last residual add into the one layer of
  // activations every block reuses (and block l + 1 then reads its input from the buffer
  // it overwrites last): the same values as the diagram's order, on every row.
  for (const std::string name : {"naive", "cpu"}) {
    auto be = gpt::make_backend(name);
    const gpt::GPTConfig c = infer_config(true);
    gpt::GPT m = random_model(c, 41);
    const gpt::InferenceModel im = gpt::pack_model(m, WeightFormat::f32);
    const std::vector<int32_t> ids = random_ids(10, c.vocab_size, 42);
    std::vector<float> logits[2];
    for (int fused = 0; fused < 2; ++fused) {
      gpt::Decoder dec(im, *be, 2);
      dec.set_fusion(fused ? gpt::Fusion::fused : gpt::Fusion::unfused);
      logits[fused] = dec.step(ids.data(), 2, 3);  // a prefill of 3 in 2 sequences
      const std::vector<float>& next = dec.step(ids.data() + 6, 2, 1);
      logits[fused].insert(logits[fused].end(), next.begin(), next.end());
    }
    INFO(name);
    CHECK(logits[0] == logits[1]);
  }
}

TEST_CASE("gpt infer: rewind forgets positions, and stepping again gives the same logits", "[gpt][infer]") {
  const gpt::GPTConfig c = infer_config(true);
  const int V = c.vocab_size;
  auto be = gpt::make_backend("cpu");
  gpt::GPT model = random_model(c, 12);
  const auto ids = random_ids(10, V, 4);
  const auto other = random_ids(4, V, 5);
  const std::vector<float> ref = forward_logits(model, *be, ids, 1, 10);
  const gpt::InferenceModel im = gpt::pack_model(model, WeightFormat::f32);
  gpt::Decoder dec(im, *be);
  const std::vector<float> first = dec.step(ids.data(), 1, 10);
  // overwrite positions 6..9 with other tokens, then rewind and feed the originals again
  dec.rewind(6);
  CHECK(dec.pos() == 6);
  const std::vector<float> wrong = dec.step(other.data(), 1, 4);
  CHECK(rel_err(wrong.data(), first.data() + 6 * V, static_cast<size_t>(4 * V)) > 1e-3);  // it did change
  dec.rewind(6);
  const std::vector<float> again = dec.step(ids.data() + 6, 1, 4);
  CHECK(rel_err(again.data(), ref.data() + 6 * V, static_cast<size_t>(4 * V)) < kFp32Tol);
  CHECK(rel_err(again.data(), first.data() + 6 * V, static_cast<size_t>(4 * V)) < kFp32Tol);
  // one at a time after a rewind into the middle of the prefill
  dec.rewind(3);
  for (int t = 3; t < 10; ++t) {
    const std::vector<float>& got = dec.step(&ids[static_cast<size_t>(t)], 1, 1);
    CHECK(rel_err(got.data(), ref.data() + t * V, static_cast<size_t>(V)) < kFp32Tol);
  }
}

TEST_CASE("gpt infer: a batch of 2 different sequences equals two batch-1 runs", "[gpt][infer]") {
  const gpt::GPTConfig c = infer_config(true);
  const int V = c.vocab_size, T = 9;
  for (const char* name : {"naive", "cpu"}) {
    INFO(name);
    auto be = gpt::make_backend(name);
    gpt::GPT model = random_model(c, 13);
    const gpt::InferenceModel im = gpt::pack_model(model, WeightFormat::f32);
    const auto a = random_ids(static_cast<size_t>(T), V, 6), b = random_ids(static_cast<size_t>(T), V, 7);
    std::vector<int32_t> ab(a.begin(), a.begin() + 4);
    ab.insert(ab.end(), b.begin(), b.begin() + 4);
    gpt::Decoder both(im, *be, 2), one_a(im, *be), one_b(im, *be);
    CHECK(both.max_batch() == 2);
    // a prefill of 4 each, then single steps
    std::vector<float> got = both.step(ab.data(), 2, 4);
    std::vector<float> ra = one_a.step(a.data(), 1, 4), rb = one_b.step(b.data(), 1, 4);
    CHECK(rel_err(got.data(), ra.data(), static_cast<size_t>(4 * V)) < 1e-6);
    CHECK(rel_err(got.data() + 4 * V, rb.data(), static_cast<size_t>(4 * V)) < 1e-6);
    for (int t = 4; t < T; ++t) {
      INFO("position " << t);
      const int32_t pair[2] = {a[static_cast<size_t>(t)], b[static_cast<size_t>(t)]};
      got = both.step(pair, 2, 1);
      ra = one_a.step(&a[static_cast<size_t>(t)], 1, 1);
      rb = one_b.step(&b[static_cast<size_t>(t)], 1, 1);
      CHECK(rel_err(got.data(), ra.data(), static_cast<size_t>(V)) < 1e-6);
      CHECK(rel_err(got.data() + V, rb.data(), static_cast<size_t>(V)) < 1e-6);
    }
    // and the two rows are different sequences (a batch that mixed them up would not pass)
    CHECK(rel_err(got.data(), got.data() + V, static_cast<size_t>(V)) > 1e-3);
  }
}

TEST_CASE("gpt infer: generate with the cache gives the ids generate_without_cache gives", "[gpt][infer]") {
  const gpt::GPTConfig c = infer_config(true);
  auto be = gpt::make_backend("cpu");
  gpt::GPT model = random_model(c, 14);
  const gpt::InferenceModel im = gpt::pack_model(model, WeightFormat::f32);
  gpt::Decoder dec(im, *be);
  const std::vector<int32_t> prompt = {1, 5, 7};
  for (float temperature : {0.0f, 0.8f, 1.5f}) {
    INFO("temperature " << temperature);
    gpt::GenerateOptions o;
    o.tokens = c.block_size - static_cast<int>(prompt.size());  // the whole context fits
    o.temperature = temperature;
    o.seed = 99;
    gpt::GenerateStats s1, s2;
    const auto with = gpt::generate(dec, prompt, o, &s1);
    const auto without = gpt::generate_without_cache(model, *be, prompt, o, &s2);
    CHECK(with == without);
    CHECK(static_cast<int>(with.size()) == o.tokens);
    CHECK(s1.generated == o.tokens);
    CHECK(s2.generated == o.tokens);
    CHECK(s1.tokens_per_second() > 0.0);
  }
  // a sampled run draws more than one distinct id (the draws do use the seed's uniforms)
  gpt::GenerateOptions o;
  o.tokens = 13;
  o.temperature = 1.5f;
  const auto s = gpt::generate(dec, prompt, o);
  CHECK(std::count(s.begin(), s.end(), s[0]) < static_cast<long>(s.size()));
  // past block_size: the cache is refilled with the last block_size / 2 tokens and goes on
  o.tokens = 3 * c.block_size;
  const auto longer = gpt::generate(dec, prompt, o);
  CHECK(static_cast<int>(longer.size()) == o.tokens);
  for (int32_t id : longer) CHECK((id >= 0 && id < c.vocab_size));
  // a prompt longer than the block: its last block_size tokens
  const auto long_prompt = random_ids(40, c.vocab_size, 8);
  o.tokens = 1;
  o.temperature = 0.0f;
  CHECK(gpt::generate(dec, long_prompt, o) == gpt::generate_without_cache(model, *be, long_prompt, o));
}

// Quantised formats. Two comparisons:
//  strict: on a model whose matrices ALREADY hold what the format stores (dequantized_copy
//    of it), packing again loses nothing (bf16 and 2:4 exactly; int8 and int4 up to a scale
//    recomputed with an ulp of difference), and the decoder's fp32 wte lookup reads the same
//    table as its packed head: logits equal gpt_forward's to fp32 rounding.
//  loose: on the original model, against gpt_forward on dequantized_copy, as the header
//    states it. The copy's lookup reads the ROUNDED wte, the decoder's the exact one: the
//    embedding of every token differs by the head's rounding error (bf16 2^-9 relative,
//    int8 half a step of 1/127 of the row's max, int4 half a step of 1/7 of the group's max,
//    2:4 half of every row dropped), and that difference goes through every layer.
//    Tolerances are about 3x what this model shows (bf16 6e-4, int8 1.6e-3, int4 3e-2,
//    2:4 0.13 relative to the largest logit), small enough that a wrongly packed or
//    mis-indexed matrix (an error of order 1) fails; the strict check is the precise one.
TEST_CASE("gpt infer: bf16, int8, int4 and 2:4 decoders match gpt_forward on dequantized_copy", "[gpt][infer]") {
  const gpt::GPTConfig c = infer_config(true);
  const int T = 12, V = c.vocab_size;
  auto be = gpt::make_backend("cpu");
  auto naive = gpt::make_backend("naive");
  gpt::GPT model = random_model(c, 15);
  const auto ids = random_ids(static_cast<size_t>(T), V, 9);
  struct Case {
    WeightFormat f;
    double loose;
  };
  for (const Case& k : {Case{WeightFormat::bf16, 3e-3}, Case{WeightFormat::int8, 6e-3}, Case{WeightFormat::int4, 0.1},
                        Case{WeightFormat::sparse24, 0.4}}) {
    INFO(kernels::format_name(k.f));
    gpt::GPT dq = gpt::dequantized_copy(model, k.f);
    CHECK(dq.params_memory.to_vector() != model.params_memory.to_vector());
    const std::vector<float> ref_dq = forward_logits(dq, *be, ids, 1, T);
    // strict, on both host backends, stepping one token at a time after a prefill of 4
    for (gpt::Backend* b : {be.get(), naive.get()}) {
      INFO(b->name() << " backend, strict");
      const gpt::InferenceModel im = gpt::pack_model(dq, k.f);
      CHECK(im.format == k.f);
      gpt::Decoder dec(im, *b);
      std::vector<float> got = dec.step(ids.data(), 1, 4);
      for (int t = 4; t < T; ++t) {
        const std::vector<float>& r = dec.step(&ids[static_cast<size_t>(t)], 1, 1);
        got.insert(got.end(), r.begin(), r.end());
      }
      CHECK(rel_err(got.data(), ref_dq.data(), got.size()) < 1e-4);
    }
    // loose: the original model, packed
    const gpt::InferenceModel im = gpt::pack_model(model, k.f);
    gpt::Decoder dec(im, *be);
    const std::vector<float> got = dec.step(ids.data(), 1, T);
    const double err = rel_err(got.data(), ref_dq.data(), got.size());
    INFO("loose error " << err);
    CHECK(err < k.loose);
  }
}

TEST_CASE("gpt infer: weight_bytes_per_token and bytes count what they document", "[gpt][infer]") {
  for (bool bias : {true, false}) {
    const gpt::GPTConfig c = infer_config(bias);
    const int64_t L = c.n_layer, C = c.n_embd, V = c.vocab_size, maxT = c.block_size;
    gpt::GPT model = random_model(c, 16);
    auto naive = gpt::make_backend("naive");
    // LayerNorm weights 2C per layer and ln_f C; with biases also their 2C + C, and the
    // Linear biases 3C + C + 4C + C per layer
    const int64_t vec_floats = bias ? L * (4 * C + 9 * C) + 2 * C : L * 2 * C + C;
    int64_t prev = 0;
    for (WeightFormat f : {WeightFormat::f32, WeightFormat::bf16, WeightFormat::int8, WeightFormat::int4,
                           WeightFormat::sparse24}) {
      INFO(kernels::format_name(f) << ", bias " << bias);
      const gpt::InferenceModel im = gpt::pack_model(model, f);
      const auto fb = [&](int64_t r, int64_t col) {
        return static_cast<int64_t>(kernels::format_bytes(f, static_cast<int>(r), static_cast<int>(col)));
      };
      // the head is packed in gpt::head_format(f): fp32 for sparse24 (pruning keeps wte whole)
      const int64_t head = static_cast<int64_t>(
          kernels::format_bytes(gpt::head_format(f), static_cast<int>(V), static_cast<int>(C)));
      CHECK((f == WeightFormat::sparse24 ? head == 4 * V * C : head == fb(V, C)));
      const int64_t matrices = L * (fb(3 * C, C) + fb(C, C) + fb(4 * C, C) + fb(C, 4 * C)) + head;
      CHECK(im.vectors.size() == static_cast<size_t>(vec_floats));
      CHECK(im.weight_bytes_per_token() == matrices + 4 * vec_floats + 4 * 2 * C);
      CHECK(im.bytes() == matrices + 4 * vec_floats + 4 * (V + maxT) * C);
      CHECK(static_cast<int64_t>(im.head.bytes()) == head);
      CHECK(im.qkvw.size() == static_cast<size_t>(L));
      CHECK((bias ? im.params.qkvb != nullptr : im.params.qkvb == nullptr));
      CHECK(im.params.qkvw == nullptr);  // the matrices are read packed
      if (f == WeightFormat::f32) CHECK(matrices == 4 * (L * 12 * C * C + V * C));
      if (f == WeightFormat::bf16 || f == WeightFormat::int8 || f == WeightFormat::int4) {
        CHECK(im.weight_bytes_per_token() < prev);  // each format smaller than the last
      }
      prev = im.weight_bytes_per_token();
      gpt::Decoder dec(im, *naive, 3);
      CHECK(dec.kv_cache_bytes() == 2 * L * 3 * maxT * C * 4);
    }
  }
}

TEST_CASE("gpt infer: clear errors for misuse", "[gpt][infer]") {
  const gpt::GPTConfig c = infer_config(true);
  auto be = gpt::make_backend("cpu");
  gpt::GPT model = random_model(c, 17);
  const gpt::InferenceModel im = gpt::pack_model(model, WeightFormat::f32);
  using testing::error_of;
  gpt::Decoder dec(im, *be, 2);
  const std::vector<int32_t> ids(40, 1);
  CHECK_THAT(error_of([&] { dec.step(ids.data(), 1, 17); }), Catch::Contains("exceed block_size 16"));
  CHECK(dec.pos() == 0);
  dec.step(ids.data(), 1, 10);
  CHECK_THAT(error_of([&] { dec.step(ids.data(), 1, 7); }), Catch::Contains("exceed block_size"));
  CHECK_THAT(error_of([&] { dec.step(ids.data(), 3, 1); }), Catch::Contains("max_batch"));
  CHECK_THAT(error_of([&] { dec.step(ids.data(), 0, 1); }), Catch::Contains("batch 0"));
  CHECK_THAT(error_of([&] { dec.step(ids.data(), 1, 0); }), Catch::Contains("at least one"));
  const int32_t bad[2] = {3, 23};
  CHECK_THAT(error_of([&] { dec.step(bad, 1, 2); }), Catch::Contains("outside the vocabulary"));
  const int32_t negative = -1;
  CHECK_THAT(error_of([&] { dec.step(&negative, 1, 1); }), Catch::Contains("outside the vocabulary"));
  CHECK(dec.pos() == 10);  // a refused step changes nothing
  CHECK_THAT(error_of([&] { dec.rewind(11); }), Catch::Contains("0 <= p <= 10"));
  CHECK_THAT(error_of([&] { dec.rewind(-1); }), Catch::Contains("0 <= p <= 10"));
  CHECK_THAT(error_of([&] { gpt::Decoder d(im, *be, 0); }), Catch::Contains("max_batch must be >= 1"));
  CHECK_THAT(error_of([] { gpt::Decoder d(gpt::InferenceModel{}, *gpt::make_backend("cpu")); }),
             Catch::Contains("empty"));
  // a host model on the (emulated) cuda backend
  auto cuda = gpt::make_cuda_backend(kernels::cuda::emulator(), "fp32");
  CHECK_THAT(error_of([&] { gpt::Decoder d(im, *cuda); }), Catch::Contains("pack_model(model, format, backend.memory())"));
  // formats the widths do not allow: int4 needs C % 32 == 0, 2:4 C % 8 == 0
  gpt::GPTConfig narrow = c;
  narrow.n_embd = 20;
  narrow.n_head = 2;
  gpt::GPT nm = random_model(narrow, 18);
  CHECK_THAT(error_of([&] { gpt::pack_model(nm, WeightFormat::int4); }), Catch::Contains("as int4"));
  CHECK_THAT(error_of([&] { gpt::pack_model(nm, WeightFormat::sparse24); }), Catch::Contains("as sparse24"));
  CHECK_THAT(error_of([&] { gpt::dequantized_copy(nm, WeightFormat::int4); }), Catch::Contains("as int4"));
  CHECK_NOTHROW(gpt::pack_model(nm, WeightFormat::int8));
  // generation
  gpt::GenerateOptions o;
  CHECK_THAT(error_of([&] { gpt::generate(dec, {}, o); }), Catch::Contains("at least one token"));
  o.tokens = -1;
  CHECK_THAT(error_of([&] { gpt::generate(dec, {1}, o); }), Catch::Contains(">= 0"));
  CHECK_THAT(error_of([&] { gpt::generate_without_cache(model, *be, {1}, o); }), Catch::Contains(">= 0"));
}

// The cuda backend's inference ops (kernels/cuda) on the emulator against the cpu decoder.
TEST_CASE("gpt infer cuda (emulated): the cuda decoder's logits equal the cpu decoder's", "[gpt][cuda][infer]") {
  const gpt::GPTConfig c = infer_config(true);
  const int T = 10, V = c.vocab_size;
  auto cpu = gpt::make_backend("cpu");
  auto cuda = gpt::make_cuda_backend(kernels::cuda::emulator(), "fp32");
  gpt::GPT model = random_model(c, 19);
  const auto ids = random_ids(2 * static_cast<size_t>(T), V, 10);
  for (WeightFormat f : {WeightFormat::f32, WeightFormat::bf16, WeightFormat::int8, WeightFormat::int4,
                         WeightFormat::sparse24}) {
    INFO(kernels::format_name(f));
    const gpt::InferenceModel hm = gpt::pack_model(model, f);
    const gpt::InferenceModel dm = gpt::pack_model(model, f, cuda->memory());
    REQUIRE_FALSE(dm.wte.memory().is_host());
    gpt::Decoder dh(hm, *cpu, 2), dd(dm, *cuda, 2);
    // batch 2: a prefill of 4, then single steps
    std::vector<int32_t> pre;
    for (int b = 0; b < 2; ++b) pre.insert(pre.end(), ids.begin() + b * T, ids.begin() + b * T + 4);
    const std::vector<float> a = dh.step(pre.data(), 2, 4);
    const std::vector<float> b = dd.step(pre.data(), 2, 4);
    CHECK(rel_err(b.data(), a.data(), a.size()) < kFp32Tol);
    for (int t = 4; t < T; ++t) {
      const int32_t pair[2] = {ids[static_cast<size_t>(t)], ids[static_cast<size_t>(T + t)]};
      const std::vector<float> x = dh.step(pair, 2, 1);
      const std::vector<float> y = dd.step(pair, 2, 1);
      INFO("position " << t);
      CHECK(rel_err(y.data(), x.data(), x.size()) < kFp32Tol);
    }
  }
}

// W8A8 (lesson 15): the matrices are int8's, the activations quantised per token inside each
// matvec, sums in int32. Against fp32 the error is int8's plus the activations' rounding:
// this model shows about 1e-2 of the largest logit; the bound is 3x that, and an error of
// order 1 (a wrong scale, a mis-indexed row) fails. The cpu and naive backends run different
// matvec versions (v3 and v1) whose integer sums agree exactly; the rest of the forward
// differs by fp32 rounding, and an input that lands on a rounding boundary of its int8 step
// can round the other way: 1e-3 of the largest logit. The cuda backend (emulated) runs its
// own w8a8 kernels (kernels/cuda/decode.cu): the same bound against the cpu decoder.
TEST_CASE("gpt infer: a w8a8 decoder runs on cpu, naive and cuda (emulated), close to fp32", "[gpt][infer][int8]") {
  const gpt::GPTConfig c = infer_config(true);
  const int T = 12;
  auto be = gpt::make_backend("cpu");
  auto naive = gpt::make_backend("naive");
  gpt::GPT model = random_model(c, 25);
  const auto ids = random_ids(static_cast<size_t>(T), c.vocab_size, 11);
  const std::vector<float> ref = forward_logits(model, *be, ids, 1, T);
  const gpt::InferenceModel im = gpt::pack_model(model, WeightFormat::w8a8);
  CHECK(im.format == WeightFormat::w8a8);
  CHECK(im.head.format == WeightFormat::w8a8);
  const gpt::InferenceModel i8 = gpt::pack_model(model, WeightFormat::int8);
  CHECK(im.weight_bytes_per_token() == i8.weight_bytes_per_token());  // the same bytes as int8
  std::vector<float> by_backend[2];
  int k = 0;
  for (gpt::Backend* b : {be.get(), naive.get()}) {
    gpt::Decoder dec(im, *b);
    std::vector<float> got = dec.step(ids.data(), 1, 4);  // prefill 4, then one token at a time
    for (int t = 4; t < T; ++t) {
      const std::vector<float>& r = dec.step(&ids[static_cast<size_t>(t)], 1, 1);
      got.insert(got.end(), r.begin(), r.end());
    }
    const double err = rel_err(got.data(), ref.data(), got.size());
    INFO(b->name() << " backend: w8a8 vs fp32 error " << err);
    CHECK(err < 3e-2);
    CHECK(err > 0.0);  // it did quantise something
    by_backend[k++] = got;
  }
  CHECK(rel_err(by_backend[1].data(), by_backend[0].data(), by_backend[0].size()) < 1e-3);
  auto cuda = gpt::make_cuda_backend(kernels::cuda::emulator(), "fp32");
  const gpt::InferenceModel dm = gpt::pack_model(model, WeightFormat::w8a8, cuda->memory());
  gpt::Decoder dd(dm, *cuda);
  std::vector<float> got = dd.step(ids.data(), 1, 4);
  for (int t = 4; t < T; ++t) {
    const std::vector<float>& r = dd.step(&ids[static_cast<size_t>(t)], 1, 1);
    got.insert(got.end(), r.begin(), r.end());
  }
  const double err = rel_err(got.data(), by_backend[0].data(), got.size());
  INFO("cuda (emulated) w8a8 vs cpu w8a8: " << err);
  CHECK(err < 1e-3);
}

// ---- the int8 KV cache (lesson 15) -----------------------------------------------------------
// A Decoder with KvCache::int8 stores each head's k and v per position as int8 plus one float
// scale, with gpt::quantize_dequantize_heads_int8's rounding: its logits must equal
// gpt::compressed_logits(..., {.kv_int8 = true}) (the full forward over the same rounded k and
// v) up to summation order, and differ from the fp32 cache's.
namespace {

gpt::GPTConfig int8_kv_config(bool llama) {
  gpt::GPTConfig c = infer_config(true);
  if (llama) {
    c.arch = gpt::Arch::llama;
    c.bias = false;
    c.n_head = 4;
    c.n_kv_head = 2;  // grouped-query heads, hs = 8
    c.ffn_hidden = 40;
  }
  return c;
}

// logits of a prefill of `pre` tokens then single steps, (T, V)
std::vector<float> decode_all(gpt::Decoder& dec, const std::vector<int32_t>& ids, int pre) {
  dec.reset();
  std::vector<float> got = dec.step(ids.data(), 1, pre);
  for (size_t t = static_cast<size_t>(pre); t < ids.size(); ++t) {
    const std::vector<float>& r = dec.step(&ids[t], 1, 1);
    got.insert(got.end(), r.begin(), r.end());
  }
  return got;
}

}  // namespace

TEST_CASE("gpt infer: the int8 KV cache gives compressed_logits' kv_int8 logits, gpt2 and llama, naive and cpu",
          "[gpt][infer][int8]") {
  for (const bool llama : {false, true}) {
    const gpt::GPTConfig c = int8_kv_config(llama);
    const int T = c.block_size, V = c.vocab_size;
    gpt::GPT model = random_model(c, 31);
    const auto ids = random_ids(static_cast<size_t>(T), V, 12);
    auto cpu = gpt::make_backend("cpu");
    auto naive = gpt::make_backend("naive");
    gpt::CompressedEval e;
    e.kv_int8 = true;
    const std::vector<float> want = gpt::compressed_logits(model, *cpu, ids.data(), 1, T, e);
    const std::vector<float> plain = gpt::compressed_logits(model, *cpu, ids.data(), 1, T, {});
    REQUIRE(want.size() == static_cast<size_t>(T * V));
    const gpt::InferenceModel im = gpt::pack_model(model, WeightFormat::f32);
    for (gpt::Backend* be : {cpu.get(), naive.get()}) {
      INFO((llama ? "llama" : "gpt2") << ", " << be->name() << " backend");
      gpt::Decoder dq(im, *be, 1, gpt::KvCache::int8), df(im, *be);
      CHECK(dq.kv_format() == gpt::KvCache::int8);
      CHECK(df.kv_format() == gpt::KvCache::f32);
      for (const int pre : {1, 5, T}) {  // token by token; a prefill of 5, then steps; one prefill
        INFO("prefill " << pre);
        const std::vector<float> q = decode_all(dq, ids, pre);
        const std::vector<float> f = decode_all(df, ids, pre);
        const double err = rel_err(q.data(), want.data(), want.size());
        INFO("int8 cache vs compressed_logits(kv_int8): " << err);
        CHECK(err < 1e-4);
        CHECK(rel_err(f.data(), plain.data(), plain.size()) < 1e-4);  // the fp32 cache, as before
        // the rounding shows: the int8 cache's logits are not the fp32 cache's
        const double diff = rel_err(q.data(), f.data(), f.size());
        INFO("int8 vs fp32 cache: " << diff);
        CHECK(diff > 1e-4);
      }
      // rewind: 6 tokens, then 4; back to 6, 4 other tokens (they overwrite the cache's rows
      // 6..9), back to 6, the first 4 again: the same logits bit for bit
      dq.reset();
      dq.step(ids.data(), 1, 6);
      const std::vector<float> first = dq.step(ids.data() + 6, 1, 4);
      dq.rewind(6);
      CHECK(dq.pos() == 6);
      const std::vector<int32_t> other = random_ids(4, V, 99);
      const std::vector<float> detour = dq.step(other.data(), 1, 4);
      CHECK(detour != first);
      dq.rewind(6);
      const std::vector<float> again = dq.step(ids.data() + 6, 1, 4);
      CHECK(again == first);
    }
  }
}

TEST_CASE("gpt infer: the int8 KV cache's bytes and contents are what it documents", "[gpt][infer][int8]") {
  for (const bool llama : {false, true}) {
    const gpt::GPTConfig c = int8_kv_config(llama);
    const int T = 7, L = c.n_layer, maxT = c.block_size, max_batch = 2;
    const int NKV = gpt::kv_heads(c), hs = c.n_embd / c.n_head, KV = NKV * hs;
    INFO((llama ? "llama" : "gpt2"));
    gpt::GPT model = random_model(c, 41);
    auto cpu = gpt::make_backend("cpu");
    const gpt::InferenceModel im = gpt::pack_model(model, WeightFormat::f32);
    gpt::Decoder dq(im, *cpu, max_batch, gpt::KvCache::int8), df(im, *cpu, max_batch);
    // fp32: 2 L B maxT KV 4 bytes; int8: 2 L B maxT (KV + 4 NKV)
    const int64_t cells = 2LL * L * max_batch * maxT;
    CHECK(df.kv_cache_bytes() == cells * KV * 4);
    CHECK(dq.kv_cache_bytes() == cells * (KV + 4LL * NKV));
    CHECK(dq.kv_cache_bytes() == gpt::kv_bytes_per_token(c, true) * max_batch * maxT);  // lesson 15's per-token count
    CHECK(df.kv_cache_bytes() == gpt::kv_bytes_per_token(c, false) * max_batch * maxT);
    CHECK(static_cast<double>(df.kv_cache_bytes()) / static_cast<double>(dq.kv_cache_bytes()) > 2.5);
    CHECK_THAT(testing::error_of([&] { df.int8_cache(); }), Catch::Contains("fp32"));
    // after one step of T tokens, layer 0's cache holds the rounding of layer 0's k and v:
    // each head's q s is gpt::quantize_dequantize_heads_int8's value, its largest |q| 127
    const auto ids = random_ids(static_cast<size_t>(T), c.vocab_size, 13);
    dq.step(ids.data(), 1, T);
    const gpt::Decoder::Int8Cache cache = dq.int8_cache();
    REQUIRE(cache.k.size() == static_cast<size_t>(L) * max_batch * maxT * KV);
    REQUIRE(cache.kscale.size() == static_cast<size_t>(L) * max_batch * maxT * NKV);
    for (int l = 0; l < L; ++l)
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < NKV; ++h) {
          const size_t cell = (static_cast<size_t>(l) * max_batch * maxT + static_cast<size_t>(t)) * NKV + h;
          INFO("layer " << l << " position " << t << " head " << h);
          for (const bool isk : {true, false}) {
            const float s = (isk ? cache.kscale : cache.vscale)[cell];
            const int8_t* q = (isk ? cache.k : cache.v).data() + cell * hs;
            CHECK(s > 0.0f);
            int amax = 0;
            std::vector<float> x(static_cast<size_t>(hs));
            for (int j = 0; j < hs; ++j) {
              amax = std::max(amax, std::abs(static_cast<int>(q[j])));
              x[static_cast<size_t>(j)] = static_cast<float>(q[j]) * s;
            }
            CHECK(amax == 127);
            // the values q s are a fixed point of the rounding (round trip again: unchanged)
            std::vector<float> y = x;
            gpt::quantize_dequantize_heads_int8(y.data(), 1, hs);
            CHECK(y == x);
          }
        }
  }
}

TEST_CASE("gpt infer: the int8 KV cache on the cuda backend says it is not there", "[gpt][infer][int8][cuda]") {
  const gpt::GPTConfig c = infer_config(true);
  auto cuda = gpt::make_cuda_backend(kernels::cuda::emulator(), "fp32");
  gpt::GPT model = random_model(c, 19);
  const gpt::InferenceModel dm = gpt::pack_model(model, WeightFormat::f32, cuda->memory());
  gpt::Decoder dd(dm, *cuda, 1, gpt::KvCache::int8);
  const int32_t tok = 1;
  CHECK_THAT(testing::error_of([&] { dd.step(&tok, 1, 1); }), Catch::Contains("int8 KV cache: not on backend cuda"));
}
