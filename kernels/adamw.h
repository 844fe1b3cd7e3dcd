// kernels/adamw.h: the optimizer step over flat buffers: AdamW, and the two helpers of
// gradient clipping (the sum of squares and the scale).
//
// AdamW, PyTorch's torch.optim.AdamW formula (t is the 1-based step):
//   p -= lr * wd * p                              (decoupled weight decay; wd = 0 for no decay)
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// sum_squares: sum of g^2 in double, in a fixed order (the same bits at any thread count).
// scale: x *= s.
//
// Versions (code in kernels/adamw.cpp; AdamW moves 28 B/element: read p, g, m, v, write p, m, v):
//   v1  plain loop, PyTorch's single-tensor path operation for operation (the bias
//       corrections rounded to float first). The reference: the naive GPT backend.
//   v2  SIMD (simd::Native, sqrt included) over OpenMP blocks; the bias corrections in
//       double, rounded once (so v2 differs from v1 in the last bits of the step size).
//   sum_squares v1  one double sum, elements in order.
//   sum_squares v2  fixed chunks of kSumChunk elements across threads: blocks of 16
//                   registers squared in float lanes, each block's sum added to the chunk's
//                   double, the chunk sums then added in order.
//   scale v1  the plain loop.   scale v2  `omp parallel for simd`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// p, g, m, v (n)
using AdamwFn = void (*)(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                         float beta2, float eps, float weight_decay, int64_t t);
using SumSquaresFn = double (*)(const float* g, int64_t n);
using ScaleFn = void (*)(float* x, float s, int64_t n);

void adamw_update_v1(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                     float eps, float weight_decay, int64_t t);
void adamw_update_v2(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                     float eps, float weight_decay, int64_t t);
double sum_squares_v1(const float* g, int64_t n);
double sum_squares_v2(const float* g, int64_t n);
void scale_v1(float* x, float s, int64_t n);
void scale_v2(float* x, float s, int64_t n);

const std::vector<OpVersion<AdamwFn>>& adamw_versions();
const OpVersion<AdamwFn>& adamw_version(const std::string& number_or_name);
const std::vector<OpVersion<SumSquaresFn>>& sum_squares_versions();
const OpVersion<SumSquaresFn>& sum_squares_version(const std::string& number_or_name);
const std::vector<OpVersion<ScaleFn>>& scale_versions();
const OpVersion<ScaleFn>& scale_version(const std::string& number_or_name);

}  // namespace kernels
