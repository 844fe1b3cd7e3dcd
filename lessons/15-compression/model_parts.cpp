// Lesson 15, parts w8a8, gptq and kv: lesson 10's trained model with its arithmetic changed.
//
//   w8a8  the Linear layers' inputs: how far their largest channels stand out (gpt/compress.h:
//         outlier_stats); validation loss (and bits per character) of fp32, weight-only int8
//         (lesson 10), W8A8 without smoothing and with SmoothQuant at several alphas, every
//         W8A8 number computed by the integer kernels (kernels::w8a8_linear); decoding tokens/s
//         of int8 and W8A8 with gpt::Decoder at batch 1
//   gptq  every block Linear at 4 and 3 bits (groups of 32), round-to-nearest against GPTQ:
//         loss change and seconds to quantise
//   kv    an int8 KV cache: bytes per token for this model and for GPT-2 124M and a 7B Llama
//         (and as gpt::Decoder allocates them), the validation loss with the cache's rounding at
//         several context lengths, decoding tokens/s with the real int8 cache (gpt::KvCache::int8)
//         against fp32 at several cache positions, and all of it again on a small model trained
//         with a context of 1024 (loss by context length and by position band)
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
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
#include "nn/rng.h"

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
  std::cout << "Part w8a8: " << t.name << " (" << c.n_layer << " layers, C " << c.n_embd << ", "
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
  std::cout << "Part gptq: every block Linear of " << t.name << " rounded to 4 and 3 bits (one scale per group of "
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
  std::vector<float> gptq_int4;  // GPTQ's int4 weights, block Linears in order (the packing check below)
  for (int bits : {4, 3}) {
    double change[2] = {0, 0};
    for (int g = 0; g < 2; ++g) {
      gpt::GPT q = gpt::gpt_move_to(model, gpt::host_memory());
      gpt::GptqOptions o;
      o.bits = bits;
      o.group = 32;
      o.gptq = g == 1;
      const double secs = gpt::gptq_model(q, cal, o);
      if (bits == 4 && g == 1) {
        // layer by layer, in the decoder's order: qkv, attn proj, fc, mlp proj
        for (int l = 0; l < c.n_layer; ++l) {
          const gpt::ParameterTensors p = gpt::layer_params(q.params, c, l);
          const int C = c.n_embd;
          const std::pair<const float*, int64_t> mats[] = {{p.qkvw, int64_t{gpt::qkv_channels(c)} * C},
                                                           {p.attprojw, int64_t{C} * C},
                                                           {p.fcw, int64_t{gpt::fc_channels(c)} * C},
                                                           {p.fcprojw, int64_t{C} * gpt::mlp_hidden(c)}};
          for (const auto& [w, n] : mats) gptq_int4.insert(gptq_int4.end(), w, w + n);
        }
      }
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
  js << "]";
  // GPTQ's int4 integers and scales straight into the decoder's int4 format (gpt::gptq_pack_int4),
  // checked against the GPTQ model just evaluated, then decoded: what the loss above costs in
  // bytes and speed. RTN's int4 is pack_model's.
  {
    gpt::GptqOptions o;
    o.bits = 4;
    o.group = kernels::kInt4Group;
    const gpt::InferenceModel packed = gpt::gptq_pack_int4(model, cal, o);
    size_t at = 0, differ = 0;
    for (int l = 0; l < c.n_layer; ++l) {
      for (gpt::Linear w : {gpt::Linear::qkv, gpt::Linear::attproj, gpt::Linear::fc, gpt::Linear::fcproj}) {
        const kernels::PackedWeights& p = packed.linear(w, l);
        std::vector<float> u(static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols));
        kernels::unpack_weights(p.view(), u.data());
        for (float x : u) differ += at < gptq_int4.size() && x == gptq_int4[at++] ? 0 : 1;
      }
    }
    NN_CHECK(differ == 0 && at == gptq_int4.size(), "gptq part: the packed int4 model is not GPTQ's (" << differ
                                                         << " weights differ): a bug in gptq_pack_int4");
    const gpt::InferenceModel rtn = gpt::pack_model(model, kernels::WeightFormat::int4);
    const gpt::InferenceModel f32 = gpt::pack_model(model, kernels::WeightFormat::f32);
    const int tokens = opts.quick ? 32 : 256;
    const double tps_gptq = decode_tokens_per_s(packed, *be, tokens, opts.seed);
    const double tps_rtn = decode_tokens_per_s(rtn, *be, tokens, opts.seed);
    const double tps_f32 = decode_tokens_per_s(f32, *be, tokens, opts.seed);
    std::cout << "\n  GPTQ int4 packed for the decoder as GPTQ chose it (gpt::gptq_pack_int4): all "
              << gptq_int4.size() << " block weights\n  unpacked equal the GPTQ model above; decoding at batch 1 ("
              << tokens << " tokens, best of 3):\n"
              << "  " << std::left << std::setw(12) << "weights" << std::right << std::setw(16) << "bytes/token"
              << std::setw(12) << "tokens/s\n";
    auto row = [&](const char* name, const gpt::InferenceModel& im, double tps) {
      std::cout << "  " << std::left << std::setw(12) << name << std::right << std::setw(16)
                << im.weight_bytes_per_token() << std::setw(12) << fixed(tps, 0) << "\n";
    };
    row("fp32", f32, tps_f32);
    row("int4 RTN", rtn, tps_rtn);
    row("int4 GPTQ", packed, tps_gptq);
    js << ", \"packed\": {\"weights_checked\": " << gptq_int4.size() << ", \"bytes_per_token\": {\"fp32\": "
       << f32.weight_bytes_per_token() << ", \"int4_rtn\": " << rtn.weight_bytes_per_token()
       << ", \"int4_gptq\": " << packed.weight_bytes_per_token() << "}, \"tokens_per_s\": {\"fp32\": "
       << jnum(tps_f32) << ", \"int4_rtn\": " << jnum(tps_rtn) << ", \"int4_gptq\": " << jnum(tps_gptq) << "}}";
  }
  js << "}";
  lessons::record_part("gptq", js.str());
  return 0;
}

namespace {

// ---- part kv's helpers: the real int8 cache (gpt::Decoder with gpt::KvCache::int8) ------------

namespace fs = std::filesystem;

// Seconds of k single steps at positions start .. start+k-1 (the cache already holds start
// positions), then rewound to start so the same steps can be timed again.
double time_steps(gpt::Decoder& dec, const std::vector<int32_t>& ids, int start, int k) {
  const double t0 = kernels::now_seconds();
  for (int i = 0; i < k; ++i) dec.step(&ids[static_cast<size_t>(start + i)], 1, 1);
  const double sec = kernels::now_seconds() - t0;
  dec.rewind(start);
  return sec;
}

struct PositionSpeed {
  int end;            // the cache holds up to this many positions during the timed steps
  double f32, int8;   // tokens/s
};
// Decoding speed at batch 1, fp32 against int8 cache, with the cache holding about `end`
// positions for each of `ends` (each in [k, block_size]): a pair of Decoders per position,
// both filled with ids[0, end - k) in one prefill; then, round after round, k single steps
// (positions end-k .. end-1) timed and rewound, fp32 then int8, position after position. The
// rounds are spread over the whole measurement, so a slow spell of a shared machine spoils
// a few rounds of every position rather than all of one; one warm-up round, then the best of
// `reps`, in tokens per second.
std::vector<PositionSpeed> speed_by_position(const gpt::InferenceModel& im, gpt::Backend& be,
                                             const std::vector<int32_t>& ids, const std::vector<int>& ends, int k,
                                             int reps) {
  std::vector<gpt::Decoder> df, dq;
  for (const int e : ends) {
    df.emplace_back(im, be, 1, gpt::KvCache::f32);
    dq.emplace_back(im, be, 1, gpt::KvCache::int8);
    if (e > k) {
      df.back().step(ids.data(), 1, e - k);
      dq.back().step(ids.data(), 1, e - k);
    }
  }
  std::vector<PositionSpeed> out;
  for (const int e : ends) out.push_back({e, 1e30, 1e30});  // best seconds first, tokens/s below
  for (int r = 0; r <= reps; ++r)
    for (size_t i = 0; i < ends.size(); ++i) {
      const double f = time_steps(df[i], ids, ends[i] - k, k), q = time_steps(dq[i], ids, ends[i] - k, k);
      if (r == 0) continue;  // the warm-up
      out[i].f32 = std::min(out[i].f32, f);
      out[i].int8 = std::min(out[i].int8, q);
    }
  for (PositionSpeed& p : out) p.f32 = k / p.f32, p.int8 = k / p.int8;
  return out;
}

void print_speeds(const std::vector<PositionSpeed>& v, std::ostringstream& js) {
  std::cout << "  " << std::left << std::setw(12) << "positions" << std::right << std::setw(14) << "fp32 tok/s"
            << std::setw(14) << "int8 tok/s" << std::setw(12) << "int8/fp32" << "\n";
  js << "[";
  for (size_t i = 0; i < v.size(); ++i) {
    const PositionSpeed& p = v[i];
    std::cout << "  " << std::left << std::setw(12) << ("..." + std::to_string(p.end)) << std::right << std::setw(14)
              << fixed(p.f32, 0) << std::setw(14) << fixed(p.int8, 0) << std::setw(11)
              << fixed(p.f32 > 0 ? p.int8 / p.f32 : 0.0, 2) << "x\n";
    js << (i ? ", " : "") << "{\"end\": " << p.end << ", \"fp32\": " << jnum(p.f32) << ", \"int8\": " << jnum(p.int8)
       << "}";
  }
  js << "]";
}

// The long-context model: trained once into `dir` (reused when its checkpoint is there and
// has this config's context), like lesson 10's load_or_train.
gpt::LoadedCheckpoint load_or_train_long(const Options& opts, const std::string& dir, bool* trained, double* seconds) {
  gpt::TrainOptions t;
  t.data = opts.data;
  t.threads = opts.threads;
  t.seed = opts.seed;
  t.quiet = true;
  t.log = "none";
  t.out_dir = dir;
  t.dropout = 0.0f;
  t.sample_tokens = 0;
  // a context of 1024: lesson 11's block (RoPE: no position table to learn for 1024 rows;
  // flash attention: no (T, T) maps; 2 key/value heads, so the cache is grouped-query), 4
  // layers, C 128; a short run (400 steps of 4 x 1024 tokens: 1.6M, about lesson 08's 2000 x
  // 12 x 64), about 3 minutes on 2 cores. Measured on this corpus: val loss 2.01 after these
  // 400 steps, where lesson 08's GPT-2 block (a learned wpe of 1024 rows, lr 2e-3) was still
  // at 2.48 after the same steps and twice the time
  t.arch = "llama", t.n_kv_head = 2, t.bias = false;
  t.n_layer = 4, t.n_head = 4, t.n_embd = 128, t.block_size = 1024;
  t.batch_size = 4, t.max_iters = 400, t.lr = 1e-3f, t.min_lr = 1e-4f, t.warmup_iters = 20;
  if (opts.quick) t.n_layer = 2, t.n_head = 2, t.n_kv_head = 1, t.n_embd = 64, t.block_size = 128, t.max_iters = 30, t.warmup_iters = 3;
  t.eval_interval = t.max_iters;
  t.eval_iters = opts.quick ? 2 : 5;
  t.overwrite = true;
  const fs::path path = fs::path(dir) / "best.safetensors";
  *trained = false;
  *seconds = 0.0;
  if (fs::exists(path)) {
    gpt::LoadedCheckpoint ck = gpt::load_checkpoint(path.string());
    const gpt::GPTConfig& c = ck.model.config;
    if (c.block_size == t.block_size && c.n_layer == t.n_layer && c.n_embd == t.n_embd && ck.state.step == t.max_iters &&
        c.arch == gpt::Arch::llama)
      return ck;
  }
  std::cout << "  training it (" << t.n_layer << " layers, C " << t.n_embd << ", context " << t.block_size << ", "
            << t.batch_size << " x " << t.block_size << " tokens per step, " << t.max_iters << " steps) into " << dir
            << "; reused next time\n";
  std::ostringstream log;
  const gpt::TrainResult r = gpt::train(t, log);
  *trained = true;
  *seconds = r.seconds;
  std::cout << "  trained in " << fixed(r.seconds, 1) << " s, val loss " << fixed(r.final_val_loss, 4) << "\n";
  return gpt::load_checkpoint(path.string());
}

struct BandLoss {
  int lo, hi;  // positions [lo, hi) of a window
  double f32 = 0.0, int8 = 0.0;
  int64_t count = 0;
};
// Mean next-token loss by position within windows of block_size tokens (`windows` of them,
// drawn from `tokens` with `seed`), fp32 and with the int8 cache's rounding
// (gpt::compressed_logits with kv_int8: the full forward, as the cache gives k and v back).
std::vector<BandLoss> loss_by_band(const gpt::GPT& model, gpt::Backend& be, const std::vector<int32_t>& tokens,
                                   int windows, uint64_t seed, const std::vector<int>& edges) {
  const int T = model.config.block_size, V = model.config.vocab_size;
  std::vector<BandLoss> bands;
  for (size_t i = 0; i + 1 < edges.size(); ++i) bands.push_back({edges[i], edges[i + 1]});
  NN_CHECK(tokens.size() > static_cast<size_t>(T) + 1, "part kv: the validation split is shorter than one window");
  nn::Rng rng(seed);
  gpt::CompressedEval q;
  q.kv_int8 = true;
  for (int w = 0; w < windows; ++w) {
    const auto start = static_cast<size_t>(rng.below(static_cast<uint32_t>(tokens.size() - static_cast<size_t>(T) - 1)));
    const int32_t* in = tokens.data() + start;
    for (int which = 0; which < 2; ++which) {
      const std::vector<float> logits = gpt::compressed_logits(model, be, in, 1, T, which ? q : gpt::CompressedEval{});
      for (int t = 0; t < T; ++t) {
        // loss_t = log sum_j exp(l_j) - l_target, in double, max subtracted
        const float* l = logits.data() + static_cast<size_t>(t) * static_cast<size_t>(V);
        double mx = l[0];
        for (int j = 1; j < V; ++j) mx = std::max(mx, static_cast<double>(l[j]));
        double sum = 0.0;
        for (int j = 0; j < V; ++j) sum += std::exp(static_cast<double>(l[j]) - mx);
        const double loss = mx + std::log(sum) - l[in[t + 1]];
        for (BandLoss& b : bands)
          if (t >= b.lo && t < b.hi) {
            (which ? b.int8 : b.f32) += loss;
            if (which == 0) ++b.count;
          }
      }
    }
  }
  for (BandLoss& b : bands)
    if (b.count > 0) b.f32 /= static_cast<double>(b.count), b.int8 /= static_cast<double>(b.count);
  return bands;
}

}  // namespace

int run_kv_part(const Options& opts) {
  kernels::warn_if_busy(std::cout);
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
  js << "]";
  // the same count, measured: what gpt::Decoder allocates for its cache, per token of context
  const gpt::InferenceModel im = gpt::pack_model(model, kernels::WeightFormat::f32, be->memory());
  {
    const gpt::Decoder df(im, *be, 1, gpt::KvCache::f32), dq(im, *be, 1, gpt::KvCache::int8);
    const double per_f = static_cast<double>(df.kv_cache_bytes()) / c.block_size;
    const double per_q = static_cast<double>(dq.kv_cache_bytes()) / c.block_size;
    std::cout << "  measured (gpt::Decoder::kv_cache_bytes / block_size, this model): " << fixed(per_f, 0)
              << " B fp32, " << fixed(per_q, 0) << " B int8 (" << fixed(per_f / per_q, 2) << "x)\n";
    js << ", \"measured_bytes_per_token\": {\"fp32\": " << jnum(per_f) << ", \"int8\": " << jnum(per_q) << "}";
  }
  js << ", \"loss\": [";
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
  js << "]";
  std::cout << "  (This model's context is " << c.block_size << " tokens: longer contexts in 4 below.)\n";

  // 3. decoding speed with the real int8 cache (gpt::Decoder, KvCache::int8), this model
  const int k = opts.quick ? 4 : 16, reps = opts.quick ? 3 : 15;
  std::cout << "\n3. Decoding tokens/s at batch 1, fp32 against int8 cache (gpt::Decoder, cpu backend, " << k
            << " steps timed ending at each position, best of " << reps << " rounds): " << t.name << "\n";
  std::vector<int32_t> ids(t.val.begin(), t.val.begin() + c.block_size);
  js << ", \"decode\": ";
  print_speeds(speed_by_position(im, *be, ids, {k, c.block_size / 2, c.block_size}, k, reps), js);

  // 4. a model with a long context
  const std::string dir = (fs::path(opts.bitnet_dir) / (opts.quick ? "kv-long-quick" : "kv-long")).string();
  std::cout << "\n4. A model trained on long contexts (" << dir << ")\n";
  bool trained = false;
  double train_s = 0.0;
  const gpt::LoadedCheckpoint lk = load_or_train_long(opts, dir, &trained, &train_s);
  const gpt::GPT& lm = lk.model;
  const gpt::GPTConfig& lc = lm.config;
  NN_CHECK(gpt::vocab_to_hex(lk.vocab) == gpt::vocab_to_hex(t.ck.vocab),
           "part kv: the long-context model in " << dir << " was trained on another text: delete it, or pass the same --data");
  std::cout << "  " << gpt::arch_name(lc.arch) << ", " << lc.n_layer << " layers, C " << lc.n_embd << ", "
            << gpt::kv_heads(lc) << " key/value heads of " << lc.n_head << ", context " << lc.block_size << ", "
            << gpt::num_parameters(lc) << " parameters" << (trained ? "" : " (reused)") << "\n";
  js << ", \"long\": {\"arch\": " << json_string(gpt::arch_name(lc.arch)) << ", \"n_kv_head\": " << gpt::kv_heads(lc)
     << ", \"n_layer\": " << lc.n_layer << ", \"n_embd\": " << lc.n_embd << ", \"block_size\": "
     << lc.block_size << ", \"params\": " << gpt::num_parameters(lc) << ", \"trained\": " << (trained ? "true" : "false")
     << ", \"train_seconds\": " << jnum(train_s) << ", \"loss\": [";
  std::cout << "  validation loss by context length (windows of T tokens)\n  " << std::left << std::setw(8) << "T"
            << std::right << std::setw(12) << "fp32" << std::setw(12) << "int8 KV" << std::setw(11) << "change" << "\n";
  const int tokens_per_batch = opts.quick ? 512 : 4096, iters = opts.quick ? 2 : 4;
  first = true;
  for (int T = opts.quick ? 32 : 128; T <= lc.block_size; T *= 2) {
    const int B = std::max(1, tokens_per_batch / T);
    const float f = gpt::evaluate_compressed(lm, *be, t.val, B, T, iters, opts.seed, 3, {});
    const float q = gpt::evaluate_compressed(lm, *be, t.val, B, T, iters, opts.seed, 3, kv);
    std::cout << "  " << std::left << std::setw(8) << T << std::right << std::setw(12) << fixed(f, 4) << std::setw(12)
              << fixed(q, 4) << std::setw(11) << (q - f >= 0 ? "+" : "") + fixed(q - f, 5) << "\n";
    js << (first ? "" : ", ") << "{\"T\": " << T << ", \"fp32\": " << jnum(f) << ", \"int8\": " << jnum(q) << "}";
    first = false;
  }
  js << "], \"bands\": [";
  const int windows = opts.quick ? 2 : 8;
  std::vector<int> edges = {0};
  for (int e = 32; e <= lc.block_size; e *= 2) edges.push_back(e);
  if (edges.back() != lc.block_size) edges.push_back(lc.block_size);
  std::cout << "  loss by position within " << windows << " windows of " << lc.block_size
            << " tokens (the later positions attend over more of the rounded cache)\n  " << std::left << std::setw(12)
            << "positions" << std::right << std::setw(12) << "fp32" << std::setw(12) << "int8 KV" << std::setw(11)
            << "change" << "\n";
  const std::vector<BandLoss> bands = loss_by_band(lm, *be, t.val, windows, opts.seed, edges);
  for (size_t i = 0; i < bands.size(); ++i) {
    const BandLoss& b = bands[i];
    std::cout << "  " << std::left << std::setw(12) << (std::to_string(b.lo) + ".." + std::to_string(b.hi - 1))
              << std::right << std::setw(12) << fixed(b.f32, 4) << std::setw(12) << fixed(b.int8, 4) << std::setw(11)
              << (b.int8 - b.f32 >= 0 ? "+" : "") + fixed(b.int8 - b.f32, 5) << "\n";
    js << (i ? ", " : "") << "{\"lo\": " << b.lo << ", \"hi\": " << b.hi << ", \"fp32\": " << jnum(b.f32)
       << ", \"int8\": " << jnum(b.int8) << "}";
  }
  js << "], \"decode\": ";
  const gpt::InferenceModel lim = gpt::pack_model(lm, kernels::WeightFormat::f32, be->memory());
  std::vector<int> ends;
  for (int e = 64; e <= lc.block_size; e *= 2) ends.push_back(e);
  if (ends.back() != lc.block_size) ends.push_back(lc.block_size);
  {
    const gpt::Decoder df(lim, *be, 1, gpt::KvCache::f32), dq(lim, *be, 1, gpt::KvCache::int8);
    std::cout << "  decoding tokens/s, fp32 against int8 cache (the cache: " << fixed(static_cast<double>(df.kv_cache_bytes()) / 1e6, 2)
              << " MB fp32, " << fixed(static_cast<double>(dq.kv_cache_bytes()) / 1e6, 2) << " MB int8 at " << lc.block_size
              << " positions; the weights read per token: " << fixed(static_cast<double>(lim.weight_bytes_per_token()) / 1e6, 2) << " MB)\n";
  }
  std::vector<int32_t> lids(t.val.begin(), t.val.begin() + lc.block_size);
  print_speeds(speed_by_position(lim, *be, lids, ends, k, reps), js);
  js << "}}";
  std::cout << "  (Timings on a shared machine swing: compare the two columns of a row, taken one after the other.)\n";
  lessons::record_part("kv", js.str());
  return 0;
}

}  // namespace lesson15
