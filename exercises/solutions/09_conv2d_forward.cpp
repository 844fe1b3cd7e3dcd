// Reference solution of exercise 09_conv2d_forward (lesson 04). Try it yourself first:
// exercises/09_conv2d_forward/conv2d_forward.cpp.
#include "exercises/09_conv2d_forward/conv2d_forward.h"

#include <cstddef>

namespace ex {

void conv2d_forward(float* out, const float* inp, const float* weight, const float* bias, int B,
                    int C, int H, int W, int OC, int KH, int KW, int stride, int pad) {
  // inp (B,C,H,W), weight (OC,C,KH,KW), bias (OC) -> out (B,OC,OH,OW)
  using std::ptrdiff_t;
  const int OH = (H + 2 * pad - KH) / stride + 1;
  const int OW = (W + 2 * pad - KW) / stride + 1;
  for (int b = 0; b < B; ++b) {
    for (int o = 0; o < OC; ++o) {
      for (int oh = 0; oh < OH; ++oh) {
        for (int ow = 0; ow < OW; ++ow) {
          float sum = bias != nullptr ? bias[o] : 0.0f;
          for (int c = 0; c < C; ++c) {
            for (int kh = 0; kh < KH; ++kh) {
              const int ih = oh * stride - pad + kh;
              if (ih < 0 || ih >= H) continue;  // padding row: zeros
              for (int kw = 0; kw < KW; ++kw) {
                const int iw = ow * stride - pad + kw;
                if (iw < 0 || iw >= W) continue;
                sum += inp[((static_cast<ptrdiff_t>(b) * C + c) * H + ih) * W + iw] *
                       weight[((static_cast<ptrdiff_t>(o) * C + c) * KH + kh) * KW + kw];
              }
            }
          }
          out[((static_cast<ptrdiff_t>(b) * OC + o) * OH + oh) * OW + ow] = sum;
        }
      }
    }
  }
}

}  // namespace ex
