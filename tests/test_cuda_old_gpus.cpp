// Old GPUs: every CUDA version states the oldest compute capability it runs on
// (needs.min_sm), and lesson 09's README names exactly the versions a compute
// capability 5.x card (GTX 960, Jetson Nano) cannot run. (That the others compile for 5.x is
// scripts/check_old_gpus.py's job: ctest label "oldgpu".)
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/bench/ops.h"
#include "lessons/09-cuda/cuda_lesson.h"

namespace cb = kernels::cuda::bench;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "matmul v8 (8.0)" -> "matmul v8"
std::string without_capability(const std::string& s) { return s.substr(0, s.find(" (")); }

}  // namespace

TEST_CASE("every CUDA version states an oldest compute capability CUDA 12 can build for", "[cuda]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  int versions = 0;
  for (const cb::Op& op : cb::ops()) {
    for (const cb::Variant& v : op.variants(dev)) {
      if (v.peer) continue;
      INFO(op.name << " " << v.id << ": min_sm " << v.needs.min_sm);
      // 5.0 is the oldest any toolkit the course supports compiles for (CUDA 12; CUDA 13: 7.5),
      // so a smaller value would claim a GPU nothing here was ever built for.
      CHECK(v.needs.min_sm >= NNLAB_SM_MAXWELL);
      ++versions;
    }
  }
  CHECK(versions > 20);
}

TEST_CASE("lesson 09 lists which versions need a newer GPU than a given one", "[cuda][lesson09]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  const std::vector<std::string> above_53 = lesson09::versions_needing_more_than(dev, 53);
  // Recomputed here from the table, op by op, to compare.
  std::vector<std::string> expected;
  for (const cb::Op& op : cb::ops()) {
    for (const cb::Variant& v : op.variants(dev)) {
      if (!v.peer && v.needs.min_sm > 53) {
        expected.push_back(op.name + " " + v.id + " (" + std::to_string(v.needs.min_sm / 10) + "." +
                           std::to_string(v.needs.min_sm % 10) + ")");
      }
    }
  }
  CHECK(above_53 == expected);
  CHECK(std::find(above_53.begin(), above_53.end(), "matmul v8 (8.0)") != above_53.end());  // TF32 tensor cores
  // Nothing needs more than the newest GPU there is; everything runs on a 9.0.
  CHECK(lesson09::versions_needing_more_than(dev, 90).empty());
}

TEST_CASE("lesson 09's README names exactly the versions a 5.x card cannot run", "[cuda][lesson09]") {
  // Section 8 says, in one sentence: "On compute capability 5.x ... every version runs except
  // **op vN, op vN and op vN**". Those must be the versions whose min_sm is above 5.3.
  const std::string readme = read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/09-cuda/README.md");
  std::smatch m;
  REQUIRE(std::regex_search(readme, m, std::regex(R"(every\s+version\s+runs\s+except\s+\*\*([^*]+)\*\*)")));
  std::set<std::string> named;
  const std::string list = m[1].str();
  const std::regex item(R"(([a-z][a-z0-9_]*) (v[0-9]+))");  // op names may hold digits: int8_gemm
  for (auto it = std::sregex_iterator(list.begin(), list.end(), item); it != std::sregex_iterator(); ++it) {
    named.insert((*it)[1].str() + " " + (*it)[2].str());
  }
  std::set<std::string> needing_more;
  for (const std::string& s : lesson09::versions_needing_more_than(kernels::cuda::emulator(), 53)) {
    needing_more.insert(without_capability(s));
  }
  INFO("README names: " << list);
  CHECK(named == needing_more);
}

TEST_CASE("lesson 09's gdb transcript steps through a kernel a student copy has, at the lines it names",
          "[cuda][lesson09][docs]") {
  // The transcript stops in v3 of kernels/cuda/matmul.cu (scripts/student_release.sh keeps it;
  // the exercises' solutions, which an earlier transcript stepped through, are not in that copy)
  // and names its lines: 211 (the kernel's first line), 222 (the first tile load, after `next
  // 7`) and 226 (the inner product, where the conditional breakpoint sits).
  const std::string readme = read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/09-cuda/README.md");
  CHECK(readme.find("exercises/solutions") == std::string::npos);
  CHECK(readme.find("_solution") == std::string::npos);
  CHECK_THAT(readme, Catch::Contains("file ../../kernels/cuda/matmul.cu, line 211.") &&
                         Catch::Contains("break 226 if row == 0 && col == 37 && k == 0"));
  std::istringstream src(read_text(std::string(NNLAB_SOURCE_DIR) + "/kernels/cuda/matmul.cu"));
  std::vector<std::string> lines(1);  // lines[n] is line n
  for (std::string line; std::getline(src, line);) lines.push_back(line);
  REQUIRE(lines.size() > 226);
  for (const int n : {211, 222, 226}) {
    INFO("kernels/cuda/matmul.cu:" << n << " is " << lines[static_cast<size_t>(n)]);
    CHECK_THAT(readme, Catch::Contains(std::to_string(n) + "\t" + lines[static_cast<size_t>(n)]));
  }
  CHECK_THAT(lines[226], Catch::Contains("sum += As[ty][k] * Bs[k][tx];"));
}
