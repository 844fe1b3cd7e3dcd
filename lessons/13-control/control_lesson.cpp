// Lesson 13: the options, the table of parts (lessons/common/parts.h runs them and writes --json).
// The parts live in their own files: soft_sensor_part.cpp, mpc_part.cpp, faults_part.cpp,
// export_part.cpp.
#include "lessons/13-control/control_lesson.h"

#include <cstdlib>

#include "kernels/harness.h"
#include "lessons/common/parts.h"
#include "nn/cli_checks.h"

namespace lesson13 {

namespace {

// The parts, in the order --part all runs them. Adding a part: one line here, its
// declaration in the lesson's header, its file in lessons/CMakeLists.txt.
const std::vector<lessons::Part<Options>>& parts() {
  static const std::vector<lessons::Part<Options>> p = {
      {"soft-sensor", run_soft_sensor_part},
      {"mpc", run_mpc_part},
      {"faults", run_faults_part},
      {"export", run_export_part},
  };
  return p;
}

}  // namespace

std::string jnum(double v) { return kernels::harness::json_number(v, 6); }

void add_options(CLI::App& app, Options& o) {
  lessons::add_part_option(app, o.part, parts());
  app.add_flag("--quick", o.quick, "Small sizes everywhere (seconds; also NNLAB_QUICK=1)");
  app.add_option("--threads", o.threads, "OpenMP threads (0: the default)")->check(nn::ThreadCount())->capture_default_str();
  app.add_option("--json", o.json, "Write what the parts measured to this JSON file (schema nnlab-lesson13/1)");
  app.add_option("--out-dir", o.out_dir, "Where trained models, logs and exported C files go")->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the plant runs, weights and noise")->check(nn::Seed())->capture_default_str();
  add_soft_sensor_options(app, o.soft_sensor);
  add_mpc_options(app, o.mpc);
  add_faults_options(app, o.faults);
  add_export_options(app, o.export_);
  app.callback([&o] {
    const char* q = std::getenv("NNLAB_QUICK");
    if (q != nullptr && std::string(q) == "1") o.quick = true;
  });
}

int run(const Options& opts) { return lessons::run_parts(opts, parts(), "nnlab-lesson13/1"); }

}  // namespace lesson13
