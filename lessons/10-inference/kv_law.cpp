// Lesson 10, parts kv and law: what one generated token costs.
//
//   kv   Without a cache, token t costs a forward over the whole context: every matmul runs
//        on t rows and attention on a t x t map, O(t) weight work and O(t^2) attention per
//        token. With the KV cache (gpt/infer.h), token t runs every op on ONE row and
//        attends over the t cached keys and values: O(1) weight work plus O(t) attention.
//   law  At batch 1 a decode step reads every weight once and does 2 FLOPs with it: far
//        below any machine's FLOPs per byte, so its time is bytes / bandwidth and
//            tokens/s = bandwidth / bytes of weights per token.
//        Smaller weights (bf16, int8, int4) should be faster in proportion, and a batch of B
//        sequences reads the weights once for B tokens. Where that holds on the machine at
//        hand, and where it breaks, is computed from the measurements (law_conclusions).
#include <algorithm>
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
#include "kernels/ceilings.h"
#include "kernels/clock.h"
#include "kernels/harness.h"
#include "lessons/10-inference/inference_lesson.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace lesson10 {

namespace {

using i64 = int64_t;
using kernels::harness::json_number;
using kernels::harness::json_string;

std::vector<int32_t> random_ids(size_t n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
  return v;
}

// A GPT holding only its parameters (no gradients, no AdamW moments: a quarter of
// gpt_create's memory, what a 300M-parameter model needs to fit), uniform in +-0.05 and
// LayerNorm weights 1: random, as speed does not depend on the values. pack_model reads
// only the config, the slices and the parameter buffer.
gpt::GPT parameters_only_model(const gpt::GPTConfig& c, uint64_t seed) {
  gpt::GPT m;
  m.config = c;
  m.slices = gpt::param_slices(c);
  m.num_params = gpt::num_parameters(c);
  m.params_memory = gpt::Array<float>(gpt::host_memory(), static_cast<size_t>(m.num_params));
  nn::Rng rng(seed);
  for (float& x : m.params_memory) x = rng.uniform(-0.05f, 0.05f);
  for (const gpt::ParamSlice& s : m.slices) {
    if (s.spec->init == gpt::Init::ones) {  // the LayerNorm weights (gpt::kParams)
      std::fill(m.params_memory.begin() + s.offset, m.params_memory.begin() + s.offset + s.numel, 1.0f);
    }
  }
  return m;
}

// Seconds per decode step of B tokens (one per sequence) after a prefill of pos0: one untimed
// step, then steps until `seconds` have passed (at least min_steps, at most max_steps),
// rewinding to pos0 whenever the cache would run out.
double seconds_per_step(gpt::Decoder& dec, int B, int pos0, double seconds, int min_steps, int max_steps) {
  const int V = dec.model().config.vocab_size, maxT = dec.model().config.block_size;
  const std::vector<int32_t> ids = random_ids(static_cast<size_t>(B), V, 5);
  auto one = [&] {
    if (dec.pos() >= maxT) dec.rewind(pos0);
    dec.step(ids.data(), B, 1);
  };
  dec.reset();
  const std::vector<int32_t> prefix = random_ids(static_cast<size_t>(B) * static_cast<size_t>(pos0), V, 6);
  if (pos0 > 0) dec.step(prefix.data(), B, pos0);
  one();
  int steps = 0;
  const double t0 = kernels::now_seconds();
  double t = 0.0;
  while (steps < min_steps || (steps < max_steps && t < seconds)) {
    one();
    ++steps;
    t = kernels::now_seconds() - t0;
  }
  return t / steps;
}

std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

std::string mib(double bytes) { return fmt(bytes / (1 << 20), bytes < (1 << 20) ? 3 : 1) + " MiB"; }

}  // namespace

// ---- conclusions from the measurements -------------------------------------------------------

namespace {

std::string times(double ratio) { return fmt(ratio, ratio < 0.1 ? 3 : ratio < 10 ? 1 : 0) + "x"; }

}  // namespace

std::vector<std::string> kv_conclusions(const std::vector<KvPoint>& rows) {
  std::vector<std::string> out;
  if (rows.size() < 2) return out;
  const KvPoint& a = rows.front();
  const KvPoint& b = rows.back();
  const double grew_cache = b.ms_cache / a.ms_cache;
  const double grew_nocache = b.ms_nocache / a.ms_nocache;
  out.push_back("Measured here, from T = " + std::to_string(a.context) + " to T = " + std::to_string(b.context) + " (" +
                times(static_cast<double>(b.context) / a.context) + " the context): ms/token grew " + times(grew_cache) +
                " with the cache and " + times(grew_nocache) + " without;");
  if (grew_nocache > 2.0 * grew_cache) {
    out.push_back("the cached cost grows far more slowly, as the count above says, and at T = " + std::to_string(b.context) +
                  " the cache is " + times(b.ms_nocache / b.ms_cache) + " faster.");
  } else {
    out.push_back("the two columns grew alike here (the no-cache cost less than twice as fast): at these sizes the count "
                  "above does not describe this machine's times; at T = " + std::to_string(b.context) + " the cache is " +
                  times(b.ms_nocache / b.ms_cache) + " faster.");
  }
  return out;
}

std::vector<std::string> law_conclusions(const std::vector<LawPoint>& points, const std::vector<BatchPoint>& batch,
                                         double llc_bytes) {
  std::vector<std::string> out;
  const std::string llc = mib(llc_bytes);
  std::vector<const LawPoint*> dram, cache;
  for (const LawPoint& p : points) (p.in_cache ? cache : dram).push_back(&p);

  // 1. beyond the cache: what the law is about
  if (dram.empty()) {
    out.push_back("  - no model here is larger than the last-level cache (" + llc +
                  "): the DRAM law was not tested (larger models would test it).");
  } else {
    double lo = dram.front()->fraction, hi = lo;
    double largest = 0.0;
    for (const LawPoint* p : dram) {
      lo = std::min(lo, p->fraction);
      hi = std::max(hi, p->fraction);
      largest = std::max(largest, p->params);
    }
    const LawPoint* fp32 = nullptr;
    const LawPoint* int4 = nullptr;
    std::string name, per_format;
    for (const LawPoint* p : dram) {
      if (p->params != largest) continue;
      name = p->model;
      per_format += (per_format.empty() ? "" : ", ") + p->format + " " + fmt(p->fraction, 2);
      if (p->format == "fp32") fp32 = p;
      if (p->format == "int4") int4 = p;
    }
    out.push_back("  - models beyond the last-level cache (" + llc + "), whose every step streams the weights from DRAM: " +
                  std::to_string(dram.size()) + " points at " + fmt(lo, 2) + " to " + fmt(hi, 2) +
                  " of the law; the largest, " + name + ": " + per_format + ".");
    if (fp32 != nullptr && int4 != nullptr) {
      const double fewer = fp32->bytes_per_token / int4->bytes_per_token;
      const double faster = int4->tokens_per_s / fp32->tokens_per_s;
      if (int4->fraction < 0.5 * fp32->fraction) {
        out.push_back("    int4 read " + times(fewer) + " fewer bytes than fp32 there but ran only " + times(faster) +
                      " as fast: its unpacking, not the bytes, limits it on this machine.");
      } else {
        out.push_back("    int4 read " + times(fewer) + " fewer bytes than fp32 there and ran " + times(faster) +
                      " as fast: it keeps up with the bytes it saves.");
      }
    }
  }

  // 2. within the cache: read from cache after the first step, faster than DRAM
  if (!cache.empty()) {
    const LawPoint* best = cache.front();
    for (const LawPoint* p : cache) {
      if (p->fraction > best->fraction) best = p;
    }
    if (best->fraction > 1.0) {
      out.push_back("  - models whose weights fit in the last-level cache (" + llc +
                    ") are read from the cache after the first step and beat the DRAM law: up to " +
                    fmt(best->fraction, 2) + " of it (" + best->model + " " + best->format + ").");
    } else {
      out.push_back("  - models whose weights fit in the last-level cache (" + llc +
                    ") did NOT beat the DRAM law here: the highest fraction among them is " + fmt(best->fraction, 2) +
                    " (" + best->model + " " + best->format + "). Faster reads from the cache did not make up for "
                    "what else a step costs.");
    }
  }

  // 3. the smallest model: do its formats' bytes still set its speed?
  if (!points.empty()) {
    double smallest = points.front().params;
    for (const LawPoint& p : points) smallest = std::min(smallest, p.params);
    const LawPoint* most_bytes = nullptr;
    const LawPoint* fewest_bytes = nullptr;
    double tps_lo = 0.0, tps_hi = 0.0;
    for (const LawPoint& p : points) {
      if (p.params != smallest) continue;
      if (most_bytes == nullptr) {
        most_bytes = fewest_bytes = &p;
        tps_lo = tps_hi = p.tokens_per_s;
      }
      if (p.bytes_per_token > most_bytes->bytes_per_token) most_bytes = &p;
      if (p.bytes_per_token < fewest_bytes->bytes_per_token) fewest_bytes = &p;
      tps_lo = std::min(tps_lo, p.tokens_per_s);
      tps_hi = std::max(tps_hi, p.tokens_per_s);
    }
    const double fewer = most_bytes->bytes_per_token / fewest_bytes->bytes_per_token;
    const double faster = fewest_bytes->tokens_per_s / most_bytes->tokens_per_s;
    if (fewer >= 2.0) {
      const std::string what = "  - the smallest model, " + most_bytes->model + ": " + fewest_bytes->format + " reads " +
                               times(fewer) + " fewer bytes per token than " + most_bytes->format + " and ran " +
                               times(faster) + " as fast";
      if (faster < 0.5 * fewer) {
        out.push_back(what + " (all its formats: " + fmt(tps_lo, 0) + " to " + fmt(tps_hi, 0) +
                      " tokens/s): the bytes do not set its speed; a fixed cost per step (dozens of small ops, "
                      "thread wake-ups) does: overhead-bound.");
      } else {
        out.push_back(what + ": its speed still follows its bytes.");
      }
    }
  }

  // 4. batch > 1: the weights are read once per step for B tokens
  std::vector<std::string> formats;
  for (const BatchPoint& b : batch) {
    if (std::find(formats.begin(), formats.end(), b.format) == formats.end()) formats.push_back(b.format);
  }
  for (const std::string& f : formats) {
    const BatchPoint* first = nullptr;
    const BatchPoint* last = nullptr;
    for (const BatchPoint& b : batch) {
      if (b.format != f) continue;
      if (first == nullptr || b.batch < first->batch) first = &b;
      if (last == nullptr || b.batch > last->batch) last = &b;
    }
    if (first == nullptr || first == last) continue;
    const double kept = last->steps_per_s / first->steps_per_s;
    const double more_tokens = (last->batch * last->steps_per_s) / (first->batch * first->steps_per_s);
    const std::string range = "B = " + std::to_string(first->batch) + " to " + std::to_string(last->batch);
    const std::string ideal = times(static_cast<double>(last->batch) / first->batch);
    const std::string steps = "(" + fmt(first->steps_per_s, 1) + " -> " + fmt(last->steps_per_s, 1) + ")";
    if (kept > 1.1) {
      // A step of B sequences cannot be faster than a step of one: the smaller batch's figure is off.
      out.push_back("  - batch, " + f + ": steps/s ROSE from " + range + " " + steps + ", tokens/s grew " +
                    times(more_tokens) + " for " + ideal +
                    " the tokens per step: more work per step cannot take less time, so the smaller batch's figure "
                    "is off (timing noise: a busy machine? run the part again).");
    } else if (kept >= 0.75) {
      out.push_back("  - batch, " + f + ": steps/s falls little from " + range + " " + steps + " while tokens/s grows " +
                    times(more_tokens) + " (ideal " + ideal + "): the weights are read once per step whatever B.");
    } else {
      out.push_back("  - batch, " + f + ": steps/s falls from " + fmt(first->steps_per_s, 1) + " to " +
                    fmt(last->steps_per_s, 1) + " (to " + fmt(100.0 * kept, kept < 0.1 ? 1 : 0) + "%) from " + range +
                    ", so tokens/s grows only " + times(more_tokens) + " for " + ideal +
                    " the tokens per step: at these B, what grows with B (the B rows' arithmetic, each sequence's "
                    "cache), not the weight bytes, sets the step time.");
    }
  }
  return out;
}

// ---- part kv ---------------------------------------------------------------------------------------

int run_kv_part(const Options& opts) {
  kernels::warn_if_busy(std::cout);
  const int threads = gpt::use_threads(opts.threads);
  auto be = gpt::make_backend(opts.backend, "fp32");
  const gpt::TrainOptions target = model_options(opts, "target");
  gpt::GPTConfig c;
  c.vocab_size = 65;
  c.n_layer = target.n_layer;
  c.n_head = target.n_head;
  c.n_embd = target.n_embd;
  c.block_size = opts.quick ? 256 : 1024;
  std::vector<int> contexts = {32, 64, 128, 256, 512, 1024};
  contexts.erase(std::remove_if(contexts.begin(), contexts.end(), [&](int t) { return t > c.block_size; }),
                 contexts.end());
  const int k = opts.tokens > 0 ? opts.tokens : (opts.quick ? 3 : 8);  // tokens timed per context
  NN_CHECK(k < contexts.front(), "part kv: --tokens " << k << " must be below the shortest context " << contexts.front());

  std::cout << "Part kv: the KV cache. A random-weight model as wide as the target (" << c.n_layer << " layers, C "
            << c.n_embd << ", " << c.n_head << " heads), context up to " << c.block_size << ", " << be->name()
            << " backend, " << threads << " thread" << (threads == 1 ? "" : "s") << ".\n"
            << "For each context T: the last " << k << " tokens up to T generated with the cache (one row per op,\n"
            << "attention over the cached keys and values) and without (gpt_forward over the whole context per\n"
            << "token, as gpt::sample does); the logits of both compared at every one of those positions.\n\n";

  gpt::GPT host = gpt::gpt_create(c);
  gpt::gpt_init_weights(host, opts.seed);
  gpt::GPT model = gpt::gpt_move_to(host, be->memory());
  const gpt::InferenceModel im = gpt::pack_model(host, kernels::WeightFormat::f32, be->memory());
  gpt::Decoder dec(im, *be);
  const int V = c.vocab_size;
  const std::vector<int32_t> ids = random_ids(static_cast<size_t>(c.block_size), V, opts.seed + 1);
  std::vector<float> row(static_cast<size_t>(V));

  struct Row {
    int context;
    double ms_cache, ms_nocache;
  };
  std::vector<Row> rows;
  double max_diff = 0.0;
  std::cout << "  " << std::setw(8) << "context" << std::setw(16) << "ms/token cache" << std::setw(18)
            << "ms/token no cache" << std::setw(10) << "ratio" << std::setw(16) << "max |dlogit|" << "\n";
  for (int T : contexts) {
    // with the cache: a prefill up to T - k (untimed), then k single steps ending at T
    dec.reset();
    dec.step(ids.data(), 1, T - k);
    std::vector<std::vector<float>> cached;
    be->synchronize();
    double t0 = kernels::now_seconds();
    for (int t = T - k; t < T; ++t) cached.push_back(dec.step(&ids[static_cast<size_t>(t)], 1, 1));
    const double s_cache = (kernels::now_seconds() - t0) / k;
    // without: a forward over positions 0..t for each of the same k tokens
    double diff = 0.0;
    double s_nocache = 0.0;
    for (int i = 0; i < k; ++i) {
      const int t = T - k + i;
      t0 = kernels::now_seconds();
      gpt::gpt_forward(model, *be, ids.data(), nullptr, 1, t + 1);
      gpt::gpt_memory(model).to_host(row.data(), model.acts.logits + static_cast<i64>(t) * V, row.size() * sizeof(float));
      s_nocache += kernels::now_seconds() - t0;
      for (int v = 0; v < V; ++v) {
        diff = std::max(diff, static_cast<double>(std::fabs(row[static_cast<size_t>(v)] - cached[static_cast<size_t>(i)][static_cast<size_t>(v)])));
      }
    }
    s_nocache /= k;
    max_diff = std::max(max_diff, diff);
    rows.push_back({T, s_cache * 1e3, s_nocache * 1e3});
    std::cout << "  " << std::setw(8) << T << std::setw(16) << fmt(s_cache * 1e3, 3) << std::setw(18)
              << fmt(s_nocache * 1e3, 3) << std::setw(10) << fmt(s_nocache / s_cache, 1) << std::setw(16)
              << std::scientific << std::setprecision(2) << diff << std::defaultfloat << "\n";
  }
  std::cout << "\n  largest logit difference, cache vs no cache, over every position checked: " << std::scientific
            << std::setprecision(2) << max_diff << std::defaultfloat
            << " (float rounding: the same sums in another order)\n\n"
            << "Why: without the cache, token T redoes the whole context: every Linear layer on T rows\n"
            << "(~2 N T FLOPs, N the parameters) and attention on a T x T map, so a token costs O(T) and a\n"
            << "sequence O(T^2). With the cache each Linear runs on one row (2 N FLOPs: read every weight\n"
            << "once) and attention reads the T cached keys and values: O(T) attention on top of a\n"
            << "constant. The price is memory: the cache holds 2 L T C floats per sequence ("
            << mib(static_cast<double>(dec.kv_cache_bytes())) << " here at T = " << c.block_size << ").\n";
  std::vector<KvPoint> points;
  for (const Row& r : rows) points.push_back({r.context, r.ms_cache, r.ms_nocache});
  for (const std::string& line : kv_conclusions(points)) std::cout << line << "\n";

  std::ostringstream js;
  js << "{\"schema\": \"nnlab-lesson10/1\", \"part\": \"kv\", \"machine\": " << machine_json(opts, *be)
     << ", \"config\": {\"n_layer\": " << c.n_layer << ", \"n_head\": " << c.n_head << ", \"n_embd\": " << c.n_embd
     << ", \"block_size\": " << c.block_size << ", \"vocab_size\": " << c.vocab_size << "}, \"tokens_per_context\": " << k
     << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    js << (i ? ", " : "") << "{\"context\": " << rows[i].context << ", \"ms_per_token_cache\": "
       << json_number(rows[i].ms_cache) << ", \"ms_per_token_nocache\": " << json_number(rows[i].ms_nocache) << "}";
  }
  js << "], \"max_logit_diff\": " << json_number(max_diff) << "}";
  write_part_json(opts, "kv", js.str());
  return 0;
}

// ---- part law ------------------------------------------------------------------------------------

int run_law_part(const Options& opts) {
  kernels::warn_if_busy(std::cout);
  const int threads = gpt::use_threads(opts.threads);
  auto be = gpt::make_backend(opts.backend, "fp32");
  const double measure_s = opts.quick ? 0.05 : 0.4;

  // the bandwidth, STREAM triad over arrays well beyond the last-level cache
  const size_t llc = kernels::last_level_cache_bytes();
  const size_t triad = opts.quick ? std::max<size_t>(2 * llc, 32u << 20) : std::max<size_t>(4 * llc, 64u << 20);
  const double bw_all = kernels::measure_triad_bandwidth(threads, triad, opts.quick ? 0.1 : 0.3);
  const double bw_1t = kernels::measure_triad_bandwidth(1, triad, opts.quick ? 0.1 : 0.3);
  std::cout << "Part law: tokens/s = bandwidth / bytes of weights per token.\n"
            << "Measured bandwidth (STREAM triad, " << mib(static_cast<double>(triad)) << " per array): "
            << fmt(bw_all / 1e9, 2) << " GB/s on " << threads << " thread" << (threads == 1 ? "" : "s") << ", "
            << fmt(bw_1t / 1e9, 2) << " GB/s on 1. Last-level cache: " << mib(static_cast<double>(llc)) << ".\n"
            << "Random-weight models (vocabulary 65, context 64), decoding at batch 1 on the " << be->name()
            << " backend; the law's line uses the " << threads << "-thread bandwidth.\n\n";

  struct Shape {
    int C, L;
  };
  std::vector<Shape> shapes = opts.quick ? std::vector<Shape>{{64, 2}, {128, 4}, {256, 4}}
                                         : std::vector<Shape>{{128, 4}, {256, 6}, {512, 8}, {768, 12}, {1024, 16}, {1536, 12}};
  const kernels::WeightFormat formats[] = {kernels::WeightFormat::f32, kernels::WeightFormat::bf16,
                                           kernels::WeightFormat::int8, kernels::WeightFormat::int4};
  struct Row {
    std::string model;
    i64 params;
    std::string format;
    i64 bytes;
    double tps, law;
    bool in_cache;
  };
  std::vector<Row> rows;
  std::cout << "  " << std::left << std::setw(12) << "model" << std::right << std::setw(12) << "params" << std::setw(8)
            << "format" << std::setw(14) << "bytes/token" << std::setw(12) << "tokens/s" << std::setw(12) << "law"
            << std::setw(10) << "fraction" << "  note\n";
  auto make_config = [](const Shape& s) {
    gpt::GPTConfig c;
    c.vocab_size = 65;
    c.block_size = 64;
    c.n_embd = s.C;
    c.n_layer = s.L;
    c.n_head = std::max(1, s.C / 64);
    return c;
  };
  for (const Shape& s : shapes) {
    const gpt::GPTConfig c = make_config(s);
    const std::string name = "C" + std::to_string(s.C) + "-L" + std::to_string(s.L);
    const gpt::GPT model = parameters_only_model(c, opts.seed);
    for (kernels::WeightFormat f : formats) {
      const gpt::InferenceModel im = gpt::pack_model(model, f, be->memory());
      gpt::Decoder dec(im, *be);
      const double sps = seconds_per_step(dec, 1, 1, measure_s, 3, 10000);
      const i64 bytes = im.weight_bytes_per_token();
      const Row r{name, model.num_params, kernels::format_name(f), bytes, 1.0 / sps,
                  bw_all / static_cast<double>(bytes), static_cast<size_t>(bytes) <= llc};
      rows.push_back(r);
      std::cout << "  " << std::left << std::setw(12) << r.model << std::right << std::setw(12) << r.params << std::setw(8)
                << r.format << std::setw(14) << r.bytes << std::setw(12) << fmt(r.tps, 1) << std::setw(12)
                << fmt(r.law, 1) << std::setw(10) << fmt(r.tps / r.law, 2) << "  "
                << (r.in_cache ? "fits in the last-level cache" : "") << "\n";
    }
  }

  // batch > 1 on a mid-size model: the weights are read once per step for B tokens
  const Shape mid = opts.quick ? Shape{128, 4} : Shape{512, 8};
  const gpt::GPTConfig mc = make_config(mid);
  const std::string mid_name = "C" + std::to_string(mid.C) + "-L" + std::to_string(mid.L);
  struct BatchRow {
    std::string format;
    int batch;
    double tps, sps;
  };
  std::vector<BatchRow> batch_rows;
  std::cout << "\n  batch > 1 on " << mid_name << " (" << gpt::num_parameters(mc) << " parameters)\n  " << std::setw(8)
            << "format" << std::setw(7) << "batch" << std::setw(12) << "tokens/s" << std::setw(12) << "steps/s" << "\n";
  {
    const gpt::GPT model = parameters_only_model(mc, opts.seed);
    for (kernels::WeightFormat f : {kernels::WeightFormat::f32, kernels::WeightFormat::int8}) {
      const gpt::InferenceModel im = gpt::pack_model(model, f, be->memory());
      gpt::Decoder dec(im, *be, 16);
      for (int B : {1, 2, 4, 8, 16}) {
        const double sps = seconds_per_step(dec, B, 1, measure_s, 3, 10000);
        batch_rows.push_back({kernels::format_name(f), B, B / sps, 1.0 / sps});
        std::cout << "  " << std::setw(8) << kernels::format_name(f) << std::setw(7) << B << std::setw(12)
                  << fmt(B / sps, 1) << std::setw(12) << fmt(1.0 / sps, 1) << "\n";
      }
    }
  }

  std::vector<LawPoint> law_points;
  for (const Row& r : rows) {
    law_points.push_back({r.model, r.format, static_cast<double>(r.params), static_cast<double>(r.bytes), r.tps,
                          r.tps / r.law, r.in_cache});
  }
  std::vector<BatchPoint> batch_points;
  for (const BatchRow& r : batch_rows) batch_points.push_back({r.format, r.batch, r.sps});
  std::cout << "\nWhere the law holds and where it breaks, on this machine (from the tables above):\n";
  for (const std::string& line : law_conclusions(law_points, batch_points, static_cast<double>(llc))) {
    std::cout << line << "\n";
  }

  std::ostringstream js;
  js << "{\"schema\": \"nnlab-lesson10/1\", \"part\": \"law\", \"machine\": " << machine_json(opts, *be)
     << ", \"bandwidth_gbs\": " << json_number(bw_all / 1e9) << ", \"bandwidth_1t_gbs\": " << json_number(bw_1t / 1e9)
     << ", \"threads\": " << threads << ", \"llc_bytes\": " << llc << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    js << (i ? ", " : "") << "{\"model\": " << json_string(r.model) << ", \"params\": " << r.params
       << ", \"format\": " << json_string(r.format) << ", \"bytes_per_token\": " << r.bytes
       << ", \"tokens_per_s\": " << json_number(r.tps) << ", \"law_tokens_per_s\": " << json_number(r.law)
       << ", \"fraction_of_law\": " << json_number(r.tps / r.law) << ", \"fits_in_llc\": " << (r.in_cache ? "true" : "false")
       << "}";
  }
  js << "], \"batch_rows\": [";
  for (size_t i = 0; i < batch_rows.size(); ++i) {
    const BatchRow& r = batch_rows[i];
    js << (i ? ", " : "") << "{\"model\": " << json_string(mid_name) << ", \"format\": " << json_string(r.format)
       << ", \"batch\": " << r.batch << ", \"tokens_per_s\": " << json_number(r.tps)
       << ", \"steps_per_s\": " << json_number(r.sps) << "}";
  }
  js << "]}";
  write_part_json(opts, "law", js.str());
  return 0;
}

}  // namespace lesson10
