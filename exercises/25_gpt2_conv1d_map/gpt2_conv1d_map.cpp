// Exercise 25_gpt2_conv1d_map (lesson 12): GPT-2's Conv1D weights into our Linear layout.
//
// Read first: lesson 12's README (lessons/12-real-models/README.md), the part on GPT-2's
// Conv1D and its fused qkv; the library's loader is gpt/hf.cpp (load_hf_model).
//
// A matrix is a block of numbers plus a convention for which index is the row. GPT-2 was
// written in TensorFlow, where a projection is x @ W with W (in, out); PyTorch's nn.Linear and
// our Linear keep W (out, in) and compute W x. Same numbers, the other convention: reading
// GPT-2's c_fc (768, 3072) as if it were (out, in) gives a matrix of the wrong shape for most
// layers and, worse, a matrix of the RIGHT shape for the square ones (c_proj of attention is
// 768 x 768), which loads without complaint and produces garbage. The transpose is the map.
//
// Check your work: `nnlab check` (or `nnlab check --only 25_gpt2_conv1d_map`).
#include "exercises/25_gpt2_conv1d_map/gpt2_conv1d_map.h"

namespace ex {

void conv1d_to_linear(float* dst, const float* src, int in, int out) {
  // TODO: element (i, o) of src, at i * out + o, goes to element (o, i) of dst, at o * in + i.
  (void)dst;
  (void)src;
  (void)in;
  (void)out;
}

void split_c_attn(float* q, float* k, float* v, float* q_bias, float* k_bias, float* v_bias, const float* src,
                  const float* bias, int C) {
  // TODO: src is (C, 3C): row i holds input i's weights to all 3C outputs, q's first. Each of
  //       q, k, v is (C, C) in (out, in) layout; the biases are the three slices of bias.
  (void)q;
  (void)k;
  (void)v;
  (void)q_bias;
  (void)k_bias;
  (void)v_bias;
  (void)src;
  (void)bias;
  (void)C;
}

}  // namespace ex
