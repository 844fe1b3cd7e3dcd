// Exercise 10_rnn_step_backward (lesson 05): one step of backpropagation through time
// for a tanh RNN cell. You write the body in rnn_step_backward.cpp; `nnlab check` runs the
// tests in test.cpp.
#pragma once

namespace ex {

// The forward step was (Wx (H, C), Wh (H, H), b (H)):
//     z[b][j] = b[j] + sum_c x[b][c] Wx[j][c] + sum_k h_prev[b][k] Wh[j][k]
//     h[b][j] = tanh(z[b][j])
// Given dh (B, H) = the TOTAL dL/dh of this step (from the layer above and from step t+1)
// and the step's h (B, H), x (B, C), h_prev (B, H):
//     dz[b][j]       = dh[b][j] * (1 - h[b][j]^2)
//     dx[b][c]       = sum_j dz[b][j] Wx[j][c]      (B, C)  assigned; skipped if nullptr
//     dh_prev[b][k]  = sum_j dz[b][j] Wh[j][k]      (B, H)  assigned
//     dWx[j][c]     += sum_b dz[b][j] x[b][c]       (H, C)  accumulated
//     dWh[j][k]     += sum_b dz[b][j] h_prev[b][k]  (H, H)  accumulated
//     db[j]         += sum_b dz[b][j]               (H)     accumulated
void rnn_step_backward(float* dx, float* dh_prev, float* dWx, float* dWh, float* db,
                       const float* dh, const float* h, const float* x, const float* h_prev,
                       const float* Wx, const float* Wh, int B, int C, int H);

}  // namespace ex
