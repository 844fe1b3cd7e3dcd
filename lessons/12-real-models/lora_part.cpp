// Lesson 12, part lora: LoRA against full fine-tuning on a domain shift (lora_part.h).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "gpt/lora.h"
#include "gpt/train.h"
#include "io/text.h"
#include "kernels/harness.h"
#include "kernels/matmul.h"
#include "nn/rng.h"
#include "lessons/12-real-models/real_lesson.h"
#include "nn/check.h"

namespace lesson12 {

namespace {

double load_average() {
  std::ifstream f("/proc/loadavg");
  double v = -1.0;
  f >> v;
  return v;
}

struct Run {
  std::string method;
  int rank = 0;
  gpt::FinetuneResult r;
  int64_t file_bytes = 0;
  double timed_ms = 0.0;  // the alternating rounds' median (time_methods)
};

// Step times, measured apart from the runs and ALTERNATING: round after round, `steps` steps
// of each method in turn (full, then each rank) from the same base on the same batch, and an
// unchanged peer (a 256^3 kernels::sgemm) in every round as the noise gauge. Medians over
// all rounds. A slow phase of the shared machine then hits every method alike.
struct Timing {
  std::vector<double> ms;  // per method, in the order full, ranks...
  double peer_ms = 0.0;
  int rounds = 0, steps = 0;
  int unskipped_rank = 0;     // the rank timed again with the base's weight gradients computed
  double unskipped_ms = 0.0;  // (and discarded): what skipping them saves
};
Timing time_methods(const std::string& base_path, const LoraOptions& o, bool full, int rounds, int steps) {
  auto be = gpt::make_backend(o.backend);
  struct Method {
    gpt::LoadedCheckpoint ck;
    gpt::LoraAdapters ad;
    int rank = 0;
    std::vector<double> ms;
  };
  std::vector<Method> methods;
  std::vector<int> ranks;
  if (full) ranks.push_back(0);
  for (int r : o.ranks) ranks.push_back(r);
  // last: the middle rank again with the base's weight gradients computed and discarded (what
  // the skip saves, gpt/lora.h LoraAdapters::compute_base_grads)
  ranks.push_back(o.ranks[o.ranks.size() / 2]);
  methods.resize(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    Method& m = methods[i];
    m.ck = gpt::load_checkpoint(base_path, be->memory());
    m.rank = ranks[i];
    if (m.rank > 0) {
      gpt::LoraConfig lc;
      lc.rank = m.rank;
      lc.alpha = o.alpha_over_r * static_cast<float>(m.rank);
      gpt::parse_lora_targets(o.targets, lc.targets);
      m.ad = gpt::lora_create(m.ck.model.config, lc, be->memory());
      gpt::lora_init(m.ad, 1);
      m.ad.compute_base_grads = i + 1 == ranks.size();
    }
  }
  for (Method& m : methods) {
    if (m.rank > 0) gpt::lora_attach(m.ck.model, &m.ad);  // after the vector stopped moving
  }
  const int B = o.batch_size, T = o.block_size, V = methods.front().ck.model.config.vocab_size;
  nn::Rng rng(3);
  std::vector<int32_t> x(static_cast<size_t>(B) * T), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
    y[i] = static_cast<int32_t>(rng.below(static_cast<uint32_t>(V)));
  }
  const int G = 256;
  std::vector<float> a(static_cast<size_t>(G) * G, 0.5f), b(a.size(), 0.25f), c(a.size());
  std::vector<double> peer;
  gpt::StepOptions so;
  so.lr = 1e-4f;
  for (int round = 0; round < rounds; ++round) {
    for (Method& m : methods) {
      for (int s = 0; s < steps; ++s) {
        const double t0 = omp_get_wtime();
        if (m.rank > 0) {
          gpt::lora_train_step(m.ck.model, *be, {{x.data(), y.data(), 0}}, B, T, so);
        } else {
          gpt::train_step(m.ck.model, *be, {{x.data(), y.data(), 0}}, B, T, so);
        }
        m.ms.push_back(1e3 * (omp_get_wtime() - t0));
      }
    }
    const double t0 = omp_get_wtime();
    kernels::sgemm(kernels::Trans::No, kernels::Trans::No, G, G, G, 1.0f, a.data(), G, b.data(), G, 0.0f, c.data(), G);
    peer.push_back(1e3 * (omp_get_wtime() - t0));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  Timing t;
  for (const Method& m : methods) t.ms.push_back(median(m.ms));
  t.unskipped_rank = ranks.back();
  t.unskipped_ms = t.ms.back();
  t.ms.pop_back();
  t.peer_ms = median(peer);
  t.rounds = rounds;
  t.steps = steps;
  return t;
}

}  // namespace

int run_lora_part(const Options& opts) {
  namespace fs = std::filesystem;
  LoraOptions o = opts.lora;
  if (opts.quick) {
    o.n_layer = 2;
    o.n_embd = 32;
    o.n_head = 4;
    o.block_size = 32;
    o.base_iters = 30;
    o.iters = 8;
    o.ranks = {1, 4};
    o.eval_iters = 4;
    o.batch_size = 4;
  }
  struct Cleanup {  // the temporary directory goes, on an error too
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  } cleanup;
  const fs::path work = o.work_dir.empty() ? fs::temp_directory_path() / ("nnlab_lesson12_lora_" + std::to_string(::getpid()))
                                           : fs::path(o.work_dir);
  fs::create_directories(work);
  if (o.work_dir.empty()) cleanup.dir = work;

  // the base: a character model on Tiny Shakespeare (or --data)
  const nn::TextCorpus old_corpus = nn::load_corpus(opts.data);
  std::cout << "== LoRA: adapting a Tiny Shakespeare model to the Debian licence texts ==\n"
            << "old domain: " << old_corpus.description << "\n";
  if (old_corpus.fallback) {
    std::cout << "note: Tiny Shakespeare is missing, so the base trains on the licence texts themselves and there is "
                 "no domain shift to measure (scripts/fetch_data.py tinyshakespeare)\n";
  }
  gpt::TrainOptions t;
  t.arch = o.arch;
  t.n_layer = o.n_layer;
  t.n_head = o.n_head;
  t.n_embd = o.n_embd;
  t.block_size = o.block_size;
  t.bias = o.arch == "gpt2";
  t.data = opts.data;  // the same text load_corpus found (a file, or the licence fallback directory)
  t.max_iters = o.base_iters;
  t.eval_interval = o.base_iters;
  t.eval_iters = o.eval_iters;
  t.batch_size = o.batch_size;
  t.warmup_iters = std::min(100, o.base_iters / 10);
  t.out_dir = (work / "base").string();
  t.overwrite = true;
  t.log = "none";
  t.quiet = true;
  t.seed = opts.seed;
  t.backend = o.backend;
  t.threads = opts.threads;
  std::ostringstream base_log;
  const double t0 = omp_get_wtime();
  const gpt::TrainResult base = gpt::train(t, base_log);
  const std::string base_path = base.last_path;
  const gpt::LoadedCheckpoint ck = gpt::load_checkpoint(base_path);
  std::cout << "base: " << o.arch << " " << o.n_layer << " layers x " << o.n_embd << " wide, context " << o.block_size
            << ", " << ck.model.num_params << " parameters, " << base.steps << " steps in " << std::fixed
            << std::setprecision(1) << omp_get_wtime() - t0 << " s: val loss " << std::setprecision(4)
            << base.final_val_loss << " nats/char\n"
            << std::defaultfloat;

  // the runs: the same steps, batches and schedule from the same base
  std::vector<Run> runs;
  const double load_start = load_average();
  auto one = [&](int rank) {
    gpt::FinetuneOptions f;
    f.init = base_path;
    f.data = o.new_data;
    f.old_data = old_corpus.path;
    f.rank = rank;
    f.alpha = o.alpha_over_r * static_cast<float>(std::max(rank, 1));
    f.targets = o.targets;
    f.iters = o.iters;
    f.batch_size = o.batch_size;
    f.lr = rank > 0 ? o.lora_lr : o.lr;
    f.min_lr = f.lr / 10.0f;
    f.warmup_iters = std::min(10, o.iters / 10);
    f.eval_iters = o.eval_iters;
    f.seed = opts.seed;
    f.backend = o.backend;
    f.threads = opts.threads;
    f.quiet = true;
    f.out = (work / (rank > 0 ? "lora_r" + std::to_string(rank) + ".safetensors" : std::string("full.safetensors"))).string();
    Run run;
    run.method = rank > 0 ? "lora" : "full";
    run.rank = rank;
    run.r = gpt::finetune(f, std::cout);
    run.file_bytes = static_cast<int64_t>(fs::file_size(f.out));
    runs.push_back(run);
  };
  if (o.full) one(0);
  for (int r : o.ranks) one(r);
  const Timing timing = time_methods(base_path, o, o.full, opts.quick ? 2 : o.timing_rounds, opts.quick ? 2 : 10);
  for (size_t i = 0; i < runs.size() && i < timing.ms.size(); ++i) runs[i].timed_ms = timing.ms[i];
  const double load_end = load_average();

  const double dropped = runs.empty() ? 0.0 : runs.front().r.dropped;
  std::cout << "new domain: " << (o.new_data.empty() ? std::string(nn::kLicenceDir) : o.new_data) << " ("
            << std::fixed << std::setprecision(2) << 100.0 * dropped
            << "% of its characters are outside Shakespeare's vocabulary: dropped)\n"
            << "every run: " << o.iters << " steps of " << o.batch_size << " x " << o.block_size
            << " characters, the same batches; LoRA alpha = " << std::defaultfloat << o.alpha_over_r << " r, lr "
            << o.lora_lr << " (full: " << o.lr << "); load average " << load_start << " -> " << load_end << "\n"
            << "ms/step: the median of " << timing.rounds << " alternating rounds of " << timing.steps
            << " steps per method (the peer, a 256^3 sgemm in every round: " << std::fixed << std::setprecision(3) << timing.peer_ms
            << " ms median)\n"
            << "the skip: LoRA r=" << timing.unskipped_rank << " with the frozen base's weight gradients computed "
            << "and discarded takes " << std::fixed << std::setprecision(1) << timing.unskipped_ms
            << " ms/step (in the same rounds)\n\n";
  std::cout << "| method | trainable params | AdamW state | grads | file | ms/step | val new (before -> after) | "
               "val old (before -> after) |\n|---|---:|---:|---:|---:|---:|---|---|\n";
  for (const Run& r : runs) {
    std::cout << "| " << (r.rank > 0 ? "LoRA r=" + std::to_string(r.rank) : std::string("full")) << " | "
              << r.r.trainable_params << " | " << r.r.optimizer_bytes / 1024 << " KiB | " << r.r.gradient_bytes / 1024
              << " KiB | " << r.file_bytes / 1024 << " KiB | " << std::fixed << std::setprecision(1) << r.timed_ms << " | "
              << std::setprecision(4) << r.r.val_before << " -> " << r.r.val_after << " | " << r.r.old_before << " -> "
              << r.r.old_after << " |\n";
  }
  std::cout << std::defaultfloat;

  std::ostringstream js;
  using kernels::harness::json_string;
  js << "{\"corpus_old\": " << json_string(old_corpus.description)
     << ", \"corpus_new\": " << json_string(o.new_data.empty() ? std::string(nn::kLicenceDir) : o.new_data)
     << ", \"dropped_fraction\": " << jnum(dropped) << ", \"base\": {\"arch\": " << json_string(o.arch)
     << ", \"n_layer\": " << o.n_layer << ", \"n_head\": " << o.n_head << ", \"n_embd\": " << o.n_embd
     << ", \"block_size\": " << o.block_size << ", \"params\": " << ck.model.num_params << ", \"iters\": " << base.steps
     << ", \"val_loss_old\": " << jnum(base.final_val_loss) << "}, \"settings\": {\"iters\": " << o.iters
     << ", \"batch_size\": " << o.batch_size << ", \"lr\": " << jnum(o.lr) << ", \"lora_lr\": " << jnum(o.lora_lr)
     << ", \"alpha_over_r\": " << jnum(o.alpha_over_r) << ", \"targets\": " << json_string(o.targets)
     << ", \"eval_iters\": " << o.eval_iters << ", \"threads\": " << omp_get_max_threads()
     << ", \"backend\": " << json_string(o.backend) << "}, \"runs\": [";
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    js << (i ? ", " : "") << "{\"method\": " << json_string(r.method) << ", \"rank\": " << r.rank
       << ", \"trainable_params\": " << r.r.trainable_params << ", \"optimizer_bytes\": " << r.r.optimizer_bytes
       << ", \"gradient_bytes\": " << r.r.gradient_bytes << ", \"file_bytes\": " << r.file_bytes
       << ", \"ms_per_step\": " << jnum(r.timed_ms) << ", \"ms_per_step_in_run\": " << jnum(r.r.ms_per_step)
       << ", \"seconds\": " << jnum(r.r.seconds)
       << ", \"val_new_before\": " << jnum(r.r.val_before) << ", \"val_new_after\": " << jnum(r.r.val_after)
       << ", \"val_old_before\": " << jnum(r.r.old_before) << ", \"val_old_after\": " << jnum(r.r.old_after) << "}";
  }
  js << "], \"timing\": {\"rounds\": " << timing.rounds << ", \"steps_per_round\": " << timing.steps
     << ", \"peer\": \"sgemm 256^3\", \"peer_ms\": " << jnum(timing.peer_ms)
     << ", \"unskipped_rank\": " << timing.unskipped_rank << ", \"unskipped_ms_per_step\": " << jnum(timing.unskipped_ms)
     << "}";
  js << ", \"loadavg_start\": " << jnum(load_start) << ", \"loadavg_end\": " << jnum(load_end) << "}";
  record_part("lora", js.str());
  return 0;
}

}  // namespace lesson12
