// nn/conv.h: 2-D convolution and max-pooling as op pairs, and the Conv2d layer.
//
// Layout: NCHW, batch first, row-major:
//   inp    (B, C, H, W)        element [b][c][h][w] at ((b * C + c) * H + h) * W + w
//   weight (OC, C, KH, KW)     one KH x KW filter per (output channel, input channel)
//   bias   (OC)
//   out    (B, OC, OH, OW)     OH = (H + 2 pad - KH) / stride + 1, OW likewise
//
// Two implementations of the same op, kept side by side on purpose (lesson 04):
//   conv2d_forward_loops / conv2d_backward_loops    the plain 6- and 7-deep loops: the
//       definition, the version a student steps through, and the reference;
//   conv2d_forward_im2col / conv2d_backward_im2col  unfold every receptive field into a
//       column (im2col), then ONE matrix multiply per image does all the work; for float
//       the multiply is kernels::sgemm (the lesson-03 matmul), for double plain loops.
// Tests check that both agree, in float and double, and that both backwards match finite
// differences (tests/test_conv.cpp).
//
// The gradient rule of nn/ops.h holds: dweight and dbias ACCUMULATE (+=), dinp is ASSIGNED.
//
// Flatten needs no op: an NCHW activation (B, C, H, W) is already, byte for byte, the
// matrix (B, C*H*W) a linear layer reads. "Flatten" is only a change of the shape we say.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/optim.h"
#include "nn/rng.h"
#include "nn/tensor.h"

namespace nn {

// The sizes of one convolution, named once.
struct Conv2dDims {
  int B = 1;         // images in the batch
  int C = 1;         // input channels
  int H = 1;         // input height
  int W = 1;         // input width
  int OC = 1;        // output channels (= number of filters)
  int KH = 1;        // kernel height
  int KW = 1;        // kernel width
  int stride = 1;    // step between two receptive fields
  int pad = 0;       // zeros added on every side of the input
  int OH() const { return (H + 2 * pad - KH) / stride + 1; }
  int OW() const { return (W + 2 * pad - KW) / stride + 1; }
  int64_t inp_size() const { return static_cast<int64_t>(B) * C * H * W; }
  int64_t weight_size() const { return static_cast<int64_t>(OC) * C * KH * KW; }
  int64_t out_size() const { return static_cast<int64_t>(B) * OC * OH() * OW(); }
  // im2col's matrix: (C*KH*KW, B*OH*OW), one column per output pixel of every image.
  int64_t col_size() const { return static_cast<int64_t>(C) * KH * KW * B * OH() * OW(); }
};
// Throws nn::Error unless every size is positive, pad >= 0, and the kernel fits inside the
// padded input (KH <= H + 2 pad, KW <= W + 2 pad). Every conv op below calls it.
void check_conv2d(const Conv2dDims& d);

// ---- the plain loops -----------------------------------------------------------------------
// out[b][o][oh][ow] = bias[o] + sum_{c,kh,kw} inp[b][c][oh*s - pad + kh][ow*s - pad + kw]
//                                             * weight[o][c][kh][kw]     (outside = zero)
// bias may be nullptr.
template <typename T>
void conv2d_forward_loops(T* out, const T* inp, const T* weight, const T* bias, const Conv2dDims& d);
// dout (B,OC,OH,OW) -> dinp (B,C,H,W) assigned (skipped if nullptr), dweight (OC,C,KH,KW)
// and dbias (OC, skipped if nullptr) accumulated.
template <typename T>
void conv2d_backward_loops(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                           const T* weight, const Conv2dDims& d);

// ---- im2col and its adjoint ------------------------------------------------------------------
// col (C*KH*KW, B*OH*OW): row r = (c, kh, kw), column j = (b, oh, ow):
//   col[r][j] = inp[b][c][oh*s - pad + kh][ow*s - pad + kw], or 0 in the padding.
template <typename T>
void im2col(T* col, const T* inp, const Conv2dDims& d);
// The adjoint (transpose) of im2col: every col entry is added back to the input pixel it
// was copied from. dinp is ASSIGNED (zeroed first): dinp = col2im(dcol).
template <typename T>
void col2im(T* dinp, const T* col, const Conv2dDims& d);

// ---- im2col + matmul -------------------------------------------------------------------------
// col: scratch of d.col_size() elements; on return it holds im2col(inp), which
// conv2d_backward_im2col needs: keep it between forward and backward.
// work: scratch of d.out_size() elements (the product in (OC, B*OH*OW) order).
//   work (OC, B*P) = weight (OC, C*KH*KW) * col (C*KH*KW, B*P);  out_b = work_b + bias
// P = OH*OW: one matmul for the whole batch.
template <typename T>
void conv2d_forward_im2col(T* out, const T* inp, const T* weight, const T* bias, T* col, T* work,
                           const Conv2dDims& d);
// col: im2col(inp) as the forward left it; it is OVERWRITTEN (reused for dcol).
// work: scratch of d.out_size() elements (dout reordered to dout_t (OC, B*P)).
//   dweight (OC, CKK) += dout_t (OC, B*P) * col^T (B*P, CKK)
//   dcol (CKK, B*P)    = weight^T (CKK, OC) * dout_t (OC, B*P),   then dinp = col2im(dcol)
template <typename T>
void conv2d_backward_im2col(T* dinp, T* dweight, T* dbias, const T* dout, const T* weight, T* col,
                            T* work, const Conv2dDims& d);

// ---- max-pooling -----------------------------------------------------------------------------
// inp (B, C, H, W) -> out (B, C, OH, OW), OH = (H - K) / stride + 1 (no padding; rows and
// columns left over at the bottom/right are dropped, as in PyTorch). argmax (B, C, OH, OW)
// saves, for each output, the index h * W + w of the winning input in its channel plane:
// the backward needs nothing else.
//   out[b][c][oh][ow] = max_{kh,kw < K} inp[b][c][oh*stride + kh][ow*stride + kw]
template <typename T>
void maxpool2d_forward(T* out, int32_t* argmax, const T* inp, int B, int C, int H, int W, int K,
                       int stride);
// The max passes its gradient to the winner only: dinp[argmax] += dout, every other input
// gets 0. dinp (B, C, H, W) is ASSIGNED (zeroed first; overlapping windows add).
template <typename T>
void maxpool2d_backward(T* dinp, const T* dout, const int32_t* argmax, int B, int C, int H, int W,
                        int K, int stride);

// ---- the layer -----------------------------------------------------------------------------
// A convolution that owns its weight, bias and their gradients. Its float forward and
// backward are kernels::conv2d_forward/backward (kernels/conv.h): the fastest validated
// rung of the convolution ladder, the one `lesson04 --part bench` validates and times.
struct Conv2d {
  std::string name;
  int in_channels = 0;
  int out_channels = 0;
  int kernel = 3;
  int stride = 1;
  int pad = 0;
  Tensor weight;   // (OC, C, K, K)
  Tensor bias;     // (OC)
  Tensor dweight;  // (OC, C, K, K)
  Tensor dbias;    // (OC)

  // He initialisation for a ReLU after it: U(-a, a), a = sqrt(6 / fan_in), fan_in = C*K*K
  // (each output sums C*K*K products, exactly as a linear layer with that many inputs).
  Conv2d(std::string layer_name, int in, int out, int kernel_size, int stride_, int pad_, Rng& rng);
  Conv2dDims dims(int B, int H, int W) const;
  // inp (B, C, H, W) -> out (B, OC, OH, OW); relu = true fuses out = max(0, out) into the
  // same pass (its backward then needs out itself: out > 0 exactly where the sum was).
  // inp must stay alive until backward: the backward recomputes from it what it needs.
  void forward(float* out, const float* inp, int B, int H, int W, bool relu = false);
  // The conv block of lesson 04 in one pass per image (kernels::conv2d_relu_maxpool2x2_forward):
  // act (B, OC, OH, OW) = max(0, conv + bias), pool (B, OC, OH/2, OW/2) and its argmax, the
  // image pooled while its act is in cache. The backward is backward() after the pool's and
  // the ReLU's backwards, as for forward(..., relu = true) + kernels::maxpool2x2_forward.
  void forward_relu_maxpool2x2(float* act, float* pool, int32_t* argmax, const float* inp, int B, int H,
                               int W);
  // dout (B, OC, OH, OW) -> dinp (assigned, skipped if nullptr), dweight/dbias accumulated.
  // Needs the forward of the same batch just before. dout is the gradient of the conv's
  // sum (before a fused ReLU): apply relu_backward first.
  void backward(float* dinp, const float* dout, int B, int H, int W);
  std::vector<Param> params();

 private:
  const float* input_ = nullptr;  // inp of the last forward
  Conv2dDims last_{};             // dims of the last forward: backward checks they match
  bool have_forward_ = false;
};

}  // namespace nn
