// Reference solution of exercise 10_rnn_step_backward (lesson 05). Try it yourself first:
// exercises/10_rnn_step_backward/rnn_step_backward.cpp.
#include "exercises/10_rnn_step_backward/rnn_step_backward.h"

#include <cstddef>
#include <vector>

namespace ex {

void rnn_step_backward(float* dx, float* dh_prev, float* dWx, float* dWh, float* db,
                       const float* dh, const float* h, const float* x, const float* h_prev,
                       const float* Wx, const float* Wh, int B, int C, int H) {
  // dh, h, h_prev (B,H), x (B,C), Wx (H,C), Wh (H,H) -> dx (B,C) =, dh_prev (B,H) =,
  // dWx (H,C) +=, dWh (H,H) +=, db (H) +=
  using std::ptrdiff_t;
  // dz = dh * (1 - h^2): through tanh, using the saved output
  std::vector<float> dz(static_cast<size_t>(B) * static_cast<size_t>(H));
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < H; ++j) {
      const ptrdiff_t k = static_cast<ptrdiff_t>(b) * H + j;
      dz[static_cast<size_t>(k)] = dh[k] * (1.0f - h[k] * h[k]);
    }
  }
  for (int b = 0; b < B; ++b) {
    const float* dzb = dz.data() + static_cast<ptrdiff_t>(b) * H;  // row b of dz
    if (dx != nullptr) {
      for (int c = 0; c < C; ++c) {  // dx[b][c] = sum_j dz[b][j] Wx[j][c]
        float sum = 0.0f;
        for (int j = 0; j < H; ++j) {
          sum += dzb[j] * Wx[static_cast<ptrdiff_t>(j) * C + c];
        }
        dx[static_cast<ptrdiff_t>(b) * C + c] = sum;
      }
    }
    for (int k = 0; k < H; ++k) {  // dh_prev[b][k] = sum_j dz[b][j] Wh[j][k]
      float sum = 0.0f;
      for (int j = 0; j < H; ++j) {
        sum += dzb[j] * Wh[static_cast<ptrdiff_t>(j) * H + k];
      }
      dh_prev[static_cast<ptrdiff_t>(b) * H + k] = sum;
    }
    for (int j = 0; j < H; ++j) {  // dW[j][.] += dz[b][j] * (its input), summed over rows b
      const float* xb = x + static_cast<ptrdiff_t>(b) * C;
      const float* hb = h_prev + static_cast<ptrdiff_t>(b) * H;
      for (int c = 0; c < C; ++c) {
        dWx[static_cast<ptrdiff_t>(j) * C + c] += dzb[j] * xb[c];
      }
      for (int k = 0; k < H; ++k) {
        dWh[static_cast<ptrdiff_t>(j) * H + k] += dzb[j] * hb[k];
      }
      db[j] += dzb[j];  // the bias touched every row with slope 1
    }
  }
}

}  // namespace ex
