// Exercise 33_training_memory: the reference solution.
#include "exercises/33_training_memory/training_memory.h"

namespace ex {

double bytes_per_rank(double params, Precision p, int zero_stage, int ranks) {
  const bool mixed = p == Precision::mixed;
  double weights = mixed ? 2.0 : 4.0;     // bf16 copy, or the fp32 weights themselves
  double grads = mixed ? 2.0 : 4.0;
  double optimizer = mixed ? 12.0 : 8.0;  // (fp32 master +) fp32 m and v
  const double N = ranks;
  if (zero_stage >= 1) optimizer /= N;
  if (zero_stage >= 2) grads /= N;
  if (zero_stage >= 3) weights /= N;
  return params * (weights + grads + optimizer);
}

}  // namespace ex
