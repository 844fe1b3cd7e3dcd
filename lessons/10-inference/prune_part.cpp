// Lesson 10, part prune: the trained target pruned by magnitude at several sparsities and
// by the 2:4 rule (gpt/prune.h), its validation loss right after pruning and after a short
// fine-tune that holds the zeros; then what pruning buys at decode time: a dense kernel
// reads a zero like any other number (the same bytes, so the same tokens/s), and only the
// 2:4 packed format (sparse24: half the values plus 2-bit positions) reads fewer bytes.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/infer.h"
#include "gpt/prune.h"
#include "kernels/harness.h"
#include "lessons/10-inference/inference_lesson.h"
#include "nn/check.h"
#include "kernels/clock.h"

namespace lesson10 {

namespace {

using kernels::harness::json_number;
using kernels::harness::json_string;

constexpr uint64_t kEvalVal = 3;  // gpt::train's stream of validation batches: the same batches

struct PruneRow {
  gpt::PruneKind kind = gpt::PruneKind::magnitude;
  double sparsity = 0.0;  // asked for (2:4: 0.5)
  double measured_sparsity = 0.0;
  float val_pruned = 0.0f, val_finetuned = 0.0f;
  float first_loss = 0.0f, last_loss = 0.0f;  // of the fine-tune's training steps
};

struct SpeedRow {
  std::string what;
  int64_t bytes_per_token = 0;
  double tokens_per_s = 0.0;
  float val_loss = 0.0f;  // of what the decoder computes with (dequantized_copy for sparse24)
};

// Decoder tokens/s of `model` packed in `format`: the median of three generations.
SpeedRow measure_speed(const std::string& what, const gpt::GPT& model, kernels::WeightFormat format, gpt::Backend& be,
                       const std::vector<int32_t>& prompt, int tokens, uint64_t seed) {
  const gpt::InferenceModel packed = gpt::pack_model(model, format, be.memory());
  gpt::Decoder dec(packed, be);
  gpt::GenerateOptions o;
  o.tokens = tokens;
  o.seed = seed;
  {
    gpt::GenerateOptions warm = o;
    warm.tokens = std::min(tokens, 8);
    gpt::generate(dec, prompt, warm);  // caches, OpenMP threads
  }
  std::vector<double> tps;
  for (int r = 0; r < 3; ++r) {
    dec.reset();
    gpt::GenerateStats st;
    gpt::generate(dec, prompt, o, &st);
    tps.push_back(st.tokens_per_second());
  }
  std::sort(tps.begin(), tps.end());
  return {what, packed.weight_bytes_per_token(), tps[1], 0.0f};
}

}  // namespace

int run_prune_part(const Options& opts) {
  gpt::use_threads(opts.threads);
  std::unique_ptr<gpt::Backend> be = gpt::make_backend(opts.backend, "fp32");
  // evaluation and the fine-tune run on the host (the fine-tune re-applies the mask there)
  std::unique_ptr<gpt::Backend> host = gpt::make_backend(opts.backend == "cuda" ? "cpu" : opts.backend, "fp32");
  std::cout << "== part prune: weights set to zero, a short fine-tune, and what it buys ==\n";
  kernels::warn_if_busy(std::cout);

  gpt::LoadedCheckpoint ck = load_or_train(opts, "target");
  const Splits splits = corpus_splits(opts, ck.vocab);
  const gpt::GPTConfig& cfg = ck.model.config;
  const int eval_B = 8, eval_T = cfg.block_size, eval_iters = opts.quick ? 4 : 20;
  auto val_loss = [&](gpt::GPT& m) {
    return gpt::evaluate(m, *host, splits.val, eval_B, eval_T, eval_iters, opts.seed, kEvalVal);
  };
  gpt::GPT dense = ck.model;
  const float dense_val = val_loss(dense);
  gpt::FinetuneOptions fo;
  fo.steps = opts.quick ? 10 : 200;
  fo.seed = opts.seed;
  std::cout << "target: " << gpt::num_parameters(cfg) << " parameters, val loss " << std::fixed << std::setprecision(4)
            << dense_val << " (" << eval_iters << " batches of " << eval_B << " x " << eval_T << "); fine-tune: "
            << fo.steps << " steps of AdamW at lr " << fo.lr << ", batch " << fo.batch_size << "\n";

  struct Config {
    gpt::PruneKind kind;
    double sparsity;
  };
  // sparsity 0 is the control: the dense model fine-tuned the same steps. A short run of
  // an under-trained model lowers its loss whatever the mask; the pruned rows are read
  // against this one, not against the dense model before the fine-tune.
  const std::vector<Config> configs = {{gpt::PruneKind::magnitude, 0.0},  {gpt::PruneKind::magnitude, 0.25},
                                       {gpt::PruneKind::magnitude, 0.5},
                                       {gpt::PruneKind::magnitude, 0.75}, {gpt::PruneKind::magnitude, 0.9},
                                       {gpt::PruneKind::two_four, 0.5}};
  std::vector<PruneRow> rows;
  gpt::GPT magnitude_half, two_four;  // fine-tuned, for the speed measurements
  std::cout << "\n" << std::left << std::setw(11) << "kind" << std::right << std::setw(9) << "sparsity" << std::setw(12)
            << "val pruned" << std::setw(13) << "val tuned" << std::setw(13) << "(dense)" << "\n";
  for (const Config& c : configs) {
    gpt::GPT m = ck.model;
    const gpt::PruneMask mask = gpt::prune_model(m, c.kind, c.sparsity);
    PruneRow r;
    r.kind = c.kind;
    r.sparsity = c.sparsity;
    r.measured_sparsity = gpt::prunable_sparsity(m);
    r.val_pruned = val_loss(m);
    const std::vector<float> losses = gpt::finetune_pruned(m, *host, mask, splits.train, fo);
    if (!losses.empty()) r.first_loss = losses.front(), r.last_loss = losses.back();
    r.val_finetuned = val_loss(m);
    NN_CHECK(gpt::prunable_sparsity(m) >= r.measured_sparsity, "the fine-tune lost zeros");
    if (c.kind == gpt::PruneKind::magnitude && c.sparsity == 0.5) magnitude_half = m;
    if (c.kind == gpt::PruneKind::two_four) two_four = m;
    std::cout << std::left << std::setw(11) << gpt::prune_kind_name(c.kind) << std::right << std::setprecision(2)
              << std::setw(9) << r.measured_sparsity << std::setprecision(4) << std::setw(12) << r.val_pruned
              << std::setw(13) << r.val_finetuned << std::setw(13) << dense_val << "\n";
    rows.push_back(r);
  }
  NN_CHECK(gpt::is_two_four(two_four), "the 2:4 model lost its pattern");
  std::cout << "  sparsity: of the four Linear matrices per layer (embeddings, the tied head, LayerNorms and biases\n"
               "  are kept whole); val pruned: right after pruning; val tuned: after the fine-tune, zeros held.\n";

  // speed: the Decoder at batch 1 on the backend asked for
  const int prompt_len = std::min<int>(16, static_cast<int>(splits.val.size()));
  const std::vector<int32_t> prompt(splits.val.begin(), splits.val.begin() + prompt_len);
  const int tokens = opts.tokens > 0 ? opts.tokens : (opts.quick ? 32 : 256);
  std::vector<SpeedRow> speed;
  speed.push_back(measure_speed("dense fp32", dense, kernels::WeightFormat::f32, *be, prompt, tokens, opts.seed));
  speed.push_back(
      measure_speed("magnitude 0.5, fp32", magnitude_half, kernels::WeightFormat::f32, *be, prompt, tokens, opts.seed));
  speed.push_back(measure_speed("2:4, fp32", two_four, kernels::WeightFormat::f32, *be, prompt, tokens, opts.seed));
  speed.push_back(measure_speed("2:4, sparse24", two_four, kernels::WeightFormat::sparse24, *be, prompt, tokens, opts.seed));
  // what each decodes with: the val loss of dequantized_copy (sparse24 keeps the head fp32,
  // gpt::head_format, so on a 2:4 model it stores exactly the fine-tuned weights)
  speed[0].val_loss = dense_val;
  speed[1].val_loss = val_loss(magnitude_half);
  speed[2].val_loss = val_loss(two_four);
  gpt::GPT two_four_packed = gpt::dequantized_copy(two_four, kernels::WeightFormat::sparse24);
  speed[3].val_loss = val_loss(two_four_packed);
  std::cout << "\n" << std::left << std::setw(22) << "decode (" + opts.backend + ")" << std::right << std::setw(16)
            << "bytes/token" << std::setw(12) << "tokens/s" << std::setw(10) << "vs dense" << std::setw(10) << "val loss"
            << "\n";
  for (const SpeedRow& s : speed) {
    std::cout << std::left << std::setw(22) << s.what << std::right << std::setw(16) << s.bytes_per_token
              << std::setprecision(1) << std::setw(12) << s.tokens_per_s << std::setprecision(2) << std::setw(9)
              << s.tokens_per_s / speed.front().tokens_per_s << "x" << std::setprecision(4) << std::setw(10) << s.val_loss
              << "\n";
  }
  std::cout << "  A zero in fp32 is 4 bytes read like any other: the pruned fp32 models read what the dense one\n"
               "  reads. sparse24 stores 2 of every 4 values and their positions (2 + 1/8 bytes per 4 weights\n"
               "  instead of 16): fewer bytes per token, but a kernel that must expand every group to use it.\n"
               "  The tied head (an embedding: never pruned), the lookups and the vectors stay fp32.\n";

  std::ostringstream js;
  js << "{\"schema\": \"nnlab-lesson10/1\", \"part\": \"prune\", \"machine\": " << machine_json(opts, *be)
     << ", \"params\": " << gpt::num_parameters(cfg) << ", \"val_loss_dense\": " << json_number(dense_val)
     << ", \"finetune_steps\": " << fo.steps << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const PruneRow& r = rows[i];
    js << (i ? ", " : "") << "{\"kind\": " << json_string(gpt::prune_kind_name(r.kind))
       << ", \"sparsity\": " << json_number(r.sparsity) << ", \"measured_sparsity\": " << json_number(r.measured_sparsity)
       << ", \"val_loss_pruned\": " << json_number(r.val_pruned)
       << ", \"val_loss_finetuned\": " << json_number(r.val_finetuned)
       << ", \"finetune_first_loss\": " << json_number(r.first_loss)
       << ", \"finetune_last_loss\": " << json_number(r.last_loss) << "}";
  }
  js << "], \"speed\": [";
  for (size_t i = 0; i < speed.size(); ++i) {
    js << (i ? ", " : "") << "{\"what\": " << json_string(speed[i].what)
       << ", \"bytes_per_token\": " << speed[i].bytes_per_token << ", \"tokens_per_s\": " << json_number(speed[i].tokens_per_s)
       << ", \"val_loss\": " << json_number(speed[i].val_loss) << "}";
  }
  js << "], \"tokens\": " << tokens << "}";
  write_part_json(opts, "prune", js.str());
  return 0;
}

}  // namespace lesson10
