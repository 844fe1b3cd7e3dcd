// Lesson 12, part speed: decode tokens/s against the bandwidth law, the perplexity each weight
// format costs, and speculative decoding, at the shapes of GPT-2 124M / 355M and SmolLM-135M
// (speed_part.h). Everything measured here runs lesson 10's code (gpt/infer.h: pack_model,
// Decoder, generate; gpt/speculative.h); this part only picks the shapes and the text.
#include "lessons/12-real-models/speed_part.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "gpt/hf.h"
#include "gpt/hf_cli.h"
#include "gpt/speculative.h"
#include "gpt/train.h"
#include "io/bpe.h"
#include "io/text.h"
#include "kernels/ceilings.h"
#include "kernels/clock.h"
#include "kernels/harness.h"
#include "lessons/12-real-models/real_lesson.h"
#include "lessons/common/parts.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace lesson12 {

namespace {

using i64 = int64_t;
using kernels::harness::json_string;

std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

kernels::WeightFormat parse_format(const std::string& name) {
  // w8a8 (lesson 15): int8 weights and int8 activations, integer dot products in the matvec
  for (kernels::WeightFormat f : {kernels::WeightFormat::f32, kernels::WeightFormat::bf16, kernels::WeightFormat::int8,
                                  kernels::WeightFormat::int4, kernels::WeightFormat::w8a8}) {
    if (name == kernels::format_name(f)) return f;
  }
  NN_CHECK(false, "lesson12 --speed-formats: unknown format '" << name << "' (fp32, bf16, int8, int4, w8a8)");
  return kernels::WeightFormat::f32;
}

std::vector<int32_t> random_ids(size_t n, int V, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
  return v;
}

std::string config_json(const gpt::GPTConfig& c) {
  std::ostringstream os;
  os << "{\"arch\": " << json_string(gpt::arch_name(c.arch)) << ", \"V\": " << c.vocab_size
     << ", \"maxT\": " << c.block_size << ", \"L\": " << c.n_layer << ", \"NH\": " << c.n_head
     << ", \"NKV\": " << gpt::kv_heads(c) << ", \"C\": " << c.n_embd << ", \"H\": " << gpt::mlp_hidden(c) << "}";
  return os.str();
}

// Speculative decoding of `target` with `draft` (greedy, so the output is the target's own
// greedy text whatever the draft: the speedup is all there is to measure), against plain
// greedy decoding of the target, both after the same prompt.
struct SpecRow {
  std::string target, draft;
  int k = 0, tokens = 0;
  double acceptance = 0.0, tokens_per_round = 0.0, tokens_per_s = 0.0, baseline_tokens_per_s = 0.0;
  double cost_ratio = 0.0;  // one draft step / one target step, measured
  bool same_output = false;
  bool random_weights = true;
  bool self_copy = false;        // the draft is the target's own weights in another format
  double repeat_fraction = 0.0;  // of the greedy tokens, those equal to the token before
};

SpecRow run_speculative(const gpt::InferenceModel& target, const std::string& target_name,
                        const gpt::InferenceModel& draft, const std::string& draft_name,
                        const std::vector<int32_t>& prompt, int k, int tokens, gpt::Backend& be) {
  gpt::Decoder td(target, be), dd(draft, be);
  gpt::DecoderModel tm(td), dm(dd);
  gpt::SpeculativeOptions so;
  so.k = k;
  so.tokens = tokens;
  so.temperature = 0.0f;
  gpt::SpeculativeStats st;
  {
    // untimed warm-up of both caches and every buffer at the step sizes the rounds use
    gpt::SpeculativeOptions warm = so;
    warm.tokens = std::min(tokens, 2 * k + 2);
    gpt::speculative_generate(tm, dm, prompt, warm);
    gpt::autoregressive_generate(tm, prompt, 2, 0.0f, so.seed);
  }
  const std::vector<int32_t> fast = gpt::speculative_generate(tm, dm, prompt, so, &st);
  double base_s = 0.0;
  const std::vector<int32_t> plain = gpt::autoregressive_generate(tm, prompt, tokens, 0.0f, so.seed, &base_s);
  // one step of each model alone, for the cost ratio c of the expected speedup
  // (as many steps as the baseline: a few steps of a tiny model are one preemption from 100x)
  double draft_step_s = 0.0;
  gpt::autoregressive_generate(dm, prompt, tokens, 0.0f, so.seed, &draft_step_s);
  draft_step_s /= tokens;
  SpecRow r;
  r.target = target_name;
  r.draft = draft_name;
  r.k = k;
  r.tokens = tokens;
  r.acceptance = st.acceptance_rate();
  r.tokens_per_round = st.tokens_per_round();
  r.tokens_per_s = static_cast<double>(st.emitted) / st.seconds;
  r.baseline_tokens_per_s = tokens / base_s;
  r.cost_ratio = draft_step_s / (base_s / tokens);
  r.same_output = fast == plain;
  int repeats = 0;
  for (size_t i = 0; i < plain.size(); ++i) repeats += plain[i] == (i == 0 ? prompt.back() : plain[i - 1]);
  r.repeat_fraction = plain.empty() ? 0.0 : static_cast<double>(repeats) / static_cast<double>(plain.size());
  return r;
}

}  // namespace

void add_speed_options(CLI::App& app, SpeedOptions& o) {
  std::string names;
  for (const std::string& n : shape_names()) names += (names.empty() ? "" : ", ") + n;
  app.add_option("--speed-shapes", o.shapes,
                 "Part speed: comma-separated model shapes (" + names +
                     "; default gpt2-124m,gpt2-355m,smollm-135m, --quick the tiny ones)");
  app.add_option("--speed-formats", o.formats, "Part speed: weight formats (fp32, bf16, int8, int4, w8a8)")->capture_default_str();
  app.add_option("--speed-prompt", o.prompt, "Part speed: prompt tokens before the timed decode")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--speed-tokens", o.tokens, "Part speed: tokens decoded per round")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--speed-rounds", o.rounds, "Part speed: rounds per format (median)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--speed-eval-tokens", o.eval_tokens, "Part speed: tokens of --data scored for perplexity (0: none)")
      ->check(CLI::Range(0, 1 << 24))->capture_default_str();
  app.add_option("--speed-window", o.window, "Part speed: perplexity window (tokens per prefill)")
      ->check(CLI::Range(2, 1 << 20))->capture_default_str();
  app.add_option("--speed-bpe-vocab", o.bpe_vocab, "Part speed: BPE vocabulary trained on --data (random models)")
      ->check(CLI::Range(257, 1 << 20))->capture_default_str();
  app.add_option("--spec-target", o.spec_target, "Part speed: speculative decoding's target shape (empty: none)")
      ->capture_default_str();
  app.add_option("--spec-draft", o.spec_draft, "Part speed: speculative decoding's draft shape")->capture_default_str();
  app.add_option("--spec-k", o.spec_k, "Part speed: drafted tokens per round")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--speed-models", o.models,
                 "Part speed: Hugging Face model directories (comma-separated; scripts/fetch_model.py) measured "
                 "instead of random shapes; two or more: the first drafts for the last");
  app.add_option("--spec-tokens", o.spec_tokens, "Part speed: tokens generated speculatively")
      ->check(CLI::Range(2, 1 << 20))->capture_default_str();
}

std::vector<std::string> shape_names() {
  return {"gpt2-124m", "gpt2-355m", "smollm-135m", "tiny-gpt2", "tiny-gpt2-wide", "tiny-llama"};
}

gpt::GPTConfig named_shape(const std::string& name) {
  gpt::GPTConfig c;  // gpt2, biases, tied head
  if (name == "gpt2-124m" || name == "gpt2-355m" || name == "gpt2" || name == "gpt2-medium") {
    // GPT-2's config.json: n_vocab 50257, n_positions 1024, layer_norm_epsilon 1e-5
    c.vocab_size = 50257;
    c.block_size = 1024;
    const bool medium = name == "gpt2-355m" || name == "gpt2-medium";
    c.n_layer = medium ? 24 : 12;
    c.n_head = medium ? 16 : 12;
    c.n_embd = medium ? 1024 : 768;
  } else if (name == "smollm-135m") {
    // HuggingFaceTB/SmolLM-135M's config.json (LlamaForCausalLM)
    c.arch = gpt::Arch::llama;
    c.bias = false;
    c.vocab_size = 49152;
    c.block_size = 2048;
    c.n_layer = 30;
    c.n_head = 9;
    c.n_kv_head = 3;
    c.n_embd = 576;
    c.ffn_hidden = 1536;
    c.tie_embeddings = true;
    c.rope_theta = 10000.0f;
    c.norm_eps = 1e-5f;
  } else if (name == "tiny-gpt2" || name == "tiny-gpt2-wide") {
    c.vocab_size = 512;
    c.block_size = 256;
    const bool wide = name == "tiny-gpt2-wide";
    c.n_layer = wide ? 3 : 2;
    c.n_head = wide ? 4 : 2;
    c.n_embd = wide ? 128 : 64;
  } else if (name == "tiny-llama") {
    c.arch = gpt::Arch::llama;
    c.bias = false;
    c.vocab_size = 512;
    c.block_size = 256;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.n_embd = 64;
    c.ffn_hidden = 160;
  } else {
    std::string names;
    for (const std::string& n : shape_names()) names += (names.empty() ? "" : ", ") + n;
    NN_CHECK(false, "unknown model shape '" << name << "' (" << names << ")");
  }
  gpt::validate(c);
  return c;
}

gpt::GPT random_model(const gpt::GPTConfig& c, uint64_t seed) {
  // Inference reads the parameters only (pack_model): no gradients, no AdamW state.
  gpt::GPT m = gpt::gpt_create(c, gpt::host_memory(), /*training_state=*/false);
  gpt::gpt_init_weights(m, seed);
  return m;
}

double packed_perplexity(const gpt::InferenceModel& im, gpt::Backend& be, const std::vector<int32_t>& ids, int window) {
  NN_CHECK(ids.size() >= 2, "perplexity needs at least 2 tokens, got " << ids.size());
  const int V = im.config.vocab_size;
  for (int32_t t : ids) NN_CHECK(t >= 0 && t < V, "token id " << t << " outside the model's vocabulary of " << V);
  window = std::min(window, im.config.block_size);
  gpt::Decoder dec(im, be);
  // windows side by side (stride = window): each token scored once, from its own window only
  return gpt::window_perplexity(dec, ids, window, window).perplexity;
}

ModelResult measure_model(const gpt::GPT& model, const std::string& name, bool random_weights,
                          const std::vector<int32_t>& eval_ids, const SpeedOptions& o, double bandwidth,
                          gpt::Backend& be, uint64_t seed) {
  const gpt::GPTConfig& c = model.config;
  NN_CHECK(o.prompt + o.tokens <= c.block_size, "--speed-prompt " << o.prompt << " + --speed-tokens " << o.tokens
                                                                  << " exceed the context of " << name << " ("
                                                                  << c.block_size << ")");
  ModelResult res;
  res.name = name;
  res.config = c;
  res.params = model.num_params;
  res.random_weights = random_weights;
  const std::vector<int32_t> prompt =
      eval_ids.size() >= static_cast<size_t>(o.prompt)
          ? std::vector<int32_t>(eval_ids.begin(), eval_ids.begin() + o.prompt)
          : random_ids(static_cast<size_t>(o.prompt), c.vocab_size, seed + 7);
  std::vector<int32_t> scored;
  if (o.eval_tokens > 0 && eval_ids.size() >= 2) {
    scored.assign(eval_ids.begin(), eval_ids.begin() + std::min(eval_ids.size(), static_cast<size_t>(o.eval_tokens)));
  }

  std::cout << "  " << name << " (" << gpt::arch_name(c.arch) << ", " << fmt(static_cast<double>(model.num_params) / 1e6, 1)
            << "M parameters, V " << c.vocab_size << ", L " << c.n_layer << ", C " << c.n_embd << ")"
            << (random_weights ? ", random weights" : "") << "\n"
            << "  " << std::setw(8) << "format" << std::setw(14) << "MB/token" << std::setw(11) << "tokens/s"
            << std::setw(11) << "law" << std::setw(10) << "fraction" << std::setw(12) << "prefill ms" << std::setw(14)
            << "perplexity" << std::setw(10) << "change" << "\n";
  for (const std::string& fname : lessons::split_list(o.formats)) {
    const kernels::WeightFormat f = parse_format(fname);
    const gpt::InferenceModel im = gpt::pack_model(model, f, be.memory());
    FormatRow r;
    r.format = kernels::format_name(f);
    r.bytes_per_token = im.weight_bytes_per_token();
    r.law_tokens_per_s = bandwidth / static_cast<double>(r.bytes_per_token);
    {
      gpt::Decoder dec(im, be);
      gpt::GenerateOptions g;
      g.tokens = std::min(4, o.tokens);  // an untimed warm-up: first touches of the cache and buffers
      g.temperature = 0.0f;
      g.seed = seed;
      gpt::generate(dec, prompt, g);
      g.tokens = o.tokens;
      std::vector<double> prefill;
      for (int round = 0; round < o.rounds; ++round) {
        gpt::GenerateStats st;
        gpt::generate(dec, prompt, g, &st);
        r.round_tokens_per_s.push_back(st.tokens_per_second());
        prefill.push_back(st.prefill_seconds * 1e3);
      }
      r.tokens_per_s = median(r.round_tokens_per_s);
      r.prefill_ms = median(prefill);
    }
    if (!scored.empty()) r.perplexity = packed_perplexity(im, be, scored, o.window);
    if (!res.rows.empty() && res.rows.front().perplexity > 0.0 && r.perplexity > 0.0) {
      r.perplexity_change = r.perplexity / res.rows.front().perplexity - 1.0;
    }
    res.rows.push_back(r);
    std::cout << "  " << std::setw(8) << r.format << std::setw(14) << fmt(static_cast<double>(r.bytes_per_token) / 1e6, 1) << std::setw(11)
              << fmt(r.tokens_per_s, 2) << std::setw(11) << fmt(r.law_tokens_per_s, 2) << std::setw(10)
              << fmt(r.tokens_per_s / r.law_tokens_per_s, 2) << std::setw(12) << fmt(r.prefill_ms, 1) << std::setw(14)
              << (r.perplexity > 0.0 ? fmt(r.perplexity, r.perplexity < 100 ? 3 : 1) : std::string("-"))
              << std::setw(10)
              << (res.rows.size() > 1 && r.perplexity > 0.0 ? fmt(100.0 * r.perplexity_change, 3) + "%" : std::string(""))
              << "\n";
    std::cout.flush();
  }
  return res;
}

int run_speed_part(const Options& opts) {
  const SpeedOptions& so = opts.speed;
  kernels::warn_if_busy(std::cout);
  const int threads = gpt::use_threads(opts.threads);
  auto be = gpt::make_backend("cpu", "fp32");
  SpeedOptions o = so;
  std::vector<std::string> shapes = lessons::split_list(o.shapes);
  if (shapes.empty()) {
    shapes = opts.quick ? std::vector<std::string>{"tiny-gpt2", "tiny-gpt2-wide", "tiny-llama"}
                        : std::vector<std::string>{"gpt2-124m", "gpt2-355m", "smollm-135m"};
  }
  if (opts.quick) {
    // seconds, not minutes: a short prompt, few tokens, one perplexity window
    o.prompt = std::min(o.prompt, 16);
    o.tokens = std::min(o.tokens, 8);
    o.rounds = std::min(o.rounds, 3);
    o.eval_tokens = std::min(o.eval_tokens, 128);
    o.window = std::min(o.window, 64);
    o.bpe_vocab = std::min(o.bpe_vocab, 300);
    o.spec_tokens = std::min(o.spec_tokens, 12);
    if (o.spec_target == SpeedOptions{}.spec_target) o.spec_target = "tiny-gpt2-wide";
    if (o.spec_draft == SpeedOptions{}.spec_draft) o.spec_draft = "tiny-gpt2";
  }

  // the bandwidth: STREAM triad over arrays well beyond the last-level cache
  const size_t llc = kernels::last_level_cache_bytes();
  const size_t triad = opts.quick ? std::max<size_t>(2 * llc, 32u << 20) : std::max<size_t>(4 * llc, 64u << 20);
  const double bw = kernels::measure_triad_bandwidth(threads, triad, opts.quick ? 0.1 : 0.5);

  // the evaluation text: a BPE trained on the corpus's training split, the validation split encoded
  const nn::TextCorpus corpus = nn::load_corpus(opts.data, 0.1);
  const size_t split = corpus.text.size() - corpus.text.size() / 10;
  const std::string_view train_text = std::string_view(corpus.text).substr(0, split);
  const std::string_view val_text = std::string_view(corpus.text).substr(split);
  std::vector<int32_t> eval_ids;
  int bpe_size = 0;
  if (o.eval_tokens > 0) {
    const double t0 = kernels::now_seconds();
    const nn::BpeTokenizer tok = nn::BpeTokenizer::train(train_text, o.bpe_vocab);
    bpe_size = tok.vocab_size();
    eval_ids = tok.encode(val_text);
    if (eval_ids.size() > static_cast<size_t>(o.eval_tokens)) eval_ids.resize(static_cast<size_t>(o.eval_tokens));
    std::cout << "Evaluation text: " << corpus.description << "\n  validation split (last 10%), " << eval_ids.size()
              << " tokens of a BPE of " << bpe_size << " tokens trained on the first 90% (io/bpe.h, "
              << fmt(kernels::now_seconds() - t0, 1) << " s)\n";
  }
  std::cout << "Part speed: decode at batch 1 after a " << o.prompt << "-token prompt, " << o.tokens
            << " tokens per round, median of " << o.rounds << " rounds; cpu backend, " << threads << " thread"
            << (threads == 1 ? "" : "s") << ".\n"
            << "The law: tokens/s = bandwidth / weight bytes per token, bandwidth = STREAM triad " << fmt(bw / 1e9, 2)
            << " GB/s (" << threads << " thread" << (threads == 1 ? "" : "s") << ").\n"
            << "Random-initialised models of the real shapes (gpt_init_weights): decode speed does not depend on the\n"
            << "values, but perplexity does: a random model's is about V (it predicts nothing), so only the CHANGE\n"
            << "each format makes to it is a measurement here; real weights (scripts/fetch_model.py) give the real one.\n\n";

  std::vector<ModelResult> results;
  const std::vector<std::string> model_dirs = lessons::split_list(o.models);
  std::vector<RealModel> real;  // kept for speculative decoding
  if (!model_dirs.empty()) {
    for (const std::string& dir : model_dirs) {
      gpt::HfModel hf = gpt::load_hf_model(dir);
      RealModel rm{std::move(hf.model), std::move(hf.tokenizer), dir};
      std::vector<int32_t> ids = eval_ids;
      if (rm.tokenizer && o.eval_tokens > 0) {
        ids = rm.tokenizer->encode(val_text, false);
        if (ids.size() > static_cast<size_t>(o.eval_tokens)) ids.resize(static_cast<size_t>(o.eval_tokens));
        std::cout << "  " << dir << ": the evaluation text in its own tokenizer: " << ids.size() << " tokens\n";
      }
      results.push_back(measure_model(rm.model, rm.name.empty() ? dir : rm.name, false, ids, o, bw, *be, opts.seed));
      std::cout << "\n";
      if (model_dirs.size() >= 2) real.push_back(std::move(rm));
    }
  } else {
    for (const std::string& s : shapes) {
      const gpt::GPTConfig c = named_shape(s);
      const gpt::GPT model = random_model(c, opts.seed);
      results.push_back(measure_model(model, s, true, eval_ids, o, bw, *be, opts.seed));
      std::cout << "\n";
    }
  }

  // speculative decoding: the draft shape drafting for the target shape (random: they disagree),
  // and the target's own int4 copy drafting for it (they agree on most tokens)
  std::vector<SpecRow> spec;
  if (real.size() >= 2) {
    // real weights: the first directory drafts for the last, and the last's own int4 copy
    RealModel& t = real.back();
    RealModel& d = real.front();
    NN_CHECK(t.model.config.vocab_size == d.model.config.vocab_size,
             "speculative decoding needs one vocabulary: " << t.name << " has " << t.model.config.vocab_size << ", "
                                                           << d.name << " " << d.model.config.vocab_size);
    std::vector<int32_t> prompt = t.tokenizer ? t.tokenizer->encode(val_text, false) : eval_ids;
    if (prompt.size() > static_cast<size_t>(o.prompt)) prompt.resize(static_cast<size_t>(o.prompt));
    NN_CHECK(!prompt.empty(), "speculative decoding: no prompt tokens");
    std::cout << "Speculative decoding (greedy, k = " << o.spec_k << ", " << o.spec_tokens << " tokens after a "
              << prompt.size() << "-token prompt of the text), target " << t.name << " fp32:\n";
    const gpt::InferenceModel tim = gpt::pack_model(t.model, kernels::WeightFormat::f32, be->memory());
    {
      const gpt::InferenceModel dim = gpt::pack_model(d.model, kernels::WeightFormat::f32, be->memory());
      spec.push_back(run_speculative(tim, t.name, dim, d.name + " fp32", prompt, o.spec_k, o.spec_tokens, *be));
    }
    const gpt::InferenceModel qim = gpt::pack_model(t.model, kernels::WeightFormat::int4, be->memory());
    spec.push_back(run_speculative(tim, t.name, qim, t.name + " int4", prompt, o.spec_k, o.spec_tokens, *be));
    spec.back().self_copy = true;
    for (SpecRow& r : spec) r.random_weights = false;
  } else if (model_dirs.empty() && !o.spec_target.empty() && !o.spec_draft.empty()) {
    const gpt::GPTConfig tc = named_shape(o.spec_target), dc = named_shape(o.spec_draft);
    NN_CHECK(tc.vocab_size == dc.vocab_size, "speculative decoding needs one vocabulary: " << o.spec_target << " has "
                                                                                          << tc.vocab_size << ", "
                                                                                          << o.spec_draft << " "
                                                                                          << dc.vocab_size);
    const std::vector<int32_t> prompt =
        eval_ids.size() >= static_cast<size_t>(o.prompt)
            ? std::vector<int32_t>(eval_ids.begin(), eval_ids.begin() + o.prompt)
            : random_ids(static_cast<size_t>(o.prompt), tc.vocab_size, opts.seed + 7);
    std::cout << "Speculative decoding (greedy, k = " << o.spec_k << ", " << o.spec_tokens << " tokens after the "
              << prompt.size() << "-token prompt), target " << o.spec_target << " fp32:\n";
    {
      const gpt::GPT target = random_model(tc, opts.seed);
      const gpt::InferenceModel tim = gpt::pack_model(target, kernels::WeightFormat::f32, be->memory());
      {
        const gpt::GPT draft = random_model(dc, opts.seed + 1);
        const gpt::InferenceModel dim = gpt::pack_model(draft, kernels::WeightFormat::f32, be->memory());
        spec.push_back(run_speculative(tim, o.spec_target, dim, o.spec_draft + " fp32", prompt, o.spec_k,
                                       o.spec_tokens, *be));
      }
      const gpt::InferenceModel qim = gpt::pack_model(target, kernels::WeightFormat::int4, be->memory());
      spec.push_back(run_speculative(tim, o.spec_target, qim, o.spec_target + " int4", prompt, o.spec_k,
                                     o.spec_tokens, *be));
      spec.back().self_copy = true;
    }
  }
  if (!spec.empty()) {
    std::cout << "  " << std::left << std::setw(22) << "draft" << std::right << std::setw(12) << "acceptance"
              << std::setw(14) << "tokens/round" << std::setw(11) << "expected" << std::setw(11) << "tokens/s"
              << std::setw(11) << "plain" << std::setw(9) << "speedup" << std::setw(10) << "expected" << "\n";
    for (const SpecRow& r : spec) {
      std::cout << "  " << std::left << std::setw(22) << r.draft << std::right << std::setw(12) << fmt(r.acceptance, 3)
                << std::setw(14) << fmt(r.tokens_per_round, 2) << std::setw(11)
                << fmt(gpt::expected_tokens_per_round(r.acceptance, r.k), 2) << std::setw(11) << fmt(r.tokens_per_s, 2)
                << std::setw(11) << fmt(r.baseline_tokens_per_s, 2) << std::setw(9)
                << fmt(r.tokens_per_s / r.baseline_tokens_per_s, 2) << std::setw(10)
                << fmt(gpt::expected_speedup(r.acceptance, r.k, r.cost_ratio), 2) << "\n";
      NN_CHECK(r.same_output, "speculative decoding (greedy) gave other tokens than plain greedy decoding with draft "
                                  << r.draft << ": a bug");
    }
    std::cout << "  (greedy: both give the target's own tokens, checked equal; 'expected' from the measured\n"
              << "  acceptance a and cost ratio c of a draft step: (1 - a^(k+1)) / ((1 - a)(k c + 1)).)\n";
    for (const SpecRow& r : spec) {
      const double speedup = r.tokens_per_s / r.baseline_tokens_per_s;
      std::cout << "  " << r.draft << ": acceptance " << fmt(r.acceptance, 3) << ", " << fmt(speedup, 2)
                << "x plain decoding (a draft step costs " << fmt(r.cost_ratio, 2) << " of a target step)";
      if (r.self_copy) {
        std::cout << ": the draft is the target's own weights in int4, so they disagree only where int4's "
                     "rounding changes the greedy choice";
      } else if (r.acceptance < 0.1) {
        std::cout << ": the two models almost never agree, so every round emits ~1 token and pays for the drafts";
      } else if (r.random_weights && r.repeat_fraction > 0.5) {
        std::cout << ". Random models agree here because both mostly repeat a token: "
                  << fmt(100.0 * r.repeat_fraction, 0)
                  << "% of the target's greedy tokens equal the one before (a random GPT-2 with a tied head "
                     "scores the current token's own embedding highest); real weights agree for real reasons";
      }
      std::cout << ".\n";
    }
  }

  std::ostringstream js;
  js << "{\"bandwidth_gbs\": " << jnum(bw / 1e9) << ", \"threads\": " << threads << ", \"prompt\": " << o.prompt
     << ", \"tokens\": " << o.tokens << ", \"rounds\": " << o.rounds << ", \"eval\": {\"text\": "
     << json_string(corpus.description) << ", \"tokenizer\": " << json_string("bpe-" + std::to_string(bpe_size))
     << ", \"tokens\": " << eval_ids.size() << ", \"window\": " << o.window << "}, \"models\": [";
  for (size_t m = 0; m < results.size(); ++m) {
    const ModelResult& r = results[m];
    js << (m ? ", " : "") << "{\"name\": " << json_string(r.name) << ", \"arch\": " << json_string(gpt::arch_name(r.config.arch))
       << ", \"params\": " << r.params << ", \"random_weights\": " << (r.random_weights ? "true" : "false")
       << ", \"config\": " << config_json(r.config) << ", \"rows\": [";
    for (size_t i = 0; i < r.rows.size(); ++i) {
      const FormatRow& f = r.rows[i];
      js << (i ? ", " : "") << "{\"format\": " << json_string(f.format) << ", \"bytes_per_token\": " << f.bytes_per_token
         << ", \"tokens_per_s\": " << jnum(f.tokens_per_s) << ", \"round_tokens_per_s\": [";
      for (size_t k = 0; k < f.round_tokens_per_s.size(); ++k) js << (k ? ", " : "") << jnum(f.round_tokens_per_s[k]);
      js << "], \"prefill_ms\": " << jnum(f.prefill_ms) << ", \"law_tokens_per_s\": " << jnum(f.law_tokens_per_s)
         << ", \"fraction_of_law\": " << jnum(f.tokens_per_s / f.law_tokens_per_s)
         << ", \"perplexity\": " << (f.perplexity > 0.0 ? jnum(f.perplexity) : "null")
         << ", \"perplexity_change\": " << (f.perplexity > 0.0 ? jnum(f.perplexity_change) : "null") << "}";
    }
    js << "]}";
  }
  js << "], \"speculative\": [";
  for (size_t i = 0; i < spec.size(); ++i) {
    const SpecRow& r = spec[i];
    js << (i ? ", " : "") << "{\"target\": " << json_string(r.target) << ", \"draft\": " << json_string(r.draft)
       << ", \"k\": " << r.k << ", \"tokens\": " << r.tokens << ", \"acceptance\": " << jnum(r.acceptance)
       << ", \"tokens_per_round\": " << jnum(r.tokens_per_round)
       << ", \"expected_tokens_per_round\": " << jnum(gpt::expected_tokens_per_round(r.acceptance, r.k))
       << ", \"tokens_per_s\": " << jnum(r.tokens_per_s) << ", \"baseline_tokens_per_s\": " << jnum(r.baseline_tokens_per_s)
       << ", \"speedup\": " << jnum(r.tokens_per_s / r.baseline_tokens_per_s) << ", \"cost_ratio\": " << jnum(r.cost_ratio)
       << ", \"expected_speedup\": " << jnum(gpt::expected_speedup(r.acceptance, r.k, r.cost_ratio))
       << ", \"random_weights\": " << (r.random_weights ? "true" : "false")
       << ", \"self_copy\": " << (r.self_copy ? "true" : "false") << ", \"repeat_fraction\": " << jnum(r.repeat_fraction) << "}";
  }
  js << "]}";
  record_part("speed", js.str());
  return 0;
}

}  // namespace lesson12
