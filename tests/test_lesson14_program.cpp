// Lesson 14 as a student runs it: the program's parts at --quick, and what bad flags do (a clear
// message, a non-zero exit, no record). The parts that start mpirun (link, scaling) need Open
// MPI; where the build has none they say why they are skipped, and this test checks that too.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/cli_helpers.h"
#include "tests/test_util.h"

using Catch::Contains;

TEST_CASE("lesson14 --quick: every part runs from the program and fills one record", "[lesson14][cli]") {
  testing::TempDir tmp("lesson14-all");
  const std::string json = tmp.file("l14.json"), out = tmp.file("out");
  const auto r = testing::run_program("lesson14", "--quick --json " + json + " --out-dir " + out);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string j = testing::read_text(json);
  REQUIRE_THAT(j, Contains("\"schema\": \"nnlab-lesson14/1\"") && Contains("\"quick\": true"));
  // ZeRO-1: 1 to 4 ranks, the measured moments; recomputation: both modes measured
  REQUIRE_THAT(j, Contains("\"zero\": {") && Contains("{\"ranks\": 4, \"max_bytes\": "));
  REQUIRE_THAT(j, Contains("\"recompute\": {") && Contains("\"recompute\": true, \"activation_bytes\": "));
  REQUIRE_THAT(j, Contains("\"predict\": {"));
#ifdef NNLAB_TEST_HAVE_MPI
  REQUIRE_THAT(j, Contains("\"link\": {\"transports\": [") && Contains("\"transport\": \"tcp\""));
  REQUIRE_THAT(j, Contains("\"scaling\": {") && Contains("\"name\": \"2 ranks x 1 thread, ZeRO-1\""));
  CHECK_THAT(r.output, Contains("2 ranks x 1 thread reach"));
#else
  CHECK_THAT(r.output, Contains("skipped: "));
#endif
}

TEST_CASE("lesson14: bad flags are refused by name, and no record is written", "[lesson14][cli]") {
  testing::TempDir tmp("lesson14-bad");
  const std::string json = tmp.file("l14.json");
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      {"--part nosuchpart", "nosuchpart"},
      {"--part scaling --steps 3", "--steps"},
      {"--part scaling --repeats 0", "--repeats"},
      {"--part predict --gpu-record " NNLAB_SOURCE_DIR "/README.md", "not valid JSON"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const auto r = testing::run_program("lesson14", std::string(c.args) + " --json " + json + " --out-dir " + tmp.file("o"));
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK_THAT(r.output, Contains(c.says));
    CHECK_FALSE(std::filesystem::exists(json));
  }
}
