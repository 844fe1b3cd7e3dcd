// kernels/conv.h: 2-D convolution (float, NCHW) as a ladder of versions, forward and backward.
//
// Layout (the same as nn/conv.h, which keeps the templated plain loops and im2col for double):
//   inp    (B, C, H, W)
//   weight (OC, C, KH, KW)
//   bias   (OC), may be nullptr
//   out    (B, OC, OH, OW)     OH = (H + 2 pad - KH) / stride + 1, OW likewise
// Gradient rule (nn/ops.h): dweight and dbias ACCUMULATE (+=), dinp is ASSIGNED; dinp and
// dbias may be nullptr (skipped: the first layer of a CNN needs no gradient for the image).
//
// Epilogue: forward takes `relu`: out = max(0, conv + bias) when true. A ReLU after the
// convolution then costs no extra pass over the (B, OC, OH, OW) tensor; its backward needs
// only out itself (out > 0 exactly where conv + bias > 0).
//
// Versions (code and reasoning in kernels/conv.cpp). Figures: lesson 04's two layers,
// batch 64, docs/benchmarks/cnn-vs-pytorch.md (`lesson04 --part bench`):
//   v1  plain loops: the definition and the reference. One thread.
//   v2  im2col + ONE threaded sgemm for the whole batch (lesson 04's path before issue 19):
//       the (C*KH*KW, B*OH*OW) column matrix is 9x the input and lives in L3/DRAM, the
//       product lands in (OC, B, P) order and is copied to NCHW, the backward reorders dout.
//   v3  per image: im2col into a thread's own (L2-sized) scratch, sgemm_serial (v7 on the
//       calling thread) straight into the image's NCHW output, bias + ReLU while it is
//       still in cache; threads split images, so the team is woken once per layer, not once
//       per product. Backward recomputes
//       im2col per image (cheaper than keeping 9x the input) and sums dweight over FIXED
//       chunks of images, added in chunk order: results independent of the thread count.
//   v4  v3, except where C*KH*KW is small (lesson 04's first layer: C = 1, a K = 9
//       product in which im2col and packing are most of the work): direct convolution,
//       one output row at a time, vectorised over the row (SIMD over width).
//       Measured (docs/benchmarks/cnn-vs-pytorch.md, loaded 2-core VM, batch 64, 1 thread):
//       conv1 forward v3 1.35 ms, v4 11.0 ms: v4's forward is SLOWER (its row accumulator
//       lives on the stack, each of the 9 taps reloads and stores it, and every (o, oh)
//       row re-reads the padded input: no register blocking over output channels); its
//       backward is level with v3 (13.4 vs 13.7 ms with dinp; 3.95 vs 4.70 ms without,
//       per-thread CPU time). conv2 runs v3's code in both.
// conv2d_forward below is v3 and conv2d_backward v4: the fastest validated of each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

struct ConvShape {
  int B = 1, C = 1, H = 1, W = 1;  // input
  int OC = 1, KH = 1, KW = 1;      // filters
  int stride = 1, pad = 0;
  int OH() const { return (H + 2 * pad - KH) / stride + 1; }
  int OW() const { return (W + 2 * pad - KW) / stride + 1; }
  int64_t inp_size() const { return static_cast<int64_t>(B) * C * H * W; }
  int64_t weight_size() const { return static_cast<int64_t>(OC) * C * KH * KW; }
  int64_t out_size() const { return static_cast<int64_t>(B) * OC * OH() * OW(); }
};

using ConvForwardFn = void (*)(float* out, const float* inp, const float* weight, const float* bias,
                               const ConvShape& s, bool relu);
// dout (B, OC, OH, OW), inp and weight as in the forward -> dinp =, dweight +=, dbias +=.
using ConvBackwardFn = void (*)(float* dinp, float* dweight, float* dbias, const float* dout,
                                const float* inp, const float* weight, const ConvShape& s);

void conv2d_forward_v1(float* out, const float* inp, const float* weight, const float* bias,
                       const ConvShape& s, bool relu);
void conv2d_forward_v2(float* out, const float* inp, const float* weight, const float* bias,
                       const ConvShape& s, bool relu);
void conv2d_forward_v3(float* out, const float* inp, const float* weight, const float* bias,
                       const ConvShape& s, bool relu);
void conv2d_forward_v4(float* out, const float* inp, const float* weight, const float* bias,
                       const ConvShape& s, bool relu);
void conv2d_backward_v1(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const ConvShape& s);
void conv2d_backward_v2(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const ConvShape& s);
void conv2d_backward_v3(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const ConvShape& s);
void conv2d_backward_v4(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const ConvShape& s);

// The fastest validated versions: forward v3, backward v4 (see above).
void conv2d_forward(float* out, const float* inp, const float* weight, const float* bias,
                    const ConvShape& s, bool relu);
void conv2d_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, const ConvShape& s);

// Forward and backward of one rung are listed together: a rung is validated and timed as a pair.
struct ConvFns {
  ConvForwardFn forward;
  ConvBackwardFn backward;
};
using ConvVersion = OpVersion<ConvFns>;
const std::vector<ConvVersion>& conv2d_versions();
const ConvVersion& conv2d_version(const std::string& number_or_name);

// ---- the fused forward of a conv block: conv + bias + ReLU + 2x2 max-pool ----------------------
// v3 (conv2d_forward's rung) per image, then that image's 2x2 max-pool while its
// act is still in cache: act (B, OC, OH, OW) = max(0, conv + bias), pool and argmax as
// maxpool2x2_forward(act) gives them, bit for bit (tests/test_kernels_conv.cpp). OH, OW >= 2.
void conv2d_relu_maxpool2x2_forward(float* act, float* pool, int32_t* argmax, const float* inp,
                                    const float* weight, const float* bias, const ConvShape& s);

// ---- 2x2 max-pooling, stride 2 (lesson 04's), NCHW ------------------------------------------
// inp (B, C, H, W) -> out (B, C, H/2, W/2); argmax holds, per output, the index h * W + w of
// the winner in its channel plane (the first of equal maxima, as nn::maxpool2d_forward).
// The backward assigns dinp (B, C, H, W): dout to each winner, 0 elsewhere. A rung of
// nn::maxpool2d_forward/backward (the general K, stride loops, the reference): the window
// is unrolled, and the backward writes each pixel once instead of zeroing then scattering.
void maxpool2x2_forward(float* out, int32_t* argmax, const float* inp, int B, int C, int H, int W);
void maxpool2x2_backward(float* dinp, const float* dout, const int32_t* argmax, int B, int C, int H,
                         int W);

}  // namespace kernels
