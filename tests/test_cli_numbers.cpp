// Every floating-point flag of the front door refuses NaN and infinity, and every --threads
// flag refuses a count far above the hardware. The flags are not listed by hand: each
// command's --help is read, and every option whose type is FLOAT (or named --threads) is
// tried. A flag added later with CLI::Range (which lets NaN through: every comparison with
// NaN is false) fails this test.
//
// Each bad value is followed by a flag no command has: when the value is refused, CLI11's
// validation message comes first; when it is accepted, the run still stops at the unknown
// flag (with another message) instead of running the lesson.
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "nn/cli_checks.h"
#include "tests/cli_helpers.h"

namespace {

// The commands whose flags this test covers. lesson08 and `gpt train|sample|eval|bench|dump|diff`
// take their float flags from gpt/cli.cpp's add_train_flags; add them here once those use
// nn::FiniteRange too.
const char* const kCommands[] = {"lesson01",  "lesson02",   "lesson03",  "lesson04",  "lesson05",
                                 "lesson06",  "lesson07",   "lesson08",  "lesson09",  "lesson10",
                                 "bench",     "cuda bench", "gpt train", "gpt sample", "gpt eval",
                                 "gpt bench", "gpt dump",   "gpt diff",  "generate",  "perplexity",
                                 "energy"};

struct Flag {
  std::string name;  // --lr
  std::string type;  // FLOAT, INT, ...
};

// The options of `nnlab <command> --help`: lines "  --name TYPE..." or "  -t,--name TYPE...".
std::vector<Flag> flags_of(const std::string& command) {
  const auto r = testing::run_program("nnlab", command + " --help");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::vector<Flag> flags;
  const std::regex line(R"(^\s+(?:-\w,)?(--[\w-]+)\s+([A-Z]+))");
  std::istringstream in(r.output);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) flags.push_back({m[1], m[2]});
  }
  return flags;
}

}  // namespace

TEST_CASE("every float flag refuses nan and inf, every seed and limit overflow, every --threads flag far too many threads", "[cli]") {
  int floats = 0, threads = 0, whole = 0;
  for (const char* command : kCommands) {
    const std::vector<Flag> flags = flags_of(command);
    INFO(command);
    REQUIRE(!flags.empty());
    for (const Flag& f : flags) {
      if (f.type == "FLOAT") {
        ++floats;
        for (const char* bad : {"nan", "inf", "-inf", "NaN", "1e999"}) {
          const auto r = testing::run_program("nnlab", std::string(command) + " " + f.name + " " + bad + " --no-such-flag");
          INFO(command << " " << f.name << " " << bad << ": " << r.output);
          CHECK(r.status != 0);
          CHECK_THAT(r.output, Catch::Contains(f.name) && (Catch::Contains("finite") || Catch::Contains("range")));
          CHECK_THAT(r.output, !Catch::Contains("--no-such-flag"));  // refused before the unknown flag
        }
      }
      if (f.name == "--seed" || f.name == "--limit-train" || f.name == "--limit-test") {
        ++whole;
        // CLI11 alone reads these into a uint64_t / int64_t saturated or wrapped, silently
        for (const char* bad : {"99999999999999999999", "-1", "1.5", "12x"}) {
          const auto r = testing::run_program("nnlab", std::string(command) + " " + f.name + " " + bad + " --no-such-flag");
          INFO(command << " " << f.name << " " << bad << ": " << r.output);
          CHECK(r.status != 0);
          CHECK_THAT(r.output, Catch::Contains(f.name));
          CHECK_THAT(r.output, !Catch::Contains("--no-such-flag"));
        }
      }
      if (f.name == "--threads") {
        ++threads;
        const std::string too_many = std::to_string(nn::max_threads_allowed() + 1);
        const auto r = testing::run_program("nnlab", std::string(command) + " --threads " + too_many + " --no-such-flag");
        INFO(command << " --threads " << too_many << ": " << r.output);
        CHECK(r.status != 0);
        CHECK_THAT(r.output, Catch::Contains("hardware threads"));
        CHECK_THAT(r.output, !Catch::Contains("--no-such-flag"));
      }
    }
  }
  // the walk found what it is about (lessons 01, 02, 04, 05, 06 and bench, cuda bench have float
  // flags; lessons 02, 03, 04, 10 and bench --threads)
  CHECK(floats >= 20);
  CHECK(threads >= 5);
  CHECK(whole >= 14);  // every --seed, and lessons 02 and 04's --limit-train, --limit-test
}
