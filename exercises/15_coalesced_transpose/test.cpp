// Tests of exercise 15_coalesced_transpose. They run on the CUDA emulator (on the GPU in
// ex_15_coalesced_transpose_gpu). A transpose only moves values, so the result must match
// out[c][r] = in[r][c] exactly, on shapes that 32 does not divide (edge tiles that hang over
// the matrix), and the tile's padding is checked against a model of the 32 shared-memory banks.
// (Whether the tiled kernel is faster is for a GPU and a profiler, not for a test.)
#include <catch2/catch.hpp>

#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/15_coalesced_transpose/transpose.h"
#include "exercises/test_util.h"
#include "kernels/cuda/device.h"  // kernels::cuda::Error

namespace {

// in[r][c] = 1000 r + c: every value names where it came from, so a failure message
// "out[...] = 3002" says at once that it holds in[3][2]. (Exact in float: rows, cols < 1000.)
std::vector<float> numbered_matrix(int rows, int cols) {
  std::vector<float> in(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      in[static_cast<size_t>(r) * static_cast<size_t>(cols) + static_cast<size_t>(c)] =
          static_cast<float>(1000 * r + c);
    }
  }
  return in;
}

// Transposes a (rows, cols) matrix into a NaN-filled out with the tiled (or naive) kernel and
// checks every element. Returns what went wrong, "" when nothing did.
std::string check_transpose(int rows, int cols, bool tiled) {
  const std::vector<float> in = numbered_matrix(rows, cols);
  const size_t n = in.size();
  const auto R = static_cast<size_t>(rows);
  std::vector<double> want(n);
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < static_cast<size_t>(cols); ++c) {
      want[c * R + r] = in[r * static_cast<size_t>(cols) + c];
    }
  }
  std::vector<float> out(n, ex_test::kNaN);
  const std::string what = std::string(tiled ? "transpose_tiled" : "transpose_naive") + ", in (" +
                           std::to_string(rows) + ", " + std::to_string(cols) + ")";
  try {
    tiled ? ex::transpose_tiled(out.data(), in.data(), rows, cols)
          : ex::transpose_naive(out.data(), in.data(), rows, cols);
  } catch (const kernels::cuda::Error& e) {
    return what + ": the kernel failed:\n  " + e.what() + "\n";
  }
  const ex_test::Comparison cmp =
      ex_test::compare("out", {out.data(), n}, want, 0.0, 0.0, [&](size_t i) {
        const size_t c = i / R, r = i % R;
        std::ostringstream os;
        os << "out[" << c << "][" << r << "] should be in[" << r << "][" << c
           << "]; in[r][c] holds 1000 r + c, NaN = never written";
        return os.str();
      });
  if (cmp.mismatches == 0) return "";
  return what + ", out (" + std::to_string(cols) + ", " + std::to_string(rows) + "):\n" +
         cmp.report;
}

void check_shape(int rows, int cols) {
  const std::string problem = check_transpose(rows, cols, true);
  INFO(problem);
  CHECK(problem.empty());
}

}  // namespace

TEST_CASE("transpose_naive (given) is right: the reference for the tiled one",
          "[15_coalesced_transpose]") {
  const std::string problem = check_transpose(37, 53, false);
  INFO(problem);
  CHECK(problem.empty());
}

TEST_CASE("transpose_tiled: a worked example, (2,3): one tile, mostly overhanging",
          "[15_coalesced_transpose]") {
  // in = [1 2 3]  ->  out = [1 4]    One block; of its 32 x 32 tile only 2 x 3 elements
  //      [4 5 6]            [2 5]    exist, every other thread must skip its load and store
  //                         [3 6]    (but still reach the __syncthreads).
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};
  std::vector<float> out(6, ex_test::kNaN);
  std::string error;
  try {
    ex::transpose_tiled(out.data(), in.data(), 2, 3);
  } catch (const kernels::cuda::Error& e) {
    error = e.what();
  }
  if (!error.empty()) FAIL("the kernel failed:\n  " << error);
  INFO("in = [1 2 3; 4 5 6] (2,3): expected out = [1 4; 2 5; 3 6] (3,2); NaN = never written");
  const ex_test::Comparison c =
      ex_test::compare("out", {out.data(), 6}, std::vector<double>{1, 4, 2, 5, 3, 6}, 0.0, 0.0);
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("transpose_tiled: shapes 32 does and does not divide", "[15_coalesced_transpose]") {
  SECTION("32 x 32: exactly one tile") { check_shape(32, 32); }
  SECTION("64 x 96: whole tiles, 2 x 3 of them (blockIdx.x walks columns, .y rows)") {
    check_shape(64, 96);
  }
  SECTION("37 x 53: edge tiles on both sides") { check_shape(37, 53); }
  SECTION("100 x 33: a tall matrix, a last tile column 1 wide") { check_shape(100, 33); }
  SECTION("1 x 37: one row becomes one column") { check_shape(1, 37); }
  SECTION("29 x 1: one column becomes one row") { check_shape(29, 1); }
  SECTION("1 x 1") { check_shape(1, 1); }
}

TEST_CASE("transpose_tiled: the tile's row pitch avoids shared-memory bank conflicts",
          "[15_coalesced_transpose]") {
  // The model: shared memory is 32 banks of 4 bytes; float word w of the tile is in bank w % 32.
  // The store phase has lane tx of a warp read tile[tx][i], word tx * pitch + i. Count how many
  // of the 32 lanes land in the busiest bank: 1 means one transaction, k means k (a k-way
  // conflict: the warp waits k times as long).
  const int pitch = ex::transpose_tile_pitch();
  int worst = 0, worst_column = 0;
  for (int i = 0; i < 32; ++i) {  // every column the store phase reads
    int lanes_in_bank[32] = {};
    for (int lane = 0; lane < 32; ++lane) ++lanes_in_bank[(lane * pitch + i) % 32];
    for (const int k : lanes_in_bank) {
      if (k > worst) {
        worst = k;
        worst_column = i;
      }
    }
  }
  INFO("kTilePitch = " << pitch << ": reading column " << worst_column << " of the tile, "
                       << worst << " of a warp's 32 lanes hit the same bank (a " << worst
                       << "-way conflict). Lane tx reads word tx * " << pitch << " + i, bank (tx * "
                       << pitch << " + i) % 32. Pad each row of the tile so that consecutive "
                       << "rows start in different banks.");
  CHECK(pitch >= 32);
  CHECK(worst == 1);
}
