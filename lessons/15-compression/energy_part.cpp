// Lesson 15, part energy: joules per token, measured where the hardware lets us, estimated
// (and marked so) where it does not.
//
//   1. the counters: RAPL through powercap sysfs and perf events, NVML (kernels/energy.h),
//      each with what it read or why it could not
//   2. lesson 10's model (or --checkpoint's) decoding in each format: bytes per token, tokens/s, validation loss,
//      and joules per token: measured around the generation when a counter is readable, else
//      the stated model's estimate (fetching each weight byte once from DRAM + one
//      multiply-add per weight at the format's precision), never mixed in one column
//   3. one training step of the same model: joules measured, or estimated from its FLOPs and
//      AdamW's bytes
//   4. the energy roofline of fp32, bf16, int8, int4, ternary and 2:4 for this model and a 7B
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/bench.h"
#include "gpt/compress.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "kernels/ceilings.h"
#include "kernels/decode.h"
#include "kernels/energy.h"
#include "kernels/harness.h"
#include "lessons/15-compression/compression_lesson.h"

namespace lesson15 {

namespace {

std::string fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

kernels::energy::Precision precision_of(const std::string& f) {
  using P = kernels::energy::Precision;
  if (f == "bf16") return P::bf16;
  if (f == "int8" || f == "w8a8") return P::int8;
  if (f == "int4") return P::int4;
  return P::fp32;
}

}  // namespace

int run_energy_part(const Options& opts) {
  namespace en = kernels::energy;
  using kernels::harness::json_string;
  en::Meter& meter = en::system_meter();
  std::cout << "Part energy: joules per token.\n\n1. The energy counters of this machine\n";
  for (const en::Counter& c : meter.counters())
    std::cout << "  " << std::left << std::setw(28) << (c.source + " " + c.name) << std::right << " "
              << (c.readable ? "readable" : "not readable: " + c.reason) << "\n";
  if (meter.counters().empty()) std::cout << "  none found: " << meter.reason() << "\n";
  const bool measured = meter.readable();
  std::cout << "  => joules per token below are " << (measured ? "MEASURED" : "ESTIMATED from the model in section 4")
            << ".\n\n";
  std::ostringstream js;
  js << "{\"probe\": " << en::probe_json(meter) << ", \"rows\": [";

  Target t = load_target(opts);
  const gpt::GPT& model = t.ck.model;
  const gpt::GPTConfig& c = model.config;
  auto be = gpt::make_backend("cpu", "fp32");
  const int B = opts.quick ? 4 : 16, iters = opts.quick ? 3 : 10, tokens = opts.quick ? 32 : 256;
  std::cout << "2. " << t.name << " decoding at batch 1 (" << omp_get_max_threads() << " threads, " << tokens
            << " tokens)\n  " << std::left << std::setw(8) << "format" << std::right << std::setw(13) << "bytes/token"
            << std::setw(11) << "tokens/s" << std::setw(10) << "val loss" << "   J/token" << "\n";
  // the block Linears (qkv, attn proj, fc, mlp proj: 12 C^2 per layer for gpt2) + the head
  const double matrix_weights =
      static_cast<double>(c.n_layer) * c.n_embd *
          (static_cast<double>(gpt::qkv_channels(c)) + c.n_embd + gpt::fc_channels(c) + gpt::mlp_hidden(c)) +
      static_cast<double>(c.vocab_size) * c.n_embd;
  bool first = true;
  double largest_bpt = 0.0;
  for (const char* name : {"fp32", "bf16", "int8", "w8a8", "int4"}) {
    kernels::WeightFormat f;
    try {
      f = kernels::parse_format(name);
    } catch (const std::invalid_argument&) {
      continue;
    }
    if (!kernels::check_packable(f, c.n_embd, c.n_embd).empty()) continue;
    const gpt::InferenceModel im = gpt::pack_model(model, f, be->memory());
    const double bpt = static_cast<double>(im.weight_bytes_per_token());
    largest_bpt = std::max(largest_bpt, bpt);
    const double tps = decode_tokens_per_s(im, *be, tokens, opts.seed);
    float loss;
    if (std::string(name) == "w8a8") {
      gpt::CompressedEval e;
      e.w8a8 = true;
      loss = gpt::evaluate_compressed(model, *be, t.val, B, c.block_size, iters, opts.seed, 3, e);
    } else {
      const gpt::GPT dq = gpt::dequantized_copy(model, f);
      loss = gpt::evaluate_compressed(dq, *be, t.val, B, c.block_size, iters, opts.seed, 3, {});
    }
    en::JoulesPerToken jpt{};
    if (measured) {
      gpt::Decoder dec(im, *be);
      gpt::GenerateOptions o;
      o.tokens = tokens;
      o.temperature = 0.0f;
      o.seed = opts.seed;
      meter.start();
      gpt::generate(dec, {0}, o, nullptr);
      jpt = en::per_token(meter.stop(), tokens);
    } else {
      jpt = en::per_token(en::estimate_joules(matrix_weights, precision_of(name), bpt), 1.0);
    }
    std::cout << "  " << std::left << std::setw(8) << name << std::right << std::setw(13)
              << static_cast<long long>(bpt) << std::setw(11) << fixed(tps, 1) << std::setw(10) << fixed(loss, 4)
              << "   " << jpt.label() << "\n";
    js << (first ? "" : ", ") << "{\"format\": " << json_string(name) << ", \"bytes_per_token\": " << jnum(bpt)
       << ", \"tokens_per_s\": " << jnum(tps) << ", \"val_loss\": " << jnum(loss) << ", \"joules_per_token\": "
       << jnum(jpt.joules) << ", \"joules_kind\": "
       << json_string(jpt.kind == en::JoulesPerToken::Kind::measured ? "measured" : "estimate") << "}";
    first = false;
  }
  js << "]";
  const double llc = static_cast<double>(kernels::last_level_cache_bytes());
  if (!measured)
    std::cout << "  The estimates charge a DRAM fetch for every weight byte. "
              << (largest_bpt <= llc ? "This model's weights (" + fixed(largest_bpt / 1e6, 1) + " MB at most) fit in the "
                                       "last-level cache (" + fixed(llc / 1e6, 1) + " MB), where a byte costs\n  far "
                                       "less: for it they are an upper bound; for models beyond the cache, the right "
                                       "order.\n"
                                     : std::string("The weights exceed the last-level cache: that is what a step reads.\n"));

  // 3. a training step of the same model (lesson 08's step: forward, backward, clip, AdamW)
  {
    gpt::TrainOptions o;
    o.n_layer = c.n_layer, o.n_head = c.n_head, o.n_embd = c.n_embd, o.block_size = c.block_size;
    o.batch_size = opts.quick ? 2 : 8;
    const int step_iters = opts.quick ? 2 : 10;
    const double step_tokens = static_cast<double>(o.batch_size) * o.block_size;
    const double P = static_cast<double>(gpt::num_parameters(c));
    std::cout << "\n3. One training step of the same model (batch " << o.batch_size << " x " << o.block_size
              << ", forward + backward + AdamW, cpu backend)\n";
    en::JoulesPerToken per_step{};
    double ms = 0.0;
    if (measured) {
      meter.start();
      ms = gpt::time_train_step(o, "cpu", step_iters, 1);
      const en::Measurement m = meter.stop();
      per_step = en::per_token(m, step_iters + 1.0);  // every step run inside the interval, warm-up included
      std::cout << "  " << fixed(ms, 1) << " ms per step; " << per_step.joules
                << " J per step (measured; the interval also holds the model's set-up)\n";
    } else {
      ms = gpt::time_train_step(o, "cpu", step_iters, 1);
      // 6 P FLOPs (3 P multiply-adds) per token; AdamW reads and writes weights, gradients and
      // both moments (16 bytes each way per parameter); the activations' traffic is not counted
      const en::Estimate e = en::estimate_joules(3.0 * P * step_tokens, en::Precision::fp32, 32.0 * P);
      per_step = en::per_token(e, 1.0);
      std::cout << "  " << fixed(ms, 1) << " ms per step; " << per_step.joules
                << " J per step (estimate: 3 P multiply-adds per token + 32 bytes per parameter from DRAM; activations not "
                   "counted: a lower bound)\n";
    }
    js << ", \"train_step\": {\"ms\": " << jnum(ms) << ", \"joules\": " << jnum(per_step.joules)
       << ", \"joules_kind\": "
       << json_string(per_step.kind == en::JoulesPerToken::Kind::measured ? "measured" : "estimate") << "}";
  }

  std::cout << "\n4. The energy roofline (an estimate from a stated model, per token at batch 1)\n\n";
  const double P = matrix_weights;
  en::write_roofline(std::cout, P, en::energy_roofline(P));
  std::cout << "\n";
  en::write_roofline(std::cout, 7e9, en::energy_roofline(7e9));
  js << ", \"roofline_7b\": [";
  const std::vector<en::RooflineRow> rows = en::energy_roofline(7e9);
  for (size_t i = 0; i < rows.size(); ++i)
    js << (i ? ", " : "") << "{\"format\": " << json_string(rows[i].format.name) << ", \"bytes_per_token\": "
       << jnum(rows[i].bytes_per_token) << ", \"joules\": " << jnum(rows[i].energy.joules())
       << ", \"fetch_share\": " << jnum(rows[i].fetch_share) << ", \"balance_batch\": " << jnum(rows[i].balance_batch)
       << "}";
  js << "]}";
  lessons::record_part("energy", js.str());
  return 0;
}

}  // namespace lesson15
