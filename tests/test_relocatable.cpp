// Tests of io/repo_paths.h: a tree moved or copied after its build uses ITS files (data/,
// scripts/), not the compiled-in tree's (issue 20: "no compiled-in source or build paths").
// First the search itself on temporary trees, then real programs copied into a fake tree:
// lesson08 reads that tree's Tiny Shakespeare, lesson02 its dataset, and `nnlab gpt bench`
// runs its scripts/gpt_torch.py. (`nnlab check`, which needs the build too, refuses instead:
// tests/test_check_cli.cpp.)
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpt/bench.h"
#include "io/idx.h"
#include "io/repo_paths.h"
#include "tests/test_util.h"

#ifdef __linux__
#include <sys/wait.h>
#endif

namespace fs = std::filesystem;
using testing::TempDir;

namespace {

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A folder that looks like the repository (io/repo_paths.h: CMakePresets.json and scripts/).
void make_repo(const fs::path& root) {
  write_file(root / "CMakePresets.json", "{}\n");
  fs::create_directories(root / "scripts");
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("repo paths: the tree above the executable comes first, the compiled-in one after",
          "[relocatable]") {
  TempDir tmp("repo-paths");
  const fs::path moved = tmp.path / "moved", original = tmp.path / "original";
  make_repo(moved);
  make_repo(original);
  const std::string exe = (moved / "build" / "release" / "bin" / "lesson08").string();
  fs::create_directories(fs::path(exe).parent_path());

  SECTION("a moved tree whose original still exists: both, the moved one first") {
    REQUIRE(nn::repo_roots_for(exe, original.string()) ==
            std::vector<std::string>{moved.string(), original.string()});
  }
  SECTION("the tree it was built in: named once") {
    REQUIRE(nn::repo_roots_for(exe, moved.string()) == std::vector<std::string>{moved.string()});
  }
  SECTION("the original tree is gone (or was never there): only the one above") {
    fs::remove_all(original);
    REQUIRE(nn::repo_roots_for(exe, original.string()) == std::vector<std::string>{moved.string()});
    REQUIRE(nn::repo_roots_for(exe, "") == std::vector<std::string>{moved.string()});
  }
  SECTION("a program copied out of any tree: only the compiled-in one, while it exists") {
    const std::string alone = (tmp.path / "bin" / "lesson08").string();
    REQUIRE(nn::repo_roots_for(alone, original.string()) == std::vector<std::string>{original.string()});
    fs::remove_all(original);
    REQUIRE(nn::repo_roots_for(alone, original.string()).empty());
    REQUIRE(nn::repo_roots_for("", "").empty());
  }
  SECTION("a folder without CMakePresets.json and scripts/ is not taken for the repository") {
    fs::remove(moved / "CMakePresets.json");
    REQUIRE(!nn::looks_like_repo(moved.string()));
    REQUIRE(nn::repo_roots_for(exe, original.string()) == std::vector<std::string>{original.string()});
  }
  SECTION("at most four levels up: a deeper executable does not reach the repository") {
    const std::string deep = (moved / "a" / "b" / "c" / "d" / "bin" / "x").string();
    REQUIRE(nn::repo_roots_for(deep, "").empty());
  }
}

TEST_CASE("repo paths: this test program finds the tree it was built in", "[relocatable]") {
  // nnlab_tests runs from <repo>/build/<preset>/bin: the nearest root is that tree, which is
  // also the compiled-in one, so it is named once.
  const std::vector<std::string> roots = nn::repo_roots();
  REQUIRE(roots.size() == 1);
  REQUIRE(fs::equivalent(roots.front(), NNLAB_SOURCE_DIR));
  REQUIRE(fs::equivalent(nn::find_in_repo("scripts/gpt_torch.py"),
                         fs::path(NNLAB_SOURCE_DIR) / "scripts" / "gpt_torch.py"));
  REQUIRE(nn::find_in_repo("no/such/file").empty());
  REQUIRE(fs::equivalent(gpt::torch_script(), fs::path(NNLAB_SOURCE_DIR) / "scripts" / "gpt_torch.py"));
}

#ifdef __linux__  // where a program can tell where its executable is (/proc/self/exe)
namespace {

struct Run {
  int status = -1;
  std::string output;
};

// Runs `exe args` in `cwd` with $NNLAB_DATA unset (so only the default places are searched).
Run run_in(const fs::path& cwd, const fs::path& exe, const std::string& args) {
  const std::string cmd =
      "cd '" + cwd.string() + "' && env -u NNLAB_DATA '" + exe.string() + "' " + args + " 2>&1";
  Run r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
}

// <tree>/build/release/bin/<program>, a copy of this build's program: a moved tree as far as
// the program can tell (its compiled-in source path names this build's tree).
fs::path copy_program(const fs::path& tree, const std::string& program) {
  const fs::path bin = tree / "build" / "release" / "bin";
  fs::create_directories(bin);
  fs::copy_file(fs::path(NNLAB_BIN_DIR) / program, bin / program);
  return bin / program;
}

}  // namespace

TEST_CASE("a moved tree: lesson08 reads the moved tree's Tiny Shakespeare", "[relocatable][cli]") {
  TempDir tmp("moved-text");
  const fs::path tree = tmp.path / "moved";
  make_repo(tree);
  // A text no real corpus has, long enough for a batch of the shapes part.
  std::string text;
  for (int i = 0; i < 400; ++i) text += "First Citizen of the moved tree, line " + std::to_string(i) + ".\n";
  write_file(tree / "data" / "tinyshakespeare.txt", text);
  const fs::path lesson08 = copy_program(tree, "lesson08");

  const Run run = run_in(tmp.path, lesson08, "--part shapes");
  INFO("the moved lesson08 printed:\n" << run.output);
  REQUIRE(run.status == 0);
  CHECK(contains(run.output, "data: Tiny Shakespeare, " + (tree / "data" / "tinyshakespeare.txt").string()));
}

TEST_CASE("a moved tree: lesson02 trains on the moved tree's data/<dataset>", "[relocatable][cli]") {
  TempDir tmp("moved-data");
  const fs::path tree = tmp.path / "moved";
  make_repo(tree);
  // A tiny MNIST-format set (16 + 8 images of 4x4, 10 classes) in <tree>/data/mnist.
  const fs::path dir = tree / "data" / "mnist";
  fs::create_directories(dir);
  for (const auto& [prefix, n] : {std::pair<std::string, int64_t>{"train", 16}, {"t10k", 8}}) {
    std::vector<uint8_t> px(static_cast<size_t>(n) * 16), lab(static_cast<size_t>(n));
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) % 251);
    for (size_t i = 0; i < lab.size(); ++i) lab[i] = static_cast<uint8_t>(i % 10);
    nn::write_idx((dir / (prefix + "-images-idx3-ubyte")).string(), {n, 4, 4}, px);
    nn::write_idx((dir / (prefix + "-labels-idx1-ubyte")).string(), {n}, lab);
  }
  const fs::path lesson02 = copy_program(tree, "lesson02");

  const Run run = run_in(tmp.path, lesson02, "--part train --dataset mnist --epochs 1 --hidden 4 --batch-size 4");
  INFO("the moved lesson02 printed:\n" << run.output);
  REQUIRE(run.status == 0);
  CHECK(contains(run.output, "data      " + dir.string() + ": 16 train, 8 test images of 4x4"));
}

TEST_CASE("a moved tree: nnlab gpt bench runs the moved tree's scripts/gpt_torch.py", "[relocatable][cli]") {
  TempDir tmp("moved-bench");
  const fs::path tree = tmp.path / "moved";
  make_repo(tree);
  // A stand-in for the PyTorch script: it says where it is and fails, which the bench reports
  // and goes on (only the path matters here).
  write_file(tree / "scripts" / "gpt_torch.py",
             "import os, sys\nprint('stand-in gpt_torch.py at ' + os.path.abspath(__file__))\nsys.exit(3)\n");
  const fs::path nnlab = copy_program(tree, "nnlab");
  const std::string tiny =
      "gpt bench --iters 1 --warmup 0 --n-layer 1 --n-head 2 --n-embd 8 --block-size 4 --batch-size 2 "
      "--torch-settings intra=1,blas=1";

  const Run run = run_in(tmp.path, nnlab, tiny);
  INFO("the moved nnlab printed:\n" << run.output);
  if (gpt::torch_python().empty()) {
    // No Python with PyTorch at configure time: the bench skips the reference before
    // looking for the script.
    CHECK(contains(run.output, "no Python with PyTorch"));
  } else {
    CHECK(contains(run.output, "stand-in gpt_torch.py at " + (tree / "scripts" / "gpt_torch.py").string()));
    CHECK(!contains(run.output, (fs::path(NNLAB_SOURCE_DIR) / "scripts" / "gpt_torch.py").string()));
    CHECK(contains(run.output, "the PyTorch script exited with status 3"));  // the exit code, not the wait status
  }
}
#endif
