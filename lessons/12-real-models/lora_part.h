// Lesson 12, part lora: LoRA against full fine-tuning on a domain shift (gpt/lora.h).
//
// A character model (lesson 08's GPT-2 block, or lesson 11's llama block with --lora-arch) is
// trained on Tiny Shakespeare (char-level: its 65 characters; BPE is not used here), then
// adapted to a different text the machine ships: the Debian licence texts
// (/usr/share/common-licenses, ~230 KB of legal English). Characters of the licences that
// Shakespeare never uses (digits, brackets, ...) cannot be inputs or targets of the base's
// vocabulary and are dropped (the record says what fraction).
//
// Each method runs the SAME number of steps from the same base, same batches, same schedule:
//   full      full fine-tuning: every parameter, AdamW state for all of them
//   lora-r    LoRA at rank r on the targets (default all four projections), base frozen
// and is measured for: trainable parameters, the bytes of AdamW state (m and v) and of the
// gradients of what is trained, the median step time, the validation loss on the new domain
// before and after, and on the old one (Tiny Shakespeare's validation split) before and after:
// forgetting.
//
// JSON (--json, parts.lora):
//   "corpus_old", "corpus_new": descriptions; "dropped_fraction": of the new text's characters
//   "base": {"arch", "n_layer", "n_head", "n_embd", "block_size", "params", "iters",
//            "val_loss_old": after its training}
//   "settings": {"iters", "batch_size", "lr", "lora_lr", "alpha_over_r", "targets", "eval_iters",
//                "threads", "backend"}
//   "runs": [{"method": "full" | "lora", "rank" (0 for full), "trainable_params",
//             "optimizer_bytes", "gradient_bytes", "file_bytes" (adapter file or checkpoint),
//             "ms_per_step" (median of the alternating timing rounds), "ms_per_step_in_run"
//             (median of the run's own steps), "seconds" (the run's steps), "val_new_before",
//             "val_new_after", "val_old_before", "val_old_after"}, ...]
//   "timing": {"rounds", "steps_per_round", "peer": "sgemm 256^3", "peer_ms", "unskipped_rank",
//             "unskipped_ms_per_step" (that rank again with the frozen base's weight gradients
//             computed and discarded: what the skip saves)}: step times
//             measured apart, round by round alternating the methods (full, r1, r4, ...), the
//             peer timed in every round as the noise gauge; medians
//   "loadavg_start", "loadavg_end": /proc/loadavg's 1-minute figure around the runs
// Losses are mean cross-entropy in nats per character.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace lesson12 {

struct LoraOptions {
  // the base (defaults: lesson 08's model; --quick: 2 layers, 32 wide, a few steps)
  std::string arch = "gpt2";
  int n_layer = 4, n_head = 4, n_embd = 128, block_size = 64;
  int base_iters = 2000;
  // the fine-tuning runs
  int iters = 400;
  std::vector<int> ranks = {1, 4, 16};
  bool full = true;             // also full fine-tuning
  float lr = 3e-4f;             // full fine-tuning's peak learning rate
  float lora_lr = 3e-3f;        // LoRA's (adapters take a larger one, as in the LoRA paper)
  float alpha_over_r = 2.0f;    // alpha = this * r (the update's scale alpha / r fixed across ranks)
  std::string targets = "qkv,attproj,fc,fcproj";
  int batch_size = 12;
  int eval_iters = 40;
  int timing_rounds = 8;        // alternating timing rounds (10 steps per method each)
  std::string new_data;         // default: /usr/share/common-licenses
  std::string backend = "cpu";
  std::string work_dir;         // where the base checkpoint and the adapters go (default: a temp dir)
};

inline void add_lora_options(CLI::App& app, LoraOptions& o) {
  const std::string g = "Part lora";
  app.add_option("--lora-arch", o.arch, "The base's block: gpt2 or llama")->check(CLI::IsMember({"gpt2", "llama"}))->capture_default_str()->group(g);
  app.add_option("--lora-n-layer", o.n_layer, "The base's layers")->check(CLI::Range(1, 64))->capture_default_str()->group(g);
  app.add_option("--lora-n-embd", o.n_embd, "The base's width")->check(CLI::Range(8, 4096))->capture_default_str()->group(g);
  app.add_option("--lora-base-iters", o.base_iters, "Steps of the base's training on Tiny Shakespeare")->check(CLI::Range(1, 1000000))->capture_default_str()->group(g);
  app.add_option("--lora-iters", o.iters, "Steps of every fine-tuning run (the same for all)")->check(CLI::Range(1, 1000000))->capture_default_str()->group(g);
  app.add_option("--lora-ranks", o.ranks, "LoRA ranks to run")->delimiter(',')->check(CLI::Range(1, 4096))->capture_default_str()->group(g);
  app.add_option("--lora-full", o.full, "Also full fine-tuning")->capture_default_str()->group(g);
  app.add_option("--lora-lr", o.lora_lr, "LoRA's peak learning rate")->check(CLI::Range(1e-7, 1.0))->capture_default_str()->group(g);
  app.add_option("--lora-full-lr", o.lr, "Full fine-tuning's peak learning rate")->check(CLI::Range(1e-7, 1.0))->capture_default_str()->group(g);
  app.add_option("--lora-targets", o.targets, "Adapted layers (qkv,attproj,fc,fcproj)")->capture_default_str()->group(g);
  app.add_option("--lora-eval-iters", o.eval_iters, "Validation batches")->check(CLI::Range(1, 100000))->capture_default_str()->group(g);
  app.add_option("--lora-timing-rounds", o.timing_rounds, "Alternating timing rounds")->check(CLI::Range(1, 1000))->capture_default_str()->group(g);
  app.add_option("--lora-new-data", o.new_data, "The new domain (default: the Debian licence texts)")->group(g);
  app.add_option("--lora-backend", o.backend, "naive, cpu or cuda")->check(CLI::IsMember({"naive", "cpu", "cuda"}))->capture_default_str()->group(g);
  app.add_option("--lora-work-dir", o.work_dir, "Where the base checkpoint and adapters are written (default: a temp dir)")->group(g);
}

}  // namespace lesson12
