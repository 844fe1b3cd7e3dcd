// gpt/speculative.h: speculative decoding (Leviathan, Kalman & Matias 2023; Chen et al.
// 2023). A cheap draft model proposes k tokens one by one; the target model scores all k
// (plus one) in ONE step, which reads its weights once instead of k times; each draft is
// accepted or replaced by a rule that makes the output distribution exactly the target's.
//
// The rule, for a draft token x drawn from the draft's distribution q, with p the target's:
//   accept x with probability min(1, p(x) / q(x));
//   on reject, draw from the residual r(y) = max(0, p(y) - q(y)) / sum_z max(0, p(z) - q(z)).
// Then P(emit y) = q(y) min(1, p(y)/q(y)) + (1 - sum_z min(p(z), q(z))) r(y) = p(y).
// After k accepted drafts the target's distribution at the next position is already
// computed: one more token is drawn from it for free, so a round emits 1 .. k+1 tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace gpt {

class Decoder;  // gpt/infer.h

// softmax(logits / temperature) into probs (V); temperature 0: one-hot on the argmax
// (lowest id on ties).
void probs_from_logits(const float* logits, int V, float temperature, float* probs);

// One position of the rule: p, q (V) the target's and draft's probabilities, x the draft's
// token (q[x] > 0). Accepts when u_accept < p[x] / q[x] (u in [0, 1)); otherwise draws from
// the residual with u_resample (inverse CDF over ids in order). Returns the emitted token
// and sets *accepted. When p == q the residual is empty and x is always accepted.
int32_t speculative_accept(const float* p, const float* q, int V, int32_t x, float u_accept, float u_resample,
                           bool* accepted);

// What speculative decoding drives: next-token logits with a cache that can be rewound.
// gpt::Decoder (batch 1) is one (DecoderModel); the tests use exact toy models.
class TokenModel {
 public:
  virtual ~TokenModel() = default;
  virtual int vocab_size() const = 0;
  virtual int max_positions() const = 0;  // the cache's capacity (block_size)
  virtual int pos() const = 0;
  virtual void rewind(int pos) = 0;
  // Feeds n tokens at pos() .. pos()+n-1 and returns their logits (n, V) on the host.
  virtual const float* step(const int32_t* tokens, int n) = 0;
};
class DecoderModel final : public TokenModel {
 public:
  explicit DecoderModel(Decoder& d) : d_(d) {}
  int vocab_size() const override;
  int max_positions() const override;
  int pos() const override;
  void rewind(int pos) override;
  const float* step(const int32_t* tokens, int n) override;

 private:
  Decoder& d_;
};

struct SpeculativeOptions {
  int k = 4;                 // drafts per round
  int tokens = 200;          // to generate
  float temperature = 1.0f;  // applied to both models (0: greedy)
  uint64_t seed = 1337;
};
struct SpeculativeStats {
  int64_t rounds = 0;    // target steps
  int64_t drafted = 0;   // draft tokens proposed
  int64_t judged = 0;    // of those, put to the rule: up to and including a round's first
                         // reject (the drafts after it are thrown away unjudged)
  int64_t accepted = 0;  // of those, accepted
  int64_t emitted = 0;   // tokens produced (accepted + one per round)
  double seconds = 0.0, target_seconds = 0.0, draft_seconds = 0.0;
  // accepted / judged: the estimate of the per-draft acceptance probability a of the
  // formulas below (accepted / drafted would count the unjudged drafts after a reject as
  // rejections, and fall with k even when a does not).
  double acceptance_rate() const { return judged > 0 ? static_cast<double>(accepted) / static_cast<double>(judged) : 0.0; }
  double tokens_per_round() const { return rounds > 0 ? static_cast<double>(emitted) / static_cast<double>(rounds) : 0.0; }
};
// Generates o.tokens ids after `prompt` (both models start empty: the prompt is prefilled
// into each); returns the generated ids only. nn::Error if the vocabularies differ, k < 1,
// or prompt + tokens + k exceed either model's max_positions (no sliding window here).
std::vector<int32_t> speculative_generate(TokenModel& target, TokenModel& draft, const std::vector<int32_t>& prompt,
                                          const SpeculativeOptions& o, SpeculativeStats* stats = nullptr);
// The baseline: plain sampling from one model, one step per token, the same temperature
// and the same kind of draws; *seconds gets the time of the generated tokens' steps.
std::vector<int32_t> autoregressive_generate(TokenModel& m, const std::vector<int32_t>& prompt, int tokens,
                                             float temperature, uint64_t seed, double* seconds = nullptr);

// Expected tokens per round for an acceptance rate alpha (i.i.d. acceptances), k drafts:
//   (1 - alpha^(k+1)) / (1 - alpha)        (k + 1 at alpha = 1)
double expected_tokens_per_round(double alpha, int k);
// Expected speedup over plain decoding when a draft step costs c target steps:
//   (1 - alpha^(k+1)) / ((1 - alpha) (k c + 1))
double expected_speedup(double alpha, int k, double c);

}  // namespace gpt
