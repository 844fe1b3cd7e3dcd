// Lesson 11: the options, the part dispatcher and what the parts share (the --json record).
// The parts live in their own files: hf_part.cpp, speed_part.cpp, lora_part.cpp.
#include "lessons/12-real-models/real_lesson.h"

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <utility>

#include "kernels/harness.h"
#include "nn/check.h"
#include "nn/cli_checks.h"

namespace lesson12 {

namespace {

// The parts' JSON objects in the order they ran (a part run twice keeps its last).
std::vector<std::pair<std::string, std::string>>& records() {
  static std::vector<std::pair<std::string, std::string>> r;
  return r;
}

std::string machine_json(const Options& opts) {
  std::ostringstream os;
  os << "{" << kernels::harness::json_fields(kernels::harness::machine_info())
     << ", \"quick\": " << (opts.quick ? "true" : "false") << "}";
  return os.str();
}

void write_json(const Options& opts) {
  namespace fs = std::filesystem;
  const fs::path path(opts.json);
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    NN_CHECK(f.good(), "cannot write " << tmp.string());
    f << "{\"schema\": \"nnlab-lesson12/1\", \"machine\": " << machine_json(opts)
      << ", \"quick\": " << (opts.quick ? "true" : "false") << ", \"parts\": {";
    bool first = true;
    for (const auto& [part, json] : records()) {
      f << (first ? "\n  " : ",\n  ") << kernels::harness::json_string(part) << ": " << json;
      first = false;
    }
    f << "\n}}\n";
    NN_CHECK(f.good(), "writing " << tmp.string() << " failed");
  }
  fs::rename(tmp, path);
  std::cout << "wrote " << path.string() << "\n";
}

// The parts, in the order --part all runs them. Adding a part: one line here, its
// declaration in real_lesson.h, its file in lessons/CMakeLists.txt.
struct Part {
  const char* name;
  int (*run)(const Options&);
};
const std::vector<Part>& parts() {
  static const std::vector<Part> p = {
      {"hf", run_hf_part},
      {"speed", run_speed_part},
      {"lora", run_lora_part},
  };
  return p;
}

}  // namespace

void record_part(const std::string& part, const std::string& json) {
  for (auto& r : records()) {
    if (r.first == part) {
      r.second = json;
      return;
    }
  }
  records().emplace_back(part, json);
}

std::string jnum(double v) { return kernels::harness::json_number(v, 6); }

void add_options(CLI::App& app, Options& o) {
  std::vector<std::string> names;
  for (const Part& p : parts()) names.emplace_back(p.name);
  std::string help = "Which part:";
  for (const std::string& n : names) help += " " + n + ",";
  help += " or all";
  names.emplace_back("all");
  app.add_option("--part", o.part, help)->check(CLI::IsMember(names))->capture_default_str();
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

int run(const Options& opts) {
  if (opts.threads > 0) omp_set_num_threads(opts.threads);
  records().clear();
  bool first = true;
  for (const Part& p : parts()) {
    if (opts.part != p.name && opts.part != "all") continue;
    if (!first) std::cout << "\n";
    first = false;
    std::cout.flush();
    if (const int rc = p.run(opts); rc != 0) return rc;
    std::fflush(stdout);
  }
  if (!opts.json.empty()) write_json(opts);
  return 0;
}

}  // namespace lesson12
