// nn/recurrent.h: recurrent cells (vanilla RNN, LSTM) as forward/backward op pairs, the
// sequence loops around them (backpropagation through time), and a layer that owns the
// weights and carries the hidden state from one chunk of a stream to the next.
//
// Layout. Sequences are TIME-MAJOR: xs (steps, B, C), hs (steps, B, H); step t of the
// batch is the contiguous (B, C) block at xs + t * B * C. Weights follow nn::Linear:
// Wx (G*H, C) and Wh (G*H, H), out = inp W^T, with G = 1 for the RNN and G = 4 for the LSTM.
//
// The gradient rule of nn/ops.h holds: parameter gradients (dWx, dWh, db) ACCUMULATE,
// activation gradients (dx, dh_prev, dc_prev, dxs, dh0, dc0) are ASSIGNED; a nullptr
// activation gradient is skipped. T = double is what the gradient checker runs; for
// T = float the matmuls go through kernels::sgemm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/optim.h"
#include "nn/rng.h"
#include "nn/tensor.h"

namespace nn {

// ---- vanilla RNN (Elman) -------------------------------------------------------------
//   z_t = x_t Wx^T + h_{t-1} Wh^T + b          Wx (H, C), Wh (H, H), b (H)
//   h_t = tanh(z_t)
// One step: x (B, C), h_prev (B, H) -> h (B, H).
template <typename T>
void rnn_cell_forward(T* h, const T* x, const T* h_prev, const T* Wx, const T* Wh, const T* b,
                      int B, int C, int H);
// dh (B, H) is the TOTAL gradient reaching h_t (from the layer above at t and from step t+1).
//   dz = dh * (1 - h^2);  dx = dz Wx;  dh_prev = dz Wh;  dWx += dz^T x;  dWh += dz^T h_prev;  db += sum_b dz
template <typename T>
void rnn_cell_backward(T* dx, T* dh_prev, T* dWx, T* dWh, T* db, const T* dh, const T* h,
                       const T* x, const T* h_prev, const T* Wx, const T* Wh, int B, int C, int H);

// The sequence: xs (steps, B, C), h0 (B, H) or nullptr for zeros -> hs (steps, B, H).
template <typename T>
void rnn_forward(T* hs, const T* xs, const T* h0, const T* Wx, const T* Wh, const T* b, int steps,
                 int B, int C, int H);
// Backpropagation through time. dhs (steps, B, H) is the gradient from the layer above at
// each step (the direct part only); the loop adds the part that flows back from step t+1.
// dxs (steps, B, C) and dh0 (B, H) assigned (nullptr skips them).
// dh_norms (steps) or nullptr: the L2 norm of the total dL/dh_t at each step (over the
// whole batch): what the exploding/vanishing-gradient plot shows.
template <typename T>
void rnn_backward(T* dxs, T* dh0, T* dWx, T* dWh, T* db, const T* dhs, const T* hs, const T* xs,
                  const T* h0, const T* Wx, const T* Wh, int steps, int B, int C, int H,
                  T* dh_norms = nullptr);

// ---- LSTM (Hochreiter & Schmidhuber 1997, with a forget gate, Gers et al. 2000) ------
//   z_t = x_t Wx^T + h_{t-1} Wh^T + b          Wx (4H, C), Wh (4H, H), b (4H)
//   the 4H columns of z are the gates in the order [ i | f | g | o ]:
//   i = sigmoid(z_i)   input gate        f = sigmoid(z_f)   forget gate
//   g = tanh(z_g)      candidate         o = sigmoid(z_o)   output gate
//   c_t = f * c_{t-1} + i * g            the cell: a sum, so gradients pass through f
//   h_t = o * tanh(c_t)
// One step: x (B, C), h_prev, c_prev (B, H) -> h, c (B, H) and gates (B, 4H): the gate
// ACTIVATIONS [i f g o], saved for backward.
template <typename T>
void lstm_cell_forward(T* h, T* c, T* gates, const T* x, const T* h_prev, const T* c_prev,
                       const T* Wx, const T* Wh, const T* b, int B, int C, int H);
// dh (B, H): total gradient reaching h_t; dc (B, H) or nullptr (= 0): the gradient reaching
// c_t from step t+1. Outputs dx (B, C), dh_prev, dc_prev (B, H) assigned; dWx, dWh, db
// accumulated. c is c_t (the cell after this step), c_prev is c_{t-1}.
template <typename T>
void lstm_cell_backward(T* dx, T* dh_prev, T* dc_prev, T* dWx, T* dWh, T* db, const T* dh,
                        const T* dc, const T* gates, const T* c, const T* c_prev, const T* x,
                        const T* h_prev, const T* Wx, const T* Wh, int B, int C, int H);

// The sequence: xs (steps, B, C), h0, c0 (B, H) or nullptr for zeros -> hs, cs (steps, B, H)
// and gates (steps, B, 4H).
template <typename T>
void lstm_forward(T* hs, T* cs, T* gates, const T* xs, const T* h0, const T* c0, const T* Wx,
                  const T* Wh, const T* b, int steps, int B, int C, int H);
// BPTT for the LSTM; same conventions as rnn_backward. dxs, dh0, dc0 assigned (nullptr skips).
template <typename T>
void lstm_backward(T* dxs, T* dh0, T* dc0, T* dWx, T* dWh, T* db, const T* dhs, const T* hs,
                   const T* cs, const T* gates, const T* xs, const T* h0, const T* c0, const T* Wx,
                   const T* Wh, int steps, int B, int C, int H, T* dh_norms = nullptr);

// ---- the layer ------------------------------------------------------------------------
enum class CellType { RNN, LSTM };
CellType parse_cell(const std::string& name);  // "rnn" | "lstm"; nn::Error otherwise
const char* cell_name(CellType cell);

// One recurrent layer over a stream, trained with truncated BPTT: each forward() starts
// from the state the previous forward() ended in (zeros after reset_state()), and
// backward() stops at the start of the chunk (the carried state is a constant).
//
// Initialisation: Wx, Wh ~ U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's nn.RNN / nn.LSTM rule),
// b = 0, except the LSTM's forget-gate bias = 1 (Jozefowicz et al. 2015: the cell starts
// out remembering).
class Recurrent {
 public:
  Recurrent(std::string name, CellType cell, int input_size, int hidden_size, Rng& rng);

  // xs (steps, B, C) -> hs (steps, B, H). The pointer stays valid until the next forward.
  // xs must stay alive until backward() returns. A batch size different from the carried
  // state's resets the state to zeros.
  const float* forward(const float* xs, int steps, int B);
  // dhs (steps, B, H) -> dxs (steps, B, C) assigned (nullptr skips); parameter gradients
  // accumulate. dh_norms (steps) or nullptr: as in rnn_backward.
  void backward(float* dxs, const float* dhs, float* dh_norms = nullptr);
  // Zeros the carried state (h, and c for the LSTM): at the start of an epoch or a sample.
  void reset_state();

  // The carried state, (B, H) each; c is empty for the RNN.
  const std::vector<float>& h_state() const { return h_state_; }
  const std::vector<float>& c_state() const { return c_state_; }

  std::vector<Param> params();  // "<name>.Wx", "<name>.Wh", "<name>.b"
  int64_t num_params() const;
  CellType cell() const { return cell_; }
  int input_size() const { return C_; }
  int hidden_size() const { return H_; }
  const std::string& name() const { return name_; }

  Tensor Wx, Wh, b;     // (G*H, C), (G*H, H), (G*H)
  Tensor dWx, dWh, db;  // same shapes

 private:
  std::string name_;
  CellType cell_;
  int C_, H_;
  // The last forward's chunk, kept for backward.
  const float* xs_ = nullptr;
  int steps_ = 0, batch_ = 0;
  std::vector<float> h0_, c0_;            // state the chunk started from (B, H)
  std::vector<float> h_state_, c_state_;  // state it ended in (B, H)
  std::vector<float> hs_, cs_, gates_;    // (steps, B, H), (steps, B, H), (steps, B, 4H)
};

}  // namespace nn
