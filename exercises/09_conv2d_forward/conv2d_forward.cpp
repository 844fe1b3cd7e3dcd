// Exercise 09_conv2d_forward (lesson 04): a 2-D convolution written as plain loops.
//
// Read first: lessons/04-cnn/README.md, section 2 "The forward: six loops and a sum";
// conv2d_forward_loops in nn/conv.cpp is the library's version (do not copy it: write it).
//
// For every image b, output channel o and output pixel (oh, ow):
//     out[b][o][oh][ow] = bias[o] + sum over c < C, kh < KH, kw < KW of
//                         inp[b][c][ih][iw] * weight[o][c][kh][kw]
//     with ih = oh * stride - pad + kh  and  iw = ow * stride - pad + kw.
// (oh * stride - pad, ow * stride - pad) is the top-left corner of the receptive field;
// (kh, kw) walks the kernel over it. When ih or iw falls outside [0, H) x [0, W) the pixel
// is padding: it is 0, so the term adds nothing (skip it; never read outside inp).
// Output size: OH = (H + 2 * pad - KH) / stride + 1, OW = (W + 2 * pad - KW) / stride + 1.
//
// Layout NCHW, row-major:
//     inp[b][c][h][w]      = inp[((b * C + c) * H + h) * W + w]
//     weight[o][c][kh][kw] = weight[((o * C + c) * KH + kh) * KW + kw]
//     out[b][o][oh][ow]    = out[((b * OC + o) * OH + oh) * OW + ow]
// bias may be nullptr (a convolution without bias): then the sum starts at 0.
//
// Check your work: `nnlab check` (or `nnlab check --only 09_conv2d_forward`).
#include "exercises/09_conv2d_forward/conv2d_forward.h"

namespace ex {

void conv2d_forward(float* out, const float* inp, const float* weight, const float* bias, int B,
                    int C, int H, int W, int OC, int KH, int KW, int stride, int pad) {
  // TODO: every output pixel of every image and output channel is the sum above: its
  //       receptive field over all input channels, times the kernel, plus the bias (when
  //       there is one). Work out the output size first, and leave out the terms that
  //       fall in the padding rather than reading outside inp.
  (void)out;
  (void)inp;
  (void)weight;
  (void)bias;
  (void)B;
  (void)C;
  (void)H;
  (void)W;
  (void)OC;
  (void)KH;
  (void)KW;
  (void)stride;
  (void)pad;
}

}  // namespace ex
