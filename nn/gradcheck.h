// nn/gradcheck.h: the finite-difference gradient checker, in double precision.
//
// For a scalar loss L(x) and the analytic gradient g that an op's backward produced,
// compare each g_i with the central difference
//     (L(x + h e_i) - L(x - h e_i)) / (2 h)      error O(h^2)
// In double, h = 1e-6 leaves ~1e-10 of truncation and rounding error: far below any real
// bug, so the tolerance can be tight. (In float the same check needs h ~ 1e-2 and loose
// tolerances that a subtly wrong backward could slip through.)
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <sstream>
#include <string>

namespace nn {

struct GradCheckResult {
  bool ok = true;
  double max_abs_err = 0.0;
  double max_rel_err = 0.0;
  int64_t mismatches = 0;
  std::string report;  // the first mismatches with their index, empty when ok
};

// `loss` recomputes L from the current contents of `x` (it captures x's buffer).
// `analytic` holds dL/dx from the backward pass. A check passes element i when
// |analytic_i - numeric_i| <= atol + rtol * |numeric_i|; NaN never passes.
inline GradCheckResult check_gradient(const std::function<double()>& loss, std::span<double> x,
                                      std::span<const double> analytic, double h = 1e-6,
                                      double atol = 1e-7, double rtol = 1e-5) {
  GradCheckResult r;
  std::ostringstream report;
  if (x.size() != analytic.size()) {
    r.ok = false;
    r.report = "gradient has " + std::to_string(analytic.size()) + " elements, input has " +
               std::to_string(x.size());
    return r;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = loss();
    x[i] = saved - h;
    const double minus = loss();
    x[i] = saved;
    const double numeric = (plus - minus) / (2.0 * h);
    const double abs_err = std::fabs(analytic[i] - numeric);
    const double rel_err = abs_err / std::fmax(std::fabs(numeric), 1e-12);
    r.max_abs_err = std::fmax(r.max_abs_err, abs_err);
    if (std::fabs(numeric) > atol) {
      r.max_rel_err = std::fmax(r.max_rel_err, rel_err);
    }
    const bool good = abs_err <= atol + rtol * std::fabs(numeric);  // false for NaN
    if (!good) {
      r.ok = false;
      if (r.mismatches < 8) {
        report << "  [" << i << "] analytic " << analytic[i] << " vs numeric " << numeric
               << " (abs err " << abs_err << ")\n";
      }
      ++r.mismatches;
    }
  }
  if (!r.ok) {
    r.report = std::to_string(r.mismatches) + " of " + std::to_string(x.size()) +
               " gradient entries disagree:\n" + report.str();
  }
  return r;
}

}  // namespace nn
