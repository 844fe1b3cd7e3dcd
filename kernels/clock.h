// kernels/clock.h: the one wall clock every measurement in kernels/ (and lesson 03) reads.
// steady_clock: monotonic, so a clock adjustment mid-run cannot make a time negative.
#pragma once

#include <chrono>

namespace kernels {

// Seconds since an arbitrary fixed point; only differences mean anything.
inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace kernels

#include <cmath>
#include <cstdlib>
#include <ostream>
#include <thread>

namespace kernels {

// A time measured while other programs compete for the cores is not comparable with one
// from an idle machine: on 2 cores a second busy job can halve a 2-thread kernel's speed or
// make v6 on 2 threads slower than v5 on one. Every timing command calls this before (and
// the harness after) it measures and says so when the 1-minute load average was above the
// number of hardware threads. Returns true when it warned. (The load includes the timing
// run itself, up to its thread count: a load above the cores means someone else ran too.)
inline bool warn_if_busy(std::ostream& os, const char* when = "before timing") {
  double load[1] = {0.0};
  if (getloadavg(load, 1) != 1) return false;  // not available (not Linux/BSD/macOS): no claim
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0 || load[0] <= static_cast<double>(cores)) return false;
  os << "warning: this machine is busy " << when << " (load average " << std::round(load[0] * 10) / 10
     << " over the last minute, on " << cores << " hardware threads): other programs compete"
     << " for the cores, so these times are not comparable with an idle machine's."
     << " Close them, or compare only runs made side by side.\n";
  return true;
}

}  // namespace kernels
