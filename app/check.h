// app/check.h: `nnlab check`, the exercises checker (rustlings-style).
// Builds the exercises, runs their tests in the order of exercises/manifest.txt and stops
// at the first one that fails, printing its first hint; reports for a class (--json,
// --junit), tiered hints (--hint), a watch mode (--watch). See app/check.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace app {

struct CheckOptions {
  std::string only;        // check just this exercise (name from the manifest)
  bool list = false;       // list the exercises and their status, check nothing
  bool solutions = false;  // check the reference solutions instead of your stubs
  bool all = false;        // keep going after the first failure and summarise
  int hint = 0;            // 1..3: show that hint level for the current exercise, check nothing
  bool watch = false;      // re-check the current exercise whenever its files change
  std::string json;        // write a JSON report here (implies all)
  std::string junit;       // write a JUnit XML report here (implies all)
};

void add_check_options(CLI::App& app, CheckOptions& opts);
int run_check(const CheckOptions& opts);

}  // namespace app
