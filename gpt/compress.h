// gpt/compress.h: compressing a trained GPT beyond lesson 10's weight formats (lesson 15):
// SmoothQuant for W8A8 integer inference, GPTQ's error-compensated int4/int3 weights,
// BitNet b1.58's ternary training, and the price of an int8 KV cache. Like gpt/prune.h, a
// module that transforms or evaluates a host model; the integer kernels are kernels/int8_gemm.h.
//
// Everything here acts on the block's four Linear layers (qkv, attn proj, fc, mlp proj; the
// rows of Linear in gpt/model.h). The embeddings, the (tied) head, LayerNorms and biases stay
// fp32 throughout, as in the papers.
//
//   Calibration cal = calibrate(model, be, train_tokens, B, T, batches, seed);
//     per Linear: the input's per-channel max |x| (SmoothQuant) and Gram matrix X^T X / n
//     (GPTQ), read at the Linear's input during fp32 forwards (a BlockKernels that watches)
//   smooth_model(model, cal, 0.5);   // fp32 model unchanged up to rounding
//   float loss = evaluate_compressed(model, be, val, B, T, iters, seed, 3, {.w8a8 = true});
//   gptq_model(model, cal, {.bits = 4, .group = 32});   // weights -> GPTQ's dequantised ones
//   ternary_train_step(...)                              // BitNet b1.58 with the STE
//   set_int8_activations(model, true)                    // + b1.58's int8 activations (W1.58A8)
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gpt/infer.h"
#include "gpt/model.h"
#include "gpt/train.h"

namespace gpt {

// ---- calibration ------------------------------------------------------------------------------
// What one Linear layer saw at its input over the calibration rows X (n, in).
struct LinearStats {
  Linear which = Linear::qkv;
  int layer = 0;
  int in = 0, out = 0;
  int64_t rows = 0;             // n
  std::vector<float> absmax;    // (in): max_n |X[n][j]|, SmoothQuant's per-channel statistic
  std::vector<double> gram;     // (in, in): X^T X / n, GPTQ's Hessian (up to the factor 2)
  std::vector<double> sum, sumsq, sum4;  // (in): per-channel moments (outlier statistics)
};
struct Calibration {
  std::vector<LinearStats> layers;  // index 4 l + which
  const LinearStats& at(Linear which, int l) const { return layers[static_cast<size_t>(4 * l + static_cast<int>(which))]; }
};
// Runs `batches` fp32 forwards of (B, T) windows of `tokens` (get_batch, stream 7) and
// accumulates every Linear layer's input statistics. gram = false skips X^T X (in^2 per row).
// Host models only (nn::Error otherwise).
Calibration calibrate(const GPT& model, Backend& be, const std::vector<int32_t>& tokens, int B, int T, int batches,
                      uint64_t seed, bool gram = true);

// How outlier-heavy a Linear's input is, the statistics that predict W8A8's error:
//   max_over_median  max_j absmax[j] / median_j absmax[j]: how far the largest channel stands
//                    out. Per-token int8 rounds every channel with the step absmax_row / 127,
//                    so a channel 20x the median leaves the typical channel ~6 of 127 levels.
//   kurtosis         E[x^4] / E[x^2]^2 over all entries (3 for a Gaussian): heavy tails.
//   frac_6sigma      fraction of channels whose max |x| exceeds 6 standard deviations of the
//                    whole input (LLM.int8's outlier channels).
struct OutlierStats {
  double max_over_median = 0.0, kurtosis = 0.0, frac_6sigma = 0.0;
};
OutlierStats outlier_stats(const LinearStats& s);

// ---- SmoothQuant ---------------------------------------------------------------------------------
// s_j = max|X_j|^alpha / max|W_j|^(1-alpha) for each input channel j of qkv and fc (the layers fed
// by a norm): the norm's weight (and bias) divided by s, W's column j multiplied by s. The fp32
// function is unchanged; the activation outliers move into the weights. Channels whose max |x|
// or max |w| is 0 keep s = 1. alpha = 0 divides by the weights' range only; the usual 0.5.
// llama's RMSNorm has no bias: the same with the weight alone. Host model, changed in place.
void smooth_model(GPT& model, const Calibration& cal, float alpha);
// The scales smooth_model would use for one Linear (in).
std::vector<float> smoothing_scales(const LinearStats& s, const float* W, float alpha);

// ---- evaluation with integer Linear layers and a quantised KV cache ---------------------------
struct CompressedEval {
  // W8A8: every block Linear through kernels::w8a8_linear: weights per output row and the
  // activations per token quantised to int8, int8 x int8 products summed exactly in int32,
  // scaled back once per output. The head stays fp32.
  bool w8a8 = false;
  // int8 KV cache: the k and v of every position quantised per head (scale = max |.| / 127
  // over the head's hs channels) and dequantised before attention reads them, as a cache that
  // stores int8 + one float scale per head and position would give them back.
  bool kv_int8 = false;
};
// The mean loss over `iters` batches exactly as gpt::evaluate draws them (the same (seed,
// split_id) batches: comparable with its fp32 number), with the choices above. With both
// false it is gpt::evaluate's number (tests/test_compress.cpp checks). Host models only.
float evaluate_compressed(const GPT& model, Backend& be, const std::vector<int32_t>& tokens, int B, int T, int iters,
                          uint64_t seed, uint64_t split_id, const CompressedEval& e);
// Logits (B, T, V) of one forward with the choices above (the tests compare paths with it).
std::vector<float> compressed_logits(const GPT& model, Backend& be, const int32_t* inputs, int B, int T,
                                     const CompressedEval& e);
// The cache's bytes per token (all layers, K and V): fp32 2 L NKV hs 4; int8 2 L (NKV hs + 4 NKV).
int64_t kv_bytes_per_token(const GPTConfig& c, bool int8);
// Round trip of one row of `n` channels in heads of hs: q = round(x / s), s = max|head| / 127.
void quantize_dequantize_heads_int8(float* x, int heads, int hs);

// ---- GPTQ -------------------------------------------------------------------------------------------
struct GptqOptions {
  int bits = 4;          // 4: q in [-7, 7]; 3: [-3, 3]; any 2..8: +-(2^(bits-1) - 1)
  int group = 32;        // columns sharing one scale; 0: one scale per row
  bool gptq = true;      // false: round to nearest (RTN) with the same scales
  double damp = 0.01;    // added to H's diagonal: damp * mean(diag H)
};
// Scales are fixed from the ORIGINAL weights before the sweep: s = max |w| of the group (or row)
// / qmax. With bits 4 and group 32 that is WeightFormat::int4's scale, so every weight of the
// result is s * q with q in [-7, 7] on int4's grid, and gptq_pack_int4 (below) stores these
// (q, s) in the decoder's int4 format as they are.
//
// W (rows, cols) row-major, H (cols, cols) = X^T X / n. Replaces W by its quantised values
// (dequantised: s * q); q (rows * cols, may be nullptr) gets the integers, scales
// (rows * ceil(cols / group)) the scales.
// GPTQ (Frantar et al. 2023): columns in order; after rounding column i, the other columns
// j > i absorb its error: W[:, j] -= (W[:, i] - Q[:, i]) / U[i][i] * U[i][j], U the upper Cholesky
// factor of (H + damp I)^-1. A column no input ever touched (H[i][i] = 0) is set to 0.
void gptq_quantize(float* W, int rows, int cols, const double* H, const GptqOptions& o, int8_t* q = nullptr,
                   float* scales = nullptr);
// Every block Linear of a host model through gptq_quantize with its calibration Gram matrix
// (RTN needs none: cal may be empty when o.gptq is false). Returns the seconds spent.
double gptq_model(GPT& model, const Calibration& cal, const GptqOptions& o);
// GPTQ's int4 model packed for the decoder AS GPTQ CHOSE IT: pack_model(model, int4, memory)
// with every block Linear replaced by gptq_quantize's own (q, scales), stored the way
// WeightFormat::int4 stores them (q + 8 in nibbles, one scale per group of kInt4Group). Packing
// a gptq_model'd float model with pack_model instead re-derives each group's scale from
// max |s q| and re-rounds every group where GPTQ left no |q| = 7; here, unpacked, each matrix is
// gptq_model's s * q bit for bit. The head (wte, tied) is int4's round to nearest, as pack_model
// packs it (GPTQ quantises the block Linears only). o.bits must be 4 and o.group kInt4Group
// (nn::Error otherwise); with o.gptq false the result is pack_model's int4 byte for byte.
// seconds (may be nullptr) gets the time gptq_quantize took. The model may be in any memory.
InferenceModel gptq_pack_int4(const GPT& model, const Calibration& cal, const GptqOptions& o,
                              Memory& memory = host_memory(), double* seconds = nullptr);

// ---- BitNet b1.58 --------------------------------------------------------------------------------
// gamma = mean |W| over the matrix (absmean); W_q = clamp(round(W / (gamma + 1e-5)), -1, 1) * gamma
// (kernels::ternary_pack's rule, so a trained model packs as it trained). Returns gamma (0 for an
// all-zero matrix, whose W_q is 0).
float ternarize(float* out, const float* W, int64_t n);
// Every block Linear of `params` (a host copy of a model's flat buffer) ternarised in place.
void ternarize_params(std::vector<float>& params, const GPT& model);
// One training step with the straight-through estimator: the fp32 LATENT weights (what the
// model holds between steps and a checkpoint saves) are replaced by their ternary values for
// the forward and backward, the gradients (of the ternary model) are applied to the latents
// by train_step's clip and AdamW. The model holds the latents again on return. Any memory.
StepResult ternary_train_step(GPT& model, Backend& be, const std::vector<MicroBatch>& micro, int B, int T,
                              const StepOptions& o);
// A copy of the model with its block Linears ternarised: what it computes at inference
// (what the trainer evaluates for a --ternary run). The copy keeps the model's int8-activation
// hook (below): the copy of a W1.58A8 model computes W1.58A8.
GPT ternary_copy(const GPT& model);

// b1.58's int8 activations (W1.58A8, the paper's whole recipe): each block Linear's INPUT
// quantised per token (row) with absmax, s = max |x_row| / 127, x_q = clamp(round(x / s), -127,
// 127) s: kernels::quantize_rows_int8's rounding, the W8A8 path's (evaluate_compressed), so an
// integer kernel reproduces what was trained. x (rows, cols) replaced by x_q, host memory.
void fake_quantize_rows_int8(float* x, int rows, int cols);
// on: sets the model's Linear-input hook (GPTData::linear_input, gpt/model.h) to
// fake_quantize_rows_int8, so EVERY forward of the model rounds its block Linears' inputs
// to int8: training's (the straight-through estimator: forward and dW see x_q, dx flows
// through unchanged, because the backward never differentiates through those buffers; see
// the hook's comment), gpt::evaluate's, sampling's and recomputation's. With
// ternary_train_step that is BitNet b1.58's W1.58A8 step; the head, norms and attention stay
// fp32. off: clears it. Any memory (a device model's activations make a round trip through
// the host: correct, not fast). nn::Error for a model with flash attention (its backward reads
// the attention output, the attn-proj Linear's input: set attention full).
void set_int8_activations(GPT& model, bool on);
inline bool has_int8_activations(const GPT& model) { return model.linear_input != nullptr; }
// A checkpoint's model as its training computed it: a --ternary checkpoint holds the fp32
// latents, so its block Linears are ternarised (ternary_copy); a --ternary-a8 one rounds the
// Linears' inputs too (set_int8_activations). An fp32 checkpoint is left as it is. What `nnlab
// gpt sample` and `eval` and lesson 15's --checkpoint run (the latents themselves are a model
// nobody trained).
void as_trained(LoadedCheckpoint& ck);

}  // namespace gpt
