// kernels/conv.cpp: the convolution ladder of kernels/conv.h (v1 plain loops .. v4 direct
// convolution for few input channels) and lesson 04's 2x2 max-pooling.
//
// What each rung attacks, on lesson 04's CNN (batch 64; conv1 1x28x28 -> 32, conv2 32x14x14
// -> 64, 3x3, pad 1): the profile of the v2 trainer was ~45% GEMM, 18% im2col/col2im, 8%
// max-pooling, the rest element-wise passes (bias, ReLU, reorders) over tensors that no
// longer fit in L2. v3 keeps each image's column matrix in L2 and fuses the element-wise
// work into the pass that produced the data; v4 removes im2col where it looked like pure
// overhead (conv1, 9 taps): its backward is level with v3 or faster, its forward measured
// SLOWER (kernels/conv.h says why), so conv2d_forward is v3 and conv2d_backward v4.
#include "kernels/conv.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "kernels/matmul.h"
#include "kernels/parallel.h"

namespace kernels {

namespace {

void check_shape(const ConvShape& s) {
  const bool ok = s.B > 0 && s.C > 0 && s.H > 0 && s.W > 0 && s.OC > 0 && s.KH > 0 && s.KW > 0 &&
                  s.stride > 0 && s.pad >= 0 && s.KH <= s.H + 2 * s.pad && s.KW <= s.W + 2 * s.pad;
  if (!ok) {
    throw std::invalid_argument("conv2d: bad shape B=" + std::to_string(s.B) + " C=" + std::to_string(s.C) +
                                " H=" + std::to_string(s.H) + " W=" + std::to_string(s.W) +
                                " OC=" + std::to_string(s.OC) + " K=" + std::to_string(s.KH) + "x" +
                                std::to_string(s.KW) + " stride=" + std::to_string(s.stride) +
                                " pad=" + std::to_string(s.pad));
  }
}

// bias + optional ReLU over one image's output (OC, P), in place, while it is in cache.
void epilogue(float* out_b, const float* bias, int OC, int P, bool relu) {
  for (int o = 0; o < OC; ++o) {
    float* row = out_b + static_cast<ptrdiff_t>(o) * P;
    const float bo = bias != nullptr ? bias[o] : 0.0f;
    if (relu) {
#pragma omp simd
      for (int p = 0; p < P; ++p) row[p] = std::max(row[p] + bo, 0.0f);
    } else {
#pragma omp simd
      for (int p = 0; p < P; ++p) row[p] = row[p] + bo;
    }
  }
}

// im2col of ONE image: col (C*KH*KW, P), row r = (c, kh, kw), column p = (oh, ow).
void im2col_image(float* col, const float* img, const ConvShape& s) {
  const int OH = s.OH(), OW = s.OW();
  const ptrdiff_t P = static_cast<ptrdiff_t>(OH) * OW;
  for (int c = 0; c < s.C; ++c) {
    const float* plane = img + static_cast<ptrdiff_t>(c) * s.H * s.W;
    for (int kh = 0; kh < s.KH; ++kh) {
      for (int kw = 0; kw < s.KW; ++kw) {
        float* dst = col + ((static_cast<ptrdiff_t>(c) * s.KH + kh) * s.KW + kw) * P;
        for (int oh = 0; oh < OH; ++oh) {
          const int ih = oh * s.stride - s.pad + kh;
          float* d = dst + static_cast<ptrdiff_t>(oh) * OW;
          if (ih < 0 || ih >= s.H) {
            std::fill(d, d + OW, 0.0f);
            continue;
          }
          const float* src = plane + static_cast<ptrdiff_t>(ih) * s.W;
          if (s.stride == 1) {
            // iw = ow - pad + kw is inside the image for ow in [lo, hi): zeros, one
            // contiguous copy, zeros (no test per pixel; the profile had im2col at 14%).
            const int lo = std::clamp(s.pad - kw, 0, OW);
            const int hi = std::clamp(s.W + s.pad - kw, lo, OW);
            std::fill(d, d + lo, 0.0f);
            std::copy(src + lo - s.pad + kw, src + hi - s.pad + kw, d + lo);
            std::fill(d + hi, d + OW, 0.0f);
            continue;
          }
          for (int ow = 0; ow < OW; ++ow) {
            const int iw = ow * s.stride - s.pad + kw;
            d[ow] = (iw >= 0 && iw < s.W) ? src[iw] : 0.0f;
          }
        }
      }
    }
  }
}

// The adjoint of im2col_image: every column entry is added back to the pixel it was copied
// from. dimg (C, H, W) is ASSIGNED.
void col2im_image(float* dimg, const float* col, const ConvShape& s) {
  const int OH = s.OH(), OW = s.OW();
  const ptrdiff_t P = static_cast<ptrdiff_t>(OH) * OW;
  std::fill(dimg, dimg + static_cast<ptrdiff_t>(s.C) * s.H * s.W, 0.0f);
  for (int c = 0; c < s.C; ++c) {
    float* plane = dimg + static_cast<ptrdiff_t>(c) * s.H * s.W;
    for (int kh = 0; kh < s.KH; ++kh) {
      for (int kw = 0; kw < s.KW; ++kw) {
        const float* src = col + ((static_cast<ptrdiff_t>(c) * s.KH + kh) * s.KW + kw) * P;
        for (int oh = 0; oh < OH; ++oh) {
          const int ih = oh * s.stride - s.pad + kh;
          if (ih < 0 || ih >= s.H) continue;
          float* d = plane + static_cast<ptrdiff_t>(ih) * s.W;
          for (int ow = 0; ow < OW; ++ow) {
            const int iw = ow * s.stride - s.pad + kw;
            if (iw >= 0 && iw < s.W) d[iw] += src[static_cast<ptrdiff_t>(oh) * OW + ow];
          }
        }
      }
    }
  }
}

}  // namespace

// ---- v1: the plain loops (the reference) -----------------------------------------------------
void conv2d_forward_v1(float* out, const float* inp, const float* weight, const float* bias,
                       const ConvShape& s, bool relu) {
  // out[b][o][oh][ow] = bias[o] + sum_{c,kh,kw} inp[b][c][oh*s - pad + kh][ow*s - pad + kw]
  //                                             * weight[o][c][kh][kw]     (outside = zero)
  check_shape(s);
  const int OH = s.OH(), OW = s.OW();
  for (int b = 0; b < s.B; ++b) {
    for (int o = 0; o < s.OC; ++o) {
      for (int oh = 0; oh < OH; ++oh) {
        for (int ow = 0; ow < OW; ++ow) {
          float sum = bias != nullptr ? bias[o] : 0.0f;
          for (int c = 0; c < s.C; ++c) {
            for (int kh = 0; kh < s.KH; ++kh) {
              const int ih = oh * s.stride - s.pad + kh;
              if (ih < 0 || ih >= s.H) continue;
              for (int kw = 0; kw < s.KW; ++kw) {
                const int iw = ow * s.stride - s.pad + kw;
                if (iw < 0 || iw >= s.W) continue;
                sum += inp[((static_cast<ptrdiff_t>(b) * s.C + c) * s.H + ih) * s.W + iw] *
                       weight[((static_cast<ptrdiff_t>(o) * s.C + c) * s.KH + kh) * s.KW + kw];
              }
            }
          }
          out[((static_cast<ptrdiff_t>(b) * s.OC + o) * OH + oh) * OW + ow] =
              relu ? std::max(sum, 0.0f) : sum;
        }
      }
    }
  }
}

void conv2d_backward_v1(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const ConvShape& s) {
  // Each product inp * weight in the forward sends dout to both factors:
  //   dinp[b][c][ih][iw] += dout[b][o][oh][ow] * weight[o][c][kh][kw]
  //   dweight[o][c][kh][kw] += dout[b][o][oh][ow] * inp[b][c][ih][iw];  dbias[o] += dout
  check_shape(s);
  const int OH = s.OH(), OW = s.OW();
  if (dinp != nullptr) std::fill(dinp, dinp + s.inp_size(), 0.0f);
  for (int b = 0; b < s.B; ++b) {
    for (int o = 0; o < s.OC; ++o) {
      for (int oh = 0; oh < OH; ++oh) {
        for (int ow = 0; ow < OW; ++ow) {
          const float g = dout[((static_cast<ptrdiff_t>(b) * s.OC + o) * OH + oh) * OW + ow];
          if (dbias != nullptr) dbias[o] += g;
          for (int c = 0; c < s.C; ++c) {
            for (int kh = 0; kh < s.KH; ++kh) {
              const int ih = oh * s.stride - s.pad + kh;
              if (ih < 0 || ih >= s.H) continue;
              for (int kw = 0; kw < s.KW; ++kw) {
                const int iw = ow * s.stride - s.pad + kw;
                if (iw < 0 || iw >= s.W) continue;
                const ptrdiff_t i = ((static_cast<ptrdiff_t>(b) * s.C + c) * s.H + ih) * s.W + iw;
                const ptrdiff_t w = ((static_cast<ptrdiff_t>(o) * s.C + c) * s.KH + kh) * s.KW + kw;
                dweight[w] += g * inp[i];
                if (dinp != nullptr) dinp[i] += g * weight[w];
              }
            }
          }
        }
      }
    }
  }
}

// ---- v2: im2col of the whole batch + one threaded sgemm ------------------------------------------
// The whole batch's column matrix col (K, B*P), shared by v2's forward and backward: its
// columns are image-major, (b, p), so image b's im2col is the (K, P) block at column b*P
// with row stride B*P. Each thread builds one image's im2col in its own scratch, then
// copies its rows into place.
namespace {
void im2col_batch(float* col, const float* inp, const ConvShape& s) {
  const int P = s.OH() * s.OW();
  const int K = s.C * s.KH * s.KW;
  const ptrdiff_t BP = static_cast<ptrdiff_t>(P) * s.B;
  ConvShape one = s;
  one.B = 1;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < s.B; ++b) {
    float* tmp = thread_scratch<float, 2>(static_cast<size_t>(K) * P);
    im2col_image(tmp, inp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W, one);
    for (int r = 0; r < K; ++r) {
      std::copy(tmp + static_cast<ptrdiff_t>(r) * P, tmp + static_cast<ptrdiff_t>(r + 1) * P,
                col + r * BP + static_cast<ptrdiff_t>(b) * P);
    }
  }
}
}  // namespace

// col (K, B*P), K = C*KH*KW; work (OC, B*P) = weight (OC, K) * col; out_b = work_b + bias.
// Both are the calling thread's scratch: 9x the input and the output again, out of L2.
void conv2d_forward_v2(float* out, const float* inp, const float* weight, const float* bias,
                       const ConvShape& s, bool relu) {
  check_shape(s);
  const int P = s.OH() * s.OW();
  const int K = s.C * s.KH * s.KW;
  const int BP = P * s.B;
  float* col = thread_scratch<float, 0>(static_cast<size_t>(K) * BP);
  float* work = thread_scratch<float, 1>(static_cast<size_t>(s.OC) * BP);
  im2col_batch(col, inp, s);
  sgemm(Trans::No, Trans::No, s.OC, BP, K, 1.0f, weight, K, col, BP, 0.0f, work, BP);
  // work is (OC, B, P); out is (B, OC, P): copy each image's rows back, adding the bias.
#pragma omp parallel for schedule(static)
  for (int b = 0; b < s.B; ++b) {
    float* out_b = out + static_cast<ptrdiff_t>(b) * s.OC * P;
    for (int o = 0; o < s.OC; ++o) {
      std::copy(work + static_cast<ptrdiff_t>(o) * BP + static_cast<ptrdiff_t>(b) * P,
                work + static_cast<ptrdiff_t>(o) * BP + static_cast<ptrdiff_t>(b + 1) * P,
                out_b + static_cast<ptrdiff_t>(o) * P);
    }
    epilogue(out_b, bias, s.OC, P, relu);
  }
}

void conv2d_backward_v2(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const ConvShape& s) {
  //   dweight (OC, K) += dout_t (OC, B*P) * col^T (B*P, K)
  //   dcol (K, B*P)    = weight^T (K, OC) * dout_t (OC, B*P),   then dinp = col2im(dcol)
  check_shape(s);
  const int P = s.OH() * s.OW();
  const int K = s.C * s.KH * s.KW;
  const int BP = P * s.B;
  float* col = thread_scratch<float, 0>(static_cast<size_t>(K) * BP);
  float* work = thread_scratch<float, 1>(static_cast<size_t>(s.OC) * BP);
  ConvShape one = s;
  one.B = 1;
  // The forward's col is not kept (a rung is a pair of stateless functions): rebuild it.
  im2col_batch(col, inp, s);
#pragma omp parallel for schedule(static)
  for (int b = 0; b < s.B; ++b) {
    for (int o = 0; o < s.OC; ++o) {  // dout (B, OC, P) -> dout_t (OC, B*P)
      const float* src = dout + (static_cast<ptrdiff_t>(b) * s.OC + o) * P;
      std::copy(src, src + P, work + static_cast<ptrdiff_t>(o) * BP + static_cast<ptrdiff_t>(b) * P);
    }
  }
  sgemm(Trans::No, Trans::Yes, s.OC, K, BP, 1.0f, work, BP, col, BP, 1.0f, dweight, K);
  if (dbias != nullptr) {
    for (int o = 0; o < s.OC; ++o) {
      float sum = 0.0f;
      for (int j = 0; j < BP; ++j) sum += work[static_cast<ptrdiff_t>(o) * BP + j];
      dbias[o] += sum;
    }
  }
  if (dinp == nullptr) return;
  sgemm(Trans::Yes, Trans::No, K, BP, s.OC, 1.0f, weight, K, work, BP, 0.0f, col, BP);
#pragma omp parallel for schedule(static)
  for (int b = 0; b < s.B; ++b) {
    float* tmp = thread_scratch<float, 2>(static_cast<size_t>(K) * P);
    for (int r = 0; r < K; ++r) {
      std::copy(col + static_cast<ptrdiff_t>(r) * BP + static_cast<ptrdiff_t>(b) * P,
                col + static_cast<ptrdiff_t>(r) * BP + static_cast<ptrdiff_t>(b + 1) * P,
                tmp + static_cast<ptrdiff_t>(r) * P);
    }
    col2im_image(dinp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W, tmp, one);
  }
}

// ---- v3: per image, in cache -----------------------------------------------------------------
namespace {

// Images per partial sum of dweight/dbias: FIXED, so the partials and the order they are
// added in do not depend on the thread count (kernels/parallel.h). 4 images of lesson 04's
// batch of 64 = 16 chunks for 2 threads to share.
constexpr int kImageChunk = 4;

// The per-chunk machinery of v3 and v4's backward: partial[chunk] (OC*K + OC floats) is the
// chunk's dweight then dbias; `per_image(b, partial_w, partial_b, first)` adds image b's share.
template <class PerImage>
void backward_in_chunks(float* dweight, float* dbias, const ConvShape& s, PerImage&& per_image) {
  const int K = s.C * s.KH * s.KW;
  const ptrdiff_t WK = static_cast<ptrdiff_t>(s.OC) * K;
  const int chunks = (s.B + kImageChunk - 1) / kImageChunk;
  float* partial = thread_scratch<float, 3>(static_cast<size_t>(chunks) * (WK + s.OC));
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    float* pw = partial + ch * (WK + s.OC);
    float* pb = pw + WK;
    std::fill(pw, pw + WK + s.OC, 0.0f);
    const int b_end = std::min(s.B, (ch + 1) * kImageChunk);
    for (int b = ch * kImageChunk; b < b_end; ++b) per_image(b, pw, pb);
  }
  // dweight += the partials, in chunk order (each element by one thread).
  const ptrdiff_t total = WK + s.OC;
#pragma omp parallel for schedule(static) if (total * chunks >= kMinParallelElems)
  for (ptrdiff_t i = 0; i < total; ++i) {
    float sum = 0.0f;
    for (int ch = 0; ch < chunks; ++ch) sum += partial[ch * total + i];
    if (i < WK) {
      dweight[i] += sum;
    } else if (dbias != nullptr) {
      dbias[i - WK] += sum;
    }
  }
}

// dbias partial += row sums of one image's dout (OC, P).
void add_row_sums(float* pb, const float* dout_b, int OC, int P) {
  for (int o = 0; o < OC; ++o) {
    const float* row = dout_b + static_cast<ptrdiff_t>(o) * P;
    float sum = 0.0f;
    for (int p = 0; p < P; ++p) sum += row[p];
    pb[o] += sum;
  }
}

}  // namespace

namespace {
// v3's work for ONE image: out_b (OC, P) = weight (OC, K) * im2col(img), + bias, ReLU.
void forward_image_v3(float* out_b, const float* img, const float* weight, const float* bias,
                      const ConvShape& s, bool relu) {
  const int P = s.OH() * s.OW();
  const int K = s.C * s.KH * s.KW;
  ConvShape one = s;
  one.B = 1;
  // lesson 04's conv2: 288 x 196 floats = 226 KB, in L2 from im2col to the sgemm.
  float* col = thread_scratch<float, 2>(static_cast<size_t>(K) * P);
  im2col_image(col, img, one);
  sgemm_serial(Trans::No, Trans::No, s.OC, P, K, 1.0f, weight, K, col, P, 0.0f, out_b, P);
  epilogue(out_b, bias, s.OC, P, relu);
}
}  // namespace

void conv2d_forward_v3(float* out, const float* inp, const float* weight, const float* bias,
                       const ConvShape& s, bool relu) {
  // per image b: col_b (K, P) = im2col(inp_b); out_b (OC, P) = weight (OC, K) * col_b
  check_shape(s);
  const ptrdiff_t P = static_cast<ptrdiff_t>(s.OH()) * s.OW();
#pragma omp parallel for schedule(static)
  for (int b = 0; b < s.B; ++b) {
    forward_image_v3(out + b * s.OC * P, inp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W, weight, bias, s,
                     relu);
  }
}

void conv2d_backward_v3(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const ConvShape& s) {
  // per image b, in chunks of kImageChunk images:
  //   partial_dweight (OC, K) += dout_b (OC, P) * col_b^T (P, K)
  //   dcol_b (K, P) = weight^T (K, OC) * dout_b (OC, P);  dinp_b = col2im(dcol_b)
  check_shape(s);
  const int P = s.OH() * s.OW();
  const int K = s.C * s.KH * s.KW;
  ConvShape one = s;
  one.B = 1;
  backward_in_chunks(dweight, dbias, s, [&](int b, float* pw, float* pb) {
    float* col = thread_scratch<float, 2>(static_cast<size_t>(K) * P);
    const float* dout_b = dout + static_cast<ptrdiff_t>(b) * s.OC * P;
    im2col_image(col, inp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W, one);
    sgemm_serial(Trans::No, Trans::Yes, s.OC, K, P, 1.0f, dout_b, P, col, P, 1.0f, pw, K);
    add_row_sums(pb, dout_b, s.OC, P);
    if (dinp != nullptr) {
      sgemm_serial(Trans::Yes, Trans::No, K, P, s.OC, 1.0f, weight, K, dout_b, P, 0.0f, col, P);
      col2im_image(dinp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W, col, one);
    }
  });
}

// ---- v4: direct convolution where the product is too thin for im2col -----------------------------
namespace {

// Direct convolution pays off while one output pixel's sum is short: C*KH*KW <= 27
// (an RGB 3x3 layer still qualifies); lesson 04's conv1 has 9.
constexpr int kDirectMaxTaps = 27;
// One output row is the vector: rows are computed OWp = OW rounded up to kRowLanes wide
// (28 -> 32: two full 16-lane AVX-512 registers, no scalar remainder loop), the extra
// lanes read zero padding and are never stored. Rows wider than kMaxRow go to v3.
constexpr int kRowLanes = 16;
constexpr int kMaxRow = 256;

int round_up(int n, int m) { return (n + m - 1) / m * m; }

bool use_direct(const ConvShape& s) {
  return s.stride == 1 && s.C * s.KH * s.KW <= kDirectMaxTaps && round_up(s.OW(), kRowLanes) <= kMaxRow;
}

// The padded image's row width: every shifted read of an OWp-wide row stays inside it.
int padded_width(const ConvShape& s) { return round_up(s.OW(), kRowLanes) + s.KW - 1; }

// One image, zero-padded: (C, H + 2 pad, WPp), the image at column pad, so the inner loops
// need no bounds tests.
void pad_image(float* padded, const float* img, const ConvShape& s) {
  const int HP = s.H + 2 * s.pad, WP = padded_width(s);
  std::fill(padded, padded + static_cast<ptrdiff_t>(s.C) * HP * WP, 0.0f);
  for (int c = 0; c < s.C; ++c) {
    for (int h = 0; h < s.H; ++h) {
      const float* src = img + (static_cast<ptrdiff_t>(c) * s.H + h) * s.W;
      std::copy(src, src + s.W, padded + (static_cast<ptrdiff_t>(c) * HP + h + s.pad) * WP + s.pad);
    }
  }
}

}  // namespace

namespace {
// v4's direct convolution of ONE image (use_direct(s) holds).
void forward_image_v4(float* out_b, const float* img, const float* weight, const float* bias,
                      const ConvShape& s, bool relu) {
  // stride 1: out[o][oh][ow] = bias[o] + sum_{c,kh,kw} w[o][c][kh][kw] * pad[c][oh+kh][ow+kw].
  // acc (OWp) is one output row in registers (a local array: the compiler knows nothing
  // aliases it); every tap is one multiply-add of a shifted padded input row.
  const int OH = s.OH(), OW = s.OW();
  const int OWp = round_up(OW, kRowLanes);
  const int HP = s.H + 2 * s.pad, WP = padded_width(s);
  float* padded = thread_scratch<float, 2>(static_cast<size_t>(s.C) * HP * WP);
  pad_image(padded, img, s);
  for (int o = 0; o < s.OC; ++o) {
    const float* w_o = weight + static_cast<ptrdiff_t>(o) * s.C * s.KH * s.KW;
    const float bo = bias != nullptr ? bias[o] : 0.0f;
    for (int oh = 0; oh < OH; ++oh) {
      alignas(64) float acc[kMaxRow];
#pragma omp simd
      for (int ow = 0; ow < OWp; ++ow) acc[ow] = bo;
      for (int c = 0; c < s.C; ++c) {
        for (int kh = 0; kh < s.KH; ++kh) {
          const float* in_row = padded + (static_cast<ptrdiff_t>(c) * HP + oh + kh) * WP;
          for (int kw = 0; kw < s.KW; ++kw) {
            const float wv = w_o[(c * s.KH + kh) * s.KW + kw];
            const float* shifted = in_row + kw;
#pragma omp simd aligned(acc : 64)
            for (int ow = 0; ow < OWp; ++ow) acc[ow] += wv * shifted[ow];
          }
        }
      }
      float* row = out_b + (static_cast<ptrdiff_t>(o) * OH + oh) * OW;
      if (relu) {
        for (int ow = 0; ow < OW; ++ow) row[ow] = std::max(acc[ow], 0.0f);
      } else {
        std::copy(acc, acc + OW, row);
      }
    }
  }
}
}  // namespace

void conv2d_forward_v4(float* out, const float* inp, const float* weight, const float* bias,
                       const ConvShape& s, bool relu) {
  if (!use_direct(s)) {
    conv2d_forward_v3(out, inp, weight, bias, s, relu);
    return;
  }
  check_shape(s);
  const ptrdiff_t P = static_cast<ptrdiff_t>(s.OH()) * s.OW();
#pragma omp parallel for schedule(static)
  for (int b = 0; b < s.B; ++b) {
    forward_image_v4(out + b * s.OC * P, inp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W, weight, bias, s,
                     relu);
  }
}

void conv2d_backward_v4(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const ConvShape& s) {
  if (!use_direct(s)) {
    conv2d_backward_v3(dinp, dweight, dbias, dout, inp, weight, s);
    return;
  }
  // stride 1, per image b of a chunk, per output channel o:
  //   dweight[o][c][kh][kw] += sum_{oh,ow} dout[o][oh][ow] * pad[c][oh+kh][ow+kw]
  //   dpad[c][oh+kh][ow+kw] += dout[o][oh][ow] * w[o][c][kh][kw];  dinp = dpad without the border
  // dout's plane o is first copied into g (OH, OWp), zero beyond OW, so every row
  // operation is OWp wide and the padding lanes add exact zeros.
  check_shape(s);
  const int OH = s.OH(), OW = s.OW();
  const int OWp = round_up(OW, kRowLanes);
  const int HP = s.H + 2 * s.pad, WP = padded_width(s);
  const int taps = s.C * s.KH * s.KW;
  const ptrdiff_t P = static_cast<ptrdiff_t>(OH) * OW;
  const ptrdiff_t plane = static_cast<ptrdiff_t>(s.C) * HP * WP;
  backward_in_chunks(dweight, dbias, s, [&](int b, float* pw, float* pb) {
    float* padded = thread_scratch<float, 2>(2 * static_cast<size_t>(plane) + static_cast<size_t>(OH) * OWp);
    float* dpad = padded + plane;
    float* g = dpad + plane;
    pad_image(padded, inp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W, s);
    if (dinp != nullptr) std::fill(dpad, dpad + plane, 0.0f);
    const float* dout_b = dout + static_cast<ptrdiff_t>(b) * s.OC * P;
    for (int o = 0; o < s.OC; ++o) {
      for (int oh = 0; oh < OH; ++oh) {
        const float* src = dout_b + (static_cast<ptrdiff_t>(o) * OH + oh) * OW;
        std::copy(src, src + OW, g + static_cast<ptrdiff_t>(oh) * OWp);
        std::fill(g + static_cast<ptrdiff_t>(oh) * OWp + OW, g + static_cast<ptrdiff_t>(oh + 1) * OWp, 0.0f);
      }
      float* pw_o = pw + static_cast<ptrdiff_t>(o) * taps;
      const float* w_o = weight + static_cast<ptrdiff_t>(o) * taps;
      for (int c = 0; c < s.C; ++c) {
        for (int kh = 0; kh < s.KH; ++kh) {
          for (int kw = 0; kw < s.KW; ++kw) {
            const int t = (c * s.KH + kh) * s.KW + kw;
            // acc[ow] sums column ow over the rows (a vector of partial sums, no reduction
            // inside the loop), then one pass adds the OWp partials in order.
            alignas(64) float acc[kMaxRow];
#pragma omp simd
            for (int ow = 0; ow < OWp; ++ow) acc[ow] = 0.0f;
            for (int oh = 0; oh < OH; ++oh) {
              const float* g_row = g + static_cast<ptrdiff_t>(oh) * OWp;
              const float* in_row = padded + (static_cast<ptrdiff_t>(c) * HP + oh + kh) * WP + kw;
#pragma omp simd aligned(acc : 64)
              for (int ow = 0; ow < OWp; ++ow) acc[ow] += g_row[ow] * in_row[ow];
            }
            float sum = 0.0f;
            for (int ow = 0; ow < OWp; ++ow) sum += acc[ow];
            pw_o[t] += sum;
            if (dinp != nullptr) {
              const float wv = w_o[t];
              for (int oh = 0; oh < OH; ++oh) {
                const float* g_row = g + static_cast<ptrdiff_t>(oh) * OWp;
                float* d_row = dpad + (static_cast<ptrdiff_t>(c) * HP + oh + kh) * WP + kw;
#pragma omp simd
                for (int ow = 0; ow < OWp; ++ow) d_row[ow] += wv * g_row[ow];
              }
            }
          }
        }
      }
    }
    add_row_sums(pb, dout_b, s.OC, static_cast<int>(P));
    if (dinp != nullptr) {
      float* dimg = dinp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W;
      for (int c = 0; c < s.C; ++c) {
        for (int h = 0; h < s.H; ++h) {
          const float* src = dpad + (static_cast<ptrdiff_t>(c) * HP + h + s.pad) * WP + s.pad;
          std::copy(src, src + s.W, dimg + (static_cast<ptrdiff_t>(c) * s.H + h) * s.W);
        }
      }
    }
  });
}

// ---- the table and the default -------------------------------------------------------------------
const std::vector<ConvVersion>& conv2d_versions() {
  static const std::vector<ConvVersion> versions = {
      {1, "loops", "the definition: 6- and 7-deep plain loops, one thread", {&conv2d_forward_v1, &conv2d_backward_v1}},
      {2, "im2col-batch", "im2col of the whole batch + one threaded sgemm (out of cache)",
       {&conv2d_forward_v2, &conv2d_backward_v2}},
      {3, "im2col-per-image", "threads over images, im2col in L2, sgemm_serial into NCHW, fused bias+ReLU",
       {&conv2d_forward_v3, &conv2d_backward_v3}},
      {4, "direct-thin", "v3, but direct SIMD-over-width convolution where C*KH*KW <= 27",
       {&conv2d_forward_v4, &conv2d_backward_v4}},
  };
  return versions;
}

const ConvVersion& conv2d_version(const std::string& number_or_name) {
  return find_version(conv2d_versions(), number_or_name, "conv2d");
}

void conv2d_forward(float* out, const float* inp, const float* weight, const float* bias,
                    const ConvShape& s, bool relu) {
  // v3, not v4: v4's direct forward measured slower than v3's im2col + sgemm on conv1
  // (docs/benchmarks/cnn-vs-pytorch.md), so the fastest validated forward is v3's.
  conv2d_forward_v3(out, inp, weight, bias, s, relu);
}

void conv2d_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, const ConvShape& s) {
  conv2d_backward_v4(dinp, dweight, dbias, dout, inp, weight, s);
}

// ---- 2x2 max-pooling -------------------------------------------------------------------------
namespace {
// One (H, W) plane -> (H/2, W/2) and its argmax.
void maxpool2x2_plane(float* o_plane, int32_t* a_plane, const float* plane, int H, int W) {
  const int OH = H / 2, OW = W / 2;
  for (int oh = 0; oh < OH; ++oh) {
    const float* r0 = plane + static_cast<ptrdiff_t>(2 * oh) * W;
    const float* r1 = r0 + W;
    for (int ow = 0; ow < OW; ++ow) {
      // The reference's order and comparisons exactly: (0,0), (0,1), (1,0), (1,1), a later
      // pixel wins only if strictly greater (NaN never wins, the first of ties is kept).
      // Selects, not branches: which pixel wins is data, and a mispredicted branch per
      // comparison is expensive.
      const int i0 = 2 * oh * W + 2 * ow;
      int best = i0;
      float m = r0[2 * ow];
      const bool c1 = r0[2 * ow + 1] > m;
      m = c1 ? r0[2 * ow + 1] : m;
      best = c1 ? i0 + 1 : best;
      const bool c2 = r1[2 * ow] > m;
      m = c2 ? r1[2 * ow] : m;
      best = c2 ? i0 + W : best;
      const bool c3 = r1[2 * ow + 1] > m;
      m = c3 ? r1[2 * ow + 1] : m;
      best = c3 ? i0 + W + 1 : best;
      o_plane[oh * OW + ow] = m;
      a_plane[oh * OW + ow] = best;
    }
  }
}
}  // namespace

void maxpool2x2_forward(float* out, int32_t* argmax, const float* inp, int B, int C, int H, int W) {
  if (B <= 0 || C <= 0 || H < 2 || W < 2) throw std::invalid_argument("maxpool2x2: bad shape");
  const ptrdiff_t out_plane = static_cast<ptrdiff_t>(H / 2) * (W / 2);
#pragma omp parallel for schedule(static)
  for (int bc = 0; bc < B * C; ++bc) {
    maxpool2x2_plane(out + bc * out_plane, argmax + bc * out_plane, inp + static_cast<ptrdiff_t>(bc) * H * W, H, W);
  }
}

void conv2d_relu_maxpool2x2_forward(float* act, float* pool, int32_t* argmax, const float* inp,
                                    const float* weight, const float* bias, const ConvShape& s) {
  check_shape(s);
  const int OH = s.OH(), OW = s.OW();
  if (OH < 2 || OW < 2) throw std::invalid_argument("conv2d_relu_maxpool2x2: output smaller than 2x2");
  const ptrdiff_t P = static_cast<ptrdiff_t>(OH) * OW;
  const ptrdiff_t pool_plane = static_cast<ptrdiff_t>(OH / 2) * (OW / 2);
  // One image at a time per thread: its act (lesson 04's conv1: 32 x 28 x 28 = 100 KB) is
  // pooled while it is still in L2, instead of being read back from memory by a second pass.
  // The convolution is v3's (the fastest validated forward, conv2d_forward).
#pragma omp parallel for schedule(static)
  for (int b = 0; b < s.B; ++b) {
    float* act_b = act + b * s.OC * P;
    const float* img = inp + static_cast<ptrdiff_t>(b) * s.C * s.H * s.W;
    forward_image_v3(act_b, img, weight, bias, s, /*relu=*/true);
    for (int o = 0; o < s.OC; ++o) {
      const ptrdiff_t bo = static_cast<ptrdiff_t>(b) * s.OC + o;
      maxpool2x2_plane(pool + bo * pool_plane, argmax + bo * pool_plane, act_b + o * P, OH, OW);
    }
  }
}

void maxpool2x2_backward(float* dinp, const float* dout, const int32_t* argmax, int B, int C, int H,
                         int W) {
  if (B <= 0 || C <= 0 || H < 2 || W < 2) throw std::invalid_argument("maxpool2x2: bad shape");
  const int OH = H / 2, OW = W / 2;
#pragma omp parallel for schedule(static)
  for (int bc = 0; bc < B * C; ++bc) {
    float* plane = dinp + static_cast<ptrdiff_t>(bc) * H * W;
    const float* g = dout + static_cast<ptrdiff_t>(bc) * OH * OW;
    const int32_t* a = argmax + static_cast<ptrdiff_t>(bc) * OH * OW;
    // Windows do not overlap (stride = size): each pixel is written once, the winner with
    // its dout (0 + dout: the same bits as the reference's zero-then-add), the rest with 0;
    // a last odd row or column belongs to no window and gets 0.
    if (H % 2 != 0) std::fill(plane + static_cast<ptrdiff_t>(H - 1) * W, plane + static_cast<ptrdiff_t>(H) * W, 0.0f);
    for (int oh = 0; oh < OH; ++oh) {
      float* r0 = plane + static_cast<ptrdiff_t>(2 * oh) * W;
      float* r1 = r0 + W;
      for (int ow = 0; ow < OW; ++ow) {
        r0[2 * ow] = 0.0f;
        r0[2 * ow + 1] = 0.0f;
        r1[2 * ow] = 0.0f;
        r1[2 * ow + 1] = 0.0f;
        plane[a[oh * OW + ow]] = 0.0f + g[oh * OW + ow];
      }
      if (W % 2 != 0) {
        r0[W - 1] = 0.0f;
        r1[W - 1] = 0.0f;
      }
    }
  }
}

}  // namespace kernels
