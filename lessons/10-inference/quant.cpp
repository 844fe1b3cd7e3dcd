// Lesson 10, part quant: the trained target model with its weights stored in fewer bits.
//
//   fp32   4 bytes per weight: the model as trained
//   bf16   2: fp32's top 16 bits (8 bits of mantissa): rounding at 2^-9 relative
//   int8   1 + 4/cols: q in [-127, 127] times one scale per output channel (row)
//   int4   0.5 + 4/32: q in [-7, 7] times one scale per group of 32 weights of a row
//   2:4    2 + 1/8: the 2 largest of every 4 weights, with their positions: PRUNING, not
//          quantisation (half the weights are dropped, the rest kept exact); without a
//          fine-tune (part prune) it costs far more loss than the others
// For each: bytes held, bytes one decode step reads (what the bandwidth law divides),
// tokens/s of the Decoder at batch 1, and the validation loss of the model the format
// stands for (gpt::dequantized_copy, evaluated with gpt_forward) next to fp32's.
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "kernels/decode.h"
#include "kernels/harness.h"
#include "lessons/10-inference/inference_lesson.h"
#include "nn/check.h"
#include "kernels/clock.h"

namespace lesson10 {

namespace {

using i64 = int64_t;

std::string fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

// Decode tokens/s at batch 1: generate `tokens` greedily after a one-token prompt (its
// decode phase: one step per token; the cache is refilled when full, as generate does).
double decode_tokens_per_s(gpt::Decoder& dec, int tokens, uint64_t seed) {
  gpt::GenerateOptions o;
  o.tokens = tokens;
  o.temperature = 0.0f;
  o.seed = seed;
  gpt::GenerateStats st;
  gpt::generate(dec, {0}, o, &st);  // warm-up (caches, thread team)
  gpt::generate(dec, {0}, o, &st);
  return st.tokens_per_second();
}

}  // namespace

int run_quant_part(const Options& opts) {
  kernels::warn_if_busy(std::cout);
  const int threads = gpt::use_threads(opts.threads);
  auto be = gpt::make_backend(opts.backend, "fp32");
  gpt::LoadedCheckpoint ck = load_or_train(opts, "target");
  const gpt::GPTConfig& c = ck.model.config;
  const Splits splits = corpus_splits(opts, ck.vocab);
  const int tokens = opts.tokens > 0 ? opts.tokens : (opts.quick ? 32 : 256);
  const int B = opts.quick ? 4 : 16, T = c.block_size, iters = opts.quick ? 4 : 20;
  NN_CHECK(splits.val.size() > static_cast<size_t>(T) + 1,
           "part quant: the validation split (" << splits.val.size() << " tokens) is shorter than one context of "
                                                << T + 1);

  std::cout << "Part quant: the target model (" << c.n_layer << " layers, C " << c.n_embd << ", context " << T << ", "
            << gpt::num_parameters(c) << " parameters) with its weight matrices in fewer bits.\n"
            << "tokens/s: the Decoder at batch 1 on the " << be->name() << " backend, " << threads << " thread"
            << (threads == 1 ? "" : "s") << ", " << tokens << " tokens. val loss: gpt_forward on what the format\n"
            << "stores (dequantized_copy), " << iters << " batches of " << B << " x " << T << " of " << splits.description
            << "'s validation split.\n\n";

  struct Row {
    std::string format;
    i64 bytes, bytes_per_token;
    double tps, val_loss, change;
  };
  std::vector<Row> rows;
  std::cout << "  " << std::left << std::setw(10) << "format" << std::right << std::setw(12) << "bytes" << std::setw(14)
            << "bytes/token" << std::setw(11) << "tokens/s" << std::setw(11) << "val loss" << std::setw(10) << "change"
            << "\n";
  double fp32_loss = 0.0;
  for (kernels::WeightFormat f : {kernels::WeightFormat::f32, kernels::WeightFormat::bf16, kernels::WeightFormat::int8,
                                  kernels::WeightFormat::int4, kernels::WeightFormat::sparse24}) {
    if (!kernels::check_packable(f, c.n_embd, c.n_embd).empty() ||
        !kernels::check_packable(f, c.n_embd, 4 * c.n_embd).empty()) {
      std::cout << "  " << std::left << std::setw(10) << kernels::format_name(f) << std::right
                << " skipped: " << kernels::check_packable(f, c.n_embd, c.n_embd) << "\n";
      continue;
    }
    const gpt::InferenceModel im = gpt::pack_model(ck.model, f, be->memory());
    gpt::Decoder dec(im, *be);
    const double tps = decode_tokens_per_s(dec, tokens, opts.seed);
    gpt::GPT dq = gpt::dequantized_copy(ck.model, f);
    gpt::GPT on_be = gpt::gpt_move_to(dq, be->memory());
    const float loss = gpt::evaluate(on_be, *be, splits.val, B, T, iters, opts.seed, 3);
    if (f == kernels::WeightFormat::f32) fp32_loss = loss;
    const std::string name = kernels::format_name(f);
    rows.push_back({name, im.bytes(), im.weight_bytes_per_token(), tps, loss, loss - fp32_loss});
    const Row& r = rows.back();
    std::cout << "  " << std::left << std::setw(10) << r.format << std::right << std::setw(12) << r.bytes << std::setw(14)
              << r.bytes_per_token << std::setw(11) << fixed(r.tps, 1) << std::setw(11) << fixed(r.val_loss, 4)
              << std::setw(10) << (r.change >= 0 ? "+" : "") + fixed(r.change, 4)
              << (f == kernels::WeightFormat::sparse24 ? "  (pruning, not quantisation: half the weights dropped)" : "")
              << "\n";
  }
  std::cout << "\nbytes counts everything held (fp32 embeddings for the lookups included), bytes/token what\n"
            << "one step reads: the packed matrices, the fp32 LayerNorm and bias vectors, one row of each\n"
            << "embedding. The loss change is the price of the rounding: bf16 and int8 (one scale per row)\n"
            << "should cost next to nothing, int4 (15 levels per group of 32) more; 2:4 drops half of every\n"
            << "matrix without a fine-tune, which is part prune's subject.\n";

  using kernels::harness::json_number;
  using kernels::harness::json_string;
  std::ostringstream js;
  js << "{\"schema\": \"nnlab-lesson10/1\", \"part\": \"quant\", \"machine\": " << machine_json(opts, *be)
     << ", \"params\": " << gpt::num_parameters(c) << ", \"tokens\": " << tokens << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    js << (i ? ", " : "") << "{\"format\": " << json_string(r.format) << ", \"bytes\": " << r.bytes
       << ", \"bytes_per_token\": " << r.bytes_per_token << ", \"tokens_per_s\": " << json_number(r.tps)
       << ", \"val_loss\": " << json_number(r.val_loss) << ", \"val_loss_change\": " << json_number(r.change) << "}";
  }
  js << "]}";
  write_part_json(opts, "quant", js.str());
  return 0;
}

}  // namespace lesson10
