// Exercise 10_rnn_step_backward (lesson 05): one step of BPTT for a tanh RNN cell.
//
// Read first: lesson 05's README (lessons/05-rnn/README.md), the part on backpropagation through time;
// rnn_cell_forward in nn/recurrent.cpp is the forward step.
//
// The forward step, for every row b (a sequence of the batch) and hidden unit j:
//     z[b][j] = b[j] + sum_c x[b][c] Wx[j][c] + sum_k h_prev[b][k] Wh[j][k]
//     h[b][j] = tanh(z[b][j])
// It is two linear layers (one on x, one on h_prev) added, then tanh. So the backward is
// tanh's backward, then two linear backwards (exercise 05) that share dz:
//     dz      = dh * (1 - h^2)        tanh'(z) = 1 - tanh(z)^2, from the SAVED output h
//     dx      = dz Wx                 dh_prev = dz Wh
//     dWx    += dz^T x                dWh    += dz^T h_prev          db += sum over b of dz
// dh_prev is what makes it "through time": the caller adds it to the gradient that step
// t-1 gets from the layer above, and calls this function again for step t-1.
//
// Shapes: dh, h, h_prev (B, H), x (B, C), Wx (H, C), Wh (H, H). Row-major: element [r][c]
// of a (rows, cols) matrix is at index r * cols + c.
//
// The gradient rule of nn/ (top of nn/ops.h): dx and dh_prev are activation gradients,
// ASSIGN them (=); dx may be nullptr (no layer below wants it): skip it then. dWx, dWh,
// db are parameter gradients: ACCUMULATE them (+=), they sum over all the steps.
//
// Check your work: `nnlab check` (or `nnlab check --only 10_rnn_step_backward`).
#include "exercises/10_rnn_step_backward/rnn_step_backward.h"

namespace ex {

void rnn_step_backward(float* dx, float* dh_prev, float* dWx, float* dWh, float* db,
                       const float* dh, const float* h, const float* x, const float* h_prev,
                       const float* Wx, const float* Wh, int B, int C, int H) {
  // TODO: the backward above, in its order: first the gradient through tanh (from the
  //       saved output; it is needed by everything after, so keep it somewhere), then the two
  //       linear backwards that share it. Mind which results are assigned, which
  //       accumulated, and which may be absent.
  (void)dx;
  (void)dh_prev;
  (void)dWx;
  (void)dWh;
  (void)db;
  (void)dh;
  (void)h;
  (void)x;
  (void)h_prev;
  (void)Wx;
  (void)Wh;
  (void)B;
  (void)C;
  (void)H;
}

}  // namespace ex
