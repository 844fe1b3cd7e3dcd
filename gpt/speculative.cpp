// gpt/speculative.cpp: speculative decoding (see gpt/speculative.h for the rule and why it
// is exact). Sections: probabilities, the rule at one position, the Decoder as a TokenModel,
// the generation loop, the plain baseline, the expectations.
#include "gpt/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "gpt/infer.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace gpt {

// ---- probabilities -----------------------------------------------------------------------------

void probs_from_logits(const float* logits, int V, float temperature, float* probs) {
  NN_CHECK(logits != nullptr && probs != nullptr && V > 0, "probs_from_logits: expected V >= 1 logits, got V = " << V);
  int best = 0;  // the first of the largest
  for (int i = 0; i < V; ++i) {
    // -inf is allowed (a token the model rules out); NaN and +inf mean the model diverged
    NN_CHECK(!std::isnan(logits[i]) && logits[i] != INFINITY,
             "logit " << i << " is " << logits[i] << ": the model diverged (lower the learning rate, clip gradients)");
    if (logits[i] > logits[best]) best = i;
  }
  NN_CHECK(std::isfinite(logits[best]), "probs_from_logits: every logit is -inf: no token is possible");
  if (!(temperature > 0.0f)) {
    // greedy: all the mass on the argmax, so sampling from it and the rule below are greedy too
    std::fill(probs, probs + V, 0.0f);
    probs[best] = 1.0f;
    return;
  }
  // p_i = exp((l_i - max) / T) / sum_j exp((l_j - max) / T), in double (as nn::sample_from_logits)
  const double T = temperature;
  const double lmax = logits[best];
  double sum = 0.0;
  for (int i = 0; i < V; ++i) sum += std::exp((static_cast<double>(logits[i]) - lmax) / T);
  for (int i = 0; i < V; ++i) probs[i] = static_cast<float>(std::exp((static_cast<double>(logits[i]) - lmax) / T) / sum);
}

namespace {

// Inverse CDF: the first id whose cumulative weight passes u * sum(w) (w >= 0, sum > 0);
// the last id with weight > 0 when rounding leaves u * sum beyond the total.
int32_t sample_weights(const float* w, int V, double total, float u) {
  const double target = static_cast<double>(u) * total;
  double cum = 0.0;
  int32_t last_nonzero = -1;
  for (int i = 0; i < V; ++i) {
    if (!(w[i] > 0.0f)) continue;
    cum += w[i];
    last_nonzero = i;
    if (target < cum) return i;
  }
  return last_nonzero;
}

int32_t sample_probs(const float* p, int V, float u) {
  double total = 0.0;
  for (int i = 0; i < V; ++i) total += p[i];
  return sample_weights(p, V, total, u);
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

// ---- the rule at one position -----------------------------------------------------------------

int32_t speculative_accept(const float* p, const float* q, int V, int32_t x, float u_accept, float u_resample,
                           bool* accepted) {
  NN_CHECK(p != nullptr && q != nullptr && V > 0, "speculative_accept: expected V >= 1 probabilities, got V = " << V);
  NN_CHECK(x >= 0 && x < V, "speculative_accept: the draft token " << x << " is not an id of a vocabulary of " << V);
  NN_CHECK(q[x] > 0.0f, "speculative_accept: the draft token " << x
                                                               << " has probability 0 under the draft: it cannot have been drawn from it");
  NN_CHECK(u_accept >= 0.0f && u_accept < 1.0f && u_resample >= 0.0f && u_resample < 1.0f,
           "speculative_accept: the uniforms must be in [0, 1), got " << u_accept << " and " << u_resample);
  // accept x with probability min(1, p(x) / q(x)): u < p/q (always when p(x) >= q(x))
  if (static_cast<double>(u_accept) < static_cast<double>(p[x]) / static_cast<double>(q[x])) {
    if (accepted != nullptr) *accepted = true;
    return x;
  }
  if (accepted != nullptr) *accepted = false;
  // r(y) = max(0, p(y) - q(y)) / sum_z max(0, p(z) - q(z)): where the target wants more mass
  // than the draft gave. Not empty here: a reject needs p(x) < q(x), and both sum to 1.
  std::vector<float> r(static_cast<size_t>(V));
  double total = 0.0;
  for (int i = 0; i < V; ++i) {
    r[static_cast<size_t>(i)] = std::max(0.0f, p[i] - q[i]);
    total += r[static_cast<size_t>(i)];
  }
  if (!(total > 0.0)) {
    // only float rounding (p and q equal to the last bit everywhere but x) gets here:
    // fall back on the target itself
    return sample_probs(p, V, u_resample);
  }
  return sample_weights(r.data(), V, total, u_resample);
}

// ---- the Decoder as a TokenModel -------------------------------------------------------------

int DecoderModel::vocab_size() const { return d_.model().config.vocab_size; }
int DecoderModel::max_positions() const { return d_.model().config.block_size; }
int DecoderModel::pos() const { return d_.pos(); }
void DecoderModel::rewind(int pos) { d_.rewind(pos); }
const float* DecoderModel::step(const int32_t* tokens, int n) { return d_.step(tokens, 1, n).data(); }

// ---- the generation loop ------------------------------------------------------------------------
//
// The sequence `seq` is the prompt and every token emitted so far. Its last token is always
// "pending": fed to neither model yet (its logits are what the next round needs). At the
// start of a round the target has seq[0 .. len-2] in its cache; the draft has the same or
// one fewer (after a round whose k drafts were all accepted, the draft never saw the last
// draft). A round, with kr = min(k, tokens still to emit - 1) drafts:
//   1. draft: feed what it lacks of seq (1 or 2 tokens, one step), q_1 from the last row;
//      draw x_1 ~ q_1; then kr - 1 single steps: feed x_i, q_{i+1} from its row, draw x_{i+1}.
//   2. target: ONE step of [pending, x_1, ..., x_kr] (kr + 1 tokens): row i is p_{i+1}, the
//      target's distribution for x_{i+1}, and row kr is the distribution after x_kr.
//   3. for i = 1 .. kr: the rule on (p_i, q_i, x_i); on the first reject emit its resample
//      and stop; when all kr are accepted, draw one more token from row kr.
//   4. both models rewind to (new len - 1): what they cached beyond the accepted tokens
//      (rejected drafts, and the target's row for the extra token) is forgotten.
// Draws, from one nn::Rng(seed) stream, in this order per round: kr uniforms for the drafts
// x_1 .. x_kr; then for each position checked two uniforms (u_accept, u_resample), drawn
// whether or not the resample is used; then, if all kr were accepted, one uniform for the
// extra token. Capping kr at what is left to emit makes the output exactly o.tokens long.

std::vector<int32_t> speculative_generate(TokenModel& target, TokenModel& draft, const std::vector<int32_t>& prompt,
                                          const SpeculativeOptions& o, SpeculativeStats* stats) {
  const int V = target.vocab_size();
  NN_CHECK(draft.vocab_size() == V, "speculative decoding needs one vocabulary: the target has "
                                        << V << " tokens, the draft " << draft.vocab_size()
                                        << " (train the draft on the same text)");
  NN_CHECK(o.k >= 1, "speculative decoding needs k >= 1 drafts per round, got " << o.k);
  NN_CHECK(o.tokens >= 0, "the number of tokens to generate must be >= 0, got " << o.tokens);
  NN_CHECK(!prompt.empty(), "speculative decoding needs a prompt of at least one token");
  for (const int32_t t : prompt) NN_CHECK(t >= 0 && t < V, "prompt token " << t << " is not an id of a vocabulary of " << V);
  const int64_t need = static_cast<int64_t>(prompt.size()) + o.tokens + o.k;
  NN_CHECK(need <= target.max_positions() && need <= draft.max_positions(),
           "prompt (" << prompt.size() << ") + tokens (" << o.tokens << ") + k (" << o.k << ") = " << need
                      << " positions exceed the cache of the target (" << target.max_positions() << ") or the draft ("
                      << draft.max_positions() << "): generate fewer tokens (there is no sliding window here)");

  SpeculativeStats st;
  nn::Rng rng(o.seed);
  std::vector<int32_t> seq = prompt;
  const size_t prompt_len = prompt.size();
  // prefill: everything but the pending last token, into both (not timed: the same for any k)
  target.rewind(0);
  draft.rewind(0);
  if (prompt_len > 1) {
    target.step(prompt.data(), static_cast<int>(prompt_len) - 1);
    draft.step(prompt.data(), static_cast<int>(prompt_len) - 1);
  }

  const size_t Vs = static_cast<size_t>(V);
  std::vector<float> q(static_cast<size_t>(o.k) * Vs), p(static_cast<size_t>(o.k + 1) * Vs);
  std::vector<int32_t> drafts(static_cast<size_t>(o.k)), fed;
  const auto t_start = Clock::now();
  int emitted = 0;
  while (emitted < o.tokens) {
    const int kr = std::min(o.k, o.tokens - emitted - 1);  // 0 in a last round of one token
    const int len = static_cast<int>(seq.size());
    // 1. the draft proposes kr tokens, one step each
    if (kr > 0) {
      const auto t0 = Clock::now();
      fed.assign(seq.begin() + draft.pos(), seq.end());
      const float* row = draft.step(fed.data(), static_cast<int>(fed.size())) + (fed.size() - 1) * Vs;
      for (int i = 0; i < kr; ++i) {
        if (i > 0) row = draft.step(&drafts[static_cast<size_t>(i - 1)], 1);
        float* qi = q.data() + static_cast<size_t>(i) * Vs;
        probs_from_logits(row, V, o.temperature, qi);
        drafts[static_cast<size_t>(i)] = sample_probs(qi, V, rng.uniform());
      }
      st.draft_seconds += seconds_since(t0);
      st.drafted += kr;
    }
    // 2. the target scores the pending token and every draft in one step
    {
      const auto t0 = Clock::now();
      NN_CHECK(target.pos() == len - 1, "speculative_generate: the target's cache holds " << target.pos()
                                                                                           << " positions, expected " << len - 1);
      fed.assign(1, seq.back());
      fed.insert(fed.end(), drafts.begin(), drafts.begin() + kr);
      const float* rows = target.step(fed.data(), kr + 1);
      for (int i = 0; i <= kr; ++i) {
        probs_from_logits(rows + static_cast<size_t>(i) * Vs, V, o.temperature, p.data() + static_cast<size_t>(i) * Vs);
      }
      st.target_seconds += seconds_since(t0);
    }
    ++st.rounds;
    // 3. accept left to right; the first reject ends the round with its resample
    bool all_accepted = true;
    for (int i = 0; i < kr; ++i) {
      const float u_accept = rng.uniform();
      const float u_resample = rng.uniform();
      bool accepted = false;
      const int32_t y = speculative_accept(p.data() + static_cast<size_t>(i) * Vs, q.data() + static_cast<size_t>(i) * Vs,
                                           V, drafts[static_cast<size_t>(i)], u_accept, u_resample, &accepted);
      seq.push_back(y);
      ++st.judged;
      if (!accepted) {
        all_accepted = false;
        break;
      }
      ++st.accepted;
    }
    if (all_accepted) {
      // the target's distribution after the last draft is already computed: one more, free
      seq.push_back(sample_probs(p.data() + static_cast<size_t>(kr) * Vs, V, rng.uniform()));
    }
    const int new_len = static_cast<int>(seq.size());
    emitted += new_len - len;
    // 4. forget what the caches hold beyond the accepted tokens (the new pending one stays out)
    if (target.pos() > new_len - 1) target.rewind(new_len - 1);
    if (draft.pos() > new_len - 1) draft.rewind(new_len - 1);
  }
  st.emitted = emitted;
  st.seconds = seconds_since(t_start);
  if (stats != nullptr) *stats = st;
  return std::vector<int32_t>(seq.begin() + static_cast<std::ptrdiff_t>(prompt_len), seq.end());
}

// ---- the plain baseline ---------------------------------------------------------------------------

std::vector<int32_t> autoregressive_generate(TokenModel& m, const std::vector<int32_t>& prompt, int tokens,
                                             float temperature, uint64_t seed, double* seconds) {
  const int V = m.vocab_size();
  NN_CHECK(tokens >= 0, "the number of tokens to generate must be >= 0, got " << tokens);
  NN_CHECK(!prompt.empty(), "generation needs a prompt of at least one token");
  for (const int32_t t : prompt) NN_CHECK(t >= 0 && t < V, "prompt token " << t << " is not an id of a vocabulary of " << V);
  const int64_t need = static_cast<int64_t>(prompt.size()) + tokens;
  NN_CHECK(need <= m.max_positions(), "prompt (" << prompt.size() << ") + tokens (" << tokens << ") = " << need
                                                 << " positions exceed the model's cache (" << m.max_positions()
                                                 << "): generate fewer tokens");
  nn::Rng rng(seed);
  std::vector<float> probs(static_cast<size_t>(V));
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(tokens));
  m.rewind(0);
  // prefill all but the last prompt token (not timed), so every generated token costs one
  // 1-token step: the last prompt token's step gives the first draw
  if (prompt.size() > 1) m.step(prompt.data(), static_cast<int>(prompt.size()) - 1);
  int32_t next = prompt.back();
  const auto t0 = Clock::now();
  for (int n = 0; n < tokens; ++n) {
    const float* row = m.step(&next, 1);
    probs_from_logits(row, V, temperature, probs.data());
    next = sample_probs(probs.data(), V, rng.uniform());
    out.push_back(next);
  }
  if (seconds != nullptr) *seconds = seconds_since(t0);
  return out;
}

// ---- the expectations ----------------------------------------------------------------------------

double expected_tokens_per_round(double alpha, int k) {
  NN_CHECK(alpha >= 0.0 && alpha <= 1.0, "the acceptance rate must be in [0, 1], got " << alpha);
  NN_CHECK(k >= 1, "k must be >= 1, got " << k);
  // (1 - a^(k+1)) / (1 - a) = 1 + a + ... + a^k: summed, so a -> 1 needs no special case
  // (the i-th draft is emitted when the first i are all accepted: probability a^i)
  double sum = 0.0, term = 1.0;
  for (int i = 0; i <= k; ++i) {
    sum += term;
    term *= alpha;
  }
  return sum;
}

double expected_speedup(double alpha, int k, double c) {
  NN_CHECK(c >= 0.0 && std::isfinite(c), "the draft's cost ratio must be >= 0, got " << c);
  // a round costs k draft steps (k c target steps) and one target step, and emits
  // expected_tokens_per_round tokens; plain decoding emits one per target step
  return expected_tokens_per_round(alpha, k) / (static_cast<double>(k) * c + 1.0);
}

}  // namespace gpt
