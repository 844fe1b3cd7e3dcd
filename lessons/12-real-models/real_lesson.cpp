// Lesson 11: the options, the table of parts (lessons/common/parts.h runs them and writes --json).
// The parts live in their own files: hf_part.cpp, speed_part.cpp, lora_part.cpp.
#include "lessons/12-real-models/real_lesson.h"

#include <cstdlib>
#include <iostream>

#include "kernels/harness.h"
#include "lessons/common/parts.h"
#include "nn/cli_checks.h"

namespace lesson12 {

namespace {

// The parts, in the order --part all runs them. Adding a part: one line here, its
// declaration in the lesson's header, its file in lessons/CMakeLists.txt.
const std::vector<lessons::Part<Options>>& parts() {
  static const std::vector<lessons::Part<Options>> p = {
      {"hf", run_hf_part},
      {"speed", run_speed_part},
      {"lora", run_lora_part},
  };
  return p;
}

}  // namespace

std::string jnum(double v) { return kernels::harness::json_number(v, 6); }

void add_options(CLI::App& app, Options& o) {
  lessons::add_part_option(app, o.part, parts());
  app.add_option("--data", o.data, "Text corpus (default: Tiny Shakespeare, else a Debian text)");
  app.add_flag("--quick", o.quick, "Small sizes everywhere (seconds; also NNLAB_QUICK=1)");
  app.add_option("--threads", o.threads, "OpenMP threads (0: the default)")->check(nn::ThreadCount())->capture_default_str();
  app.add_option("--json", o.json, "Write what the parts measured to this JSON file (schema nnlab-lesson12/1)");
  app.add_option("--seed", o.seed, "Seed of the parts' random inputs")->check(nn::Seed())->capture_default_str();
  add_hf_options(app, o.hf);
  add_speed_options(app, o.speed);
  add_lora_options(app, o.lora);
  app.callback([&o] {
    const char* q = std::getenv("NNLAB_QUICK");
    if (q != nullptr && std::string(q) == "1") o.quick = true;
  });
}

int run(const Options& opts) { return lessons::run_parts(opts, parts(), "nnlab-lesson12/1"); }

}  // namespace lesson12
