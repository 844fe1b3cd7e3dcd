// Lesson 14: the options, the table of parts, and what the parts share (running programs).
#include "lessons/14-distributed/distributed_lesson.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "kernels/harness.h"
#include "nn/cli_checks.h"

namespace lesson14 {
namespace fs = std::filesystem;

namespace {

const std::vector<lessons::Part<Options>>& parts() {
  static const std::vector<lessons::Part<Options>> p = {
      {"link", run_link_part},   {"scaling", run_scaling_part},     {"predict", run_predict_part},
      {"zero", run_zero_part},   {"recompute", run_recompute_part},
  };
  return p;
}

}  // namespace

std::string jnum(double v) { return kernels::harness::json_number(v, 6); }

Shared& shared() {
  static Shared s;
  return s;
}

std::string sibling_program(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path p = self.parent_path() / name;
  return fs::exists(p) ? p.string() : "";
}

std::string mpirun_path() {
#ifdef NNLAB_MPIEXEC
  if (fs::exists(NNLAB_MPIEXEC)) return NNLAB_MPIEXEC;
#endif
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    const fs::path p = fs::path(dir) / "mpirun";
    if (fs::exists(p)) return p.string();
  }
  return "";
}

int run_command(const std::string& cmd, const std::string& log) {
  // Open MPI refuses root unless told twice (CI containers run as root), and 2 ranks on a
  // machine whose slots it counts as 1 need oversubscription allowed
  const std::string env = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 ";
  const int status = std::system((env + cmd + " > '" + log + "' 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void add_options(CLI::App& app, Options& o) {
  lessons::add_part_option(app, o.part, parts());
  app.add_flag("--quick", o.quick, "Small sizes everywhere (seconds; also NNLAB_QUICK=1)");
  app.add_option("--threads", o.threads, "OpenMP threads of the in-process parts (0: the default)")
      ->check(nn::ThreadCount())->capture_default_str();
  app.add_option("--json", o.json, "Write what the parts measured to this JSON file (schema nnlab-lesson14/1)");
  app.add_option("--out-dir", o.out_dir, "Where the training runs and logs go")->capture_default_str();
  app.add_option("--data", o.data, "scaling: the text the runs train on (default: the trainer's own search)");
  app.add_option("--steps", o.steps, "scaling: steps per run (the first 10 are not timed)")
      ->check(CLI::Range(12, 100000))->capture_default_str();
  app.add_option("--repeats", o.repeats, "scaling: runs of each configuration, interleaved")
      ->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--slow-link-gbit", o.slow_link_gbit, "link: also time TCP over a loopback rate-limited to this "
                 "many Gbit/s (a network namespace and tc tbf: root only; 0: not)")
      ->check(CLI::Range(0.0, 100.0))->capture_default_str();
  app.add_option("--gpu-record", o.gpu_record, "predict: a gpt bench record (scripts/gpu_gpt.sh) whose fastest "
                 "nnlab row is the GPU step to extrapolate")->capture_default_str();
  app.callback([&o] {
    const char* q = std::getenv("NNLAB_QUICK");
    if (q != nullptr && std::string(q) == "1") o.quick = true;
  });
}

int run(const Options& opts) { return lessons::run_parts(opts, parts(), "nnlab-lesson14/1"); }

}  // namespace lesson14
