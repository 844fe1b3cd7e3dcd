// nn/attention.h: causal multi-head self-attention. The backward is checked against central
// finite differences in double; the forward against a naive per-head computation written
// differently (explicit Q, K, V matrices, S = Q K^T, a -inf mask); causality is checked
// exactly; float is checked against double.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "kernels/attention.h"
#include "nn/attention.h"
#include "nn/check.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"
#include "tests/gradcheck_test_util.h"

namespace {

size_t sz(int a, int b, int c) {
  return static_cast<size_t>(a) * static_cast<size_t>(b) * static_cast<size_t>(c);
}

struct Dims {
  int B, Tn, C, NH;
};

// |got - ref| <= atol + rtol |ref|, NaN never passes; the first mismatches go in the report.
template <typename G>
bool all_close(const std::vector<G>& got, const std::vector<double>& ref, double atol, double rtol,
               std::string& report) {
  if (got.size() != ref.size()) {
    report = "size mismatch";
    return false;
  }
  std::ostringstream os;
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    const bool good = std::fabs(g - ref[i]) <= atol + rtol * std::fabs(ref[i]);
    if (!good) {
      if (bad < 8) os << "  [" << i << "] got " << g << " vs ref " << ref[i] << "\n";
      ++bad;
    }
  }
  report = os.str();
  return bad == 0;
}

// The naive reference, per (b, h): gather Q, K, V (Tn, hs) matrices, S = Q K^T / sqrt(hs),
// S_ij = -inf for j > i, P = row-softmax(S), O = P V, scatter O into out. Returns out;
// writes P into att (B, NH, Tn, Tn).
std::vector<double> naive_attention(const std::vector<double>& qkv, const Dims& d,
                                    std::vector<double>& att) {
  const int hs = d.C / d.NH;
  std::vector<double> out(sz(d.B, d.Tn, d.C), 0.0);
  att.assign(sz(d.B, d.NH, d.Tn * d.Tn), 0.0);
  for (int b = 0; b < d.B; ++b) {
    for (int h = 0; h < d.NH; ++h) {
      std::vector<std::vector<double>> Q(d.Tn, std::vector<double>(hs)), K = Q, V = Q;
      for (int t = 0; t < d.Tn; ++t) {
        for (int i = 0; i < hs; ++i) {
          const size_t base = (static_cast<size_t>(b) * d.Tn + t) * 3 * d.C + h * hs + i;
          Q[t][i] = qkv[base];
          K[t][i] = qkv[base + d.C];
          V[t][i] = qkv[base + 2 * d.C];
        }
      }
      std::vector<std::vector<double>> S(d.Tn, std::vector<double>(d.Tn));
      for (int i = 0; i < d.Tn; ++i) {
        for (int j = 0; j < d.Tn; ++j) {
          double s = 0.0;
          for (int k = 0; k < hs; ++k) s += Q[i][k] * K[j][k];
          S[i][j] = j > i ? -std::numeric_limits<double>::infinity() : s / std::sqrt(double(hs));
        }
      }
      for (int i = 0; i < d.Tn; ++i) {
        // no max subtraction here on purpose (inputs are small): a different computation
        double z = 0.0;
        for (int j = 0; j < d.Tn; ++j) z += std::exp(S[i][j]);  // exp(-inf) = 0
        for (int j = 0; j < d.Tn; ++j) {
          const double p = std::exp(S[i][j]) / z;
          att[((static_cast<size_t>(b) * d.NH + h) * d.Tn + i) * d.Tn + j] = p;
          for (int k = 0; k < hs; ++k) {
            out[(static_cast<size_t>(b) * d.Tn + i) * d.C + h * hs + k] += p * V[j][k];
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("attention backward matches finite differences (double)", "[attention][gradcheck]") {
  const Dims d = GENERATE(Dims{2, 5, 6, 2}, Dims{1, 7, 8, 4});
  CAPTURE(d.B, d.Tn, d.C, d.NH);
  nn::Rng rng(11);
  auto qkv = testing::normal_vec(rng, sz(d.B, d.Tn, 3 * d.C));
  auto r = testing::normal_vec(rng, sz(d.B, d.Tn, d.C));  // L = sum(out * R), so dL/dout = R
  const size_t natt = sz(d.B, d.NH, d.Tn * d.Tn);
  std::vector<double> out(sz(d.B, d.Tn, d.C)), preatt(natt), att(natt);
  auto loss = [&] {
    nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), d.B, d.Tn, d.C, d.NH);
    return testing::dot(out, r);
  };
  loss();
  std::vector<double> dqkv(qkv.size()), dpreatt(natt), datt(natt);
  nn::attention_backward(dqkv.data(), dpreatt.data(), datt.data(), r.data(), qkv.data(), att.data(),
                         d.B, d.Tn, d.C, d.NH);
  const auto res = nn::check_gradient(loss, qkv, dqkv);
  INFO(res.report);
  CAPTURE(res.max_abs_err, res.max_rel_err);
  REQUIRE(res.ok);
  // the check must not pass by accident: the gradient is far from zero everywhere it matters
  double norm = 0.0;
  for (double g : dqkv) norm += g * g;
  REQUIRE(norm > 1e-2);
}

TEST_CASE("attention is causal: later positions never change earlier outputs", "[attention]") {
  const Dims d{2, 6, 8, 2};
  nn::Rng rng(12);
  const auto qkv = testing::normal_vec(rng, sz(d.B, d.Tn, 3 * d.C));
  const size_t natt = sz(d.B, d.NH, d.Tn * d.Tn);
  std::vector<double> out(sz(d.B, d.Tn, d.C)), preatt(natt), att(natt);
  nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), d.B, d.Tn, d.C, d.NH);
  for (int t = 0; t < d.Tn - 1; ++t) {
    CAPTURE(t);
    // change q, k and v at every position t' > t, in every batch row
    auto changed = qkv;
    for (int b = 0; b < d.B; ++b) {
      for (int t2 = t + 1; t2 < d.Tn; ++t2) {
        for (int c = 0; c < 3 * d.C; ++c) {
          changed[(static_cast<size_t>(b) * d.Tn + t2) * 3 * d.C + c] += 1.0 + rng.normal();
        }
      }
    }
    std::vector<double> out2(out.size()), preatt2(natt), att2(natt);
    nn::attention_forward(out2.data(), preatt2.data(), att2.data(), changed.data(), d.B, d.Tn, d.C,
                          d.NH);
    bool later_changed = false;
    for (int b = 0; b < d.B; ++b) {
      for (int t2 = 0; t2 < d.Tn; ++t2) {
        for (int c = 0; c < d.C; ++c) {
          const size_t i = (static_cast<size_t>(b) * d.Tn + t2) * d.C + c;
          if (t2 <= t) {
            CAPTURE(b, t2, c);
            REQUIRE(out2[i] == out[i]);  // exactly: the same operations on the same numbers
          } else if (out2[i] != out[i]) {
            later_changed = true;
          }
        }
      }
    }
    REQUIRE(later_changed);  // the perturbation did reach the later positions
  }
}

TEST_CASE("attention rows are probabilities over the past only", "[attention]") {
  const Dims d{2, 7, 6, 3};
  nn::Rng rng(13);
  const auto qkv = testing::normal_vec(rng, sz(d.B, d.Tn, 3 * d.C), 3.0);  // large: peaked softmax
  const size_t natt = sz(d.B, d.NH, d.Tn * d.Tn);
  // NaN-prefilled: every entry, masked ones included, must be written
  std::vector<double> out(sz(d.B, d.Tn, d.C), NAN), preatt(natt, NAN), att(natt, NAN);
  nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), d.B, d.Tn, d.C, d.NH);
  for (int bh = 0; bh < d.B * d.NH; ++bh) {
    for (int t = 0; t < d.Tn; ++t) {
      CAPTURE(bh, t);
      double sum = 0.0;
      for (int t2 = 0; t2 < d.Tn; ++t2) {
        const double a = att[(static_cast<size_t>(bh) * d.Tn + t) * d.Tn + t2];
        CAPTURE(t2, a);
        if (t2 > t) {
          REQUIRE(a == 0.0);
          REQUIRE(preatt[(static_cast<size_t>(bh) * d.Tn + t) * d.Tn + t2] == 0.0);
        } else {
          REQUIRE(a > 0.0);
          REQUIRE(a <= 1.0);
        }
        sum += a;
      }
      REQUIRE(std::fabs(sum - 1.0) <= 1e-12);
    }
  }
  for (double o : out) REQUIRE(std::isfinite(o));
}

TEST_CASE("attention forward matches a naive per-head Q K^T reference", "[attention]") {
  const Dims d = GENERATE(Dims{2, 5, 6, 2}, Dims{1, 7, 8, 4}, Dims{3, 1, 4, 1});
  CAPTURE(d.B, d.Tn, d.C, d.NH);
  nn::Rng rng(14);
  const auto qkv = testing::normal_vec(rng, sz(d.B, d.Tn, 3 * d.C));
  std::vector<double> ref_att;
  const auto ref_out = naive_attention(qkv, d, ref_att);

  // sentinels after each output buffer catch writes past the end
  const double sentinel = -12345.5;
  const size_t nout = sz(d.B, d.Tn, d.C), natt = sz(d.B, d.NH, d.Tn * d.Tn);
  std::vector<double> out(nout + 4, sentinel), preatt(natt + 4, sentinel), att(natt + 4, sentinel);
  nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), d.B, d.Tn, d.C, d.NH);
  for (size_t i = 0; i < 4; ++i) {
    REQUIRE(out[nout + i] == sentinel);
    REQUIRE(preatt[natt + i] == sentinel);
    REQUIRE(att[natt + i] == sentinel);
  }
  out.resize(nout);
  att.resize(natt);
  std::string out_report, att_report;
  const bool out_ok = all_close(out, ref_out, 1e-12, 1e-10, out_report);
  INFO("out\n" << out_report);
  REQUIRE(out_ok);
  const bool att_ok = all_close(att, ref_att, 1e-12, 1e-10, att_report);
  INFO("att\n" << att_report);
  REQUIRE(att_ok);
}

TEST_CASE("attention float agrees with double", "[attention]") {
  const Dims d{2, 9, 12, 3};
  nn::Rng rng(15);
  const auto qkv = testing::normal_vec(rng, sz(d.B, d.Tn, 3 * d.C));
  const auto dout = testing::normal_vec(rng, sz(d.B, d.Tn, d.C));
  const size_t natt = sz(d.B, d.NH, d.Tn * d.Tn);

  std::vector<double> out(dout.size()), preatt(natt), att(natt), dqkv(qkv.size()), dpre(natt),
      datt(natt);
  nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), d.B, d.Tn, d.C, d.NH);
  nn::attention_backward(dqkv.data(), dpre.data(), datt.data(), dout.data(), qkv.data(), att.data(),
                         d.B, d.Tn, d.C, d.NH);

  std::vector<float> qkvf(qkv.begin(), qkv.end()), doutf(dout.begin(), dout.end());
  std::vector<float> outf(dout.size()), preattf(natt), attf(natt), dqkvf(qkv.size()), dpref(natt),
      dattf(natt);
  nn::attention_forward(outf.data(), preattf.data(), attf.data(), qkvf.data(), d.B, d.Tn, d.C,
                        d.NH);
  nn::attention_backward(dqkvf.data(), dpref.data(), dattf.data(), doutf.data(), qkvf.data(),
                         attf.data(), d.B, d.Tn, d.C, d.NH);
  std::string r_out, r_att, r_dqkv;
  const bool out_ok = all_close(outf, out, 1e-5, 1e-5, r_out);
  INFO("out\n" << r_out);
  REQUIRE(out_ok);
  const bool att_ok = all_close(attf, att, 1e-5, 1e-5, r_att);
  INFO("att\n" << r_att);
  REQUIRE(att_ok);
  const bool dqkv_ok = all_close(dqkvf, dqkv, 1e-5, 1e-5, r_dqkv);
  INFO("dqkv\n" << r_dqkv);
  REQUIRE(dqkv_ok);
}

TEST_CASE("attention backward assigns dqkv (NaN-prefilled is overwritten, no accumulation)",
          "[attention]") {
  const Dims d{2, 5, 6, 2};
  nn::Rng rng(16);
  const auto qkv = testing::normal_vec(rng, sz(d.B, d.Tn, 3 * d.C));
  const auto dout = testing::normal_vec(rng, sz(d.B, d.Tn, d.C));
  const size_t natt = sz(d.B, d.NH, d.Tn * d.Tn);
  std::vector<double> out(dout.size()), preatt(natt), att(natt);
  nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), d.B, d.Tn, d.C, d.NH);

  std::vector<double> ref(qkv.size(), 0.0), dpre(natt, 0.0), datt(natt, 0.0);
  nn::attention_backward(ref.data(), dpre.data(), datt.data(), dout.data(), qkv.data(), att.data(),
                         d.B, d.Tn, d.C, d.NH);

  // NaN everywhere, scratch included: nothing of it may survive
  std::vector<double> dqkv(qkv.size(), NAN), dpre2(natt, NAN), datt2(natt, NAN);
  nn::attention_backward(dqkv.data(), dpre2.data(), datt2.data(), dout.data(), qkv.data(),
                         att.data(), d.B, d.Tn, d.C, d.NH);
  for (size_t i = 0; i < dqkv.size(); ++i) {
    CAPTURE(i);
    REQUIRE(dqkv[i] == ref[i]);  // NaN != anything, so a surviving NaN fails here
  }
  // a second call on the same buffer gives the same, not twice the gradient
  nn::attention_backward(dqkv.data(), dpre2.data(), datt2.data(), dout.data(), qkv.data(),
                         att.data(), d.B, d.Tn, d.C, d.NH);
  for (size_t i = 0; i < dqkv.size(); ++i) {
    CAPTURE(i);
    REQUIRE(dqkv[i] == ref[i]);
  }
}

TEST_CASE("attention rejects bad sizes with nn::Error", "[attention]") {
  std::vector<double> buf(4096, 0.0);
  double* p = buf.data();
  auto fwd = [&](int B, int Tn, int C, int NH) {
    nn::attention_forward(p, p, p, p, B, Tn, C, NH);
  };
  auto bwd = [&](int B, int Tn, int C, int NH) {
    nn::attention_backward(p, p, p, p, p, p, B, Tn, C, NH);
  };
  const Dims bad = GENERATE(Dims{1, 4, 6, 4},   // C % NH != 0
                            Dims{0, 4, 8, 2}, Dims{1, 0, 8, 2}, Dims{1, 4, 0, 2},
                            Dims{1, 4, 8, 0}, Dims{-1, 4, 8, 2}, Dims{1, 4, 8, -2});
  CAPTURE(bad.B, bad.Tn, bad.C, bad.NH);
  REQUIRE_THROWS_AS(fwd(bad.B, bad.Tn, bad.C, bad.NH), nn::Error);
  REQUIRE_THROWS_AS(bwd(bad.B, bad.Tn, bad.C, bad.NH), nn::Error);
  REQUIRE_NOTHROW(fwd(1, 4, 8, 2));  // and a good size goes through
}

// B, T, C, NH: the GPT's shape, and heads that leave a scalar tail or a partial last register.
constexpr int kSimdShapes[][4] = {{12, 64, 128, 4}, {2, 7, 20, 2}, {3, 13, 20, 4}, {1, 33, 24, 3}, {2, 70, 96, 3}};

// The SIMD rungs of kernels/attention.h against v1 on this build's SIMD path (this file runs
// in the portable and AVX2 builds of scripts/test_simd_paths.sh too): every version of the
// backward, at the GPT's shape and at heads that leave a scalar tail (hs = 10, 5, 8, 32 with
// T not a multiple of the register width), outputs NaN-prefilled, the harness's tolerances.
TEST_CASE("attention backward: every kernels/ rung agrees with v1 on this SIMD path", "[attention]") {
  for (const auto& sh : kSimdShapes) {
    const int B = sh[0], T = sh[1], C = sh[2], NH = sh[3];
    nn::Rng rng(11);
    const size_t nqkv = static_cast<size_t>(B) * T * 3 * C, natt = static_cast<size_t>(B) * NH * T * T;
    std::vector<float> qkv(nqkv), dout(static_cast<size_t>(B) * T * C), out(dout.size()), pre(natt), att(natt);
    for (float& x : qkv) x = rng.uniform(-1.0f, 1.0f);
    for (float& x : dout) x = rng.uniform(-1.0f, 1.0f);
    kernels::attention_forward_v1<float>(out.data(), pre.data(), att.data(), qkv.data(), B, T, C, NH);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> d1(nqkv, nan), dp1(natt, nan), da1(natt, nan);
    kernels::attention_backward_v1<float>(d1.data(), dp1.data(), da1.data(), dout.data(), qkv.data(), att.data(), B,
                                          T, C, NH);
    for (const auto& v : kernels::attention_backward_versions()) {
      std::vector<float> d(nqkv, nan), dp(natt, nan), da(natt, nan);
      v.fn(d.data(), dp.data(), da.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
      INFO(v.id() << " at " << B << "x" << T << "x" << C << "x" << NH);
      size_t bad = 0;
      for (size_t i = 0; i < nqkv; ++i) {
        if (!(std::fabs(d[i] - d1[i]) <= 2e-5f + 1e-5f * std::fabs(d1[i]))) ++bad;
      }
      for (size_t i = 0; i < natt; ++i) {
        if (!(std::fabs(dp[i] - dp1[i]) <= 1e-5f + 1e-5f * std::fabs(dp1[i]))) ++bad;
        if (!(std::fabs(da[i] - da1[i]) <= 2e-5f + 1e-5f * std::fabs(da1[i]))) ++bad;
      }
      CHECK(bad == 0);
    }
  }
}

// The cpu backend's rungs run without the maps nothing reads (kernels/attention.h): forward v4
// with preatt nullptr, backward v5 with dpreatt and datt nullptr. The same bits as with them,
// on this SIMD path, shapes with and without a partial last register.
TEST_CASE("attention v4 forward without preatt and v5 backward without dpreatt, datt give the same bits",
          "[attention]") {
  for (const auto& sh : kSimdShapes) {
    const int B = sh[0], T = sh[1], C = sh[2], NH = sh[3];
    INFO(B << "x" << T << "x" << C << "x" << NH);
    nn::Rng rng(5);
    const size_t nqkv = static_cast<size_t>(B) * T * 3 * C, natt = static_cast<size_t>(B) * NH * T * T;
    const size_t nout = static_cast<size_t>(B) * T * C;
    std::vector<float> qkv(nqkv), dout(nout);
    for (float& x : qkv) x = rng.uniform(-1.0f, 1.0f);
    for (float& x : dout) x = rng.uniform(-1.0f, 1.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(nout, nan), pre(natt, nan), att(natt, nan), out0(nout, nan), att0(natt, nan);
    kernels::attention_forward_v4(out.data(), pre.data(), att.data(), qkv.data(), B, T, C, NH);
    kernels::attention_forward_v4(out0.data(), nullptr, att0.data(), qkv.data(), B, T, C, NH);
    CHECK(std::memcmp(out.data(), out0.data(), nout * sizeof(float)) == 0);
    CHECK(std::memcmp(att.data(), att0.data(), natt * sizeof(float)) == 0);
    CHECK(std::none_of(out0.begin(), out0.end(), [](float x) { return std::isnan(x); }));

    std::vector<float> d(nqkv, nan), dp(natt, nan), da(natt, nan), d0(nqkv, nan), d1(nqkv, nan), dp1(natt, nan);
    kernels::attention_backward_v5(d.data(), dp.data(), da.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    kernels::attention_backward_v5(d0.data(), nullptr, nullptr, dout.data(), qkv.data(), att.data(), B, T, C, NH);
    kernels::attention_backward_v5(d1.data(), dp1.data(), nullptr, dout.data(), qkv.data(), att.data(), B, T, C, NH);
    CHECK(std::memcmp(d.data(), d0.data(), nqkv * sizeof(float)) == 0);
    CHECK(std::memcmp(d.data(), d1.data(), nqkv * sizeof(float)) == 0);
    CHECK(std::memcmp(dp.data(), dp1.data(), natt * sizeof(float)) == 0);  // one of the two still written
    CHECK(std::none_of(d0.begin(), d0.end(), [](float x) { return std::isnan(x); }));
  }
}
