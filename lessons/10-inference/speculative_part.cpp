// Lesson 10, part speculative: speculative decoding with the trained target and two drafts
// (gpt/speculative.h). For each draft and k: the acceptance rate and tokens per round it
// gets, the measured cost ratio c = draft step / target step, what the i.i.d. formulas
// predict from those, and the speedup measured against plain decoding of the same number
// of tokens. Temperature 1: the output is distributed as the target's own samples.
#include <algorithm>
#include <iomanip>
#include <memory>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/infer.h"
#include "gpt/speculative.h"
#include "kernels/harness.h"
#include "lessons/10-inference/inference_lesson.h"
#include "nn/check.h"
#include "kernels/clock.h"

namespace lesson10 {

namespace {

using kernels::harness::json_number;
using kernels::harness::json_string;

// One model the part decodes with: its checkpoint, packed in fp32, a Decoder over it (which
// points at the packed model: held by pointer, so moving a Loaded moves no buffer).
struct Loaded {
  std::string role;
  gpt::LoadedCheckpoint ck;
  std::unique_ptr<gpt::InferenceModel> packed;
  std::unique_ptr<gpt::Decoder> decoder;
  std::unique_ptr<gpt::DecoderModel> model;
};
Loaded load(const Options& opts, const std::string& role, gpt::Backend& be) {
  Loaded l;
  l.role = role;
  l.ck = load_or_train(opts, role);
  l.packed = std::make_unique<gpt::InferenceModel>(gpt::pack_model(l.ck.model, kernels::WeightFormat::f32, be.memory()));
  l.decoder = std::make_unique<gpt::Decoder>(*l.packed, be);
  l.model = std::make_unique<gpt::DecoderModel>(*l.decoder);
  return l;
}

// Plain decoding of `tokens` tokens, `runs` times (seeds seed, seed + 1, ...): seconds per
// token of the generated tokens' steps (one 1-token step each).
double seconds_per_token(gpt::TokenModel& m, const std::vector<int32_t>& prompt, int tokens, int runs, float temperature,
                         uint64_t seed) {
  double seconds = 0.0;
  for (int r = 0; r < runs; ++r) {
    double s = 0.0;
    gpt::autoregressive_generate(m, prompt, tokens, temperature, seed + static_cast<uint64_t>(r), &s);
    seconds += s;
  }
  return seconds / (static_cast<double>(tokens) * runs);
}

struct Row {
  std::string draft;
  int64_t draft_params = 0;
  int k = 0;
  gpt::SpeculativeStats st;  // summed over the runs
  double cost_ratio = 0.0;   // c: draft step / target step (1-token steps, plain decoding)
  double speedup = 0.0;      // measured: plain seconds per token / speculative seconds per token
  double expected_tpr = 0.0, expected_speedup = 0.0;
  double verify_ratio = 0.0;  // the target's (k+1)-token step / its 1-token step
  double overhead = 0.0;      // fraction of the speculative time outside the two models' steps
};

}  // namespace

int speculative_tokens(int positions, int prompt_len, int max_k, int requested) {
  // No sliding window: the prompt, the tokens and the k drafted tokens must all fit.
  const int need = prompt_len + max_k + 1;
  NN_CHECK(positions >= need, "part speculative: the models' context holds " << positions << " positions, but a "
                                  << prompt_len << "-token prompt, up to k = " << max_k
                                  << " drafted tokens and at least 1 generated token need " << need
                                  << ": use a target (--checkpoint) and drafts trained with a context (--block-size) of at "
                                     "least " << need);
  const int fit = positions - prompt_len - max_k;
  NN_CHECK(requested >= 0, "--tokens " << requested << ": expected 0 (as many as fit) or a positive count");
  NN_CHECK(requested <= fit, "--tokens " << requested << ": at most " << fit << " fit the models' context ("
                                         << positions << " - prompt " << prompt_len << " - k " << max_k << ")");
  return requested > 0 ? requested : fit;
}

int run_speculative_part(const Options& opts) {
  gpt::use_threads(opts.threads);
  std::unique_ptr<gpt::Backend> be = gpt::make_backend(opts.backend, "fp32");
  const float temperature = 1.0f;
  std::cout << "== part speculative: a draft proposes k tokens, the target checks them in one step ==\n";
  kernels::warn_if_busy(std::cout);

  Loaded target = load(opts, "target", *be);
  std::vector<Loaded> drafts;
  for (const char* role : {"draft-s", "draft-m"}) drafts.push_back(load(opts, role, *be));
  for (const Loaded& d : drafts) {
    NN_CHECK(gpt::vocab_to_hex(d.ck.vocab) == gpt::vocab_to_hex(target.ck.vocab),
             "the " << d.role << " model was trained on another text than the target (the vocabularies differ): delete "
                    << opts.out_dir << "/" << d.role << " to retrain it with the same --data");
  }

  // the prompt: the start of the validation text; the ks; how many tokens fit the cache
  const Splits splits = corpus_splits(opts, target.ck.vocab);
  const std::vector<int> ks = opts.quick ? std::vector<int>{1, 4} : std::vector<int>{1, 2, 3, 4, 6, 8};
  const int max_k = ks.back();
  const int prompt_len = 16;
  NN_CHECK(splits.val.size() >= static_cast<size_t>(prompt_len), "the validation split is too short for a prompt");
  const std::vector<int32_t> prompt(splits.val.begin(), splits.val.begin() + prompt_len);
  int positions = target.ck.model.config.block_size;
  for (const Loaded& d : drafts) positions = std::min(positions, d.ck.model.config.block_size);
  const int tokens = speculative_tokens(positions, prompt_len, max_k, opts.tokens);
  const int runs = opts.quick ? 2 : 8;  // the same seeds for every configuration

  // warm-up (caches, OpenMP threads), then the baseline: the target alone
  seconds_per_token(*target.model, prompt, std::min(tokens, 8), 1, temperature, opts.seed);
  const double target_spt = seconds_per_token(*target.model, prompt, tokens, runs, temperature, opts.seed);
  std::cout << "target: " << gpt::num_parameters(target.ck.model.config) << " parameters, " << tokens
            << " tokens after a " << prompt_len << "-token prompt, " << runs << " runs; plain decoding "
            << std::fixed << std::setprecision(1) << 1.0 / target_spt << " tokens/s ("
            << std::setprecision(3) << target_spt * 1e3 << " ms per step)\n";

  std::vector<Row> rows;
  for (Loaded& d : drafts) {
    seconds_per_token(*d.model, prompt, std::min(tokens, 8), 1, temperature, opts.seed);
    const double draft_spt = seconds_per_token(*d.model, prompt, tokens, runs, temperature, opts.seed);
    for (const int k : ks) {
      Row r;
      r.draft = d.role;
      r.draft_params = gpt::num_parameters(d.ck.model.config);
      r.k = k;
      for (int run = 0; run < runs; ++run) {
        gpt::SpeculativeOptions o;
        o.k = k;
        o.tokens = tokens;
        o.temperature = temperature;
        o.seed = opts.seed + static_cast<uint64_t>(run);
        gpt::SpeculativeStats st;
        gpt::speculative_generate(*target.model, *d.model, prompt, o, &st);
        r.st.rounds += st.rounds;
        r.st.drafted += st.drafted;
        r.st.judged += st.judged;
        r.st.accepted += st.accepted;
        r.st.emitted += st.emitted;
        r.st.seconds += st.seconds;
        r.st.target_seconds += st.target_seconds;
        r.st.draft_seconds += st.draft_seconds;
      }
      r.cost_ratio = draft_spt / target_spt;
      const double alpha = r.st.acceptance_rate();
      r.expected_tpr = gpt::expected_tokens_per_round(alpha, k);
      r.expected_speedup = gpt::expected_speedup(alpha, k, r.cost_ratio);
      r.speedup = target_spt / (r.st.seconds / static_cast<double>(r.st.emitted));
      r.verify_ratio = (r.st.target_seconds / static_cast<double>(r.st.rounds)) / target_spt;
      r.overhead = 1.0 - (r.st.target_seconds + r.st.draft_seconds) / r.st.seconds;
      rows.push_back(r);
    }
  }

  // the table
  std::cout << "\n" << std::left << std::setw(9) << "draft" << std::right << std::setw(10) << "params" << std::setw(4)
            << "k" << std::setw(8) << "accept" << std::setw(9) << "tok/rnd" << std::setw(9) << "(expect)" << std::setw(8)
            << "c" << std::setw(9) << "speedup" << std::setw(9) << "(expect)" << std::setw(9) << "verify"
            << std::setw(10) << "overhead" << "\n";
  for (const Row& r : rows) {
    std::cout << std::left << std::setw(9) << r.draft << std::right << std::setw(10) << r.draft_params << std::setw(4)
              << r.k << std::fixed << std::setprecision(3) << std::setw(8) << r.st.acceptance_rate() << std::setprecision(2)
              << std::setw(9) << r.st.tokens_per_round() << std::setw(9) << r.expected_tpr << std::setprecision(3)
              << std::setw(8) << r.cost_ratio << std::setprecision(2) << std::setw(9) << r.speedup << std::setw(9)
              << r.expected_speedup << std::setw(9) << r.verify_ratio << std::setprecision(1) << std::setw(9)
              << 100.0 * r.overhead << "%\n";
  }
  std::cout << "\n  accept: drafts accepted / judged (a round stops judging at its first reject); tok/rnd: tokens per target step; c: a draft step's time / a\n"
               "  target step's (1 token each, measured); speedup: plain decoding's time per token / speculative's;\n"
               "  (expect): (1 - a^(k+1)) / (1 - a) and that / (k c + 1) from the measured a and c;\n"
               "  verify: the target's (k+1)-token step / its 1-token step; overhead: time outside both models' steps.\n"
               "  Where the expectation and the measurement part: the formula assumes i.i.d. acceptances (a text has\n"
               "  easy and hard stretches: acceptances come in runs), a verify step as cheap as one 1-token step\n"
               "  (verify > 1 shows what k + 1 rows cost), and no time outside the steps (overhead).\n";
  if (!rows.empty()) {
    const Row* best = &rows.front();
    for (const Row& r : rows) {
      if (r.speedup > best->speedup) best = &r;
    }
    std::cout << "  best measured: " << best->draft << " with k = " << best->k << ", " << std::setprecision(2)
              << best->speedup << "x (expected " << best->expected_speedup << "x)\n";
  }

  std::ostringstream js;
  const gpt::GPTConfig& tc = target.ck.model.config;
  js << "{\"schema\": \"nnlab-lesson10/1\", \"part\": \"speculative\", \"machine\": " << machine_json(opts, *be)
     << ", \"target\": {\"params\": " << gpt::num_parameters(tc) << ", \"n_layer\": " << tc.n_layer
     << ", \"n_head\": " << tc.n_head << ", \"n_embd\": " << tc.n_embd << ", \"block_size\": " << tc.block_size
     << ", \"ms_per_token\": " << json_number(target_spt * 1e3) << "}, \"tokens\": " << tokens << ", \"runs\": " << runs
     << ", \"temperature\": " << json_number(temperature) << ", \"baseline_tokens_per_s\": " << json_number(1.0 / target_spt)
     << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    js << (i ? ", " : "") << "{\"draft\": " << json_string(r.draft) << ", \"draft_params\": " << r.draft_params
       << ", \"k\": " << r.k << ", \"acceptance\": " << json_number(r.st.acceptance_rate())
       << ", \"tokens_per_round\": " << json_number(r.st.tokens_per_round())
       << ", \"expected_tokens_per_round\": " << json_number(r.expected_tpr)
       << ", \"cost_ratio\": " << json_number(r.cost_ratio) << ", \"speedup\": " << json_number(r.speedup)
       << ", \"expected_speedup\": " << json_number(r.expected_speedup)
       << ", \"verify_step_ratio\": " << json_number(r.verify_ratio) << ", \"overhead_fraction\": " << json_number(r.overhead)
       << ", \"rounds\": " << r.st.rounds << ", \"drafted\": " << r.st.drafted << ", \"judged\": " << r.st.judged << ", \"accepted\": " << r.st.accepted
       << ", \"emitted\": " << r.st.emitted << "}";
  }
  js << "]}";
  write_part_json(opts, "speculative", js.str());
  return 0;
}

}  // namespace lesson10
