// kernels/decode: the packed weight formats (kernels/weight_format.h) and the two inference
// ops. Packing round trips with their error bounds (bf16 rounding to nearest even on hand
// values, int8 per row, int4 per group of 32, sparse24 keeping the two largest of every 4 and
// its index nibbles as documented), the errors, every matvec version against v1 and against a
// plain double matmul on the unpacked weights (odd sizes, n = 1, 3 and more than one batch of
// 4, with and without bias, misaligned inputs, NaN-filled outputs with sentinels after them),
// and attention over a KV cache against nn::attention_forward on the whole sequence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <omp.h>

#include "gpt/compress.h"
#include "kernels/bench/ops.h"
#include "kernels/decode.h"
#include "kernels/harness.h"
#include "kernels/int8_gemm.h"
#include "kernels/weight_format.h"
#include "nn/attention.h"
#include "tests/bench_test_util.h"

namespace h = kernels::harness;
using kernels::WeightFormat;

namespace {

constexpr WeightFormat kFormats[] = {WeightFormat::f32, WeightFormat::bf16, WeightFormat::int8, WeightFormat::int4,
                                     WeightFormat::sparse24};

std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  h::fill_random(v, seed, lo, hi);
  return v;
}

std::vector<float> unpacked(const kernels::PackedWeights& p) {
  std::vector<float> out(static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols));
  kernels::unpack_weights(p.view(), out.data());
  return out;
}

void require_ok(const h::Check& c, const std::string& what) {
  INFO(what << "\n" << c.report);
  REQUIRE(c.ok());
}

void require_guards(const h::GuardedBuffer& b, const std::string& name) {
  const std::string damage = b.guard_damage(name);
  INFO(damage);
  REQUIRE(damage.empty());
}

float bits_to_float(uint32_t u) {
  float f = 0.0f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

// ---- packing ---------------------------------------------------------------------------------

TEST_CASE("bf16 rounds to nearest even and stays within 2^-8 relative", "[decode][kernels]") {
  using kernels::bf16_to_float;
  using kernels::float_to_bf16;
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(-2.0f) == 0xC000);
  CHECK(float_to_bf16(0.0f) == 0x0000);
  CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  // 1 + 2^-8 lies halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81): to even, down.
  CHECK(float_to_bf16(bits_to_float(0x3F808000u)) == 0x3F80);
  // 1 + 3 * 2^-8: halfway between 0x3F81 (odd) and 0x3F82 (even): up.
  CHECK(float_to_bf16(bits_to_float(0x3F818000u)) == 0x3F82);
  // Just above halfway rounds up, just below rounds down.
  CHECK(float_to_bf16(bits_to_float(0x3F808001u)) == 0x3F81);
  CHECK(float_to_bf16(bits_to_float(0x3F807FFFu)) == 0x3F80);
  // A carry out of the mantissa moves the exponent: just under 2 rounds to 2.
  CHECK(float_to_bf16(bits_to_float(0x3FFFFFFFu)) == 0x4000);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(bf16_to_float(0x3F81) == 1.0f + 1.0f / 128.0f);

  const std::vector<float> x = random_vector(10000, 3, -100.0f, 100.0f);
  double worst = 0.0;
  for (const float v : x) {
    if (v == 0.0f) continue;
    worst = std::max(worst, std::fabs(static_cast<double>(bf16_to_float(float_to_bf16(v))) - v) / std::fabs(v));
  }
  CHECK(worst <= std::ldexp(1.0, -8));
  CHECK(worst > std::ldexp(1.0, -10));  // it does round: not a copy of the float
}

TEST_CASE("int8 packs per row: a row's max maps to +-127, every weight within scale/2", "[decode][kernels]") {
  const int rows = 37, cols = 75;
  std::vector<float> w = random_vector(static_cast<size_t>(rows) * cols, 5, -2.0f, 2.0f);
  for (int c = 0; c < cols; ++c) w[static_cast<size_t>(4) * cols + c] = 0.0f;  // an all-zero row
  w[static_cast<size_t>(6) * cols + 10] = -7.5f;                                // a row led by a negative
  const kernels::PackedWeights p = kernels::pack_weights(w.data(), rows, cols, WeightFormat::int8);
  REQUIRE(p.data.size() == static_cast<size_t>(rows) * cols);
  REQUIRE(p.scales.size() == static_cast<size_t>(rows));
  REQUIRE(p.bytes() == kernels::format_bytes(WeightFormat::int8, rows, cols));
  const std::vector<float> back = unpacked(p);
  const auto* q = reinterpret_cast<const int8_t*>(p.data.data());
  for (int r = 0; r < rows; ++r) {
    const float scale = p.scales[static_cast<size_t>(r)];
    float amax = 0.0f;
    for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[static_cast<size_t>(r) * cols + c]));
    CHECK(scale == Approx(amax / 127.0f));
    int qmax = 0;
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r) * cols + c;
      INFO("row " << r << " col " << c);
      CHECK(std::fabs(back[i] - w[i]) <= scale / 2 * (1 + 1e-5f));
      CHECK(q[i] >= -127);
      if (std::fabs(w[i]) == amax && amax > 0.0f) CHECK(q[i] == (w[i] > 0 ? 127 : -127));
      qmax = std::max(qmax, std::abs(static_cast<int>(q[i])));
    }
    CHECK(qmax == (r == 4 ? 0 : 127));
  }
  CHECK(p.scales[4] == 0.0f);
  CHECK(q[static_cast<size_t>(6) * cols + 10] == -127);
}

TEST_CASE("int4 packs per group of 32: a group's max maps to +-7, nibbles low then high", "[decode][kernels]") {
  const int rows = 5, cols = 96;
  std::vector<float> w = random_vector(static_cast<size_t>(rows) * cols, 7);
  for (int c = 32; c < 64; ++c) w[static_cast<size_t>(2) * cols + c] = 0.0f;  // an all-zero group
  const kernels::PackedWeights p = kernels::pack_weights(w.data(), rows, cols, WeightFormat::int4);
  REQUIRE(p.data.size() == static_cast<size_t>(rows) * cols / 2);
  REQUIRE(p.scales.size() == static_cast<size_t>(rows) * cols / 32);
  const std::vector<float> back = unpacked(p);
  for (size_t g = 0; g < p.scales.size(); ++g) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[g * 32 + static_cast<size_t>(j)]));
    const float scale = p.scales[g];
    CHECK(scale == Approx(amax / 7.0f));
    int qmax = 0;
    for (int j = 0; j < 32; ++j) {
      const size_t i = g * 32 + static_cast<size_t>(j);
      const int stored = (i & 1) ? (p.data[i / 2] >> 4) : (p.data[i / 2] & 0xF);
      const int qi = stored - 8;
      INFO("group " << g << " column " << j);
      CHECK(qi >= -7);
      CHECK(qi <= 7);
      CHECK(back[i] == scale * static_cast<float>(qi));
      CHECK(std::fabs(back[i] - w[i]) <= scale / 2 * (1 + 1e-5f));
      qmax = std::max(qmax, std::abs(qi));
    }
    CHECK(qmax == (g == 2 * 3 + 1 ? 0 : 7));  // row 2's second group is the zero one
  }
  // By hand: a group whose largest |w| is 7 has scale 1, so q is w rounded.
  std::vector<float> hand(32, 0.0f);
  hand[0] = 7.0f;   // q = 7, stored 15 in the low nibble of byte 0
  hand[1] = -7.0f;  // q = -7, stored 1 in the high nibble of byte 0
  hand[2] = 2.0f;   // q = 2, stored 10
  hand[3] = -0.4f;  // rounds to 0, stored 8
  const kernels::PackedWeights ph = kernels::pack_weights(hand.data(), 1, 32, WeightFormat::int4);
  CHECK(ph.scales[0] == 1.0f);
  CHECK(ph.data[0] == (15 | 1 << 4));
  CHECK(ph.data[1] == (10 | 8 << 4));
  CHECK(ph.data[2] == (8 | 8 << 4));
}

TEST_CASE("sparse24 keeps the two largest of every 4, and loses nothing on a 2:4 matrix", "[decode][kernels]") {
  // By hand: group 0 keeps positions 1, 3; group 1 (a tie) keeps 0, 3; group 2 (a three-way
  // tie) keeps the lower positions 0, 1; group 3 keeps 1, 2.
  const std::vector<float> hand = {0.1f, -5.0f, 0.2f, 3.0f, 4.0f, 0.0f, 0.0f, -4.0f,
                                   1.0f, 1.0f, -1.0f, 0.0f, 0.0f, 2.0f, -3.0f, 0.5f};
  const kernels::PackedWeights ph = kernels::pack_weights(hand.data(), 1, 16, WeightFormat::sparse24);
  REQUIRE(ph.index.size() == 2);
  CHECK(ph.index[0] == ((1 | 3 << 2) | (0 | 3 << 2) << 4));
  CHECK(ph.index[1] == ((0 | 1 << 2) | (1 | 2 << 2) << 4));
  const auto* vals = reinterpret_cast<const float*>(ph.data.data());
  const std::vector<float> want_vals = {-5.0f, 3.0f, 4.0f, -4.0f, 1.0f, 1.0f, 2.0f, -3.0f};
  CHECK(std::vector<float>(vals, vals + 8) == want_vals);
  const std::vector<float> want_back = {0.0f, -5.0f, 0.0f, 3.0f, 4.0f, 0.0f, 0.0f, -4.0f,
                                        1.0f, 1.0f, 0.0f, 0.0f, 0.0f, 2.0f, -3.0f, 0.0f};
  CHECK(unpacked(ph) == want_back);

  // A 2:4 matrix (two zeros in every group of 4, at varying places) round-trips exactly.
  const int rows = 9, cols = 40;
  std::vector<float> w = random_vector(static_cast<size_t>(rows) * cols, 11);
  for (size_t g = 0; g < w.size() / 4; ++g) {
    const size_t a = g % 4, b = (a + 1 + (g / 4) % 3) % 4;  // two different positions
    w[g * 4 + a] = 0.0f;
    w[g * 4 + b] = 0.0f;
  }
  const kernels::PackedWeights p = kernels::pack_weights(w.data(), rows, cols, WeightFormat::sparse24);
  CHECK(p.bytes() == kernels::format_bytes(WeightFormat::sparse24, rows, cols));
  CHECK(unpacked(p) == w);

  // A dense matrix: each group keeps its two largest |w|, the rest become 0.
  const std::vector<float> d = random_vector(static_cast<size_t>(rows) * cols, 12);
  const std::vector<float> back = unpacked(kernels::pack_weights(d.data(), rows, cols, WeightFormat::sparse24));
  for (size_t g = 0; g < d.size() / 4; ++g) {
    std::vector<float> mags;
    for (size_t j = 0; j < 4; ++j) mags.push_back(std::fabs(d[g * 4 + j]));
    std::sort(mags.begin(), mags.end());
    int kept = 0;
    for (size_t j = 0; j < 4; ++j) {
      const size_t i = g * 4 + j;
      if (back[i] != 0.0f) {
        ++kept;
        CHECK(back[i] == d[i]);
        CHECK(std::fabs(d[i]) >= mags[2]);
      }
    }
    CHECK(kept == 2);
  }
}

TEST_CASE("check_packable, parse_format and pack_weights say what is wrong", "[decode][kernels]") {
  using kernels::check_packable;
  CHECK(check_packable(WeightFormat::f32, 37, 75).empty());
  CHECK(check_packable(WeightFormat::int8, 1, 1).empty());
  CHECK(check_packable(WeightFormat::int4, 3, 64).empty());
  CHECK(check_packable(WeightFormat::sparse24, 3, 24).empty());
  CHECK_THAT(check_packable(WeightFormat::int4, 3, 48), Catch::Contains("multiple of 32"));
  CHECK_THAT(check_packable(WeightFormat::sparse24, 3, 12), Catch::Contains("multiple of 8"));
  CHECK_THAT(check_packable(WeightFormat::bf16, 0, 8), Catch::Contains(">= 1"));
  CHECK_THAT(check_packable(WeightFormat::f32, 4, -1), Catch::Contains(">= 1"));
  const std::vector<float> w(3 * 48, 1.0f);
  REQUIRE_THROWS_AS(kernels::pack_weights(w.data(), 3, 48, WeightFormat::int4), std::invalid_argument);
  REQUIRE_THROWS_WITH(kernels::pack_weights(w.data(), 3, 12, WeightFormat::sparse24), Catch::Contains("sparse24"));
  REQUIRE_NOTHROW(kernels::pack_weights(w.data(), 3, 48, WeightFormat::sparse24));
  CHECK(kernels::parse_format("fp32") == WeightFormat::f32);
  CHECK(kernels::parse_format("f32") == WeightFormat::f32);
  CHECK(kernels::parse_format("int4") == WeightFormat::int4);
  CHECK(kernels::parse_format("sparse24") == WeightFormat::sparse24);
  REQUIRE_THROWS_WITH(kernels::parse_format("int3"), Catch::Contains("int8"));
  for (const WeightFormat f : kFormats) CHECK(kernels::parse_format(kernels::format_name(f)) == f);
}

// ---- matvec ----------------------------------------------------------------------------------

namespace {

// y (n, rows) = x W^T + bias for W the unpacked floats, in double.
std::vector<double> reference_matvec(const std::vector<float>& w, const float* x, const float* bias, int rows,
                                     int cols, int n) {
  std::vector<double> y(static_cast<size_t>(n) * rows);
  for (int b = 0; b < n; ++b)
    for (int r = 0; r < rows; ++r) {
      double acc = bias != nullptr ? bias[r] : 0.0;
      for (int c = 0; c < cols; ++c)
        acc += static_cast<double>(w[static_cast<size_t>(r) * cols + c]) * x[static_cast<size_t>(b) * cols + c];
      y[static_cast<size_t>(b) * rows + r] = acc;
    }
  return y;
}

struct MatvecCase {
  WeightFormat format;
  int rows, cols, n;
  bool bias;
};

// Every version, and the portable kernel, on one case: against the double reference on the
// unpacked weights, and against v1 run on the same inputs.
void check_matvec_case(const MatvecCase& m) {
  const size_t nx = static_cast<size_t>(m.n) * m.cols, ny = static_cast<size_t>(m.n) * m.rows;
  const std::vector<float> w = random_vector(static_cast<size_t>(m.rows) * m.cols, 21);
  const kernels::PackedWeights p = kernels::pack_weights(w.data(), m.rows, m.cols, m.format);
  h::GuardedBuffer x(std::max<size_t>(nx, 1), 3);
  h::fill_random(x.span(), 22);
  const std::vector<float> bias = random_vector(static_cast<size_t>(m.rows), 23);
  const float* b = m.bias ? bias.data() : nullptr;
  const std::vector<double> want = reference_matvec(unpacked(p), x.data(), b, m.rows, m.cols, m.n);

  h::GuardedBuffer y1(std::max<size_t>(ny, 1), 1);
  kernels::matvec_v1(y1.data(), x.data(), p.view(), b, m.n);
  std::vector<std::pair<std::string, kernels::MatvecFn>> fns;
  for (const kernels::MatvecVersion& v : kernels::matvec_versions()) {
    std::string id = "v";  // not "v" + to_string: GCC 12's -Wrestrict false positive
    id += std::to_string(v.number);
    fns.emplace_back(id, v.fn);
  }
  fns.emplace_back("portable", kernels::matvec_portable);
  // Sums of cols products of magnitude < 2, in float: a few ulps of the sum's size.
  const h::Tolerance tol{2e-6 * m.cols, 1e-5};
  for (const auto& [name, fn] : fns) {
    const std::string what = name + " " + kernels::format_name(m.format) + " rows=" + std::to_string(m.rows) +
                             " cols=" + std::to_string(m.cols) + " n=" + std::to_string(m.n) +
                             (m.bias ? " bias" : " no bias");
    h::GuardedBuffer y(std::max<size_t>(ny, 1), 2);
    fn(y.data(), x.data(), p.view(), b, m.n);
    require_guards(y, "y " + what);
    if (m.n == 0) continue;
    require_ok(h::compare("y", {y.data(), ny}, want, tol), what + " vs the double reference");
    std::vector<double> v1(y1.data(), y1.data() + ny);
    require_ok(h::compare("y", {y.data(), ny}, v1, tol), what + " vs v1");
  }
}

}  // namespace

TEST_CASE("every matvec version matches v1 and a double matmul in every format", "[decode][kernels]") {
  for (const WeightFormat f : kFormats)
    for (const int n : {1, 3})
      for (const bool bias : {true, false}) check_matvec_case({f, 37, 96, n, bias});
  // Widths that leave a tail after the SIMD registers: any cols for the dense formats, a
  // multiple of 8 but not 16 for sparse24, of 32 but not 64 for int4.
  for (const WeightFormat f : {WeightFormat::f32, WeightFormat::bf16, WeightFormat::int8})
    for (const int cols : {1, 7, 75}) check_matvec_case({f, 5, cols, 2, true});
  check_matvec_case({WeightFormat::sparse24, 6, 104, 2, true});
  check_matvec_case({WeightFormat::sparse24, 3, 8, 1, false});
  check_matvec_case({WeightFormat::int4, 6, 32, 2, true});
  check_matvec_case({WeightFormat::int4, 6, 160, 1, false});
  // n = 0 writes nothing (the guards check it) and does not crash.
  check_matvec_case({WeightFormat::int8, 4, 32, 0, true});
}

TEST_CASE("matvec with more than 4 inputs and enough rows for threads: v3 equals v2 bit for bit",
          "[decode][kernels]") {
  // 300 x 256 = 76800 weights: above the size where v3 starts its threads. n = 9: two full
  // batches of 4 and a single one, each walking the row again.
  for (const WeightFormat f : kFormats) {
    check_matvec_case({f, 300, 256, 9, true});
    const int rows = 300, cols = 256, n = 9;
    const std::vector<float> w = random_vector(static_cast<size_t>(rows) * cols, 31);
    const kernels::PackedWeights p = kernels::pack_weights(w.data(), rows, cols, f);
    const std::vector<float> x = random_vector(static_cast<size_t>(n) * cols, 32);
    std::vector<float> y2(static_cast<size_t>(n) * rows), y3(y2.size(), 1.0f);
    kernels::matvec_v2(y2.data(), x.data(), p.view(), nullptr, n);
    kernels::matvec_v3(y3.data(), x.data(), p.view(), nullptr, n);
    INFO(kernels::format_name(f));
    CHECK(y2 == y3);
    // One input row at a time gives the same numbers as the batch: each input's sum is the
    // same fixed-order sum whichever batch of 4 it sits in.
    std::vector<float> one(static_cast<size_t>(rows));
    kernels::matvec_v3(one.data(), x.data() + static_cast<size_t>(5) * cols, p.view(), nullptr, 1);
    CHECK(std::equal(one.begin(), one.end(), y3.begin() + static_cast<ptrdiff_t>(5) * rows));
  }
}

TEST_CASE("matvec v2 and v3 refuse a view whose sizes do not suit its format", "[decode][kernels]") {
  const std::vector<float> w(3 * 64, 0.5f), x(64, 1.0f);
  kernels::PackedWeights p = kernels::pack_weights(w.data(), 3, 64, WeightFormat::int4);
  kernels::WeightsView v = p.view();
  v.cols = 48;
  std::vector<float> y(3);
  REQUIRE_THROWS_WITH(kernels::matvec_v2(y.data(), x.data(), v, nullptr, 1), Catch::Contains("multiple of 32"));
  REQUIRE_THROWS_AS(kernels::matvec_v3(y.data(), x.data(), v, nullptr, 1), std::invalid_argument);
  v.cols = 64;
  REQUIRE_THROWS_AS(kernels::matvec(y.data(), x.data(), v, nullptr, -1), std::invalid_argument);
  kernels::matvec(y.data(), x.data(), v, nullptr, 1);
  CHECK(y[0] == Approx(32.0f));  // 64 x 0.5, exact in int4 (0.5 = 7 x 0.5/7)
}

// ---- attention over a KV cache ------------------------------------------------------------

namespace {

// The whole sequence's qkv (B, T, C + 2 KV), KV = NKV * hs; positions [pos, pos+n) are the
// new ones. Each version gets caches holding positions < pos and NaN after them (a read of a
// position not yet written poisons the output), and must match nn::attention_forward's rows
// pos..pos+n-1 on the multi-head qkv (B, T, 3C) whose head h has KV head h / (NH / NKV)'s k
// and v (repeat_kv: grouped-query attention IS multi-head attention with shared k, v), and v1.
void check_attention_case(int B, int pos, int n, int C, int NH, int NKV) {
  const int T = pos + n, maxT = T + 3;
  const int hs = C / NH, group = NH / NKV;
  const size_t uC = static_cast<size_t>(C), uKV = static_cast<size_t>(NKV * hs), width = uC + 2 * uKV;
  const std::vector<float> qkv = random_vector(static_cast<size_t>(B) * T * width, 41, -2.0f, 2.0f);
  std::vector<float> mha(static_cast<size_t>(B) * T * 3 * uC);  // repeat_kv
  for (size_t r = 0; r < static_cast<size_t>(B) * T; ++r) {
    const float* src = qkv.data() + r * width;
    float* dst = mha.data() + r * 3 * uC;
    std::copy_n(src, uC, dst);
    for (int h = 0; h < NH; ++h) {
      const size_t kv = static_cast<size_t>(h / group) * hs, at = static_cast<size_t>(h) * hs;
      std::copy_n(src + uC + kv, hs, dst + uC + at);
      std::copy_n(src + uC + uKV + kv, hs, dst + 2 * uC + at);
    }
  }
  if (NKV == NH) REQUIRE(mha == qkv);  // the multi-head layout is the NKV = NH case
  std::vector<float> full(static_cast<size_t>(B) * T * uC);
  std::vector<float> preatt(static_cast<size_t>(B) * NH * T * T), att(preatt.size());
  nn::attention_forward<float>(full.data(), preatt.data(), att.data(), mha.data(), B, T, C, NH);

  std::vector<float> qkv_new(static_cast<size_t>(B) * n * width);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < n; ++i)
      std::copy_n(qkv.data() + (static_cast<size_t>(b) * T + pos + i) * width, width,
                  qkv_new.data() + (static_cast<size_t>(b) * n + i) * width);
  std::vector<double> want(static_cast<size_t>(B) * n * uC);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < n; ++i)
      for (size_t c = 0; c < uC; ++c)
        want[(static_cast<size_t>(b) * n + i) * uC + c] = full[(static_cast<size_t>(b) * T + pos + i) * uC + c];

  std::vector<float> v1_out, v2_out;
  for (const kernels::AttentionDecodeVersion& v : kernels::attention_decode_versions()) {
    const std::string what = "attention_decode v" + std::to_string(v.number) + " B=" + std::to_string(B) +
                             " pos=" + std::to_string(pos) + " n=" + std::to_string(n) + " C=" + std::to_string(C) +
                             " NH=" + std::to_string(NH) + " NKV=" + std::to_string(NKV);
    const float nan = h::GuardedBuffer::kNaN;
    std::vector<float> kcache(static_cast<size_t>(B) * maxT * uKV, nan), vcache(kcache.size(), nan);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < pos; ++t) {
        const float* row = qkv.data() + (static_cast<size_t>(b) * T + t) * width;
        std::copy_n(row + uC, uKV, kcache.data() + (static_cast<size_t>(b) * maxT + t) * uKV);
        std::copy_n(row + uC + uKV, uKV, vcache.data() + (static_cast<size_t>(b) * maxT + t) * uKV);
      }
    h::GuardedBuffer out(want.size(), 1);
    v.fn(out.data(), kcache.data(), vcache.data(), qkv_new.data(), B, n, pos, C, NH, NKV, maxT);
    require_guards(out, "out " + what);
    require_ok(h::compare("out", out.span(), want, {1e-5, 1e-4}), what + " vs nn::attention_forward");
    if (v.number == 1) {
      v1_out.assign(out.data(), out.data() + want.size());
    } else {
      std::vector<double> v1(v1_out.begin(), v1_out.end());
      require_ok(h::compare("out", out.span(), v1, {1e-5, 1e-4}), what + " vs v1");
    }
    // v3 is v2 with the loops across a group's heads turned round: the same bits.
    if (v.number == 2) v2_out.assign(out.data(), out.data() + want.size());
    if (v.number == 3) {
      INFO(what << " vs v2, bit for bit");
      CHECK(std::memcmp(out.data(), v2_out.data(), want.size() * sizeof(float)) == 0);
    }
    // The caches now hold the new k, v rows at [pos, pos+n), the old ones untouched, and
    // nothing written past pos+n.
    INFO(what);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < maxT; ++t) {
        const float* row = qkv.data() + (static_cast<size_t>(b) * T + std::min(t, T - 1)) * width;
        const float* kc = kcache.data() + (static_cast<size_t>(b) * maxT + t) * uKV;
        const float* vc = vcache.data() + (static_cast<size_t>(b) * maxT + t) * uKV;
        if (t < T) {
          CHECK(std::equal(kc, kc + uKV, row + uC));
          CHECK(std::equal(vc, vc + uKV, row + uC + uKV));
        } else {
          CHECK(std::all_of(kc, kc + uKV, [](float f) { return std::isnan(f); }));
          CHECK(std::all_of(vc, vc + uKV, [](float f) { return std::isnan(f); }));
        }
      }
  }
}

}  // namespace

TEST_CASE("attention_decode matches nn::attention_forward's rows and appends to the caches", "[decode][kernels]") {
  for (const int pos : {0, 5})
    for (const int n : {1, 3}) {
      check_attention_case(2, pos, n, 36, 3, 3);  // hs = 12: one SIMD register and a tail of 4 (AVX2)
      check_attention_case(2, pos, n, 64, 2, 2);  // hs = 32
    }
  check_attention_case(1, 40, 2, 48, 3, 3);  // hs = 16, a longer cache
  // Big enough for v2's threads: 2 x 4 x 8 items over ~70 positions.
  check_attention_case(2, 66, 4, 128, 8, 8);
}

TEST_CASE("attention_decode with grouped-query heads matches multi-head attention on repeated k and v",
          "[decode][kernels]") {
  // NKV in {NH, NH / 2, 1}, n in {1, > 1}, pos in {0, > 0}
  for (const int NKV : {4, 2, 1})
    for (const int pos : {0, 7})
      for (const int n : {1, 3}) check_attention_case(2, pos, n, 48, 4, NKV);  // hs = 12
  // threaded sizes, hs = 16: 12 query heads over 6, 4, 3, 2, 1 KV heads (v3's runs: a group
  // cut when (b, i, KV head) items are fewer than threads)
  for (const int NKV : {6, 4, 3, 2, 1}) {
    check_attention_case(1, 150, 1, 192, 12, NKV);
    check_attention_case(2, 70, 4, 192, 12, NKV);
  }
  // more than 64 query heads (v3 cuts them into runs of at most 64; 5 KV heads of 24: the
  // runs cannot follow KV-head boundaries) and 128 heads over 4 KV heads (they can)
  check_attention_case(1, 40, 1, 240, 120, 5);
  check_attention_case(2, 30, 2, 256, 128, 4);
}

TEST_CASE("attention_decode v2 and v3 give the same bits for 1 and 2 threads", "[decode][kernels]") {
  const int B = 1, n = 2, pos = 300, C = 256, NH = 8, maxT = pos + n;
  const int saved = omp_get_max_threads();
  for (const int NKV : {8, 4, 1}) {
    const size_t uKV = static_cast<size_t>(C / NH * NKV);
    const std::vector<float> qkv = random_vector(static_cast<size_t>(B) * n * (C + 2 * uKV), 43, -2.0f, 2.0f);
    const std::vector<float> k0 = random_vector(static_cast<size_t>(B) * maxT * uKV, 44, -2.0f, 2.0f),
                             v0 = random_vector(k0.size(), 45, -2.0f, 2.0f);
    std::vector<float> outs[2][2];  // [version v2, v3][threads 1, 2]
    for (int threads = 1; threads <= 2; ++threads) {
      omp_set_num_threads(threads);
      for (int v = 0; v < 2; ++v) {
        std::vector<float> kc = k0, vc = v0, out(static_cast<size_t>(B) * n * C, NAN);
        (v == 0 ? kernels::attention_decode_v2 : kernels::attention_decode_v3)(out.data(), kc.data(), vc.data(),
                                                                               qkv.data(), B, n, pos, C, NH, NKV, maxT);
        outs[v][threads - 1] = out;
      }
    }
    INFO("NKV=" << NKV);
    CHECK(std::memcmp(outs[0][0].data(), outs[0][1].data(), outs[0][0].size() * sizeof(float)) == 0);
    CHECK(std::memcmp(outs[1][0].data(), outs[1][1].data(), outs[1][0].size() * sizeof(float)) == 0);
    CHECK(std::memcmp(outs[0][0].data(), outs[1][0].data(), outs[0][0].size() * sizeof(float)) == 0);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("attention_decode refuses sizes it cannot serve", "[decode][kernels]") {
  std::vector<float> buf(4096, 0.0f);
  float* p = buf.data();
  for (const kernels::AttentionDecodeVersion& v : kernels::attention_decode_versions()) {
    INFO("attention_decode v" << v.number);
    REQUIRE_THROWS_AS(v.fn(p, p, p, p, 1, 1, 0, 10, 3, 3, 4), std::invalid_argument);  // C % NH
    REQUIRE_THROWS_WITH(v.fn(p, p, p, p, 1, 2, 3, 12, 3, 3, 4), Catch::Contains("maxT"));
    REQUIRE_THROWS_WITH(v.fn(p, p, p, p, 1, 1, 0, 12, 4, 3, 4), Catch::Contains("NKV"));  // NH % NKV
    REQUIRE_THROWS_AS(v.fn(p, p, p, p, 1, 1, 0, 12, 4, 0, 4), std::invalid_argument);
  }
}

// ---- the bench ------------------------------------------------------------------------------

// Runs an op's bench at its quick sizes (both thread counts of quick_bench_options): every
// version must validate and be timed. Returns the op for the checks of its description.
static const h::OpBench& check_quick_bench(const std::string& name) {
  const h::OpBench& op = kernels::bench::op(name);
  h::BenchOptions opts = testing::quick_bench_options();
  opts.sizes = op.quick_sizes;
  std::ostringstream log;
  const std::vector<h::Result> results = h::run_bench(op, opts, testing::fake_ceilings(), log);
  INFO(log.str());
  REQUIRE(results.size() == op.quick_sizes.size() * op.variants.size() * 2);
  for (const h::Result& r : results) {
    INFO(r.variant << " " << r.shape << " " << r.note);
    CHECK(r.valid);
    CHECK(r.timed);
  }
  return op;
}

TEST_CASE("the matvec bench validates and times every version at its quick sizes", "[decode][kernels]") {
  const h::OpBench& op = check_quick_bench("matvec");
  // Bytes: packed weights + x + y + bias; v1 reads the weights once per input row.
  const auto p = op.make("int4:3x64x96", 1);
  const double once = static_cast<double>(kernels::format_bytes(WeightFormat::int4, 64, 96)) + 4.0 * (3 * 96 + 3 * 64 + 64);
  CHECK(p->bytes(1) == once);
  CHECK(p->bytes(0) == once + 2.0 * static_cast<double>(kernels::format_bytes(WeightFormat::int4, 64, 96)));
  CHECK(p->flops() == 2.0 * 3 * 64 * 96);
  CHECK(p->shape() == "int4 n=3 rows=64 cols=96");
  CHECK(op.make("1Kx2K", 1)->shape() == "fp32 n=1 rows=1K cols=2K");
  REQUIRE_THROWS_WITH(op.make("int4:64x48", 1), Catch::Contains("multiple of 32"));
  REQUIRE_THROWS_WITH(op.make("int3:64x64", 1), Catch::Contains("int8"));
  REQUIRE_THROWS_AS(op.make("64", 1), std::invalid_argument);
  REQUIRE_THROWS_AS(op.check_size("int8:2x3x4x5"), std::invalid_argument);
}

TEST_CASE("the attention_decode bench validates every version at its quick sizes", "[decode][kernels]") {
  const h::OpBench& op = check_quick_bench("attention_decode");
  const auto p = op.make("2x37x36x3", 1);
  CHECK(p->shape() == "B=2 pos=37 C=36 NH=3");
  CHECK(p->flops() == 4.0 * 2 * 38 * 36);
  REQUIRE_THROWS_WITH(op.make("2x37x36x5", 1), Catch::Contains("multiple of NH"));
  REQUIRE_THROWS_AS(op.check_size("2x37x36"), std::invalid_argument);
  // grouped-query sizes: NKV divides NH; the cache is NKV / NH of the multi-head one, read
  // NH / NKV times by v1 and v2 and once by v3
  const auto g = op.make("2x37x48x4x2", 1);
  CHECK(g->shape() == "B=2 pos=37 C=48 NH=4 NKV=2");
  CHECK(g->flops() == 4.0 * 2 * 38 * 48);
  const double cache = 2.0 * 38 * 24, rest = 2.0 * (48 + 48) + 2.0 * 48 + 2.0 * 2 * 24;
  CHECK(g->bytes(2) == 4.0 * (2.0 * cache + rest));
  CHECK(g->bytes(1) == 4.0 * (2.0 * cache * 2 + rest));
  CHECK(op.make("2x37x48x4x4", 1)->shape() == "B=2 pos=37 C=48 NH=4");
  REQUIRE_THROWS_WITH(op.make("2x37x48x4x3", 1), Catch::Contains("NKV must divide NH"));
  REQUIRE_THROWS_AS(op.check_size("2x37x48x4x2x1"), std::invalid_argument);
}

// ---- w8a8: int8 weights AND activations (lesson 15) --------------------------------------------
// The weights are int8's bytes; each input row is quantised per token and multiplied in
// integers. Three checks: v1 against the same arithmetic in double on the quantised values
// (the definition), every other version and the portable kernel against v1 BIT FOR BIT (the
// int32 sums are exact and the float epilogue is one shared function), and the result close
// to the fp32 matvec on the unpacked weights (the activation rounding only: half a step of
// max|x| / 127 per input, summed over cols).
TEST_CASE("w8a8 matvec: v1 is the integer definition, every version equals it bit for bit", "[decode][kernels][int8]") {
  struct Case {
    int rows, cols, n;
    bool bias;
  };
  // odd widths (tails after 64 / 32 bytes), batches around kBatch = 4, enough weights for threads
  for (const Case& m : {Case{37, 96, 1, true}, Case{5, 1, 2, true}, Case{5, 7, 2, false}, Case{6, 75, 3, true},
                        Case{9, 130, 5, false}, Case{130, 701, 6, true}, Case{257, 200, 1, true}, Case{4, 32, 0, true}}) {
    const std::string what = "rows=" + std::to_string(m.rows) + " cols=" + std::to_string(m.cols) +
                             " n=" + std::to_string(m.n) + (m.bias ? " bias" : " no bias");
    INFO(what);
    const size_t nx = static_cast<size_t>(m.n) * m.cols, ny = static_cast<size_t>(m.n) * m.rows;
    const std::vector<float> w = random_vector(static_cast<size_t>(m.rows) * m.cols, 31);
    const kernels::PackedWeights p = kernels::pack_weights(w.data(), m.rows, m.cols, WeightFormat::w8a8);
    // the same bytes and scales as int8
    const kernels::PackedWeights p8 = kernels::pack_weights(w.data(), m.rows, m.cols, WeightFormat::int8);
    CHECK(p.data.to_vector() == p8.data.to_vector());
    CHECK(p.scales.to_vector() == p8.scales.to_vector());
    CHECK(p.bytes() == kernels::format_bytes(WeightFormat::int8, m.rows, m.cols));
    h::GuardedBuffer x(std::max<size_t>(nx, 1), 3);
    h::fill_random(x.span(), 32);
    if (m.n >= 3)  // an all-zero token: scale 0, y = bias
      for (int c = 0; c < m.cols; ++c) x.data()[static_cast<size_t>(2) * m.cols + c] = 0.0f;
    const std::vector<float> bias = random_vector(static_cast<size_t>(m.rows), 33);
    const float* b = m.bias ? bias.data() : nullptr;
    // the definition, in double
    std::vector<int8_t> qx(std::max<size_t>(nx, 1));
    std::vector<float> sx(static_cast<size_t>(std::max(m.n, 1)));
    kernels::quantize_rows_int8(x.data(), m.n, m.cols, qx.data(), sx.data());
    const auto* q = reinterpret_cast<const int8_t*>(p.data.data());
    std::vector<double> want(ny);
    for (int bi = 0; bi < m.n; ++bi)
      for (int r = 0; r < m.rows; ++r) {
        int64_t dot = 0;
        for (int c = 0; c < m.cols; ++c)
          dot += int64_t{qx[static_cast<size_t>(bi) * m.cols + c]} * q[static_cast<size_t>(r) * m.cols + c];
        want[static_cast<size_t>(bi) * m.rows + r] = static_cast<double>(sx[static_cast<size_t>(bi)]) *
                                                         p.scales.data()[r] * static_cast<double>(dot) +
                                                     (b ? b[r] : 0.0);
      }
    h::GuardedBuffer y1(std::max<size_t>(ny, 1), 1);
    kernels::matvec_v1(y1.data(), x.data(), p.view(), b, m.n);
    require_guards(y1, "y v1");
    if (m.n > 0) require_ok(h::compare("y", {y1.data(), ny}, want, {1e-6, 1e-5}), "v1 vs the integer definition");
    // the fp32 matvec on the unpacked weights: only x's rounding separates them
    const std::vector<double> fp = reference_matvec(unpacked(p), x.data(), b, m.rows, m.cols, m.n);
    if (m.n > 0)
      require_ok(h::compare("y", {y1.data(), ny}, fp, {0.01 * std::sqrt(static_cast<double>(m.cols)), 0.0}),
                 "v1 vs fp32 on the same weights");
    std::vector<std::pair<std::string, kernels::MatvecFn>> fns;
    for (const kernels::MatvecVersion& v : kernels::matvec_versions()) fns.emplace_back(v.id(), v.fn);
    fns.emplace_back("portable", kernels::matvec_portable);
    for (const auto& [name, fn] : fns) {
      INFO(name);
      h::GuardedBuffer y(std::max<size_t>(ny, 1), 2);
      fn(y.data(), x.data(), p.view(), b, m.n);
      require_guards(y, "y " + name);
      size_t differ = 0;
      for (size_t i = 0; i < ny; ++i) differ += std::memcmp(&y.data()[i], &y1.data()[i], sizeof(float)) != 0;
      CHECK(differ == 0);
    }
  }
  CHECK(kernels::parse_format("w8a8") == WeightFormat::w8a8);
  CHECK(std::string(kernels::format_name(WeightFormat::w8a8)) == "w8a8");
  CHECK(kernels::check_packable(WeightFormat::w8a8, 3, 5).empty());
}

// ---- attention over an int8 KV cache (lesson 15) -----------------------------------------------
// The cache's rounding must be gpt::quantize_dequantize_heads_int8's exactly (the Decoder is
// compared with gpt::compressed_logits on it), and every version must equal v1, which must equal
// the fp32 attention_decode_v1 run on the dequantised k and v (the same values, the same double
// sums).
namespace {

void check_int8_attention_case(int B, int pos, int n, int C, int NH, int NKV) {
  const int hs = C / NH, T = pos + n, maxT = T + 2;  // 2 rows past the end: must stay untouched
  const size_t uC = static_cast<size_t>(C), uKV = static_cast<size_t>(NKV * hs), uNKV = static_cast<size_t>(NKV);
  const size_t width = uC + 2 * uKV;
  const std::string what = "B=" + std::to_string(B) + " pos=" + std::to_string(pos) + " n=" + std::to_string(n) +
                           " C=" + std::to_string(C) + " NH=" + std::to_string(NH) + " NKV=" + std::to_string(NKV);
  INFO(what);
  // (B, T, C + 2 KV) with heads of different magnitudes (a per-head scale must matter)
  std::vector<float> qkv = random_vector(static_cast<size_t>(B) * T * width, 71 + static_cast<uint64_t>(C + pos), -2.0f, 2.0f);
  for (size_t r = 0; r < static_cast<size_t>(B) * T; ++r)
    for (size_t j = uC; j < width; ++j) qkv[r * width + j] *= 1.0f + static_cast<float>((j - uC) / static_cast<size_t>(hs) % 3);
  // the reference rounding: every row's k and v through quantize_dequantize_heads_int8
  std::vector<float> deq = qkv;
  for (size_t r = 0; r < static_cast<size_t>(B) * T; ++r) {
    gpt::quantize_dequantize_heads_int8(deq.data() + r * width + uC, NKV, hs);
    gpt::quantize_dequantize_heads_int8(deq.data() + r * width + uC + uKV, NKV, hs);
  }
  REQUIRE(deq != qkv);  // the rounding changed something
  // rows [0, pos) are already in the cache; rows [pos, T) are the new ones
  auto rows = [&](const std::vector<float>& src, int t0, int count) {
    std::vector<float> out(static_cast<size_t>(B) * static_cast<size_t>(count) * width);
    for (int b = 0; b < B; ++b)
      std::copy_n(src.data() + (static_cast<size_t>(b) * T + static_cast<size_t>(t0)) * width,
                  static_cast<size_t>(count) * width, out.data() + static_cast<size_t>(b * count) * width);
    return out;
  };
  const std::vector<float> old_rows = rows(qkv, 0, pos), new_rows = rows(qkv, pos, n);
  // the fp32 reference over the dequantised values: attention_decode_v1 on deq
  std::vector<float> kf(static_cast<size_t>(B) * maxT * uKV, 0.0f), vf(kf.size(), 0.0f);
  std::vector<float> ref(static_cast<size_t>(B) * n * uC);
  if (pos > 0) {
    std::vector<float> scratch(static_cast<size_t>(B) * pos * uC);
    kernels::attention_decode_v1(scratch.data(), kf.data(), vf.data(), rows(deq, 0, pos).data(), B, pos, 0, C, NH, NKV, maxT);
  }
  kernels::attention_decode_v1(ref.data(), kf.data(), vf.data(), rows(deq, pos, n).data(), B, n, pos, C, NH, NKV, maxT);
  const std::vector<double> want(ref.begin(), ref.end());

  std::vector<float> v1_out;
  using Fn = kernels::AttentionDecodeInt8Fn;
  std::vector<std::pair<std::string, Fn>> fns;
  for (const auto& v : kernels::attention_decode_int8_versions()) {
    std::string name = "v";  // (not "v" + to_string: GCC 12 warns falsely, -Wrestrict)
    name += std::to_string(v.number);
    fns.emplace_back(name, v.fn);
  }
  fns.emplace_back("portable", kernels::attention_decode_int8_portable);
  for (const auto& [name, fn] : fns) {
    INFO("attention_decode_int8 " << name);
    std::vector<int8_t> kq(static_cast<size_t>(B) * maxT * uKV, int8_t{99}), vq(kq.size(), int8_t{99});
    std::vector<float> ks(static_cast<size_t>(B) * maxT * uNKV, NAN), vs(ks.size(), NAN);
    if (pos > 0) kernels::append_kv_int8(kq.data(), vq.data(), ks.data(), vs.data(), old_rows.data(), B, pos, 0, C, NH, NKV, maxT);
    h::GuardedBuffer out(want.size(), 1);
    fn(out.data(), kq.data(), vq.data(), ks.data(), vs.data(), new_rows.data(), B, n, pos, C, NH, NKV, maxT);
    require_guards(out, "out");
    // v1 reads the same values as the fp32 reference, in double: rounding of the last step only;
    // v2 and the portable twin sum in float, in their own order (AVX2 and AVX-512 differ)
    const h::Tolerance tol = name == "v1" ? h::Tolerance{1e-6, 1e-5} : h::Tolerance{1e-5, 1e-4};
    require_ok(h::compare("out", out.span(), want, tol), name + " vs fp32 v1 on the dequantised k, v");
    if (name == "v1") {
      v1_out.assign(out.data(), out.data() + want.size());
    } else {
      const std::vector<double> v1(v1_out.begin(), v1_out.end());
      require_ok(h::compare("out", out.span(), v1, {1e-5, 1e-4}), name + " vs v1");
    }
    // the cache: q s is the dequantised value bit for bit, q in [-127, 127], a head's max at
    // +-127; rows past pos + n untouched
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < maxT; ++t)
        for (size_t hh = 0; hh < uNKV; ++hh) {
          const size_t row = static_cast<size_t>(b) * maxT + static_cast<size_t>(t);
          for (int kv = 0; kv < 2; ++kv) {
            const int8_t* q = (kv == 0 ? kq : vq).data() + row * uKV + hh * static_cast<size_t>(hs);
            const float s = (kv == 0 ? ks : vs)[row * uNKV + hh];
            if (t >= T) {
              CHECK(std::isnan(s));
              CHECK(std::all_of(q, q + hs, [](int8_t x) { return x == 99; }));
              continue;
            }
            const float* d = deq.data() + (static_cast<size_t>(b) * T + static_cast<size_t>(t)) * width + uC +
                             static_cast<size_t>(kv) * uKV + hh * static_cast<size_t>(hs);
            int amax = 0;
            for (int c = 0; c < hs; ++c) {
              INFO("b " << b << " t " << t << " head " << hh << (kv == 0 ? " k" : " v") << " channel " << c);
              REQUIRE(static_cast<float>(q[c]) * s == d[c]);
              REQUIRE(std::abs(static_cast<int>(q[c])) <= 127);
              amax = std::max(amax, std::abs(static_cast<int>(q[c])));
            }
            CHECK(amax == 127);
          }
        }
  }
}

}  // namespace

TEST_CASE("attention_decode_int8: every version equals v1 and the fp32 kernel on the dequantised cache",
          "[decode][kernels][int8]") {
  for (const int pos : {0, 5})
    for (const int n : {1, 3}) {
      check_int8_attention_case(2, pos, n, 36, 3, 3);  // hs = 12: a SIMD register and a tail (AVX2)
      check_int8_attention_case(1, pos, n, 48, 4, 2);  // GQA, hs = 12
      check_int8_attention_case(2, pos, n, 40, 4, 1);  // MQA, hs = 10 (below AVX-512's 16)
    }
  check_int8_attention_case(1, 40, 2, 96, 3, 3);     // hs = 32, a longer cache
  check_int8_attention_case(2, 66, 4, 128, 8, 4);    // big enough for v2's threads
}

TEST_CASE("attention_decode_int8: an all-zero head stores scale 0 and zeros, and bad sizes are refused",
          "[decode][kernels][int8]") {
  const float zeros[8] = {};
  int8_t q[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(kernels::quantize_head_int8(zeros, 8, q) == 0.0f);
  CHECK(std::all_of(q, q + 8, [](int8_t x) { return x == 0; }));
  std::vector<float> buf(4096, 0.0f);
  std::vector<int8_t> ib(4096, 0);
  float* p = buf.data();
  int8_t* c = ib.data();
  for (const auto& v : kernels::attention_decode_int8_versions()) {
    INFO("attention_decode_int8 v" << v.number);
    REQUIRE_THROWS_AS(v.fn(p, c, c, p, p, p, 1, 1, 0, 10, 3, 3, 4), std::invalid_argument);  // C % NH
    REQUIRE_THROWS_WITH(v.fn(p, c, c, p, p, p, 1, 2, 3, 12, 3, 3, 4), Catch::Contains("maxT"));
    REQUIRE_THROWS_WITH(v.fn(p, c, c, p, p, p, 1, 1, 0, 12, 4, 3, 4), Catch::Contains("NKV"));
  }
}

TEST_CASE("attention_decode_int8 v2 gives the same bits for 1 and 2 threads", "[decode][kernels][int8]") {
  const int B = 1, n = 2, pos = 300, C = 256, NH = 8, maxT = pos + n;
  const int saved = omp_get_max_threads();
  for (const int NKV : {8, 2}) {
    const size_t uKV = static_cast<size_t>(C / NH * NKV), uNKV = static_cast<size_t>(NKV);
    const std::vector<float> old = random_vector(static_cast<size_t>(B) * pos * (C + 2 * uKV), 46, -2.0f, 2.0f);
    const std::vector<float> qkv = random_vector(static_cast<size_t>(B) * n * (C + 2 * uKV), 47, -2.0f, 2.0f);
    std::vector<int8_t> kq0(static_cast<size_t>(B) * maxT * uKV), vq0(kq0.size());
    std::vector<float> ks0(static_cast<size_t>(B) * maxT * uNKV), vs0(ks0.size());
    kernels::append_kv_int8(kq0.data(), vq0.data(), ks0.data(), vs0.data(), old.data(), B, pos, 0, C, NH, NKV, maxT);
    std::vector<float> outs[2];
    for (int threads = 1; threads <= 2; ++threads) {
      omp_set_num_threads(threads);
      std::vector<int8_t> kq = kq0, vq = vq0;
      std::vector<float> ks = ks0, vs = vs0, out(static_cast<size_t>(B) * n * C, NAN);
      kernels::attention_decode_int8_v2(out.data(), kq.data(), vq.data(), ks.data(), vs.data(), qkv.data(), B, n, pos,
                                        C, NH, NKV, maxT);
      outs[threads - 1] = out;
    }
    INFO("NKV=" << NKV);
    CHECK(std::none_of(outs[0].begin(), outs[0].end(), [](float x) { return std::isnan(x); }));
    CHECK(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)) == 0);
  }
  omp_set_num_threads(saved);
}
