// Tests of exercise 07_blocked_transpose. A transpose only moves values, so the result
// must match the plain loop exactly, for every tile size, including tiles that do not
// divide the shape and tiles larger than the whole matrix. (Whether blocking is faster is
// for the benchmark, not for a test.)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "exercises/07_blocked_transpose/blocked_transpose.h"
#include "exercises/test_util.h"

namespace {

// in[r][c] = 1000 r + c: every value names where it came from, so a failure message
// "out[...] = 3002" says at once that it holds in[3][2]. (Exact in float: rows, cols < 1000.)
std::vector<float> numbered_matrix(int rows, int cols) {
  std::vector<float> in(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      in[static_cast<size_t>(r) * cols + c] = static_cast<float>(1000 * r + c);
    }
  }
  return in;
}

// Transposes a (rows, cols) matrix with `tile` into a NaN-filled, guarded out and checks
// every element against out[c][r] = in[r][c]. Returns what went wrong, "" when nothing did.
std::string check_transpose(int rows, int cols, int tile) {
  const std::vector<float> in = numbered_matrix(rows, cols);
  const size_t n = in.size();
  std::vector<double> want(n);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      want[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * cols + c];
    }
  }
  std::vector<float> out = ex_test::output_buffer(n);
  ex::transpose_blocked(out.data(), in.data(), rows, cols, tile);
  const ex_test::Comparison cmp =
      ex_test::compare("out", {out.data(), n}, want, 0.0, 0.0, [&](size_t i) {
        const size_t c = i / static_cast<size_t>(rows), r = i % static_cast<size_t>(rows);
        std::ostringstream os;
        os << "out[" << c << "][" << r << "] should be in[" << r << "][" << c
           << "]; in[r][c] holds 1000 r + c";
        return os.str();
      });
  std::ostringstream os;
  if (cmp.mismatches > 0) {
    os << "in (" << rows << ", " << cols << "), tile " << tile << ", out (" << cols << ", " << rows
       << "):\n"
       << cmp.report;
  }
  const std::string overrun = ex_test::guard_damage(out, n, "out");
  if (!overrun.empty()) {
    os << "in (" << rows << ", " << cols << "), tile " << tile << ": " << overrun;
  }
  return os.str();
}

// Every tile size on one shape; reports the first two that fail.
std::string check_all_tiles(int rows, int cols) {
  const int tiles[] = {1, 4, 8, 16, 32, 1000};  // 1000: larger than any matrix here
  std::string report;
  int failed = 0;
  for (const int tile : tiles) {
    const std::string problem = check_transpose(rows, cols, tile);
    if (problem.empty()) continue;
    if (failed < 2) report += problem;
    ++failed;
  }
  if (failed > 2) report += "... and " + std::to_string(failed - 2) + " more tile sizes fail\n";
  return report;
}

}  // namespace

TEST_CASE("transpose_blocked: a worked example, (2,3) with tile 2", "[07_blocked_transpose]") {
  // in = [1 2 3]   ->   out = [1 4]     Tile 2 cuts in into blocks [1 2; 4 5] and [3; 6]:
  //      [4 5 6]              [2 5]     the second block is narrower, the edge case.
  //                           [3 6]
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};
  std::vector<float> out = ex_test::output_buffer(6);
  ex::transpose_blocked(out.data(), in.data(), 2, 3, 2);
  INFO("in = [1 2 3; 4 5 6] (2,3): expected out = [1 4; 2 5; 3 6] (3,2)");
  const ex_test::Comparison c =
      ex_test::compare("out", {out.data(), 6}, std::vector<double>{1, 4, 2, 5, 3, 6}, 0.0, 0.0);
  INFO(c.report);
  CHECK(c.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(out, 6, "out");
  INFO(overrun);
  CHECK(overrun.empty());
}

TEST_CASE("transpose_blocked: every tile size (1, 4, 8, 16, 32, 1000) on odd shapes",
          "[07_blocked_transpose]") {
  SECTION("1 x 1") {
    const std::string problem = check_all_tiles(1, 1);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("1 x 37: one row becomes one column") {
    const std::string problem = check_all_tiles(1, 37);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("29 x 1: one column becomes one row") {
    const std::string problem = check_all_tiles(29, 1);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("37 x 53: no tile divides either side") {
    const std::string problem = check_all_tiles(37, 53);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("64 x 48: tiles divide both sides (no edge blocks)") {
    const std::string problem = check_all_tiles(64, 48);
    INFO(problem);
    CHECK(problem.empty());
  }
  SECTION("0 x 5: nothing to do, nothing written") {
    const std::string problem = check_all_tiles(0, 5);
    INFO(problem);
    CHECK(problem.empty());
  }
}

TEST_CASE("transpose_blocked: tile <= 0 throws std::invalid_argument, before writing anything",
          "[07_blocked_transpose]") {
  // The check must come first. Each bad tile is tried on an EMPTY matrix (0 rows) before a
  // real one: without the check, `r0 += 0` would spin forever on a real matrix, and a test
  // that hangs tells you nothing. With nothing to transpose the loops end at once.
  const int bad_tiles[] = {0, -3};
  for (const int tile : bad_tiles) {
    CAPTURE(tile);
    const std::vector<float> in = numbered_matrix(3, 4);
    std::vector<float> out = ex_test::output_buffer(in.size());
    bool rejected_on_empty = false;
    try {
      ex::transpose_blocked(out.data(), in.data(), 0, 4, tile);
    } catch (const std::invalid_argument&) {
      rejected_on_empty = true;
    }
    INFO(
        "transpose_blocked(out, in, 0, 4, tile) returned instead of throwing "
        "std::invalid_argument: check tile >= 1 first, whatever the sizes");
    CHECK(rejected_on_empty);
    if (rejected_on_empty) {
      CHECK_THROWS_AS(ex::transpose_blocked(out.data(), in.data(), 3, 4, tile),
                      std::invalid_argument);
      // Nothing written: out is still NaN inside and its guards are intact.
      size_t written = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        if (!std::isnan(out[i])) ++written;
      }
      INFO(written << " elements of out were written before the tile was rejected");
      CHECK(written == 0);
      const std::string overrun = ex_test::guard_damage(out, in.size(), "out");
      INFO(overrun);
      CHECK(overrun.empty());
    }
  }
}
