// kernels/layernorm.h: row-wise layer normalisation, forward (Ba, Kiros & Hinton 2016).
//
//   inp (rows, C), weight (C), bias (C) -> out (rows, C), mean (rows), rstd (rows)
//   mean = sum_i x_i / C,  var = sum_i (x_i - mean)^2 / C   (the biased variance, as
//   PyTorch and llm.c),  rstd = 1 / sqrt(var + eps),  eps = 1e-5
//   out_i = (x_i - mean) * rstd * weight_i + bias_i
// mean and rstd are outputs too: the backward pass (in nn/, later) needs them, as llm.c's
// layernorm_forward keeps them. rows = B * T for a transformer's (B, T, C) activations.
//
// Statistics in one pass, and the catch. var = E[x^2] - E[x]^2 needs one pass (sum and sum
// of squares together) but subtracts two numbers of size mean^2 to get one of size
// sigma^2: the relative error of the result is about eps * mean^2 / sigma^2 plus the
// rounding of the sums. In float (eps = 6e-8), a row of 1000 + N(0,1) has mean^2 / sigma^2
// = 1e6, and the variance (true: 0.996) came out as 0.23 with C = 768 and as -2.03 with
// C = 4096; in double it matched the two-pass formula to 7 digits. Three ways out:
//   - accumulate in double (eps = 1e-16: 1e6 * 1e-16 = 1e-10, fine up to mean/sigma ~ 1e5):
//     v2, scalar code where double costs nothing extra;
//   - Welford (1962): a running mean and sum of squared deviations, stable in float, but a
//     division and a dependent chain per element;
//   - chunk and merge: split the row into chunks small enough for L1; give each chunk the
//     stable two-pass statistics (its mean, then its squared deviations: both passes read
//     L1, not memory), and merge chunks exactly (Chan, Golub & LeVeque 1979): v3, in
//     float SIMD.
//
// When do the passes cost memory traffic? Only when a row does not fit in cache: a GPT-2
// row (C = 768, 3 KB) is re-read from L1 by every pass. There, v1 -> v2 gains what its
// passes cost in latency (a scalar sum waits ~4 cycles per element for the previous add),
// not in bytes. The bench sweeps rows up to 2 x 16M (rows larger than the L3) too.
//
// Versions (code in kernels/layernorm.cpp; bytes per element: every pass's reads and
// writes, weight/bias/mean/rstd counted once; figures: GB/s at 8192 x 768 (GPT-2 small at
// B = 8, T = 1024), 1 thread, 2-core AMD EPYC, docs/benchmarks/lesson03-fusion.md):
//   v1  three passes: mean, variance (of x - mean), normalise, plain loops with the sums in
//       the element type F. The reference: nn::layernorm_forward and the naive GPT backend
//       run it (float), the gradient checks run it in double. In float its mean drifts by
//       ~sqrt(C) ulps of the row sum when the mean is large (the tests exempt it there).
//                                                               16 B/element   13.8 ms, 7.3 GB/s
//       (the figure was measured when v1 summed in double; the scalar add chain is the same)
//   v2  one pass for the statistics (sum and sum of squares in double), then normalise.
//       Attacks a pass; var = E[x^2] - E[x]^2 in double.         12 B/element   7.7 ms, 9.8 GB/s
//   v3  v2 in SIMD (simd::Native), float lanes, statistics per 4 KB chunk (two passes
//       over L1, merged in double, as above). Attacks the scalar add chain.
//                                                               12 B/element   4.5 ms, 16.9 GB/s
//   v4  the cpu GPT backend's: v1's three passes per row in SIMD (4 float accumulators,
//       the row in L1), rows split across OpenMP threads. Attacks the single core; float
//       sums, so at large means it is as accurate as rounding the mean allows, not better.
//                                                               16 B/element   (not yet recorded)
// layernorm_forward() below is v3; the trainer (gpt/backend_cpu.cpp) runs v4.
//
// The backward (not in lesson 03's table; the GPT trainer's), per row with xhat = (x - mean)
// rstd, g = dout * weight:
//   dinp += rstd (g - mean(g) - xhat mean(g xhat))   ACCUMULATED: the residual stream
//   dweight += dout xhat,  dbias += dout             accumulated (parameter gradients)
//   backward v1  plain loops in F, rows in order: the reference (nn::layernorm_backward).
//   backward v2  SIMD rows, OpenMP over fixed chunks of kRowChunk rows whose dweight/dbias
//                partials are added in chunk order: the same bits at any thread count.
// And the fused residual + layernorm (the GPT block's add, then the next LN):
//   residual_layernorm v1  residual_forward_v1, then layernorm_forward_v1: two ops.
//   residual_layernorm v2  one pass per row: the sum stays in L1 for the statistics (v4's row).
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// PyTorch's default; every version and the backward use it.
inline constexpr double kLayernormEps = 1e-5;

// The reference every version is validated against (tests and bench): the three-pass
// formula in double. `cond` = max over rows of |mean| * rstd, what rounding the mean to
// float costs any float version (validation tolerances scale with it).
struct LayernormReference {
  std::vector<double> out, mean, rstd;
  double cond = 0.0;
};
LayernormReference layernorm_reference(const float* inp, const float* weight, const float* bias, int rows,
                                       int C);

// out (rows,C), mean (rows), rstd (rows), inp (rows,C), weight (C), bias (C); no aliasing.
// bias may be nullptr (no bias, nanoGPT's bias=False) in v1 and v4.
using LayernormFn = void (*)(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                             const float* bias, int rows, int C);

// F = float (the naive backend) or double (gradient checks).
template <typename F>
void layernorm_forward_v1(F* out, F* mean, F* rstd, const F* inp, const F* weight, const F* bias, int rows,
                          int C);
void layernorm_forward_v2(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int rows, int C);
void layernorm_forward_v3(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int rows, int C);
void layernorm_forward_v4(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                          const float* bias, int rows, int C);

// The fastest validated version (v3).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int rows, int C);

using LayernormVersion = OpVersion<LayernormFn>;  // number, name, summary, fn (kernels/versions.h)
// Every version, in order: the bench and the tests iterate over this.
const std::vector<LayernormVersion>& layernorm_versions();
// By number ("2") or name ("v2", "one-pass"); throws std::invalid_argument.
const LayernormVersion& layernorm_version(const std::string& number_or_name);

// ---- backward ---------------------------------------------------------------------------
// dout (rows,C), inp (rows,C), weight (C), mean, rstd (rows) from the forward
// -> dinp (rows,C) ACCUMULATED, dweight (C) and dbias (C, may be nullptr) accumulated.
using LayernormBackwardFn = void (*)(float* dinp, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* mean,
                                     const float* rstd, int rows, int C);
template <typename F>
void layernorm_backward_v1(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight,
                           const F* mean, const F* rstd, int rows, int C);
void layernorm_backward_v2(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                           const float* weight, const float* mean, const float* rstd, int rows, int C);
const std::vector<OpVersion<LayernormBackwardFn>>& layernorm_backward_versions();
const OpVersion<LayernormBackwardFn>& layernorm_backward_version(const std::string& number_or_name);

// ---- residual + layernorm ---------------------------------------------------------------
// residual_out (rows,C) = a + b, then ln_out, mean, rstd = layernorm(residual_out).
using ResidualLayernormFn = void (*)(float* residual_out, float* ln_out, float* mean, float* rstd,
                                     const float* a, const float* b, const float* weight, const float* bias,
                                     int rows, int C);
void residual_layernorm_forward_v1(float* residual_out, float* ln_out, float* mean, float* rstd, const float* a,
                                   const float* b, const float* weight, const float* bias, int rows, int C);
void residual_layernorm_forward_v2(float* residual_out, float* ln_out, float* mean, float* rstd, const float* a,
                                   const float* b, const float* weight, const float* bias, int rows, int C);
const std::vector<OpVersion<ResidualLayernormFn>>& residual_layernorm_versions();
const OpVersion<ResidualLayernormFn>& residual_layernorm_version(const std::string& number_or_name);

}  // namespace kernels
