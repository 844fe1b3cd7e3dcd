// kernels/residual.h: the residual add of a transformer block, out = a + b (n elements).
//
// The backward is the identity into both inputs: callers pass the same gradient buffer on
// (gpt/model.cpp), so there is no residual_backward. Fused with the layernorm that follows
// it in a GPT block: residual_layernorm_forward (kernels/layernorm.h).
//
// Versions (code in kernels/residual.cpp; 12 B/element: read a, read b, write out):
//   v1  the plain loop. The reference (nn::residual_forward, the naive GPT backend).
//   v2  the same loop, `omp parallel for simd` over the elements: the bytes are the cost,
//       so the gain is the second core's share of the memory bandwidth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// out, a, b (n); out may alias a or b.
using ResidualFn = void (*)(float* out, const float* a, const float* b, int64_t n);

template <typename F>
void residual_forward_v1(F* out, const F* a, const F* b, int64_t n);
void residual_forward_v2(float* out, const float* a, const float* b, int64_t n);

const std::vector<OpVersion<ResidualFn>>& residual_versions();
const OpVersion<ResidualFn>& residual_version(const std::string& number_or_name);

}  // namespace kernels
