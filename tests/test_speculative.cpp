// Speculative decoding (gpt/speculative.h): the rule alone emits exactly the target's
// distribution (integrated over its two uniforms, and by Monte Carlo), the whole loop with
// exact toy models emits the target's joint distribution of its first tokens, a draft equal
// to the target is always accepted, greedy decoding is the target's, and the expectations.
// Every distributional check is also run on a deliberately wrong rule, which must fail it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpt/speculative.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace {

// ---- helpers ----------------------------------------------------------------------------

// Pearson's chi-square of observed counts against probabilities; +inf when a count falls
// where the probability is 0. *dof: the number of cells with p > 0, minus one.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n, int* dof) {
  double chi = 0.0;
  int cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0.0) {
      if (counts[i] > 0) return INFINITY;
      continue;
    }
    ++cells;
    const double e = p[i] * static_cast<double>(n);
    const double d = static_cast<double>(counts[i]) - e;
    chi += d * d / e;
  }
  *dof = cells - 1;
  return chi;
}
// A bound the statistic of a correct sampler exceeds with probability far below 1e-6
// (mean dof, standard deviation sqrt(2 dof)), and a wrong one far above it in these tests.
double chi_bound(int dof) { return dof + 8.0 * std::sqrt(2.0 * dof) + 10.0; }

// The exact distribution of speculative_accept's output when x ~ q and both uniforms are
// uniform on [0, 1): integrated over a grid of G midpoints per uniform. The output is
// piecewise constant in each uniform with at most V breakpoints, so the error per x is at
// most (V + 1) / G.
constexpr int kGrid = 1 << 15;
std::vector<double> rule_distribution(const std::vector<float>& p, const std::vector<float>& q) {
  const int V = static_cast<int>(p.size());
  std::vector<double> out(p.size(), 0.0);
  for (int x = 0; x < V; ++x) {
    if (q[static_cast<size_t>(x)] <= 0.0f) continue;
    int accepts = 0;
    for (int g = 0; g < kGrid; ++g) {
      const float u = (static_cast<float>(g) + 0.5f) / kGrid;
      bool accepted = false;
      const int32_t y = gpt::speculative_accept(p.data(), q.data(), V, x, u, 0.5f, &accepted);
      if (accepted) {
        REQUIRE(y == x);
        ++accepts;
      }
    }
    const double a = static_cast<double>(accepts) / kGrid;
    out[static_cast<size_t>(x)] += q[static_cast<size_t>(x)] * a;
    if (accepts == kGrid) continue;
    // a reject's output does not depend on u_accept: take the top midpoint (rejected when any is)
    const float u_reject = (static_cast<float>(kGrid) - 0.5f) / kGrid;
    for (int g = 0; g < kGrid; ++g) {
      const float u = (static_cast<float>(g) + 0.5f) / kGrid;
      bool accepted = true;
      const int32_t y = gpt::speculative_accept(p.data(), q.data(), V, x, u_reject, u, &accepted);
      REQUIRE_FALSE(accepted);
      REQUIRE(y >= 0);
      REQUIRE(y < V);
      out[static_cast<size_t>(y)] += q[static_cast<size_t>(x)] * (1.0 - a) / kGrid;
    }
  }
  return out;
}

// A wrong rule, exactly: accept as the right one, but on reject draw from p itself (not the
// residual): P(y) = min(p(y), q(y)) + (1 - sum_z min(p(z), q(z))) p(y).
std::vector<double> resample_from_p_distribution(const std::vector<float>& p, const std::vector<float>& q) {
  double overlap = 0.0;
  for (size_t i = 0; i < p.size(); ++i) overlap += std::min(p[i], q[i]);
  std::vector<double> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = std::min(p[i], q[i]) + (1.0 - overlap) * p[i];
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - static_cast<double>(b[i])));
  return m;
}

int32_t draw(const std::vector<float>& q, float u) {
  double cum = 0.0;
  int32_t last = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] <= 0.0f) continue;
    cum += q[i];
    last = static_cast<int32_t>(i);
    if (u < cum) return last;
  }
  return last;
}

// An exact n-gram model: the next token's logits are a table indexed by the previous
// (order - 1) tokens (missing ones read as token 0). Counts its steps.
class TableModel final : public gpt::TokenModel {
 public:
  TableModel(int V, int order, std::vector<float> table, int max_positions = 64)
      : V_(V), order_(order), table_(std::move(table)), max_(max_positions) {}
  int vocab_size() const override { return V_; }
  int max_positions() const override { return max_; }
  int pos() const override { return static_cast<int>(seq_.size()); }
  void rewind(int p) override {
    REQUIRE(p >= 0);
    REQUIRE(p <= pos());
    seq_.resize(static_cast<size_t>(p));
  }
  const float* step(const int32_t* tokens, int n) override {
    REQUIRE(n >= 1);
    REQUIRE(pos() + n <= max_);
    ++steps;
    max_n = std::max(max_n, n);
    rows_.resize(static_cast<size_t>(n) * static_cast<size_t>(V_));
    for (int i = 0; i < n; ++i) {
      seq_.push_back(tokens[i]);
      const float* row = table_.data() + static_cast<size_t>(context()) * static_cast<size_t>(V_);
      std::copy(row, row + V_, rows_.begin() + static_cast<std::ptrdiff_t>(i) * V_);
    }
    return rows_.data();
  }
  // The exact probability of `next` after the tokens `seq` (temperature 1).
  double prob(const std::vector<int32_t>& seq, int32_t next) const {
    const float* row = table_.data() + static_cast<size_t>(context_of(seq)) * static_cast<size_t>(V_);
    double mx = -INFINITY, sum = 0.0;
    for (int i = 0; i < V_; ++i) mx = std::max(mx, static_cast<double>(row[i]));
    for (int i = 0; i < V_; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
    return std::exp(static_cast<double>(row[next]) - mx) / sum;
  }
  int steps = 0, max_n = 0;

 private:
  int context_of(const std::vector<int32_t>& seq) const {
    int c = 0;
    for (int j = order_ - 1; j >= 1; --j) {
      const int idx = static_cast<int>(seq.size()) - j;
      c = c * V_ + (idx >= 0 ? seq[static_cast<size_t>(idx)] : 0);
    }
    return c;
  }
  int context() const { return context_of(seq_); }
  int V_, order_;
  std::vector<float> table_;
  int max_;
  std::vector<int32_t> seq_;
  std::vector<float> rows_;
};

// Random logits for an n-gram table; `holes`: a fraction of entries set to -inf (never the
// whole row), so the model rules some tokens out.
std::vector<float> random_table(int V, int order, uint64_t seed, double holes) {
  nn::Rng rng(seed);
  int contexts = 1;
  for (int j = 1; j < order; ++j) contexts *= V;
  std::vector<float> t(static_cast<size_t>(contexts) * static_cast<size_t>(V));
  for (int c = 0; c < contexts; ++c) {
    for (int i = 0; i < V; ++i) {
      const bool hole = i > 0 && rng.uniform() < holes;  // token 0 stays possible
      t[static_cast<size_t>(c * V + i)] = hole ? -INFINITY : rng.normal(0.0f, 1.5f);
    }
  }
  return t;
}

// The exact joint distribution of the first `n` tokens a model samples after `prompt`,
// indexed t1 * V^(n-1) + ... + tn.
std::vector<double> exact_joint(const TableModel& m, const std::vector<int32_t>& prompt, int n) {
  const int V = m.vocab_size();
  int cells = 1;
  for (int i = 0; i < n; ++i) cells *= V;
  std::vector<double> out(static_cast<size_t>(cells));
  for (int cell = 0; cell < cells; ++cell) {
    std::vector<int32_t> seq = prompt;
    double pr = 1.0;
    int rest = cell;
    int div = cells / V;
    for (int i = 0; i < n; ++i) {
      const int32_t t = rest / div;
      rest %= div;
      div = std::max(1, div / V);
      pr *= m.prob(seq, t);
      seq.push_back(t);
    }
    out[static_cast<size_t>(cell)] = pr;
  }
  return out;
}

int cell_of(const std::vector<int32_t>& tokens, int n, int V) {
  int c = 0;
  for (int i = 0; i < n; ++i) c = c * V + tokens[static_cast<size_t>(i)];
  return c;
}

}  // namespace

// ---- the rule alone ------------------------------------------------------------------------

TEST_CASE("speculative: probs_from_logits is the tempered softmax, greedy at 0", "[speculative]") {
  const std::vector<float> logits = {1.0f, 3.0f, -INFINITY, 3.0f, 0.5f};
  std::vector<float> p(5);
  gpt::probs_from_logits(logits.data(), 5, 1.0f, p.data());
  double sum = 0.0;
  for (int i = 0; i < 5; ++i) {
    if (i != 2) CHECK(p[static_cast<size_t>(i)] == Approx(std::exp(logits[static_cast<size_t>(i)] - 3.0) /
                                                           (std::exp(-2.0) + 2.0 + std::exp(-2.5))));
    sum += p[static_cast<size_t>(i)];
  }
  CHECK(p[2] == 0.0f);
  CHECK(sum == Approx(1.0));
  gpt::probs_from_logits(logits.data(), 5, 0.5f, p.data());
  CHECK(p[0] / p[1] == Approx(std::exp(-4.0)));
  gpt::probs_from_logits(logits.data(), 5, 0.0f, p.data());
  CHECK(p == std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f, 0.0f});  // ties: the lowest id
  const std::vector<float> bad = {0.0f, NAN, 1.0f};
  CHECK_THAT(testing::error_of([&] { gpt::probs_from_logits(bad.data(), 3, 1.0f, p.data()); }),
             Catch::Contains("diverged"));
  const std::vector<float> none = {-INFINITY, -INFINITY};
  CHECK_THAT(testing::error_of([&] { gpt::probs_from_logits(none.data(), 2, 1.0f, p.data()); }),
             Catch::Contains("no token is possible"));
}

TEST_CASE("speculative: the rule's output distribution is exactly the target's", "[speculative]") {
  struct Case {
    const char* name;
    std::vector<float> p, q;
    bool q_equals_p;
    bool resample_from_p_differs;  // with disjoint supports or a one-hot p, r = p
  };
  const std::vector<Case> cases = {
      {"q = p", {0.1f, 0.2f, 0.3f, 0.15f, 0.25f}, {0.1f, 0.2f, 0.3f, 0.15f, 0.25f}, true, false},
      {"disjoint supports", {0.5f, 0.5f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.3f, 0.3f, 0.4f}, false, false},
      {"q has mass where p has none", {0.2f, 0.3f, 0.5f, 0.0f, 0.0f}, {0.1f, 0.1f, 0.2f, 0.3f, 0.3f}, false, true},
      {"both full, different", {0.05f, 0.4f, 0.1f, 0.3f, 0.15f}, {0.3f, 0.1f, 0.25f, 0.05f, 0.3f}, false, true},
      {"p one-hot", {0.0f, 0.0f, 0.0f, 1.0f, 0.0f}, {0.2f, 0.2f, 0.2f, 0.2f, 0.2f}, false, false},
  };
  const double tol = 6.0 / kGrid + 1e-6;  // (V + 1) / G, and float rounding of p and q
  for (const Case& c : cases) {
    INFO(c.name);
    const std::vector<double> got = rule_distribution(c.p, c.q);
    CHECK(max_abs_diff(got, c.p) <= tol);
    // the same check fails on wrong rules: always accepting (emits q), and resampling from p
    // instead of the residual
    if (!c.q_equals_p) CHECK(max_abs_diff(std::vector<double>(c.q.begin(), c.q.end()), c.p) > 50 * tol);
    if (c.resample_from_p_differs) CHECK(max_abs_diff(resample_from_p_distribution(c.p, c.q), c.p) > 50 * tol);
    if (c.q_equals_p) {
      // p == q: always accepted, whatever the uniforms
      for (int x = 0; x < 5; ++x) {
        bool accepted = false;
        CHECK(gpt::speculative_accept(c.p.data(), c.q.data(), 5, x, 0.999999f, 0.3f, &accepted) == x);
        CHECK(accepted);
      }
    }
  }
}

TEST_CASE("speculative: 200k draws of the rule match the target (and always-accept does not)", "[speculative]") {
  const std::vector<float> p = {0.2f, 0.3f, 0.5f, 0.0f, 0.0f};
  const std::vector<float> q = {0.1f, 0.1f, 0.2f, 0.3f, 0.3f};
  const std::vector<double> pd(p.begin(), p.end()), qd(q.begin(), q.end());
  constexpr int64_t n = 200000;
  nn::Rng rng(42);
  std::vector<int64_t> rule(5, 0), always(5, 0);
  int64_t accepts = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t x = draw(q, rng.uniform());
    const float ua = rng.uniform(), ur = rng.uniform();
    bool accepted = false;
    ++rule[static_cast<size_t>(gpt::speculative_accept(p.data(), q.data(), 5, x, ua, ur, &accepted))];
    accepts += accepted ? 1 : 0;
    ++always[static_cast<size_t>(x)];  // the wrong rule: every draft accepted
  }
  int dof = 0;
  const double chi = chi_square(rule, pd, n, &dof);
  INFO("chi-square " << chi << " with " << dof << " degrees of freedom");
  CHECK(dof == 2);
  CHECK(chi < chi_bound(dof));
  CHECK(chi_square(always, pd, n, &dof) > chi_bound(2));
  // acceptance rate = sum_x min(p(x), q(x)) = 0.1 + 0.1 + 0.2
  CHECK(static_cast<double>(accepts) / n == Approx(0.4).margin(0.005));
}

TEST_CASE("speculative: speculative_accept rejects impossible drafts and bad uniforms", "[speculative]") {
  const std::vector<float> p = {0.5f, 0.5f, 0.0f};
  const std::vector<float> q = {0.0f, 0.5f, 0.5f};
  bool a = false;
  CHECK_THAT(testing::error_of([&] { gpt::speculative_accept(p.data(), q.data(), 3, 0, 0.1f, 0.1f, &a); }),
             Catch::Contains("probability 0 under the draft"));
  CHECK_THAT(testing::error_of([&] { gpt::speculative_accept(p.data(), q.data(), 3, 3, 0.1f, 0.1f, &a); }),
             Catch::Contains("not an id"));
  CHECK_THAT(testing::error_of([&] { gpt::speculative_accept(p.data(), q.data(), 3, 1, 1.0f, 0.1f, &a); }),
             Catch::Contains("[0, 1)"));
  // x = 2 has p = 0: always rejected, and the residual (0.5, 0, 0) gives 0
  for (const float u : {0.0f, 0.5f, 0.99f}) {
    CHECK(gpt::speculative_accept(p.data(), q.data(), 3, 2, 0.0f, u, &a) == 0);
    CHECK_FALSE(a);
  }
}

// ---- the whole loop ---------------------------------------------------------------------------

TEST_CASE("speculative: the first tokens' joint distribution is the target's, k = 1 and 3", "[speculative]") {
  constexpr int V = 4;
  TableModel target(V, 3, random_table(V, 3, 11, 0.25));  // trigram, some tokens ruled out
  TableModel draft(V, 2, random_table(V, 2, 12, 0.0));    // bigram: a different model
  const std::vector<int32_t> prompt = {1, 2};
  constexpr int n_first = 3;
  const std::vector<double> exact = exact_joint(target, prompt, n_first);
  constexpr int64_t runs = 20000;
  for (const int k : {1, 3}) {
    INFO("k = " << k);
    std::vector<int64_t> counts(exact.size(), 0);
    int64_t drafted = 0, accepted = 0;
    for (int64_t s = 0; s < runs; ++s) {
      gpt::SpeculativeOptions o;
      o.k = k;
      o.tokens = 4;  // a first round of k = 3 drafts (kr = min(k, tokens - 1))
      o.temperature = 1.0f;
      o.seed = nn::splitmix64(2024, static_cast<uint64_t>(s));
      gpt::SpeculativeStats st;
      target.steps = 0;
      const std::vector<int32_t> out = gpt::speculative_generate(target, draft, prompt, o, &st);
      REQUIRE(out.size() == 4);
      REQUIRE(st.emitted == 4);
      REQUIRE(st.emitted == st.accepted + st.rounds);
      REQUIRE(target.steps == st.rounds + 1);  // one prefill, then ONE target step per round
      // every round judges its drafts up to its first reject: at most one reject per round
      REQUIRE(st.judged >= st.accepted);
      REQUIRE(st.judged <= st.drafted);
      REQUIRE(st.judged - st.accepted <= st.rounds);
      ++counts[static_cast<size_t>(cell_of(out, n_first, V))];
      drafted += st.drafted;
      accepted += st.accepted;
    }
    CHECK(target.max_n == k + 1);  // the pending token and k drafts in one step
    int dof = 0;
    const double chi = chi_square(counts, exact, runs, &dof);
    INFO("chi-square " << chi << " with " << dof << " degrees of freedom");
    CHECK(dof > 20);
    CHECK(chi < chi_bound(dof));
    // the drafts are often rejected here: the check exercises the residual, not just accepts
    CHECK(5 * accepted < 4 * drafted);
    CHECK(accepted > 0);
  }
  // What always accepting would emit for the first 3 tokens at k = 3: the draft's own
  // samples. The same comparison must fail for it.
  std::vector<int64_t> wrong(exact.size(), 0);
  for (int64_t s = 0; s < runs; ++s) {
    const std::vector<int32_t> out =
        gpt::autoregressive_generate(draft, prompt, n_first, 1.0f, nn::splitmix64(7, static_cast<uint64_t>(s)));
    ++wrong[static_cast<size_t>(cell_of(out, n_first, V))];
  }
  int dof = 0;
  CHECK(chi_square(wrong, exact, runs, &dof) > chi_bound(static_cast<int>(exact.size()) - 1));
}

TEST_CASE("speculative: the baseline samples the model's own joint distribution", "[speculative]") {
  constexpr int V = 4;
  TableModel m(V, 3, random_table(V, 3, 21, 0.2));
  const std::vector<int32_t> prompt = {3};
  const std::vector<double> exact = exact_joint(m, prompt, 2);
  constexpr int64_t runs = 20000;
  std::vector<int64_t> counts(exact.size(), 0);
  for (int64_t s = 0; s < runs; ++s) {
    const std::vector<int32_t> out = gpt::autoregressive_generate(m, prompt, 2, 1.0f, nn::splitmix64(5, static_cast<uint64_t>(s)));
    ++counts[static_cast<size_t>(cell_of(out, 2, V))];
  }
  int dof = 0;
  const double chi = chi_square(counts, exact, runs, &dof);
  INFO("chi-square " << chi);
  CHECK(chi < chi_bound(dof));
}

TEST_CASE("speculative: a draft equal to the target is always accepted, k + 1 tokens per round", "[speculative]") {
  constexpr int V = 6;
  const std::vector<float> table = random_table(V, 3, 31, 0.1);
  for (const int k : {1, 2, 4}) {
    INFO("k = " << k);
    TableModel target(V, 3, table), draft(V, 3, table);
    gpt::SpeculativeOptions o;
    o.k = k;
    o.tokens = 5 * (k + 1);
    o.seed = 99;
    gpt::SpeculativeStats st;
    const std::vector<int32_t> out = gpt::speculative_generate(target, draft, {0, 5, 1}, o, &st);
    CHECK(out.size() == static_cast<size_t>(o.tokens));
    CHECK(st.rounds == 5);
    CHECK(st.drafted == 5 * k);
    CHECK(st.judged == st.drafted);  // no reject: every draft judged and accepted
    CHECK(st.acceptance_rate() == 1.0);
    CHECK(st.tokens_per_round() == k + 1);
    CHECK(target.steps == 1 + 5);
    CHECK(draft.steps == 1 + 5 * k);  // the prefill, then k steps per round (the first feeds 2 after a full accept)
  }
}

TEST_CASE("speculative: greedy output is the target's greedy output", "[speculative]") {
  constexpr int V = 5;
  TableModel target(V, 3, random_table(V, 3, 41, 0.0));
  TableModel draft(V, 2, random_table(V, 2, 42, 0.0));
  const std::vector<int32_t> prompt = {2, 4};
  const std::vector<int32_t> want = gpt::autoregressive_generate(target, prompt, 30, 0.0f, 1);
  for (const int k : {1, 3, 6}) {
    INFO("k = " << k);
    gpt::SpeculativeOptions o;
    o.k = k;
    o.tokens = 30;
    o.temperature = 0.0f;
    gpt::SpeculativeStats st;
    CHECK(gpt::speculative_generate(target, draft, prompt, o, &st) == want);
    CHECK(st.emitted == 30);
    CHECK(st.accepted < st.drafted);  // the draft disagrees sometimes: the residual path ran
  }
}

TEST_CASE("speculative: speculative_generate's errors", "[speculative]") {
  TableModel target(4, 2, random_table(4, 2, 1, 0.0), 16);
  TableModel draft(4, 2, random_table(4, 2, 2, 0.0), 16);
  TableModel other(5, 2, random_table(5, 2, 3, 0.0), 16);
  gpt::SpeculativeOptions o;
  o.k = 4;
  o.tokens = 8;
  CHECK(gpt::speculative_generate(target, draft, {1, 2, 3, 0}, o).size() == 8);  // 4 + 8 + 4 = 16 fits
  CHECK_THAT(testing::error_of([&] { gpt::speculative_generate(target, draft, {1, 2, 3, 0, 1}, o); }),
             Catch::Contains("exceed the cache"));
  CHECK_THAT(testing::error_of([&] { gpt::speculative_generate(target, other, {1}, o); }),
             Catch::Contains("one vocabulary"));
  CHECK_THAT(testing::error_of([&] { gpt::speculative_generate(target, draft, {}, o); }), Catch::Contains("prompt"));
  CHECK_THAT(testing::error_of([&] { gpt::speculative_generate(target, draft, {7}, o); }), Catch::Contains("not an id"));
  o.k = 0;
  CHECK_THAT(testing::error_of([&] { gpt::speculative_generate(target, draft, {1}, o); }), Catch::Contains("k >= 1"));
  CHECK_THAT(testing::error_of([&] { gpt::autoregressive_generate(target, {1}, 16, 1.0f, 1); }),
             Catch::Contains("exceed the model's cache"));
  o.k = 2;
  o.tokens = 0;
  CHECK(gpt::speculative_generate(target, draft, {1}, o).empty());
}

// ---- the expectations --------------------------------------------------------------------------

TEST_CASE("speculative: expected tokens per round and speedup", "[speculative]") {
  CHECK(gpt::expected_tokens_per_round(0.5, 2) == Approx(1.75));            // 1 + 0.5 + 0.25
  CHECK(gpt::expected_tokens_per_round(0.8, 4) == Approx((1 - std::pow(0.8, 5)) / 0.2));
  CHECK(gpt::expected_tokens_per_round(0.0, 5) == 1.0);                      // only the target's token
  CHECK(gpt::expected_tokens_per_round(1.0, 4) == 5.0);                      // the alpha = 1 limit: k + 1
  CHECK(gpt::expected_tokens_per_round(1.0 - 1e-12, 4) == Approx(5.0));      // no cancellation near 1
  CHECK(gpt::expected_speedup(0.8, 4, 0.1) == Approx(3.3616 / 1.4));
  CHECK(gpt::expected_speedup(1.0, 3, 0.0) == 4.0);
  CHECK(gpt::expected_speedup(0.0, 3, 0.5) == Approx(1.0 / 2.5));            // all rejected: a loss
  CHECK_THAT(testing::error_of([] { gpt::expected_tokens_per_round(1.5, 2); }), Catch::Contains("[0, 1]"));
  CHECK_THAT(testing::error_of([] { gpt::expected_tokens_per_round(-0.1, 2); }), Catch::Contains("[0, 1]"));
  CHECK_THAT(testing::error_of([] { gpt::expected_tokens_per_round(0.5, 0); }), Catch::Contains("k must be"));
  CHECK_THAT(testing::error_of([] { gpt::expected_speedup(0.5, 2, -1.0); }), Catch::Contains("cost ratio"));
}
