// nn/conv.cpp: the convolution and pooling op pairs declared in nn/conv.h, then the layer.
//
// Read the loops version first: it is the definition. The im2col version computes the same
// sums in a different order (one matrix multiply), so float results agree with the loops
// to rounding, and double results to ~1e-12.
#include "nn/conv.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/conv.h"
#include "kernels/matmul.h"
#include "nn/check.h"

namespace nn {

using std::ptrdiff_t;

void check_conv2d(const Conv2dDims& d) {
  NN_CHECK(d.B > 0 && d.C > 0 && d.H > 0 && d.W > 0 && d.OC > 0,
           "conv2d needs positive sizes, got inp (B=" << d.B << ", C=" << d.C << ", H=" << d.H
                                                      << ", W=" << d.W << ") and OC=" << d.OC);
  NN_CHECK(d.KH > 0 && d.KW > 0 && d.stride > 0 && d.pad >= 0,
           "conv2d needs a positive kernel and stride and pad >= 0, got kernel " << d.KH << "x" << d.KW
               << ", stride " << d.stride << ", pad " << d.pad);
  NN_CHECK(d.KH <= d.H + 2 * d.pad && d.KW <= d.W + 2 * d.pad,
           "conv2d kernel " << d.KH << "x" << d.KW << " is larger than the padded input "
                            << d.H + 2 * d.pad << "x" << d.W + 2 * d.pad << " (" << d.H << "x" << d.W
                            << " + 2*pad " << d.pad << "): use a smaller kernel or more padding");
  NN_CHECK(static_cast<int64_t>(d.B) * d.OH() * d.OW() * std::max(d.OC, d.C * d.KH * d.KW) <
               std::numeric_limits<int>::max(),
           "conv2d batch too large for one im2col matrix (" << d.B << " images of " << d.OH() << "x"
                                                           << d.OW() << " outputs): use a smaller batch");
}

// ---- the plain loops -----------------------------------------------------------------------
template <typename T>
void conv2d_forward_loops(T* out, const T* inp, const T* weight, const T* bias, const Conv2dDims& d) {
  // inp (B,C,H,W), weight (OC,C,KH,KW), bias (OC), out (B,OC,OH,OW)
  check_conv2d(d);
  const int OH = d.OH(), OW = d.OW();
  for (int b = 0; b < d.B; ++b) {
    for (int o = 0; o < d.OC; ++o) {
      for (int oh = 0; oh < OH; ++oh) {
        for (int ow = 0; ow < OW; ++ow) {
          // out[b][o][oh][ow] = bias[o] + sum_{c,kh,kw} inp[b][c][ih][iw] * weight[o][c][kh][kw]
          // with ih = oh*stride - pad + kh: the receptive field's top-left corner plus the
          // offset inside the kernel. Pixels outside the image are the padding's zeros.
          T sum = bias != nullptr ? bias[o] : T(0);
          for (int c = 0; c < d.C; ++c) {
            for (int kh = 0; kh < d.KH; ++kh) {
              const int ih = oh * d.stride - d.pad + kh;
              if (ih < 0 || ih >= d.H) continue;  // a row of zeros: adds nothing
              for (int kw = 0; kw < d.KW; ++kw) {
                const int iw = ow * d.stride - d.pad + kw;
                if (iw < 0 || iw >= d.W) continue;
                const T x = inp[((static_cast<ptrdiff_t>(b) * d.C + c) * d.H + ih) * d.W + iw];
                const T w = weight[((static_cast<ptrdiff_t>(o) * d.C + c) * d.KH + kh) * d.KW + kw];
                sum += x * w;
              }
            }
          }
          out[((static_cast<ptrdiff_t>(b) * d.OC + o) * OH + oh) * OW + ow] = sum;
        }
      }
    }
  }
}

template <typename T>
void conv2d_backward_loops(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                           const T* weight, const Conv2dDims& d) {
  // dout (B,OC,OH,OW), inp (B,C,H,W), weight (OC,C,KH,KW)
  //   -> dinp (B,C,H,W) =, dweight (OC,C,KH,KW) +=, dbias (OC) +=
  check_conv2d(d);
  const int OH = d.OH(), OW = d.OW();
  // dinp is assigned: start from zero, then every output adds its share below (one input
  // pixel sits in up to KH*KW receptive fields, so it collects that many terms).
  if (dinp != nullptr) {
    for (int64_t i = 0; i < d.inp_size(); ++i) dinp[i] = T(0);
  }
  // The forward again, walked in the same order; each product x * w in it sent the
  // output's gradient g back along two edges:
  //   d out / d w = x  ->  dweight[o][c][kh][kw] += g * inp[b][c][ih][iw]   (a correlation
  //                        of the input with dout)
  //   d out / d x = w  ->  dinp[b][c][ih][iw]    += g * weight[o][c][kh][kw] (a full
  //                        convolution of dout with the flipped kernel)
  //   d out / d bias = 1 -> dbias[o] += g
  for (int b = 0; b < d.B; ++b) {
    for (int o = 0; o < d.OC; ++o) {
      for (int oh = 0; oh < OH; ++oh) {
        for (int ow = 0; ow < OW; ++ow) {
          const T g = dout[((static_cast<ptrdiff_t>(b) * d.OC + o) * OH + oh) * OW + ow];
          if (dbias != nullptr) dbias[o] += g;
          for (int c = 0; c < d.C; ++c) {
            for (int kh = 0; kh < d.KH; ++kh) {
              const int ih = oh * d.stride - d.pad + kh;
              if (ih < 0 || ih >= d.H) continue;  // padding: no input, no gradient
              for (int kw = 0; kw < d.KW; ++kw) {
                const int iw = ow * d.stride - d.pad + kw;
                if (iw < 0 || iw >= d.W) continue;
                const ptrdiff_t xi = ((static_cast<ptrdiff_t>(b) * d.C + c) * d.H + ih) * d.W + iw;
                const ptrdiff_t wi = ((static_cast<ptrdiff_t>(o) * d.C + c) * d.KH + kh) * d.KW + kw;
                dweight[wi] += g * inp[xi];
                if (dinp != nullptr) dinp[xi] += g * weight[wi];
              }
            }
          }
        }
      }
    }
  }
}

// ---- im2col / col2im ---------------------------------------------------------------------------
template <typename T>
void im2col(T* col, const T* inp, const Conv2dDims& d) {
  // inp (B,C,H,W) -> col (C*KH*KW, B*OH*OW)
  check_conv2d(d);
  const int OH = d.OH(), OW = d.OW();
  const int R = d.C * d.KH * d.KW;                         // rows: one per weight of a filter
  const ptrdiff_t P = static_cast<ptrdiff_t>(OH) * OW;     // output pixels per image
  const ptrdiff_t BP = P * d.B;                            // columns
  // Row r = (c, kh, kw) holds, for every output pixel, the input pixel that weight
  // [.][c][kh][kw] multiplies there. Rows and images are independent: split them over threads.
#pragma omp parallel for collapse(2) schedule(static)
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < d.B; ++b) {
      const int c = r / (d.KH * d.KW);
      const int kh = (r / d.KW) % d.KH;
      const int kw = r % d.KW;
      const T* plane = inp + (static_cast<ptrdiff_t>(b) * d.C + c) * d.H * d.W;
      T* dst = col + r * BP + b * P;
      for (int oh = 0; oh < OH; ++oh) {
        const int ih = oh * d.stride - d.pad + kh;
        for (int ow = 0; ow < OW; ++ow) {
          const int iw = ow * d.stride - d.pad + kw;
          const bool inside = ih >= 0 && ih < d.H && iw >= 0 && iw < d.W;
          dst[static_cast<ptrdiff_t>(oh) * OW + ow] =
              inside ? plane[static_cast<ptrdiff_t>(ih) * d.W + iw] : T(0);
        }
      }
    }
  }
}

namespace {

// col2im for the one image b: its columns of col, added back into its C planes of dinp.
template <typename T>
void col2im_image(T* dinp, const T* col, const Conv2dDims& d, int b) {
  const int OH = d.OH(), OW = d.OW();
  const ptrdiff_t P = static_cast<ptrdiff_t>(OH) * OW;
  const ptrdiff_t BP = P * d.B;
  for (int c = 0; c < d.C; ++c) {
    T* plane = dinp + (static_cast<ptrdiff_t>(b) * d.C + c) * d.H * d.W;
    for (int i = 0; i < d.H * d.W; ++i) plane[i] = T(0);
    for (int kh = 0; kh < d.KH; ++kh) {
      for (int kw = 0; kw < d.KW; ++kw) {
        const ptrdiff_t r = (static_cast<ptrdiff_t>(c) * d.KH + kh) * d.KW + kw;
        const T* src = col + r * BP + b * P;
        for (int oh = 0; oh < OH; ++oh) {
          const int ih = oh * d.stride - d.pad + kh;
          if (ih < 0 || ih >= d.H) continue;
          for (int ow = 0; ow < OW; ++ow) {
            const int iw = ow * d.stride - d.pad + kw;
            if (iw < 0 || iw >= d.W) continue;
            plane[static_cast<ptrdiff_t>(ih) * d.W + iw] += src[static_cast<ptrdiff_t>(oh) * OW + ow];
          }
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void col2im(T* dinp, const T* col, const Conv2dDims& d) {
  // col (C*KH*KW, B*OH*OW) -> dinp (B,C,H,W), assigned
  check_conv2d(d);
  // im2col copied x[ih][iw] into every column whose receptive field covers it; the adjoint
  // adds all those entries back: dinp[b][c][ih][iw] = sum over the copies of dcol.
  // One image per iteration: no two threads write the same pixel.
#pragma omp parallel for schedule(static)
  for (int b = 0; b < d.B; ++b) col2im_image(dinp, col, d, b);
}

// ---- the matrix multiply under im2col ---------------------------------------------------------
namespace {

// C (M,N) = op(A) (M,K) * op(B) (K,N) + beta C, BLAS row-major conventions (kernels/matmul.h).
// float: the lesson-03 sgemm. `threaded` picks kernels::sgemm (v7, rows of C split over the
// OpenMP threads) for one big product; inside a loop that is already split over threads by
// image, sgemm_serial (the same rung on the calling thread). double: plain loops.
template <typename T>
void matmul(bool ta, bool tb, int M, int N, int K, const T* A, int lda, const T* B, int ldb,
            T beta, T* C, int ldc, bool threaded) {
  if constexpr (std::is_same_v<T, float>) {
    const kernels::Trans a = ta ? kernels::Trans::Yes : kernels::Trans::No;
    const kernels::Trans b = tb ? kernels::Trans::Yes : kernels::Trans::No;
    if (threaded) {
      kernels::sgemm(a, b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    } else {
      kernels::sgemm_serial(a, b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    }
  } else {
    (void)threaded;
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        T sum = 0;  // C[i][j] = sum_k opA[i][k] * opB[k][j]
        for (int k = 0; k < K; ++k) {
          const T a = ta ? A[static_cast<ptrdiff_t>(k) * lda + i] : A[static_cast<ptrdiff_t>(i) * lda + k];
          const T b = tb ? B[static_cast<ptrdiff_t>(j) * ldb + k] : B[static_cast<ptrdiff_t>(k) * ldb + j];
          sum += a * b;
        }
        T& c = C[static_cast<ptrdiff_t>(i) * ldc + j];
        c = beta == T(0) ? sum : beta * c + sum;
      }
    }
  }
}

}  // namespace

template <typename T>
void conv2d_forward_im2col(T* out, const T* inp, const T* weight, const T* bias, T* col, T* work,
                           const Conv2dDims& d) {
  // inp (B,C,H,W), weight (OC, K = C*KH*KW), bias (OC), col (K, B*P), work (OC, B*P)
  //   -> out (B,OC,P), P = OH*OW
  check_conv2d(d);
  const int P = d.OH() * d.OW();
  const int K = d.C * d.KH * d.KW;
  const int BP = P * d.B;
  im2col(col, inp, d);
  // ONE matmul for the whole batch: work (OC, B*P) = weight (OC, K) * col (K, B*P). The
  // weight matrix is the filters laid flat, one per row; column j of col is the receptive
  // field of output pixel j; their dot product is the loops' inner sum. One big product
  // keeps the matmul's packed panels busy (per image, it is only 64 x 196 x 288 here).
  matmul<T>(false, false, d.OC, BP, K, weight, K, col, BP, T(0), work, BP, /*threaded=*/true);
  // work is (OC, B, P); out is (B, OC, P): copy each image's rows back, adding the bias.
#pragma omp parallel for schedule(static)
  for (int b = 0; b < d.B; ++b) {
    for (int o = 0; o < d.OC; ++o) {
      const T* src = work + static_cast<ptrdiff_t>(o) * BP + static_cast<ptrdiff_t>(b) * P;
      T* dst = out + (static_cast<ptrdiff_t>(b) * d.OC + o) * P;
      const T bo = bias != nullptr ? bias[o] : T(0);
      for (int p = 0; p < P; ++p) dst[p] = src[p] + bo;
    }
  }
}

template <typename T>
void conv2d_backward_im2col(T* dinp, T* dweight, T* dbias, const T* dout, const T* weight, T* col,
                            T* work, const Conv2dDims& d) {
  // dout (B,OC,P), weight (OC,K), col (K, B*P) = im2col(inp), work (OC, B*P), K = C*KH*KW
  //   -> dweight (OC,K) +=, dbias (OC) +=, dinp (B,C,H,W) =; col is overwritten with dcol
  check_conv2d(d);
  const int P = d.OH() * d.OW();
  const int K = d.C * d.KH * d.KW;
  const int BP = P * d.B;
  // Reorder dout (B, OC, P) to work = dout_t (OC, B*P), the column order of col.
#pragma omp parallel for schedule(static)
  for (int o = 0; o < d.OC; ++o) {
    for (int b = 0; b < d.B; ++b) {
      const T* src = dout + (static_cast<ptrdiff_t>(b) * d.OC + o) * P;
      T* dst = work + static_cast<ptrdiff_t>(o) * BP + static_cast<ptrdiff_t>(b) * P;
      for (int p = 0; p < P; ++p) dst[p] = src[p];
    }
  }
  // dweight (OC, K) += dout_t (OC, B*P) * col^T (B*P, K): for each weight, the sum over the
  // batch and every output pixel of dout times the input pixel that weight saw there.
  // beta = 1: parameter gradients accumulate.
  matmul<T>(false, true, d.OC, K, BP, work, BP, col, BP, T(1), dweight, K, /*threaded=*/true);
  if (dbias != nullptr) {  // dbias[o] += sum over the batch and every pixel of dout
    for (int o = 0; o < d.OC; ++o) {
      T sum = 0;
      for (int j = 0; j < BP; ++j) sum += work[static_cast<ptrdiff_t>(o) * BP + j];
      dbias[o] += sum;
    }
  }
  if (dinp == nullptr) return;
  // dcol (K, B*P) = weight^T (K, OC) * dout_t (OC, B*P), written over col (no longer
  // needed), then col2im adds each entry back to the pixel it came from.
  matmul<T>(true, false, K, BP, d.OC, weight, K, work, BP, T(0), col, BP, /*threaded=*/true);
  col2im(dinp, col, d);
}

// ---- max-pooling -----------------------------------------------------------------------------
template <typename T>
void maxpool2d_forward(T* out, int32_t* argmax, const T* inp, int B, int C, int H, int W, int K,
                       int stride) {
  // inp (B,C,H,W) -> out (B,C,OH,OW), argmax (B,C,OH,OW)
  NN_CHECK(B > 0 && C > 0 && H > 0 && W > 0 && K > 0 && stride > 0,
           "maxpool2d needs positive sizes, got B=" << B << " C=" << C << " H=" << H << " W=" << W
                                                    << " K=" << K << " stride=" << stride);
  NN_CHECK(K <= H && K <= W, "maxpool2d window " << K << "x" << K << " is larger than the input "
                                                 << H << "x" << W);
  const int OH = (H - K) / stride + 1, OW = (W - K) / stride + 1;
#pragma omp parallel for schedule(static)
  for (int bc = 0; bc < B * C; ++bc) {  // one (image, channel) plane at a time
    const T* plane = inp + static_cast<ptrdiff_t>(bc) * H * W;
    for (int oh = 0; oh < OH; ++oh) {
      for (int ow = 0; ow < OW; ++ow) {
        // Start from the window's first pixel (not from a "very negative" constant, which
        // a large negative input could beat) and keep the first of equal maxima.
        int best = (oh * stride) * W + ow * stride;
        for (int kh = 0; kh < K; ++kh) {
          for (int kw = 0; kw < K; ++kw) {
            const int i = (oh * stride + kh) * W + (ow * stride + kw);
            best = plane[i] > plane[best] ? i : best;
          }
        }
        const ptrdiff_t o = (static_cast<ptrdiff_t>(bc) * OH + oh) * OW + ow;
        out[o] = plane[best];
        argmax[o] = best;
      }
    }
  }
}

template <typename T>
void maxpool2d_backward(T* dinp, const T* dout, const int32_t* argmax, int B, int C, int H, int W,
                        int K, int stride) {
  // dout (B,C,OH,OW), argmax (B,C,OH,OW) -> dinp (B,C,H,W), assigned
  NN_CHECK(B > 0 && C > 0 && K > 0 && stride > 0 && K <= H && K <= W,
           "maxpool2d_backward: bad sizes B=" << B << " C=" << C << " H=" << H << " W=" << W
                                              << " K=" << K << " stride=" << stride);
  const int OH = (H - K) / stride + 1, OW = (W - K) / stride + 1;
#pragma omp parallel for schedule(static)
  for (int bc = 0; bc < B * C; ++bc) {
    T* plane = dinp + static_cast<ptrdiff_t>(bc) * H * W;
    for (int i = 0; i < H * W; ++i) plane[i] = T(0);
    // out = max of the window = the winner itself, so d out / d winner = 1 and 0 for the
    // rest: route each output's gradient to the pixel that won.
    for (int j = 0; j < OH * OW; ++j) {
      const ptrdiff_t o = static_cast<ptrdiff_t>(bc) * OH * OW + j;
      plane[argmax[o]] += dout[o];
    }
  }
}

// ---- the layer -----------------------------------------------------------------------------------
Conv2d::Conv2d(std::string layer_name, int in, int out, int kernel_size, int stride_, int pad_,
               Rng& rng)
    : name(std::move(layer_name)), in_channels(in), out_channels(out), kernel(kernel_size),
      stride(stride_), pad(pad_), weight({out, in, kernel_size, kernel_size}), bias({out}),
      dweight({out, in, kernel_size, kernel_size}), dbias({out}) {
  NN_CHECK(in > 0 && out > 0 && kernel_size > 0 && stride_ > 0 && pad_ >= 0,
           "conv layer " << name << " needs positive channels, kernel and stride and pad >= 0, got "
                         << in << " -> " << out << ", kernel " << kernel_size << ", stride "
                         << stride_ << ", pad " << pad_);
  const auto a = static_cast<float>(std::sqrt(6.0 / (static_cast<double>(in) * kernel_size * kernel_size)));
  weight = Tensor::uniform({out, in, kernel_size, kernel_size}, rng, -a, a);
}

Conv2dDims Conv2d::dims(int B, int H, int W) const {
  return {B, in_channels, H, W, out_channels, kernel, kernel, stride, pad};
}

namespace {
kernels::ConvShape to_kernels(const Conv2dDims& d) {
  return {d.B, d.C, d.H, d.W, d.OC, d.KH, d.KW, d.stride, d.pad};
}
}  // namespace

void Conv2d::forward(float* out, const float* inp, int B, int H, int W, bool relu) {
  const Conv2dDims d = dims(B, H, W);
  check_conv2d(d);
  kernels::conv2d_forward(out, inp, weight.data(), bias.data(), to_kernels(d), relu);
  input_ = inp;
  last_ = d;
  have_forward_ = true;
}

void Conv2d::forward_relu_maxpool2x2(float* act, float* pool, int32_t* argmax, const float* inp, int B,
                                     int H, int W) {
  const Conv2dDims d = dims(B, H, W);
  check_conv2d(d);
  NN_CHECK(d.OH() >= 2 && d.OW() >= 2, "conv layer " << name << ": a " << d.OH() << "x" << d.OW()
                                                     << " output is too small for a 2x2 max-pool");
  kernels::conv2d_relu_maxpool2x2_forward(act, pool, argmax, inp, weight.data(), bias.data(), to_kernels(d));
  input_ = inp;
  last_ = d;
  have_forward_ = true;
}

void Conv2d::backward(float* dinp, const float* dout, int B, int H, int W) {
  const Conv2dDims d = dims(B, H, W);
  NN_CHECK(have_forward_ && last_.B == B && last_.H == H && last_.W == W,
           "conv layer " << name << ": backward for a batch of " << B << "x" << H << "x" << W
                         << " without a forward of the same batch just before");
  kernels::conv2d_backward(dinp, dweight.data(), dbias.data(), dout, input_, weight.data(),
                           to_kernels(d));
  have_forward_ = false;  // one backward per forward, as the layers of nn/layers.h
}

std::vector<Param> Conv2d::params() {
  return {{name + ".weight", weight.shape(), weight.data(), dweight.data()},
          {name + ".bias", bias.shape(), bias.data(), dbias.data()}};
}

// ---- explicit instantiations: float (training) and double (gradient checks) -----------------
#define NN_INSTANTIATE_CONV(T)                                                                      \
  template void conv2d_forward_loops<T>(T*, const T*, const T*, const T*, const Conv2dDims&);       \
  template void conv2d_backward_loops<T>(T*, T*, T*, const T*, const T*, const T*,                  \
                                         const Conv2dDims&);                                        \
  template void im2col<T>(T*, const T*, const Conv2dDims&);                                         \
  template void col2im<T>(T*, const T*, const Conv2dDims&);                                         \
  template void conv2d_forward_im2col<T>(T*, const T*, const T*, const T*, T*, T*,                  \
                                         const Conv2dDims&);                                        \
  template void conv2d_backward_im2col<T>(T*, T*, T*, const T*, const T*, T*, T*,                   \
                                          const Conv2dDims&);                                       \
  template void maxpool2d_forward<T>(T*, int32_t*, const T*, int, int, int, int, int, int);         \
  template void maxpool2d_backward<T>(T*, const T*, const int32_t*, int, int, int, int, int, int);
NN_INSTANTIATE_CONV(float)
NN_INSTANTIATE_CONV(double)
#undef NN_INSTANTIATE_CONV

}  // namespace nn
