// nn/cli_checks.h: the rules of nn/numbers.h as CLI11 validators, for every program's flags.
//
// Included by the programs that use CLI11 (gpt/, lessons/, app/); nn/ itself does not
// link CLI11. Use nn::FiniteRange for every floating-point flag: CLI::Range lets NaN
// through (every comparison with NaN is false), FiniteRange does not.
//
//   app.add_option("--lr", o.lr, "...")->check(nn::FiniteRange(1e-9, 10.0));
//   app.add_option("--threads", o.threads, "...")->check(nn::ThreadCount());
//   app.add_option("--seed", o.seed, "...")->check(nn::Seed());
#pragma once

#include <CLI/CLI.hpp>

#include <limits>
#include <sstream>
#include <string>
#include <thread>

#include "nn/numbers.h"

namespace nn {

// A finite number in [lo, hi]. The message names the range; "nan", "inf" and "3x" fail.
class FiniteRange : public CLI::Validator {
 public:
  FiniteRange(double lo, double hi) {
    std::ostringstream d;
    d << "FINITE in [" << lo << " - " << hi << "]";
    description(d.str());
    func_ = [lo, hi](std::string& text) { return finite_number_problem(text, lo, hi); };
  }
};

// A whole number in [lo, hi], the whole text ("12x", "1.5", "1e3" fail). CLI11 reads
// "99999999999999999999" into a uint64_t as its largest value and "-1" as 2^64 - 1 without
// a word: a run would then use a seed nobody typed.
class WholeNumber : public CLI::Validator {
 public:
  WholeNumber(long long lo, long long hi) {
    std::ostringstream d;
    d << "WHOLE in [" << lo << " - " << hi << "]";
    description(d.str());
    func_ = [lo, hi](std::string& text) -> std::string {
      try {
        parse_int(text, "value", lo, hi);
      } catch (const Error& e) {
        std::string what = e.what();
        what = what.substr(0, what.find("  ["));  // without the file:line of the check
        return what.substr(what.find(": ") + 2);  // and without parse_int's "value: "
      }
      return "";
    };
  }
};

// A seed: any whole number in [0, 2^63 - 1] (the range every seed flag shares).
inline WholeNumber Seed() { return WholeNumber(0, std::numeric_limits<long long>::max()); }

// The largest thread count a flag accepts: a few times the hardware's, so that a student
// can still measure what oversubscription costs, but not 4096 threads on 2 cores (each
// OpenMP barrier then waits on thousands of descheduled threads: minutes per step).
inline int max_threads_allowed() {
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(4 * (hw == 0 ? 1u : hw));
}

// An OpenMP thread count: 0 (the default) up to max_threads_allowed().
class ThreadCount : public CLI::Validator {
 public:
  ThreadCount() {
    const int most = max_threads_allowed();
    std::ostringstream d;
    d << "0 (default) - " << most << " (4x this machine's " << most / 4 << " hardware threads)";
    description(d.str());
    func_ = [most](std::string& text) -> std::string {
      double v = 0;
      std::string problem = finite_number_problem(text, 0, 1e18, &v);
      if (!problem.empty()) return problem;
      if (v != static_cast<double>(static_cast<long long>(v))) return "expected a whole number of threads, got '" + text + "'";
      if (v > most) {
        std::ostringstream os;
        os << text << " threads is far above this machine's " << most / 4
           << " hardware threads (OpenMP would spend its time waiting at barriers); use at most " << most
           << ", or 0 for the default";
        return os.str();
      }
      return "";
    };
  }
};

}  // namespace nn
