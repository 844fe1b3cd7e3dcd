// Lesson 15: the options, the table of parts, and what the parts share (the trained model).
#include "lessons/15-compression/compression_lesson.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "gpt/compress.h"
#include "gpt/infer.h"
#include "kernels/harness.h"
#include "lessons/10-inference/inference_lesson.h"
#include "nn/cli_checks.h"

namespace lesson15 {

namespace {

const std::vector<lessons::Part<Options>>& parts() {
  static const std::vector<lessons::Part<Options>> p = {
      {"int8", run_int8_part},     {"w8a8", run_w8a8_part}, {"gptq", run_gptq_part},
      {"bitnet", run_bitnet_part}, {"kv", run_kv_part},     {"energy", run_energy_part},
  };
  return p;
}

}  // namespace

std::string jnum(double v) { return kernels::harness::json_number(v, 6); }

Target load_target(const Options& opts) {
  lesson10::Options l10;
  l10.quick = opts.quick;
  l10.data = opts.data;
  l10.out_dir = opts.quick ? opts.out_dir + "-quick" : opts.out_dir;
  l10.seed = opts.seed;
  l10.checkpoint = opts.checkpoint;
  l10.threads = opts.threads;
  Target t;
  t.ck = lesson10::load_or_train(l10, "target");
  gpt::as_trained(t.ck);  // a BitNet --checkpoint: its ternary weights, not the latents
  lesson10::Splits s = lesson10::corpus_splits(l10, t.ck.vocab);
  t.train = std::move(s.train);
  t.val = std::move(s.val);
  t.corpus = s.description;
  t.name = opts.checkpoint.empty() ? std::string("lesson 10's model")
                                   : "the model of " + opts.checkpoint + " (" + gpt::arch_name(t.ck.model.config.arch) + ")";
  return t;
}

double decode_tokens_per_s(const gpt::InferenceModel& im, gpt::Backend& be, int tokens, uint64_t seed) {
  gpt::Decoder dec(im, be);
  gpt::GenerateOptions o;
  o.tokens = tokens;
  o.temperature = 0.0f;
  o.seed = seed;
  gpt::GenerateStats st;
  gpt::generate(dec, {0}, o, &st);  // warm-up: caches, the thread team
  double best = 0.0;
  for (int r = 0; r < 3; ++r) {
    gpt::generate(dec, {0}, o, &st);
    best = std::max(best, st.tokens_per_second());
  }
  return best;
}

void add_options(CLI::App& app, Options& o) {
  lessons::add_part_option(app, o.part, parts());
  app.add_flag("--quick", o.quick, "Small sizes everywhere (seconds; also NNLAB_QUICK=1)");
  app.add_option("--threads", o.threads, "OpenMP threads (0: the default)")
      ->check(nn::ThreadCount())->capture_default_str();
  app.add_option("--json", o.json, "Write what the parts measured to this JSON file (schema nnlab-lesson15/1)");
  app.add_option("--data", o.data, "The text the models train on (default: Tiny Shakespeare, else the fallback)");
  app.add_option("--out-dir", o.out_dir, "Lesson 10's models: <out-dir>/target is reused, or trained there")
      ->capture_default_str();
  app.add_option("--checkpoint", o.checkpoint, "w8a8, gptq, kv, energy: study this checkpoint instead of lesson 10's "
                 "target (lesson 08's out/gpt/best.safetensors, a lesson 11 llama); --data must be its corpus");
  app.add_option("--bitnet-dir", o.bitnet_dir, "bitnet: where its training runs go")->capture_default_str();
  app.add_option("--bitnet-steps", o.bitnet_steps, "bitnet: training steps of each run")
      ->check(CLI::Range(10, 1000000))->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of models, batches and draws")->check(nn::Seed())->capture_default_str();
  app.callback([&o] {
    const char* q = std::getenv("NNLAB_QUICK");
    if (q != nullptr && std::string(q) == "1") o.quick = true;
  });
}

int run(const Options& opts) { return lessons::run_parts(opts, parts(), "nnlab-lesson15/1"); }

}  // namespace lesson15
