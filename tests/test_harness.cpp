// kernels/harness and kernels/ceilings: the validation tools catch what they promise to
// catch (NaN, wrong values, overruns), the bench refuses to time a variant that failed
// validation, and `nnlab bench` writes its records and rejects bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/ceilings.h"
#include "kernels/harness.h"
#include "tests/bench_test_util.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

namespace h = kernels::harness;

namespace {

using testing::fake_ceilings;

h::BenchOptions quick_options() { return testing::quick_bench_options(); }

// y = 2 x over n floats; variant 1 is wrong on purpose (misses the last element).
class DoubleIt : public h::Problem {
 public:
  explicit DoubleIt(size_t n) : x_(n), y_(n) { h::fill_random(x_.span(), 7); }
  std::string shape() const override { return "n=" + std::to_string(x_.size()); }
  double flops() const override { return static_cast<double>(x_.size()); }
  double bytes(size_t) const override { return 8.0 * static_cast<double>(x_.size()); }
  void run(size_t variant) override {
    const size_t n = variant == 1 ? x_.size() - 1 : x_.size();
    for (size_t i = 0; i < n; ++i) y_.data()[i] = 2.0f * x_.data()[i];
  }
  h::Check validate(size_t variant) override {
    std::fill(y_.data(), y_.data() + y_.size(), h::GuardedBuffer::kNaN);
    run(variant);
    std::vector<double> want(x_.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = 2.0 * x_.data()[i];
    return h::compare("y", y_.span(), want, {1e-6, 1e-6});
  }

 private:
  h::GuardedBuffer x_, y_;
};

h::OpBench double_it_op() {
  h::OpBench op;
  op.name = "double";
  op.default_sizes = {"37"};
  op.variants = {{"v1", "right", "", false}, {"v2", "wrong", "", false}, {"peer", "peer", "", true}};
  op.make = [](const std::string& size, uint64_t) -> std::unique_ptr<h::Problem> {
    return std::make_unique<DoubleIt>(std::stoul(size));
  };
  return op;
}

}  // namespace

TEST_CASE("compare: tolerance, NaN and Inf never pass, first mismatches are listed", "[kernels][harness]") {
  const std::vector<double> want = {1.0, 2.0, 3.0, 4.0};
  SECTION("equal within atol + rtol |want| passes") {
    const std::vector<float> got = {1.0f, 2.00001f, 3.0f, 4.0f};
    const h::Check c = h::compare("x", got, want, {1e-6, 1e-5});
    REQUIRE(c.ok());
    REQUIRE(c.checked == 4);
  }
  SECTION("a wrong value fails and is named with its index") {
    const std::vector<float> got = {1.0f, 2.0f, 3.5f, 4.0f};
    const h::Check c = h::compare("x", got, want, {1e-6, 1e-5});
    REQUIRE_FALSE(c.ok());
    REQUIRE(c.mismatches == 1);
    REQUIRE_THAT(c.report, Catch::Contains("x[2] = 3.5"));
  }
  SECTION("NaN and Inf fail, even with a huge tolerance") {
    const std::vector<float> got = {NAN, 2.0f, INFINITY, 4.0f};
    const h::Check c = h::compare("x", got, want, {1e30, 1e30});
    REQUIRE(c.mismatches == 2);
  }
  SECTION("a size mismatch fails") {
    const std::vector<float> got = {1.0f, 2.0f};
    REQUIRE_FALSE(h::compare("x", got, want, {}).ok());
  }
  SECTION("nothing compared is not a pass") {
    REQUIRE_FALSE(h::compare("x", std::vector<float>{}, std::vector<double>{}, {}).ok());
  }
  SECTION("compare_at checks only the sampled indices") {
    const std::vector<float> got = {9.0f, 2.0f, 9.0f, 4.0f};
    const std::vector<size_t> idx = {1, 3};
    const std::vector<double> w = {2.0, 4.0};
    REQUIRE(h::compare_at("x", got, idx, w, {}).ok());
    const std::vector<size_t> bad = {0};
    const std::vector<double> w0 = {1.0};
    REQUIRE_FALSE(h::compare_at("x", got, bad, w0, {}).ok());
  }
}

TEST_CASE("GuardedBuffer: misaligned, NaN-filled, and its sentinels catch an overrun", "[kernels][harness]") {
  h::GuardedBuffer b(13, 3);
  REQUIRE(reinterpret_cast<uintptr_t>(b.data()) % 64 == 3 * sizeof(float));
  for (float x : b.span()) REQUIRE(std::isnan(x));
  REQUIRE(b.guard_damage("b").empty());
  b.data()[13] = 1.0f;  // one past the end
  REQUIRE_THAT(b.guard_damage("b"), Catch::Contains("past the end"));
}

TEST_CASE("fill_random is seeded, in range and never all zero", "[kernels][harness]") {
  std::vector<float> a(1000), b(1000);
  h::fill_random(a, 5, -2.0f, 3.0f);
  h::fill_random(b, 5, -2.0f, 3.0f);
  REQUIRE(a == b);
  for (float x : a) REQUIRE((x >= -2.0f && x < 3.0f));
  std::vector<float> c(1000);
  h::fill_random(c, 6, -2.0f, 3.0f);
  REQUIRE(a != c);
}

TEST_CASE("time_runs: warm-up, repeats, median, and the time budget", "[kernels][harness]") {
  int calls = 0;
  h::TimingOptions o;
  o.warmup = 2;
  o.repeats = 5;
  o.flush = false;
  const h::Timing t = h::time_runs([&] { ++calls; }, o);
  REQUIRE(calls == 7);
  REQUIRE(t.seconds.size() == 5);
  REQUIRE(t.min <= t.median);
  o.max_seconds = 0.0;  // a spent budget still gives one timed run
  calls = 0;
  REQUIRE(h::time_runs([&] { ++calls; }, o).seconds.size() == 1);
}

TEST_CASE("run_bench validates first and never times a variant that failed", "[kernels][harness]") {
  std::ostringstream log;
  const std::vector<h::Result> results = h::run_bench(double_it_op(), quick_options(), fake_ceilings(), log);
  REQUIRE(results.size() == 6);  // 3 variants x 2 thread counts
  for (const h::Result& r : results) {
    INFO(r.variant << " threads " << r.threads);
    if (r.variant == "v2") {
      REQUIRE_FALSE(r.valid);
      REQUIRE_FALSE(r.timed);
    } else {
      REQUIRE(r.valid);
      REQUIRE(r.timed);
      REQUIRE(r.timing.median > 0.0);
      REQUIRE(r.vs_peer > 0.0);  // compared with the peer in the same run
      REQUIRE(r.bound == "memory");  // 1 FLOP per 8 bytes: under the ridge point
    }
  }
  REQUIRE_THAT(log.str(), Catch::Contains("v2 wrong FAILED validation"));
  REQUIRE_THAT(log.str(), Catch::Contains("y[36]"));  // the element it missed

  h::BenchOptions o = quick_options();
  o.variants = {"v9"};
  REQUIRE_THROWS_WITH(h::run_bench(double_it_op(), o, fake_ceilings(), log), Catch::Contains("v1, v2, peer"));
}

TEST_CASE("the matmul bench validates every version and the peer at its quick sizes", "[kernels][harness]") {
  const h::OpBench& op = kernels::bench::op("matmul");
  h::BenchOptions o = quick_options();
  o.sizes = op.quick_sizes;
  o.threads = {2};
  std::ostringstream log;
  const std::vector<h::Result> results = h::run_bench(op, o, fake_ceilings(), log);
  REQUIRE(results.size() == op.variants.size() * op.quick_sizes.size());
  for (const h::Result& r : results) {
    INFO(r.variant << " " << r.shape << "\n" << log.str());
    REQUIRE(r.valid);
    REQUIRE(r.frac_peak > 0.0);
  }
  REQUIRE_THROWS_WITH(op.make("12x", 1), Catch::Contains("MxNxK"));
  REQUIRE_THROWS_WITH(op.make("0", 1), Catch::Contains("MxNxK"));
  REQUIRE_THROWS_WITH(kernels::bench::op("matmull"), Catch::Contains("matmul"));
}

TEST_CASE("the ceilings are measured and positive", "[kernels][harness]") {
  REQUIRE(kernels::measure_fma_peak(1, 0.01) > 1e8);  // any CPU of this century: > 0.1 GFLOP/s
  REQUIRE(kernels::measure_triad_bandwidth(1, size_t{4} << 20, 0.01) > 1e8);
  const kernels::Ceilings c = fake_ceilings();
  REQUIRE(c.flops_at(1) == 50e9);
  REQUIRE(c.flops_at(8) == 100e9);
  REQUIRE(c.bw_at(2) == 15e9);
}

TEST_CASE("nnlab bench writes JSON and markdown, and rejects bad input", "[kernels][harness][cli]") {
  const testing::TempDir dir("bench");
  const auto ok = testing::run_program("nnlab", "bench matmul --quick --threads 1 --out " + dir.path.string());
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  const std::string json = testing::read_text(dir.file("matmul.json"));
  REQUIRE_THAT(json, Catch::Contains("\"ceilings\""));
  REQUIRE_THAT(json, Catch::Contains("\"variant\": \"v6\""));
  REQUIRE_THAT(json, !Catch::Contains("\"valid\": false"));
  REQUIRE_THAT(testing::read_text(dir.file("matmul.md")), Catch::Contains("| matmul |"));

  struct Case {
    const char* args;
    const char* expect;
  };
  const Case cases[] = {
      {"bench matmull", "the bench knows"},
      {"bench matmul --sizes 12xx --quick", "MxNxK"},
      {"bench matmul --variants v42 --quick", "no variant 'v42'"},
      {"bench matmul --threads 0", "--threads"},
      {"bench matmul --repeats 0", "--repeats"},
  };
  for (const Case& c : cases) {
    const auto r = testing::run_program("nnlab", c.args);
    INFO(c.args << " -> " << r.status << "\n" << r.output);
    REQUIRE(r.status != 0);
    REQUIRE(r.status < 128);
    REQUIRE_THAT(r.output, Catch::Contains(c.expect));
  }
}
