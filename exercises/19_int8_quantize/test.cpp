// Tests of exercise 19_int8_quantize. The expected values come from rows worked by hand,
// from the rule's own guarantees (the max maps to +-127, the error is at most half a step),
// and from the library: kernels::pack_weights / unpack_weights / matvec_v1 (kernels/decode.h),
// which the quantiser must match bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/19_int8_quantize/int8_quantize.h"
#include "exercises/test_util.h"
#include "kernels/decode.h"
#include "nn/rng.h"

namespace {

constexpr int8_t kUnwritten = -128;  // what q starts as: quantize never produces it
constexpr int8_t kQGuard = 99;       // after the end of q

size_t sz(int a, int b = 1) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

void check(const ex_test::Comparison& c) {
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

std::vector<int8_t> q_buffer(size_t n) {
  std::vector<int8_t> v(n + ex_test::kGuard, kQGuard);
  for (size_t i = 0; i < n; ++i) v[i] = kUnwritten;
  return v;
}

struct Quantized {
  std::vector<int8_t> q;
  std::vector<float> scales;
};
Quantized quantize(const std::vector<float>& w, int rows, int cols) {
  Quantized r{q_buffer(sz(rows, cols)), ex_test::output_buffer(sz(rows))};
  ex::quantize_int8_rows(r.q.data(), r.scales.data(), w.data(), rows, cols);
  return r;
}

// "" when q's guards are intact and every q was written, else what went wrong.
std::string q_damage(const Quantized& r, int rows, int cols) {
  std::ostringstream os;
  const size_t n = sz(rows, cols);
  for (size_t i = 0; i < n; ++i) {
    if (r.q[i] == kUnwritten) {
      os << "q[" << i << "] (row " << i / static_cast<size_t>(cols) << ", column " << i % static_cast<size_t>(cols)
         << ") still holds -128: it was never written (and -128 is outside [-127, 127])\n";
      break;
    }
  }
  for (size_t i = n; i < r.q.size(); ++i) {
    if (r.q[i] != kQGuard) {
      os << "q[" << i << "] was written, but q has only " << n << " elements: an index runs past the end\n";
      break;
    }
  }
  return os.str() + ex_test::guard_damage(r.scales, sz(rows), "scales");
}

// q as doubles, to compare with ex_test::compare
std::vector<float> q_as_float(const Quantized& r, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(r.q[i]);
  return v;
}

std::string row_col(size_t i, int cols) {
  return "row " + std::to_string(i / static_cast<size_t>(cols)) + ", column " + std::to_string(i % static_cast<size_t>(cols));
}

// rows of very different sizes: row r is scaled by 2^(r - rows/2), as the rows of a real
// weight matrix differ. One scale for the whole matrix would flatten the small rows.
std::vector<float> random_rows(nn::Rng& rng, int rows, int cols) {
  std::vector<float> w = ex_test::random_normal(rng, sz(rows, cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) w[sz(r, cols) + static_cast<size_t>(c)] *= std::ldexp(1.0f, r - rows / 2);
  return w;
}

}  // namespace

TEST_CASE("quantize_int8_rows: worked rows, and a row of zeros", "[19_int8_quantize]") {
  // row 0: max |w| = 1.27, scale = 0.01: w / scale = 50, -127, 25, 100, 0.4, -1.6
  // row 1: all zeros: scale 0 and q 0 (0 / 0 would be NaN)
  const std::vector<float> w = {0.5f, -1.27f, 0.25f, 1.0f, 0.004f, -0.016f,  //
                                0.0f, 0.0f,   0.0f,  0.0f, 0.0f,   0.0f};
  const Quantized r = quantize(w, 2, 6);
  INFO("row 0 = {0.5, -1.27, 0.25, 1, 0.004, -0.016}: scale = 1.27 / 127 = 0.01, q = {50, -127, 25, 100, 0, -2}; "
       "row 1 is all zeros: scale 0, q all 0");
  const std::string damage = q_damage(r, 2, 6);
  INFO(damage);
  REQUIRE(damage.empty());
  check(ex_test::compare("scales", {r.scales.data(), 2}, std::vector<double>{1.27f / 127.0f, 0.0}, 0.0, 0.0));
  check(ex_test::compare("q", q_as_float(r, 12),
                         std::vector<double>{50, -127, 25, 100, 0, -2, 0, 0, 0, 0, 0, 0}, 0.0, 0.0,
                         [](size_t i) { return row_col(i, 6); }));
}

TEST_CASE("quantize_int8_rows: halfway cases round to even (std::nearbyint), as the library does",
          "[19_int8_quantize]") {
  // max |w| = 127, so scale = 1 and q = nearbyint(w): 0.5 -> 0, 1.5 -> 2, -2.5 -> -2, -0.5 -> 0, 3.5 -> 4
  const std::vector<float> w = {127.0f, 0.5f, 1.5f, -2.5f, -0.5f, 3.5f};
  const Quantized r = quantize(w, 1, 6);
  INFO("scale = 127 / 127 = 1, so q is w rounded: halfway cases go to the EVEN neighbour (std::nearbyint); "
       "std::round would give 1, 2, -3, -1, 4");
  CHECK(r.scales[0] == 1.0f);
  check(ex_test::compare("q", q_as_float(r, 6), std::vector<double>{127, 0, 2, -2, 0, 4}, 0.0, 0.0));
}

TEST_CASE("quantize_int8_rows: divide by the scale (w * (1 / scale) can round the other way)",
          "[19_int8_quantize]") {
  // scale = 0.95349884 / 127; -0.251513451 / scale = -33.4999... but -0.251513451 * (1 / scale)
  // = -33.5000... in float: the two land on different sides of the halfway point.
  const std::vector<float> w = {0.95349884f, -0.251513451f};
  const Quantized r = quantize(w, 1, 2);
  INFO("w = {0.95349884, -0.251513451}: q[1] = nearbyint(w / scale) = -33, while nearbyint(w * (1 / scale)) "
       "= -34 (and kernels::pack_weights divides)");
  check(ex_test::compare("q", q_as_float(r, 2), std::vector<double>{127, -33}, 0.0, 0.0));
  const kernels::PackedWeights lib = kernels::pack_weights(w.data(), 1, 2, kernels::WeightFormat::int8);
  CHECK(static_cast<int8_t>(lib.data[1]) == -33);  // the library agrees
}

TEST_CASE("quantize_int8_rows: per row, the max maps to +-127 and every weight moves by at most scale / 2",
          "[19_int8_quantize]") {
  nn::Rng rng(1901);
  const int rows = 13, cols = 37;
  const std::vector<float> w = random_rows(rng, rows, cols);
  const Quantized r = quantize(w, rows, cols);
  const std::string damage = q_damage(r, rows, cols);
  INFO(damage);
  REQUIRE(damage.empty());
  std::ostringstream bad_scale, bad_max, bad_err;
  for (int row = 0; row < rows; ++row) {
    const float* wr = w.data() + sz(row, cols);
    const int8_t* qr = r.q.data() + sz(row, cols);
    int arg = 0;
    for (int c = 1; c < cols; ++c)
      if (std::fabs(wr[c]) > std::fabs(wr[arg])) arg = c;
    const float want_scale = std::fabs(wr[arg]) / 127.0f;
    const float scale = r.scales[static_cast<size_t>(row)];
    if (!(scale == want_scale)) bad_scale << "  scales[" << row << "] = " << scale << ", expected max |w| / 127 = " << want_scale << "\n";
    const int want_q = wr[arg] > 0.0f ? 127 : -127;
    if (qr[arg] != want_q)
      bad_max << "  row " << row << ": its largest |w| is w[" << arg << "] = " << wr[arg] << ", q = " << int{qr[arg]}
              << ", expected " << want_q << "\n";
    for (int c = 0; c < cols; ++c) {
      const double err = std::fabs(static_cast<double>(wr[c]) - static_cast<double>(want_scale) * qr[c]);
      if (!(err <= 0.5 * want_scale * (1.0 + 1e-5)) && bad_err.str().size() < 400)
        bad_err << "  row " << row << ", column " << c << ": w = " << wr[c] << ", q = " << int{qr[c]}
                << ", scale * q = " << want_scale * qr[c] << ": off by " << err << " > scale / 2 = " << 0.5 * want_scale << "\n";
    }
  }
  INFO("rows scaled by 2^(r - 6): every row needs its own scale\n" << bad_scale.str() << bad_max.str() << bad_err.str());
  CHECK(bad_scale.str().empty());
  CHECK(bad_max.str().empty());
  CHECK(bad_err.str().empty());
}

TEST_CASE("quantize_int8_rows: a zero row among others gives scale 0 and q 0, and dequantizes to 0",
          "[19_int8_quantize]") {
  nn::Rng rng(1902);
  const int rows = 4, cols = 9;
  std::vector<float> w = ex_test::random_normal(rng, sz(rows, cols));
  for (int c = 0; c < cols; ++c) w[sz(2, cols) + static_cast<size_t>(c)] = 0.0f;  // row 2
  const Quantized r = quantize(w, rows, cols);
  INFO("row 2 is all zeros: max |w| = 0, so scale = 0 and q = 0 (never 0 / 0, which is NaN)");
  CHECK(r.scales[2] == 0.0f);
  std::ostringstream bad;
  for (int c = 0; c < cols; ++c)
    if (r.q[sz(2, cols) + static_cast<size_t>(c)] != 0) bad << "  q[row 2, column " << c << "] = " << int{r.q[sz(2, cols) + static_cast<size_t>(c)]} << "\n";
  INFO(bad.str());
  CHECK(bad.str().empty());
  std::vector<float> deq = ex_test::output_buffer(sz(rows, cols));
  ex::dequantize_int8_rows(deq.data(), r.q.data(), r.scales.data(), rows, cols);
  check(ex_test::compare("dequantized row 2", {deq.data() + sz(2, cols), sz(cols)}, std::vector<double>(sz(cols), 0.0),
                         0.0, 0.0));
}

TEST_CASE("quantize_int8_rows: the same bytes as kernels::pack_weights(..., int8)", "[19_int8_quantize]") {
  nn::Rng rng(1903);
  const int rows = 11, cols = 53;
  std::vector<float> w = random_rows(rng, rows, cols);
  for (int c = 0; c < cols; ++c) w[sz(5, cols) + static_cast<size_t>(c)] = 0.0f;  // a zero row too
  const Quantized r = quantize(w, rows, cols);
  const kernels::PackedWeights lib = kernels::pack_weights(w.data(), rows, cols, kernels::WeightFormat::int8);
  INFO("kernels::pack_weights stores scales[r] = max |w| / 127 and q = nearbyint(w / scale) clamped to [-127, 127]");
  std::vector<float> lib_q(sz(rows, cols));
  for (size_t i = 0; i < lib_q.size(); ++i) lib_q[i] = static_cast<float>(static_cast<int8_t>(lib.data[i]));
  check(ex_test::compare("scales", {r.scales.data(), sz(rows)}, ex_test::to_double(lib.scales), 0.0, 0.0));
  check(ex_test::compare("q", q_as_float(r, sz(rows, cols)), ex_test::to_double(lib_q), 0.0, 0.0,
                         [&](size_t i) { return row_col(i, cols) + ", w = " + std::to_string(w[i]); }));
  const std::string damage = q_damage(r, rows, cols);
  INFO(damage);
  CHECK(damage.empty());
}

TEST_CASE("dequantize_int8_rows: scale_r * q, the same floats as kernels::unpack_weights", "[19_int8_quantize]") {
  SECTION("by hand") {
    const std::vector<int8_t> q = {1, -2, 127, 0, 5, -127};
    const std::vector<float> scales = {0.5f, 0.25f};
    std::vector<float> w = ex_test::output_buffer(6);
    ex::dequantize_int8_rows(w.data(), q.data(), scales.data(), 2, 3);
    INFO("q = {1, -2, 127 | 0, 5, -127}, scales = {0.5, 0.25}");
    check(ex_test::compare("w", {w.data(), 6}, std::vector<double>{0.5, -1.0, 63.5, 0.0, 1.25, -31.75}, 0.0, 0.0,
                           [](size_t i) { return row_col(i, 3); }));
    const std::string overrun = ex_test::guard_damage(w, 6, "w");
    INFO(overrun);
    CHECK(overrun.empty());
  }
  SECTION("random, from kernels::pack_weights' bytes") {
    nn::Rng rng(1904);
    const int rows = 7, cols = 29;
    const std::vector<float> w = random_rows(rng, rows, cols);
    const kernels::PackedWeights lib = kernels::pack_weights(w.data(), rows, cols, kernels::WeightFormat::int8);
    std::vector<float> want(sz(rows, cols));
    kernels::unpack_weights(lib.view(), want.data());
    std::vector<float> got = ex_test::output_buffer(sz(rows, cols));
    ex::dequantize_int8_rows(got.data(), reinterpret_cast<const int8_t*>(lib.data.data()), lib.scales.data(), rows, cols);
    check(ex_test::compare("w", {got.data(), want.size()}, ex_test::to_double(want), 0.0, 0.0,
                           [&](size_t i) { return row_col(i, cols); }));
    const std::string overrun = ex_test::guard_damage(got, want.size(), "w");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}

TEST_CASE("int8_matvec: y = scale_r * sum_c q[r,c] x[c], against double and kernels::matvec_v1",
          "[19_int8_quantize]") {
  nn::Rng rng(1905);
  const int rows = 17, cols = 45;
  const std::vector<float> w = ex_test::random_normal(rng, sz(rows, cols));
  const std::vector<float> x = ex_test::random_normal(rng, sz(cols));
  const kernels::PackedWeights lib = kernels::pack_weights(w.data(), rows, cols, kernels::WeightFormat::int8);
  const auto* q = reinterpret_cast<const int8_t*>(lib.data.data());
  std::vector<float> y = ex_test::output_buffer(sz(rows));
  ex::int8_matvec(y.data(), x.data(), q, lib.scales.data(), rows, cols);
  SECTION("against the sum in double") {
    std::vector<double> want(sz(rows));
    for (int r = 0; r < rows; ++r) {
      double acc = 0.0;
      for (int c = 0; c < cols; ++c) acc += static_cast<double>(q[sz(r, cols) + static_cast<size_t>(c)]) * x[static_cast<size_t>(c)];
      want[static_cast<size_t>(r)] = static_cast<double>(lib.scales[static_cast<size_t>(r)]) * acc;
    }
    INFO("q and scales from kernels::pack_weights of a random (17, 45) matrix; y (17) = W' x");
    check(ex_test::compare("y", {y.data(), sz(rows)}, want, 1e-4, 1e-4));
  }
  SECTION("against kernels::matvec_v1 on the packed matrix") {
    std::vector<float> want(sz(rows));
    kernels::matvec_v1(want.data(), x.data(), lib.view(), nullptr, 1);
    check(ex_test::compare("y", {y.data(), sz(rows)}, ex_test::to_double(want), 1e-4, 1e-4));
  }
  SECTION("nothing is written past the end of y") {
    const std::string overrun = ex_test::guard_damage(y, sz(rows), "y");
    INFO(overrun);
    CHECK(overrun.empty());
  }
}
