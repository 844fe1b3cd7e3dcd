// Reference solution of exercise 11_lstm_cell_forward (lesson 06). Try it yourself first:
// exercises/11_lstm_cell_forward/lstm_cell_forward.cpp.
#include "exercises/11_lstm_cell_forward/lstm_cell_forward.h"

#include <cmath>
#include <cstddef>

namespace ex {

namespace {
float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }
}  // namespace

void lstm_cell_forward(float* h, float* c, float* gates, const float* x, const float* h_prev,
                       const float* c_prev, const float* Wx, const float* Wh, const float* b,
                       int B, int C, int H) {
  // x (B,C), h_prev, c_prev (B,H), Wx (4H,C), Wh (4H,H), b (4H) -> h, c (B,H), gates (B,4H)
  using std::ptrdiff_t;
  const int G = 4 * H;
  for (int row = 0; row < B; ++row) {
    const float* xb = x + static_cast<ptrdiff_t>(row) * C;
    const float* hb = h_prev + static_cast<ptrdiff_t>(row) * H;
    float* zb = gates + static_cast<ptrdiff_t>(row) * G;
    // z = b + x Wx^T + h_prev Wh^T: one linear layer with 4H outputs
    for (int r = 0; r < G; ++r) {
      float z = b[r];
      for (int k = 0; k < C; ++k) {
        z += xb[k] * Wx[static_cast<ptrdiff_t>(r) * C + k];
      }
      for (int k = 0; k < H; ++k) {
        z += hb[k] * Wh[static_cast<ptrdiff_t>(r) * H + k];
      }
      zb[r] = z;
    }
    // the gates, the cell, the output
    for (int j = 0; j < H; ++j) {
      const float i = sigmoid(zb[j]);
      const float f = sigmoid(zb[H + j]);
      const float g = std::tanh(zb[2 * H + j]);
      const float o = sigmoid(zb[3 * H + j]);
      zb[j] = i;
      zb[H + j] = f;
      zb[2 * H + j] = g;
      zb[3 * H + j] = o;
      const ptrdiff_t k = static_cast<ptrdiff_t>(row) * H + j;
      c[k] = f * c_prev[k] + i * g;  // keep a part of the old cell, write a part of the new
      h[k] = o * std::tanh(c[k]);    // show a part of the cell
    }
  }
}

}  // namespace ex
