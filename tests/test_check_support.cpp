// The plain functions behind `nnlab check` (app/check_support.h) and the manifest parser
// (exercises/manifest.h), tested without building or running anything: reading Catch2's
// output, the JSON and JUnit reports, the state file, --watch's change detection and the
// refusal to check another tree than the executable's own.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/check_support.h"
#include "exercises/manifest.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace app::check;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// What Catch2 v2's console reporter prints for a program with two failing test cases, the
// first failing three checks (sections, or rounds of a loop): three blocks of the same name.
const char* const kCatchOutput = R"(
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
ex_16_tiled_matmul is a Catch v2.13.10 host application.
Run with -? for options

-----------------------------------------------------------------------------------------
matmul_tiled: sizes the 16 x 16 tile does not divide
  1 x 1 x 1
-----------------------------------------------------------------------------------------
exercises/16_tiled_matmul/test.cpp:99
.........................................................................................

exercises/16_tiled_matmul/test.cpp:71: FAILED:
  CHECK( problem.empty() )
with message:
  C[0] = 0, expected 0.119

-----------------------------------------------------------------------------------------
matmul_tiled: sizes the 16 x 16 tile does not divide
  17 x 33 x 5
-----------------------------------------------------------------------------------------
exercises/16_tiled_matmul/test.cpp:99
.........................................................................................

exercises/16_tiled_matmul/test.cpp:71: FAILED:
  CHECK( problem.empty() )

-----------------------------------------------------------------------------------------
matmul_tiled: sizes the 16 x 16 tile does not divide
  40 x 2 x 19
-----------------------------------------------------------------------------------------
exercises/16_tiled_matmul/test.cpp:99
.........................................................................................

exercises/16_tiled_matmul/test.cpp:71: FAILED:
  CHECK( problem.empty() )

-----------------------------------------------------------------------------------------
matmul_tiled: K = 0 gives C = 0 <an empty sum> & "more"
-----------------------------------------------------------------------------------------
exercises/16_tiled_matmul/test.cpp:125
.........................................................................................

exercises/16_tiled_matmul/test.cpp:137: FAILED:
  CHECK( c.mismatches == 0 )

=========================================================================================
test cases: 4 | 2 passed | 2 failed
assertions: 6 | 2 passed | 4 failed
)";

Report sample_report() {
  Report r;
  ExerciseResult a;
  a.name = "01_neuron_forward";
  a.lesson = "01";
  a.file = "exercises/01_neuron_forward/neuron_forward.cpp";
  a.seconds = 0.25;
  ExerciseResult b = a;
  b.name = "16_tiled_matmul";
  b.lesson = "09";
  b.points = 3;
  b.status = Status::TestsFail;
  b.failed = failed_tests(kCatchOutput);
  b.output = "C[0] = 0 < 1 & \"quoted\"\x01 control\n";
  ExerciseResult c = a;
  c.name = "02_relu_backward";
  c.status = Status::DoesNotCompile;
  c.output = "relu_backward.cpp:3: error: expected ';'";
  r.results = {a, b, c};
  r.seconds = 1.5;
  return r;
}

}  // namespace

TEST_CASE("check support: Catch2's failure blocks become one entry per failing test case",
          "[check]") {
  const std::vector<FailedTest> tests = failed_tests(kCatchOutput);
  REQUIRE(tests.size() == 2);
  CHECK(tests[0].name == "matmul_tiled: sizes the 16 x 16 tile does not divide");
  CHECK(tests[0].failures == 3);
  CHECK(contains(tests[0].message, "1 x 1 x 1"));  // the first block's section and message
  CHECK(contains(tests[0].message, "C[0] = 0, expected 0.119"));
  CHECK(tests[1].failures == 1);
  CHECK(contains(tests[1].name, "K = 0 gives C = 0"));
  CHECK(failed_tests("Segmentation fault\n").empty());  // no Catch2 blocks: nothing invented
}

TEST_CASE("check support: the score counts exercises and their points", "[check]") {
  const Score s = score(sample_report());
  CHECK(s.passed == 1);
  CHECK(s.total == 3);
  CHECK(s.points == 1);
  CHECK(s.max_points == 5);
}

TEST_CASE("check support: the JUnit report has one testsuite, one testcase per exercise, "
          "escaped text", "[check]") {
  const std::string xml = to_junit(sample_report());
  CHECK(contains(xml, "<testsuite name=\"nnlab exercises\" tests=\"3\" failures=\"2\""));
  CHECK(contains(xml, "<testcase name=\"01_neuron_forward\" classname=\"lesson01\""));
  CHECK(contains(xml, "<property name=\"points\" value=\"1/5\"/>"));
  // The failure names each failing test once, escaped for an attribute.
  CHECK(contains(xml, "<failure type=\"fails tests\" message=\"fails tests: matmul_tiled: sizes "
                      "the 16 x 16 tile does not divide; matmul_tiled: K = 0 gives C = 0 &lt;an "
                      "empty sum&gt; &amp; &quot;more&quot;\">"));
  CHECK(contains(xml, "C[0] = 0 &lt; 1 &amp; &quot;quoted&quot;? control"));  // \x01 -> ?
  CHECK(contains(xml, "<failure type=\"does not compile\" message=\"does not compile\">"));
  size_t suites = 0;
  for (size_t at = xml.find("<testsuite "); at != std::string::npos;
       at = xml.find("<testsuite ", at + 1)) {
    ++suites;
  }
  CHECK(suites == 1);
}

TEST_CASE("check support: the JSON report escapes strings and carries the score", "[check]") {
  const std::string json = to_json(sample_report());
  CHECK(contains(json, "\"score\": {\"passed\": 1, \"total\": 3, \"points\": 1, \"max_points\": 5}"));
  CHECK(contains(json, "\"status\": \"does not compile\""));
  CHECK(contains(json, "\\\"quoted\\\"\\u0001 control\\n"));
  CHECK(contains(json, "\"failures\": 3"));
  CHECK(json_string("a\\b\t") == "\"a\\\\b\\t\"");
}

TEST_CASE("check support: the state file remembers each exercise's last check", "[check]") {
  testing::TempDir dir("check-state");
  const fs::path path = dir.path / "exercises" / "check-state.txt";
  CHECK(read_state(path).empty());  // no file yet: nothing remembered, no error
  State state;
  state["01_neuron_forward"] = {"passed", 12345};
  state["02_relu_backward"] = {"fails tests", -7};
  REQUIRE(write_state(path, state));
  std::ofstream(path, std::ios::app) << "a damaged line\n";
  const State back = read_state(path);
  REQUIRE(back.size() == 2);
  CHECK(back.at("01_neuron_forward").status == "passed");
  CHECK(back.at("01_neuron_forward").stub_time == 12345);
  CHECK(back.at("02_relu_backward").status == "fails tests");
  CHECK(back.at("02_relu_backward").stub_time == -7);
}

TEST_CASE("check support: --watch notices a saved, a new and a deleted file, and nothing else",
          "[check]") {
  testing::TempDir dir("check-watch");
  const fs::path stub = dir.path / "src" / "stub.cpp";
  const fs::path folder = dir.path / "exercise";
  write(stub, "int x;\n");
  write(folder / "test.cpp", "test\n");
  const Stamps first = take_stamps({stub}, {folder});
  CHECK(changed_files(first, take_stamps({stub}, {folder})).empty());  // nothing touched

  // Saved: the same size, a later time (set explicitly: file times can be coarse).
  write(stub, "int y;\n");
  fs::last_write_time(stub, fs::last_write_time(stub) + std::chrono::seconds(2));
  const Stamps saved = take_stamps({stub}, {folder});
  CHECK(changed_files(first, saved) == std::vector<std::string>{stub.string()});

  // A new file in the exercise's folder, then the test file deleted.
  write(folder / "notes.txt", "n\n");
  const Stamps added = take_stamps({stub}, {folder});
  CHECK(changed_files(saved, added) == std::vector<std::string>{(folder / "notes.txt").string()});
  fs::remove(folder / "test.cpp");
  CHECK(changed_files(added, take_stamps({stub}, {folder})) ==
        std::vector<std::string>{(folder / "test.cpp").string()});

  // The same time but another size (an editor that keeps the time) is a change too.
  const Stamps before = take_stamps({stub}, {folder});
  const auto time = fs::last_write_time(stub);
  write(stub, "int y = 1;\n");
  fs::last_write_time(stub, time);
  CHECK(changed_files(before, take_stamps({stub}, {folder})).size() == 1);
}

TEST_CASE("check support: a copied or moved nnlab refuses to check the tree it was built from",
          "[check]") {
  testing::TempDir dir("check-trees");
  const fs::path source = dir.path / "course";
  const fs::path build = source / "build" / "release";
  write(source / "exercises" / "manifest.txt", "[x]\n");
  write(build / "CMakeCache.txt", "CMAKE_CACHEFILE_DIR:INTERNAL=" + build.string() + "\n");
  write(build / "bin" / "nnlab", "");

  // Its own build: the compiled-in paths stand.
  const Trees own = locate_trees(build / "bin" / "nnlab", source.string(), build.string());
  CHECK(own.problem.empty());
  CHECK(own.source == source.string());
  // Where the system cannot tell (no /proc): the compiled-in paths, as before.
  CHECK(locate_trees({}, source.string(), build.string()).problem.empty());

  // A copy of the binary elsewhere, with no build folder around it.
  write(dir.path / "copy" / "bin" / "nnlab", "");
  const Trees copy = locate_trees(dir.path / "copy" / "bin" / "nnlab", source.string(), build.string());
  CHECK(contains(copy.problem, "It is a copy"));
  CHECK(contains(copy.problem, build.string()));
  CHECK(contains(copy.problem, source.string()));

  // A build folder moved somewhere else: its CMakeCache.txt still names the old place.
  const fs::path moved = dir.path / "moved" / "release";
  write(moved / "CMakeCache.txt", "CMAKE_CACHEFILE_DIR:INTERNAL=" + build.string() + "\n");
  const Trees m = locate_trees(moved / "bin" / "nnlab", source.string(), build.string());
  CHECK(contains(m.problem, "was moved"));

  // Its own build, but the source tree is gone.
  fs::remove_all(source / "exercises");
  CHECK(contains(locate_trees(build / "bin" / "nnlab", source.string(), build.string()).problem,
                 "no exercises/manifest.txt"));
}

TEST_CASE("exercises manifest: three hint levels, optional points, errors that name the line",
          "[check]") {
  auto parse = [](const std::string& text) {
    std::istringstream in(text);
    return exercises::parse_manifest(in, "manifest.txt");
  };
  const std::string good =
      "[01_a]\nlesson = 01\nfile = exercises/01_a/a.cpp\nhint1 = the idea\n  continued\n"
      "hint2 = the steps\nhint3 = the code\npoints = 3\n";
  const std::vector<exercises::Exercise> list = parse(good);
  REQUIRE(list.size() == 1);
  CHECK(list[0].hints[0] == "the idea continued");
  CHECK(list[0].hints[1] == "the steps");
  CHECK(list[0].hints[2] == "the code");
  CHECK(list[0].points == 3);
  CHECK(parse("[01_a]\nlesson = 01\nfile = f.cpp\nhint1 = a\nhint2 = b\nhint3 = c\n")[0].points == 1);

  using testing::error_of;
  CHECK(contains(error_of([&] { parse("[01_a]\nlesson = 01\nfile = f.cpp\nhint1 = a\nhint3 = c\n"); }),
                 "manifest.txt:1: [01_a] has no 'hint2 = ...'"));
  CHECK(contains(error_of([&] { parse("[01_a]\nlesson = 01\nfile = f.cpp\nhint = a\n"); }),
                 "manifest.txt:4: 'hint' is now three levels"));
  CHECK(contains(error_of([&] { parse(good + "hint2 = again\n"); }),
                 "manifest.txt:9: 'hint2' is given twice"));
  CHECK(contains(error_of([&] { parse(good + "points = 0\n"); }),
                 "manifest.txt:9: points must be a whole number"));
  CHECK(contains(error_of([&] { parse(good + "hints = x\n"); }), "manifest.txt:9: unknown key 'hints'"));
}

TEST_CASE("exercises manifest: every exercise has three distinct hint levels", "[check]") {
  const std::vector<exercises::Exercise> list =
      exercises::read_manifest(std::string(NNLAB_SOURCE_DIR) + "/exercises/manifest.txt");
  REQUIRE(list.size() >= 20);
  for (const exercises::Exercise& ex : list) {
    INFO(ex.name);
    CHECK(ex.hints[0] != ex.hints[1]);
    CHECK(ex.hints[1] != ex.hints[2]);
    // Levels 1 and 2 describe, they do not give the code: no assignment or compound operator
    // of C++ (the code is level 3's).
    for (int level = 0; level < 2; ++level) {
      for (const char* code : {"+=", "-=", "*=", "[i] =", "[b * ", "__syncthreads()", "for ("}) {
        INFO("hint" << level + 1 << " holds '" << code << "': " << ex.hints[level]);
        CHECK(!contains(ex.hints[level], code));
      }
    }
  }
}
