// tests/bench_test_util.h: what the tests of the kernels harness share.
#pragma once

#include <catch2/catch.hpp>

#include <sstream>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/ceilings.h"
#include "kernels/harness.h"

namespace testing {

// Ceilings filled by hand: the tests never spend time measuring.
inline kernels::Ceilings fake_ceilings() {
  kernels::Ceilings c;
  c.threads_all = 2;
  c.flops_1t = 50e9;
  c.flops_all = 100e9;
  c.bw_1t = 10e9;
  c.bw_all = 15e9;
  c.simd = "test";
  return c;
}

// One timed run per case, no warm-up, no cache flush, at 1 and 2 threads: the harness's
// whole path (validate, time, napkin math) in a few milliseconds.
inline kernels::harness::BenchOptions quick_bench_options() {
  kernels::harness::BenchOptions o;
  o.timing.repeats = 1;
  o.timing.warmup = 0;
  o.timing.flush = false;
  o.threads = {1, 2};
  return o;
}

// Runs op `name`'s whole ladder through the harness at its quick sizes, on 1 and 2 threads,
// and requires every rung to be validated against v1 and then timed. Returns the results for
// further checks.
inline std::vector<kernels::harness::Result> require_every_rung_valid_and_timed(const char* name) {
  namespace h = kernels::harness;
  const h::OpBench& op = kernels::bench::op(name);
  REQUIRE(op.variants.size() >= 2);
  h::BenchOptions opts = quick_bench_options();
  opts.sizes = op.quick_sizes;
  std::ostringstream log;
  std::vector<h::Result> results = h::run_bench(op, opts, fake_ceilings(), log);
  INFO(name << "\n" << log.str());
  REQUIRE(results.size() == op.quick_sizes.size() * op.variants.size() * 2);
  for (const h::Result& r : results) {
    INFO(name << " " << r.variant << " at " << r.shape << ": " << r.note);
    REQUIRE(r.valid);
    REQUIRE(r.timed);
    REQUIRE(r.gbs > 0.0);
    REQUIRE(r.bytes > 0.0);
  }
  return results;
}

}  // namespace testing
