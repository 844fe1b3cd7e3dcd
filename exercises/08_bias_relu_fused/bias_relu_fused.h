// Exercise 08_bias_relu_fused (lesson 03): add the bias and apply ReLU in one pass.
// You write the body in bias_relu_fused.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// inp (B, OC), bias (OC) -> out (B, OC), row-major, assigned:
//     out[b][o] = max(0, inp[b][o] + bias[o])
// in ONE pass over the data. out may be inp itself (in place): each element is read once
// and then written once, at the same index, so nothing is overwritten before it is read.
//
// Why fuse. Unfused, it is two passes through a (B, OC) temporary:
//     pass 1:  tmp[b][o] = inp[b][o] + bias[o]      reads inp, writes tmp
//     pass 2:  out[b][o] = max(0, tmp[b][o])        reads tmp, writes out
// = 4 * B * OC floats moved to and from memory. Fused, each value is loaded once, gets
// its bias and its max while it sits in a register, and is stored once:
//     out[b][o] = max(0, inp[b][o] + bias[o])       reads inp, writes out
// = 2 * B * OC floats (bias is OC floats, read again for every row but small enough to
// stay in L1). An add and a max per element are nothing next to a trip to DRAM, so this
// op is memory-bound: half the bytes is (almost) half the time, for the same arithmetic.
void bias_relu(float* out, const float* inp, const float* bias, int B, int OC);

}  // namespace ex
