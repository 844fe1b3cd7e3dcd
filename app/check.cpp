// app/check.cpp: `nnlab check`, the exercises checker (rustlings-style).
//
//   nnlab check                    build and test the exercises in order, stop at the first
//                                  one that fails and show its test output and hint
//   nnlab check --only NAME        just that exercise
//   nnlab check --all              keep going past failures, then summarise
//   nnlab check --solutions        the reference solutions instead of your stubs
//   nnlab check --list             the exercises, their lesson, file and status (from the
//                                  last check, or from running programs already built)
//   nnlab check --hint 1|2|3       the hint of the current exercise (the first one not
//                                  passing): 1 the concept, 2 the approach, 3 the code
//   nnlab check --watch            check, then re-check the current exercise whenever one of
//                                  its files changes (Ctrl-C to stop)
//   nnlab check --json F --junit F reports of every exercise, with a score (implies --all)
//
// For each exercise of exercises/manifest.txt, in order:
//   1. build its program:  cmake --build <build dir> --target ex_<name>
//      (a compile error is shown, trimmed to the compiler's messages, with the hint)
//   2. run it: <build dir>/exercises/ex_<name>, a Catch2 test program; exit status 0 = pass
//   3. print "✓ <name>", or the failing tests' output, the file to edit and the hint.
// Building one exercise at a time means a typo in exercise 3 does not hide the verdict on
// exercises 1 and 2.
#include "app/check.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app/check_support.h"
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
using check::Status;
using check::split_lines;
using check::starts_with;

// The source and build trees: the compiled-in paths, once run_check has made sure they are
// this executable's own (check::locate_trees).
std::string kSourceDir = NNLAB_SOURCE_DIR;
std::string kBinaryDir = NNLAB_BINARY_DIR;

// The names of the three hint levels, as `--hint N` announces them.
const char* const kHintLevel[3] = {"the concept", "the approach", "the code"};

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

  // Where each failure block starts (check::catch_blocks: one per failed check).
  const std::vector<check::CatchBlock> blocks = check::catch_blocks(lines, begin, summary);
  std::vector<size_t> starts;
  for (const check::CatchBlock& b : blocks) starts.push_back(b.begin);
  starts.push_back(summary);

  // Whole blocks while they fit; the first one even when it does not (cut at 2x).
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
  if (shown_cases < blocks.size()) {
    // The others by name, each test case once: a test case that fails several checks prints
    // a block per check, all with the same name.
    std::vector<std::pair<std::string, int>> others;
    for (size_t c = shown_cases; c < blocks.size(); ++c) {
      bool seen = false;
      for (auto& [name, count] : others) {
        if (name == blocks[c].name) {
          ++count;
          seen = true;
        }
      }
      if (!seen) others.emplace_back(blocks[c].name, 1);
    }
    os << "    Also failing:\n";
    for (const auto& [name, count] : others) {
      os << "      " << name;
      if (count > 1) os << "   (" << count << " failed checks)";
      os << "\n";
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

struct Verdict {
  Status outcome = Status::Passed;
  std::string details;    // compiler or test output, trimmed and indented
  std::string raw_tests;  // the test program's whole output (for the reports)
  double seconds = 0.0;   // build and run
};

// The exercise's results file: <build>/exercises/check-state.txt (check::State).
std::filesystem::path state_path() {
  return std::filesystem::path(kBinaryDir) / "exercises" / "check-state.txt";
}

// Remembers the verdict on a stub (not on a reference solution) for --list and --hint.
void remember(const Exercise& ex, Status status) {
  check::State state = check::read_state(state_path());
  state[ex.name] = {check::status_word(status),
                    check::modification_time(kSourceDir + "/" + ex.file)};
  check::write_state(state_path(), state);
}

// Runs an exercise's test program, already built; the verdict without build output.
Verdict run_tests(const std::string& program) {
  Verdict v;
  const CommandResult ran = run_command(quote(program));
  if (ran.exit_code == 0) return v;
  // Catch2 catches a crash (SIGSEGV, ...) to report it, then dies of it all the same.
  const bool crashed = ran.crashed || ran.output.find("fatal error condition") != std::string::npos;
  v.outcome = crashed ? Status::Crashed : Status::TestsFail;
  v.details = test_messages(ran.output, program);
  v.raw_tests = shorten_paths(ran.output);
  return v;
}

Verdict check_one(const Exercise& ex, bool solution) {
  const auto start = std::chrono::steady_clock::now();
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
    v.outcome = Status::DoesNotCompile;
    v.details = compiler_messages(built.output);
  } else {
    v = run_tests(program);
  }
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!solution) remember(ex, v.outcome);
  return v;
}

// ---- the report -------------------------------------------------------------------------

// " --only NAME": the flag that names an exercise on a suggested command line.
std::string only_flag(const Exercise& ex) { return " --only " + ex.name; }

void print_failure(const Exercise& ex, const Verdict& v, bool solution) {
  std::cout << "\n";
  switch (v.outcome) {
    case Status::DoesNotCompile:
      std::cout << "✗ exercise " << ex.name << " does not compile:\n";
      break;
    case Status::TestsFail:
      std::cout << "✗ exercise " << ex.name << " fails its tests:\n";
      break;
    case Status::Crashed:
      std::cout << "✗ exercise " << ex.name
                << " crashed while testing (reading or writing outside an array? "
                   "a null pointer?):\n";
      break;
    case Status::Passed:
      return;
  }
  std::cout << "\n" << v.details << "\n";
  std::cout << "Edit: " << edited_file(ex, solution) << "\n";
  std::cout << "Hint: " << wrap(ex.hints[0], 90, "      ") << "\n";
  std::cout << "      (more help: `nnlab check --hint 2" << only_flag(ex)
            << "` for the approach, `--hint 3` for the code)\n";
  std::cout << "Read: " << lesson_readme(ex.lesson) << "\n";
}

// The program of a stub that is built and newer than the files it was built from, or "".
std::string fresh_program(const Exercise& ex) {
  namespace fs = std::filesystem;
  const std::string program = program_path(ex, false);
  const int64_t built = check::modification_time(program);
  if (built == 0) return "";
  const fs::path folder = fs::path(kSourceDir) / "exercises" / ex.name;
  const check::Stamps sources = check::take_stamps({fs::path(kSourceDir) / ex.file}, {folder});
  for (const auto& [path, stamp] : sources) {
    if (stamp.time > built) return "";
  }
  return program;
}

bool holds_todo(const Exercise& ex) {
  std::ifstream in(kSourceDir + "/" + ex.file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str().find("TODO") != std::string::npos;
}

// An exercise's status for --list and for finding the current exercise, without building:
//   the last check's verdict (check-state.txt) while the stub has not changed since;
//   else, when its program is built and newer than its files, that program's verdict;
//   else "edited" (checked or built before, changed since), "not started" (never built,
//   the TODO marker still there) or "not built".
std::string quick_status(const Exercise& ex, check::State& state, bool* ran) {
  const int64_t stub_time = check::modification_time(kSourceDir + "/" + ex.file);
  if (stub_time == 0) return "missing";
  const auto it = state.find(ex.name);
  if (it != state.end() && it->second.stub_time == stub_time) return it->second.status;
  const std::string program = fresh_program(ex);
  if (!program.empty()) {
    const Verdict v = run_tests(program);
    *ran = true;
    state[ex.name] = {check::status_word(v.outcome), stub_time};
    return check::status_word(v.outcome);
  }
  if (it != state.end() || check::modification_time(program_path(ex, false)) != 0) return "edited";
  return holds_todo(ex) ? "not started" : "not built";
}

int list_exercises(const std::vector<Exercise>& list) {
  std::cout << "The exercises, in the order `nnlab check` walks them (exercises/manifest.txt):\n\n";
  size_t width = 10;
  for (const Exercise& ex : list) width = ex.name.size() + 2 > width ? ex.name.size() + 2 : width;
  std::cout << "  " << pad("exercise", width) << pad("lesson", 8) << pad("status", 18) << "file\n";
  check::State state = check::read_state(state_path());
  bool ran = false;
  int passed = 0;
  for (const Exercise& ex : list) {
    const std::string status = quick_status(ex, state, &ran);
    passed += status == "passed" ? 1 : 0;
    std::cout << "  " << pad(ex.name, width) << pad(ex.lesson, 8) << pad(status, 18) << ex.file
              << "\n";
  }
  if (ran) check::write_state(state_path(), state);
  std::cout << "\n" << passed << "/" << list.size() << " passed.\n"
            << "status: the last `nnlab check` of the exercise, or its tests run now when its "
               "program is built and\nnewer than its files; \"edited\": changed since, not "
               "checked again; \"not started\": never built,\nits TODO marker still there.\n"
               "Run `nnlab check` to build and test them, or `nnlab check --only NAME`.\n";
  return 0;
}

// The current exercise: the first one, in manifest order, whose status is not "passed".
// nullptr when all pass.
const Exercise* current_exercise(const std::vector<Exercise>& list) {
  check::State state = check::read_state(state_path());
  bool ran = false;
  const Exercise* current = nullptr;
  for (const Exercise& ex : list) {
    if (quick_status(ex, state, &ran) != "passed") {
      current = &ex;
      break;
    }
  }
  if (ran) check::write_state(state_path(), state);
  return current;
}

int show_hint(const std::vector<Exercise>& list, const Exercise* only, int level) {
  const Exercise* ex = only != nullptr ? only : current_exercise(list);
  if (ex == nullptr) {
    std::cout << "Every exercise passes: no hint needed. (For one exercise's hints: "
                 "`nnlab check --hint N --only NAME`.)\n";
    return 0;
  }
  std::cout << "Exercise " << ex->name << " (edit " << ex->file << ", read "
            << lesson_readme(ex->lesson) << ")\n\n";
  std::cout << "Hint " << level << " of 3, " << kHintLevel[level - 1] << ":\n\n";
  std::cout << "    " << wrap(ex->hints[level - 1], 90, "    ") << "\n\n";
  if (level < 3) {
    std::cout << "Still stuck? `nnlab check --hint " << level + 1 << only_flag(*ex) << "` ("
              << kHintLevel[level] << ").\n";
  } else {
    std::cout << "This is the last level. The lesson's README explains the why.\n";
  }
  return 0;
}

// Writes a report file; false (with a message) when it cannot.
bool write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "error: could not write the " << what << " report to " << path << "\n";
    return false;
  }
  std::cout << "Wrote the " << what << " report: " << path << "\n";
  return true;
}

check::ExerciseResult result_of(const Exercise& ex, const Verdict& v) {
  check::ExerciseResult r;
  r.name = ex.name;
  r.lesson = ex.lesson;
  r.file = ex.file;
  r.points = ex.points;
  r.status = v.outcome;
  if (v.outcome == Status::TestsFail || v.outcome == Status::Crashed) {
    r.failed = check::failed_tests(v.raw_tests);
  }
  r.output = v.details;
  r.seconds = v.seconds;
  return r;
}

// The folders and files whose change re-runs an exercise under --watch.
check::Stamps watched_stamps(const Exercise& ex, bool solution) {
  namespace fs = std::filesystem;
  return check::take_stamps({fs::path(kSourceDir) / edited_file(ex, solution)},
                            {fs::path(kSourceDir) / "exercises" / ex.name});
}

}  // namespace

void add_check_options(CLI::App& app, CheckOptions& opts) {
  app.add_option("--only", opts.only,
                 "Check just this exercise (a name from `nnlab check --list`)");
  app.add_flag("--list", opts.list,
               "List the exercises, their lesson, file and status (from the last check); build "
               "nothing");
  app.add_flag("--solutions", opts.solutions,
               "Check the reference solutions (exercises/solutions/) instead of your files");
  app.add_flag("--all", opts.all, "Keep going after the first failure and summarise");
  app.add_option("--hint", opts.hint,
                 "Show a hint for the current exercise (the first one not passing, or --only's): "
                 "1 the concept, 2 the approach, 3 the code")
      ->check(CLI::Range(1, 3));
  app.add_flag("--watch", opts.watch,
               "Check, then re-check the current exercise each time one of its files is saved "
               "(Ctrl-C to stop)");
  app.add_option("--json", opts.json,
                 "Write a JSON report of every exercise (status, failing tests, time, score) to "
                 "this file; implies --all");
  app.add_option("--junit", opts.junit,
                 "Write a JUnit XML report (one testcase per exercise) to this file, for "
                 "Jenkins, GitLab or a learning-management system; implies --all");
  app.footer(
      "Each exercise is a file with TODOs under exercises/, listed in exercises/manifest.txt.\n"
      "`nnlab check` builds and tests them in that order and stops at the first failure,\n"
      "showing the failing test, the file to edit and a hint (`--hint 2` and `--hint 3` give\n"
      "more).\n");
}

namespace {

// The default walk from exercise `from` on (manifest order): stop at the first failure
// (or, with --all, go on). Returns the index of the first failing exercise, list.size()
// when all passed; fills `report` with every verdict.
size_t walk(const std::vector<Exercise>& selected, size_t from, const CheckOptions& opts,
            bool all, check::Report& report, size_t* passed_before) {
  const size_t total = selected.size();
  size_t passed = *passed_before;
  size_t first_failed = total;
  Verdict first_failure;
  std::vector<const Exercise*> failed;
  for (size_t i = from; i < total; ++i) {
    const Exercise& ex = selected[i];
    const Verdict v = check_one(ex, opts.solutions);
    report.results.push_back(result_of(ex, v));
    if (v.outcome == Status::Passed) {
      std::cout << "✓ " << ex.name << "\n";
      ++passed;
      continue;
    }
    if (first_failed == total) first_failed = i;
    if (!all) {  // rustlings: stop at the first one that needs work
      print_failure(ex, v, opts.solutions);
      std::cout << "\nProgress: " << passed << "/" << total << " done. Fix this one, then "
                << (opts.watch ? "save it: it is checked again at once.\n"
                               : "run `nnlab check` again.\n");
      *passed_before = passed;
      return first_failed;
    }
    std::cout << "✗ " << ex.name << "   (edit " << edited_file(ex, opts.solutions) << ")\n";
    if (failed.empty()) first_failure = v;
    failed.push_back(&ex);
  }
  *passed_before = passed;
  if (!failed.empty()) {  // --all: the summary, then the first failure in full
    std::cout << "\n" << failed.size() << " of " << total << " failed; the first one:\n";
    print_failure(*failed.front(), first_failure, opts.solutions);
    std::cout << "\nProgress: " << passed << "/" << total << " done.\n";
    return first_failed;
  }
  std::cout << "\nProgress: " << passed << "/" << total << " done. ";
  if (opts.solutions) {
    std::cout << "Every reference solution passes its tests.\n";
  } else if (total == 1) {
    std::cout << "Well done: " << selected.front().name << " passes.\n";
  } else {
    std::cout << "Congratulations: every exercise passes!\n";
  }
  return total;
}

// --watch: the walk, then poll the current exercise's files twice a second; on a change,
// check it again, and when it passes walk on to the next failure. Ends when all pass (or
// on Ctrl-C, which stops nnlab and the build it runs alike).
int watch(const std::vector<Exercise>& selected, const CheckOptions& opts) {
  check::Report report;
  size_t passed = 0;
  size_t current = walk(selected, 0, opts, false, report, &passed);
  while (current < selected.size()) {
    const Exercise& ex = selected[current];
    std::cout << "\nWatching " << edited_file(ex, opts.solutions) << " and exercises/" << ex.name
              << "/: save a change to check again (Ctrl-C to stop).\n";
    const check::Stamps before = watched_stamps(ex, opts.solutions);
    std::vector<std::string> changed;
    while (changed.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      changed = check::changed_files(before, watched_stamps(ex, opts.solutions));
    }
    std::cout << "\n──── " << shorten_paths(changed.front())
              << (changed.size() > 1 ? " and others" : "") << " changed: checking " << ex.name
              << " again ────\n";
    passed = current;  // everything before the current one passed
    current = walk(selected, current, opts, false, report, &passed);
  }
  return 0;
}

}  // namespace

int run_check(const CheckOptions& opts) {
  // Never check another tree than this executable's own (check::locate_trees).
  const check::Trees trees =
      check::locate_trees(check::this_executable(), NNLAB_SOURCE_DIR, NNLAB_BINARY_DIR);
  if (!trees.problem.empty()) {
    std::cerr << "error: " << trees.problem;
    return 2;
  }
  kSourceDir = trees.source;
  kBinaryDir = trees.binary;

  const std::string manifest_path = kSourceDir + "/exercises/manifest.txt";
  const std::vector<Exercise> all = exercises::read_manifest(manifest_path);
  if (opts.list) return list_exercises(all);

  if (opts.solutions && !std::filesystem::is_directory(kSourceDir + "/exercises/solutions")) {
    std::cerr << "error: this copy of the course has no reference solutions (exercises/solutions/ "
                 "is not there: a student release).\n";
    return 2;
  }

  // Which exercises, in manifest order.
  std::vector<Exercise> selected;
  const Exercise* only = nullptr;
  if (!opts.only.empty()) {
    only = exercises::find_exercise(all, opts.only);
    if (only == nullptr) {
      std::cerr << "error: there is no exercise named '" << opts.only
                << "' in exercises/manifest.txt.\n"
                << "The exercises are:\n";
      for (const Exercise& e : all) std::cerr << "  " << e.name << "\n";
      std::cerr << "(`nnlab check --list` shows them with their files.)\n";
      return 2;
    }
    selected.push_back(*only);
  } else {
    selected = all;
  }
  if (opts.hint > 0) return show_hint(all, only, opts.hint);

  const bool reports = !opts.json.empty() || !opts.junit.empty();
  if (opts.watch && reports) {
    std::cerr << "error: --watch runs until you stop it; it writes no report (drop --json and "
                 "--junit, or --watch).\n";
    return 2;
  }

  const size_t total = selected.size();
  std::cout << "Checking " << total << (opts.solutions ? " reference solution" : " exercise")
            << (total == 1 ? "" : "s") << " (building in " << kBinaryDir << ")\n";
  if (opts.watch) return watch(selected, opts);

  const auto start = std::chrono::steady_clock::now();
  check::Report report;
  report.solutions = opts.solutions;
  size_t passed = 0;
  const size_t first_failed = walk(selected, 0, opts, opts.all || reports, report, &passed);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (reports) {
    const check::Score s = check::score(report);
    std::cout << "\nScore: " << s.passed << "/" << s.total << " exercises, " << s.points << "/"
              << s.max_points << " points.\n";
    bool ok = true;
    if (!opts.json.empty()) ok = write_file(opts.json, check::to_json(report), "JSON") && ok;
    if (!opts.junit.empty()) ok = write_file(opts.junit, check::to_junit(report), "JUnit") && ok;
    if (!ok) return 2;
  }
  return first_failed < total ? 1 : 0;
}

}  // namespace app
