// Exercise 33_training_memory (lesson 14): the bytes one rank holds to train P parameters with
// AdamW, in fp32 or mixed precision, at ZeRO stage 0-3 over N ranks. You write the body in
// training_memory.cpp; `nnlab check` runs the tests in test.cpp.
#pragma once

namespace ex {

enum class Precision { fp32, mixed };

// Bytes per parameter (the ZeRO paper's convention):
//   fp32:  weights 4, gradients 4, optimizer state 8 (AdamW's m and v, fp32)
//   mixed: weights 2 (bf16), gradients 2 (bf16), optimizer state 12 (fp32 master weights 4,
//          m 4, v 4)
// ZeRO stage s cuts parts of the state into N equal shards, one per rank:
//   stage 0: nothing; stage 1: the optimizer state; stage 2: + the gradients; stage 3: + the
//   weights.
// Returns the bytes ONE rank holds: params > 0, stage in 0..3, ranks >= 1.
double bytes_per_rank(double params, Precision p, int zero_stage, int ranks);

}  // namespace ex
