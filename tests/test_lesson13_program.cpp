// Lesson 13 as a student runs it: the program with every part at --quick, and what bad flags
// and missing files do to it (a clear message and a non-zero exit, never a half-written record).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/cli_helpers.h"
#include "tests/test_util.h"

using Catch::Contains;

TEST_CASE("lesson13 --quick: all four parts run from the program and fill one record", "[lesson13][cli]") {
  testing::TempDir tmp("lesson13-all");
  const std::string json = tmp.file("l13.json"), out = tmp.file("out");
  const auto r = testing::run_program("lesson13", "--quick --threads 2 --json " + json + " --out-dir " + out);
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, !Contains("not written yet"));
  const std::string j = testing::read_text(json);
  REQUIRE_THAT(j, Contains("\"schema\": \"nnlab-lesson13/1\"") && Contains("\"quick\": true"));
  // Each part's object, with a field that only a real run fills.
  REQUIRE_THAT(j, Contains("\"soft-sensor\": {") && Contains("\"estimators\": ["));
  REQUIRE_THAT(j, Contains("\"mpc\": {") && Contains("\"scenarios\": [") && Contains("\"mpc_worse\": ["));
  REQUIRE_THAT(j, Contains("\"faults\": {") && Contains("\"detectors\": ["));
  REQUIRE_THAT(j, Contains("\"export\": {") && Contains("\"formats\": [") && Contains("\"closed_loop\": {"));
  // What the parts leave for the notebook and the figures.
  for (const char* f : {"mpc_setpoint-steps.csv", "mpc_disturbance.csv", "mpc_dead-time.csv",
                        "mpc_nonlinear-range.csv", "soft_sensor_test.csv"}) {
    INFO(f);
    CHECK(std::filesystem::exists(std::filesystem::path(out) / f));
  }
}

TEST_CASE("lesson13: bad flags and missing files are refused by name, and no record is written",
          "[lesson13][cli]") {
  testing::TempDir tmp("lesson13-bad");
  const std::string json = tmp.file("l13.json");
  struct Case {
    const char* args;
    const char* says;
  };
  const Case cases[] = {
      // a horizon that does not reach past the plant's 20-step dead time cannot see a move act
      {"--part mpc --quick --mpc-horizon 10", "must exceed the dead time"},
      {"--part mpc --quick --mpc-model /nonexistent/model.safetensors", "/nonexistent/model.safetensors"},
      {"--part soft-sensor --quick --soft-sensor-logs /nonexistent-logs", "/nonexistent-logs"},
      {"--part nosuchpart", "nosuchpart"},
      {"--part mpc --quick --mpc-du-max -1", "--mpc-du-max"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const auto r = testing::run_program("lesson13", std::string(c.args) + " --json " + json + " --out-dir " + tmp.file("o"));
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK_THAT(r.output, Contains(c.says));
    CHECK_FALSE(std::filesystem::exists(json));
  }
}
