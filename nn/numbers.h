// nn/numbers.h: the one way a number typed by a person (a flag, a config-file line, a
// checkpoint's metadata) becomes a value in this codebase.
//
// Why one function: std::stof("nan") is NaN, std::stof("3x") is 3, CLI11's Range(0, 1)
// lets NaN through (NaN < 0 and NaN > 1 are both false), and std::stoi("9999999999")
// throws an exception that says only "stoi". Each of those let bad input run, lie or
// crash somewhere. Here a value is accepted only when the WHOLE text is a number, it is
// finite, and it lies in [lo, hi]; otherwise nn::Error says which key and why.
//
//   double lr = nn::parse_finite(text, "--lr", 1e-9, 10.0);
//   int steps = nn::parse_int(meta["step"], "checkpoint metadata 'step'", 0, 100000000);
//   nn::check_finite(v, "AdamW eps");                   // a computed value
//
// nn/cli_checks.h wraps the same rules as CLI11 validators (nn::FiniteRange) for flags.
#pragma once

#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include "nn/check.h"

namespace nn {

// Why `text` is not a finite number in [lo, hi], or "" when it is. Surrounding blanks
// are allowed; anything else after the number is not ("3x", "1e-3,").
inline std::string finite_number_problem(std::string_view text, double lo, double hi, double* out = nullptr) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  if (text.empty()) return "expected a number, got nothing";
  std::string s(text);
  if (s.front() == '+') s.erase(0, 1);  // from_chars takes no '+'; people write it
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) return "'" + std::string(text) + "' is out of the range of a double";
  if (ec != std::errc() || end != s.data() + s.size())
    return "expected a number, got '" + std::string(text) + "'";
  if (!std::isfinite(v)) return "expected a finite number, got '" + std::string(text) + "'";
  if (v < lo || v > hi) {
    std::ostringstream os;
    os << "'" << text << "' is outside [" << lo << ", " << hi << "]";
    return os.str();
  }
  if (out) *out = v;
  return "";
}

// `text` as a finite double in [lo, hi]; nn::Error naming `what` otherwise.
inline double parse_finite(std::string_view text, const std::string& what,
                           double lo = -std::numeric_limits<double>::max(),
                           double hi = std::numeric_limits<double>::max()) {
  double v = 0;
  const std::string problem = finite_number_problem(text, lo, hi, &v);
  NN_CHECK(problem.empty(), what << ": " << problem);
  return v;
}

// `text` as an integer in [lo, hi] (no fraction, no exponent); nn::Error naming `what`.
inline long long parse_int(std::string_view text, const std::string& what,
                           long long lo = std::numeric_limits<long long>::min(),
                           long long hi = std::numeric_limits<long long>::max()) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  std::string s(text);
  if (!s.empty() && s.front() == '+') s.erase(0, 1);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  const bool whole_text = !s.empty() && end == s.data() + s.size();
  NN_CHECK(!(whole_text && ec == std::errc::result_out_of_range),
           what << ": '" << text << "' is outside [" << lo << ", " << hi << "]");
  NN_CHECK(whole_text && ec == std::errc(), what << ": expected a whole number, got '" << text << "'");
  NN_CHECK(v >= lo && v <= hi, what << ": " << v << " is outside [" << lo << ", " << hi << "]");
  return v;
}

// A computed or loaded value must be finite: NaN never passes a check.
inline void check_finite(double v, const std::string& what) {
  NN_CHECK(std::isfinite(v), what << " is " << v << ": expected a finite number");
}

}  // namespace nn
