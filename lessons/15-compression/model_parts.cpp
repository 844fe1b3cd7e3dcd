// Lesson 15, parts w8a8, gptq and kv: lesson 10's trained model with its arithmetic changed.
//
//   w8a8  the Linear layers' inputs: how far their largest channels stand out (gpt/compress.h:
//         outlier_stats); validation loss (and bits per character) of fp32, weight-only int8
//         (lesson 10), W8A8 without smoothing and with SmoothQuant at several alphas, every
//         W8A8 number computed by the integer kernels (kernels::w8a8_linear); decoding tokens/s
//         of int8 and W8A8 with gpt::Decoder at batch 1
//   gptq  every block Linear at 4 and 3 bits (groups of 32), round-to-nearest against GPTQ:
//         loss change and seconds to quantise
//   kv    an int8 KV cache: bytes per token for this model and for GPT-2 124M and a 7B Llama,
//         and the validation loss with the cache's rounding at several context lengths
#include <omp.h>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/compress.h"
#include "gpt/infer.h"
#include "gpt/model.h"
#include "gpt/train.h"
#include "kernels/clock.h"
#include "kernels/decode.h"
#include "kernels/harness.h"
#include "lessons/15-compression/compression_lesson.h"
#include "nn/check.h"

namespace lesson15 {

namespace {

using kernels::harness::json_string;

std::string fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

const char* linear_name(gpt::Linear w) {
  switch (w) {
    case gpt::Linear::qkv: return "qkv";
    case gpt::Linear::attproj: return "attn proj";
    case gpt::Linear::fc: return "fc";
    case gpt::Linear::fcproj: return "mlp proj";
  }
  return "?";
}

struct EvalSizes {
  int B, T, iters, cal_batches;
};
EvalSizes eval_sizes(const Options& opts, const gpt::GPTConfig& c) {
  return opts.quick ? EvalSizes{4, c.block_size, 4, 4} : EvalSizes{16, c.block_size, 20, 16};
}

}  // namespace

int run_w8a8_part(const Options& opts) {
  kernels::warn_if_busy(std::cout);
  Target t = load_target(opts);
  const gpt::GPT& model = t.ck.model;
  const gpt::GPTConfig& c = model.config;
  auto be = gpt::make_backend("cpu", "fp32");
  const EvalSizes es = eval_sizes(opts, c);
  std::cout << "Part w8a8: lesson 10's model (" << c.n_layer << " layers, C " << c.n_embd << ", "
            << gpt::num_parameters(c) << " parameters) with int8 activations too.\n\n"
            << "1. The Linear layers' inputs over " << es.cal_batches << " calibration batches of " << es.B << " x "
            << es.T << " (training split)\n";
  const gpt::Calibration cal = gpt::calibrate(model, *be, t.train, es.B, es.T, es.cal_batches, opts.seed, false);
  std::cout << "  " << std::left << std::setw(7) << "layer" << std::setw(11) << "Linear" << std::right << std::setw(16)
            << "max/median ch." << std::setw(11) << "kurtosis" << std::setw(14) << "ch. > 6 sigma" << "\n";
  std::ostringstream js;
  js << "{\"params\": " << gpt::num_parameters(c) << ", \"outliers\": [";
  double worst_ratio = 0.0;
  std::string worst_name;
  for (int l = 0; l < c.n_layer; ++l)
    for (gpt::Linear w : {gpt::Linear::qkv, gpt::Linear::attproj, gpt::Linear::fc, gpt::Linear::fcproj}) {
      const gpt::OutlierStats o = gpt::outlier_stats(cal.at(w, l));
      std::cout << "  " << std::left << std::setw(7) << l << std::setw(11) << linear_name(w) << std::right
                << std::setw(16) << fixed(o.max_over_median, 1) << std::setw(11) << fixed(o.kurtosis, 1)
                << std::setw(13) << fixed(100.0 * o.frac_6sigma, 1) << "%\n";
      js << (l == 0 && w == gpt::Linear::qkv ? "" : ", ") << "{\"layer\": " << l << ", \"linear\": "
         << json_string(linear_name(w)) << ", \"max_over_median\": " << jnum(o.max_over_median)
         << ", \"kurtosis\": " << jnum(o.kurtosis) << ", \"frac_6sigma\": " << jnum(o.frac_6sigma) << "}";
      if (o.max_over_median > worst_ratio) worst_ratio = o.max_over_median, worst_name = std::to_string(l) + " " + linear_name(w);
    }
  js << "]";
  std::cout << "  The input whose largest channel stands out most: layer " << worst_name << ", "
            << fixed(worst_ratio, 1) << "x its median channel: per-token int8 leaves that median channel about "
            << fixed(127.0 / worst_ratio, 0) << " of 127 levels.\n\n";

  std::cout << "2. Validation loss (" << es.iters << " batches of " << es.B << " x " << es.T << ", " << t.corpus
            << "), and bits per character = loss / ln 2\n";
  struct Row {
    std::string what;
    double loss;
  };
  std::vector<Row> rows;
  const float fp32 = gpt::evaluate_compressed(model, *be, t.val, es.B, es.T, es.iters, opts.seed, 3, {});
  rows.push_back({"fp32", fp32});
  {
    const gpt::GPT i8 = gpt::dequantized_copy(model, kernels::WeightFormat::int8);
    rows.push_back({"int8 weights (lesson 10)", gpt::evaluate_compressed(i8, *be, t.val, es.B, es.T, es.iters, opts.seed, 3, {})});
  }
  gpt::CompressedEval w8;
  w8.w8a8 = true;
  rows.push_back({"W8A8, no smoothing", gpt::evaluate_compressed(model, *be, t.val, es.B, es.T, es.iters, opts.seed, 3, w8)});
  const std::vector<float> alphas = opts.quick ? std::vector<float>{0.5f} : std::vector<float>{0.25f, 0.5f, 0.75f};
  double best_loss = 1e30;
  float best_alpha = 0.5f;
  for (float a : alphas) {
    gpt::GPT sm = gpt::gpt_move_to(model, gpt::host_memory());
    gpt::smooth_model(sm, cal, a);
    const float l = gpt::evaluate_compressed(sm, *be, t.val, es.B, es.T, es.iters, opts.seed, 3, w8);
    rows.push_back({"W8A8, SmoothQuant alpha " + fixed(a, 2), l});
    if (l < best_loss) best_loss = l, best_alpha = a;
  }
  std::cout << "  " << std::left << std::setw(30) << "" << std::right << std::setw(10) << "val loss" << std::setw(10)
            << "bpc" << std::setw(11) << "change" << "\n";
  js << ", \"loss\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::cout << "  " << std::left << std::setw(30) << r.what << std::right << std::setw(10) << fixed(r.loss, 4)
              << std::setw(10) << fixed(r.loss / std::log(2.0), 4) << std::setw(11)
              << (r.loss - fp32 >= 0 ? "+" : "") + fixed(r.loss - fp32, 4) << "\n";
    js << (i ? ", " : "") << "{\"what\": " << json_string(r.what) << ", \"val_loss\": " << jnum(r.loss)
       << ", \"bpc\": " << jnum(r.loss / std::log(2.0)) << "}";
  }
  js << "]";
  const double plain = rows[2].loss - fp32, smoothed = best_loss - fp32;
  std::cout << "  W8A8 costs " << fixed(plain, 4) << " in loss without smoothing and " << fixed(smoothed, 4)
            << " with the best alpha (" << fixed(best_alpha, 2) << "): smoothing "
            << (smoothed < plain ? "lowers" : "does not lower") << " the price on this model.\n\n";

  // 3. decoding speed
  const int tokens = opts.quick ? 32 : 256;
  std::cout << "3. Decoding at batch 1 (gpt::Decoder, cpu backend, " << omp_get_max_threads() << " threads, " << tokens
            << " tokens), best of 3\n";
  js << ", \"decode\": [";
  double tps_int8 = 0.0, tps_w8a8 = 0.0;
  bool first = true;
  for (const char* name : {"fp32", "int8", "w8a8"}) {
    kernels::WeightFormat f;
    try {
      f = kernels::parse_format(name);
    } catch (const std::invalid_argument&) {
      std::cout << "  " << name << ": not a format of this build\n";
      continue;
    }
    gpt::GPT src = gpt::gpt_move_to(model, gpt::host_memory());
    if (std::string(name) == "w8a8") gpt::smooth_model(src, cal, best_alpha);
    const gpt::InferenceModel im = gpt::pack_model(src, f, be->memory());
    const double tps = decode_tokens_per_s(im, *be, tokens, opts.seed);
    std::cout << "  " << std::left << std::setw(8) << name << std::right << std::setw(12) << fixed(tps, 1)
              << " tokens/s   " << im.weight_bytes_per_token() << " bytes/token\n";
    js << (first ? "" : ", ") << "{\"format\": " << json_string(name) << ", \"tokens_per_s\": " << jnum(tps)
       << ", \"bytes_per_token\": " << im.weight_bytes_per_token() << "}";
    first = false;
    if (std::string(name) == "int8") tps_int8 = tps;
    if (std::string(name) == "w8a8") tps_w8a8 = tps;
  }
  js << "]";
  if (tps_int8 > 0 && tps_w8a8 > 0) {
    std::cout << "  W8A8 decodes at " << fixed(tps_w8a8 / tps_int8, 2) << "x weight-only int8's tokens/s: the goal (W8A8 "
              << "beats int8) " << (tps_w8a8 > tps_int8 ? "holds" : "does NOT hold") << " here.\n";
    js << ", \"w8a8_over_int8\": " << jnum(tps_w8a8 / tps_int8);
  }
  js << ", \"best_alpha\": " << jnum(best_alpha) << "}";
  lessons::record_part("w8a8", js.str());
  return 0;
}

int run_gptq_part(const Options& opts) {
  Target t = load_target(opts);
  const gpt::GPT& model = t.ck.model;
  const gpt::GPTConfig& c = model.config;
  auto be = gpt::make_backend("cpu", "fp32");
  const EvalSizes es = eval_sizes(opts, c);
  std::cout << "Part gptq: every block Linear of lesson 10's model rounded to 4 and 3 bits (one scale per group of "
               "32 weights of a row)\n"
            << "by round-to-nearest (RTN) and by GPTQ (" << es.cal_batches << " calibration batches of " << es.B
            << " x " << es.T << ", training split).\n\n";
  const gpt::Calibration cal = gpt::calibrate(model, *be, t.train, es.B, es.T, es.cal_batches, opts.seed, true);
  const float fp32 = gpt::evaluate_compressed(model, *be, t.val, es.B, es.T, es.iters, opts.seed, 3, {});
  std::cout << "  fp32 val loss " << fixed(fp32, 4) << "\n  " << std::left << std::setw(8) << "bits" << std::setw(8)
            << "method" << std::right << std::setw(10) << "val loss" << std::setw(10) << "change" << std::setw(12)
            << "seconds" << "\n";
  std::ostringstream js;
  js << "{\"fp32_val_loss\": " << jnum(fp32) << ", \"rows\": [";
  bool first = true;
  for (int bits : {4, 3}) {
    double change[2] = {0, 0};
    for (int g = 0; g < 2; ++g) {
      gpt::GPT q = gpt::gpt_move_to(model, gpt::host_memory());
      gpt::GptqOptions o;
      o.bits = bits;
      o.group = 32;
      o.gptq = g == 1;
      const double secs = gpt::gptq_model(q, cal, o);
      const float loss = gpt::evaluate_compressed(q, *be, t.val, es.B, es.T, es.iters, opts.seed, 3, {});
      change[g] = loss - fp32;
      std::cout << "  " << std::left << std::setw(8) << ("int" + std::to_string(bits)) << std::setw(8)
                << (g ? "GPTQ" : "RTN") << std::right << std::setw(10) << fixed(loss, 4) << std::setw(10)
                << (loss - fp32 >= 0 ? "+" : "") + fixed(loss - fp32, 4) << std::setw(12) << fixed(secs, 3) << "\n";
      js << (first ? "" : ", ") << "{\"bits\": " << bits << ", \"method\": " << json_string(g ? "gptq" : "rtn")
         << ", \"val_loss\": " << jnum(loss) << ", \"seconds\": " << jnum(secs) << "}";
      first = false;
    }
    std::cout << "  int" << bits << ": GPTQ's loss change " << fixed(change[1], 4) << " against RTN's " << fixed(change[0], 4)
              << ": GPTQ is " << (change[1] < change[0] ? "better" : "not better") << " here\n";
  }
  js << "]}";
  lessons::record_part("gptq", js.str());
  return 0;
}

int run_kv_part(const Options& opts) {
  Target t = load_target(opts);
  const gpt::GPT& model = t.ck.model;
  const gpt::GPTConfig& c = model.config;
  auto be = gpt::make_backend("cpu", "fp32");
  const EvalSizes es = eval_sizes(opts, c);
  std::cout << "Part kv: the KV cache in int8 (one float scale per head and position), bytes and loss.\n\n"
            << "1. Bytes per token of context (all layers, K and V)\n";
  std::ostringstream js;
  js << "{\"bytes\": [";
  struct Named {
    std::string name;
    gpt::GPTConfig config;
    int context;
  };
  gpt::GPTConfig gpt2;
  gpt2.n_layer = 12, gpt2.n_head = 12, gpt2.n_embd = 768, gpt2.block_size = 1024, gpt2.vocab_size = 50257;
  gpt::GPTConfig llama7b = gpt2;
  llama7b.n_layer = 32, llama7b.n_head = 32, llama7b.n_embd = 4096, llama7b.block_size = 4096;
  const std::vector<Named> models = {{"this model", c, c.block_size}, {"GPT-2 124M", gpt2, 1024},
                                     {"7B (32 layers, C 4096, MHA)", llama7b, 4096}};
  for (size_t i = 0; i < models.size(); ++i) {
    const Named& m = models[i];
    const int64_t f = gpt::kv_bytes_per_token(m.config, false), q = gpt::kv_bytes_per_token(m.config, true);
    const double fd = static_cast<double>(f), qd = static_cast<double>(q), ctx = static_cast<double>(m.context);
    std::cout << "  " << std::left << std::setw(24) << m.name << std::right << std::setw(10) << f << " B fp32"
              << std::setw(10) << q << " B int8  (" << fixed(fd / qd, 2) << "x less; a full " << m.context
              << "-token context: " << fixed(fd * ctx / 1e6, 1) << " -> " << fixed(qd * ctx / 1e6, 1)
              << " MB per sequence)\n";
    js << (i ? ", " : "") << "{\"model\": " << json_string(m.name) << ", \"fp32\": " << f << ", \"int8\": " << q
       << ", \"context\": " << m.context << "}";
  }
  js << "], \"loss\": [";
  std::cout << "\n2. Validation loss with the cache's rounding, by context length (windows of T tokens)\n  "
            << std::left << std::setw(8) << "T" << std::right << std::setw(12) << "fp32" << std::setw(12) << "int8 KV"
            << std::setw(11) << "change" << "\n";
  gpt::CompressedEval kv;
  kv.kv_int8 = true;
  bool first = true;
  for (int T = 16; T <= c.block_size; T *= 2) {
    const int B = std::max(1, es.B * es.T / T);
    const float f = gpt::evaluate_compressed(model, *be, t.val, B, T, es.iters, opts.seed, 3, {});
    const float q = gpt::evaluate_compressed(model, *be, t.val, B, T, es.iters, opts.seed, 3, kv);
    std::cout << "  " << std::left << std::setw(8) << T << std::right << std::setw(12) << fixed(f, 4) << std::setw(12)
              << fixed(q, 4) << std::setw(11) << (q - f >= 0 ? "+" : "") + fixed(q - f, 5) << "\n";
    js << (first ? "" : ", ") << "{\"T\": " << T << ", \"fp32\": " << jnum(f) << ", \"int8\": " << jnum(q) << "}";
    first = false;
  }
  js << "]}";
  std::cout << "  (This model's context is " << c.block_size << " tokens: longer contexts need a model trained on "
               "them.)\n";
  lessons::record_part("kv", js.str());
  return 0;
}

}  // namespace lesson15
