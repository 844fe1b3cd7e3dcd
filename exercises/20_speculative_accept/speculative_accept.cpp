// Exercise 20_speculative_accept (lesson 10): the accept / resample rule of speculative
// decoding (Leviathan, Kalman & Matias 2023; Chen et al. 2023), for one position.
//
// Read first: lesson 10's README (lessons/10-inference/README.md), the part on speculative
// decoding; gpt/speculative.h says how gpt::speculative_generate uses this rule.
//
// A small draft model proposes a token x, drawn from ITS distribution q. The big target
// model, whose distribution p we actually want to sample from, checks it:
//   1. accept x with probability min(1, p[x] / q[x]):   u_accept < p[x] / q[x]
//      (a token the draft over-proposes, q[x] > p[x], is kept only sometimes; one it
//      under-proposes, q[x] <= p[x], always)
//   2. on reject, draw instead from the residual, the mass p has and q lacks:
//          r(y) = max(0, p[y] - q[y]) / Z,        Z = sum_y max(0, p[y] - q[y])
//      by inverse CDF with the second uniform: walk y = 0, 1, ..., V-1 adding up
//      max(0, p[y] - q[y]) and return the first y where u_resample * Z < that running sum.
// Why the result is distributed exactly as p: the chance to emit y is
//     q[y] min(1, p[y]/q[y])  +  P(reject) r(y)  =  min(p[y], q[y])  +  Z r(y)
//                                                =  min(p[y], q[y])  +  max(0, p[y] - q[y])  =  p[y]
// since P(reject) = sum_x q[x] (1 - min(1, p[x]/q[x])) = 1 - sum_x min(p[x], q[x]) = Z.
// So a cheap draft never changes WHAT is generated, only how many target steps it takes.
//   - On a reject, p[x] < q[x], so r(x) = 0: the resampled token is never x itself.
//   - When p == q every draft is accepted (p[x] / q[x] = 1 > u_accept): Z is 0, never used.
//   - Use u_accept only for the decision and u_resample only for the walk.
//   - If rounding lets the walk reach the end without stopping (u_resample * Z not below
//     the float sum), return the last y whose residual is > 0. If Z is 0 although x was
//     rejected (only rounding can do that), accept x.
//
// Check your work: `nnlab check` (or `nnlab check --only 20_speculative_accept`).
#include "exercises/20_speculative_accept/speculative_accept.h"

namespace ex {

int32_t speculative_accept(const float* p, const float* q, int V, int32_t x, float u_accept, float u_resample,
                           bool* accepted) {
  // TODO: the rule above: the accept test for the draft's token, and on a reject the draw
  //       from the residual by inverse CDF, with each uniform used for its own purpose only.
  //       Say through *accepted which of the two happened, and handle the rounding cases of
  //       the list above. Replace the two placeholder lines below: -1 is not a token.
  (void)p;
  (void)q;
  (void)V;
  (void)x;
  (void)u_accept;
  (void)u_resample;
  *accepted = false;
  return -1;
}

}  // namespace ex
