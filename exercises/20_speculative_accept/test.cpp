// Tests of exercise 20_speculative_accept. The expected values come from cases worked by
// hand, from the rule's guarantee itself (the emitted token is distributed exactly as p,
// measured by sweeping both uniforms over a fine grid, not by sampling), and, when this
// program is linked with the GPT library, from gpt::speculative_accept (gpt/speculative.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/20_speculative_accept/speculative_accept.h"
#include "exercises/test_util.h"
#include "nn/rng.h"
#ifdef NNLAB_EXERCISE_LINKS_GPT
#include "gpt/speculative.h"
#endif

namespace {

struct Result {
  int32_t token;
  bool accepted;
};
Result run(const std::vector<float>& p, const std::vector<float>& q, int32_t x, float u_accept, float u_resample) {
  bool accepted = false;
  const int32_t y = ex::speculative_accept(p.data(), q.data(), static_cast<int>(p.size()), x, u_accept, u_resample,
                                           &accepted);
  return {y, accepted};
}

std::string show(const std::vector<float>& v) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < v.size(); ++i) os << (i > 0 ? ", " : "") << v[i];
  os << "}";
  return os.str();
}

// The exact distribution of the emitted token: the draft token x has probability q[x], and
// u_accept, u_resample each sweep the midpoints (i + 0.5) / N of N equal cells of [0, 1),
// every pair of them once. Tokens outside [0, V) are counted in *invalid.
std::vector<double> emitted_distribution(const std::vector<float>& p, const std::vector<float>& q, int N,
                                         int64_t* invalid) {
  const int V = static_cast<int>(p.size());
  std::vector<double> dist(p.size(), 0.0);
  *invalid = 0;
  for (int32_t x = 0; x < V; ++x) {
    if (q[static_cast<size_t>(x)] <= 0.0f) continue;  // the draft never proposes x
    std::vector<int64_t> count(p.size(), 0);
    for (int i = 0; i < N; ++i) {
      const auto ua = static_cast<float>((i + 0.5) / N);
      for (int j = 0; j < N; ++j) {
        const auto ur = static_cast<float>((j + 0.5) / N);
        const Result r = run(p, q, x, ua, ur);
        if (r.token < 0 || r.token >= V) {
          ++*invalid;
          continue;
        }
        ++count[static_cast<size_t>(r.token)];
      }
    }
    for (size_t y = 0; y < p.size(); ++y)
      dist[y] += static_cast<double>(q[static_cast<size_t>(x)]) * static_cast<double>(count[y]) / (double{1.0} * N * N);
  }
  return dist;
}

// softmax of random logits, with some entries set to exactly 0 (renormalised)
std::vector<float> random_probs(nn::Rng& rng, int V, float spread, float zero_fraction) {
  std::vector<float> v(static_cast<size_t>(V));
  double s = 0.0;
  for (float& e : v) {
    e = rng.uniform() < zero_fraction ? 0.0f : std::exp(rng.normal(0.0f, spread));
    s += e;
  }
  if (s == 0.0) {
    v[0] = 1.0f;
    s = 1.0;
  }
  for (float& e : v) e = static_cast<float>(e / s);
  return v;
}

// a token drawn from q (inverse CDF with the rng)
int32_t draw(nn::Rng& rng, const std::vector<float>& q) {
  const double u = rng.uniform();
  double c = 0.0;
  int32_t last = 0;
  for (size_t y = 0; y < q.size(); ++y) {
    if (q[y] <= 0.0f) continue;
    c += q[y];
    last = static_cast<int32_t>(y);
    if (u < c) break;
  }
  return last;
}

}  // namespace

TEST_CASE("speculative_accept: worked cases", "[20_speculative_accept]") {
  // p / q = 2, 0.5, 2, 2/3; residual max(0, p - q) = {0.25, 0, 0.0625, 0}, Z = 0.3125:
  // running sums 0.25, 0.25, 0.3125, 0.3125, so u_resample * Z < 0.25 (u_resample < 0.8)
  // gives token 0 and u_resample >= 0.8 gives token 2.
  const std::vector<float> p = {0.5f, 0.25f, 0.125f, 0.125f};
  const std::vector<float> q = {0.25f, 0.5f, 0.0625f, 0.1875f};
  INFO("p = " << show(p) << ", q = " << show(q) << ": p / q = {2, 0.5, 2, 0.667}, residual max(0, p - q) = "
              << "{0.25, 0, 0.0625, 0}, Z = 0.3125");
  struct Case {
    int32_t x;
    float ua, ur;
    int32_t token;
    bool accepted;
    const char* why;
  };
  const std::vector<Case> cases = {
      {0, 0.99f, 0.5f, 0, true, "p[0] / q[0] = 2 > 0.99: accepted"},
      {2, 0.0f, 0.99f, 2, true, "p[2] / q[2] = 2 > 0: accepted"},
      {1, 0.25f, 0.9f, 1, true, "p[1] / q[1] = 0.5 > 0.25: accepted"},
      {1, 0.75f, 0.5f, 0, false, "0.75 >= 0.5: rejected; 0.5 * 0.3125 = 0.156 < 0.25: token 0"},
      {1, 0.5f, 0.5f, 0, false, "u_accept = 0.5 = p[1] / q[1] is not < it: rejected; token 0"},
      {1, 0.75f, 0.0f, 0, false, "rejected; u_resample = 0: the first id with a residual, 0"},
      {1, 0.75f, 0.79f, 0, false, "rejected; 0.79 * 0.3125 = 0.247 < 0.25: token 0"},
      {1, 0.75f, 0.81f, 2, false, "rejected; 0.81 * 0.3125 = 0.253 >= 0.25, < 0.3125: token 2"},
      {3, 0.7f, 0.2f, 0, false, "p[3] / q[3] = 0.667 <= 0.7: rejected; 0.2 * 0.3125 < 0.25: token 0"},
      {3, 0.6f, 0.9f, 3, true, "p[3] / q[3] = 0.667 > 0.6: accepted"},
      {3, 0.9f, 0.99999994f, 2, false, "rejected; u_resample just below 1: the last id with a residual, 2 (not 3)"},
  };
  for (const Case& c : cases) {
    const Result r = run(p, q, c.x, c.ua, c.ur);
    INFO("x = " << c.x << ", u_accept = " << c.ua << ", u_resample = " << c.ur << ": expected token " << c.token
                << (c.accepted ? " (accepted)" : " (rejected, resampled)") << " because " << c.why << "; got token "
                << r.token << (r.accepted ? " (accepted)" : " (rejected)"));
    CHECK(r.token == c.token);
    CHECK(r.accepted == c.accepted);
  }
}

TEST_CASE("speculative_accept: a token p does not have is always rejected, even at u_accept = 0",
          "[20_speculative_accept]") {
  const std::vector<float> p = {0.0f, 0.25f, 0.75f};
  const std::vector<float> q = {0.5f, 0.25f, 0.25f};  // residual {0, 0, 0.5}: a reject always gives 2
  for (const float ua : {0.0f, 0.3f, 0.99f}) {
    const Result r = run(p, q, 0, ua, 0.5f);
    INFO("p = " << show(p) << ", q = " << show(q) << ", x = 0, u_accept = " << ua
                << ": p[0] / q[0] = 0 and 'u < 0' is never true, so x = 0 is rejected and the residual "
                   "{0, 0, 0.5} gives token 2; got token "
                << r.token << (r.accepted ? " (accepted)" : " (rejected)"));
    CHECK(r.token == 2);
    CHECK_FALSE(r.accepted);
  }
}

TEST_CASE("speculative_accept: when p == q every draft is accepted", "[20_speculative_accept]") {
  nn::Rng rng(2001);
  std::ostringstream bad;
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> p = random_probs(rng, 11, 1.5f, 0.2f);
    const int32_t x = draw(rng, p);
    const float ua = trial == 0 ? 0.99999994f : static_cast<float>(rng.uniform());
    const float ur = static_cast<float>(rng.uniform());
    const Result r = run(p, p, x, ua, ur);
    if ((r.token != x || !r.accepted) && bad.str().size() < 500)
      bad << "  p = q = " << show(p) << ", x = " << x << ", u_accept = " << ua << ": got token " << r.token
          << (r.accepted ? " (accepted)" : " (rejected)") << "\n";
  }
  INFO("p[x] / q[x] = 1 > u_accept for every u_accept in [0, 1): the draft is always kept\n" << bad.str());
  CHECK(bad.str().empty());
}

TEST_CASE("speculative_accept: random cases: accepted exactly when u_accept < p[x] / q[x], a rejection "
          "never emits x nor a token with p <= q",
          "[20_speculative_accept]") {
  nn::Rng rng(2002);
  const int V = 37;
  std::ostringstream bad;
  int rejects = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::vector<float> p = random_probs(rng, V, 2.0f, 0.1f);
    const std::vector<float> q = random_probs(rng, V, 2.0f, 0.1f);
    const int32_t x = draw(rng, q);
    const auto ua = static_cast<float>(rng.uniform());
    const auto ur = static_cast<float>(rng.uniform());
    const Result r = run(p, q, x, ua, ur);
    const size_t xs = static_cast<size_t>(x);
    const bool want_accept = ua < p[xs] / q[xs];
    std::string wrong;
    if (r.accepted != want_accept) {
      wrong = want_accept ? "should be accepted (u_accept < p[x] / q[x])" : "should be rejected (u_accept >= p[x] / q[x])";
    } else if (r.token < 0 || r.token >= V) {
      wrong = "the token is not in [0, V)";
    } else if (r.accepted && r.token != x) {
      wrong = "accepted, but the token returned is not x";
    } else if (!r.accepted && (r.token == x || !(p[static_cast<size_t>(r.token)] > q[static_cast<size_t>(r.token)]))) {
      wrong = "rejected, but the resampled token has no residual: p[y] <= q[y]";
    }
    rejects += r.accepted ? 0 : 1;
    if (!wrong.empty() && bad.str().size() < 800)
      bad << "  trial " << trial << ": x = " << x << ", p[x] = " << p[xs] << ", q[x] = " << q[xs] << ", u_accept = " << ua
          << ", u_resample = " << ur << ": got token " << r.token << (r.accepted ? " (accepted)" : " (rejected)") << ": "
          << wrong << "\n";
  }
  INFO("V = 37, random p and q (some entries exactly 0), x drawn from q\n" << bad.str());
  CHECK(bad.str().empty());
  CHECK(rejects > 300);  // the cases do exercise the resampling
}

TEST_CASE("speculative_accept: the emitted token is distributed exactly as p, whatever q",
          "[20_speculative_accept]") {
  struct Pair {
    const char* name;
    std::vector<float> p, q;
  };
  const std::vector<Pair> pairs = {
      {"a draft that favours the wrong tokens", {0.4f, 0.3f, 0.15f, 0.1f, 0.05f}, {0.1f, 0.2f, 0.3f, 0.25f, 0.15f}},
      {"p == q", {0.5f, 0.1f, 0.2f, 0.15f, 0.05f}, {0.5f, 0.1f, 0.2f, 0.15f, 0.05f}},
      {"disjoint supports: every draft is rejected", {0.6f, 0.4f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.3f, 0.3f, 0.4f}},
      {"a peaked target, a flat draft", {0.05f, 0.05f, 0.8f, 0.05f, 0.05f}, {0.3f, 0.3f, 0.1f, 0.2f, 0.1f}},
      {"the draft has mass on a token p forbids", {0.0f, 0.25f, 0.25f, 0.25f, 0.25f}, {0.2f, 0.2f, 0.2f, 0.2f, 0.2f}},
  };
  const int N = 1000;  // 1000 x 1000 pairs of uniforms per draft token: each probability to within ~3 / N
  for (const Pair& pr : pairs) {
    int64_t invalid = 0;
    const std::vector<double> dist = emitted_distribution(pr.p, pr.q, N, &invalid);
    INFO(pr.name << ": p = " << show(pr.p) << ", q = " << show(pr.q)
                 << "\nP(emit y) = sum_x q[x] P(emit y | x), both uniforms swept over a 1000 x 1000 grid, must equal p[y]"
                    " (always accepting would give q; resampling from p instead of the residual would give neither)");
    INFO(invalid << " calls returned a token outside [0, 5)");
    CHECK(invalid == 0);
    std::vector<float> got(dist.size());
    for (size_t y = 0; y < dist.size(); ++y) got[y] = static_cast<float>(dist[y]);
    const ex_test::Comparison c = ex_test::compare("P(emit y)", got, ex_test::to_double(pr.p), 4e-3, 0.0,
                                                   [&](size_t y) { return "q[y] = " + std::to_string(pr.q[y]); });
    INFO(c.report);
    CHECK(c.mismatches == 0);
  }
}

#ifdef NNLAB_EXERCISE_LINKS_GPT
// Built only when exercises/CMakeLists.txt links this exercise with nnlab_gpt and defines
// NNLAB_EXERCISE_LINKS_GPT: the library's rule and the exercise's must be the same function.
TEST_CASE("speculative_accept: the same tokens as gpt::speculative_accept on random cases",
          "[20_speculative_accept]") {
  nn::Rng rng(2003);
  std::ostringstream bad;
  for (int trial = 0; trial < 3000; ++trial) {
    const int V = 2 + static_cast<int>(rng.uniform() * 60.0);
    const std::vector<float> p = random_probs(rng, V, 2.0f, 0.15f);
    const std::vector<float> q = trial % 10 == 0 ? p : random_probs(rng, V, 2.0f, 0.15f);
    const int32_t x = draw(rng, q);
    const auto ua = static_cast<float>(rng.uniform());
    const auto ur = static_cast<float>(rng.uniform());
    const Result r = run(p, q, x, ua, ur);
    bool lib_accepted = false;
    const int32_t lib = gpt::speculative_accept(p.data(), q.data(), V, x, ua, ur, &lib_accepted);
    if ((r.token != lib || r.accepted != lib_accepted) && bad.str().size() < 800)
      bad << "  trial " << trial << " (V = " << V << ", x = " << x << ", u_accept = " << ua << ", u_resample = " << ur
          << "): got token " << r.token << (r.accepted ? " (accepted)" : " (rejected)") << ", the library "
          << lib << (lib_accepted ? " (accepted)" : " (rejected)") << "\n";
  }
  INFO(bad.str());
  CHECK(bad.str().empty());
}
#endif
