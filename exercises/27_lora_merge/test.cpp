// Tests of exercise 27_lora_merge. The merged weight against W + (alpha / r) B A in double, with
// the usual mistakes named; what merging is for (the merged Linear computes what the base
// layer plus its adapter computes); and unmerge, alone and as merge's inverse.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/27_lora_merge/lora_merge.h"
#include "exercises/test_util.h"
#include "nn/rng.h"

namespace {

struct Case {
  int IN, OUT, r;
  float alpha;
  uint64_t seed;
};

struct Data {
  std::vector<float> W, A, B;
};

Data make(const Case& c) {
  nn::Rng rng(c.seed);
  Data d;
  d.W = ex_test::random_normal(rng, static_cast<size_t>(c.OUT) * c.IN);
  d.A = ex_test::random_normal(rng, static_cast<size_t>(c.r) * c.IN, 0.5f);
  d.B = ex_test::random_normal(rng, static_cast<size_t>(c.OUT) * c.r, 0.5f);
  return d;
}

// W + sign * s * B A in double.
std::vector<double> merged(const Case& c, const Data& d, double s, double sign) {
  std::vector<double> w(d.W.begin(), d.W.end());
  for (int o = 0; o < c.OUT; ++o) {
    for (int i = 0; i < c.IN; ++i) {
      double acc = 0.0;
      for (int j = 0; j < c.r; ++j) {
        acc += static_cast<double>(d.B[static_cast<size_t>(o) * c.r + j]) * d.A[static_cast<size_t>(j) * c.IN + i];
      }
      w[static_cast<size_t>(o) * c.IN + i] += sign * s * acc;
    }
  }
  return w;
}

std::string shape(const Case& c) {
  std::ostringstream os;
  os << "W (" << c.OUT << ", " << c.IN << "), r = " << c.r << ", alpha = " << c.alpha << " (scale alpha / r = "
     << c.alpha / static_cast<float>(c.r) << ")";
  return os.str();
}

void check_merge(const Case& c) {
  const Data d = make(c);
  const size_t n = d.W.size();
  std::vector<float> W = ex_test::output_buffer(n);
  std::copy(d.W.begin(), d.W.end(), W.begin());
  ex::lora_merge(W.data(), d.A.data(), d.B.data(), c.IN, c.OUT, c.r, c.alpha);
  const double s = static_cast<double>(c.alpha) / c.r;
  const std::vector<double> want = merged(c, d, s, 1.0);
  const std::vector<double> with_alpha = merged(c, d, c.alpha, 1.0);
  const std::vector<double> unscaled = merged(c, d, 1.0, 1.0);
  std::vector<double> replaced(n);  // s B A alone, W dropped
  for (size_t i = 0; i < n; ++i) replaced[i] = want[i] - d.W[i];
  const std::string cause = ex_test::diagnose(
      {W.data(), n}, want, 1e-5, 1e-4,
      {{"W was left as it was: merge adds the product into W in place",
        [&](size_t i) { return W[i] == d.W[i]; }},
       {"the product was scaled by alpha; the scale is alpha / r",
        [&](size_t i) { return ex_test::close(W[i], with_alpha[i], 1e-5, 1e-4); }},
       {"the product was not scaled; W += (alpha / r) * B A",
        [&](size_t i) { return ex_test::close(W[i], unscaled[i], 1e-5, 1e-4); }},
       {"W was overwritten with the product; it must be ADDED to the base weight",
        [&](size_t i) { return ex_test::close(W[i], replaced[i], 1e-5, 1e-4); }}});
  const auto cmp = ex_test::compare("W", {W.data(), n}, want, 1e-5, 1e-4, [&](size_t i) {
    std::ostringstream os;
    os << "o = " << i / static_cast<size_t>(c.IN) << ", i = " << i % static_cast<size_t>(c.IN) << ", base W = "
       << d.W[i];
    return os.str();
  });
  INFO(shape(c) << "\n" << cmp.report << cause);
  CHECK(cmp.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(W, n, "W");
  INFO(overrun);
  CHECK(overrun.empty());

  // What merging is for: the merged Linear computes the base layer plus its adapter, the
  // adapter's way (through h = x A^T, never forming B A).
  nn::Rng rng(c.seed + 7);
  const int N = 3;
  const std::vector<float> x = ex_test::random_normal(rng, static_cast<size_t>(N) * c.IN);
  std::vector<double> want_y(static_cast<size_t>(N) * c.OUT);
  std::vector<float> y(static_cast<size_t>(N) * c.OUT);
  for (int t = 0; t < N; ++t) {
    std::vector<double> h(static_cast<size_t>(c.r));
    for (int j = 0; j < c.r; ++j) {
      for (int i = 0; i < c.IN; ++i) {
        h[static_cast<size_t>(j)] +=
            static_cast<double>(d.A[static_cast<size_t>(j) * c.IN + i]) * x[static_cast<size_t>(t) * c.IN + i];
      }
    }
    for (int o = 0; o < c.OUT; ++o) {
      double base = 0.0, low = 0.0;
      float merged_y = 0.0f;
      for (int i = 0; i < c.IN; ++i) {
        base += static_cast<double>(d.W[static_cast<size_t>(o) * c.IN + i]) * x[static_cast<size_t>(t) * c.IN + i];
        merged_y += W[static_cast<size_t>(o) * c.IN + i] * x[static_cast<size_t>(t) * c.IN + i];
      }
      for (int j = 0; j < c.r; ++j) low += d.B[static_cast<size_t>(o) * c.r + j] * h[static_cast<size_t>(j)];
      want_y[static_cast<size_t>(t) * c.OUT + o] = base + s * low;
      y[static_cast<size_t>(t) * c.OUT + o] = merged_y;
    }
  }
  const auto cy = ex_test::compare("y", y, want_y, 1e-4, 1e-4);
  INFO(shape(c) << "\nthe merged Linear x W'^T against the base layer plus its adapter, x W^T + s (x A^T) B^T\n"
                << cy.report);
  CHECK(cy.mismatches == 0);
}

void check_unmerge(const Case& c) {
  const Data d = make(c);
  const size_t n = d.W.size();
  // unmerge alone: W - s B A
  std::vector<float> W = ex_test::output_buffer(n);
  std::copy(d.W.begin(), d.W.end(), W.begin());
  ex::lora_unmerge(W.data(), d.A.data(), d.B.data(), c.IN, c.OUT, c.r, c.alpha);
  const std::vector<double> want = merged(c, d, static_cast<double>(c.alpha) / c.r, -1.0);
  const std::string cause = ex_test::diagnose(
      {W.data(), n}, want, 1e-5, 1e-4,
      {{"W was left as it was: unmerge subtracts (alpha / r) * B A in place",
        [&](size_t i) { return W[i] == d.W[i]; }},
       {"the product was added; unmerge SUBTRACTS it",
        [&](size_t i) { return ex_test::close(W[i], 2.0 * d.W[i] - want[i], 1e-5, 1e-4); }}});
  const auto cmp = ex_test::compare("W", {W.data(), n}, want, 1e-5, 1e-4);
  INFO(shape(c) << ": unmerge alone, W - (alpha / r) B A\n" << cmp.report << cause);
  CHECK(cmp.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(W, n, "W");
  INFO(overrun);
  CHECK(overrun.empty());

  // merge then unmerge: the base weight again, up to float rounding of the added product
  std::vector<float> R = ex_test::output_buffer(n);
  std::copy(d.W.begin(), d.W.end(), R.begin());
  ex::lora_merge(R.data(), d.A.data(), d.B.data(), c.IN, c.OUT, c.r, c.alpha);
  ex::lora_unmerge(R.data(), d.A.data(), d.B.data(), c.IN, c.OUT, c.r, c.alpha);
  const auto cr = ex_test::compare("W", {R.data(), n}, ex_test::to_double(d.W), 1e-5, 1e-5);
  INFO(shape(c) << ": merge then unmerge must give the base weight back\n" << cr.report);
  CHECK(cr.mismatches == 0);
}

}  // namespace

TEST_CASE("lora_merge: W += (alpha / r) B A, and the merged Linear is base plus adapter", "[27_lora_merge]") {
  check_merge({7, 5, 2, 6.0f, 2701});
  check_merge({4, 9, 3, 1.0f, 2702});
  check_merge({6, 6, 1, 16.0f, 2703});
  check_merge({5, 3, 4, 8.0f, 2704});
}

TEST_CASE("lora_unmerge: W -= (alpha / r) B A, the inverse of merge", "[27_lora_merge]") {
  check_unmerge({7, 5, 2, 6.0f, 2711});
  check_unmerge({4, 9, 3, 1.0f, 2712});
}
