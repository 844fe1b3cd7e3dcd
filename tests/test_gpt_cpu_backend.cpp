// tests/test_gpt_cpu_backend.cpp: the cpu backend (gpt/backend_cpu.cpp), op by op, against
// the nn/ plain loops it must agree with (nn/transformer.h, nn/attention.h, nn/ops.h), at
// the nanoGPT CPU config's sizes and at odd ones (not multiples of the SIMD width). Also the
// gradient rule (what accumulates, what is assigned) and determinism: bit-identical results
// run after run and for 1 and 2 OpenMP threads.
//
// Tolerance: |got - ref| <= atol + rtol |ref|, rtol = 1e-5 and the atol stated per check
// (float rounding of sums of up to 4C terms of O(1) values); NaN never passes.
// A hidden [.bench] test times every op against the reference at the training sizes.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "nn/attention.h"
#include "nn/ops.h"
#include "nn/rng.h"
#include "nn/transformer.h"

namespace {

using Vec = std::vector<float>;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Vec randn(nn::Rng& rng, size_t n, float scale = 1.0f) {
  Vec v(n);
  for (float& x : v) x = scale * rng.normal();
  return v;
}

size_t sz(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) { return static_cast<size_t>(a * b * c * d); }

// |got - ref| <= atol + rtol |ref| element by element; NaN fails; the first mismatches
// (index, got, ref) go into the failure message.
void check_close(const std::string& what, const Vec& got, const Vec& ref, float atol, float rtol = 1e-5f) {
  REQUIRE(got.size() == ref.size());
  std::ostringstream os;
  int bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const bool ok = err <= atol + rtol * std::fabs(static_cast<double>(ref[i]));  // false for NaN
    if (!ok) {
      if (bad < 5) os << "  [" << i << "] got " << got[i] << " want " << ref[i] << "\n";
      ++bad;
    }
    if (err > worst) worst = err;
  }
  INFO(what << ": " << bad << " of " << got.size() << " outside atol " << atol << " + rtol " << rtol
            << " |ref| (max abs err " << worst << ")\n"
            << os.str());
  CHECK(bad == 0);
}

bool bit_equal(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> random_ids(nn::Rng& rng, size_t n, int V) {
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
  return ids;
}

// Runs f with the OpenMP team size set to `threads`, then restores it.
template <typename Fn>
void with_threads(int threads, Fn&& f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(saved);
}

struct RowDims {
  const char* name;
  int N, C, OC;
};
// the nanoGPT CPU config (N = 12 x 64, C = 128, the four matmul shapes and the head), and
// odd sizes
const RowDims kRowDims[] = {
    {"N=768 C=128 OC=384", 768, 128, 384}, {"N=768 C=128 OC=512", 768, 128, 512},
    {"N=768 C=512 OC=128", 768, 512, 128}, {"N=768 C=128 OC=65", 768, 128, 65},
    {"N=13 C=20 OC=60", 13, 20, 60},       {"N=13 C=20 OC=3", 13, 20, 3},
    {"N=1 C=5 OC=7", 1, 5, 7},
};

struct AttDims {
  const char* name;
  int B, T, C, NH;
};
const AttDims kAttDims[] = {
    {"B=12 T=64 C=128 NH=4", 12, 64, 128, 4},
    {"B=2 T=7 C=20 NH=2", 2, 7, 20, 2},
    {"B=3 T=13 C=20 NH=4", 3, 13, 20, 4},
    {"B=1 T=1 C=8 NH=1", 1, 1, 8, 1},
    {"B=2 T=33 C=96 NH=2", 2, 33, 96, 2},
};

}  // namespace

// ---- encoder ----------------------------------------------------------------------------------
TEST_CASE("cpu backend: encoder forward and backward match nn::encoder_*", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  struct D {
    int B, T, C, V;
  };
  for (const D d : {D{12, 64, 128, 65}, D{3, 7, 20, 11}, D{1, 1, 3, 2}}) {
    CAPTURE(d.B, d.T, d.C, d.V);
    nn::Rng rng(42);
    const auto ids = random_ids(rng, sz(d.B, d.T), d.V);
    const Vec wte = randn(rng, sz(d.V, d.C)), wpe = randn(rng, sz(d.T, d.C));
    Vec out(sz(d.B, d.T, d.C), kNaN), ref(out.size());
    be->encoder_forward(out.data(), ids.data(), wte.data(), wpe.data(), d.B, d.T, d.C, d.V);
    nn::encoder_forward(ref.data(), ids.data(), wte.data(), wpe.data(), d.B, d.T, d.C, d.V);
    CHECK(bit_equal(out, ref));  // one add per element: exact

    // backward accumulates into dwte, dwpe (prefilled): same order as the loops, so exact
    const Vec dout = randn(rng, out.size());
    Vec dwte = randn(rng, wte.size()), dwpe = randn(rng, wpe.size());
    Vec rdwte = dwte, rdwpe = dwpe;
    be->encoder_backward(dwte.data(), dwpe.data(), dout.data(), ids.data(), d.B, d.T, d.C, d.V);
    nn::encoder_backward(rdwte.data(), rdwpe.data(), dout.data(), ids.data(), d.B, d.T, d.C);
    CHECK(bit_equal(dwte, rdwte));
    CHECK(bit_equal(dwpe, rdwpe));
  }
  SECTION("a bad token id is an nn::Error") {
    const std::vector<int32_t> ids = {0, 5};
    Vec wte(4 * 2), wpe(2 * 2), out(4);
    CHECK_THROWS(be->encoder_forward(out.data(), ids.data(), wte.data(), wpe.data(), 1, 2, 2, 4));
  }
}

// ---- layernorm ----------------------------------------------------------------------------------
TEST_CASE("cpu backend: layernorm forward and backward match nn::layernorm_*", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  for (const RowDims& d : kRowDims) {
    CAPTURE(d.name);
    nn::Rng rng(7);
    const Vec inp = randn(rng, sz(d.N, d.C), 2.0f), w = randn(rng, sz(d.C)), b = randn(rng, sz(d.C));
    for (size_t i = 0; i < inp.size(); ++i) const_cast<float&>(inp[i]) += 0.5f;  // a nonzero mean
    Vec out(inp.size(), kNaN), mean(sz(d.N), kNaN), rstd(sz(d.N), kNaN);
    Vec rout(inp.size()), rmean(sz(d.N)), rrstd(sz(d.N));
    be->layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), d.N, d.C);
    nn::layernorm_forward(rout.data(), rmean.data(), rrstd.data(), inp.data(), w.data(), b.data(), d.N, d.C);
    check_close("ln out", out, rout, 2e-5f);
    check_close("ln mean", mean, rmean, 1e-6f);
    check_close("ln rstd", rstd, rrstd, 1e-6f);

    // backward: dinp ACCUMULATES (prefilled), dweight/dbias accumulate
    const Vec dout = randn(rng, inp.size());
    Vec dinp = randn(rng, inp.size()), dw = randn(rng, sz(d.C)), db = randn(rng, sz(d.C));
    Vec rdinp = dinp, rdw = dw, rdb = db;
    be->layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), rmean.data(),
                           rrstd.data(), d.N, d.C);
    nn::layernorm_backward(rdinp.data(), rdw.data(), rdb.data(), dout.data(), inp.data(), w.data(), rmean.data(),
                           rrstd.data(), d.N, d.C);
    check_close("ln dinp", dinp, rdinp, 5e-5f);
    // sums over N = 768 rows of O(1) terms: a few float ulps of ~30
    check_close("ln dweight", dw, rdw, 1e-4f);
    check_close("ln dbias", db, rdb, 1e-4f);
  }
}

TEST_CASE("cpu backend: fused residual + layernorm matches residual then layernorm", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  for (const RowDims& d : kRowDims) {
    CAPTURE(d.name);
    nn::Rng rng(8);
    const Vec a = randn(rng, sz(d.N, d.C)), b = randn(rng, sz(d.N, d.C)), w = randn(rng, sz(d.C)),
              bias = randn(rng, sz(d.C));
    Vec res(a.size(), kNaN), ln(a.size(), kNaN), mean(sz(d.N), kNaN), rstd(sz(d.N), kNaN);
    be->residual_layernorm_forward(res.data(), ln.data(), mean.data(), rstd.data(), a.data(), b.data(), w.data(),
                                   bias.data(), d.N, d.C);
    Vec rres(a.size()), rln(a.size()), rmean(sz(d.N)), rrstd(sz(d.N));
    nn::residual_forward(rres.data(), a.data(), b.data(), static_cast<int64_t>(a.size()));
    nn::layernorm_forward(rln.data(), rmean.data(), rrstd.data(), rres.data(), w.data(), bias.data(), d.N, d.C);
    CHECK(bit_equal(res, rres));
    check_close("ln out", ln, rln, 2e-5f);
    check_close("mean", mean, rmean, 1e-6f);
    check_close("rstd", rstd, rrstd, 1e-6f);
  }
}

// ---- matmul -----------------------------------------------------------------------------------
TEST_CASE("cpu backend: matmul forward and backward match nn::linear_*_loops", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  for (const RowDims& d : kRowDims) {
    for (const bool with_bias : {true, false}) {
      CAPTURE(d.name, with_bias);
      nn::Rng rng(9);
      const Vec inp = randn(rng, sz(d.N, d.C)), w = randn(rng, sz(d.OC, d.C), 0.1f), bias = randn(rng, sz(d.OC));
      const float* bp = with_bias ? bias.data() : nullptr;
      Vec out(sz(d.N, d.OC), kNaN), ref(out.size());
      be->matmul_forward(out.data(), inp.data(), w.data(), bp, d.N, d.C, d.OC);
      nn::linear_forward_loops(ref.data(), inp.data(), w.data(), bp, d.N, d.C, d.OC);
      check_close("out", out, ref, 2e-5f);

      // dinp ASSIGNED (NaN prefill must vanish), dweight and dbias ACCUMULATE (prefilled)
      const Vec dout = randn(rng, out.size());
      Vec dinp(inp.size(), kNaN), dw = randn(rng, w.size()), db = randn(rng, bias.size());
      Vec rdinp(inp.size()), rdw = dw, rdb = db;
      be->matmul_backward(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), inp.data(),
                          w.data(), d.N, d.C, d.OC);
      nn::linear_backward_loops(rdinp.data(), rdw.data(), with_bias ? rdb.data() : nullptr, dout.data(),
                                inp.data(), w.data(), d.N, d.C, d.OC);
      check_close("dinp", dinp, rdinp, 2e-5f);
      check_close("dweight", dw, rdw, 2e-4f);  // sums over N = 768 rows
      check_close("dbias", db, rdb, 2e-4f);

      // dinp = nullptr: skipped, the parameter gradients as before
      Vec dw2 = randn(rng, w.size()), rdw2 = dw2;
      be->matmul_backward(nullptr, dw2.data(), nullptr, dout.data(), inp.data(), w.data(), d.N, d.C, d.OC);
      nn::linear_backward_loops<float>(nullptr, rdw2.data(), nullptr, dout.data(), inp.data(), w.data(), d.N, d.C,
                                       d.OC);
      check_close("dweight (no dinp)", dw2, rdw2, 2e-4f);
    }
  }
}

TEST_CASE("cpu backend: fused matmul + GELU matches matmul then GELU", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  for (const RowDims& d : kRowDims) {
    CAPTURE(d.name);
    nn::Rng rng(10);
    const Vec inp = randn(rng, sz(d.N, d.C)), w = randn(rng, sz(d.OC, d.C), 0.2f), bias = randn(rng, sz(d.OC));
    Vec pre(sz(d.N, d.OC), kNaN), out(pre.size(), kNaN), rpre(pre.size()), rout(pre.size());
    be->matmul_gelu_forward(pre.data(), out.data(), inp.data(), w.data(), bias.data(), d.N, d.C, d.OC);
    nn::linear_forward_loops(rpre.data(), inp.data(), w.data(), bias.data(), d.N, d.C, d.OC);
    nn::gelu_forward(rout.data(), rpre.data(), static_cast<int64_t>(rpre.size()));
    check_close("pre", pre, rpre, 2e-5f);
    check_close("gelu", out, rout, 2e-5f);
  }
}

// ---- attention --------------------------------------------------------------------------------
TEST_CASE("cpu backend: attention forward and backward match nn::attention_*", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  for (const AttDims& d : kAttDims) {
    CAPTURE(d.name);
    nn::Rng rng(11);
    const Vec qkv = randn(rng, sz(d.B, d.T, 3 * d.C));
    const size_t natt = sz(d.B, d.NH, d.T, d.T);
    Vec out(sz(d.B, d.T, d.C), kNaN), preatt(natt, kNaN), att(natt, kNaN);
    Vec rout(out.size()), rpreatt(natt), ratt(natt);
    be->attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), d.B, d.T, d.C, d.NH);
    nn::attention_forward(rout.data(), rpreatt.data(), ratt.data(), qkv.data(), d.B, d.T, d.C, d.NH);
    check_close("out", out, rout, 1e-5f);
    check_close("preatt", preatt, rpreatt, 1e-5f);
    check_close("att", att, ratt, 1e-6f);

    // dqkv ASSIGNED: a NaN prefill must not survive
    const Vec dout = randn(rng, out.size());
    Vec dqkv(qkv.size(), kNaN), dpreatt(natt, kNaN), datt(natt, kNaN);
    Vec rdqkv(qkv.size()), rdpreatt(natt), rdatt(natt);
    be->attention_backward(dqkv.data(), dpreatt.data(), datt.data(), dout.data(), qkv.data(), ratt.data(), d.B,
                           d.T, d.C, d.NH);
    nn::attention_backward(rdqkv.data(), rdpreatt.data(), rdatt.data(), dout.data(), qkv.data(), ratt.data(), d.B,
                           d.T, d.C, d.NH);
    check_close("dqkv", dqkv, rdqkv, 2e-5f);
    // dpreatt and datt are scratch (gpt/backend.h) that this backend leaves alone: its
    // backward (kernels attention v5) keeps its coefficients itself and writes no map
    CHECK(std::all_of(dpreatt.begin(), dpreatt.end(), [](float x) { return std::isnan(x); }));
    CHECK(std::all_of(datt.begin(), datt.end(), [](float x) { return std::isnan(x); }));
  }
  CHECK_FALSE(be->keeps_preatt());  // so the model allocates no preatt and passes nullptr
  SECTION("C % NH != 0 is an nn::Error") {
    Vec x(3 * 10), o(10), p(1), a(1);
    CHECK_THROWS(be->attention_forward(o.data(), p.data(), a.data(), x.data(), 1, 1, 10, 3));
  }
}

// ---- element-wise -----------------------------------------------------------------------------
TEST_CASE("cpu backend: GELU, residual and scale match the loops", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  for (const int64_t n : {int64_t{768} * 512, int64_t{13}, int64_t{1}, int64_t{100003}}) {
    CAPTURE(n);
    nn::Rng rng(12);
    Vec x = randn(rng, sz(n), 3.0f);
    if (n > 8) {  // the far tails too: gelu -> 0 and -> x, gelu' -> 0 and -> 1
      x[0] = -30.0f;
      x[1] = 30.0f;
      x[2] = 0.0f;
      x[3] = -9.0f;
    }
    Vec out(sz(n), kNaN), ref(sz(n));
    be->gelu_forward(out.data(), x.data(), n);
    nn::gelu_forward(ref.data(), x.data(), n);
    check_close("gelu", out, ref, 2e-6f);

    const Vec dout = randn(rng, sz(n));
    Vec dinp(sz(n), kNaN), rdinp(sz(n));
    be->gelu_backward(dinp.data(), dout.data(), x.data(), n);
    nn::gelu_backward(rdinp.data(), dout.data(), x.data(), n);
    check_close("gelu backward", dinp, rdinp, 5e-6f);

    Vec res(sz(n), kNaN), rres(sz(n));
    be->residual_forward(res.data(), x.data(), dout.data(), n);
    nn::residual_forward(rres.data(), x.data(), dout.data(), n);
    CHECK(bit_equal(res, rres));

    Vec sc = x;
    be->scale(sc.data(), 0.37f, n);
    Vec rsc = x;
    for (float& v : rsc) v *= 0.37f;
    CHECK(bit_equal(sc, rsc));
  }
}

TEST_CASE("cpu backend: dropout draws exactly nn::dropout_forward's mask", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  for (const int64_t n : {int64_t{768} * 128, int64_t{13}}) {
    for (const float p : {0.0f, 0.1f, 0.5f}) {
      CAPTURE(n, p);
      nn::Rng rng(13);
      const Vec x = randn(rng, sz(n));
      Vec out(sz(n), kNaN), mask(sz(n), kNaN), rout(sz(n)), rmask(sz(n));
      be->dropout_forward(out.data(), mask.data(), x.data(), n, p, 1234);
      nn::dropout_forward(rout.data(), rmask.data(), x.data(), n, p, 1234);
      CHECK(bit_equal(mask, rmask));
      CHECK(bit_equal(out, rout));
      // in place (out aliases inp)
      Vec inplace = x, mask2(sz(n));
      be->dropout_forward(inplace.data(), mask2.data(), inplace.data(), n, p, 1234);
      CHECK(bit_equal(inplace, rout));

      const Vec dout = randn(rng, sz(n));
      Vec dinp(sz(n), kNaN), rdinp(sz(n));
      be->dropout_backward(dinp.data(), dout.data(), mask.data(), n);
      nn::dropout_backward(rdinp.data(), dout.data(), rmask.data(), n);
      CHECK(bit_equal(dinp, rdinp));
    }
  }
  Vec x(4), out(4), mask(4);
  CHECK_THROWS(be->dropout_forward(out.data(), mask.data(), x.data(), 4, 1.0f, 1));
}

// ---- cross-entropy ------------------------------------------------------------------------------
TEST_CASE("cpu backend: cross-entropy matches nn::softmax_cross_entropy_*", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  struct D {
    int N, V;
  };
  for (const D d : {D{768, 65}, D{13, 7}, D{5, 64}, D{1, 1}}) {
    CAPTURE(d.N, d.V);
    nn::Rng rng(14);
    Vec logits = randn(rng, sz(d.N, d.V), 3.0f);
    if (d.V > 3) logits[1] = 80.0f;  // a large logit: the max must be subtracted
    const auto targets = random_ids(rng, sz(d.N), d.V);
    Vec probs(logits.size(), kNaN), losses(sz(d.N), kNaN), rprobs(logits.size()), rlosses(sz(d.N));
    const float loss = be->crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), d.N, d.V);
    const float rloss =
        nn::softmax_cross_entropy_forward(rprobs.data(), rlosses.data(), logits.data(), targets.data(), d.N, d.V);
    check_close("probs", probs, rprobs, 1e-6f);
    check_close("losses", losses, rlosses, 1e-5f);
    CHECK(std::fabs(loss - rloss) <= 1e-5f + 1e-5f * std::fabs(rloss));

    Vec dl(logits.size(), kNaN), rdl(logits.size());
    be->crossentropy_backward(dl.data(), probs.data(), targets.data(), d.N, d.V, 0.5f);
    nn::softmax_cross_entropy_backward(rdl.data(), probs.data(), targets.data(), d.N, d.V, 0.5f);
    check_close("dlogits", dl, rdl, 1e-7f);
  }
}

// ---- optimizer helpers --------------------------------------------------------------------------
TEST_CASE("cpu backend: AdamW and sum_squares match the formulas", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  for (const int64_t n : {int64_t{800003}, int64_t{13}, int64_t{1}}) {
    CAPTURE(n);
    nn::Rng rng(15);
    Vec p = randn(rng, sz(n)), g = randn(rng, sz(n), 0.1f), m = randn(rng, sz(n), 0.01f);
    Vec v(sz(n));
    for (float& x : v) x = 0.001f * rng.uniform();
    Vec rp = p, rm = m, rv = v;
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.99f, eps = 1e-8f, wd = 0.1f;
    for (int64_t t = 1; t <= 3; ++t) {
      be->adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t);
      // gpt/backend.h's formula, plain loop (bias corrections in double)
      const float bc1 = static_cast<float>(1.0 - std::pow(0.9, static_cast<double>(t)));
      const float bc2 = static_cast<float>(1.0 - std::pow(0.99, static_cast<double>(t)));
      for (size_t i = 0; i < rp.size(); ++i) {
        rp[i] -= lr * wd * rp[i];
        rm[i] = b1 * rm[i] + (1.0f - b1) * g[i];
        rv[i] = b2 * rv[i] + (1.0f - b2) * g[i] * g[i];
        rp[i] -= (lr / bc1) * rm[i] / (std::sqrt(rv[i]) / std::sqrt(bc2) + eps);
      }
    }
    check_close("p", p, rp, 1e-6f);
    check_close("m", m, rm, 1e-7f);
    check_close("v", v, rv, 1e-9f);

    double ref = 0.0;
    for (const float x : g) ref += static_cast<double>(x) * x;
    const double got = be->sum_squares(g.data(), n);
    CHECK(std::fabs(got - ref) <= 1e-6 * ref);
  }
}

// ---- determinism ---------------------------------------------------------------------------------
// The same inputs give the same bits run after run, and for 1 and 2 OpenMP threads (the
// reductions over rows and over the flat buffer run in a fixed order).
TEST_CASE("cpu backend: every op is bit-identical run to run and for 1 vs 2 threads", "[gpt][backend]") {
  auto be = gpt::make_cpu_backend();
  const int B = 12, T = 64, C = 128, NH = 4, V = 65, N = B * T, OC = 4 * C;
  nn::Rng rng(16);
  const auto ids = random_ids(rng, sz(N), V);
  const Vec x = randn(rng, sz(N, C)), wte = randn(rng, sz(V, C)), wpe = randn(rng, sz(T, C)),
            lnw = randn(rng, sz(C)), lnb = randn(rng, sz(C)), w = randn(rng, sz(OC, C), 0.1f),
            bias = randn(rng, sz(OC)), dout_nc = randn(rng, sz(N, C)), dout_noc = randn(rng, sz(N, OC)),
            qkv = randn(rng, sz(N, 3 * C)), big = randn(rng, sz(1000003));

  // Every op's outputs (parameter gradients accumulated onto the same prefill), in one list.
  auto run_all = [&]() {
    std::vector<Vec> r;
    Vec dwte(sz(V, C), 0.5f), dwpe(sz(T, C), 0.5f);
    be->encoder_backward(dwte.data(), dwpe.data(), dout_nc.data(), ids.data(), B, T, C, V);
    Vec out(sz(N, C)), mean(sz(N)), rstd(sz(N));
    be->layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), lnw.data(), lnb.data(), N, C);
    Vec dinp(sz(N, C), 0.25f), dw(sz(C), 0.5f), db(sz(C), 0.5f);
    be->layernorm_backward(dinp.data(), dw.data(), db.data(), dout_nc.data(), x.data(), lnw.data(), mean.data(),
                           rstd.data(), N, C);
    Vec mo(sz(N, OC)), mdinp(sz(N, C)), mdw(sz(OC, C), 0.5f), mdb(sz(OC), 0.5f);
    be->matmul_forward(mo.data(), x.data(), w.data(), bias.data(), N, C, OC);
    be->matmul_backward(mdinp.data(), mdw.data(), mdb.data(), dout_noc.data(), x.data(), w.data(), N, C, OC);
    Vec ao(sz(N, C)), pre(sz(B, NH, T, T)), att(pre.size()), dqkv(qkv.size()), dpre(pre.size()), datt(pre.size());
    be->attention_forward(ao.data(), pre.data(), att.data(), qkv.data(), B, T, C, NH);
    be->attention_backward(dqkv.data(), dpre.data(), datt.data(), dout_nc.data(), qkv.data(), att.data(), B, T, C,
                           NH);
    Vec ss = {static_cast<float>(be->sum_squares(big.data(), static_cast<int64_t>(big.size())))};
    const double ssd = be->sum_squares(big.data(), static_cast<int64_t>(big.size()));
    Vec ssbits(2);
    std::memcpy(ssbits.data(), &ssd, sizeof(double));
    r = {dwte, dwpe, out, mean, rstd, dinp, dw, db, mo, mdinp, mdw, mdb, ao, att, dqkv, ssbits};
    return r;
  };
  const char* names[] = {"dwte", "dwpe", "ln out", "mean", "rstd", "ln dinp", "ln dweight", "ln dbias",
                         "matmul out", "matmul dinp", "matmul dweight", "matmul dbias", "att out", "att",
                         "dqkv", "sum_squares"};
  std::vector<Vec> one, two, two_again;
  with_threads(1, [&] { one = run_all(); });
  with_threads(2, [&] { two = run_all(); });
  with_threads(2, [&] { two_again = run_all(); });
  for (size_t k = 0; k < one.size(); ++k) {
    CAPTURE(names[k]);
    CHECK(bit_equal(two[k], two_again[k]));
    CHECK(bit_equal(one[k], two[k]));
  }
}

// ---- micro-benchmark (hidden: run with `nnlab_tests "[.bench]" -s` or `[gpt-bench]`) ------------
// Times each op of the nanoGPT CPU config's training step (C = 128, T = 64, B = 12, NH = 4,
// V = 65; N = 768) against the naive loops it is checked against above. Median of repeats.
namespace {
double median_ms(const std::function<void()>& f, int reps) {
  f();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

TEST_CASE("cpu backend: per-op timings at the nanoGPT CPU config", "[.bench][gpt-bench]") {
  auto be = gpt::make_cpu_backend();
  const int B = 12, T = 64, C = 128, NH = 4, V = 65, N = B * T;
  nn::Rng rng(17);
  const auto ids = random_ids(rng, sz(N), V);
  const Vec x = randn(rng, sz(N, 4 * C)), w = randn(rng, sz(4 * C, 4 * C), 0.05f), bias = randn(rng, sz(4 * C)),
            dout = randn(rng, sz(N, 4 * C)), qkv = randn(rng, sz(N, 3 * C)), wte = randn(rng, sz(V, C)),
            wpe = randn(rng, sz(T, C)), lnw = randn(rng, sz(C)), lnb = randn(rng, sz(C)),
            logits = randn(rng, sz(N, V));
  Vec out(sz(N, 4 * C)), out2(sz(N, 4 * C)), dinp(sz(N, 4 * C)), dw(sz(4 * C, 4 * C)), db(sz(4 * C)),
      mean(sz(N)), rstd(sz(N)), pre(sz(B, NH, T, T)), att(pre.size()), dpre(pre.size()), datt(pre.size()),
      dqkv(qkv.size()), probs(logits.size()), losses(sz(N)), dwte(sz(V, C)), dwpe(sz(T, C));
  nn::attention_forward(out.data(), pre.data(), att.data(), qkv.data(), B, T, C, NH);
  const Vec att_saved = att;
  const auto targets = random_ids(rng, sz(N), V);
  const int reps = 15;

  struct Row {
    std::string name;
    double naive, cpu;
  };
  std::vector<Row> rows;
  auto add = [&](const std::string& name, const std::function<void()>& naive, const std::function<void()>& cpu) {
    const double n_ms = median_ms(naive, 5), c_ms = median_ms(cpu, reps);
    rows.push_back({name, n_ms, c_ms});
  };
  struct Mm {
    const char* name;
    int C_, OC;
  };
  for (const Mm mm : {Mm{"qkv 128->384", C, 3 * C}, Mm{"attproj 128->128", C, C}, Mm{"fc 128->512", C, 4 * C},
                      Mm{"fcproj 512->128", 4 * C, C}, Mm{"head 128->65", C, V}}) {
    const float* bp = mm.OC == V ? nullptr : bias.data();
    add(std::string("matmul fwd ") + mm.name,
        [&] { nn::linear_forward_loops(out.data(), x.data(), w.data(), bp, N, mm.C_, mm.OC); },
        [&] { be->matmul_forward(out.data(), x.data(), w.data(), bp, N, mm.C_, mm.OC); });
    float* dbp = mm.OC == V ? nullptr : db.data();
    add(std::string("matmul bwd ") + mm.name,
        [&] {
          nn::linear_backward_loops(dinp.data(), dw.data(), dbp, dout.data(), x.data(), w.data(), N, mm.C_, mm.OC);
        },
        [&] { be->matmul_backward(dinp.data(), dw.data(), dbp, dout.data(), x.data(), w.data(), N, mm.C_, mm.OC); });
  }
  add("matmul+gelu fwd 128->512",
      [&] {
        nn::linear_forward_loops(out.data(), x.data(), w.data(), bias.data(), N, C, 4 * C);
        nn::gelu_forward(out2.data(), out.data(), int64_t{N} * 4 * C);
      },
      [&] { be->matmul_gelu_forward(out.data(), out2.data(), x.data(), w.data(), bias.data(), N, C, 4 * C); });
  add("attention fwd",
      [&] { nn::attention_forward(out.data(), pre.data(), att.data(), qkv.data(), B, T, C, NH); },
      [&] { be->attention_forward(out.data(), pre.data(), att.data(), qkv.data(), B, T, C, NH); });
  add("attention bwd",
      [&] {
        nn::attention_backward(dqkv.data(), dpre.data(), datt.data(), dout.data(), qkv.data(), att_saved.data(), B,
                               T, C, NH);
      },
      [&] {
        be->attention_backward(dqkv.data(), dpre.data(), datt.data(), dout.data(), qkv.data(), att_saved.data(), B,
                               T, C, NH);
      });
  add("layernorm fwd",
      [&] { nn::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), lnw.data(), lnb.data(), N, C); },
      [&] { be->layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), lnw.data(), lnb.data(), N, C); });
  add("residual+layernorm fwd",
      [&] {
        nn::residual_forward(out2.data(), x.data(), dout.data(), int64_t{N} * C);
        nn::layernorm_forward(out.data(), mean.data(), rstd.data(), out2.data(), lnw.data(), lnb.data(), N, C);
      },
      [&] {
        be->residual_layernorm_forward(out2.data(), out.data(), mean.data(), rstd.data(), x.data(), dout.data(),
                                       lnw.data(), lnb.data(), N, C);
      });
  add("layernorm bwd",
      [&] {
        nn::layernorm_backward(dinp.data(), db.data(), db.data() + C, dout.data(), x.data(), lnw.data(), mean.data(),
                               rstd.data(), N, C);
      },
      [&] {
        be->layernorm_backward(dinp.data(), db.data(), db.data() + C, dout.data(), x.data(), lnw.data(), mean.data(),
                               rstd.data(), N, C);
      });
  const int64_t n4 = int64_t{N} * 4 * C;
  add("gelu fwd (N x 512)", [&] { nn::gelu_forward(out.data(), x.data(), n4); },
      [&] { be->gelu_forward(out.data(), x.data(), n4); });
  add("gelu bwd (N x 512)", [&] { nn::gelu_backward(dinp.data(), dout.data(), x.data(), n4); },
      [&] { be->gelu_backward(dinp.data(), dout.data(), x.data(), n4); });
  const int64_t nc = int64_t{N} * C;
  add("residual fwd (N x 128)", [&] { nn::residual_forward(out.data(), x.data(), dout.data(), nc); },
      [&] { be->residual_forward(out.data(), x.data(), dout.data(), nc); });
  add("dropout fwd p=0.1 (N x 128)", [&] { nn::dropout_forward(out.data(), out2.data(), x.data(), nc, 0.1f, 5); },
      [&] { be->dropout_forward(out.data(), out2.data(), x.data(), nc, 0.1f, 5); });
  add("encoder fwd", [&] { nn::encoder_forward(out.data(), ids.data(), wte.data(), wpe.data(), B, T, C, V); },
      [&] { be->encoder_forward(out.data(), ids.data(), wte.data(), wpe.data(), B, T, C, V); });
  add("encoder bwd", [&] { nn::encoder_backward(dwte.data(), dwpe.data(), dout.data(), ids.data(), B, T, C); },
      [&] { be->encoder_backward(dwte.data(), dwpe.data(), dout.data(), ids.data(), B, T, C, V); });
  add("crossentropy fwd",
      [&] { nn::softmax_cross_entropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V); },
      [&] { be->crossentropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), N, V); });
  add("crossentropy bwd",
      [&] { nn::softmax_cross_entropy_backward(out.data(), probs.data(), targets.data(), N, V, 1.0f); },
      [&] { be->crossentropy_backward(out.data(), probs.data(), targets.data(), N, V, 1.0f); });
  // AdamW over ~0.8M parameters (the model's size: 12 L C^2 + (V + T) C + ...)
  const int64_t np = 808000;
  Vec P(sz(np), 0.1f), G(sz(np), 0.01f), M(sz(np)), Vv(sz(np));
  add("adamw (0.8M params)",
      [&] {
        for (int64_t i = 0; i < np; ++i) {  // the formula, plain loop
          P[i] -= 1e-3f * 0.1f * P[i];
          M[i] = 0.9f * M[i] + 0.1f * G[i];
          Vv[i] = 0.99f * Vv[i] + 0.01f * G[i] * G[i];
          P[i] -= (1e-3f / 0.1f) * M[i] / (std::sqrt(Vv[i]) / std::sqrt(0.01f) + 1e-8f);
        }
      },
      [&] { be->adamw_update(P.data(), G.data(), M.data(), Vv.data(), np, 1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f, 1); });
  double sink = 0.0;
  add("sum_squares (0.8M)",
      [&] {
        double s = 0.0;
        for (int64_t i = 0; i < np; ++i) s += static_cast<double>(G[i]) * G[i];
        sink += s;
      },
      [&] { sink += be->sum_squares(G.data(), np); });

  std::printf("\n%-32s %10s %10s %8s   (threads: %d)\n", "op (nanoGPT CPU config)", "naive ms", "cpu ms", "speedup",
              omp_get_max_threads());
  for (const Row& r : rows) std::printf("%-32s %10.3f %10.3f %7.1fx\n", r.name.c_str(), r.naive, r.cpu, r.naive / r.cpu);
  CHECK(sink > 0.0);
}
