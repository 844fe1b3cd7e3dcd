// gpt/profile.cpp: print_profile (gpt/profile.h).
#include "gpt/profile.h"

#include <algorithm>
#include <iomanip>
#include <ostream>

namespace gpt {

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
