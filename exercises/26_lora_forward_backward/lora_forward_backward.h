// Exercise 26_lora_forward_backward (lesson 12): a Linear layer with a LoRA adapter, forward
// and backward. You write the bodies in lora_forward_backward.cpp; `nnlab check` runs the
// tests in test.cpp.
#pragma once

namespace ex {

// Shapes (row-major): x (N, IN), y (N, OUT); the frozen base weight W (OUT, IN) and bias b (OUT);
// the adapter A (r, IN) and B (OUT, r); its scale s = alpha / r.
//
// Forward:   h = x A^T                     (N, r)   saved for the backward
//            y = x W^T + b + s * h B^T     (N, OUT)
// y and h are ASSIGNED.
void lora_forward(float* y, float* h, const float* x, const float* W, const float* b, const float* A, const float* B,
                  int N, int IN, int OUT, int r, float alpha);

// Backward, given dy = dL/dy (N, OUT), the forward's x and h:
//            dB += s * dy^T h              (OUT, r)
//            dh  = s * dy B                (N, r)    (a temporary)
//            dA += dh^T x                  (r, IN)
//            dx += dy W + dh A             (N, IN)
// All three ACCUMULATE (+=), as every backward of nn/ does. W and b are frozen: no gradient.
void lora_backward(float* dx, float* dA, float* dB, const float* dy, const float* x, const float* h, const float* W,
                   const float* A, const float* B, int N, int IN, int OUT, int r, float alpha);

}  // namespace ex
