// Lesson 11: the options, the table of parts (lessons/common/parts.h runs them and writes --json).
// The parts live in their own files: bpe_part.cpp, norm_part.cpp, rope_part.cpp,
// swiglu_part.cpp, flash_part.cpp.
#include "lessons/11-modern/modern_lesson.h"

#include <cstdlib>
#include <iostream>

#include "kernels/harness.h"
#include "lessons/common/parts.h"
#include "nn/cli_checks.h"

namespace lesson11 {

namespace {

// The parts, in the order --part all runs them. Adding a part: one line here, its
// declaration in the lesson's header, its file in lessons/CMakeLists.txt.
const std::vector<lessons::Part<Options>>& parts() {
  static const std::vector<lessons::Part<Options>> p = {
      {"bpe", run_bpe_part},
      {"norm", run_norm_part},
      {"rope", run_rope_part},
      {"swiglu", run_swiglu_part},
      {"flash", run_flash_part},
      {"gqa", run_gqa_part},
      {"compare", run_compare_part},
  };
  return p;
}

}  // namespace

std::string jnum(double v) { return kernels::harness::json_number(v, 6); }

int channels_of(const Options& opts) { return opts.channels > 0 ? opts.channels : (opts.quick ? 64 : 768); }

void add_options(CLI::App& app, Options& o) {
  lessons::add_part_option(app, o.part, parts());
  app.add_option("--data", o.data, "Text corpus (default: Tiny Shakespeare, else a Debian text)");
  app.add_flag("--quick", o.quick, "Small sizes everywhere (seconds; also NNLAB_QUICK=1)");
  app.add_option("--threads", o.threads, "OpenMP threads (0: the default)")->check(nn::ThreadCount())->capture_default_str();
  app.add_option("--json", o.json, "Write what the parts measured to this JSON file (schema nnlab-lesson11/1)");
  app.add_option("--seed", o.seed, "Seed of the parts' random inputs")->check(nn::Seed())->capture_default_str();
  app.add_option("--vocab-size", o.vocab_size, "bpe: vocabulary size (1 special + 256 bytes + merges)")
      ->check(CLI::Range(257, 1 << 20))
      ->capture_default_str();
  app.add_option("--trainer", o.trainer, "bpe: v1 (the plain merge loop) or v2 (incremental pair counts)")
      ->check(CLI::IsMember({"v1", "v2"}))
      ->capture_default_str();
  app.add_option("--save-tokenizer", o.save_tokenizer, "bpe: write the trained tokenizer (Hugging Face tokenizer.json)");
  app.add_option("--load-tokenizer", o.load_tokenizer, "bpe: load this tokenizer.json instead of training one");
  app.add_option("--write-ids", o.write_ids, "bpe: write the corpus's token ids here (a JSON array)");
  app.add_option("--repeats", o.repeats, "bpe: timed encodes of the corpus (the median is printed)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--bpe-sweep", o.bpe_sweep, "bpe: merge counts at which to measure bytes per token (e.g. 0,64,256,767)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--channels", o.channels, "norm, swiglu: the channels C (0: 768, --quick 64)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  app.add_option("--flash-T", o.flash_T, "flash: sequence lengths (default 256,512,1024; --quick 32,64)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--flash-rounds", o.flash_rounds, "flash: alternating timing rounds (medians)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  add_gqa_options(app, o.gqa);
  add_compare_options(app, o.compare);
  app.callback([&o] {
    const char* q = std::getenv("NNLAB_QUICK");
    if (q != nullptr && std::string(q) == "1") o.quick = true;
  });
}

int run(const Options& opts) { return lessons::run_parts(opts, parts(), "nnlab-lesson11/1"); }

}  // namespace lesson11
