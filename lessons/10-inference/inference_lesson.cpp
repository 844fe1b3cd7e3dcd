// Lesson 10: inference. The options, the part dispatcher and what the parts share: the
// trained models (trained once into --out-dir), the corpus splits, the JSON records.
// The parts themselves: kv_law.cpp, quant.cpp, speculative_part.cpp, prune_part.cpp.
#include "lessons/10-inference/inference_lesson.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "gpt/backend.h"
#include "kernels/harness.h"
#include "nn/check.h"
#include "nn/cli_checks.h"
#include "io/text.h"

namespace lesson10 {

namespace fs = std::filesystem;

void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part: kv, law, quant, speculative, prune, or all")
      ->check(CLI::IsMember({"kv", "law", "quant", "speculative", "prune", "all"}))
      ->capture_default_str();
  app.add_option("--backend", o.backend, "naive, cpu or cuda (cuda: a GPU, or the emulator with NNLAB_DEVICE=emu)")
      ->check(CLI::IsMember({"naive", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads (0: the default)")->check(nn::ThreadCount())->capture_default_str();
  app.add_flag("--quick", o.quick, "Small models and few tokens (seconds; also NNLAB_QUICK=1)");
  app.add_option("--data", o.data, "Text corpus (default: Tiny Shakespeare, else a Debian text)");
  app.add_option("--out-dir", o.out_dir, "Where the trained models are kept (<out-dir>/<role>/best.safetensors)")
      ->capture_default_str();
  app.add_option("--checkpoint", o.checkpoint, "The target model (default: <out-dir>/target, trained if missing)");
  app.add_option("--json-dir", o.json_dir, "Write each part's results to <dir>/lesson10-<part>.json");
  app.add_option("--tokens", o.tokens, "Tokens generated per measurement (0: the part's default)")
      ->check(CLI::Range(0, 1000000))->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of models, batches and draws")->check(nn::Seed())->capture_default_str();
  app.callback([&o] {
    const char* q = std::getenv("NNLAB_QUICK");
    if (q != nullptr && std::string(q) == "1") o.quick = true;
  });
}

gpt::TrainOptions model_options(const Options& opts, const std::string& role) {
  gpt::TrainOptions t;
  t.data = opts.data;
  t.backend = opts.backend == "naive" ? "cpu" : opts.backend;  // train with the fast host kernels
  t.threads = opts.threads;
  t.seed = opts.seed;
  t.quiet = true;
  t.log = "none";
  t.out_dir = (fs::path(opts.out_dir) / role).string();
  t.dropout = 0.0f;
  if (role == "target") {
    // big enough that reading its weights dominates a decode step (3.2M parameters, 12.8 MB
    // in fp32), small enough to train in minutes on a laptop's CPU
    t.n_layer = 4, t.n_head = 8, t.n_embd = 256, t.block_size = 128;
    t.batch_size = 8, t.max_iters = 1000, t.lr = 1e-3f, t.min_lr = 1e-4f, t.warmup_iters = 100;
    if (opts.quick) t.n_layer = 2, t.n_head = 2, t.n_embd = 64, t.block_size = 64, t.batch_size = 8, t.max_iters = 150;
  } else if (role == "draft-s") {
    t.n_layer = 1, t.n_head = 2, t.n_embd = 64, t.block_size = 128;
    t.batch_size = 12, t.max_iters = 1500, t.lr = 2e-3f, t.min_lr = 2e-4f;
    if (opts.quick) t.n_embd = 32, t.n_head = 2, t.block_size = 64, t.batch_size = 8, t.max_iters = 100;
  } else if (role == "draft-m") {
    t.n_layer = 2, t.n_head = 4, t.n_embd = 128, t.block_size = 128;
    t.batch_size = 12, t.max_iters = 1500, t.lr = 1e-3f, t.min_lr = 1e-4f;
    if (opts.quick) t.n_layer = 1, t.n_embd = 64, t.block_size = 64, t.batch_size = 8, t.max_iters = 100;
  } else {
    NN_CHECK(false, "unknown model role '" << role << "' (target, draft-s, draft-m)");
  }
  t.eval_interval = std::max(1, t.max_iters / 4);
  t.eval_iters = opts.quick ? 5 : 20;
  return t;
}

gpt::LoadedCheckpoint load_or_train(const Options& opts, const std::string& role) {
  if (role == "target" && !opts.checkpoint.empty()) return gpt::load_checkpoint(opts.checkpoint);
  const gpt::TrainOptions t = model_options(opts, role);
  const fs::path path = fs::path(t.out_dir) / "best.safetensors";
  if (!fs::exists(path)) {
    std::cout << "training the " << role << " model (" << t.n_layer << " layers, " << t.n_embd << " wide, context "
              << t.block_size << ", " << t.max_iters << " steps) into " << t.out_dir << "; reused next time\n";
    const gpt::TrainResult r = gpt::train(t, std::cout);
    std::cout << "  trained in " << r.seconds << " s, best val loss " << r.best_val_loss << "\n";
  }
  return gpt::load_checkpoint(path.string());
}

Splits corpus_splits(const Options& opts, const nn::CharVocab& vocab) {
  const nn::TextCorpus corpus = nn::load_corpus(opts.data, gpt::TrainOptions{}.val_fraction);
  NN_CHECK(gpt::vocab_to_hex(corpus.vocab) == gpt::vocab_to_hex(vocab),
           "the model was trained on another text than " << corpus.path
                                                         << " (the vocabularies differ): pass the same --data");
  return {corpus.train, corpus.val, corpus.description};
}

std::string machine_json(const Options& opts, const gpt::Backend& backend) {
  using kernels::harness::json_string;
  std::ostringstream os;
  os << "{" << kernels::harness::json_fields(kernels::harness::machine_info())
     << ", \"backend\": " << json_string(opts.backend) << ", \"device\": " << json_string(backend.name())
     << ", \"quick\": " << (opts.quick ? "true" : "false") << "}";
  return os.str();
}

void write_part_json(const Options& opts, const std::string& part, const std::string& json) {
  if (opts.json_dir.empty()) return;
  fs::create_directories(opts.json_dir);
  // the cpu backend's figures are the lesson's; another backend's go beside them
  const std::string suffix = opts.backend == "cpu" ? "" : "-" + opts.backend;
  const fs::path path = fs::path(opts.json_dir) / ("lesson10-" + part + suffix + ".json");
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    NN_CHECK(f.good(), "cannot write " << tmp);
    f << json << "\n";
    NN_CHECK(f.good(), "writing " << tmp << " failed");
  }
  fs::rename(tmp, path);
  std::cout << "wrote " << path.string() << "\n";
}

int run(const Options& opts) {
  if (opts.part == "kv") return run_kv_part(opts);
  if (opts.part == "law") return run_law_part(opts);
  if (opts.part == "quant") return run_quant_part(opts);
  if (opts.part == "speculative") return run_speculative_part(opts);
  if (opts.part == "prune") return run_prune_part(opts);
  for (auto* part : {&run_kv_part, &run_law_part, &run_quant_part, &run_speculative_part, &run_prune_part}) {
    if (const int rc = part(opts); rc != 0) return rc;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lesson10
