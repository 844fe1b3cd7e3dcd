// tests/bench_test_util.h: what the tests of the kernels harness share.
#pragma once

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

}  // namespace testing
