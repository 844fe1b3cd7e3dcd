// nn/recurrent.cpp: the recurrent cells declared in nn/recurrent.h (vanilla RNN, LSTM),
// the sequence loops around them (backpropagation through time) and the Recurrent layer.
//
// Read it top-down: the one matmul helper, the RNN (cell forward, cell backward, sequence
// forward, sequence backward), the LSTM in the same order, then the layer.
//
// THE PERFORMANCE IDEA of the sequence versions. A step computes
//     z_t = x_t Wx^T + h_{t-1} Wh^T + b
// The first product does not depend on any earlier step: the inputs of every step are
// known before the loop starts. So rnn_forward / lstm_forward compute
//     Z = xs Wx^T        (steps*B, C) x (C, G*H)  in ONE big matmul before the time loop,
// and only h_{t-1} Wh^T, a small (B, H) x (H, G*H) product, stays inside the loop: it
// needs h_{t-1}, which the previous step has just produced. That is the part of a
// recurrent network that is inherently sequential. The backward is the mirror image:
// inside the reverse loop only dh_{t-1} = dz_t Wh (which step t-1 needs next) runs; the
// weight gradients and the input gradients, dWx += dZ^T xs, dWh += dZ^T hs_prev (plus
// one small product for h0), dxs = dZ Wx, are each ONE matmul over all steps after the
// loop. One big matmul keeps the tiled kernel busy; `steps` small ones pay packing and
// thread start-up every time (kernels/matmul.h: v6 at small shapes). How much it saves
// depends on C / (C + H), the share of the input product: at steps 64, B 32, C 65, H 256
// (LSTM, 1 thread, on the shared 2-core dev machine while loaded) lstm_forward took 81 ms
// against 88 ms for lstm_cell_forward called step by step (median of 12); the rest is the
// inherently sequential h Wh^T and the gates' exp/tanh.
//
// The gradient rule (nn/ops.h): dWx, dWh, db ACCUMULATE; dx, dh_prev, dc_prev, dxs, dh0, dc0
// are ASSIGNED, and a nullptr activation gradient is skipped.
#include "nn/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <utility>

#include "kernels/matmul.h"
#include "kernels/parallel.h"
#include "kernels/recurrent_cell.h"
#include "nn/check.h"

namespace nn {

using std::ptrdiff_t;

namespace {

// ---- the one matmul -----------------------------------------------------------------
// C (M, N) = op(A) op(B) + beta C, beta = 0 (overwrite; C's old contents are never read,
// so a NaN there does not survive) or beta = 1 (accumulate). op(A) is (M, K): A (M, K) with
// lda, or with ta, A^T where A is (K, M). op(B) is (K, N): B (K, N) with ldb, or with tb,
// B^T where B is (N, K). The same arguments as kernels::sgemm (row-major BLAS), alpha = 1.
// float goes to kernels::sgemm; double (the gradient checks) runs the plain loop.
template <typename T>
void matmul(bool ta, bool tb, int M, int N, int K, const T* A, int lda, const T* Bm, int ldb,
            T beta, T* Cm, int ldc) {
  if constexpr (std::is_same_v<T, float>) {
    using kernels::Trans;
    kernels::sgemm(ta ? Trans::Yes : Trans::No, tb ? Trans::Yes : Trans::No, M, N, K, 1.0f, A, lda,
                   Bm, ldb, beta, Cm, ldc);
  } else {
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        T sum = 0;  // C_ij = sum_k op(A)_ik op(B)_kj
        for (int k = 0; k < K; ++k) {
          // op(A)_ik is A[k][i] when transposed, A[i][k] otherwise; op(B)_kj likewise
          const ptrdiff_t ia = ta ? static_cast<ptrdiff_t>(k) * lda + i  // A (K, M)
                                  : static_cast<ptrdiff_t>(i) * lda + k; // A (M, K)
          const ptrdiff_t ib = tb ? static_cast<ptrdiff_t>(j) * ldb + k  // B (N, K)
                                  : static_cast<ptrdiff_t>(k) * ldb + j; // B (K, N)
          sum += A[ia] * Bm[ib];
        }
        T& c = Cm[static_cast<ptrdiff_t>(i) * ldc + j];
        c = beta == T(0) ? sum : sum + beta * c;
      }
    }
  }
}

// A buffer of the calling thread that lives between calls (kernels::thread_scratch, slots
// 10-13 here so no kernel's slot 0/1 is shared), seen through the .data() the loops use.
// Slot k must be used by at most one live Scratch at a time; zero = true clears it.
template <typename T>
struct Scratch {
  T* p;
  Scratch(int slot, size_t n, bool zero = false) : p(pick(slot, n)) {
    if (zero) std::fill(p, p + n, T(0));
  }
  static T* pick(int slot, size_t n) {
    switch (slot) {
      case 0: return kernels::thread_scratch<T, 10>(n);
      case 1: return kernels::thread_scratch<T, 11>(n);
      case 2: return kernels::thread_scratch<T, 12>(n);
      default: return kernels::thread_scratch<T, 13>(n);
    }
  }
  T* data() const { return p; }
  T& operator[](ptrdiff_t k) const { return p[k]; }
};

// Rows (steps * B) of a time-major buffer as the int the matmul takes.
int rows_of(int steps, int B) {
  const int64_t rows = static_cast<int64_t>(steps) * B;
  NN_CHECK(rows <= std::numeric_limits<int>::max(),
           "steps * B = " << rows << " rows is too many for one matmul: use shorter chunks");
  return static_cast<int>(rows);
}

void check_sizes(const char* op, int B, int C, int H, int steps = 1) {
  NN_CHECK(B >= 1 && C >= 1 && H >= 1 && steps >= 1,
           op << ": sizes must be >= 1, got B = " << B << ", C = " << C << ", H = " << H
              << ", steps = " << steps);
}

// || v ||_2 over n entries, summed in double.
template <typename T>
T l2_norm(const T* v, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(v[i]) * static_cast<double>(v[i]);
  }
  return static_cast<T>(std::sqrt(sum));
}

// db (G) += sum over the rows of dz (rows, G)
template <typename T>
void add_column_sums(T* db, const T* dz, int rows, int G) {
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < G; ++j) {
      db[j] += dz[static_cast<ptrdiff_t>(r) * G + j];
    }
  }
}

// ---- RNN element-wise parts -----------------------------------------------------------
// h (B, H) holds z without the bias; h = tanh(z + b). kernels/recurrent_cell.h: float runs
// the fastest validated rung (v2, SIMD), double (the gradient checks) the plain loops (v1).
template <typename T>
void rnn_pointwise_forward(T* h, const T* b, int B, int H) {
  if constexpr (std::is_same_v<T, float>) {
    kernels::rnn_pointwise_forward_v2(h, b, B, H);
  } else {
    kernels::rnn_pointwise_forward_v1(h, b, B, H);
  }
}

// dz = dh * (1 - h^2): tanh's slope, from the saved output. n = B * H.
template <typename T>
void rnn_pointwise_backward(T* dz, const T* dh, const T* h, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    dz[k] = dh[k] * (T(1) - h[k] * h[k]);
  }
}

// ---- LSTM element-wise parts ----------------------------------------------------------
// The gates, the cell and their backward: kernels/recurrent_cell.h has the math and the
// rungs. float runs the fastest validated rung (v2, SIMD), double (the gradient checks)
// the plain loops (v1).
// gates (B, 4H) holds z without the bias on entry, the activations [i f g o] on return.
// c_prev (B, H) or nullptr (zeros) -> c, h (B, H).
template <typename T>
void lstm_pointwise_forward(T* h, T* c, T* gates, const T* c_prev, const T* b, int B, int H) {
  if constexpr (std::is_same_v<T, float>) {
    kernels::lstm_pointwise_forward_v2(h, c, gates, c_prev, b, B, H);
  } else {
    kernels::lstm_pointwise_forward_v1(h, c, gates, c_prev, b, B, H);
  }
}

// dh (B, H) total gradient at h_t; dc (B, H) or nullptr: the gradient reaching c_t from
// step t+1. -> dz (B, 4H) assigned (the gradient at the gate pre-activations), dc_prev
// (B, H) assigned or skipped. dc and dc_prev may be the same buffer: each element is read
// before it is written.
template <typename T>
void lstm_pointwise_backward(T* dz, T* dc_prev, const T* dh, const T* dc, const T* gates,
                             const T* c, const T* c_prev, int B, int H) {
  if constexpr (std::is_same_v<T, float>) {
    kernels::lstm_pointwise_backward_v2(dz, dc_prev, dh, dc, gates, c, c_prev, B, H);
  } else {
    kernels::lstm_pointwise_backward_v1(dz, dc_prev, dh, dc, gates, c, c_prev, B, H);
  }
}

}  // namespace

// =======================================================================================
// ---- vanilla RNN ----------------------------------------------------------------------
// =======================================================================================

template <typename T>
void rnn_cell_forward(T* h, const T* x, const T* h_prev, const T* Wx, const T* Wh, const T* b,
                      int B, int C, int H) {
  // x (B,C), h_prev (B,H), Wx (H,C), Wh (H,H), b (H) -> h (B,H)
  check_sizes("rnn_cell_forward", B, C, H);
  matmul<T>(false, true, B, H, C, x, C, Wx, C, T(0), h, H);       // h  = x Wx^T
  matmul<T>(false, true, B, H, H, h_prev, H, Wh, H, T(1), h, H);  // h += h_prev Wh^T
  rnn_pointwise_forward(h, b, B, H);                              // h  = tanh(h + b)
}

template <typename T>
void rnn_cell_backward(T* dx, T* dh_prev, T* dWx, T* dWh, T* db, const T* dh, const T* h,
                       const T* x, const T* h_prev, const T* Wx, const T* Wh, int B, int C, int H) {
  // dh, h (B,H), x (B,C), h_prev (B,H) -> dx (B,C) =, dh_prev (B,H) =,
  // dWx (H,C) +=, dWh (H,H) +=, db (H) +=
  check_sizes("rnn_cell_backward", B, C, H);
  std::vector<T> dz(static_cast<size_t>(B) * H);  // (B,H)
  rnn_pointwise_backward(dz.data(), dh, h, static_cast<int64_t>(B) * H);  // dz = dh (1 - h^2)
  if (dx != nullptr) {
    matmul<T>(false, false, B, C, H, dz.data(), H, Wx, C, T(0), dx, C);  // dx = dz Wx
  }
  if (dh_prev != nullptr) {
    matmul<T>(false, false, B, H, H, dz.data(), H, Wh, H, T(0), dh_prev, H);  // dh_prev = dz Wh
  }
  matmul<T>(true, false, H, C, B, dz.data(), H, x, C, T(1), dWx, C);       // dWx += dz^T x
  matmul<T>(true, false, H, H, B, dz.data(), H, h_prev, H, T(1), dWh, H);  // dWh += dz^T h_prev
  add_column_sums(db, dz.data(), B, H);                                    // db  += sum_b dz
}

template <typename T>
void rnn_forward(T* hs, const T* xs, const T* h0, const T* Wx, const T* Wh, const T* b, int steps,
                 int B, int C, int H) {
  // xs (steps,B,C), h0 (B,H) or nullptr -> hs (steps,B,H)
  check_sizes("rnn_forward", B, C, H, steps);
  const ptrdiff_t step_h = static_cast<ptrdiff_t>(B) * H;  // one (B,H) block
  // All steps' input part at once, before the loop (see the top of this file):
  // hs = xs Wx^T, (steps*B, C) x (C, H)
  matmul<T>(false, true, rows_of(steps, B), H, C, xs, C, Wx, C, T(0), hs, H);
  for (int t = 0; t < steps; ++t) {
    T* h = hs + t * step_h;
    const T* h_prev = t == 0 ? h0 : hs + (t - 1) * step_h;
    if (h_prev != nullptr) {  // h0 == nullptr means zeros: nothing to add
      matmul<T>(false, true, B, H, H, h_prev, H, Wh, H, T(1), h, H);  // h += h_{t-1} Wh^T
    }
    rnn_pointwise_forward(h, b, B, H);  // h_t = tanh(x_t Wx^T + h_{t-1} Wh^T + b)
  }
}

template <typename T>
void rnn_backward(T* dxs, T* dh0, T* dWx, T* dWh, T* db, const T* dhs, const T* hs, const T* xs,
                  const T* h0, const T* Wx, const T* Wh, int steps, int B, int C, int H,
                  T* dh_norms) {
  // dhs, hs (steps,B,H), xs (steps,B,C), h0 (B,H) or nullptr -> dxs (steps,B,C) =,
  // dh0 (B,H) =, dWx (H,C) +=, dWh (H,H) +=, db (H) +=, dh_norms (steps) =
  check_sizes("rnn_backward", B, C, H, steps);
  const int rows = rows_of(steps, B);
  const ptrdiff_t step_h = static_cast<ptrdiff_t>(B) * H;
  // Scratch kept by the thread between calls (kernels/parallel.h), not allocated per call:
  // a fresh 2 MB dZ faults in its pages again at every training step.
  Scratch<T> dZ(0, static_cast<size_t>(rows) * H);  // (steps,B,H): dL/dz_t for every step
  Scratch<T> dh(1, static_cast<size_t>(step_h));    // (B,H): total dL/dh_t
  Scratch<T> dh_next(2, static_cast<size_t>(step_h), true);  // (B,H): dL/dh_t via step t+1, zeros

  // The sequential part, from the last step back to the first.
  for (int t = steps - 1; t >= 0; --t) {
    const T* dh_above = dhs + t * step_h;
    for (ptrdiff_t k = 0; k < step_h; ++k) {
      dh[k] = dh_above[k] + dh_next[k];  // h_t feeds the layer above AND step t+1: add both
    }
    if (dh_norms != nullptr) {
      dh_norms[t] = l2_norm(dh.data(), step_h);
    }
    T* dz = dZ.data() + t * step_h;
    rnn_pointwise_backward(dz, dh.data(), hs + t * step_h, step_h);  // dz_t = dh (1 - h_t^2)
    // dh_{t-1} = dz_t Wh: into dh_next for the next iteration, into dh0 at t = 0
    T* dh_prev = t > 0 ? dh_next.data() : dh0;
    if (dh_prev != nullptr) {
      matmul<T>(false, false, B, H, H, dz, H, Wh, H, T(0), dh_prev, H);
    }
  }

  // Everything else, over all steps at once.
  matmul<T>(true, false, H, C, rows, dZ.data(), H, xs, C, T(1), dWx, C);  // dWx += dZ^T xs
  // dWh += sum_t dz_t^T h_{t-1}: steps 1.. pair with hs[0 .. steps-2] (contiguous), step 0
  // with h0 (nothing when h0 is zeros)
  if (steps > 1) {
    matmul<T>(true, false, H, H, rows - B, dZ.data() + step_h, H, hs, H, T(1), dWh, H);
  }
  if (h0 != nullptr) {
    matmul<T>(true, false, H, H, B, dZ.data(), H, h0, H, T(1), dWh, H);
  }
  add_column_sums(db, dZ.data(), rows, H);  // db += sum over steps and rows of dz
  if (dxs != nullptr) {
    matmul<T>(false, false, rows, C, H, dZ.data(), H, Wx, C, T(0), dxs, C);  // dxs = dZ Wx
  }
}

// =======================================================================================
// ---- LSTM -----------------------------------------------------------------------------
// =======================================================================================

template <typename T>
void lstm_cell_forward(T* h, T* c, T* gates, const T* x, const T* h_prev, const T* c_prev,
                       const T* Wx, const T* Wh, const T* b, int B, int C, int H) {
  // x (B,C), h_prev, c_prev (B,H), Wx (4H,C), Wh (4H,H), b (4H) -> h, c (B,H), gates (B,4H)
  check_sizes("lstm_cell_forward", B, C, H);
  const int G = 4 * H;
  matmul<T>(false, true, B, G, C, x, C, Wx, C, T(0), gates, G);       // z  = x Wx^T
  matmul<T>(false, true, B, G, H, h_prev, H, Wh, H, T(1), gates, G);  // z += h_prev Wh^T
  lstm_pointwise_forward(h, c, gates, c_prev, b, B, H);  // gates, c = f c_prev + i g, h = o tanh(c)
}

template <typename T>
void lstm_cell_backward(T* dx, T* dh_prev, T* dc_prev, T* dWx, T* dWh, T* db, const T* dh,
                        const T* dc, const T* gates, const T* c, const T* c_prev, const T* x,
                        const T* h_prev, const T* Wx, const T* Wh, int B, int C, int H) {
  // dh, dc (B,H), gates (B,4H), c, c_prev (B,H), x (B,C), h_prev (B,H) -> dx (B,C) =,
  // dh_prev, dc_prev (B,H) =, dWx (4H,C) +=, dWh (4H,H) +=, db (4H) +=
  check_sizes("lstm_cell_backward", B, C, H);
  const int G = 4 * H;
  std::vector<T> dz(static_cast<size_t>(B) * G);  // (B,4H): dL/dz for the four gates
  lstm_pointwise_backward(dz.data(), dc_prev, dh, dc, gates, c, c_prev, B, H);
  if (dx != nullptr) {
    matmul<T>(false, false, B, C, G, dz.data(), G, Wx, C, T(0), dx, C);  // dx = dz Wx
  }
  if (dh_prev != nullptr) {
    matmul<T>(false, false, B, H, G, dz.data(), G, Wh, H, T(0), dh_prev, H);  // dh_prev = dz Wh
  }
  matmul<T>(true, false, G, C, B, dz.data(), G, x, C, T(1), dWx, C);       // dWx += dz^T x
  matmul<T>(true, false, G, H, B, dz.data(), G, h_prev, H, T(1), dWh, H);  // dWh += dz^T h_prev
  add_column_sums(db, dz.data(), B, G);                                    // db  += sum_b dz
}

template <typename T>
void lstm_forward(T* hs, T* cs, T* gates, const T* xs, const T* h0, const T* c0, const T* Wx,
                  const T* Wh, const T* b, int steps, int B, int C, int H) {
  // xs (steps,B,C), h0, c0 (B,H) or nullptr -> hs, cs (steps,B,H), gates (steps,B,4H)
  check_sizes("lstm_forward", B, C, H, steps);
  const int G = 4 * H;
  const ptrdiff_t step_h = static_cast<ptrdiff_t>(B) * H;
  const ptrdiff_t step_g = static_cast<ptrdiff_t>(B) * G;
  // All steps' input part at once, before the loop (see the top of this file):
  // gates = xs Wx^T, (steps*B, C) x (C, 4H)
  matmul<T>(false, true, rows_of(steps, B), G, C, xs, C, Wx, C, T(0), gates, G);
  for (int t = 0; t < steps; ++t) {
    T* z = gates + t * step_g;
    const T* h_prev = t == 0 ? h0 : hs + (t - 1) * step_h;
    const T* c_prev = t == 0 ? c0 : cs + (t - 1) * step_h;
    if (h_prev != nullptr) {  // h0 == nullptr means zeros: nothing to add
      matmul<T>(false, true, B, G, H, h_prev, H, Wh, H, T(1), z, G);  // z += h_{t-1} Wh^T
    }
    lstm_pointwise_forward(hs + t * step_h, cs + t * step_h, z, c_prev, b, B, H);
  }
}

template <typename T>
void lstm_backward(T* dxs, T* dh0, T* dc0, T* dWx, T* dWh, T* db, const T* dhs, const T* hs,
                   const T* cs, const T* gates, const T* xs, const T* h0, const T* c0, const T* Wx,
                   const T* Wh, int steps, int B, int C, int H, T* dh_norms) {
  // dhs, hs, cs (steps,B,H), gates (steps,B,4H), xs (steps,B,C), h0, c0 (B,H) or nullptr
  // -> dxs (steps,B,C) =, dh0, dc0 (B,H) =, dWx (4H,C) +=, dWh (4H,H) +=, db (4H) +=,
  // dh_norms (steps) =
  check_sizes("lstm_backward", B, C, H, steps);
  const int G = 4 * H;
  const int rows = rows_of(steps, B);
  const ptrdiff_t step_h = static_cast<ptrdiff_t>(B) * H;
  const ptrdiff_t step_g = static_cast<ptrdiff_t>(B) * G;
  // Thread-kept scratch, as in rnn_backward (an 8 MB dZ at the lessons' sizes).
  Scratch<T> dZ(0, static_cast<size_t>(rows) * G);  // (steps,B,4H): dL/dz_t for every step
  Scratch<T> dh(1, static_cast<size_t>(step_h));    // (B,H): total dL/dh_t
  Scratch<T> dh_next(2, static_cast<size_t>(step_h), true);  // (B,H): dL/dh_t via step t+1, zeros
  Scratch<T> dc_next(3, static_cast<size_t>(step_h), true);  // (B,H): dL/dc_t via step t+1, zeros

  // The sequential part, from the last step back to the first.
  for (int t = steps - 1; t >= 0; --t) {
    const T* dh_above = dhs + t * step_h;
    for (ptrdiff_t k = 0; k < step_h; ++k) {
      dh[k] = dh_above[k] + dh_next[k];  // h_t feeds the layer above AND step t+1: add both
    }
    if (dh_norms != nullptr) {
      dh_norms[t] = l2_norm(dh.data(), step_h);
    }
    T* dz = dZ.data() + t * step_g;
    const T* c_prev = t > 0 ? cs + (t - 1) * step_h : c0;
    // dc_{t-1} = dc_total * f_t: back into dc_next (read, then overwritten, element by
    // element), into dc0 at t = 0
    T* dc_prev = t > 0 ? dc_next.data() : dc0;
    lstm_pointwise_backward(dz, dc_prev, dh.data(), dc_next.data(), gates + t * step_g,
                            cs + t * step_h, c_prev, B, H);
    // dh_{t-1} = dz_t Wh: into dh_next for the next iteration, into dh0 at t = 0
    T* dh_prev = t > 0 ? dh_next.data() : dh0;
    if (dh_prev != nullptr) {
      matmul<T>(false, false, B, H, G, dz, G, Wh, H, T(0), dh_prev, H);
    }
  }

  // Everything else, over all steps at once.
  matmul<T>(true, false, G, C, rows, dZ.data(), G, xs, C, T(1), dWx, C);  // dWx += dZ^T xs
  // dWh += sum_t dz_t^T h_{t-1}: steps 1.. pair with hs[0 .. steps-2], step 0 with h0
  if (steps > 1) {
    matmul<T>(true, false, G, H, rows - B, dZ.data() + step_g, G, hs, H, T(1), dWh, H);
  }
  if (h0 != nullptr) {
    matmul<T>(true, false, G, H, B, dZ.data(), G, h0, H, T(1), dWh, H);
  }
  add_column_sums(db, dZ.data(), rows, G);  // db += sum over steps and rows of dz
  if (dxs != nullptr) {
    matmul<T>(false, false, rows, C, G, dZ.data(), G, Wx, C, T(0), dxs, C);  // dxs = dZ Wx
  }
}

// ---- explicit instantiations: float (training) and double (gradient checks) -------------
#define NN_INSTANTIATE_RECURRENT(T)                                                              \
  template void rnn_cell_forward<T>(T*, const T*, const T*, const T*, const T*, const T*, int,   \
                                    int, int);                                                   \
  template void rnn_cell_backward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*, \
                                     const T*, const T*, int, int, int);                         \
  template void rnn_forward<T>(T*, const T*, const T*, const T*, const T*, const T*, int, int,   \
                               int, int);                                                        \
  template void rnn_backward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*,      \
                                const T*, const T*, int, int, int, int, T*);                     \
  template void lstm_cell_forward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,         \
                                     const T*, const T*, int, int, int);                         \
  template void lstm_cell_backward<T>(T*, T*, T*, T*, T*, T*, const T*, const T*, const T*,      \
                                      const T*, const T*, const T*, const T*, const T*, const T*, \
                                      int, int, int);                                            \
  template void lstm_forward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*,    \
                                const T*, int, int, int, int);                                   \
  template void lstm_backward<T>(T*, T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*, \
                                 const T*, const T*, const T*, const T*, const T*, int, int, int, \
                                 int, T*);
NN_INSTANTIATE_RECURRENT(float)
NN_INSTANTIATE_RECURRENT(double)
#undef NN_INSTANTIATE_RECURRENT

// =======================================================================================
// ---- the layer ------------------------------------------------------------------------
// =======================================================================================

CellType parse_cell(const std::string& name) {
  if (name == "rnn") return CellType::RNN;
  if (name == "lstm") return CellType::LSTM;
  NN_CHECK(false, "unknown recurrent cell '" << name << "': use rnn or lstm");
}

const char* cell_name(CellType cell) {
  switch (cell) {
    case CellType::RNN: return "rnn";
    case CellType::LSTM: return "lstm";
  }
  return "?";
}

namespace {
int gates_of(CellType cell) { return cell == CellType::LSTM ? 4 : 1; }
}  // namespace

Recurrent::Recurrent(std::string name, CellType cell, int input_size, int hidden_size, Rng& rng)
    : name_(std::move(name)), cell_(cell), C_(input_size), H_(hidden_size) {
  NN_CHECK(input_size > 0 && hidden_size > 0,
           "recurrent layer " << name_ << " needs positive sizes, got input " << input_size
                              << ", hidden " << hidden_size);
  const int64_t G = gates_of(cell);
  const int64_t GH = G * H_;
  // U(-1/sqrt(H), 1/sqrt(H)) for both matrices: PyTorch's nn.RNN / nn.LSTM rule.
  const auto k = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H_)));
  Wx = Tensor::uniform({GH, C_}, rng, -k, k);
  Wh = Tensor::uniform({GH, H_}, rng, -k, k);
  b = Tensor({GH});
  if (cell == CellType::LSTM) {
    // Forget-gate bias 1 (Jozefowicz et al. 2015): f = sigmoid(1) ~ 0.73 at the start, so
    // the cell keeps most of its content and gradients reach further back. The forget
    // gate is the second block of H in [ i | f | g | o ].
    for (int j = 0; j < H_; ++j) {
      b[H_ + j] = 1.0f;
    }
  }
  dWx = Tensor({GH, C_});
  dWh = Tensor({GH, H_});
  db = Tensor({GH});
}

const float* Recurrent::forward(const float* xs, int steps, int B) {
  NN_CHECK(xs != nullptr, "recurrent layer " << name_ << ": forward got no input");
  NN_CHECK(steps >= 1 && B >= 1, "recurrent layer " << name_
                                     << ": steps and batch must be >= 1, got " << steps << " and "
                                     << B);
  const size_t state = static_cast<size_t>(B) * H_;
  if (B != batch_ || h_state_.size() != state) {
    // A new batch size: the carried rows belong to other sequences. Start from zeros.
    batch_ = B;
    h_state_.assign(state, 0.0f);
    c_state_.assign(cell_ == CellType::LSTM ? state : 0, 0.0f);
  }
  // The chunk starts from the carried state; backward treats it as a constant (truncated
  // BPTT), so it only needs a copy.
  h0_ = h_state_;
  c0_ = c_state_;
  xs_ = xs;
  steps_ = steps;
  const size_t n = static_cast<size_t>(steps) * state;
  hs_.resize(n);
  if (cell_ == CellType::RNN) {
    rnn_forward(hs_.data(), xs, h0_.data(), Wx.data(), Wh.data(), b.data(), steps, B, C_, H_);
  } else {
    cs_.resize(n);
    gates_.resize(4 * n);
    lstm_forward(hs_.data(), cs_.data(), gates_.data(), xs, h0_.data(), c0_.data(), Wx.data(),
                 Wh.data(), b.data(), steps, B, C_, H_);
  }
  // Carry the last step's state to the next chunk.
  const auto last = static_cast<ptrdiff_t>(n - state);
  h_state_.assign(hs_.begin() + last, hs_.end());
  if (cell_ == CellType::LSTM) {
    c_state_.assign(cs_.begin() + last, cs_.end());
  }
  return hs_.data();
}

void Recurrent::backward(float* dxs, const float* dhs, float* dh_norms) {
  NN_CHECK(xs_ != nullptr, "recurrent layer " << name_ << ": backward called before forward");
  NN_CHECK(dhs != nullptr, "recurrent layer " << name_ << ": backward got no gradient");
  // dh0 = nullptr: the gradient stops at the start of the chunk (truncated BPTT).
  if (cell_ == CellType::RNN) {
    rnn_backward(dxs, static_cast<float*>(nullptr), dWx.data(), dWh.data(), db.data(), dhs,
                 hs_.data(), xs_, h0_.data(), Wx.data(), Wh.data(), steps_, batch_, C_, H_,
                 dh_norms);
  } else {
    lstm_backward(dxs, static_cast<float*>(nullptr), static_cast<float*>(nullptr), dWx.data(),
                  dWh.data(), db.data(), dhs, hs_.data(), cs_.data(), gates_.data(), xs_,
                  h0_.data(), c0_.data(), Wx.data(), Wh.data(), steps_, batch_, C_, H_, dh_norms);
  }
}

void Recurrent::reset_state() {
  std::fill(h_state_.begin(), h_state_.end(), 0.0f);
  std::fill(c_state_.begin(), c_state_.end(), 0.0f);
}

std::vector<Param> Recurrent::params() {
  return {{name_ + ".Wx", Wx.shape(), Wx.data(), dWx.data()},
          {name_ + ".Wh", Wh.shape(), Wh.data(), dWh.data()},
          {name_ + ".b", b.shape(), b.data(), db.data()}};
}

int64_t Recurrent::num_params() const { return Wx.numel() + Wh.numel() + b.numel(); }

}  // namespace nn
