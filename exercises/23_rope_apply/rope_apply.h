// Exercise 23_rope_apply (lesson 11): rotary position embedding, the way Llama (and Hugging
// Face's LlamaRotaryEmbedding) applies it to q and k. You write the body in rope_apply.cpp;
// `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// x: T token rows of NH heads of hs floats each (row t at x + t * NH * hs, head h at + h * hs),
// the tokens at positions pos0, pos0 + 1, ..., pos0 + T - 1. Rotates every head IN PLACE:
// for i = 0 .. hs/2 - 1, with the angle a = p * theta^(-2i / hs) of the token's position p,
//     x'[i]        = x[i] cos(a) - x[i + hs/2] sin(a)
//     x'[i + hs/2] = x[i + hs/2] cos(a) + x[i] sin(a)
// (element i is paired with i + hs/2: HF's rotate_half). hs is even.
void rope_apply(float* x, int T, int NH, int hs, int pos0, double theta);

}  // namespace ex
