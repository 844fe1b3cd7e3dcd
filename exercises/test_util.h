// exercises/test_util.h: what the exercises' tests share.
//
// The student reads these tests' failure messages, so every comparison reports the first
// wrong elements with their index, the value computed, the value expected and, where it
// helps, the inputs that produced them. The rules (the house style's "Tests that can fail"):
//   - an element passes when |got - want| <= atol + rtol * |want|: NaN never passes;
//   - outputs start as NaN, so an output the code under test never writes fails;
//   - outputs carry guard elements after their end, so a write past the end fails;
//   - inputs are random (nn::Rng, fixed seeds) and sizes are not round numbers.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "nn/rng.h"

namespace ex_test {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr int kGuard = 4;              // guard elements after each output buffer
inline constexpr float kGuardValue = -7.25f;  // what they hold; any write changes it

// |got - want| <= atol + rtol |want|, written so that NaN on either side fails.
inline bool close(double got, double want, double atol, double rtol) {
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

inline std::vector<float> random_normal(nn::Rng& rng, size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal(0.0f, scale);
  return v;
}

// An output buffer of n elements: NaN inside, kGuard guard values after the end.
inline std::vector<float> output_buffer(size_t n, float fill = kNaN) {
  std::vector<float> v(n + kGuard, kGuardValue);
  for (size_t i = 0; i < n; ++i) v[i] = fill;
  return v;
}

// "" when the guard elements after the first n are intact, else what happened.
inline std::string guard_damage(const std::vector<float>& v, size_t n, const std::string& name) {
  std::ostringstream os;
  for (size_t i = n; i < v.size(); ++i) {
    if (!(v[i] == kGuardValue)) {
      os << name << "[" << i << "] was written, but " << name << " has only " << n
         << " elements (valid indices 0.." << n - 1 << "): an index runs past the end\n";
      break;
    }
  }
  return os.str();
}

struct Comparison {
  int64_t mismatches = 0;
  std::string report;  // the first few wrong elements, empty when all match
};

// Compares got[i] with want[i] for i < n. `context(i)`, if given, describes the inputs of
// element i ("inp[i] = -0.5") so the reader sees why the expected value is what it is.
inline Comparison compare(const std::string& name, std::span<const float> got,
                          std::span<const double> want, double atol, double rtol,
                          const std::function<std::string(size_t)>& context = {}) {
  Comparison c;
  std::ostringstream first;
  first << std::setprecision(9);
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (close(g, want[i], atol, rtol)) continue;
    if (c.mismatches < 5) {
      first << "  " << name << "[" << i << "] = " << g << ", expected " << want[i];
      if (context) first << "   (" << context(i) << ")";
      first << "\n";
    }
    ++c.mismatches;
  }
  if (c.mismatches > 0) {
    std::ostringstream os;
    os << name << ": " << c.mismatches << " of " << want.size() << " elements wrong ";
    if (atol == 0.0 && rtol == 0.0) {
      os << "(they must match exactly):\n";
    } else {
      os << "(tolerance " << atol << " + " << rtol << " * |expected|):\n";
    }
    os << first.str();
    c.report = os.str();
  }
  return c;
}

// A likely cause of wrong elements: its message, and whether it explains element i.
struct Cause {
  std::string message;
  std::function<bool(size_t)> explains;
};

// The message of the first cause that explains EVERY wrong element (|got - want| beyond the
// tolerance), "" when all are right or no cause explains them all. A test states a cause
// only when the numbers show it, never as a catch-all for any failure.
inline std::string diagnose(std::span<const float> got, std::span<const double> want, double atol,
                            double rtol, const std::vector<Cause>& causes) {
  std::vector<size_t> wrong;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!close(static_cast<double>(got[i]), want[i], atol, rtol)) wrong.push_back(i);
  }
  if (wrong.empty()) return "";
  for (const Cause& cause : causes) {
    bool all = true;
    for (const size_t i : wrong) all = all && cause.explains(i);
    if (all) return "Likely cause: " + cause.message;
  }
  return "";
}

// True when some of the first n elements are NaN or infinite.
inline bool any_not_finite(std::span<const float> v) {
  for (const float x : v) {
    if (!std::isfinite(x)) return true;
  }
  return false;
}

inline std::vector<double> to_double(std::span<const float> v) {
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace ex_test
