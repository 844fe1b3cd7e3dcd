// Exercise 20_speculative_accept (lesson 10): the accept / resample rule of speculative
// decoding, for one position. You write the body in speculative_accept.cpp; `nnlab check`
// runs the tests in test.cpp.
#pragma once

#include <cstdint>

namespace ex {

// p, q (V): the target's and the draft's next-token probabilities (each sums to 1);
// x: the token the draft drew from q (so q[x] > 0); u_accept, u_resample: two independent
// uniform draws in [0, 1).
//   accept   when u_accept < p[x] / q[x]: set *accepted = true and return x;
//   reject   otherwise: set *accepted = false and return the token y found by walking the
//            residual r(y) = max(0, p[y] - q[y]) in id order (inverse CDF):
//              Z = sum_y r(y);   return the first y with u_resample * Z < r(0) + ... + r(y)
//            (if rounding lets the walk run off the end, the last y with r(y) > 0).
// The emitted token is then distributed exactly as p, whatever q is (Leviathan et al. 2023).
// The same rule as gpt::speculative_accept (gpt/speculative.h).
int32_t speculative_accept(const float* p, const float* q, int V, int32_t x, float u_accept, float u_resample,
                           bool* accepted);

}  // namespace ex
