// kernels/flash_attention.h: causal grouped-query attention, the reference (v1) and the flash
// rungs. v1 is checked against kernels/attention.h's v1 (multi-head: the same bits) and
// against multi-head attention over repeated KV heads (grouped-query: what GQA means); v1 and
// v2's backward against central finite differences in double; every rung against v1 in float
// at sizes that cross the tiles; v3 gives the same bits for 1 and 2 threads.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention.h"
#include "kernels/flash_attention.h"
#include "kernels/harness.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"
#include "tests/gradcheck_test_util.h"

namespace {

struct Dims {
  int B, T, C, NH, NKV;
  int hs() const { return C / NH; }
  size_t n_qkv() const { return static_cast<size_t>(B) * T * kernels::flash_qkv_channels(C, NH, NKV); }
  size_t n_out() const { return static_cast<size_t>(B) * T * C; }
  size_t n_lse() const { return static_cast<size_t>(B) * NH * T; }
};

// The multi-head qkv (B, T, 3C) that GQA means: KV head g copied to every query head of its
// group (Hugging Face's repeat_kv).
std::vector<double> repeat_kv(const std::vector<double>& qkv, const Dims& d) {
  const int hs = d.hs(), group = d.NH / d.NKV;
  const size_t C3g = static_cast<size_t>(kernels::flash_qkv_channels(d.C, d.NH, d.NKV));
  std::vector<double> full(static_cast<size_t>(d.B) * d.T * 3 * d.C);
  for (size_t bt = 0; bt < static_cast<size_t>(d.B) * d.T; ++bt) {
    const double* src = qkv.data() + bt * C3g;
    double* dst = full.data() + bt * 3 * d.C;
    for (int c = 0; c < d.C; ++c) dst[c] = src[c];
    for (int h = 0; h < d.NH; ++h) {
      const int g = h / group;
      for (int i = 0; i < hs; ++i) {
        dst[d.C + h * hs + i] = src[d.C + g * hs + i];
        dst[2 * d.C + h * hs + i] = src[d.C + d.NKV * hs + g * hs + i];
      }
    }
  }
  return full;
}

}  // namespace

TEST_CASE("flash attention v1 is kernels/attention.h's v1 when NKV == NH, bit for bit", "[kernels][flash]") {
  const Dims d = GENERATE(Dims{2, 5, 6, 2, 2}, Dims{1, 9, 16, 4, 4});
  CAPTURE(d.B, d.T, d.C, d.NH);
  nn::Rng rng(31);
  const auto qkv = testing::normal_vec(rng, d.n_qkv());
  const auto dout = testing::normal_vec(rng, d.n_out());
  const size_t natt = static_cast<size_t>(d.B) * d.NH * d.T * d.T;
  std::vector<double> out(d.n_out()), preatt(natt), att(natt), dqkv(d.n_qkv()), dpre(natt), datt(natt);
  kernels::attention_forward_v1(out.data(), preatt.data(), att.data(), qkv.data(), d.B, d.T, d.C, d.NH);
  kernels::attention_backward_v1(dqkv.data(), dpre.data(), datt.data(), dout.data(), qkv.data(), att.data(), d.B,
                                 d.T, d.C, d.NH);
  std::vector<double> fout(d.n_out(), NAN), lse(d.n_lse(), NAN), fdqkv(d.n_qkv(), NAN);
  kernels::flash_attention_forward_v1(fout.data(), lse.data(), qkv.data(), d.B, d.T, d.C, d.NH, d.NKV);
  kernels::flash_attention_backward_v1(fdqkv.data(), dout.data(), qkv.data(), fout.data(), lse.data(), d.B, d.T,
                                       d.C, d.NH, d.NKV);
  REQUIRE(fout == out);
  REQUIRE(fdqkv == dqkv);
  // lse is log sum exp of the row's scores: att = exp(preatt - lse) on and below the diagonal
  for (int bh = 0; bh < d.B * d.NH; ++bh) {
    for (int t = 0; t < d.T; ++t) {
      for (int t2 = 0; t2 <= t; ++t2) {
        const size_t at = (static_cast<size_t>(bh) * d.T + t) * d.T + t2;
        REQUIRE(std::fabs(std::exp(preatt[at] - lse[static_cast<size_t>(bh) * d.T + t]) - att[at]) <= 1e-14);
      }
    }
  }
}

TEST_CASE("flash attention v1 with grouped KV heads is multi-head attention over repeated KV heads",
          "[kernels][flash]") {
  const Dims d = GENERATE(Dims{2, 6, 8, 4, 2}, Dims{1, 7, 12, 3, 1}, Dims{1, 5, 16, 8, 4});
  CAPTURE(d.B, d.T, d.C, d.NH, d.NKV);
  nn::Rng rng(32);
  const auto qkv = testing::normal_vec(rng, d.n_qkv());
  const auto dout = testing::normal_vec(rng, d.n_out());
  const auto full = repeat_kv(qkv, d);
  const size_t natt = static_cast<size_t>(d.B) * d.NH * d.T * d.T;
  std::vector<double> out(d.n_out()), preatt(natt), att(natt), dfull(full.size()), dpre(natt), datt(natt);
  kernels::attention_forward_v1(out.data(), preatt.data(), att.data(), full.data(), d.B, d.T, d.C, d.NH);
  kernels::attention_backward_v1(dfull.data(), dpre.data(), datt.data(), dout.data(), full.data(), att.data(), d.B,
                                 d.T, d.C, d.NH);
  std::vector<double> fout(d.n_out(), NAN), lse(d.n_lse(), NAN), fdqkv(d.n_qkv(), NAN);
  kernels::flash_attention_forward_v1(fout.data(), lse.data(), qkv.data(), d.B, d.T, d.C, d.NH, d.NKV);
  kernels::flash_attention_backward_v1(fdqkv.data(), dout.data(), qkv.data(), fout.data(), lse.data(), d.B, d.T,
                                       d.C, d.NH, d.NKV);
  REQUIRE(fout == out);  // the same operations on the same numbers
  // dq is the repeated model's dq; dk, dv of KV head g are the sums over its group's copies
  const int hs = d.hs(), group = d.NH / d.NKV;
  const size_t C3g = static_cast<size_t>(kernels::flash_qkv_channels(d.C, d.NH, d.NKV));
  for (size_t bt = 0; bt < static_cast<size_t>(d.B) * d.T; ++bt) {
    const double* g_ = fdqkv.data() + bt * C3g;
    const double* f = dfull.data() + bt * 3 * d.C;
    for (int c = 0; c < d.C; ++c) REQUIRE(g_[c] == f[c]);
    for (int g = 0; g < d.NKV; ++g) {
      for (int i = 0; i < hs; ++i) {
        double dk = 0.0, dv = 0.0;
        for (int h = g * group; h < (g + 1) * group; ++h) {
          dk += f[d.C + h * hs + i];
          dv += f[2 * d.C + h * hs + i];
        }
        CAPTURE(bt, g, i);
        REQUIRE(std::fabs(g_[d.C + g * hs + i] - dk) <= 1e-12 * (1.0 + std::fabs(dk)));
        REQUIRE(std::fabs(g_[d.C + d.NKV * hs + g * hs + i] - dv) <= 1e-12 * (1.0 + std::fabs(dv)));
      }
    }
  }
}

TEST_CASE("flash attention backward v1 and v2 match finite differences (double)", "[kernels][flash][gradcheck]") {
  // T = 19 crosses v2's 16-row tiles; NKV = 1 is multi-query, 2 of 4 grouped-query
  const Dims d = GENERATE(Dims{2, 5, 8, 4, 2}, Dims{1, 19, 6, 3, 1}, Dims{1, 7, 8, 2, 2});
  const int version = GENERATE(1, 2);
  CAPTURE(version, d.B, d.T, d.C, d.NH, d.NKV);
  auto fwd = version == 1 ? &kernels::flash_attention_forward_v1<double> : &kernels::flash_attention_forward_v2<double>;
  auto bwd =
      version == 1 ? &kernels::flash_attention_backward_v1<double> : &kernels::flash_attention_backward_v2<double>;
  nn::Rng rng(33);
  auto qkv = testing::normal_vec(rng, d.n_qkv());
  const auto r = testing::normal_vec(rng, d.n_out());  // L = sum(out * R): dL/dout = R
  std::vector<double> out(d.n_out()), lse(d.n_lse());
  auto loss = [&] {
    fwd(out.data(), lse.data(), qkv.data(), d.B, d.T, d.C, d.NH, d.NKV);
    return testing::dot(out, r);
  };
  loss();
  std::vector<double> dqkv(qkv.size(), NAN);
  bwd(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), d.B, d.T, d.C, d.NH, d.NKV);
  const auto res = nn::check_gradient(loss, qkv, dqkv);
  INFO(res.report);
  CAPTURE(res.max_abs_err, res.max_rel_err);
  REQUIRE(res.ok);
  double norm = 0.0;
  for (double g : dqkv) norm += g * g;
  REQUIRE(norm > 1e-2);  // not passing by being zero
}

TEST_CASE("flash attention rungs match v1 in float, across tile edges", "[kernels][flash]") {
  namespace h = kernels::harness;
  // T = 1; T = 67 and 130 cross v3's 64-row and 32-key tiles and v2's 16; hs = 20 is not a
  // whole number of registers, hs = 64 is the GPT's
  const Dims d = GENERATE(Dims{2, 1, 8, 2, 1}, Dims{2, 67, 40, 2, 2}, Dims{1, 130, 256, 4, 1},
                          Dims{3, 33, 48, 6, 3}, Dims{1, 70, 128, 2, 2});
  CAPTURE(d.B, d.T, d.C, d.NH, d.NKV);
  std::vector<float> qkv(d.n_qkv()), dout(d.n_out());
  // q and k in [-2, 2]: scores up to ~hs/sqrt(hs), softmax rows peaked, maxima that move
  // from tile to tile (the online rescaling matters)
  h::fill_random(qkv, 41, -2.0f, 2.0f);
  h::fill_random(dout, 42);
  std::vector<float> out1(d.n_out()), lse1(d.n_lse()), dqkv1(d.n_qkv());
  kernels::flash_attention_forward_v1(out1.data(), lse1.data(), qkv.data(), d.B, d.T, d.C, d.NH, d.NKV);
  kernels::flash_attention_backward_v1(dqkv1.data(), dout.data(), qkv.data(), out1.data(), lse1.data(), d.B, d.T,
                                       d.C, d.NH, d.NKV);
  const std::vector<double> want_out(out1.begin(), out1.end()), want_lse(lse1.begin(), lse1.end()),
      want_dqkv(dqkv1.begin(), dqkv1.end());
  const auto& fwds = kernels::flash_attention_versions();
  const auto& bwds = kernels::flash_attention_backward_versions();
  REQUIRE(fwds.size() == bwds.size());
  for (size_t v = 1; v < fwds.size(); ++v) {
    INFO("v1 vs " << fwds[v].id());
    // NaN-filled, misaligned, guarded: every element written, nothing past the end
    h::GuardedBuffer out(d.n_out()), lse(d.n_lse()), dqkv(d.n_qkv());
    fwds[v].fn(out.data(), lse.data(), qkv.data(), d.B, d.T, d.C, d.NH, d.NKV);
    bwds[v].fn(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), d.B, d.T, d.C, d.NH, d.NKV);
    REQUIRE(out.guard_damage("out").empty());
    REQUIRE(lse.guard_damage("lse").empty());
    REQUIRE(dqkv.guard_damage("dqkv").empty());
    for (const auto& [name, got, want] :
         {std::tuple{"out", out.span(), std::span<const double>(want_out)},
          std::tuple{"lse", lse.span(), std::span<const double>(want_lse)},
          std::tuple{"dqkv", dqkv.span(), std::span<const double>(want_dqkv)}}) {
      const h::Check c = h::compare(name, got, want, {2e-5, 2e-4});
      INFO(c.report);
      CHECK(c.ok());
    }
  }
}

TEST_CASE("flash attention v3 gives the same bits for 1 and 2 threads", "[kernels][flash]") {
  const Dims d{2, 150, 128, 4, 2};
  std::vector<float> qkv(d.n_qkv()), dout(d.n_out());
  kernels::harness::fill_random(qkv, 51, -2.0f, 2.0f);
  kernels::harness::fill_random(dout, 52);
  std::vector<float> out[2], lse[2], dqkv[2];
  const int saved = omp_get_max_threads();
  for (int i = 0; i < 2; ++i) {
    omp_set_num_threads(i + 1);
    out[i].assign(d.n_out(), NAN);
    lse[i].assign(d.n_lse(), NAN);
    dqkv[i].assign(d.n_qkv(), NAN);
    kernels::flash_attention_forward_v3(out[i].data(), lse[i].data(), qkv.data(), d.B, d.T, d.C, d.NH, d.NKV);
    kernels::flash_attention_backward_v3(dqkv[i].data(), dout.data(), qkv.data(), out[i].data(), lse[i].data(), d.B,
                                         d.T, d.C, d.NH, d.NKV);
  }
  omp_set_num_threads(saved);
  REQUIRE(out[0] == out[1]);
  REQUIRE(lse[0] == lse[1]);
  REQUIRE(dqkv[0] == dqkv[1]);
}

TEST_CASE("flash attention scratch: O(T^2) for v1, O(T) or constant for the flash rungs", "[kernels][flash]") {
  for (const bool backward : {false, true}) {
    INFO("backward " << backward);
    const auto bytes = [&](int v, int T) { return kernels::flash_attention_scratch_bytes(v, backward, 2, T, 256, 4, 2, 2); };
    CHECK(bytes(1, 2048) == 4 * bytes(1, 1024));  // the (T, T) matrices
    CHECK(bytes(2, 2048) <= 2 * bytes(2, 1024));  // tiles, and the backward's D (T)
    CHECK(bytes(3, 2048) <= 2 * bytes(3, 1024));
    CHECK(bytes(3, 4096) < bytes(1, 4096) / 100);
  }
}

TEST_CASE("flash attention rejects bad sizes", "[kernels][flash]") {
  std::vector<float> buf(4096, 0.0f);
  float* p = buf.data();
  const Dims bad = GENERATE(Dims{1, 4, 6, 4, 4},  // C % NH != 0
                            Dims{1, 4, 8, 4, 3},  // NH % NKV != 0
                            Dims{0, 4, 8, 2, 2}, Dims{1, 0, 8, 2, 2}, Dims{1, 4, 8, 2, 0}, Dims{1, 4, 8, 2, -1});
  CAPTURE(bad.B, bad.T, bad.C, bad.NH, bad.NKV);
  for (const auto& v : kernels::flash_attention_versions()) {
    REQUIRE_THROWS_AS(v.fn(p, p, p, bad.B, bad.T, bad.C, bad.NH, bad.NKV), std::invalid_argument);
  }
  for (const auto& v : kernels::flash_attention_backward_versions()) {
    REQUIRE_THROWS_AS(v.fn(p, p, p, p, p, bad.B, bad.T, bad.C, bad.NH, bad.NKV), std::invalid_argument);
  }
}
