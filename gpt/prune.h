// gpt/prune.h: pruning a trained GPT (lesson 10). Weights set to zero by a rule, a short
// fine-tune with the zeros held, and the question of what it buys: a dense kernel reads a
// zero as fast as any other number; only a format that skips zeros (2:4: two of every four
// stored, with 2-bit positions; kernels/weight_format.h) reads fewer bytes.
//
// Only the four Linear matrices of every layer are pruned (c_attn, attn c_proj, c_fc, mlp
// c_proj): the embeddings (and the tied head), LayerNorms and biases are kept whole.
#pragma once

#include <cstdint>
#include <vector>

#include "gpt/model.h"

namespace gpt {

enum class PruneKind {
  magnitude,  // unstructured: in each matrix, the fraction `sparsity` of smallest |w| -> 0
  two_four,   // semi-structured: in every group of 4 consecutive weights of a row, the 2
              // smallest |w| -> 0 (sparsity 0.5 of the pruned matrices)
};
const char* prune_kind_name(PruneKind k);  // "magnitude", "2:4"

// keep[i] (num_params) is 1 for every parameter left alone or kept, 0 for a pruned one.
struct PruneMask {
  std::vector<uint8_t> keep;
};
// Prunes a host model in place; returns the mask. sparsity in [0, 1) (magnitude; ignored by
// two_four). Ties at the threshold are broken by index, so exactly round(sparsity * n)
// weights of each matrix become zero. nn::Error for a model not in host memory.
PruneMask prune_model(GPT& model, PruneKind kind, double sparsity);
// Zeros every parameter the mask does not keep (model in host memory).
void apply_mask(GPT& model, const PruneMask& mask);
// Fraction of zeros over the prunable matrices.
double prunable_sparsity(const GPT& model);
// Whether every prunable matrix has at most 2 nonzeros in each group of 4.
bool is_two_four(const GPT& model);

struct FinetuneOptions {
  int steps = 200;
  float lr = 3e-4f;  // constant, AdamW (the model's own state, from a checkpoint or fresh)
  int batch_size = 12;
  int block_size = 0;  // 0: the model's
  uint64_t seed = 1337;
};
// A short fine-tune of a pruned host model on `tokens` (training batches as gpt::get_batch),
// with the mask re-applied after every AdamW step so pruned weights stay zero. Returns the
// training loss of each step.
std::vector<float> finetune_pruned(GPT& model, Backend& be, const PruneMask& mask, const std::vector<int32_t>& tokens,
                                   const FinetuneOptions& o);

}  // namespace gpt
