// Lesson 11: the options and the part dispatcher (the parts live in their own files).
#include "lessons/11-modern/modern_lesson.h"

#include "nn/check.h"

namespace lesson11 {

void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part: bpe, compare, or all")
      ->check(CLI::IsMember({"bpe", "compare", "all"}))
      ->capture_default_str();
  app.add_option("--data", o.data, "Text corpus (default: Tiny Shakespeare, else a Debian text)");
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
  add_compare_options(app, o.compare);
}

int run(const Options& opts) {
  if (opts.part == "bpe" || opts.part == "all") {
    const int status = run_bpe_part(opts);
    if (status != 0) return status;
  }
  if (opts.part == "compare" || opts.part == "all") {
    const int status = run_compare_part(opts);
    if (status != 0) return status;
  }
  return 0;
}

}  // namespace lesson11
