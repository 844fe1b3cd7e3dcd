// kernels/rmsnorm.h: root-mean-square layer normalisation, forward and backward (Zhang &
// Sennrich 2019; the norm of Llama, as Hugging Face's LlamaRMSNorm computes it).
//
//   inp (rows, C), weight (C) -> out (rows, C), rstd (rows)
//   rstd = 1 / sqrt(mean_i x_i^2 + eps),  out_i = (x_i * rstd) * weight_i
// The diff from layernorm (kernels/layernorm.h): no mean is subtracted and there is no bias.
// One statistic instead of two, so one reduction over the row instead of two, and no
// cancellation to fear (a sum of squares has no negative terms: the float sum is accurate to
// ~sqrt(C) ulps whatever the mean of x). eps is an argument: Llama 1 and 2 use 1e-6 and 1e-5
// (HF's LlamaConfig.rms_norm_eps); kRmsnormEps is the default. rstd is an output for the
// backward pass, as layernorm's mean and rstd are.
//
// The backward, per row with xhat = x rstd, g = dout * weight (= dL/dxhat):
//   dinp += rstd (g - xhat mean(g xhat))   ACCUMULATED: the residual stream (layernorm's rule)
//   dweight += dout xhat                   accumulated (a parameter gradient)
// (Layernorm's formula without the mean(g) term: that term is what the mean subtraction
// sends back, and RMSNorm has none.)
//
// Versions (code in kernels/rmsnorm.cpp; bytes per element: read x twice from memory only
// when a row does not fit in cache, so 8 B/element forward, 16 backward (dout, x, dinp read,
// dinp written); figures: 8192 x 768, 1 thread, on the 2-core VM while it was BUSY (load
// ~8, two rounds: noisy, to be re-measured idle), `nnlab bench rmsnorm rmsnorm_backward`):
//   v1  plain loops in F, two passes per row (sum of squares, then scale). The reference:
//       the gradient checks run it in double, the naive backend will run it in float.
//                                                               9.7 / 20.4 ms
//   v2  SIMD rows (simd::Native, 4 accumulators of W lanes: the add latency of 4 cycles
//       hidden behind 4 independent chains), rows split across OpenMP threads. Sums in a
//       different order than v1: within a few ulps of it, validated at 1e-6 + 1e-5 |ref|.
//                                                               3.1 / 12.1 ms
//   backward v1  plain loops in F, rows in order: the reference.      26.8 ms (one run)
//   backward v2  SIMD rows, OpenMP over fixed chunks of kRowChunk rows whose dweight
//                partials are added in chunk order: the same bits at any thread count.
//                                                                     13.8 ms (the same run)
//                (v2's dweight differs from v1's by v1's own rounding: v1 adds N rows in one
//                float chain, off by 2.4e-4 at |dweight| ~ 20 for N = 8192; the bench's
//                tolerance grows with N for that reason)
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// The default eps (Llama 2's rms_norm_eps); every version takes eps as an argument.
inline constexpr float kRmsnormEps = 1e-5f;

// out (rows,C), rstd (rows), inp (rows,C), weight (C); no aliasing.
using RmsnormFn = void (*)(float* out, float* rstd, const float* inp, const float* weight, int rows, int C,
                           float eps);

// F = float (the naive backend) or double (gradient checks).
template <typename F>
void rmsnorm_forward_v1(F* out, F* rstd, const F* inp, const F* weight, int rows, int C, F eps);
void rmsnorm_forward_v2(float* out, float* rstd, const float* inp, const float* weight, int rows, int C, float eps);

// The fastest validated version (v2).
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int rows, int C,
                     float eps = kRmsnormEps);

const std::vector<OpVersion<RmsnormFn>>& rmsnorm_versions();
// By number ("2") or name ("v2", "simd-rows"); throws std::invalid_argument.
const OpVersion<RmsnormFn>& rmsnorm_version(const std::string& number_or_name);

// ---- backward ---------------------------------------------------------------------------
// dout (rows,C), inp (rows,C), weight (C), rstd (rows) from the forward
// -> dinp (rows,C) ACCUMULATED, dweight (C) accumulated.
using RmsnormBackwardFn = void (*)(float* dinp, float* dweight, const float* dout, const float* inp,
                                   const float* weight, const float* rstd, int rows, int C);
template <typename F>
void rmsnorm_backward_v1(F* dinp, F* dweight, const F* dout, const F* inp, const F* weight, const F* rstd, int rows,
                         int C);
void rmsnorm_backward_v2(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                         const float* rstd, int rows, int C);

// The fastest validated version (v2).
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int rows, int C);

const std::vector<OpVersion<RmsnormBackwardFn>>& rmsnorm_backward_versions();
const OpVersion<RmsnormBackwardFn>& rmsnorm_backward_version(const std::string& number_or_name);

}  // namespace kernels
