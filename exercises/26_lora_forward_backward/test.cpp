// Tests of exercise 26_lora_forward_backward. The forward against the formula in double, with
// the two usual scale mistakes named (alpha instead of alpha / r, no scale at all). The
// backward against central finite differences of that double forward (a gradient check that
// does not trust anyone's derivation), onto gradients that already hold values (they must
// accumulate). And the reason B starts at zero: the adapted layer is then the base layer, A
// gets no gradient on the first step, B does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/26_lora_forward_backward/lora_forward_backward.h"
#include "exercises/test_util.h"
#include "nn/rng.h"

namespace {

struct Case {
  int N, IN, OUT, r;
  float alpha;
  uint64_t seed;
};

struct Data {
  std::vector<float> x, W, b, A, B, dy;
};

Data make(const Case& c, bool zero_B) {
  nn::Rng rng(c.seed);
  Data d;
  d.x = ex_test::random_normal(rng, static_cast<size_t>(c.N) * c.IN);
  d.W = ex_test::random_normal(rng, static_cast<size_t>(c.OUT) * c.IN, 0.5f);
  d.b = ex_test::random_normal(rng, static_cast<size_t>(c.OUT));
  d.A = ex_test::random_normal(rng, static_cast<size_t>(c.r) * c.IN, 0.5f);
  d.B = zero_B ? std::vector<float>(static_cast<size_t>(c.OUT) * c.r, 0.0f)
               : ex_test::random_normal(rng, static_cast<size_t>(c.OUT) * c.r, 0.5f);
  d.dy = ex_test::random_normal(rng, static_cast<size_t>(c.N) * c.OUT);
  return d;
}

// The forward in double with scale s: y (N, OUT), and h (N, r) when asked.
std::vector<double> forward(const Case& c, const std::vector<double>& x, const std::vector<double>& A,
                            const std::vector<double>& B, const Data& d, double s, std::vector<double>* h_out = nullptr) {
  std::vector<double> y(static_cast<size_t>(c.N) * c.OUT);
  std::vector<double> h(static_cast<size_t>(c.N) * c.r);
  for (int n = 0; n < c.N; ++n) {
    for (int j = 0; j < c.r; ++j) {
      double acc = 0.0;
      for (int i = 0; i < c.IN; ++i) acc += A[static_cast<size_t>(j) * c.IN + i] * x[static_cast<size_t>(n) * c.IN + i];
      h[static_cast<size_t>(n) * c.r + j] = acc;
    }
    for (int o = 0; o < c.OUT; ++o) {
      double acc = d.b[static_cast<size_t>(o)], low = 0.0;
      for (int i = 0; i < c.IN; ++i) {
        acc += static_cast<double>(d.W[static_cast<size_t>(o) * c.IN + i]) * x[static_cast<size_t>(n) * c.IN + i];
      }
      for (int j = 0; j < c.r; ++j) low += B[static_cast<size_t>(o) * c.r + j] * h[static_cast<size_t>(n) * c.r + j];
      y[static_cast<size_t>(n) * c.OUT + o] = acc + s * low;
    }
  }
  if (h_out != nullptr) *h_out = h;
  return y;
}

// L = sum(dy * y): its gradient with respect to y is dy, the upstream gradient of the tests.
double loss(const Case& c, const std::vector<double>& x, const std::vector<double>& A, const std::vector<double>& B,
            const Data& d, double s) {
  const std::vector<double> y = forward(c, x, A, B, d, s);
  double L = 0.0;
  for (size_t i = 0; i < y.size(); ++i) L += static_cast<double>(d.dy[i]) * y[i];
  return L;
}

// dL/dv[i] for every i by central differences (L is linear in each single element, so in
// double this is exact up to rounding), with the adapter scaled by s.
std::vector<double> numeric_grad(const Case& c, const Data& d, int which, double s) {
  std::vector<double> x = ex_test::to_double(d.x), A = ex_test::to_double(d.A), B = ex_test::to_double(d.B);
  std::vector<double>& v = which == 0 ? x : which == 1 ? A : B;
  std::vector<double> g(v.size());
  const double eps = 1e-3;
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + eps;
    const double up = loss(c, x, A, B, d, s);
    v[i] = keep - eps;
    const double down = loss(c, x, A, B, d, s);
    v[i] = keep;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

void check_forward(const Case& c) {
  const Data d = make(c, false);
  const size_t ny = static_cast<size_t>(c.N) * c.OUT, nh = static_cast<size_t>(c.N) * c.r;
  std::vector<float> y = ex_test::output_buffer(ny), h = ex_test::output_buffer(nh);
  ex::lora_forward(y.data(), h.data(), d.x.data(), d.W.data(), d.b.data(), d.A.data(), d.B.data(), c.N, c.IN, c.OUT,
                   c.r, c.alpha);
  const std::vector<double> x = ex_test::to_double(d.x), A = ex_test::to_double(d.A), B = ex_test::to_double(d.B);
  std::vector<double> want_h;
  const std::vector<double> want = forward(c, x, A, B, d, static_cast<double>(c.alpha) / c.r, &want_h);
  const std::vector<double> with_alpha = forward(c, x, A, B, d, c.alpha);
  const std::vector<double> unscaled = forward(c, x, A, B, d, 1.0);
  const std::string cause = ex_test::diagnose(
      {y.data(), ny}, want, 1e-5, 1e-4,
      {{"the adapter was scaled by alpha; the scale is alpha / r",
        [&](size_t i) { return ex_test::close(y[i], with_alpha[i], 1e-5, 1e-4); }},
       {"the adapter's term was not scaled; it is (alpha / r) * h B^T",
        [&](size_t i) { return ex_test::close(y[i], unscaled[i], 1e-5, 1e-4); }}});
  const auto ch = ex_test::compare("h", {h.data(), nh}, want_h, 1e-5, 1e-4);
  const auto cy = ex_test::compare("y", {y.data(), ny}, want, 1e-5, 1e-4);
  INFO("N = " << c.N << ", IN = " << c.IN << ", OUT = " << c.OUT << ", r = " << c.r << ", alpha = " << c.alpha
              << "\n" << ch.report << cy.report << cause);
  CHECK(ch.mismatches == 0);
  CHECK(cy.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(y, ny, "y") + ex_test::guard_damage(h, nh, "h");
  INFO(overrun);
  CHECK(overrun.empty());
}

void check_backward(const Case& c, bool zero_B) {
  const Data d = make(c, zero_B);
  nn::Rng rng(c.seed + 100);
  const size_t nx = static_cast<size_t>(c.N) * c.IN, nA = static_cast<size_t>(c.r) * c.IN,
               nB = static_cast<size_t>(c.OUT) * c.r;
  // h from the double forward (the backward's input, so a wrong forward does not fail here too)
  std::vector<double> h64;
  forward(c, ex_test::to_double(d.x), ex_test::to_double(d.A), ex_test::to_double(d.B), d,
          static_cast<double>(c.alpha) / c.r, &h64);
  const std::vector<float> h(h64.begin(), h64.end());
  // The gradients already hold something: they must accumulate onto it.
  const std::vector<float> dx0 = ex_test::random_normal(rng, nx), dA0 = ex_test::random_normal(rng, nA),
                           dB0 = ex_test::random_normal(rng, nB);
  std::vector<float> dx = ex_test::output_buffer(nx), dA = ex_test::output_buffer(nA), dB = ex_test::output_buffer(nB);
  std::copy(dx0.begin(), dx0.end(), dx.begin());
  std::copy(dA0.begin(), dA0.end(), dA.begin());
  std::copy(dB0.begin(), dB0.end(), dB.begin());
  ex::lora_backward(dx.data(), dA.data(), dB.data(), d.dy.data(), d.x.data(), h.data(), d.W.data(), d.A.data(),
                    d.B.data(), c.N, c.IN, c.OUT, c.r, c.alpha);
  const char* names[3] = {"dx", "dA", "dB"};
  const std::vector<float>* before[3] = {&dx0, &dA0, &dB0};
  std::vector<float>* got[3] = {&dx, &dA, &dB};
  const size_t sizes[3] = {nx, nA, nB};
  for (int k = 0; k < 3; ++k) {
    const std::vector<double> g = numeric_grad(c, d, k, static_cast<double>(c.alpha) / c.r);
    const std::vector<double> g_alpha = numeric_grad(c, d, k, c.alpha);  // the scale-by-alpha mistake
    std::vector<double> want(sizes[k]);
    for (size_t i = 0; i < sizes[k]; ++i) want[i] = (*before[k])[i] + g[i];
    const std::vector<float>& v = *got[k];
    const std::string cause = ex_test::diagnose(
        {v.data(), sizes[k]}, want, 1e-4, 1e-4,
        {{std::string(names[k]) + " was assigned, not accumulated: add the gradient to what it holds (+=)",
          [&](size_t i) { return ex_test::close(v[i], g[i], 1e-4, 1e-4); }},
         {"the backward scaled by alpha; the scale is alpha / r (once in dB, once in dh)",
          [&](size_t i) { return ex_test::close(v[i], (*before[k])[i] + g_alpha[i], 1e-4, 1e-4); }}});
    const auto cmp = ex_test::compare(names[k], {v.data(), sizes[k]}, want, 1e-4, 1e-4);
    INFO("N = " << c.N << ", IN = " << c.IN << ", OUT = " << c.OUT << ", r = " << c.r << ", alpha = " << c.alpha
                << (zero_B ? ", B = 0 (LoRA's start)" : "")
                << "\n(expected: what it held before + dL/d" << std::string(names[k]).substr(1)
                << " by central finite differences of L = sum(dy * y))\n" << cmp.report << cause);
    CHECK(cmp.mismatches == 0);
    const std::string overrun = ex_test::guard_damage(v, sizes[k], names[k]);
    INFO(overrun);
    CHECK(overrun.empty());
  }
}

}  // namespace

TEST_CASE("lora_forward: y = x W^T + b + (alpha / r) (x A^T) B^T, and h = x A^T", "[26_lora_forward_backward]") {
  check_forward({3, 7, 5, 2, 6.0f, 2601});
  check_forward({2, 4, 6, 3, 1.0f, 2602});
  check_forward({1, 9, 3, 4, 16.0f, 2603});
}

TEST_CASE("lora_backward: dx, dA, dB against finite differences, accumulated", "[26_lora_forward_backward]") {
  check_backward({3, 7, 5, 2, 6.0f, 2611}, false);
  check_backward({2, 4, 6, 3, 1.0f, 2612}, false);
  check_backward({1, 9, 3, 4, 16.0f, 2613}, false);
}

TEST_CASE("LoRA starts at B = 0: the layer is the base layer, A gets no gradient, B does",
          "[26_lora_forward_backward]") {
  const Case c{3, 6, 4, 2, 8.0f, 2621};
  const Data d = make(c, true);
  const size_t ny = static_cast<size_t>(c.N) * c.OUT, nh = static_cast<size_t>(c.N) * c.r;
  std::vector<float> y = ex_test::output_buffer(ny), h = ex_test::output_buffer(nh);
  ex::lora_forward(y.data(), h.data(), d.x.data(), d.W.data(), d.b.data(), d.A.data(), d.B.data(), c.N, c.IN, c.OUT,
                   c.r, c.alpha);
  // the base layer alone: B = 0 in the double forward
  const std::vector<double> base = forward(c, ex_test::to_double(d.x), ex_test::to_double(d.A),
                                           std::vector<double>(d.B.size(), 0.0), d, 0.0);
  const auto cy = ex_test::compare("y", {y.data(), ny}, base, 1e-5, 1e-4);
  INFO("with B = 0 the adapted layer must compute exactly the base layer x W^T + b\n" << cy.report);
  CHECK(cy.mismatches == 0);
  check_backward(c, true);  // dA's expected gradient is 0 here, dB's is not
}
