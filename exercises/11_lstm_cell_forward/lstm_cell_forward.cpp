// Exercise 11_lstm_cell_forward (lesson 06): one step of an LSTM cell, forward.
//
// Read first: lesson 06's README (lessons/06-lstm/README.md), the part on the LSTM cell;
// lstm_cell_forward in nn/recurrent.cpp is the library's version (with sgemm).
//
// An LSTM step is one linear layer with 4H outputs, then four different squashes and two
// element-wise lines. For every row b (a sequence of the batch) and unit j:
//     z[b][r] = b[r] + sum_c x[b][c] Wx[r][c] + sum_k h_prev[b][k] Wh[r][k]   r in [0, 4H)
//     i = sigmoid(z[b][j])        how much of the candidate to write     (rows 0H..1H)
//     f = sigmoid(z[b][H + j])    how much of the old cell to keep       (rows 1H..2H)
//     g = tanh(z[b][2H + j])      the candidate value, in (-1, 1)        (rows 2H..3H)
//     o = sigmoid(z[b][3H + j])   how much of the cell to show           (rows 3H..4H)
//     c[b][j] = f * c_prev[b][j] + i * g     the cell: a SUM, which is why gradients survive
//     h[b][j] = o * tanh(c[b][j])
// sigmoid(v) = 1 / (1 + exp(-v)). Shapes: x (B, C), h_prev, c_prev (B, H), Wx (4H, C),
// Wh (4H, H), b (4H) -> h, c (B, H), gates (B, 4H). Row-major: element [r][c] of a
// (rows, cols) matrix is at index r * cols + c; so z[b][r] and gates[b][r] are at b * 4H + r.
//
// gates holds the four ACTIVATIONS (i, f, g, o), not z: the backward pass reads them.
// Everything is assigned (=).
//
// Check your work: `nnlab check` (or `nnlab check --only 11_lstm_cell_forward`).
#include "exercises/11_lstm_cell_forward/lstm_cell_forward.h"

namespace ex {

void lstm_cell_forward(float* h, float* c, float* gates, const float* x, const float* h_prev,
                       const float* c_prev, const float* Wx, const float* Wh, const float* b,
                       int B, int C, int H) {
  // TODO: 1. the one linear layer with 4H outputs above, for every row (gates is a fine
  //          place to keep its results for now).
  //       2. per unit: its four gates, each from its own quarter of those outputs with its
  //          own squash; what gates must hold in the end; then the new cell and the new
  //          hidden state.
  (void)h;
  (void)c;
  (void)gates;
  (void)x;
  (void)h_prev;
  (void)c_prev;
  (void)Wx;
  (void)Wh;
  (void)b;
  (void)B;
  (void)C;
  (void)H;
}

}  // namespace ex
