// `nnlab check`, run for real: the front door builds the exercises (cmake --build on this
// build tree) and runs their tests. Complements the ctest entries of exercises/CMakeLists.txt
// ("exercise solution passes: X", "exercise stub fails: X"), which test the programs directly.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/manifest.h"
#include "tests/cli_helpers.h"

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

}  // namespace

// One test case for both runs that build: two builds of one tree must not run at once.
TEST_CASE("nnlab check: solutions pass, shipped stubs fail at the first exercise with its hint",
          "[check]") {
  const std::vector<exercises::Exercise> list = manifest();
  REQUIRE(!list.empty());

  const auto solutions = run_program("nnlab", "check --solutions");
  INFO("nnlab check --solutions printed:\n" << solutions.output);
  CHECK(solutions.status == 0);
  for (const exercises::Exercise& ex : list) {
    CHECK(contains(solutions.output, "✓ " + ex.name));
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
  CHECK(contains(squash_spaces(stubs.output), "Hint: " + first.hint));
  CHECK(contains(stubs.output, "Edit: " + first.file));
  CHECK(contains(stubs.output, "0/" + std::to_string(list.size()) + " done"));
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
