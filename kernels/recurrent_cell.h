// kernels/recurrent_cell.h: the element-wise part of one step of a recurrent cell (lessons
// 05 and 06), forward and backward: everything of a step except its two matmuls.
//
// nn/recurrent.cpp computes z_t = x_t Wx^T + h_{t-1} Wh^T with kernels::sgemm and then calls
// these on z_t, (B, 4H) for the LSTM and (B, H) for the RNN:
//   LSTM forward   [i f g o] = [sig(z_i + b_i), sig(z_f + b_f), tanh(z_g + b_g), sig(z_o + b_o)]
//                  c = f c_prev + i g,  h = o tanh(c)          (gates overwritten by i f g o)
//   LSTM backward  dc_total = dc + dh o (1 - tanh(c)^2);  dc_prev = dc_total f   (ASSIGNED)
//                  dz = [dc_total g i (1-i), dc_total c_prev f (1-f), dc_total i (1-g^2),
//                        dh tanh(c) o (1-o)]                                    (ASSIGNED)
//   RNN forward    h = tanh(z + b)                             (z overwritten by h)
// c_prev == nullptr and dc == nullptr mean zeros; dc_prev == nullptr skips it. dc_prev may
// be the same buffer as dc (BPTT reads dc_{t} and writes dc_{t-1} into one (B,H) buffer):
// every element is read before it is written, at the same index.
//
// Versions (code in kernels/recurrent_cell.cpp; per element of (B,H) the LSTM forward reads
// 4 gates + c_prev and writes 4 gates + c + h, ~56 B; the work is 5 exp and 5 divisions):
//   v1  plain loops, the cell code lessons 05/06 started with: sigmoid and tanh through
//       std::exp (tanh as 2 / (1 + exp(-2x)) - 1 for float, std::tanh for double). The
//       reference (in F: the gradient checks run it in double).
//   v2  SIMD through poly_exp (kernels/elementwise.h) with the same formulas; OpenMP over
//       rows only from kMinParallelElems elements (kernels/parallel.h), so the lessons'
//       (32, 256) step runs on the calling thread. Attacks libm's scalar expf: perf put
//       expf + the LSTM loop at ~23% of a lesson 06 step (1 thread, 2-core AMD EPYC).
// The trainers (nn::lstm_forward / lstm_backward / rnn_forward) call v2 for float, v1 for
// double; tests/test_recurrent.cpp validates every rung against v1 at odd sizes.
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// ---- LSTM ------------------------------------------------------------------------------
// gates (B,4H): z without bias in, [i f g o] out; c_prev (B,H) or nullptr; b (4H)
// -> h, c (B,H)
template <typename F>
void lstm_pointwise_forward_v1(F* h, F* c, F* gates, const F* c_prev, const F* b, int B, int H);
void lstm_pointwise_forward_v2(float* h, float* c, float* gates, const float* c_prev, const float* b,
                               int B, int H);
// dh (B,H) total gradient at h_t, dc (B,H) or nullptr, gates (B,4H) activations, c = c_t,
// c_prev (B,H) or nullptr -> dz (B,4H) =, dc_prev (B,H) = (nullptr skips; may alias dc)
template <typename F>
void lstm_pointwise_backward_v1(F* dz, F* dc_prev, const F* dh, const F* dc, const F* gates,
                                const F* c, const F* c_prev, int B, int H);
void lstm_pointwise_backward_v2(float* dz, float* dc_prev, const float* dh, const float* dc,
                                const float* gates, const float* c, const float* c_prev, int B, int H);

// ---- RNN -------------------------------------------------------------------------------
// h (B,H): z without bias in, tanh(z + b) out; b (H)
template <typename F>
void rnn_pointwise_forward_v1(F* h, const F* b, int B, int H);
void rnn_pointwise_forward_v2(float* h, const float* b, int B, int H);

// ---- the ladders -------------------------------------------------------------------------
using LstmPointwiseForwardFn = void (*)(float* h, float* c, float* gates, const float* c_prev,
                                        const float* b, int B, int H);
using LstmPointwiseBackwardFn = void (*)(float* dz, float* dc_prev, const float* dh, const float* dc,
                                         const float* gates, const float* c, const float* c_prev, int B,
                                         int H);
using RnnPointwiseForwardFn = void (*)(float* h, const float* b, int B, int H);

const std::vector<OpVersion<LstmPointwiseForwardFn>>& lstm_pointwise_forward_versions();
const std::vector<OpVersion<LstmPointwiseBackwardFn>>& lstm_pointwise_backward_versions();
const std::vector<OpVersion<RnnPointwiseForwardFn>>& rnn_pointwise_forward_versions();
const OpVersion<LstmPointwiseForwardFn>& lstm_pointwise_forward_version(const std::string& number_or_name);
const OpVersion<LstmPointwiseBackwardFn>& lstm_pointwise_backward_version(const std::string& number_or_name);
const OpVersion<RnnPointwiseForwardFn>& rnn_pointwise_forward_version(const std::string& number_or_name);

}  // namespace kernels
