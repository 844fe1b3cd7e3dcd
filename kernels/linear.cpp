// kernels/linear.cpp: the linear layer in loops and on the sgemm, and linear + GELU
// (kernels/linear.h).
#include "kernels/linear.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/bias_gelu.h"
#include "kernels/gelu.h"
#include "kernels/matmul.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kernels {

using std::ptrdiff_t;

// ---- v1: plain loops ------------------------------------------------------------------------
template <typename F>
void linear_forward_v1(F* out, const F* inp, const F* weight, const F* bias, int N, int C, int OC) {
  // inp (N,C), weight (OC,C), bias (OC) or nullptr -> out (N,OC)
  for (int n = 0; n < N; ++n) {
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    for (int o = 0; o < OC; ++o) {
      const F* w = weight + static_cast<ptrdiff_t>(o) * C;  // row o of W: output o's weights
      F sum = bias != nullptr ? bias[o] : F(0);             // y_o = b_o + sum_c x_c w_oc
      for (int c = 0; c < C; ++c) {
        sum += x[c] * w[c];
      }
      out[static_cast<ptrdiff_t>(n) * OC + o] = sum;
    }
  }
}
template void linear_forward_v1<float>(float*, const float*, const float*, const float*, int, int, int);
template void linear_forward_v1<double>(double*, const double*, const double*, const double*, int, int, int);

template <typename F>
void linear_backward_v1(F* dinp, F* dweight, F* dbias, const F* dout, const F* inp, const F* weight, int N, int C,
                        int OC) {
  // dout (N,OC), inp (N,C), weight (OC,C) -> dinp (N,C) =, dweight (OC,C) +=, dbias (OC) +=
  for (int n = 0; n < N; ++n) {
    const F* dy = dout + static_cast<ptrdiff_t>(n) * OC;
    const F* x = inp + static_cast<ptrdiff_t>(n) * C;
    if (dinp != nullptr) {
      F* dx = dinp + static_cast<ptrdiff_t>(n) * C;
      for (int c = 0; c < C; ++c) {  // dL/dx_c = sum_o dL/dy_o * w_oc
        F sum = 0;
        for (int o = 0; o < OC; ++o) {
          sum += dy[o] * weight[static_cast<ptrdiff_t>(o) * C + c];
        }
        dx[c] = sum;
      }
    }
    if (dweight == nullptr) continue;  // a frozen weight (LoRA, gpt/lora.h): its gradient skipped
    for (int o = 0; o < OC; ++o) {  // dL/dw_oc += dL/dy_o * x_c
      F* dw = dweight + static_cast<ptrdiff_t>(o) * C;
      for (int c = 0; c < C; ++c) {
        dw[c] += dy[o] * x[c];
      }
    }
  }
  if (dbias != nullptr) {  // dL/db_o += sum_n dL/dy_no
    for (int n = 0; n < N; ++n) {
      for (int o = 0; o < OC; ++o) {
        dbias[o] += dout[static_cast<ptrdiff_t>(n) * OC + o];
      }
    }
  }
}
template void linear_backward_v1<float>(float*, float*, float*, const float*, const float*, const float*, int, int,
                                        int);
template void linear_backward_v1<double>(double*, double*, double*, const double*, const double*, const double*,
                                         int, int, int);

// ---- v2: the sgemm ----------------------------------------------------------------------------
namespace {

using V = simd::Native;
constexpr int W = V::lanes;

// dst (cols) += column sums of src (rows, cols): split by blocks of columns, each column
// summed in row order by one thread (the same order for every team size).
void column_sums_add(float* dst, const float* src, int rows, int cols) {
  constexpr int kCols = 4 * W;  // one block: 4 registers of column sums
  const int nblocks = (cols + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (nblocks > 1 && static_cast<int64_t>(rows) * cols >= kMinParallelElems)
  for (int blk = 0; blk < nblocks; ++blk) {
    const int c0 = blk * kCols, c1 = std::min(cols, c0 + kCols);
    if (c1 - c0 == kCols) {
      V::reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
      for (int r = 0; r < rows; ++r) {
        const float* row = src + static_cast<ptrdiff_t>(r) * cols + c0;
        for (int u = 0; u < 4; ++u) acc[u] = V::add(acc[u], V::load(row + u * W));
      }
      for (int u = 0; u < 4; ++u) V::store(dst + c0 + u * W, V::add(V::load(dst + c0 + u * W), acc[u]));
    } else {
      float acc[kCols] = {};
      for (int r = 0; r < rows; ++r) {
        const float* row = src + static_cast<ptrdiff_t>(r) * cols;
        for (int c = c0; c < c1; ++c) acc[c - c0] += row[c];
      }
      for (int c = c0; c < c1; ++c) dst[c] += acc[c - c0];
    }
  }
}

}  // namespace

void linear_forward_v2(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                       int OC) {
  // out (N,OC) = inp (N,C) weight^T (OC,C) + bias (OC): the bias is added in the sgemm's
  // write-back (sgemm_bias), so no pass of its own over out. (Before: out filled with the
  // bias, then the sgemm with beta = 1 over it; the same bits, a write and a read more.)
  if (bias != nullptr) {
    sgemm_bias(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, bias, out, OC);
  } else {
    sgemm(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC);
  }
}

void linear_backward_v2(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, int N, int C, int OC) {
  // dout (N,OC), inp (N,C), weight (OC,C)
  //   dinp (N,C)     = dout (N,OC) weight (OC,C)       assigned (beta 0)
  //   dweight (OC,C) += dout^T (OC,N) inp (N,C)        accumulated (beta 1)
  //   dbias (OC)     += column sums of dout
#ifdef _OPENMP
  // On two threads, the two products (the same FLOPs each) run side by side, one per
  // thread, each a single-thread sgemm: no barrier between k blocks, no shared packing.
  // Measured on the recording machine: faster than both products split across the two
  // threads one after the other. Each element is computed by the same micro-kernel
  // sequence either way, so the result is bit-identical to the threaded path.
  if (dinp != nullptr && dweight != nullptr && omp_get_max_threads() == 2 && !omp_in_parallel() &&
      static_cast<double>(N) * C * OC > 64.0 * 64.0 * 64.0) {
    // dbias goes with dinp: that product reads dout too (still in this core's cache), and the
    // dweight one (tn, K = N) is the slower of the two at most of the GPT's shapes.
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
      {
        sgemm_serial(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
        if (dbias != nullptr) column_sums_add(dbias, dout, N, OC);
      }
#pragma omp section
      sgemm_serial(Trans::Yes, Trans::No, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    }
    return;
  }
#endif
  if (dinp != nullptr) {
    sgemm(Trans::No, Trans::No, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
  }
  // dweight nullptr: a frozen weight (LoRA, gpt/lora.h), its product skipped, not discarded
  if (dweight != nullptr) sgemm(Trans::Yes, Trans::No, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias != nullptr) column_sums_add(dbias, dout, N, OC);
}

// ---- linear + GELU ----------------------------------------------------------------------------
void linear_gelu_forward_v1(float* pre, float* out, const float* inp, const float* weight, const float* bias,
                            int N, int C, int OC) {
  linear_forward_v1(pre, inp, weight, bias, N, C, OC);
  gelu_forward_v1(out, pre, static_cast<int64_t>(N) * OC);
}

void linear_gelu_forward_v2(float* pre, float* out, const float* inp, const float* weight, const float* bias,
                            int N, int C, int OC) {
  // pre = inp weight^T + bias (the bias in the sgemm's write-back, sgemm_bias), then
  // out = gelu(pre) in one pass that only reads pre
  if (bias != nullptr) {
    sgemm_bias(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, bias, pre, OC);
  } else {
    sgemm(Trans::No, Trans::Yes, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, pre, OC);
  }
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(N) * OC >= kMinParallelElems)
  for (int n = 0; n < N; ++n) {
    const float* pr = pre + static_cast<ptrdiff_t>(n) * OC;
    float* o = out + static_cast<ptrdiff_t>(n) * OC;
    int c = 0;
    for (; c + W <= OC; c += W) V::store(o + c, gelu_tanh<V>(V::load(pr + c)));
    for (; c < OC; ++c) o[c] = gelu_tanhf(pr[c]);
  }
}

const std::vector<OpVersion<LinearFn>>& linear_versions() {
  static const std::vector<OpVersion<LinearFn>> versions = {
      {1, "loops", "one dot product per output: the reference", &linear_forward_v1<float>},
      {2, "sgemm", "bias written first, kernels::sgemm adds onto it", &linear_forward_v2},
  };
  return versions;
}
const OpVersion<LinearFn>& linear_version(const std::string& number_or_name) {
  return find_version(linear_versions(), number_or_name, "linear");
}

const std::vector<OpVersion<LinearBackwardFn>>& linear_backward_versions() {
  static const std::vector<OpVersion<LinearBackwardFn>> versions = {
      {1, "loops", "plain loops: the reference", &linear_backward_v1<float>},
      {2, "sgemm", "two sgemms (side by side on two threads), dbias by column blocks", &linear_backward_v2},
  };
  return versions;
}
const OpVersion<LinearBackwardFn>& linear_backward_version(const std::string& number_or_name) {
  return find_version(linear_backward_versions(), number_or_name, "linear_backward");
}

const std::vector<OpVersion<LinearGeluFn>>& linear_gelu_versions() {
  static const std::vector<OpVersion<LinearGeluFn>> versions = {
      {1, "two-ops", "linear_forward v1, then gelu_forward v1", &linear_gelu_forward_v1},
      {2, "sgemm-epilogue", "the sgemm, then bias + GELU in one pass per row", &linear_gelu_forward_v2},
  };
  return versions;
}
const OpVersion<LinearGeluFn>& linear_gelu_version(const std::string& number_or_name) {
  return find_version(linear_gelu_versions(), number_or_name, "linear_gelu");
}

}  // namespace kernels
