// tests/test_kernels_gpt_ops.cpp: the GPT training ops' ladders (kernels/encoder.h,
// layernorm.h's backward and fused residual, linear.h, attention.h, gelu.h, residual.h,
// dropout.h, crossentropy.h, adamw.h).
//   - every rung against v1 at odd sizes (not multiples of the SIMD width), through the one
//     harness: each op's bench validates (NaN-filled outputs, guarded buffers, accumulated
//     outputs from a random start) and then times every version at its quick sizes;
//   - the v1 backward ops against finite differences in double (linear, attention and
//     cross-entropy are checked through nn/ in test_ops.cpp and test_attention.cpp);
//   - the headers list exactly the versions their tables have; lookups by number and name;
//   - the cpu backend's table runs the rungs it names, bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpt/backend.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/bench/ops.h"
#include "kernels/crossentropy.h"
#include "kernels/dropout.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/harness.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/residual.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"
#include "tests/bench_test_util.h"
#include "tests/test_util.h"
#include "tests/gradcheck_test_util.h"

namespace h = kernels::harness;

namespace {

const char* const kGptOps[] = {"encoder",     "encoder_backward",  "layernorm_backward", "residual_layernorm",
                               "linear",      "linear_backward",   "linear_gelu",        "attention",
                               "attention_backward", "gelu",       "gelu_backward",      "residual",
                               "dropout",     "dropout_backward",  "crossentropy",       "crossentropy_backward",
                               "adamw",       "sum_squares",       "scale"};

}  // namespace

// ---- every rung against v1, then timed ----------------------------------------------------------

TEST_CASE("every GPT-op rung matches v1 at odd sizes, then is timed, through the harness", "[kernels][gptops]") {
  for (const char* name : kGptOps) testing::require_every_rung_valid_and_timed(name);
}

TEST_CASE("the GPT-op validation can fail: a wrong rung is caught", "[kernels][gptops]") {
  // v1 against itself passes; the problem's check sees a changed output and a NaN.
  auto p = kernels::bench::op("residual").make("77", 3);
  REQUIRE(p->validate(0).ok());
  REQUIRE(p->validate(1).ok());
  REQUIRE_THROWS_AS(kernels::bench::op("attention").make("2x7x20x3", 1), std::invalid_argument);  // 20 % 3
  REQUIRE_THROWS_AS(kernels::bench::op("linear").make("3x4", 1), std::invalid_argument);
}

// ---- gradient checks of the v1 backward ops, in double -----------------------------------------

TEST_CASE("layernorm backward v1 matches finite differences (double)", "[kernels][gptops][gradcheck]") {
  const int N = 3, C = 7;
  nn::Rng rng(5);
  auto x = testing::uniform_vec(rng, N * C, -2.0, 2.0);
  auto w = testing::uniform_vec(rng, C, 0.5, 1.5);
  auto b = testing::uniform_vec(rng, C);
  const auto r = testing::uniform_vec(rng, N * C);  // L = sum(out * R)
  std::vector<double> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    kernels::layernorm_forward_v1(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return testing::dot(out, r);
  };
  loss();
  // dinp accumulates: start it at 0; dweight, dbias too
  std::vector<double> dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  kernels::layernorm_backward_v1(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(),
                                 rstd.data(), N, C);
  testing::require_grad(nn::check_gradient(loss, x, dx), dx);
  testing::require_grad(nn::check_gradient(loss, w, dw), dw);
  testing::require_grad(nn::check_gradient(loss, b, db), db);
}

TEST_CASE("encoder backward v1 matches finite differences (double), repeated ids included", "[kernels][gptops][gradcheck]") {
  const int B = 2, T = 3, C = 5, V = 4;
  const std::vector<int32_t> ids = {1, 3, 1, 0, 1, 2};  // id 1 three times
  nn::Rng rng(6);
  auto wte = testing::uniform_vec(rng, V * C);
  auto wpe = testing::uniform_vec(rng, T * C);
  const auto r = testing::uniform_vec(rng, B * T * C);
  std::vector<double> out(B * T * C);
  auto loss = [&] {
    kernels::encoder_forward_v1(out.data(), ids.data(), wte.data(), wpe.data(), B, T, C);
    return testing::dot(out, r);
  };
  std::vector<double> dwte(V * C, 0.0), dwpe(T * C, 0.0);
  kernels::encoder_backward_v1(dwte.data(), dwpe.data(), r.data(), ids.data(), B, T, C);
  testing::require_grad(nn::check_gradient(loss, wte, dwte), dwte);
  testing::require_grad(nn::check_gradient(loss, wpe, dwpe), dwpe);
}

TEST_CASE("GELU backward v1 matches finite differences (double)", "[kernels][gptops][gradcheck]") {
  nn::Rng rng(7);
  auto x = testing::uniform_vec(rng, 41, -5.0, 5.0);
  const auto r = testing::uniform_vec(rng, 41);
  std::vector<double> out(41);
  auto loss = [&] {
    kernels::gelu_forward_v1(out.data(), x.data(), 41);
    return testing::dot(out, r);
  };
  std::vector<double> dx(41);
  kernels::gelu_backward_v1(dx.data(), r.data(), x.data(), 41);
  testing::require_grad(nn::check_gradient(loss, x, dx), dx);
}

TEST_CASE("dropout backward v1 and the residual add match finite differences (double)", "[kernels][gptops][gradcheck]") {
  const int64_t n = 37;
  nn::Rng rng(8);
  auto x = testing::uniform_vec(rng, n);
  auto y = testing::uniform_vec(rng, n);
  const auto r = testing::uniform_vec(rng, n);
  std::vector<double> out(n), mask(n), sum(n);
  auto loss = [&] {
    kernels::dropout_forward_v1(out.data(), mask.data(), x.data(), n, 0.3f, 11);
    kernels::residual_forward_v1(sum.data(), out.data(), y.data(), n);
    return testing::dot(sum, r);
  };
  loss();
  std::vector<double> dx(n);
  kernels::dropout_backward_v1(dx.data(), r.data(), mask.data(), n);  // the residual passes r on to both
  testing::require_grad(nn::check_gradient(loss, x, dx), dx);
  testing::require_grad(nn::check_gradient(loss, y, r), r);
}

// ---- docs and lookups ---------------------------------------------------------------------------

TEST_CASE("each GPT-op header lists exactly the versions its table has", "[kernels][gptops][docs]") {
  const std::pair<const char*, size_t> headers[] = {
      {"encoder.h", kernels::encoder_versions().size()},     {"linear.h", kernels::linear_versions().size()},
      {"attention.h", kernels::attention_backward_versions().size()}, {"gelu.h", kernels::gelu_versions().size()},
      {"residual.h", kernels::residual_versions().size()},   {"dropout.h", kernels::dropout_versions().size()},
      {"crossentropy.h", kernels::crossentropy_versions().size()}, {"adamw.h", kernels::adamw_versions().size()},
  };
  for (const auto& [file, count] : headers) {
    const std::vector<int> listed =
        testing::listed_versions(testing::read_text(std::string(NNLAB_SOURCE_DIR) + "/kernels/" + file));
    INFO(file << " lists " << listed.size() << " versions; its table has " << count);
    REQUIRE(listed.size() == count);
    for (size_t i = 0; i < listed.size(); ++i) REQUIRE(listed[i] == static_cast<int>(i + 1));
  }
  // the backward tables have as many rungs as their forward ones (the headers list them together)
  REQUIRE(kernels::encoder_backward_versions().size() == kernels::encoder_versions().size());
  // attention's backward has one rung more (v5, backward only: attention.h says why)
  REQUIRE(kernels::attention_backward_versions().size() == kernels::attention_versions().size() + 1);
  REQUIRE(kernels::gelu_backward_versions().size() == kernels::gelu_versions().size());
  REQUIRE(kernels::dropout_backward_versions().size() == kernels::dropout_versions().size());
  REQUIRE(kernels::crossentropy_backward_versions().size() == kernels::crossentropy_versions().size());
  REQUIRE(kernels::layernorm_backward_versions().size() == 2);
  REQUIRE(kernels::residual_layernorm_versions().size() == 2);
}

// attention v3 changes only how many FMA chains run at once; each element's terms are added in
// v2's order, so the bits must match, forward and backward (the GPT shape, hs = 32: the case v3
// targets on AVX-512, and a ragged one, hs = 13: the scalar tail).
TEST_CASE("attention v3 gives v2's bits, forward and backward", "[kernels][gptops]") {
  const int shapes[][4] = {{12, 64, 128, 4}, {3, 17, 39, 3}};  // B, T, C, NH
  uint64_t state = 7;
  auto next = [&state]() {  // uniform in [-1, 1), any fixed sequence will do
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1ULL << 23) - 1.0);
  };
  for (const auto& sh : shapes) {
    const int B = sh[0], T = sh[1], C = sh[2], NH = sh[3];
    const size_t n_att = static_cast<size_t>(B) * NH * T * T;
    std::vector<float> qkv(static_cast<size_t>(B) * T * 3 * C), dout(static_cast<size_t>(B) * T * C);
    for (float& x : qkv) x = next();
    for (float& x : dout) x = next();
    std::vector<float> out2(dout.size()), out3(dout.size()), pre2(n_att), pre3(n_att), att2(n_att), att3(n_att);
    kernels::attention_forward_v2(out2.data(), pre2.data(), att2.data(), qkv.data(), B, T, C, NH);
    kernels::attention_forward_v3(out3.data(), pre3.data(), att3.data(), qkv.data(), B, T, C, NH);
    INFO("B=" << B << " T=" << T << " C=" << C << " NH=" << NH);
    REQUIRE(out3 == out2);
    REQUIRE(att3 == att2);
    REQUIRE(pre3 == pre2);
    std::vector<float> d2(qkv.size()), d3(qkv.size()), dp2(n_att), dp3(n_att), da2(n_att), da3(n_att);
    kernels::attention_backward_v2(d2.data(), dp2.data(), da2.data(), dout.data(), qkv.data(), att2.data(), B, T, C, NH);
    kernels::attention_backward_v3(d3.data(), dp3.data(), da3.data(), dout.data(), qkv.data(), att2.data(), B, T, C, NH);
    REQUIRE(d3 == d2);
  }
}

// attention v4 takes 4 rows per register tile; each element still adds v3's terms in v3's
// order, so the bits must match. Shapes: the GPT's (hs = 32, T = 64: whole tiles), ragged T
// (tiles of 1-3 rows at the end), hs = 13 (a scalar tail), hs = 80 (more registers per row than
// a tile holds on AVX-512), T = 1, and T = 70 (a key block past the 4 of one score tile).
TEST_CASE("attention v4 gives v3's bits, forward and backward", "[kernels][gptops]") {
  const int shapes[][4] = {{12, 64, 128, 4}, {3, 17, 39, 3}, {2, 23, 160, 2}, {2, 1, 32, 2}, {1, 70, 64, 2},
                           {2, 6, 8, 8}};  // B, T, C, NH
  uint64_t state = 11;
  auto next = [&state]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1ULL << 23) - 1.0);
  };
  auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {  // -0 != +0 here
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  for (const auto& sh : shapes) {
    const int B = sh[0], T = sh[1], C = sh[2], NH = sh[3];
    const size_t n_att = static_cast<size_t>(B) * NH * T * T;
    std::vector<float> qkv(static_cast<size_t>(B) * T * 3 * C), dout(static_cast<size_t>(B) * T * C);
    for (float& x : qkv) x = 2.0f * next();
    for (float& x : dout) x = next();
    std::vector<float> out3(dout.size()), out4(dout.size()), pre3(n_att), pre4(n_att), att3(n_att), att4(n_att);
    kernels::attention_forward_v3(out3.data(), pre3.data(), att3.data(), qkv.data(), B, T, C, NH);
    kernels::attention_forward_v4(out4.data(), pre4.data(), att4.data(), qkv.data(), B, T, C, NH);
    INFO("B=" << B << " T=" << T << " C=" << C << " NH=" << NH);
    REQUIRE(same_bits(out4, out3));
    REQUIRE(same_bits(att4, att3));  // +0 above the diagonal, as v3 writes it
    REQUIRE(same_bits(pre4, pre3));
    std::vector<float> d3(qkv.size(), 7.0f), d4(qkv.size(), -7.0f), dp3(n_att), dp4(n_att), da3(n_att), da4(n_att);
    kernels::attention_backward_v3(d3.data(), dp3.data(), da3.data(), dout.data(), qkv.data(), att3.data(), B, T, C, NH);
    kernels::attention_backward_v4(d4.data(), dp4.data(), da4.data(), dout.data(), qkv.data(), att3.data(), B, T, C, NH);
    REQUIRE(same_bits(d4, d3));  // every element assigned (the buffers started different)
    REQUIRE(same_bits(dp4, dp3));
    REQUIRE(same_bits(da4, da3));
  }
}

TEST_CASE("GPT-op versions are found by number, vN and name", "[kernels][gptops]") {
  REQUIRE(kernels::attention_version("heads-parallel").number == 2);
  REQUIRE(kernels::attention_backward_version("heads-interleaved").number == 3);
  REQUIRE(kernels::attention_backward_version("v1").number == 1);
  REQUIRE(kernels::layernorm_backward_version("2").number == 2);
  REQUIRE(kernels::adamw_version("simd").fn == &kernels::adamw_update_v2);
  REQUIRE(kernels::linear_version("sgemm").fn == &kernels::linear_forward_v2);
  REQUIRE_THROWS_AS(kernels::gelu_version("v3"), std::invalid_argument);
  REQUIRE_THROWS_AS(kernels::crossentropy_version("fast"), std::invalid_argument);
}

// ---- the backends are tables over the ladders -------------------------------------------------------

TEST_CASE("the naive and cpu backends run the rungs they name, bit for bit", "[kernels][gptops][gpt]") {
  // naive = the v1s, cpu = the v2s (layernorm v4): the same inputs give the same bits
  // through the backend as through the rung.
  const int N = 45, C = 77, OC = 29;
  nn::Rng rng(9);
  std::vector<float> x(N * C), w(OC * C), bias(OC), lw(C), lb(C);
  for (float& v : x) v = rng.normal();
  for (float& v : w) v = rng.normal();
  for (float& v : bias) v = rng.normal();
  for (float& v : lw) v = 1.0f + 0.1f * rng.normal();
  for (float& v : lb) v = rng.normal();
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (const char* name : {"naive", "cpu"}) {
    const bool naive = std::string(name) == "naive";
    auto be = gpt::make_backend(name);
    std::vector<float> o1(N * OC), o2(N * OC);
    be->matmul_forward(o1.data(), x.data(), w.data(), bias.data(), N, C, OC);
    (naive ? kernels::linear_forward_v1<float> : kernels::linear_forward_v2)(o2.data(), x.data(), w.data(),
                                                                             bias.data(), N, C, OC);
    CHECK(same(o1, o2));
    std::vector<float> l1(N * C), l2(N * C), m1(N), m2(N), r1(N), r2(N);
    be->layernorm_forward(l1.data(), m1.data(), r1.data(), x.data(), lw.data(), lb.data(), N, C);
    (naive ? kernels::layernorm_forward_v1<float> : kernels::layernorm_forward_v4)(l2.data(), m2.data(), r2.data(),
                                                                                   x.data(), lw.data(), lb.data(), N, C);
    CHECK(same(l1, l2));
    CHECK(same(r1, r2));
    std::vector<float> g1(N * C), g2(N * C);
    be->gelu_forward(g1.data(), x.data(), N * C);
    (naive ? kernels::gelu_forward_v1<float> : kernels::gelu_forward_v2)(g2.data(), x.data(), N * C);
    CHECK(same(g1, g2));
  }
}
