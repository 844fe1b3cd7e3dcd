// Tests of exercise 30_residual_threshold. The threshold against a brute-force count over
// random residuals (several rates, ties, rate 0), with the usual mistakes named; the first
// alarm on hand-made sequences (persistence, the reset, negative residuals, the strict >) and
// against a brute-force scan on random ones.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/30_residual_threshold/residual_threshold.h"
#include "exercises/test_util.h"
#include "nn/rng.h"

namespace {

int count_above(const std::vector<float>& r, double thr) {
  int c = 0;
  for (float v : r) c += std::fabs(static_cast<double>(v)) > thr;
  return c;
}

// The smallest |r_i| with at most floor(rate n) values strictly above it, by trying them all.
double brute_threshold(const std::vector<float>& r, double rate) {
  const int allowed = static_cast<int>(std::floor(rate * static_cast<double>(r.size())));
  double best = INFINITY;
  for (float v : r) {
    const double a = std::fabs(static_cast<double>(v));
    if (a < best && count_above(r, a) <= allowed) best = a;
  }
  return best;
}

int brute_alarm(const std::vector<float>& r, double thr, int persistence) {
  const int n = static_cast<int>(r.size());
  for (int t = persistence - 1; t < n; ++t) {
    bool all = true;
    for (int j = t - persistence + 1; j <= t; ++j) all = all && std::fabs(static_cast<double>(r[static_cast<size_t>(j)])) > thr;
    if (all) return t;
  }
  return -1;
}

// The likely mistake behind a wrong threshold, "" when none fits.
std::string threshold_cause(const std::vector<float>& r, double rate, double got) {
  const int n = static_cast<int>(r.size());
  const int allowed = static_cast<int>(std::floor(rate * n));
  std::vector<double> a, s;
  for (float v : r) {
    a.push_back(std::fabs(static_cast<double>(v)));
    s.push_back(v);
  }
  std::sort(a.begin(), a.end());
  std::sort(s.begin(), s.end());
  if (got == s[static_cast<size_t>(n - 1 - allowed)])
    return "the quantile of the signed residuals: a fault can push r either way, take |r| first";
  if (allowed + 1 <= n - 1 && got == a[static_cast<size_t>(n - 2 - allowed)])
    return "one rank too low: then allowed + 1 values lie above the threshold";
  if (allowed >= 1 && got == a[static_cast<size_t>(n - allowed)])
    return "one rank too high: the value with exactly `allowed` values after it is at n - 1 - allowed";
  return "";
}

}  // namespace

TEST_CASE("threshold_for_rate: the smallest |r| with at most floor(rate n) residuals above it", "[ex30]") {
  nn::Rng rng(30);
  for (int n : {1, 7, 997, 2503}) {
    const std::vector<float> r = ex_test::random_normal(rng, static_cast<size_t>(n), 0.003f);
    for (double rate : {0.0, 0.001, 0.01, 0.05, 0.3}) {
      const std::vector<float> before = r;
      const double got = ex::threshold_for_rate(r.data(), n, rate);
      const double want = brute_threshold(r, rate);
      INFO("n = " << n << " residuals of std 0.003, rate " << rate << ": allowed above = "
                  << static_cast<int>(std::floor(rate * n)) << "; got " << got << " with " << count_above(r, got)
                  << " above it, want " << want);
      const std::string cause = got == want ? "" : threshold_cause(r, rate, got);
      if (!cause.empty()) FAIL("Likely cause: " << cause);
      CHECK(got == want);
      CHECK(r == before);  // the residuals are not changed (no sorting in place)
    }
  }
}

TEST_CASE("threshold_for_rate: ties and rate 0", "[ex30]") {
  const std::vector<float> r = {0.5f, -2.0f, 2.0f, 1.0f, -0.25f, 2.0f, 0.5f, -3.0f};
  // |r| sorted: 0.25 0.5 0.5 1 2 2 2 3
  CHECK(ex::threshold_for_rate(r.data(), 8, 0.0) == 3.0);    // nothing may be above: the largest
  CHECK(ex::threshold_for_rate(r.data(), 8, 0.125) == 2.0);  // one above (3)
  CHECK(ex::threshold_for_rate(r.data(), 8, 0.25) == 2.0);   // two allowed, one above: 1.0 would leave four
  CHECK(ex::threshold_for_rate(r.data(), 8, 0.5) == 1.0);    // four above
  CHECK(ex::threshold_for_rate(r.data(), 8, 0.99) == 0.25);  // floor(0.99 * 8) = 7 allowed: the smallest
}

TEST_CASE("first_alarm: persistence samples in a row, strictly above, either sign", "[ex30]") {
  const std::vector<float> r = {0.1f, 0.9f, -0.9f, 0.2f, 1.5f, -1.2f, 1.0f, 0.8f, 2.0f};
  const int n = static_cast<int>(r.size());
  CHECK(ex::first_alarm(r.data(), n, 0.5, 1) == 1);   // the first |r| > 0.5
  CHECK(ex::first_alarm(r.data(), n, 0.5, 2) == 2);   // 0.9, -0.9: negative residuals count
  CHECK(ex::first_alarm(r.data(), n, 0.5, 3) == 6);   // reset at 0.2, then 1.5 -1.2 1.0: t is the LAST
  CHECK(ex::first_alarm(r.data(), n, 1.0, 2) == 5);   // 1.5, -1.2
  CHECK(ex::first_alarm(r.data(), n, 1.0, 3) == -1);  // 1.0 is not strictly above 1.0
  CHECK(ex::first_alarm(r.data(), n, 5.0, 1) == -1);  // never
  CHECK(ex::first_alarm(r.data(), n, 0.05, 9) == 8);  // the whole run
}

TEST_CASE("first_alarm: against a brute-force scan on random residuals", "[ex30]") {
  nn::Rng rng(31);
  const std::vector<float> r = ex_test::random_normal(rng, 4001, 1.0f);
  for (double thr : {0.5, 1.0, 1.5, 2.0}) {
    for (int p : {1, 2, 3, 5, 8}) {
      const int got = ex::first_alarm(r.data(), static_cast<int>(r.size()), thr, p);
      const int want = brute_alarm(r, thr, p);
      INFO("threshold " << thr << ", persistence " << p << ": got " << got << ", want " << want);
      if (want >= 0 && p > 1 && got == want - p + 1) FAIL("Likely cause: returned the FIRST sample of the run; the alarm is raised at its last");
      CHECK(got == want);
    }
  }
}
