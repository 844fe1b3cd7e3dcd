// Exercise 26_lora_forward_backward (lesson 12): a Linear layer with a LoRA adapter.
//
// Read first: lesson 12's README (lessons/12-real-models/README.md), the part on LoRA; the
// library's version is gpt/lora.h.
//
// Fine-tuning changes a weight W (OUT, IN) by some dW. LoRA bets that the useful dW has low
// rank and writes it as s * B A with B (OUT, r), A (r, IN), r much smaller than IN and OUT: the
// trainable numbers drop from OUT * IN to r * (IN + OUT). W itself is frozen. B starts at ZERO
// (A at small random numbers), so the adapted model starts exactly equal to the base model,
// and s = alpha / r keeps the size of the update about the same when you change r.
//
// Never form B A (OUT, IN) in the forward: that is the big matrix LoRA avoids. Go through the
// narrow h = x A^T (N, r) instead: two thin products.
//
// Check your work: `nnlab check` (or `nnlab check --only 26_lora_forward_backward`).
#include "exercises/26_lora_forward_backward/lora_forward_backward.h"

#include <vector>

namespace ex {

void lora_forward(float* y, float* h, const float* x, const float* W, const float* b, const float* A, const float* B,
                  int N, int IN, int OUT, int r, float alpha) {
  // TODO: for each row n: h[n][j] = sum_i A[j][i] x[n][i]; then
  //       y[n][o] = b[o] + sum_i W[o][i] x[n][i] + (alpha / r) * sum_j B[o][j] h[n][j].
  (void)y;
  (void)h;
  (void)x;
  (void)W;
  (void)b;
  (void)A;
  (void)B;
  (void)N;
  (void)IN;
  (void)OUT;
  (void)r;
  (void)alpha;
}

void lora_backward(float* dx, float* dA, float* dB, const float* dy, const float* x, const float* h, const float* W,
                   const float* A, const float* B, int N, int IN, int OUT, int r, float alpha) {
  // TODO: per row n: dh[j] = s * sum_o dy[n][o] B[o][j] (a temporary of r numbers);
  //       dB[o][j] += s * dy[n][o] h[n][j]; dA[j][i] += dh[j] x[n][i];
  //       dx[n][i] += sum_o dy[n][o] W[o][i] + sum_j dh[j] A[j][i].
  (void)dx;
  (void)dA;
  (void)dB;
  (void)dy;
  (void)x;
  (void)h;
  (void)W;
  (void)A;
  (void)B;
  (void)N;
  (void)IN;
  (void)OUT;
  (void)r;
  (void)alpha;
}

}  // namespace ex
