// kernels/bias_gelu.h: the epilogue of an MLP's first matmul, out = gelu(inp + bias).
//
//   inp (B,OC) is the matmul's output x W^T, bias (OC), out (B,OC)
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))     (the tanh approximation
//             GPT-2 uses; Hendrycks & Gimpel 2016)
//
// Two element-wise steps, so the same story as kernels/elementwise.h: done as two passes,
// the pre-activation makes a round trip through memory; fused, it stays in a register.
// Both versions compute GELU with poly_exp (kernels/elementwise.h) through the identity
//   0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)),  so  gelu(x) = x / (1 + exp(-2u))
// rather than std::tanh: a libm tanh per element (~10+ ns) would make both versions
// compute-bound and hide the difference in bytes, exactly as std::cos does for cos2.
// Accuracy: within 1e-6 + 2e-7 |gelu(x)| of tanh-GELU in double (tested on [-20, 20];
// measured: 5e-7 at x = 4.7, one float rounding of the result; poly_exp's 8e-8 relative
// error moves gelu by at most |x| / 4 times that).
//
// Versions (code in kernels/bias_gelu.cpp; bytes per element, reads + writes as STREAM
// counts them, bias read once; figures: GB/s at B x OC = 8192 x 3072 (GPT-2 small's MLP at
// B = 8, T = 1024), 1 thread, 2-core AMD EPYC, docs/benchmarks/lesson03-fusion.md):
//   v1  two passes: out = inp + bias, then out = gelu(out) in place. The reference,
//       as two separate ops would run it.                     16 B/element   30.9 ms, 13.0 GB/s
//   v2  fused: out = gelu(inp + bias) in one pass, the sum in a register. Attacks the
//       pre-activation's round trip.                            8 B/element  21.1 ms,  9.6 GB/s
// The next step, not taken here: fuse into the matmul itself, applying bias + GELU to
// each tile of C while it is still in registers (the "epilogue" of CUTLASS and cuBLASLt),
// which also saves the matmul's own write and this op's read of it.
// bias_gelu_forward() below is v2.
#pragma once

#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/simd.h"
#include "kernels/versions.h"

namespace kernels {

// gelu on a SIMD register (V from kernels/simd.h), as described above.
template <class V>
typename V::reg gelu_tanh(typename V::reg x) {
  using reg = typename V::reg;
  // -2u = x * (-2 sqrt(2/pi) - 2 * 0.044715 sqrt(2/pi) x^2)
  const reg x2 = V::mul(x, x);
  const reg minus_2u = V::mul(x, V::fma(x2, V::set1(-0.0713548139f), V::set1(-1.59576917f)));
  // x / (1 + exp(-2u)): for x << 0, exp(-2u) is huge (saturating at 1.65e38) and the
  // result ~0; for x >> 0, exp(-2u) -> 0 and the result is x. No inf, no NaN.
  return V::div(x, V::add(V::set1(1.0f), poly_exp<V>(minus_2u)));
}
inline float gelu_tanhf(float x) {
  using S = simd::Portable<1>;
  return gelu_tanh<S>(S::set1(x)).v[0];
}

// out (B,OC), inp (B,OC), bias (OC). out may be inp (in place); otherwise no aliasing.
using BiasGeluFn = void (*)(float* out, const float* inp, const float* bias, int B, int OC);

void bias_gelu_forward_v1(float* out, const float* inp, const float* bias, int B, int OC);
void bias_gelu_forward_v2(float* out, const float* inp, const float* bias, int B, int OC);

// The fastest validated version (v2).
void bias_gelu_forward(float* out, const float* inp, const float* bias, int B, int OC);

using BiasGeluVersion = OpVersion<BiasGeluFn>;  // number, name, summary, fn (kernels/versions.h)
// Every version, in order: the bench and the tests iterate over this.
const std::vector<BiasGeluVersion>& bias_gelu_versions();
// By number ("2") or name ("v2", "fused"); throws std::invalid_argument.
const BiasGeluVersion& bias_gelu_version(const std::string& number_or_name);

}  // namespace kernels
