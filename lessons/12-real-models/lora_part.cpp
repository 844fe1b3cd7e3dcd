// Lesson 12, part lora: LoRA against full fine-tuning on a domain shift (lora_part.h).
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "gpt/lora.h"
#include "gpt/train.h"
#include "io/text.h"
#include "kernels/harness.h"
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
};

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
  const fs::path work = o.work_dir.empty() ? fs::temp_directory_path() / ("nnlab_lesson12_lora_" + std::to_string(::getpid()))
                                           : fs::path(o.work_dir);
  fs::create_directories(work);

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
  t.data = old_corpus.path;
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
  const double load_end = load_average();

  const double dropped = runs.empty() ? 0.0 : runs.front().r.dropped;
  std::cout << "new domain: " << (o.new_data.empty() ? std::string(nn::kLicenceDir) : o.new_data) << " ("
            << std::fixed << std::setprecision(2) << 100.0 * dropped
            << "% of its characters are outside Shakespeare's vocabulary: dropped)\n"
            << "every run: " << o.iters << " steps of " << o.batch_size << " x " << o.block_size
            << " characters, the same batches; LoRA alpha = " << std::defaultfloat << o.alpha_over_r << " r, lr "
            << o.lora_lr << " (full: " << o.lr << "); load average " << load_start << " -> " << load_end << "\n\n";
  std::cout << "| method | trainable params | AdamW state | grads | file | ms/step | val new (before -> after) | "
               "val old (before -> after) |\n|---|---:|---:|---:|---:|---:|---|---|\n";
  for (const Run& r : runs) {
    std::cout << "| " << (r.rank > 0 ? "LoRA r=" + std::to_string(r.rank) : std::string("full")) << " | "
              << r.r.trainable_params << " | " << r.r.optimizer_bytes / 1024 << " KiB | " << r.r.gradient_bytes / 1024
              << " KiB | " << r.file_bytes / 1024 << " KiB | " << std::setprecision(2) << r.r.ms_per_step << " | "
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
       << ", \"ms_per_step\": " << jnum(r.r.ms_per_step) << ", \"seconds\": " << jnum(r.r.seconds)
       << ", \"val_new_before\": " << jnum(r.r.val_before) << ", \"val_new_after\": " << jnum(r.r.val_after)
       << ", \"val_old_before\": " << jnum(r.r.old_before) << ", \"val_old_after\": " << jnum(r.r.old_after) << "}";
  }
  js << "], \"loadavg_start\": " << jnum(load_start) << ", \"loadavg_end\": " << jnum(load_end) << "}";
  record_part("lora", js.str());
  if (o.work_dir.empty()) fs::remove_all(work);
  return 0;
}

}  // namespace lesson12
