// app/check.cpp: `nnlab check`, the exercises checker (rustlings-style).
//
//   nnlab check                    build and test the exercises in order, stop at the first
//                                  one that fails and show its test output and hint
//   nnlab check --only NAME        just that exercise
//   nnlab check --all              keep going past failures, then summarise
//   nnlab check --solutions        the reference solutions instead of your stubs
//   nnlab check --list             the exercises, their lesson and file; checks nothing
//
// For each exercise of exercises/manifest.txt, in order:
//   1. build its program:  cmake --build <build dir> --target ex_<name>
//      (a compile error is shown, trimmed to the compiler's messages, with the hint)
//   2. run it: <build dir>/exercises/ex_<name>, a Catch2 test program; exit status 0 = pass
//   3. print "✓ <name>", or the failing tests' output, the file to edit and the hint.
// Building one exercise at a time means a typo in exercise 3 does not hide the verdict on
// exercises 1 and 2.
#include "app/check.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/manifest.h"

#ifndef _WIN32
#include <sys/wait.h>
#endif

#ifndef NNLAB_SOURCE_DIR
#error "NNLAB_SOURCE_DIR must be defined (app/CMakeLists.txt does)"
#endif
#ifndef NNLAB_BINARY_DIR
#error "NNLAB_BINARY_DIR must be defined (app/CMakeLists.txt does)"
#endif
#ifndef NNLAB_CMAKE_COMMAND
#error "NNLAB_CMAKE_COMMAND must be defined (app/CMakeLists.txt does)"
#endif

namespace app {

namespace {

using exercises::Exercise;

const std::string kSourceDir = NNLAB_SOURCE_DIR;
const std::string kBinaryDir = NNLAB_BINARY_DIR;

// How many lines of compiler or test output to show before cutting.
constexpr size_t kMaxLines = 45;

// ---- running a program and capturing what it prints -----------------------------------

struct CommandResult {
  int exit_code = 0;     // the program's exit status; 128 + N when killed by signal N
  bool crashed = false;  // killed by a signal (POSIX)
  std::string output;    // stdout and stderr, interleaved
};

// "path with spaces" -> "\"path with spaces\"" for the shell.
std::string quote(const std::string& s) { return "\"" + s + "\""; }

CommandResult run_command(const std::string& command) {
  CommandResult result;
  std::cout.flush();  // what we printed so far comes before what the program prints
#ifdef _WIN32
  // cmd.exe strips the first and last quote of a command line that starts with one;
  // wrapping the whole line in one more pair keeps the inner quotes intact.
  FILE* pipe = _popen(("\"" + command + " 2>&1\"").c_str(), "r");
#else
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
#endif
  NN_CHECK(pipe != nullptr, "could not run: " << command);
  char buffer[4096];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    result.output.append(buffer, got);
  }
#ifdef _WIN32
  result.exit_code = _pclose(pipe);
#else
  const int status = pclose(pipe);
  if (status == -1) {
    result.exit_code = -1;
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.crashed = true;
    result.exit_code = 128 + WTERMSIG(status);
  }
#endif
  return result;
}

// ---- making output readable ------------------------------------------------------------

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Absolute paths into the repository become relative ones: "exercises/01_.../test.cpp:42".
std::string shorten_paths(std::string text) {
  const std::string prefix = kSourceDir + "/";
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at)) {
    text.erase(at, prefix.size());
  }
  return text;
}

// At most kMaxLines lines, then a note saying how many were cut and where the rest is.
std::string head(const std::vector<std::string>& lines, const std::string& rest_hint) {
  std::ostringstream os;
  for (size_t i = 0; i < lines.size() && i < kMaxLines; ++i) {
    os << "    " << lines[i] << "\n";
  }
  if (lines.size() > kMaxLines) {
    os << "    ... (" << lines.size() - kMaxLines << " more lines: " << rest_hint << ")\n";
  }
  return os.str();
}

// The build's output without the build tool's chatter: keep what the compiler said.
//   [3/5] Building CXX object ...      ninja's progress: dropped
//   FAILED: exercises/CMakeFiles/...   ninja's failed step: dropped, and the command line after it
//   ninja: build stopped ...           dropped
std::string compiler_messages(const std::string& build_output) {
  std::vector<std::string> kept;
  bool skip_next = false;
  for (const std::string& line : split_lines(shorten_paths(build_output))) {
    if (skip_next) {  // the full compiler command line: long and not what the student needs
      skip_next = false;
      continue;
    }
    if (starts_with(line, "FAILED: ")) {
      skip_next = true;
      continue;
    }
    const bool progress = starts_with(line, "[") && line.find("] ") != std::string::npos &&
                          line.find('/') < line.find("] ");
    const bool make_progress = starts_with(line, "[ ") && line.find("%]") != std::string::npos;
    if (progress || make_progress || starts_with(line, "ninja: ") || starts_with(line, "make") ||
        starts_with(line, "gmake") || line.empty()) {
      continue;
    }
    kept.push_back(line);
  }
  return head(kept, "build with `cmake --build` to see them all");
}

// A Catch2 program's output, made short enough to read:
//   - without its banner ("... is a Catch v2 host application. Run with -? for options");
//   - whole failing test cases, as many as fit in kMaxLines (always the first one), then
//     only the names of the others;
//   - always the final summary ("test cases: 5 | 2 failed").
// Catch2 opens each failing test case with a dashed line after a blank one:
//   -----------------------------
//   neuron_forward: a worked example
//   -----------------------------
std::string test_messages(const std::string& test_output, const std::string& program) {
  const std::vector<std::string> lines = split_lines(shorten_paths(test_output));
  size_t begin = 0;
  for (size_t i = 0; i < lines.size() && i < 8; ++i) {
    if (lines[i].find("Run with -? for options") != std::string::npos) begin = i + 1;
  }
  while (begin < lines.size() && lines[begin].empty()) ++begin;
  size_t summary = lines.size();  // the "=====" line before "test cases: ..."
  for (size_t i = lines.size(); i > begin; --i) {
    if (starts_with(lines[i - 1], "=====")) {
      summary = i - 1;
      break;
    }
  }

  // Where each failing test case starts.
  std::vector<size_t> starts;
  for (size_t i = begin; i < summary; ++i) {
    if (starts_with(lines[i], "-----") && (i == begin || lines[i - 1].empty())) starts.push_back(i);
  }
  starts.push_back(summary);

  // Whole test cases while they fit; the first one even when it does not (cut at 2x).
  size_t shown_cases = 0;
  size_t end = begin;
  while (shown_cases + 1 < starts.size() &&
         (shown_cases == 0 || starts[shown_cases + 1] - begin <= kMaxLines)) {
    ++shown_cases;
    end = starts[shown_cases];
  }
  if (starts.size() == 1) end = summary;  // no test case structure: plain output
  end = end - begin > 2 * kMaxLines ? begin + 2 * kMaxLines : end;

  std::ostringstream os;
  for (size_t i = begin; i < end; ++i) os << "    " << lines[i] << "\n";
  if (shown_cases + 1 < starts.size()) {
    os << "    Also failing:\n";
    for (size_t c = shown_cases; c + 1 < starts.size(); ++c) {
      const size_t name = starts[c] + 1;
      if (name < summary) os << "      " << lines[name] << "\n";
    }
  }
  if (end < summary) os << "    (run " << program << " to see all of its output)\n";
  for (size_t i = summary; i < lines.size(); ++i) {
    if (!lines[i].empty()) os << "    " << lines[i] << "\n";
  }
  return os.str();
}

// Breaks text into lines of at most `width` characters at spaces, `indent` before each
// line after the first (the first follows a label as wide as `indent`: "Hint: ").
std::string wrap(const std::string& text, size_t width, const std::string& indent) {
  std::istringstream words(text);
  std::string word;
  std::string out;
  size_t column = indent.size();  // the first line follows a label as wide as the indent
  while (words >> word) {
    if (!out.empty() && column + 1 + word.size() > width) {
      out += "\n" + indent;
      column = indent.size();
    } else if (!out.empty()) {
      out += " ";
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out;
}

// "01" -> "lessons/01-neuron/README.md", the lesson that explains an exercise.
std::string lesson_readme(const std::string& lesson) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(kSourceDir + "/lessons", ec)) {
    const std::string folder = entry.path().filename().string();
    if (entry.is_directory() && starts_with(folder, lesson + "-")) {
      return "lessons/" + folder + "/README.md";
    }
  }
  return "lessons/" + lesson + "-*/README.md";
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// ---- one exercise: build, run ----------------------------------------------------------

std::string program_path(const Exercise& ex, bool solution) {
#ifdef _WIN32
  const char* suffix = ".exe";
#else
  const char* suffix = "";
#endif
  return kBinaryDir + "/exercises/" + ex.target(solution) + suffix;
}

// The file the student edits: the stub, or with --solutions the reference solution.
std::string edited_file(const Exercise& ex, bool solution) {
  return solution ? ex.solution_file() : ex.file;
}

enum class Outcome { Passed, DoesNotCompile, TestsFail, Crashed };

struct Verdict {
  Outcome outcome = Outcome::Passed;
  std::string details;  // compiler or test output, trimmed and indented
};

Verdict check_one(const Exercise& ex, bool solution) {
  Verdict v;
  const std::string program = program_path(ex, solution);
  std::error_code ec;
  if (!std::filesystem::exists(program, ec)) {  // else a silent minute looks like a hang
    std::cout << "  building " << ex.target(solution) << " for the first time ...\n";
  }
  const std::string build = quote(NNLAB_CMAKE_COMMAND) + " --build " + quote(kBinaryDir) +
                            " --target " + ex.target(solution);
  const CommandResult built = run_command(build);
  if (built.exit_code != 0) {
    v.outcome = Outcome::DoesNotCompile;
    v.details = compiler_messages(built.output);
    return v;
  }
  const CommandResult ran = run_command(quote(program));
  if (ran.exit_code == 0) return v;
  // Catch2 catches a crash (SIGSEGV, ...) to report it, then dies of it all the same.
  const bool crashed = ran.crashed || ran.output.find("fatal error condition") != std::string::npos;
  v.outcome = crashed ? Outcome::Crashed : Outcome::TestsFail;
  v.details = test_messages(ran.output, program);
  return v;
}

// ---- the report -------------------------------------------------------------------------

void print_failure(const Exercise& ex, const Verdict& v, bool solution) {
  std::cout << "\n";
  switch (v.outcome) {
    case Outcome::DoesNotCompile:
      std::cout << "✗ exercise " << ex.name << " does not compile:\n";
      break;
    case Outcome::TestsFail:
      std::cout << "✗ exercise " << ex.name << " fails its tests:\n";
      break;
    case Outcome::Crashed:
      std::cout << "✗ exercise " << ex.name
                << " crashed while testing (reading or writing outside an array? "
                   "a null pointer?):\n";
      break;
    case Outcome::Passed:
      return;
  }
  std::cout << "\n" << v.details << "\n";
  std::cout << "Edit: " << edited_file(ex, solution) << "\n";
  std::cout << "Hint: " << wrap(ex.hint, 90, "      ") << "\n";
  std::cout << "Read: " << lesson_readme(ex.lesson) << "\n";
}

int list_exercises(const std::vector<Exercise>& list) {
  std::cout << "The exercises, in the order `nnlab check` walks them (exercises/manifest.txt):\n\n";
  size_t width = 10;
  for (const Exercise& ex : list) width = ex.name.size() + 2 > width ? ex.name.size() + 2 : width;
  std::cout << "  " << pad("exercise", width) << pad("lesson", 8) << pad("status", 9) << "file\n";
  for (const Exercise& ex : list) {
    // A quick look, not a check: does the file still hold a TODO marker?
    std::ifstream in(kSourceDir + "/" + ex.file);
    std::stringstream text;
    text << in.rdbuf();
    std::string status = "edited";
    if (!in) {
      status = "missing";
    } else if (text.str().find("TODO") != std::string::npos) {
      status = "todo";
    }
    std::cout << "  " << pad(ex.name, width) << pad(ex.lesson, 8) << pad(status, 9) << ex.file
              << "\n";
  }
  std::cout << "\nstatus: \"todo\" while the file still holds a TODO marker (nothing was run).\n"
               "Run `nnlab check` to build and test them, or `nnlab check --only NAME`.\n";
  return 0;
}

}  // namespace

void add_check_options(CLI::App& app, CheckOptions& opts) {
  app.add_option("--only", opts.only,
                 "Check just this exercise (a name from `nnlab check --list`)");
  app.add_flag("--list", opts.list, "List the exercises, their lesson and file; check nothing");
  app.add_flag("--solutions", opts.solutions,
               "Check the reference solutions (exercises/solutions/) instead of your files");
  app.add_flag("--all", opts.all, "Keep going after the first failure and summarise");
  app.footer(
      "Each exercise is a file with TODOs under exercises/, listed in exercises/manifest.txt.\n"
      "`nnlab check` builds and tests them in that order and stops at the first failure,\n"
      "showing the failing test, the file to edit and a hint.\n");
}

int run_check(const CheckOptions& opts) {
  const std::string manifest_path = kSourceDir + "/exercises/manifest.txt";
  const std::vector<Exercise> all = exercises::read_manifest(manifest_path);
  if (opts.list) return list_exercises(all);

  // Which exercises, in manifest order.
  std::vector<Exercise> selected;
  if (!opts.only.empty()) {
    const Exercise* ex = exercises::find_exercise(all, opts.only);
    if (ex == nullptr) {
      std::cerr << "error: there is no exercise named '" << opts.only
                << "' in exercises/manifest.txt.\n"
                << "The exercises are:\n";
      for (const Exercise& e : all) std::cerr << "  " << e.name << "\n";
      std::cerr << "(`nnlab check --list` shows them with their files.)\n";
      return 2;
    }
    selected.push_back(*ex);
  } else {
    selected = all;
  }

  const size_t total = selected.size();
  std::cout << "Checking " << total << (opts.solutions ? " reference solution" : " exercise")
            << (total == 1 ? "" : "s") << " (building in " << kBinaryDir << ")\n";

  size_t passed = 0;
  std::vector<const Exercise*> failed;
  Verdict first_failure;
  for (const Exercise& ex : selected) {
    const Verdict v = check_one(ex, opts.solutions);
    if (v.outcome == Outcome::Passed) {
      std::cout << "✓ " << ex.name << "\n";
      ++passed;
      continue;
    }
    if (!opts.all) {  // rustlings: stop at the first one that needs work
      print_failure(ex, v, opts.solutions);
      std::cout << "\nProgress: " << passed << "/" << total << " done. Fix this one, then run "
                << "`nnlab check` again.\n";
      return 1;
    }
    std::cout << "✗ " << ex.name << "   (edit " << edited_file(ex, opts.solutions) << ")\n";
    if (failed.empty()) first_failure = v;
    failed.push_back(&ex);
  }

  if (!failed.empty()) {  // --all: the summary, then the first failure in full
    std::cout << "\n" << failed.size() << " of " << total << " failed; the first one:\n";
    print_failure(*failed.front(), first_failure, opts.solutions);
    std::cout << "\nProgress: " << passed << "/" << total << " done.\n";
    return 1;
  }
  std::cout << "\nProgress: " << passed << "/" << total << " done. ";
  if (opts.solutions) {
    std::cout << "Every reference solution passes its tests.\n";
  } else if (total == 1) {
    std::cout << "Well done: " << selected.front().name << " passes.\n";
  } else {
    std::cout << "Congratulations: every exercise passes!\n";
  }
  return 0;
}

}  // namespace app
