// io/csv_log.cpp: plant logs as CSV files (see io/csv_log.h for the format and the rules).
//
// Data flows: text -> lines (numbered, comments skipped, the last one checked for its newline)
// -> header (the mapped columns found) -> rows (timestamp, fields parsed, units converted,
// ranges checked, missing values marked) -> gaps filled -> CsvLog -> resample_csv_log.
// And back: CsvLogOut -> format_csv_log -> text.
#include "io/csv_log.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/file_io.h"
#include "nn/check.h"

namespace nn {

// ---- units -------------------------------------------------------------------------------

const std::vector<UnitInfo>& known_units() {
  static const std::vector<UnitInfo> units = {
      {"m", "length", "m", 1.0},
      {"cm", "length", "m", 0.01},
      {"mm", "length", "m", 0.001},
      {"m^3/s", "flow", "m^3/s", 1.0},
      {"m^3/h", "flow", "m^3/s", 1.0 / 3600.0},
      {"l/s", "flow", "m^3/s", 0.001},
      {"l/min", "flow", "m^3/s", 0.001 / 60.0},
      {"fraction", "fraction", "1", 1.0},
      {"%", "fraction", "1", 0.01},
      {"s", "time", "s", 1.0},
      {"min", "time", "s", 60.0},
  };
  return units;
}

const UnitInfo& unit_info(const std::string& unit) {
  for (const UnitInfo& u : known_units()) {
    if (u.name == unit) return u;
  }
  std::ostringstream known;
  for (const UnitInfo& u : known_units()) known << (known.tellp() > 0 ? ", " : "") << u.name;
  NN_CHECK(false, "unknown unit '" << unit << "': the CSV reader converts " << known.str()
                                   << " (add a row to io/csv_log.cpp's unit table for another)");
  return known_units().front();  // not reached
}

const char* resample_name(Resample r) { return r == Resample::Linear ? "linear" : "hold"; }

const std::vector<double>& CsvLog::signal(const std::string& name) const {
  for (size_t i = 0; i < signals.size(); ++i) {
    if (signals[i] == name) return values[i];
  }
  std::ostringstream have;
  for (const std::string& s : signals) have << (have.tellp() > 0 ? ", " : "") << s;
  NN_CHECK(false, "log " << source << " has no signal '" << name << "' (it has: " << have.str() << ")");
  return values.front();  // not reached
}

// ---- ISO 8601 --------------------------------------------------------------------------------

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil: the
// year is shifted to start in March, so the leap day is the last day of its year).
int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;                                         // [0, 399]
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;        // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;                 // [0, 146096]
  return era * 146097 + doe - 719468;
}

void civil_from_days(int64_t z, int64_t& y, int& m, int& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  y = yoe + era * 400 + (m <= 2 ? 1 : 0);
}

bool digits_at(const std::string& s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

bool parse_iso8601(const std::string& s, double& seconds) {
  // YYYY-MM-DDTHH:MM:SS  (19 characters), then [.fff...], then [Z]
  int Y = 0, M = 0, D = 0, h = 0, mi = 0, sec = 0;
  if (s.size() < 19) return false;
  if (!digits_at(s, 0, 4, Y) || s[4] != '-' || !digits_at(s, 5, 2, M) || s[7] != '-' || !digits_at(s, 8, 2, D) ||
      (s[10] != 'T' && s[10] != ' ') || !digits_at(s, 11, 2, h) || s[13] != ':' || !digits_at(s, 14, 2, mi) ||
      s[16] != ':' || !digits_at(s, 17, 2, sec)) {
    return false;
  }
  static const int days_in[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
  if (M < 1 || M > 12 || D < 1 || D > days_in[M - 1] + (M == 2 && leap ? 1 : 0)) return false;
  if (h > 23 || mi > 59 || sec > 59) return false;  // no leap seconds: a logger's clock has none
  size_t pos = 19;
  double frac = 0.0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    double scale = 0.1;
    const size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      frac += scale * (s[pos] - '0');
      scale *= 0.1;
      ++pos;
    }
    if (pos == start) return false;  // "05." with no digits
  }
  if (pos < s.size() && s[pos] == 'Z') ++pos;
  if (pos != s.size()) return false;  // offsets (+01:00) are not accepted: logs are UTC
  const int64_t days = days_from_civil(Y, M, D);
  seconds = static_cast<double>(days * 86400 + h * 3600 + mi * 60 + sec) + frac;
  return true;
}

std::string format_iso8601(double seconds) {
  NN_CHECK(std::isfinite(seconds), "format_iso8601: the time is not finite");
  // whole milliseconds, rounded once, so 0.9996 s writes as 1.000 and not 0.1000
  const int64_t ms_total = static_cast<int64_t>(std::llround(seconds * 1000.0));
  int64_t days = ms_total / 86400000;
  int64_t ms_of_day = ms_total % 86400000;
  if (ms_of_day < 0) {
    ms_of_day += 86400000;
    days -= 1;
  }
  int64_t y = 0;
  int m = 0, d = 0;
  civil_from_days(days, y, m, d);
  const int64_t h = ms_of_day / 3600000, mi = ms_of_day / 60000 % 60, s = ms_of_day / 1000 % 60, ms = ms_of_day % 1000;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02lld:%02lld:%02lld.%03lldZ", static_cast<long long>(y), m, d,
                static_cast<long long>(h), static_cast<long long>(mi), static_cast<long long>(s),
                static_cast<long long>(ms));
  return buf;
}

// ---- reading ---------------------------------------------------------------------------------

namespace {

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  return s.substr(a, b - a);
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (comma == std::string::npos) {
      out.push_back(trim(line.substr(start)));
      return out;
    }
    out.push_back(trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

bool is_missing(const std::string& f) {
  if (f.empty()) return true;
  std::string l = f;
  for (char& c : l) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return l == "na" || l == "nan" || l == "null" || l == "n/a";
}

// A field as a plain decimal number: the whole field, finite. Returns false for text;
// `why` says what was wrong.
bool parse_number(const std::string& f, double& v, std::string& why) {
  const char* first = f.data();
  const char* last = f.data() + f.size();
  if (first != last && *first == '+') ++first;  // "+1.5": from_chars takes no '+'
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range) {
    why = "is too large for a double (it would be inf)";
    return false;
  }
  if (ec != std::errc() || ptr != last || first == last) {
    why = "is not a number";
    return false;
  }
  if (!std::isfinite(v)) {  // "inf", "infinity" (from_chars reads them)
    why = "is not finite (inf never passes)";
    return false;
  }
  return true;
}

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

struct Line {
  int number = 0;  // 1-based
  std::string text;
  bool complete = true;  // ended by '\n' (only the last line can lack it)
};

// A line without its newline is reported when its turn comes, so an earlier line's error
// (the first thing wrong in the file) is the one the reader sees.
void check_complete(const Line& L, const std::string& src) {
  NN_CHECK(L.complete, src << ":" << L.number << ": the last line has no newline at its end: the file looks "
                           << "truncated (cut while being written); if it is complete, end it with a newline");
}

}  // namespace

CsvLog parse_csv_log(const std::string& text, const std::string& src, const CsvLogSpec& spec) {
  // ---- the mapping itself ----
  NN_CHECK(!spec.signals.empty(), "CSV log " << src << ": the mapping names no signal to read");
  NN_CHECK(spec.max_gap_s > 0, "CSV log " << src << ": max_gap_s must be positive, got " << spec.max_gap_s);
  for (size_t i = 0; i < spec.signals.size(); ++i) {
    const CsvSignal& s = spec.signals[i];
    const UnitInfo& u = unit_info(s.unit);
    NN_CHECK(s.quantity.empty() || s.quantity == u.quantity,
             "CSV log " << src << ": signal '" << s.signal << "' expects a " << s.quantity << ", but its column '"
                        << s.column << "' is mapped with unit '" << s.unit << "', a " << u.quantity);
    NN_CHECK(s.min <= s.max, "CSV log " << src << ": signal '" << s.signal << "' has min " << s.min << " > max "
                                        << s.max);
    for (size_t j = 0; j < i; ++j) {
      NN_CHECK(spec.signals[j].signal != s.signal,
               "CSV log " << src << ": the mapping names signal '" << s.signal << "' twice");
    }
  }

  // ---- lines: numbered, comments and blank lines skipped, the last one checked ----
  std::vector<Line> lines;
  {
    size_t pos = 0;
    int number = 0;
    while (pos < text.size()) {
      ++number;
      const size_t nl = text.find('\n', pos);
      const bool complete = nl != std::string::npos;
      std::string t = text.substr(pos, complete ? nl - pos : std::string::npos);
      pos = complete ? nl + 1 : text.size();
      if (!t.empty() && t.back() == '\r') t.pop_back();
      NN_CHECK(t.find('\0') == std::string::npos, src << ":" << number << ": the line holds a NUL byte: "
                                                      << "this is not a text CSV file");
      const std::string tt = trim(t);
      if (tt.empty() || tt[0] == '#') continue;
      lines.push_back({number, t, complete});
    }
  }
  NN_CHECK(!lines.empty(), src << ": the file is empty (no header row): a plant log needs a header and data rows");

  // ---- header: find the time column and every mapped column ----
  check_complete(lines[0], src);
  const std::vector<std::string> header = split_fields(lines[0].text);
  const int hline = lines[0].number;
  auto find_column = [&](const std::string& name, const std::string& what) {
    int found = -1;
    for (size_t c = 0; c < header.size(); ++c) {
      if (header[c] != name) continue;
      NN_CHECK(found < 0, src << ":" << hline << ": the header names column '" << name << "' twice (fields "
                              << found + 1 << " and " << c + 1 << "): which one is " << what << "?");
      found = static_cast<int>(c);
    }
    if (found < 0) {
      std::ostringstream have;
      for (const std::string& h : header) have << (have.tellp() > 0 ? ", " : "") << "'" << h << "'";
      NN_CHECK(false, src << ":" << hline << ": the header has no column '" << name << "' (" << what
                          << "); it has " << have.str() << ": fix the mapping or the file's header");
    }
    return found;
  };
  const int time_col = find_column(spec.time_column, "the timestamps");
  std::vector<int> cols;
  for (const CsvSignal& s : spec.signals) cols.push_back(find_column(s.column, "signal '" + s.signal + "'"));
  NN_CHECK(lines.size() >= 2, src << ":" << hline << ": the header is the last line: the log has no data rows");

  // ---- rows ----
  CsvLog log;
  log.source = src;
  const size_t S = spec.signals.size();
  for (const CsvSignal& s : spec.signals) {
    log.signals.push_back(s.signal);
    log.units.push_back(unit_info(s.unit).si);
  }
  log.values.assign(S, {});
  std::vector<std::vector<char>> missing(S);
  int time_kind = 0;  // 1: seconds, 2: ISO 8601 (set by the first row)
  for (size_t r = 1; r < lines.size(); ++r) {
    const Line& L = lines[r];
    check_complete(L, src);
    const std::vector<std::string> f = split_fields(L.text);
    NN_CHECK(f.size() == header.size(), src << ":" << L.number << ": " << f.size() << " fields, but the header (line "
                                            << hline << ") has " << header.size()
                                            << ": a missing or extra comma, or a decimal comma ('1,5' for '1.5')?");
    // the timestamp
    const std::string& tf = f[static_cast<size_t>(time_col)];
    NN_CHECK(!is_missing(tf), src << ":" << L.number << ": the timestamp (column '" << spec.time_column
                                  << "') is missing: every row needs its time");
    double t = 0.0;
    std::string why;
    const bool as_number = parse_number(tf, t, why);
    const bool as_iso = !as_number && parse_iso8601(tf, t);
    NN_CHECK(as_number || as_iso, src << ":" << L.number << ": the timestamp '" << tf << "' is neither seconds (a "
                                      << "number) nor ISO 8601 (2026-01-02T03:04:05[.fff][Z])");
    const int kind = as_number ? 1 : 2;
    if (time_kind == 0) time_kind = kind;
    NN_CHECK(kind == time_kind, src << ":" << L.number << ": the timestamp '" << tf << "' is "
                                    << (kind == 1 ? "seconds" : "ISO 8601") << ", but the rows above use "
                                    << (time_kind == 1 ? "seconds" : "ISO 8601") << ": one file, one format");
    if (!log.time.empty()) {
      const double prev = log.time.back();
      NN_CHECK(t > prev, src << ":" << L.number << ": the time " << tf << " is " << (t == prev ? "the same as" : "before")
                             << " the previous row's (line " << log.line.back() << "): timestamps must increase ("
                             << (t == prev ? "a repeated row?" : "rows out of order, or a clock set back?") << ")");
    }
    log.time.push_back(t);
    log.line.push_back(L.number);
    // the mapped values, in SI units
    for (size_t s = 0; s < S; ++s) {
      const CsvSignal& sig = spec.signals[s];
      const std::string& vf = f[static_cast<size_t>(cols[s])];
      if (is_missing(vf)) {
        log.values[s].push_back(0.0);  // filled below
        missing[s].push_back(1);
        continue;
      }
      double v = 0.0;
      NN_CHECK(parse_number(vf, v, why), src << ":" << L.number << ", column '" << sig.column << "': '" << vf << "' "
                                             << why);
      const UnitInfo& u = unit_info(sig.unit);
      const double si = v * u.to_si;
      NN_CHECK(std::isfinite(si), src << ":" << L.number << ", column '" << sig.column << "': " << vf << " " << sig.unit
                                      << " is not finite in " << u.si);
      NN_CHECK(si >= sig.min && si <= sig.max,
               src << ":" << L.number << ", column '" << sig.column << "': " << vf << " " << sig.unit << " = " << fmt(si)
                   << " " << u.si << " is outside the physical range of " << sig.signal << ", [" << fmt(sig.min)
                   << ", " << fmt(sig.max) << "] " << u.si << ": a sensor fault, or the wrong unit in the mapping?");
      log.values[s].push_back(si);
      missing[s].push_back(0);
    }
  }
  log.iso_time = time_kind == 2;

  // ---- missing values: linear interpolation in time, the nearest value held at the edges ----
  const int n = log.rows();
  for (size_t s = 0; s < S; ++s) {
    const CsvSignal& sig = spec.signals[s];
    std::vector<double>& v = log.values[s];
    int i = 0;
    while (i < n) {
      if (!missing[s][static_cast<size_t>(i)]) {
        ++i;
        continue;
      }
      int j = i;  // the run of missing values is [i, j]
      while (j + 1 < n && missing[s][static_cast<size_t>(j + 1)]) ++j;
      const int before = i - 1, after = j + 1 < n ? j + 1 : -1;
      const int count = j - i + 1;
      const int li = log.line[static_cast<size_t>(i)], lj = log.line[static_cast<size_t>(j)];
      NN_CHECK(before >= 0 || after >= 0, src << ": signal '" << sig.signal << "' (column '" << sig.column
                                              << "') has no value in any row (lines " << li << "-" << lj << ")");
      const double t_from = before >= 0 ? log.time[static_cast<size_t>(before)] : log.time[static_cast<size_t>(i)];
      const double t_to = after >= 0 ? log.time[static_cast<size_t>(after)] : log.time[static_cast<size_t>(j)];
      NN_CHECK(t_to - t_from <= spec.max_gap_s,
               src << ": signal '" << sig.signal << "' (column '" << sig.column << "') misses " << count
                   << (count == 1 ? " value on line " : " values on lines ") << li << (count == 1 ? "" : "-")
                   << (count == 1 ? "" : std::to_string(lj)) << ": " << fmt(t_to - t_from) << " s "
                   << (before >= 0 && after >= 0 ? "between the values around them" : "to the nearest value")
                   << ", more than the " << fmt(spec.max_gap_s)
                   << " s the reader fills (max_gap_s): repair the log, or cut it there");
      for (int k = i; k <= j; ++k) {
        double val = 0.0;
        if (before >= 0 && after >= 0) {
          // v(t) = v_a + (v_b - v_a) (t - t_a) / (t_b - t_a)
          const double ta = log.time[static_cast<size_t>(before)], tb = log.time[static_cast<size_t>(after)];
          const double va = v[static_cast<size_t>(before)], vb = v[static_cast<size_t>(after)];
          val = va + (vb - va) * (log.time[static_cast<size_t>(k)] - ta) / (tb - ta);
        } else {
          val = v[static_cast<size_t>(before >= 0 ? before : after)];
        }
        v[static_cast<size_t>(k)] = val;
        ++log.filled;
      }
      i = j + 1;
    }
  }
  return log;
}

CsvLog read_csv_log(const std::string& path, const CsvLogSpec& spec) {
  const std::vector<uint8_t> bytes =
      read_file(path, "CSV log", "check the path (lesson 13's logs are in lessons/13-control/data/)");
  return parse_csv_log(std::string(bytes.begin(), bytes.end()), path, spec);
}

CsvLog resample_csv_log(const CsvLog& log, const CsvLogSpec& spec, double period) {
  NN_CHECK(period > 0 && std::isfinite(period), "resample " << log.source << ": the period must be positive, got "
                                                           << period);
  NN_CHECK(log.rows() >= 1, "resample " << log.source << ": the log has no rows");
  NN_CHECK(spec.signals.size() == log.signals.size(),
           "resample " << log.source << ": the spec has " << spec.signals.size() << " signals, the log "
                       << log.signals.size() << ": pass the spec the log was read with");
  for (size_t s = 0; s < log.signals.size(); ++s) {
    NN_CHECK(spec.signals[s].signal == log.signals[s],
             "resample " << log.source << ": the spec's signal " << s << " is '" << spec.signals[s].signal
                         << "', the log's '" << log.signals[s] << "': pass the spec the log was read with");
  }
  // A hole in the timestamps longer than max_gap_s: the logger was off; nothing to resample.
  for (int i = 1; i < log.rows(); ++i) {
    const double dt = log.time[static_cast<size_t>(i)] - log.time[static_cast<size_t>(i - 1)];
    NN_CHECK(dt <= spec.max_gap_s,
             log.source << ":" << log.line[static_cast<size_t>(i)] << ": " << fmt(dt) << " s since the previous row (line "
                        << log.line[static_cast<size_t>(i - 1)] << "), more than max_gap_s = " << fmt(spec.max_gap_s)
                        << " s: the log has a hole; resample the parts on either side apart");
  }
  const double t0 = log.time.front(), t1 = log.time.back();
  // K + 1 grid points, t0 + K P <= t1 (a hair of slack, so t1 itself is not lost to rounding)
  const int64_t K = static_cast<int64_t>(std::floor((t1 - t0) / period + 1e-9));
  NN_CHECK(K < 100000000, "resample " << log.source << ": " << K + 1 << " grid points: is the period (" << period
                                      << " s) in seconds?");
  CsvLog out;
  out.source = log.source + " (resampled every " + fmt(period) + " s)";
  out.signals = log.signals;
  out.units = log.units;
  out.iso_time = log.iso_time;
  out.filled = log.filled;
  out.values.assign(log.signals.size(), {});
  out.time.resize(static_cast<size_t>(K + 1));
  out.line.assign(static_cast<size_t>(K + 1), 0);
  for (int64_t k = 0; k <= K; ++k) out.time[static_cast<size_t>(k)] = t0 + static_cast<double>(k) * period;
  for (size_t s = 0; s < log.signals.size(); ++s) {
    const std::vector<double>& v = log.values[s];
    std::vector<double>& o = out.values[s];
    o.resize(out.time.size());
    size_t i = 0;  // the interval [time[i], time[i+1]] holding the grid time
    for (size_t k = 0; k < out.time.size(); ++k) {
      const double tg = std::min(out.time[k], t1);
      while (i + 1 < log.time.size() && log.time[i + 1] <= tg) ++i;
      if (i + 1 >= log.time.size()) {
        o[k] = v[i];  // the last sample itself
      } else if (spec.signals[s].resample == Resample::Hold) {
        o[k] = v[i];  // zero-order hold: the last sample at or before tg
      } else {
        // linear: v_i + (v_{i+1} - v_i) (tg - t_i) / (t_{i+1} - t_i)
        const double ta = log.time[i], tb = log.time[i + 1];
        o[k] = v[i] + (v[i + 1] - v[i]) * (tg - ta) / (tb - ta);
      }
    }
  }
  return out;
}

// ---- writing ---------------------------------------------------------------------------------

namespace {

std::string write_number(double v, int digits) {
  char buf[64];
  const auto [ptr, ec] = digits > 0 ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits)
                                    : std::to_chars(buf, buf + sizeof buf, v);
  NN_CHECK(ec == std::errc(), "format_csv_log: cannot format " << v);
  return std::string(buf, ptr);
}

}  // namespace

std::string format_csv_log(const CsvLogOut& log) {
  const size_t n = log.time.size();
  NN_CHECK(!log.columns.empty(), "format_csv_log: no columns to write");
  std::vector<double> to_si;
  for (const CsvColumnOut& c : log.columns) {
    NN_CHECK(c.values.size() == n, "format_csv_log: column '" << c.column << "' has " << c.values.size()
                                                              << " values, the time " << n);
    NN_CHECK(c.column.find(',') == std::string::npos && c.column.find('\n') == std::string::npos && !c.column.empty(),
             "format_csv_log: the column name '" << c.column << "' is empty or holds a comma or a newline");
    to_si.push_back(unit_info(c.unit).to_si);
  }
  std::ostringstream os;
  for (const std::string& c : log.comments) {
    NN_CHECK(c.find('\n') == std::string::npos, "format_csv_log: a comment holds a newline");
    os << "# " << c << "\n";
  }
  os << log.time_column;
  for (const CsvColumnOut& c : log.columns) os << "," << c.column;
  os << "\n";
  for (size_t r = 0; r < n; ++r) {
    const double t = log.time[r];
    NN_CHECK(std::isfinite(t), "format_csv_log: the time of row " << r << " is not finite");
    NN_CHECK(r == 0 || t > log.time[r - 1], "format_csv_log: the time of row " << r << " (" << t
                                                                               << ") is not after the previous row's");
    os << (log.iso_time ? format_iso8601(t) : write_number(t, 0));
    for (size_t c = 0; c < log.columns.size(); ++c) {
      const double v = log.columns[c].values[r];
      os << ",";
      if (std::isnan(v)) continue;  // a missing value: an empty field
      NN_CHECK(std::isfinite(v), "format_csv_log: column '" << log.columns[c].column << "', row " << r
                                                            << ": inf cannot be written (NaN is written as missing)");
      os << write_number(v / to_si[c], log.columns[c].digits);
    }
    os << "\n";
  }
  return os.str();
}

void write_csv_log(const std::string& path, const CsvLogOut& log) {
  namespace fs = std::filesystem;
  const std::string text = format_csv_log(log);
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    NN_CHECK(f.good(), "cannot write " << tmp.string());
    f << text;
    NN_CHECK(f.good(), "writing " << tmp.string() << " failed");
  }
  fs::rename(tmp, p);
}

}  // namespace nn
