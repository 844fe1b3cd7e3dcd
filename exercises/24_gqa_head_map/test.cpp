// Tests of exercise 24_gqa_head_map. The head map by hand at the three kinds of attention
// (multi-head, grouped-query, multi-query); gqa_attend against the last position of
// kernels::flash_attention_forward_v1<double> (kernels/flash_attention.h), which runs causal
// grouped-query attention over a whole sequence, and against the known mistake (h % NKV).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/24_gqa_head_map/gqa_head_map.h"
#include "exercises/test_util.h"
#include "kernels/flash_attention.h"
#include "nn/rng.h"

namespace {

// The last position's output of causal GQA over qkv (T, C + 2 NKV hs) rows [q | k | v], in
// double, with query head h reading KV head kv(h): the library's map, or a wrong one.
std::vector<double> last_row(const std::vector<float>& qkv, int T, int NH, int NKV, int hs, bool interleaved) {
  const int C = NH * hs, W = C + 2 * NKV * hs;
  if (!interleaved) {
    const std::vector<double> d = ex_test::to_double(qkv);
    std::vector<double> out(static_cast<size_t>(T) * C), lse(static_cast<size_t>(NH) * T);
    kernels::flash_attention_forward_v1<double>(out.data(), lse.data(), d.data(), 1, T, C, NH, NKV);
    return std::vector<double>(out.end() - C, out.end());
  }
  std::vector<double> out(static_cast<size_t>(C));
  const size_t q0 = static_cast<size_t>(T - 1) * W;
  for (int h = 0; h < NH; ++h) {
    const int g = h % NKV;
    std::vector<double> s(static_cast<size_t>(T));
    double mx = -1e300, sum = 0.0;
    for (int t = 0; t < T; ++t) {
      double d = 0.0;
      for (int i = 0; i < hs; ++i) d += qkv[q0 + h * hs + i] * static_cast<double>(qkv[static_cast<size_t>(t) * W + C + g * hs + i]);
      s[static_cast<size_t>(t)] = d / std::sqrt(static_cast<double>(hs));
      mx = std::max(mx, s[static_cast<size_t>(t)]);
    }
    for (double& v : s) sum += (v = std::exp(v - mx));
    for (int i = 0; i < hs; ++i) {
      double o = 0.0;
      for (int t = 0; t < T; ++t) o += s[static_cast<size_t>(t)] / sum * qkv[static_cast<size_t>(t) * W + C + NKV * hs + g * hs + i];
      out[static_cast<size_t>(h * hs + i)] = o;
    }
  }
  return out;
}

void check_gqa(int T, int NH, int NKV, int hs, uint64_t seed) {
  nn::Rng rng(seed);
  const int C = NH * hs, W = C + 2 * NKV * hs;
  const std::vector<float> qkv = ex_test::random_normal(rng, static_cast<size_t>(T) * W);
  // the cache: rows of keys, rows of values (NKV * hs each), split out of qkv
  std::vector<float> kcache, vcache;
  for (int t = 0; t < T; ++t) {
    const float* r = qkv.data() + static_cast<size_t>(t) * W;
    kcache.insert(kcache.end(), r + C, r + C + NKV * hs);
    vcache.insert(vcache.end(), r + C + NKV * hs, r + W);
  }
  std::vector<float> out = ex_test::output_buffer(static_cast<size_t>(C));
  ex::gqa_attend(out.data(), qkv.data() + static_cast<size_t>(T - 1) * W, kcache.data(), vcache.data(), T - 1, NH, NKV,
                 hs);
  const std::vector<double> want = last_row(qkv, T, NH, NKV, hs, false);
  const std::vector<double> wrong = last_row(qkv, T, NH, NKV, hs, true);
  const std::string cause = ex_test::diagnose(
      {out.data(), static_cast<size_t>(C)}, want, 1e-5, 1e-4,
      {{"query head h read KV head h % NKV: the groups are consecutive heads, KV head h / (NH / NKV)",
        [&](size_t i) { return std::fabs(out[i] - wrong[i]) < 1e-4; }}});
  const auto c = ex_test::compare("out", {out.data(), static_cast<size_t>(C)}, want, 1e-5, 1e-4, [&](size_t i) {
    std::ostringstream os;
    os << "query head " << i / static_cast<size_t>(hs) << ", element " << i % static_cast<size_t>(hs);
    return os.str();
  });
  INFO("NH = " << NH << ", NKV = " << NKV << ", hs = " << hs << ", the query at position pos = " << T - 1 << "\n"
               << c.report << cause);
  CHECK(c.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(out, static_cast<size_t>(C), "out");
  INFO(overrun);
  CHECK(overrun.empty());
}

}  // namespace

TEST_CASE("kv_head_of: consecutive query heads share a KV head", "[24_gqa_head_map]") {
  // NH = 8, NKV = 2: heads 0-3 -> 0, 4-7 -> 1
  const int want82[] = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int h = 0; h < 8; ++h) {
    const int got = ex::kv_head_of(h, 8, 2);
    INFO("NH = 8, NKV = 2 (groups of 4): query head " << h << " reads KV head " << want82[h] << ", you said " << got
                                                      << (got == h % 2 ? "\nLikely cause: h % NKV interleaves the groups; they are consecutive: h / (NH / NKV)" : ""));
    CHECK(got == want82[h]);
  }
  for (int h = 0; h < 6; ++h) {
    INFO("multi-head (NKV = NH = 6): each query head has its own KV head");
    CHECK(ex::kv_head_of(h, 6, 6) == h);
    INFO("multi-query (NKV = 1): every query head reads KV head 0");
    CHECK(ex::kv_head_of(h, 6, 1) == 0);
  }
  CHECK(ex::kv_head_of(5, 6, 3) == 2);  // groups of 2: {0, 1}, {2, 3}, {4, 5}
}

TEST_CASE("gqa_attend: one query over the cache, against kernels::flash_attention_forward_v1<double>",
          "[24_gqa_head_map]") {
  check_gqa(6, 4, 2, 8, 2401);   // grouped-query, groups of 2
  check_gqa(5, 6, 3, 4, 2402);   // grouped-query, groups of 2, 3 KV heads
  check_gqa(7, 4, 4, 8, 2403);   // multi-head
  check_gqa(4, 4, 1, 8, 2404);   // multi-query
  check_gqa(1, 2, 1, 4, 2405);   // the first token: attends to itself only
}
