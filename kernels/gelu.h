// kernels/gelu.h: GELU, the tanh approximation (GPT-2's, PyTorch's approximate='tanh'),
// forward and backward over n elements.
//
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 0.044715 x^2)
//   backward: dinp = dout * gelu'(inp), ASSIGNED
// The bias + GELU epilogue of a matmul is kernels/bias_gelu.h (lesson 03's ladder); the
// matmul + bias + GELU the GPT trainer fuses is kernels/linear.h's linear_gelu_forward.
//
// Versions (code in kernels/gelu.cpp; 8 B/element forward, 12 backward):
//   v1  plain loops with std::tanh, in F. The reference (nn::gelu_forward / gelu_backward,
//       the naive GPT backend).
//   v2  SIMD with poly_exp through 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) (gelu_tanh,
//       kernels/bias_gelu.h), and for the derivative s = 1 / (1 + e), e = exp(-2u):
//       gelu' = s + 2 x s^2 e du/dx (1 - s = e s: no cancellation as s -> 1); OpenMP over
//       blocks of registers. Attacks libm's tanh (~10+ ns an element).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

using GeluFn = void (*)(float* out, const float* inp, int64_t n);
using GeluBackwardFn = void (*)(float* dinp, const float* dout, const float* inp, int64_t n);

template <typename F>
void gelu_forward_v1(F* out, const F* inp, int64_t n);
void gelu_forward_v2(float* out, const float* inp, int64_t n);
template <typename F>
void gelu_backward_v1(F* dinp, const F* dout, const F* inp, int64_t n);
void gelu_backward_v2(float* dinp, const float* dout, const float* inp, int64_t n);

const std::vector<OpVersion<GeluFn>>& gelu_versions();
const OpVersion<GeluFn>& gelu_version(const std::string& number_or_name);
const std::vector<OpVersion<GeluBackwardFn>>& gelu_backward_versions();
const OpVersion<GeluBackwardFn>& gelu_backward_version(const std::string& number_or_name);

}  // namespace kernels
