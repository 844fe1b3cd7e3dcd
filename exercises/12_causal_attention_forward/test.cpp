// Tests of exercise 12_causal_attention_forward. The expected values come from
// nn::attention_forward<double> (nn/attention.cpp), and in the worked example from the
// formulas written out; causality is checked by changing the future and watching the past.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/12_causal_attention_forward/causal_attention_forward.h"
#include "exercises/test_util.h"
#include "nn/attention.h"
#include "nn/rng.h"

namespace {

size_t sz(int a, int b, int c = 1, int d = 1) {
  return static_cast<size_t>(a) * static_cast<size_t>(b) * static_cast<size_t>(c) * static_cast<size_t>(d);
}

void check(const ex_test::Comparison& c) {
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

// "b = 1, head 0, query t = 3, key t2 = 2" for element i of att (B, NH, T, T)
std::string att_of(size_t i, int NH, int T) {
  const size_t t2 = i % static_cast<size_t>(T);
  const size_t t = i / static_cast<size_t>(T) % static_cast<size_t>(T);
  const size_t h = i / sz(T, T) % static_cast<size_t>(NH);
  const size_t b = i / sz(NH, T, T);
  std::ostringstream os;
  os << "b = " << b << ", head " << h << ", query t = " << t << ", key t2 = " << t2;
  if (t2 > t) os << ": a future key, must be exactly 0";
  return os.str();
}

// "b = 0, t = 2, channel 3 (head 1)" for element i of out (B, T, C)
std::string out_of(size_t i, int T, int C, int NH) {
  const size_t c = i % static_cast<size_t>(C);
  const size_t t = i / static_cast<size_t>(C) % static_cast<size_t>(T);
  const size_t b = i / sz(T, C);
  std::ostringstream os;
  os << "b = " << b << ", t = " << t << ", channel " << c << " (head " << c / static_cast<size_t>(C / NH) << ")";
  return os.str();
}

struct Reference {
  std::vector<double> out, att;
};

Reference reference(const std::vector<float>& qkv, int B, int T, int C, int NH) {
  const std::vector<double> qkv_d = ex_test::to_double(qkv);
  Reference r;
  r.out.resize(sz(B, T, C));
  r.att.resize(sz(B, NH, T, T));
  std::vector<double> preatt(r.att.size());
  nn::attention_forward<double>(r.out.data(), preatt.data(), r.att.data(), qkv_d.data(), B, T, C, NH);
  return r;
}

}  // namespace

TEST_CASE("causal_attention_forward: a worked example, B = 1, T = 3, C = 2, NH = 1",
          "[12_causal_attention_forward]") {
  // rows [q | k | v], each 2 wide
  const std::vector<float> qkv = {
      1.0f, 0.0f, /* k */ 1.0f, 0.0f, /* v */ 1.0f, 2.0f,   // t = 0
      0.0f, 2.0f, /* k */ 0.0f, 1.0f, /* v */ 3.0f, 4.0f,   // t = 1
      1.0f, 1.0f, /* k */ 2.0f, 2.0f, /* v */ 5.0f, 6.0f};  // t = 2
  const double r2 = std::sqrt(2.0);  // hs = 2
  // t = 0 sees only itself: att = (1, 0, 0), out = v_0
  // t = 1: s = (q_1.k_0, q_1.k_1) / sqrt(2) = (0, 2) / sqrt(2)
  const double e10 = std::exp(0.0), e11 = std::exp(2.0 / r2), s1 = e10 + e11;
  // t = 2: s = (1, 1, 4) / sqrt(2)
  const double e20 = std::exp(1.0 / r2), e21 = std::exp(1.0 / r2), e22 = std::exp(4.0 / r2), s2 = e20 + e21 + e22;
  const std::vector<double> want_att = {1, 0, 0, e10 / s1, e11 / s1, 0, e20 / s2, e21 / s2, e22 / s2};
  const std::vector<double> want_out = {
      1.0, 2.0,
      (e10 * 1 + e11 * 3) / s1, (e10 * 2 + e11 * 4) / s1,
      (e20 * 1 + e21 * 3 + e22 * 5) / s2, (e20 * 2 + e21 * 4 + e22 * 6) / s2};
  std::vector<float> out = ex_test::output_buffer(6), att = ex_test::output_buffer(9);
  ex::causal_attention_forward(out.data(), att.data(), qkv.data(), 1, 3, 2, 1);
  INFO("scores / sqrt(2): row 0 (0.707), row 1 (0, 1.414), row 2 (0.707, 0.707, 2.828); att is the "
       "softmax of each row, 0 above the diagonal; out_t = sum att[t][t2] v_t2 with v = (1,2), (3,4), (5,6)");
  check(ex_test::compare("att", {att.data(), 9}, want_att, 1e-6, 1e-5, [](size_t i) { return att_of(i, 1, 3); }));
  check(ex_test::compare("out", {out.data(), 6}, want_out, 1e-6, 1e-5, [](size_t i) { return out_of(i, 3, 2, 1); }));
}

TEST_CASE("causal_attention_forward: random B = 2, T = 7, C = 6, NH = 3, against nn::attention_forward<double>",
          "[12_causal_attention_forward]") {
  nn::Rng rng(1201);
  const int B = 2, T = 7, C = 6, NH = 3;  // hs = 2; T, C and NH all different: a swapped index shows
  const std::vector<float> qkv = ex_test::random_normal(rng, sz(B, T, 3 * C));
  const Reference want = reference(qkv, B, T, C, NH);
  std::vector<float> out = ex_test::output_buffer(want.out.size()), att = ex_test::output_buffer(want.att.size());
  ex::causal_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  SECTION("att (B, NH, T, T): the softmax rows, 0 above the diagonal") {
    check(ex_test::compare("att", {att.data(), want.att.size()}, want.att, 1e-6, 1e-5,
                           [&](size_t i) { return att_of(i, NH, T); }));
  }
  SECTION("out (B, T, C): the heads side by side") {
    check(ex_test::compare("out", {out.data(), want.out.size()}, want.out, 1e-5, 1e-4,
                           [&](size_t i) { return out_of(i, T, C, NH); }));
  }
  SECTION("every row of att sums to 1") {
    std::ostringstream bad;
    for (int row = 0; row < B * NH * T; ++row) {
      double s = 0.0;
      for (int t2 = 0; t2 < T; ++t2) s += att[sz(row, T) + static_cast<size_t>(t2)];
      if (!(std::fabs(s - 1.0) <= 1e-5)) bad << "  row " << row << " sums to " << s << "\n";
    }
    INFO(bad.str());
    CHECK(bad.str().empty());
  }
  SECTION("nothing is written past the end of an output") {
    const std::string overrun =
        ex_test::guard_damage(out, want.out.size(), "out") + ex_test::guard_damage(att, want.att.size(), "att");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}

TEST_CASE("causal_attention_forward: causal, the past never depends on the future",
          "[12_causal_attention_forward]") {
  nn::Rng rng(1202);
  const int B = 1, T = 6, C = 4, NH = 2;
  std::vector<float> qkv = ex_test::random_normal(rng, sz(B, T, 3 * C));
  std::vector<float> out1 = ex_test::output_buffer(sz(B, T, C)), att1 = ex_test::output_buffer(sz(B, NH, T, T));
  ex::causal_attention_forward(out1.data(), att1.data(), qkv.data(), B, T, C, NH);
  SECTION("att is exactly 0 above the diagonal") {
    std::ostringstream bad;
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t)
        for (int t2 = t + 1; t2 < T; ++t2) {
          const float a = att1[sz(h * T + t, T) + static_cast<size_t>(t2)];
          if (!(a == 0.0f)) bad << "  head " << h << ", query " << t << ", key " << t2 << ": " << a << "\n";
        }
    INFO("a query may not look at a later key: those probabilities must be written as 0\n" << bad.str());
    CHECK(bad.str().empty());
  }
  SECTION("changing the last position's q, k and v leaves every earlier output unchanged") {
    for (int c = 0; c < 3 * C; ++c) qkv[sz(T - 1, 3 * C) + static_cast<size_t>(c)] += 5.0f;
    std::vector<float> out2 = ex_test::output_buffer(sz(B, T, C)), att2 = ex_test::output_buffer(sz(B, NH, T, T));
    ex::causal_attention_forward(out2.data(), att2.data(), qkv.data(), B, T, C, NH);
    std::ostringstream bad;
    for (int t = 0; t < T - 1; ++t)
      for (int c = 0; c < C; ++c) {
        const size_t i = sz(t, C) + static_cast<size_t>(c);
        if (!(out1[i] == out2[i])) bad << "  out[t = " << t << "][" << c << "]: " << out1[i] << " -> " << out2[i] << "\n";
      }
    INFO("positions 0..T-2 must not read position T-1 (only t2 <= t)\n" << bad.str());
    CHECK(bad.str().empty());
    // and the last position itself does change (the test would pass by accident otherwise)
    bool last_changed = false;
    for (int c = 0; c < C; ++c) last_changed = last_changed || out1[sz(T - 1, C) + static_cast<size_t>(c)] !=
                                                                  out2[sz(T - 1, C) + static_cast<size_t>(c)];
    CHECK(last_changed);
  }
}

TEST_CASE("causal_attention_forward: large scores stay finite (subtract the max)", "[12_causal_attention_forward]") {
  // q and k of size ~30: scores q.k / sqrt(hs) of several hundred, far past exp's float limit (88.7)
  nn::Rng rng(1203);
  const int B = 1, T = 5, C = 4, NH = 1;
  const std::vector<float> qkv = ex_test::random_normal(rng, sz(B, T, 3 * C), 30.0f);
  const Reference want = reference(qkv, B, T, C, NH);
  std::vector<float> out = ex_test::output_buffer(want.out.size()), att = ex_test::output_buffer(want.att.size());
  ex::causal_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  // Blame the overflow only when the outputs show it (NaN or inf where the other tests,
  // with small scores, may well pass); otherwise the values are simply wrong.
  const bool not_finite = ex_test::any_not_finite({att.data(), want.att.size()}) ||
                          ex_test::any_not_finite({out.data(), want.out.size()});
  INFO((not_finite ? "some outputs are NaN or inf: either never written, or exp(s) overflowed "
                     "(exp gives inf for s > 88.7, and inf / inf is nan: compute exp(s - max))"
                   : "the outputs are finite: no overflow here, the values themselves are wrong"));
  check(ex_test::compare("att", {att.data(), want.att.size()}, want.att, 1e-5, 1e-4,
                         [&](size_t i) { return att_of(i, NH, T); }));
  check(ex_test::compare("out", {out.data(), want.out.size()}, want.out, 1e-3, 1e-4,
                         [&](size_t i) { return out_of(i, T, C, NH); }));
}
