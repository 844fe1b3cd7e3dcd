// Lesson 03: every part runs (quick sizes), validates before it times, saves what the
// notebook reads; and the lesson text and the kernel headers agree with the code.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "kernels/bench/ops.h"
#include "kernels/matmul.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

using testing::read_text;
using testing::run_program;

TEST_CASE("lesson 03 part ladder validates and times every rung, and saves the record", "[lesson03]") {
  const testing::TempDir dir("lesson03");
  const auto r = run_program("nnlab", "lesson03 --part ladder --quick --threads 1,2 --out-dir " + dir.path.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Catch::Contains("The ladder at 192^3"));
  for (const kernels::SgemmVersion& v : kernels::sgemm_versions()) {
    std::ostringstream rung;
    rung << "v" << v.number << " " << v.name;
    REQUIRE_THAT(r.output, Catch::Contains(rung.str()));
  }
  REQUIRE_THAT(r.output, !Catch::Contains("FAILED"));
  const std::string json = read_text(dir.file("ladder.json"));
  REQUIRE_THAT(json, Catch::Contains("\"op\": \"matmul\""));
  REQUIRE_THAT(json, !Catch::Contains("\"valid\": false"));
}

TEST_CASE("lesson 03 parts ceilings and stride explain what they measured", "[lesson03]") {
  const auto c = run_program("lesson03", "--part ceilings --quick");
  INFO(c.output);
  REQUIRE(c.status == 0);
  REQUIRE_THAT(c.output, Catch::Contains("GFLOP/s") && Catch::Contains("GB/s") && Catch::Contains("ridge point"));
  const auto s = run_program("lesson03", "--part stride --quick");
  INFO(s.output);
  REQUIRE(s.status == 0);
  REQUIRE_THAT(s.output, Catch::Contains("ns per float used"));
  REQUIRE_THAT(s.output, Catch::Contains("      64"));
}

TEST_CASE("lesson 03 part fusion compares the two-pass and the fused chain", "[lesson03]") {
  const testing::TempDir dir("lesson03-fusion");
  const auto r = run_program("nnlab", "lesson03 --part fusion --quick --out-dir " + dir.path.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, !Catch::Contains("FAILED"));
  REQUIRE_THAT(read_text(dir.file("fusion.json")), Catch::Contains("\"op\": \"cos2\""));
}

// The lesson text names every version of the ladder and every exercise (the header's own
// list is checked against the code in test_kernels_fused.cpp).
TEST_CASE("lesson 03's README names every matmul version and every exercise", "[lesson03][docs]") {
  const std::string readme = read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/03-matmul/README.md");
  for (const kernels::SgemmVersion& v : kernels::sgemm_versions()) {
    INFO("README.md does not mention v" << v.number << " (" << v.name << ")");
    std::ostringstream id;
    id << "v" << v.number;
    REQUIRE_THAT(readme, Catch::Contains(id.str()) && Catch::Contains(v.name));
  }
  for (const char* ex : {"06_matmul_loop_order", "07_blocked_transpose", "08_bias_relu_fused"}) {
    REQUIRE_THAT(readme, Catch::Contains(ex));
  }
}
