// tests/test_docs.cpp: the texts agree with the repository they describe.
//   - the README's exercise table lists exactly the exercises of exercises/manifest.txt, in
//     order (it listed 17 of 20 once);
//   - every relative link and image in the README, docs/ and the lesson texts points at a
//     file that exists (a figure embedded in a lesson and not committed fails here).
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "exercises/manifest.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = NNLAB_SOURCE_DIR;

// The exercise names of the README's table, in order: rows that start with "| `NN_name`".
std::vector<std::string> readme_exercises(const std::string& readme) {
  std::vector<std::string> names;
  const std::regex row(R"(^\| `([0-9]{2}_[A-Za-z0-9_]+)`)");
  std::istringstream in(readme);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, row)) names.push_back(m[1]);
  }
  return names;
}

// Every markdown file the course's readers open: the README, docs/**, lessons/*/README.md.
std::vector<fs::path> course_texts() {
  std::vector<fs::path> files = {kRoot / "README.md"};
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "docs")) {
    if (e.is_regular_file() && e.path().extension() == ".md") files.push_back(e.path());
  }
  for (const auto& e : fs::directory_iterator(kRoot / "lessons")) {
    if (fs::exists(e.path() / "README.md")) files.push_back(e.path() / "README.md");
  }
  return files;
}

// The relative targets of `[text](target)` and `![alt](target)` outside code blocks and
// code spans: no URL scheme, no pure "#anchor"; the "#anchor" part is dropped.
std::vector<std::string> relative_links(const std::string& text) {
  std::vector<std::string> out;
  const std::regex link(R"(\]\(([^)\s]+)\))");
  std::istringstream in(text);
  std::string line;
  bool in_code_block = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0 || line.find("    ```") == 0) {
      in_code_block = !in_code_block;
      continue;
    }
    if (in_code_block) continue;
    // Drop code spans: a link inside backticks is an example, not a link.
    std::string prose;
    bool in_span = false;
    for (char c : line) {
      if (c == '`') in_span = !in_span;
      else if (!in_span) prose += c;
    }
    for (std::sregex_iterator it(prose.begin(), prose.end(), link), end; it != end; ++it) {
      std::string target = (*it)[1];
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
      target = target.substr(0, target.find('#'));
      if (!target.empty()) out.push_back(target);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("docs: the README's exercise table is the manifest", "[docs][unit]") {
  std::vector<std::string> manifest;
  for (const exercises::Exercise& ex : exercises::read_manifest((kRoot / "exercises/manifest.txt").string())) {
    manifest.push_back(ex.name);
  }
  const std::vector<std::string> readme = readme_exercises(testing::read_text((kRoot / "README.md").string()));
  INFO("README.md's table under ## Exercises against exercises/manifest.txt");
  REQUIRE(manifest.size() >= 20);
  CHECK(readme == manifest);
}

TEST_CASE("docs: every relative link and image in the course's texts exists", "[docs][unit]") {
  size_t checked = 0;
  for (const fs::path& file : course_texts()) {
    for (const std::string& target : relative_links(testing::read_text(file.string()))) {
      const fs::path resolved = file.parent_path() / target;
      INFO(fs::relative(file, kRoot).string() << " links to " << target);
      CHECK(fs::exists(resolved));
      ++checked;
    }
  }
  REQUIRE(checked > 100);  // the texts link to their code and to each other: the scan works
}

TEST_CASE("docs: the link scanner sees links and images and skips code and URLs", "[docs][unit]") {
  const std::string text =
      "See [the kernels](../../kernels/matmul.cpp#L10) and ![loss](figures/loss.png).\n"
      "Not `[a span](nope.md)`, not [the web](https://example.org), not [here](#top).\n"
      "```sh\n[in a block](nope2.md)\n```\n";
  const std::vector<std::string> links = relative_links(text);
  REQUIRE(links == std::vector<std::string>{"../../kernels/matmul.cpp", "figures/loss.png"});
}

TEST_CASE("docs: every lesson has a VS Code configuration that builds only its program", "[docs][unit]") {
  const std::string launch = testing::read_text((kRoot / ".vscode/launch.json").string());
  const std::string tasks = testing::read_text((kRoot / ".vscode/tasks.json").string());
  int lessons = 0;
  for (const auto& e : fs::directory_iterator(kRoot / "lessons")) {
    const std::string folder = e.path().filename().string();
    if (!e.is_directory() || folder.size() < 3 || !std::isdigit(static_cast<unsigned char>(folder[0])) ||
        !fs::exists(e.path() / "main.cpp")) {
      continue;  // common/ and anything that is not a lesson program
    }
    const std::string program = "lesson" + folder.substr(0, 2);
    const std::string task = "build " + program + " (debug)";
    INFO(program);
    CHECK_THAT(launch, Catch::Contains("\"${workspaceFolder}/build/debug/bin/" + program + "\""));
    CHECK_THAT(launch, Catch::Contains("\"preLaunchTask\": \"" + task + "\""));
    CHECK_THAT(tasks, Catch::Contains("\"label\": \"" + task + "\""));
    CHECK_THAT(tasks, Catch::Contains("cmake --build --preset debug --target " + program + "\""));
    ++lessons;
  }
  REQUIRE(lessons >= 10);
}
