// Exercise 11_lstm_cell_forward (lesson 06): one step of an LSTM cell, forward.
// You write the body in lstm_cell_forward.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

// Wx (4H, C), Wh (4H, H), b (4H): the 4H rows are the gates in the order [ i | f | g | o ].
// For every row b and hidden unit j, with z = x Wx^T + h_prev Wh^T + b (B, 4H):
//     i = sigmoid(z[b][j])          input gate
//     f = sigmoid(z[b][H + j])      forget gate
//     g = tanh(z[b][2H + j])        candidate
//     o = sigmoid(z[b][3H + j])     output gate
//     c[b][j] = f * c_prev[b][j] + i * g
//     h[b][j] = o * tanh(c[b][j])
// Outputs, all assigned: h, c (B, H) and gates (B, 4H) = the ACTIVATIONS [i f g o] (what
// the backward pass needs), in the same layout as z: gates[b * 4H + 0H + j] = i, ... + 3H + j] = o.
void lstm_cell_forward(float* h, float* c, float* gates, const float* x, const float* h_prev,
                       const float* c_prev, const float* Wx, const float* Wh, const float* b,
                       int B, int C, int H);

}  // namespace ex
