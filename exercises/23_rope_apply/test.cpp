// Tests of exercise 23_rope_apply. The expected values come from kernels::rope_forward_v1<double>
// with kernels::rope_tables<double> (kernels/rope.h); a worked example by hand; the property
// that makes RoPE useful (q_p . k_p' depends on p - p' only); and the known mistakes (the
// interleaved pairing, positions from 0 instead of pos0, the inverse rotation) named when the
// numbers show them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/23_rope_apply/rope_apply.h"
#include "exercises/test_util.h"
#include "kernels/rope.h"
#include "nn/rng.h"

namespace {

// RoPE of x (T, NH, hs) from position pos0 in double; `pairing` (2i, 2i + 1) or sign flips give
// the mistakes' results.
enum class Variant { right, interleaved, from_zero, inverse };
std::vector<double> reference(const std::vector<float>& x, int T, int NH, int hs, int pos0, double theta, Variant v) {
  const int half = hs / 2;
  std::vector<double> out(x.begin(), x.end());
  for (int t = 0; t < T; ++t) {
    const double p = v == Variant::from_zero ? t : pos0 + t;
    for (int i = 0; i < half; ++i) {
      const double a = p * std::pow(theta, -2.0 * i / hs);
      const double c = std::cos(a), s = v == Variant::inverse ? -std::sin(a) : std::sin(a);
      for (int h = 0; h < NH; ++h) {
        const size_t base = (static_cast<size_t>(t) * NH + h) * hs;
        const size_t i0 = base + (v == Variant::interleaved ? 2 * i : i);
        const size_t i1 = base + (v == Variant::interleaved ? 2 * i + 1 : i + half);
        out[i0] = x[i0] * c - x[i1] * s;
        out[i1] = x[i1] * c + x[i0] * s;
      }
    }
  }
  return out;
}

void check_against(const std::vector<float>& got, const std::vector<float>& x, int T, int NH, int hs, int pos0,
                   double theta, const std::vector<double>& want) {
  const size_t n = want.size();
  std::vector<ex_test::Cause> causes;
  const std::pair<Variant, const char*> mistakes[] = {
      {Variant::interleaved, "the pairs are (2i, 2i + 1), the RoFormer paper's; Llama's are (i, i + hs/2)"},
      {Variant::from_zero, "the positions start at 0; the first row is the token at position pos0"},
      {Variant::inverse, "the rotation goes the wrong way (the sin terms' signs swapped): that is the backward"}};
  for (const auto& [v, msg] : mistakes) {
    const std::vector<double> wrong = reference(x, T, NH, hs, pos0, theta, v);
    causes.push_back({msg, [&got, wrong](size_t i) { return std::fabs(got[i] - wrong[i]) < 1e-5; }});
  }
  const std::string cause = ex_test::diagnose({got.data(), n}, want, 1e-5, 1e-5, causes);
  const auto c = ex_test::compare("x", {got.data(), n}, want, 1e-5, 1e-5, [&](size_t i) {
    std::ostringstream os;
    const size_t per = static_cast<size_t>(NH) * hs;
    os << "token t = " << i / per << " (position " << pos0 + static_cast<int>(i / per) << "), head "
       << (i % per) / static_cast<size_t>(hs) << ", element " << i % static_cast<size_t>(hs);
    return os.str();
  });
  INFO(c.report << cause);
  CHECK(c.mismatches == 0);
}

}  // namespace

TEST_CASE("rope_apply: a worked example, hs = 4 at position 1", "[23_rope_apply]") {
  // Pairs (0, 2) and (1, 3). theta = 100: angles 1 * 100^0 = 1 and 1 * 100^(-1/2) = 0.1 rad.
  // x = {1, 0, 0, 1}: pair 0 = (1, 0) turns by 1 rad -> (cos 1, sin 1) = (0.5403, 0.8415);
  // pair 1 = (0, 1) turns by 0.1 rad -> (-sin 0.1, cos 0.1) = (-0.0998, 0.9950).
  std::vector<float> x = {1.0f, 0.0f, 0.0f, 1.0f};
  ex::rope_apply(x.data(), 1, 1, 4, 1, 100.0);
  const std::vector<double> want = {std::cos(1.0), -std::sin(0.1), std::sin(1.0), std::cos(0.1)};
  const auto c = ex_test::compare("x", {x.data(), 4}, want, 1e-6, 1e-6);
  INFO("x = {1, 0, 0, 1} at position 1, theta = 100: out = {cos 1, -sin 0.1, sin 1, cos 0.1}\n" << c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("rope_apply: random T = 5, NH = 3, hs = 8 from pos0 = 7, against kernels::rope_forward_v1<double>",
          "[23_rope_apply]") {
  nn::Rng rng(2301);
  const int T = 5, NH = 3, hs = 8, pos0 = 7;
  const double theta = 10000.0;
  const std::vector<float> x = ex_test::random_normal(rng, static_cast<size_t>(T) * NH * hs);
  // the library's loops with its tables, in double
  std::vector<double> cos(static_cast<size_t>(pos0 + T) * hs / 2), sin(cos.size());
  kernels::rope_tables<double>(cos.data(), sin.data(), pos0 + T, hs, theta);
  const std::vector<double> xd = ex_test::to_double(x);
  std::vector<double> want(xd.size());
  kernels::rope_forward_v1<double>(want.data(), xd.data(), cos.data(), sin.data(), 1, T, NH, hs, NH * hs, pos0);
  std::vector<float> got = x;
  got.resize(x.size() + ex_test::kGuard, ex_test::kGuardValue);
  ex::rope_apply(got.data(), T, NH, hs, pos0, theta);
  check_against(got, x, T, NH, hs, pos0, theta, want);
  const std::string overrun = ex_test::guard_damage(got, x.size(), "x");
  INFO(overrun);
  CHECK(overrun.empty());
}

TEST_CASE("rope_apply: q_p . k_p' depends only on p - p'", "[23_rope_apply]") {
  nn::Rng rng(2302);
  const int hs = 16;
  const std::vector<float> q = ex_test::random_normal(rng, hs), k = ex_test::random_normal(rng, hs);
  auto dot_at = [&](int p, int p2) {
    std::vector<float> a = q, b = k;
    ex::rope_apply(a.data(), 1, 1, hs, p, 10000.0);
    ex::rope_apply(b.data(), 1, 1, hs, p2, 10000.0);
    double s = 0.0;
    for (int i = 0; i < hs; ++i) s += static_cast<double>(a[static_cast<size_t>(i)]) * b[static_cast<size_t>(i)];
    return s;
  };
  const double d0 = dot_at(4, 1);
  INFO("q_4 . k_1 = " << d0 << ", q_20 . k_17 = " << dot_at(20, 17) << ", q_300 . k_297 = " << dot_at(300, 297));
  CHECK(dot_at(20, 17) == Approx(d0).margin(1e-4));
  CHECK(dot_at(300, 297) == Approx(d0).margin(1e-4));
  CHECK(std::fabs(dot_at(3, 3) - d0) > 1e-3);  // and it does depend on p - p'
}
