// kernels/swiglu.h: the SwiGLU gate of Llama's MLP (Shazeer 2020, "GLU variants improve
// transformer"), forward and backward.
//
// Llama's MLP is  down( silu(gate(x)) * up(x) )  where gate, up, down are bias-free linear
// layers (kernels/linear.h: the products stay the existing sgemm). This op is the part in
// between, element-wise over (rows, H):
//   out = silu(g) * u,   silu(g) = g sigmoid(g) = g / (1 + exp(-g))
// Backward, with s = sigmoid(g):
//   du = dout * silu(g)
//   dg = dout * u * silu'(g),   silu'(g) = s + g s (1 - s) = s (1 + g (1 - s))
// both ASSIGNED (g and u feed nothing else: the projections' own backward takes it from here).
// Compared with GPT-2's GELU MLP: a third matrix (H is usually 8/3 C instead of 4C, so the
// parameter count stays ~8 C^2) and a multiplicative gate.
//
// Layout: g and u are read as rows of H floats, `ld` floats apart (the row stride); out
// (rows, H) is dense. Two separate projections: ld = H. One fused gate_up projection
// (rows, 2H) = [g | u] per row: g = proj, u = proj + H, ld = 2H, and the backward writes dg,
// du straight into that fused gradient (rows, 2H): the fused layout costs nothing here, and
// saves the caller a split and a concatenation (the projection is then ONE sgemm of N = 2H).
//
// Versions (code in kernels/swiglu.cpp; 12 B/element forward (g, u, out), 20 backward (dout,
// g, u, dg, du); figures: 8192 x 2048 from a fused projection, 1 thread, forward / backward,
// on the 2-core VM while it was BUSY (load ~8, two rounds: noisy, to be re-measured idle),
// `nnlab bench swiglu swiglu_backward`):
//   v1  plain loops with std::exp in F: the reference (the lesson's code).
//                                                    188 / 196 ms, backward 300 / 293 ms
//   v2  SIMD with poly_exp (kernels/elementwise.h, 8e-8 relative), the derivative as
//       s + g s^2 e with e = exp(-g) (1 - s = e s: no cancellation as s -> 1, the form
//       gelu v2 uses), rows across OpenMP threads. Attacks libm's exp (~10 ns an element).
//       Validated at 1e-6 + 1e-5 |ref| against v1.               44 / 37 ms, backward 51 / 56 ms
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// out (rows,H) dense; gate, up: rows of H floats, ld apart (ld >= H). out aliases neither.
using SwigluFn = void (*)(float* out, const float* gate, const float* up, int rows, int H, int ld);
// dout (rows,H) dense -> dgate, dup: rows of H floats, ld apart, ASSIGNED (the other ld - H
// floats of a row are not touched).
using SwigluBackwardFn = void (*)(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                  int rows, int H, int ld);

// F = float (the naive backend) or double (gradient checks).
template <typename F>
void swiglu_forward_v1(F* out, const F* gate, const F* up, int rows, int H, int ld);
void swiglu_forward_v2(float* out, const float* gate, const float* up, int rows, int H, int ld);
template <typename F>
void swiglu_backward_v1(F* dgate, F* dup, const F* dout, const F* gate, const F* up, int rows, int H, int ld);
void swiglu_backward_v2(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int rows,
                        int H, int ld);

// The fastest validated versions (v2).
void swiglu_forward(float* out, const float* gate, const float* up, int rows, int H, int ld);
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int rows, int H,
                     int ld);

const std::vector<OpVersion<SwigluFn>>& swiglu_versions();
const OpVersion<SwigluFn>& swiglu_version(const std::string& number_or_name);
const std::vector<OpVersion<SwigluBackwardFn>>& swiglu_backward_versions();
const OpVersion<SwigluBackwardFn>& swiglu_backward_version(const std::string& number_or_name);

}  // namespace kernels
