// Exercise 03_softmax_ce_backward (lesson 02): the gradient of softmax + cross-entropy.
//
// Read first: lessons/02-backprop/README.md, section 3 "Softmax + cross-entropy, and why
// its gradient is (p - onehot)/B"; softmax_forward in nn/ops.cpp shows the stable softmax.
//
// A classifier's last layer gives B rows of V logits. For row b with target class t_b:
//     p_v    = softmax(x)_v = exp(x_v - m) / sum_j exp(x_j - m),  m = max_j x_j
//     loss_b = -log p_{t_b}
//     L      = (1/B) sum_b loss_b                 (the mean over the batch)
// Differentiating L with respect to the logits, softmax and log cancel into
//     dL/dx_bv = (p_bv - [v == t_b]) / B          ([.] is 1 when true, else 0)
// Shapes: logits (B, V), targets (B) in [0, V), dlogits (B, V), row-major: element [b][v]
// is at index b * V + v. dlogits is ASSIGNED (=).
//
// Numerical stability: exp(1000) is inf in float, and inf / inf is NaN. Subtracting the
// row's max m first changes nothing mathematically (it cancels in the ratio) but keeps
// every exp() argument <= 0. The tests use logits of 1000.
//
// Check your work: `nnlab check` (or `nnlab check --only 03_softmax_ce_backward`).
#include "exercises/03_softmax_ce_backward/softmax_ce_backward.h"

#include <cmath>

namespace ex {

void softmax_ce_backward(float* dlogits, const float* logits, const int32_t* targets, int B,
                         int V) {
  // TODO: for each row: its probabilities (the stable softmax above: what is subtracted
  //       first, and why), then the gradient of the MEAN loss with respect to each logit
  //       (the last formula above: which class is treated differently, and what scales all).
  (void)dlogits;
  (void)logits;
  (void)targets;
  (void)B;
  (void)V;
}

}  // namespace ex
