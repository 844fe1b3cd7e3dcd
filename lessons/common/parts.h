// lessons/common/parts.h: what a lesson made of parts shares (lessons 11 and 12): the table
// of its parts, --part's choices and help, the loop that runs one or all of them, and the
// --json record they fill (one object: {"schema", "machine", "quick", "parts": {...}}).
//
//   const std::vector<lessons::Part<Options>> kParts = {{"bpe", run_bpe_part}, ...};
//   lessons::add_part_option(app, o.part, kParts);
//   ... in a part: lessons::record_part("bpe", "{...}");
//   return lessons::run_parts(opts, kParts, "nnlab-lesson11/1");   // runs, then writes --json
//
// Options must have `part`, `json`, `quick` and `threads`. Header-only: the lessons' libraries
// link nothing new for it.
#pragma once

#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/harness.h"
#include "nn/check.h"

namespace lessons {

// A comma-separated flag value as its items, spaces dropped, empty items skipped:
// "fp32, int8" -> {"fp32", "int8"} (the parts' list flags: formats, shapes, model folders).
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s + ",") {
    if (ch == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (ch != ' ') {
      cur += ch;
    }
  }
  return out;
}

template <typename Options>
struct Part {
  const char* name;
  int (*run)(const Options&);
};

// The parts' JSON objects in the order they ran (a part run twice keeps its last).
inline std::vector<std::pair<std::string, std::string>>& part_records() {
  static std::vector<std::pair<std::string, std::string>> r;
  return r;
}

// Keeps a part's JSON object (its fields, "{...}") for --json.
inline void record_part(const std::string& part, const std::string& json) {
  for (auto& r : part_records()) {
    if (r.first == part) {
      r.second = json;
      return;
    }
  }
  part_records().emplace_back(part, json);
}

// --part: one of the table's names or "all", with the choices in its help.
template <typename Options>
void add_part_option(CLI::App& app, std::string& part, const std::vector<Part<Options>>& parts) {
  std::vector<std::string> names;
  std::string help = "Which part:";
  for (const Part<Options>& p : parts) {
    names.emplace_back(p.name);
    help += " " + names.back() + ",";
  }
  help += " or all";
  names.emplace_back("all");
  app.add_option("--part", part, help)->check(CLI::IsMember(names))->capture_default_str();
}

// Writes the record atomically (a .tmp renamed over the file).
inline void write_part_records(const std::string& file, const std::string& schema, bool quick) {
  namespace fs = std::filesystem;
  const fs::path path(file);
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp);
    NN_CHECK(f.good(), "cannot write " << tmp.string());
    const char* q = quick ? "true" : "false";
    f << "{\"schema\": " << kernels::harness::json_string(schema) << ", \"machine\": {"
      << kernels::harness::json_fields(kernels::harness::machine_info()) << ", \"quick\": " << q
      << "}, \"quick\": " << q << ", \"parts\": {";
    bool first = true;
    for (const auto& [part, json] : part_records()) {
      f << (first ? "\n  " : ",\n  ") << kernels::harness::json_string(part) << ": " << json;
      first = false;
    }
    f << "\n}}\n";
    NN_CHECK(f.good(), "writing " << tmp.string() << " failed");
  }
  fs::rename(tmp, path);
  std::cout << "wrote " << path.string() << "\n";
}

// Runs opts.part (or every part, in the table's order), then writes --json if given.
template <typename Options>
int run_parts(const Options& opts, const std::vector<Part<Options>>& parts, const std::string& schema) {
  if (opts.threads > 0) omp_set_num_threads(opts.threads);
  part_records().clear();
  bool first = true;
  for (const Part<Options>& p : parts) {
    if (opts.part != p.name && opts.part != "all") continue;
    if (!first) std::cout << "\n";
    first = false;
    std::cout.flush();
    if (const int rc = p.run(opts); rc != 0) return rc;
    std::fflush(stdout);
  }
  if (!opts.json.empty()) write_part_records(opts.json, schema, opts.quick);
  return 0;
}

}  // namespace lessons
