// `nnlab check`, run for real: the front door builds the exercises (cmake --build on this
// build tree) and runs their tests. Complements the ctest entries of exercises/CMakeLists.txt
// ("exercise solution passes: X", "exercise stub fails: X"), which test the programs directly.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/manifest.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

namespace {

using testing::run_program;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs of spaces and newlines become one space: `nnlab check` wraps long hints.
std::string squash_spaces(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t';
    if (space && !out.empty() && out.back() == ' ') continue;
    out += space ? ' ' : c;
  }
  return out;
}

std::vector<exercises::Exercise> manifest() {
  return exercises::read_manifest(std::string(NNLAB_SOURCE_DIR) + "/exercises/manifest.txt");
}

// True when every stub still holds its TODO marker: the tree as shipped, not one where a
// student has started solving (there `nnlab check` may rightly report another exercise).
bool stubs_as_shipped(const std::vector<exercises::Exercise>& list) {
  for (const exercises::Exercise& ex : list) {
    std::ifstream in(std::string(NNLAB_SOURCE_DIR) + "/" + ex.file);
    std::stringstream text;
    text << in.rdbuf();
    if (!contains(text.str(), "TODO")) return false;
  }
  return true;
}

// Runs tests/validate_check_report.py (python3's xml and json modules read the reports as
// the tools that import them would); "" when they are valid, else what is wrong.
std::string report_problems(const std::string& junit, const std::string& json, size_t tests,
                            size_t failures, const std::string& names) {
  const std::string cmd = "python3 \"" + std::string(NNLAB_SOURCE_DIR) +
                          "/tests/validate_check_report.py\" --junit \"" + junit + "\" --json \"" +
                          json + "\" --tests " + std::to_string(tests) + " --failures " +
                          std::to_string(failures) + " --names " + names + " 2>&1";
  FILE* pipe = NNLAB_POPEN(cmd.c_str(), "r");
  if (pipe == nullptr) return "could not run " + cmd;
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = NNLAB_PCLOSE(pipe);
  return status == 0 && out == "ok\n" ? "" : cmd + "\n" + out;
}

#ifdef __linux__
// The program at `path` (not in the build's bin/), stderr folded into stdout.
testing::RunResult run_at(const std::string& path, const std::string& args) {
  testing::RunResult r;
  FILE* pipe = popen(("\"" + path + "\" " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
}
#endif

bool have_python3() { return std::system("python3 -c 'import xml.etree.ElementTree' > /dev/null 2>&1") == 0; }

}  // namespace

// One test case for both runs that build: two builds of one tree must not run at once.
TEST_CASE("nnlab check: solutions pass, shipped stubs fail at the first exercise with its hint",
          "[check]") {
  const std::vector<exercises::Exercise> list = manifest();
  REQUIRE(!list.empty());

  testing::TempDir dir("check-reports");
  std::string names;
  for (const exercises::Exercise& ex : list) names += (names.empty() ? "" : ",") + ex.name;
  const bool have_solutions =
      std::filesystem::is_directory(std::string(NNLAB_SOURCE_DIR) + "/exercises/solutions");
  if (!have_solutions) {  // a student release (scripts/student_release.sh)
    const auto refused = run_program("nnlab", "check --solutions");
    CHECK(refused.status == 2);
    CHECK(contains(refused.output, "no reference solutions"));
  } else {
    // The solutions, with both reports: every exercise passes, the score is full.
    const auto solutions = run_program(
        "nnlab", "check --solutions --junit \"" + dir.file("all.xml") + "\" --json \"" +
                     dir.file("all.json") + "\"");
    INFO("nnlab check --solutions --junit --json printed:\n" << solutions.output);
    CHECK(solutions.status == 0);
    for (const exercises::Exercise& ex : list) {
      CHECK(contains(solutions.output, "✓ " + ex.name));
    }
    CHECK(contains(solutions.output, "Score: " + std::to_string(list.size()) + "/" +
                                         std::to_string(list.size()) + " exercises"));
    if (have_python3()) {
      CHECK(report_problems(dir.file("all.xml"), dir.file("all.json"), list.size(), 0, names) == "");
    } else {
      WARN("python3 not found: the reports' structure is not validated");
    }
  }

  if (!stubs_as_shipped(list)) {
    WARN("exercise files were edited (a TODO marker is gone): skipping the check of the stubs");
    return;
  }
  const auto stubs = run_program("nnlab", "check");
  INFO("nnlab check printed:\n" << stubs.output);
  CHECK(stubs.status != 0);
  const exercises::Exercise& first = list.front();
  CHECK(contains(stubs.output, "exercise " + first.name));
  CHECK(contains(squash_spaces(stubs.output), "Hint: " + first.hints[0]));
  CHECK(contains(stubs.output, "`nnlab check --hint 2 --only " + first.name + "`"));
  // Level 1 only: the approach and the code are asked for, not shown.
  CHECK(!contains(squash_spaces(stubs.output), first.hints[1]));
  CHECK(!contains(squash_spaces(stubs.output), first.hints[2]));
  CHECK(contains(stubs.output, "Edit: " + first.file));
  CHECK(contains(stubs.output, "0/" + std::to_string(list.size()) + " done"));

  // --list now knows the first exercise fails (the state of that check), not just "todo".
  const auto listed = run_program("nnlab", "check --list");
  INFO("nnlab check --list printed:\n" << listed.output);
  CHECK(listed.status == 0);
  const size_t row = listed.output.find("  " + first.name + " ");
  REQUIRE(row != std::string::npos);
  const std::string line = listed.output.substr(row, listed.output.find('\n', row) - row);
  CHECK(contains(line, "fails tests"));

  // A report of one failing stub: one testcase, one failure naming its failing tests.
  const auto one = run_program("nnlab", "check --only " + first.name + " --junit \"" +
                                            dir.file("one.xml") + "\" --json \"" +
                                            dir.file("one.json") + "\"");
  INFO("nnlab check --only --junit --json printed:\n" << one.output);
  CHECK(one.status == 1);
  CHECK(contains(one.output, "Score: 0/1 exercises"));
  if (have_python3()) {
    CHECK(report_problems(dir.file("one.xml"), dir.file("one.json"), 1, 1, first.name) == "");
  }
  const std::string xml = testing::read_text(dir.file("one.xml"));
  CHECK(contains(xml, "<failure type=\"fails tests\" message=\"fails tests: "));
}

TEST_CASE("nnlab check --only with an unknown name fails with a clear message", "[check]") {
  const auto run = run_program("nnlab", "check --only does_not_exist");
  INFO("nnlab check --only does_not_exist printed:\n" << run.output);
  CHECK(run.status != 0);
  CHECK(contains(run.output, "no exercise named 'does_not_exist'"));
  CHECK(contains(run.output, manifest().front().name));  // and it lists the real ones
}

TEST_CASE("nnlab check --list shows every exercise of the manifest", "[check]") {
  const auto run = run_program("nnlab", "check --list");
  INFO("nnlab check --list printed:\n" << run.output);
  CHECK(run.status == 0);
  for (const exercises::Exercise& ex : manifest()) {
    CHECK(contains(run.output, ex.name));
    CHECK(contains(run.output, ex.file));
  }
}

TEST_CASE("nnlab check --hint N shows that level of an exercise's hint, and only that one",
          "[check]") {
  const std::vector<exercises::Exercise> list = manifest();
  const exercises::Exercise& ex = list.at(1);
  for (int level = 1; level <= 3; ++level) {
    const auto run = run_program("nnlab", "check --hint " + std::to_string(level) + " --only " + ex.name);
    INFO("nnlab check --hint " << level << " printed:\n" << run.output);
    CHECK(run.status == 0);
    CHECK(contains(run.output, "Hint " + std::to_string(level) + " of 3"));
    for (int other = 1; other <= 3; ++other) {
      CHECK(contains(squash_spaces(run.output), ex.hints[other - 1]) == (other == level));
    }
    CHECK(contains(run.output, "building") == false);  // a hint builds nothing
  }
  const auto bad = run_program("nnlab", "check --hint 4");
  CHECK(bad.status != 0);
}

#ifdef __linux__  // where nnlab can tell where its executable is (/proc/self/exe)
TEST_CASE("nnlab check from a copy of the binary refuses instead of checking another tree",
          "[check]") {
  namespace fs = std::filesystem;
  testing::TempDir dir("check-copy");
  fs::create_directories(dir.path / "bin");
  const fs::path copy = dir.path / "bin" / "nnlab";
  fs::copy_file(fs::path(NNLAB_BIN_DIR) / "nnlab", copy);
  for (const char* args : {"check --list", "check", "check --hint 1"}) {
    const auto run = run_at(copy.string(), args);
    INFO("the copy's `nnlab " << args << "` printed:\n" << run.output);
    CHECK(run.status == 2);
    CHECK(contains(run.output, "It is a copy"));
    CHECK(contains(run.output, NNLAB_SOURCE_DIR));
    CHECK(!contains(run.output, "Checking"));  // nothing was built or run
  }
  // Other commands of the copy still run: only the checker depends on the tree.
  CHECK(run_at(copy.string(), "info").status == 0);
}
#endif
