// Exercise 25_gpt2_conv1d_map (lesson 12): GPT-2's Conv1D weights into our Linear layout.
// You write the bodies in gpt2_conv1d_map.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// GPT-2's checkpoint (Hugging Face's GPT2LMHeadModel, and OpenAI's original TensorFlow one)
// stores every projection as a "Conv1D": weight (in, out), row-major, applied as
//     y = x @ weight + bias          (x is a row vector of `in` numbers)
// Our Linear (nn/, kernels/matmul) stores weight (out, in), row-major, applied as
//     y[o] = bias[o] + sum_i weight[o][i] * x[i]
// conv1d_to_linear writes dst (out, in) so that both compute the same y:
//     dst[o * in + i] = src[i * out + o]            ASSIGNED, every element
void conv1d_to_linear(float* dst, const float* src, int in, int out);

// GPT-2's attention input projection c_attn is ONE Conv1D of shape (C, 3C): its output columns
// are [q | k | v], C each. Split it into three of our Linear weights, each (C, C) in (out, in)
// layout, and its bias (3C) into three biases (C):
//     q[o * C + i] = src[i * 3C + o]        q_bias[o] = bias[o]
//     k[o * C + i] = src[i * 3C + C + o]    k_bias[o] = bias[C + o]
//     v[o * C + i] = src[i * 3C + 2C + o]   v_bias[o] = bias[2C + o]
// (A Llama checkpoint stores q_proj, k_proj, v_proj separately and already (out, in): the
// loader stacks them; GPT-2's is the other way round, one fused and transposed matrix.)
void split_c_attn(float* q, float* k, float* v, float* q_bias, float* k_bias, float* v_bias, const float* src,
                  const float* bias, int C);

}  // namespace ex
