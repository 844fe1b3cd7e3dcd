// gpt/profile.cpp: profiled() and print_profile (gpt/profile.h).
#include "gpt/profile.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iomanip>
#include <ostream>
#include <type_traits>
#include <utility>

namespace gpt {

void Profile::reset() {
  rows_.clear();
  index_.clear();
}

void Profile::add(const std::string& op, double ms) {
  auto it = index_.find(op);
  if (it == index_.end()) {
    it = index_.emplace(op, rows_.size()).first;
    rows_.push_back({op, 0, 0.0});
  }
  rows_[it->second].calls += 1;
  rows_[it->second].ms += ms;
}

namespace {

// Replaces `op` by: wait for the device, run the old op, wait again, add the time to
// `profile` under `name`. One template for every op's signature (R its result, A... its
// arguments), so no op is forwarded by hand.
template <class R, class... A>
void time_op(std::function<R(A...)>& op, const std::string& name, const std::function<void()>& synchronize,
             Profile& profile) {
  op = [inner = op, name, synchronize, &profile](A... args) -> R {
    synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    auto done = [&] {
      synchronize();
      profile.add(name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    };
    if constexpr (std::is_void_v<R>) {
      inner(std::forward<A>(args)...);
      done();
    } else {
      R r = inner(std::forward<A>(args)...);
      done();
      return r;
    }
  };
}

}  // namespace

Backend profiled(const Backend& inner, Profile& profile) {
  Backend be = inner;  // the fields (memory, synchronize, ...) stay inner's
  const std::string name = inner.name();
  be.name = [name] { return name + " (profiled)"; };
  for_each_op(be, [&](const char* op, auto& fn) { time_op(fn, op, inner.synchronize, profile); });
  return be;
}

void print_profile(std::ostream& os, std::vector<ProfileRow> rows, int steps) {
  std::sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) { return a.ms > b.ms; });
  double total = 0.0;
  for (const ProfileRow& r : rows) total += r.ms;
  const double per = steps > 0 ? 1.0 / steps : 1.0;
  os << "| op | calls/step | ms/step | % of step |\n|---|---:|---:|---:|\n" << std::fixed;
  for (const ProfileRow& r : rows) {
    os << "| " << r.op << " | " << std::setprecision(1) << static_cast<double>(r.calls) * per << " | " << std::setprecision(3)
       << r.ms * per << " | " << std::setprecision(1) << (total > 0 ? 100.0 * r.ms / total : 0.0) << " |\n";
  }
  os << "| total (each op waited for) | | " << std::setprecision(3) << total * per << " | 100.0 |\n" << std::defaultfloat;
}

}  // namespace gpt
