// Tests of exercise 18_kv_cache. The expected values come from full causal attention over
// the whole sequence, nn::attention_forward<double> (nn/attention.cpp): generating with a
// cache must give, at every position, exactly the row that recomputing everything gives.
// Also a worked example by hand and, for the library's view, kernels::attention_decode_v1.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/18_kv_cache/kv_cache.h"
#include "exercises/test_util.h"
#include "kernels/decode.h"
#include "nn/attention.h"
#include "nn/rng.h"

namespace {

size_t sz(int a, int b = 1, int c = 1) {
  return static_cast<size_t>(a) * static_cast<size_t>(b) * static_cast<size_t>(c);
}

void check(const ex_test::Comparison& c) {
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

// "channel 5 (head 1)" for element i of out (C)
std::string channel_of(size_t i, int C, int NH) {
  std::ostringstream os;
  os << "channel " << i << " (head " << i / static_cast<size_t>(C / NH) << ")";
  return os.str();
}

// Full causal attention over qkv (T, 3C) in double: out (T, C), row t = position t's output.
std::vector<double> full_attention(const std::vector<float>& qkv, int T, int C, int NH) {
  const std::vector<double> qkv_d = ex_test::to_double(qkv);
  std::vector<double> out(sz(T, C)), preatt(sz(NH, T, T)), att(sz(NH, T, T));
  nn::attention_forward<double>(out.data(), preatt.data(), att.data(), qkv_d.data(), 1, T, C, NH);
  return out;
}

// Generates positions 0..T-1 with the cache (caches (maxT, C) start as NaN, so a row read
// before it is written poisons the output) and compares every position's output with row
// pos of full attention. Returns the cache contents for further checks.
struct Generated {
  std::vector<float> kcache, vcache;
};
Generated generate_and_compare(const std::vector<float>& qkv, int T, int maxT, int C, int NH, double atol,
                               double rtol) {
  const std::vector<double> want = full_attention(qkv, T, C, NH);
  Generated g{ex_test::output_buffer(sz(maxT, C)), ex_test::output_buffer(sz(maxT, C))};
  for (int pos = 0; pos < T; ++pos) {
    const float* row = qkv.data() + sz(pos, 3 * C);  // [ q | k | v ] of position pos
    ex::kv_cache_append(g.kcache.data(), g.vcache.data(), row + C, row + 2 * C, pos, C);
    std::vector<float> out = ex_test::output_buffer(sz(C));
    ex::kv_cache_attend(out.data(), row, g.kcache.data(), g.vcache.data(), pos, C, NH);
    INFO("position pos = " << pos << " (after appending its k and v; cache rows 0.." << pos
                           << " filled, later rows still NaN): out must be row " << pos
                           << " of full causal attention over the sequence");
    const ex_test::Comparison c =
        ex_test::compare("out", {out.data(), sz(C)}, std::vector<double>(want.begin() + static_cast<std::ptrdiff_t>(sz(pos, C)),
                                                                          want.begin() + static_cast<std::ptrdiff_t>(sz(pos + 1, C))),
                         atol, rtol, [&](size_t i) { return channel_of(i, C, NH); });
    INFO(c.report);
    REQUIRE(c.mismatches == 0);
    const std::string overrun = ex_test::guard_damage(out, sz(C), "out");
    INFO(overrun);
    REQUIRE(overrun.empty());
  }
  return g;
}

}  // namespace

TEST_CASE("kv_cache_append: writes row pos of both caches, bit for bit, and nothing else", "[18_kv_cache]") {
  nn::Rng rng(1801);
  const int maxT = 6, C = 5, pos = 3;
  std::vector<float> kcache = ex_test::output_buffer(sz(maxT, C), 0.5f);  // 0.5 everywhere, guards after
  std::vector<float> vcache = ex_test::output_buffer(sz(maxT, C), 0.5f);
  const std::vector<float> k = ex_test::random_normal(rng, sz(C)), v = ex_test::random_normal(rng, sz(C));
  ex::kv_cache_append(kcache.data(), vcache.data(), k.data(), v.data(), pos, C);
  for (const bool is_k : {true, false}) {
    const std::vector<float>& cache = is_k ? kcache : vcache;
    const std::vector<float>& src = is_k ? k : v;
    std::vector<double> want(sz(maxT, C), 0.5);
    for (int c = 0; c < C; ++c) want[sz(pos, C) + static_cast<size_t>(c)] = src[static_cast<size_t>(c)];
    const std::string name = is_k ? "kcache" : "vcache";
    INFO("maxT = 6, C = 5, pos = 3: row 3 (elements 15..19) must hold the new " << (is_k ? "k" : "v")
                                                                                << ", every other row keeps 0.5");
    check(ex_test::compare(name, {cache.data(), want.size()}, want, 0.0, 0.0, [&](size_t i) {
      return "row " + std::to_string(i / static_cast<size_t>(C)) + ", channel " + std::to_string(i % static_cast<size_t>(C));
    }));
    const std::string overrun = ex_test::guard_damage(cache, sz(maxT, C), name);
    INFO(overrun);
    CHECK(overrun.empty());
  }
}

TEST_CASE("kv_cache_attend: a worked example, C = 2, NH = 1, three positions", "[18_kv_cache]") {
  // The rows [q | k | v] of exercise 12's worked example.
  const std::vector<float> qkv = {
      1.0f, 0.0f, /* k */ 1.0f, 0.0f, /* v */ 1.0f, 2.0f,   // pos 0
      0.0f, 2.0f, /* k */ 0.0f, 1.0f, /* v */ 3.0f, 4.0f,   // pos 1
      1.0f, 1.0f, /* k */ 2.0f, 2.0f, /* v */ 5.0f, 6.0f};  // pos 2
  const double r2 = std::sqrt(2.0);                        // hs = 2
  const double e10 = 1.0, e11 = std::exp(2.0 / r2), s1 = e10 + e11;  // pos 1: s = (0, 2) / sqrt(2)
  const double e20 = std::exp(1.0 / r2), e22 = std::exp(4.0 / r2), s2 = 2.0 * e20 + e22;  // (1, 1, 4) / sqrt(2)
  const std::vector<std::vector<double>> want = {
      {1.0, 2.0},  // pos 0 sees only itself: out = v_0
      {(e10 * 1 + e11 * 3) / s1, (e10 * 2 + e11 * 4) / s1},
      {(e20 * 1 + e20 * 3 + e22 * 5) / s2, (e20 * 2 + e20 * 4 + e22 * 6) / s2}};
  std::vector<float> kcache = ex_test::output_buffer(sz(4, 2)), vcache = ex_test::output_buffer(sz(4, 2));  // maxT = 4
  for (int pos = 0; pos < 3; ++pos) {
    const float* row = qkv.data() + sz(pos, 6);
    ex::kv_cache_append(kcache.data(), vcache.data(), row + 2, row + 4, pos, 2);
    std::vector<float> out = ex_test::output_buffer(2);
    ex::kv_cache_attend(out.data(), row, kcache.data(), vcache.data(), pos, 2, 1);
    INFO("pos = " << pos << ": scores / sqrt(2) are (0.707) at pos 0, (0, 1.414) at pos 1, (0.707, 0.707, 2.828) "
                             "at pos 2; out = their softmax times v = (1,2), (3,4), (5,6)");
    check(ex_test::compare("out", {out.data(), 2}, want[static_cast<size_t>(pos)], 1e-6, 1e-5));
  }
}

TEST_CASE("kv_cache: generating position by position equals full causal attention, T = 9, C = 12",
          "[18_kv_cache]") {
  const int NH = GENERATE(1, 3, 4);  // hs = 12, 4, 3
  CAPTURE(NH);
  nn::Rng rng(1802 + static_cast<uint64_t>(NH));
  const int T = 9, maxT = 11, C = 12;  // maxT > T: the last rows are never written nor read
  const std::vector<float> qkv = ex_test::random_normal(rng, sz(T, 3 * C));
  const Generated g = generate_and_compare(qkv, T, maxT, C, NH, 1e-5, 1e-4);
  SECTION("the cache holds every position's k and v, rows T..maxT-1 untouched") {
    std::ostringstream bad;
    for (int t = 0; t < maxT; ++t)
      for (int c = 0; c < C; ++c) {
        const float kc = g.kcache[sz(t, C) + static_cast<size_t>(c)], vc = g.vcache[sz(t, C) + static_cast<size_t>(c)];
        if (t < T) {
          const float kw = qkv[sz(t, 3 * C) + static_cast<size_t>(C + c)], vw = qkv[sz(t, 3 * C) + static_cast<size_t>(2 * C + c)];
          if (!(kc == kw) || !(vc == vw))
            bad << "  row " << t << ", channel " << c << ": k " << kc << " (want " << kw << "), v " << vc << " (want " << vw << ")\n";
        } else if (!std::isnan(kc) || !std::isnan(vc)) {
          bad << "  row " << t << " (after the last position) was written\n";
        }
      }
    const std::string overrun = ex_test::guard_damage(g.kcache, sz(maxT, C), "kcache") +
                                ex_test::guard_damage(g.vcache, sz(maxT, C), "vcache");
    INFO(bad.str() << overrun);
    CHECK(bad.str().empty());
    CHECK(overrun.empty());
  }
}

TEST_CASE("kv_cache_attend: large scores stay finite (subtract the max)", "[18_kv_cache]") {
  // q and k of size ~30: scores of several hundred, far past exp's float limit (88.7)
  nn::Rng rng(1803);
  const int T = 6, C = 4, NH = 2;
  const std::vector<float> qkv = ex_test::random_normal(rng, sz(T, 3 * C), 30.0f);
  INFO("scores of several hundred here. If the outputs below are NaN or inf (and the tests with "
       "small scores pass), exp(s) overflowed: exp gives inf for s > 88.7 and inf / inf is nan; "
       "compute exp(s - max) instead");
  generate_and_compare(qkv, T, T, C, NH, 1e-3, 1e-4);
}

TEST_CASE("kv_cache: the same as the library's kernels::attention_decode_v1, one position at a time",
          "[18_kv_cache]") {
  nn::Rng rng(1804);
  const int T = 7, C = 10, NH = 5;  // hs = 2
  const std::vector<float> qkv = ex_test::random_normal(rng, sz(T, 3 * C));
  std::vector<float> kc(sz(T, C), 0.0f), vc(sz(T, C), 0.0f), lib_k(sz(T, C), 0.0f), lib_v(sz(T, C), 0.0f);
  for (int pos = 0; pos < T; ++pos) {
    const float* row = qkv.data() + sz(pos, 3 * C);
    std::vector<float> out = ex_test::output_buffer(sz(C)), lib_out(sz(C));
    ex::kv_cache_append(kc.data(), vc.data(), row + C, row + 2 * C, pos, C);
    ex::kv_cache_attend(out.data(), row, kc.data(), vc.data(), pos, C, NH);
    // B = 1 sequence, n = 1 new position at pos: it appends and attends in one call
    kernels::attention_decode_v1(lib_out.data(), lib_k.data(), lib_v.data(), row, 1, 1, pos, C, NH, NH, T);
    INFO("position " << pos << ": kernels::attention_decode_v1 appends qkv's k and v at pos and attends the same way");
    check(ex_test::compare("out", {out.data(), sz(C)}, ex_test::to_double(lib_out), 1e-5, 1e-4,
                           [&](size_t i) { return channel_of(i, C, NH); }));
  }
}
