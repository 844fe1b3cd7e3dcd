// gpt/prune.cpp: magnitude and 2:4 pruning of a host GPT, masks, and a fine-tune that
// holds the zeros (see gpt/prune.h). Sections: which matrices, the two rules, masks and
// counts, the fine-tune.
#include "gpt/prune.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpt/train.h"
#include "nn/check.h"

namespace gpt {

const char* prune_kind_name(PruneKind k) {
  switch (k) {
    case PruneKind::magnitude: return "magnitude";
    case PruneKind::two_four: return "2:4";
  }
  return "?";
}

// ---- which matrices ------------------------------------------------------------------------------

namespace {

// A prunable matrix: rows x cols floats at `offset` of the flat parameter buffer.
struct Matrix {
  int64_t offset = 0;
  int rows = 0, cols = 0;
  int64_t numel() const { return static_cast<int64_t>(rows) * cols; }
};

// The four Linear weights of every layer (is_block_matrix: c_attn (3C, C), attn c_proj
// (C, C), c_fc (4C, C), mlp c_proj (C, 4C)); wte (the tied head), wpe, the LayerNorms and
// the biases are not among them.
std::vector<Matrix> prunable_matrices(const GPT& model) {
  std::vector<Matrix> out;
  for (const ParamSlice& s : model.slices) {
    if (!is_block_matrix(*s.spec)) continue;
    out.push_back({s.offset, static_cast<int>(s.shape[0]), static_cast<int>(s.shape[1])});
  }
  return out;
}

void check_host(const GPT& model, const char* what) {
  NN_CHECK(&gpt_memory(model) == &host_memory(),
           what << " needs the model in host memory (load it without a backend's memory, or gpt_move_to host_memory())");
  NN_CHECK(model.num_params > 0, what << ": the model has no parameters");
}

// |w_a| < |w_b|, ties broken by the index: a strict total order, so exactly the chosen
// count is pruned however many weights share the threshold's magnitude.
struct SmallerMagnitude {
  const float* w;
  bool operator()(int64_t a, int64_t b) const {
    const float fa = std::abs(w[a]), fb = std::abs(w[b]);
    return fa < fb || (fa == fb && a < b);
  }
};

}  // namespace

// ---- the two rules --------------------------------------------------------------------------------

PruneMask prune_model(GPT& model, PruneKind kind, double sparsity) {
  check_host(model, "pruning");
  if (kind == PruneKind::magnitude) {
    NN_CHECK(sparsity >= 0.0 && sparsity < 1.0, "the sparsity must be in [0, 1), got " << sparsity);
  }
  float* params = model.params_memory.data();
  PruneMask mask;
  mask.keep.assign(static_cast<size_t>(model.num_params), 1);
  for (const Matrix& m : prunable_matrices(model)) {
    float* w = params + m.offset;
    uint8_t* keep = mask.keep.data() + m.offset;
    for (int64_t i = 0; i < m.numel(); ++i) {
      NN_CHECK(std::isfinite(w[i]), "weight " << i << " of a matrix at offset " << m.offset << " is " << w[i]
                                              << ": cannot rank it by magnitude");
    }
    if (kind == PruneKind::magnitude) {
      // the round(sparsity * n) smallest |w| of this matrix -> 0 (per matrix, so every layer
      // keeps the same fraction: one global threshold would empty the matrices of small weights)
      const int64_t n = m.numel();
      const int64_t z = std::llround(sparsity * static_cast<double>(n));
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), int64_t{0});
      std::nth_element(order.begin(), order.begin() + z, order.end(), SmallerMagnitude{w});
      for (int64_t i = 0; i < z; ++i) keep[order[static_cast<size_t>(i)]] = 0;
    } else {
      // 2:4: in every group of 4 consecutive weights of a row, the 2 smallest |w| -> 0
      NN_CHECK(m.cols % 4 == 0, "2:4 pruning needs rows of a multiple of 4 weights, got " << m.cols);
      for (int64_t g = 0; g < m.numel(); g += 4) {
        int64_t idx[4] = {g, g + 1, g + 2, g + 3};
        std::sort(idx, idx + 4, SmallerMagnitude{w});
        keep[idx[0]] = 0;
        keep[idx[1]] = 0;
      }
    }
  }
  apply_mask(model, mask);
  return mask;
}

// ---- masks and counts ------------------------------------------------------------------------------

void apply_mask(GPT& model, const PruneMask& mask) {
  check_host(model, "apply_mask");
  NN_CHECK(static_cast<int64_t>(mask.keep.size()) == model.num_params,
           "the mask has " << mask.keep.size() << " entries, the model " << model.num_params
                           << " parameters: it was made for another model");
  float* params = model.params_memory.data();
  for (int64_t i = 0; i < model.num_params; ++i) {
    if (mask.keep[static_cast<size_t>(i)] == 0) params[i] = 0.0f;
  }
}

double prunable_sparsity(const GPT& model) {
  check_host(model, "prunable_sparsity");
  const float* params = model.params_memory.data();
  int64_t zeros = 0, total = 0;
  for (const Matrix& m : prunable_matrices(model)) {
    for (int64_t i = 0; i < m.numel(); ++i) zeros += params[m.offset + i] == 0.0f ? 1 : 0;
    total += m.numel();
  }
  return total > 0 ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0;
}

bool is_two_four(const GPT& model) {
  check_host(model, "is_two_four");
  const float* params = model.params_memory.data();
  for (const Matrix& m : prunable_matrices(model)) {
    if (m.cols % 4 != 0) return false;
    for (int64_t g = 0; g < m.numel(); g += 4) {
      int nonzero = 0;
      for (int64_t i = g; i < g + 4; ++i) nonzero += params[m.offset + i] != 0.0f ? 1 : 0;
      if (nonzero > 2) return false;
    }
  }
  return true;
}

// ---- the fine-tune ----------------------------------------------------------------------------------

std::vector<float> finetune_pruned(GPT& model, Backend& be, const PruneMask& mask, const std::vector<int32_t>& tokens,
                                   const FinetuneOptions& o) {
  check_host(model, "finetune_pruned");
  NN_CHECK(&be.memory() == &host_memory(),
           "finetune_pruned re-applies the mask on the host after every step: use a host backend (naive or cpu), not "
               << be.name());
  NN_CHECK(static_cast<int64_t>(mask.keep.size()) == model.num_params,
           "the mask has " << mask.keep.size() << " entries, the model " << model.num_params << " parameters");
  NN_CHECK(o.steps >= 0 && o.batch_size >= 1 && o.lr > 0.0f,
           "fine-tune options: steps >= 0, batch_size >= 1 and lr > 0, got " << o.steps << ", " << o.batch_size << ", " << o.lr);
  const int T = o.block_size > 0 ? o.block_size : model.config.block_size;
  NN_CHECK(T <= model.config.block_size, "block_size " << T << " exceeds the model's context " << model.config.block_size);
  StepOptions so;  // AdamW with the defaults of training (gpt/model.h), clip 1, no dropout
  so.lr = o.lr;
  so.grad_clip = 1.0f;
  so.train = false;
  // a pruned weight is not a parameter any more: its gradient takes no part in the norm
  float* grads = model.grads_memory.data();
  so.after_backward = [&](int) {
    for (int64_t i = 0; i < model.num_params; ++i) {
      if (mask.keep[static_cast<size_t>(i)] == 0) grads[i] = 0.0f;
    }
  };
  constexpr uint64_t kFinetuneStream = 7;  // batches apart from training's and evaluation's streams
  std::vector<int32_t> x, y;
  std::vector<float> losses;
  losses.reserve(static_cast<size_t>(o.steps));
  apply_mask(model, mask);
  for (int step = 0; step < o.steps; ++step) {
    get_batch(tokens, o.batch_size, T, o.seed, kFinetuneStream, static_cast<uint64_t>(step), x, y);
    StepResult r;
    try {
      r = train_step(model, be, {{x.data(), y.data(), 0}}, o.batch_size, T, so);
    } catch (const nn::Error& e) {
      NN_CHECK(false, "the fine-tune stopped at step " << step + 1 << ": " << e.what() << ": lower the learning rate");
    }
    losses.push_back(static_cast<float>(r.loss));
    // AdamW's moments, saved from before pruning, still move a pruned weight even with
    // a zero gradient (m decays by beta1 per step; it does not vanish). Decoupled weight
    // decay alone would keep a zero at zero. Put the zeros back.
    apply_mask(model, mask);
  }
  return losses;
}

}  // namespace gpt
