// Tests of exercise 17_warp_reduce_sum. They run on the CUDA emulator (on the GPU in
// ex_17_warp_reduce_sum_gpu, except the last, which checks the emulator's misuse detection).
// Where an exact answer is wanted the values are small integers: every partial sum is then
// an integer below 2^24, exact in float, whatever the order of the additions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "exercises/17_warp_reduce_sum/warp_reduce.h"
#include "exercises/test_util.h"
#include "kernels/cuda/device.h"  // kernels::cuda::Error
#include "nn/rng.h"

namespace {

// x[i] = ((i * 7919) mod 17) - 8: integers in [-8, 8], no pattern a wrong index could hit.
std::vector<float> small_integers(int n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(static_cast<int>(i * 7919 % 17) - 8);
  }
  return x;
}

// device_sum of n small integers with `threads` per block, against the exact sum.
std::string check_exact(int n, int threads) {
  const std::vector<float> x = small_integers(n);
  double want = 0.0;
  for (const float v : x) want += v;
  std::ostringstream os;
  const int blocks = std::min((n + threads - 1) / threads, 32);
  os << "n = " << n << ", " << threads << " threads per block (warps per block: " << threads / 32
     << "), blocks: " << blocks << ": ";
  float got = 0.0f;
  try {
    got = ex::device_sum(x.data(), n, threads);
  } catch (const kernels::cuda::Error& e) {
    os << "the kernel failed:\n  " << e.what() << "\n";
    return os.str();
  }
  if (static_cast<double>(got) == want) return "";
  os << "device_sum = " << got << ", expected exactly " << want
     << " (x[i] are small integers, so every partial sum is exact in float; 0 = nothing was "
        "ever added to *total)\n";
  return os.str();
}

void check_sizes(int threads, std::initializer_list<int> sizes) {
  for (const int n : sizes) {
    const std::string problem = check_exact(n, threads);
    INFO(problem);
    CHECK(problem.empty());
  }
}

}  // namespace

TEST_CASE("warp_sum: lane 0 of each warp gets the sum of its warp's 32 values",
          "[17_warp_reduce_sum]") {
  // Warp w holds x = 32 w + lane: its sum is 32 * 32 w + (0 + 1 + ... + 31) = 1024 w + 496.
  const int warps = 3;
  std::vector<float> x(32 * warps);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<float> out(warps, ex_test::kNaN);
  std::string error;
  try {
    ex::warp_sums(out.data(), x.data(), warps);
  } catch (const kernels::cuda::Error& e) {
    error = e.what();
  }
  if (!error.empty()) FAIL("the kernel failed:\n  " << error);
  INFO("x = 0, 1, ..., 95 in 3 warps; lane 0 must return 496, 1520, 2544. If lane 0 returns "
       "its own value (0, 32, 64), warp_sum did no shuffles.");
  const ex_test::Comparison c =
      ex_test::compare("lane 0's warp_sum", {out.data(), 3}, std::vector<double>{496, 1520, 2544},
                       0.0, 0.0, [](size_t w) { return "warp " + std::to_string(w); });
  INFO(c.report);
  CHECK(c.mismatches == 0);
}

TEST_CASE("device_sum: exact sums of small integers at sizes no block divides",
          "[17_warp_reduce_sum]") {
  SECTION("256 threads (8 warps): one block, several, and more than 32 blocks (grid-stride)") {
    check_sizes(256, {1, 33, 1000, 9001});
  }
  SECTION("32 threads: one warp per block, so warp 0 sums a single warp total") {
    check_sizes(32, {1, 45, 3001});
  }
  SECTION("96 threads: 3 warps, so lanes 3..31 of warp 0 must add 0, not stale shared memory") {
    check_sizes(96, {7, 500, 20011});
  }
  SECTION("1024 threads: 32 warps, every slot of warp_totals in use") {
    check_sizes(1024, {1, 1025, 5000});
  }
}

TEST_CASE("device_sum: random values, against a sum in double", "[17_warp_reduce_sum]") {
  nn::Rng rng(1701);
  const int n = 30011;
  const std::vector<float> x = ex_test::random_normal(rng, static_cast<size_t>(n));
  double want = 0.0, scale = 0.0;
  for (const float v : x) {
    want += v;
    scale += std::fabs(v);
  }
  float got = 0.0f;
  std::string error;
  try {
    got = ex::device_sum(x.data(), n, 256);
  } catch (const kernels::cuda::Error& e) {
    error = e.what();
  }
  if (!error.empty()) FAIL("the kernel failed:\n  " << error);
  // Float rounding: every addition may lose half an ulp of its partial sum, and no partial sum
  // exceeds sum |x|; the tree has about 20 levels (per thread, warp, block, the atomics).
  const double tol = 20 * 6e-8 * scale;
  INFO("n = " << n << " normal values: device_sum = " << got << ", the sum in double = " << want
              << ", tolerance " << tol);
  CHECK(std::fabs(static_cast<double>(got) - want) <= tol);
}

TEST_CASE("device_sum: n = 0 is 0, and threads must be a multiple of 32",
          "[17_warp_reduce_sum]") {
  CHECK(ex::device_sum(nullptr, 0, 256) == 0.0f);
  CHECK_THROWS_AS(ex::device_sum(nullptr, 10, 48), std::invalid_argument);
}

TEST_CASE("the emulator catches a lane that returned early (your warp_sum, a given bug)",
          "[17_warp_reduce_sum]") {
  if (!ex::runs_on_emulator()) {
    WARN("on a GPU this misuse is undefined behaviour (a hang, or garbage): emulator only");
    return;
  }
  // early_return_kernel: lanes 20..31 return, lanes 0..19 call warp_sum, whose shuffles name
  // all 32 lanes (kFullMask). On a GPU: undefined. The emulator must stop it and say why.
  std::vector<float> x(32, 1.0f);
  float out = ex_test::kNaN;
  std::string error;
  try {
    ex::warp_sum_after_early_return(&out, x.data(), 20);
  } catch (const kernels::cuda::Error& e) {
    error = e.what();
  }
  INFO("early_return_kernel ran to the end (out = "
       << out << ") instead of failing: the emulator can only catch the bad mask when warp_sum "
       << "calls a shuffle (__shfl_down_sync or __shfl_xor_sync with kFullMask)");
  REQUIRE(!error.empty());
  INFO("the emulator said: " << error);
  CHECK(error.find("early_return_kernel") != std::string::npos);
  CHECK(error.find("already returned") != std::string::npos);
}
