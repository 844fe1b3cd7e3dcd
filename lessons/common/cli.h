// lessons/common/cli.h: how every program of the course starts and fails.
//
// A lesson is a library with two entry points:
//   void add_options(CLI::App& app, Options& opts);   // its flags, with --help text
//   int  run(const Options& opts);                    // the lesson itself; exit status
// The front door (`nnlab lesson01 ...`) mounts add_options on a subcommand; a lesson's
// own main.cpp (`lesson01 ...`, for stepping through in a debugger) calls run_standalone.
// Either way, a bad flag or a bad value ends in CLI11's message and exit status != 0,
// and an nn::Error (missing dataset, corrupt checkpoint, NaN loss) in "error: ..." and 1.
#pragma once

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <string>

#include "nn/check.h"

namespace lessons {

// Runs `body` and turns the errors a student can cause into a message and an exit status.
template <typename Body>
int run_guarded(Body&& body) {
  try {
    return body();
  } catch (const nn::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory: try a smaller batch size or model\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

// main() of a stand-alone lesson program.
template <typename Options, typename AddOptions, typename Run>
int run_standalone(const std::string& name, const std::string& description, int argc, char** argv,
                   AddOptions add_options, Run run) {
  CLI::App app{description, name};
  Options opts;
  add_options(app, opts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return run_guarded([&] { return run(opts); });
}

}  // namespace lessons
