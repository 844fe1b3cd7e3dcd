// Exercise 09_conv2d_forward (lesson 04): a 2-D convolution as plain loops.
// You write the body in conv2d_forward.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// inp (B, C, H, W), weight (OC, C, KH, KW), bias (OC) or nullptr -> out (B, OC, OH, OW),
// OH = (H + 2*pad - KH) / stride + 1, OW = (W + 2*pad - KW) / stride + 1. Row-major NCHW:
// inp[b][c][h][w] is inp[((b * C + c) * H + h) * W + w]. Every out element is ASSIGNED.
//   out[b][o][oh][ow] = bias[o] + sum_{c, kh, kw} inp[b][c][oh*stride - pad + kh][ow*stride - pad + kw]
//                                                * weight[o][c][kh][kw]
// where an input position outside the image (the padding) counts as 0.
void conv2d_forward(float* out, const float* inp, const float* weight, const float* bias, int B,
                    int C, int H, int W, int OC, int KH, int KW, int stride, int pad);

}  // namespace ex
