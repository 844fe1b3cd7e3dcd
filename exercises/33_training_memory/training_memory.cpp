// Exercise 33_training_memory (lesson 14): the memory of training, per rank.
//
// Read first: lesson 14's README (lessons/14-distributed/README.md), the part on memory; the
// library's version is gpt/plan.h (bytes_per_param, state_bytes_per_rank), and `nnlab plan`
// prints it as a table.
//
// Every parameter costs 16 bytes to train with AdamW, in fp32 and in mixed precision alike:
// a 7B model holds 112 GB of state, more than an 80 GB GPU, before its first activation. Plain
// data parallelism copies all of it onto every rank. ZeRO notices that the copies are
// redundant: stage 1 keeps each rank's share of the optimizer state only (each rank updates its
// shard of the weights, then they exchange the results), stage 2 the gradients too, stage 3
// the weights as well (gathered layer by layer when needed).
//
// Check your work: `nnlab check` (or `nnlab check --only 33_training_memory`).
#include "exercises/33_training_memory/training_memory.h"

namespace ex {

double bytes_per_rank(double params, Precision p, int zero_stage, int ranks) {
  // TODO: weights, grads, optimizer bytes per parameter for p (see the header); divide the
  //       parts stage zero_stage shards by ranks; return params * (their sum).
  (void)params;
  (void)p;
  (void)zero_stage;
  (void)ranks;
  return 0.0;
}

}  // namespace ex
