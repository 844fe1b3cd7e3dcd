// io/csv_log.h: plant logs as CSV files, in and out. What a plant's historian or a data logger
// exports, read into signals a program can use: a header row, a timestamp column, columns
// mapped to signals by name with their units, missing values filled by a stated rule, and
// uneven sampling resampled to the control period. And the other way: a simulated run written
// in the same format (lesson 13 ships such logs, so a student can swap in one from a real plant).
//
// The file:
//   # comment lines (anywhere; skipped, but they keep their line numbers)
//   time_s,level_cm,pump_pct,outflow_lpm      <- the header: the first line that is not a comment
//   0,52.31,41.2,62.5
//   1.0,52.40,,62.7                           <- a missing value (empty, NA, NaN, null)
//   ...\n                                      <- the file ends with a newline
// Blank lines are skipped too. Fields are separated by ',' (no quoting: a plant log's numbers need none); spaces around a
// field and a '\r' before the newline are ignored. The timestamp column holds seconds (any
// number, e.g. 0, 0.5, 1.7e3) or ISO 8601 UTC times, 2026-01-02T03:04:05, with optional
// fractional seconds and a final Z; one file uses one of the two. ISO times become seconds
// since 1970-01-01T00:00:00Z.
//
// The rules, each a clear nn::Error naming the file and the LINE NUMBER (1-based, counting
// comments) where the input breaks them:
//   - an empty file (or only comments), or no data row after the header
//   - a mapped column (or the time column) missing from the header (the header's names listed)
//   - a row whose field count differs from the header's
//   - a last line without its newline: the file was cut while being written (a truncated
//     number like "0.12" for "0.1234" looks valid, so a complete file must end with '\n';
//     the hint says to add one if the file is complete)
//   - a timestamp that is not a number / not ISO 8601, is missing, or is not later than the
//     previous row's (repeated or going back in time)
//   - text in a number ("12.3abc", "--", "1,5" splits into two fields and fails the count)
//   - inf (text "inf", or a number that overflows to it): NaN and inf never pass
//   - a value outside the physical range the caller gives for its signal
//   - missing values over a span longer than max_gap_s (the error names the rows), or a
//     signal with no value at all
// Missing values ("", "NA", "NaN", "null", any case) are filled by LINEAR INTERPOLATION in time
// between the nearest present values before and after; at the start or end of the file (one
// neighbour only) the nearest value is held. Either way only across a span of at most
// max_gap_s seconds between the present values used (at the edges: from the missing row to the
// nearest present one). Longer: an error, since a guess over a long outage is not data.
//
// Units: every signal comes out in SI units (m, m^3/s, s, a fraction in [0, 1]); the mapping
// says each column's unit in the file, converted by the table in unit_info(): the units a tank
// uses (m, cm, mm; m^3/s, m^3/h, l/s, l/min; fraction, %; s, min). A mapping may name the
// quantity it expects ("length", "flow", "fraction", "time"): a column with a unit of another
// quantity is then an error (a flow column mapped to a level).
//
// Resampling (resample_csv_log): onto the uniform grid t0, t0 + P, t0 + 2P, ... up to the last
// timestamp, P the control period. Per signal, its rule: LINEAR interpolation between the two
// samples around each grid time (measurements: what the signal most likely was), or ZERO-ORDER
// HOLD, the last sample at or before the grid time (commands: a controller's output holds until
// it changes, and interpolating it would invent commands never sent). Two timestamps further
// apart than max_gap_s: an error naming the lines (the logger was off; nothing to resample).
//
// Writing (format_csv_log / write_csv_log): comments, the header, one row per time with the
// values converted from SI into each column's unit, written with to_chars (locale-independent:
// a German locale's "0,5" would break the format); a NaN value is written as an empty field (a
// missing value), inf is refused. The writer's output reads back through the reader.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace nn {

// ---- units -------------------------------------------------------------------------------
struct UnitInfo {
  std::string name;      // as written in a mapping: "cm", "l/min", "%"
  std::string quantity;  // "length", "flow", "fraction", "time"
  std::string si;        // the SI unit values come out in: "m", "m^3/s", "1", "s"
  double to_si = 1.0;    // value_si = value_in_unit * to_si
};
// The unit table; nn::Error naming the known units when `unit` is not among them.
const UnitInfo& unit_info(const std::string& unit);
const std::vector<UnitInfo>& known_units();

// ---- reading -------------------------------------------------------------------------------
enum class Resample { Linear, Hold };  // measurements: Linear; commands: Hold (zero-order hold)
const char* resample_name(Resample r);

// One signal the caller wants, and where it is in the file.
struct CsvSignal {
  std::string signal;    // the program's name: "level"
  std::string column;    // the header's name in the file: "LT101_cm"
  std::string unit;      // the file's unit (unit_info): "cm"
  std::string quantity;  // the quantity the program expects ("length", ...); "" accepts any
  double min = -std::numeric_limits<double>::infinity();  // physical range, in SI units;
  double max = std::numeric_limits<double>::infinity();   //   outside it: an error
  Resample resample = Resample::Linear;
};

struct CsvLogSpec {
  std::string time_column = "time";
  std::vector<CsvSignal> signals;  // at least one; other columns of the file are ignored
  double max_gap_s = 10.0;         // the longest span filled by interpolation, and the
                                   // longest step between timestamps resampling accepts
};

struct CsvLog {
  std::string source;                        // the file's name (messages)
  std::vector<double> time;                  // (rows) seconds, strictly increasing
  std::vector<int> line;                     // (rows) the file line of each row (0 after resampling)
  std::vector<std::string> signals;          // the spec's signals, in its order
  std::vector<std::string> units;            // their SI units
  std::vector<std::vector<double>> values;   // (signals, rows) in SI units, missing ones filled
  int64_t filled = 0;                        // how many values were missing and filled
  bool iso_time = false;                     // the file's timestamps were ISO 8601

  int rows() const { return static_cast<int>(time.size()); }
  // The named signal's values; nn::Error naming the signals when there is no such one.
  const std::vector<double>& signal(const std::string& name) const;
};

// `text` is a whole file's contents; `source` names it in messages.
CsvLog parse_csv_log(const std::string& text, const std::string& source, const CsvLogSpec& spec);
// Reads `path` (nn::Error when it is missing or unreadable), then parse_csv_log.
CsvLog read_csv_log(const std::string& path, const CsvLogSpec& spec);

// Resamples onto t0 + k * period, k = 0 .. K with t0 + K * period <= the last time (see above).
// The spec must be the one the log was read with (its rules per signal, its max_gap_s).
CsvLog resample_csv_log(const CsvLog& log, const CsvLogSpec& spec, double period);

// ISO 8601 UTC <-> seconds since 1970-01-01T00:00:00Z. parse: "YYYY-MM-DDTHH:MM:SS[.f...][Z]"
// (a space for the T is accepted), false when it is not that; format: milliseconds, with Z.
bool parse_iso8601(const std::string& text, double& seconds);
std::string format_iso8601(double seconds);

// ---- writing -------------------------------------------------------------------------------
struct CsvColumnOut {
  std::string column;          // the header's name
  std::string unit;            // values are converted from SI into this unit (unit_info)
  std::vector<double> values;  // (rows) in SI units; NaN: written as a missing value
  int digits = 9;              // significant digits written
};

struct CsvLogOut {
  std::vector<std::string> comments;  // written first, each as "# <text>"
  std::string time_column = "time_s";
  bool iso_time = false;              // false: seconds; true: ISO 8601 with milliseconds
  std::vector<double> time;           // (rows) seconds (since the epoch when iso_time)
  std::vector<CsvColumnOut> columns;
};

std::string format_csv_log(const CsvLogOut& log);
// Writes atomically (a .tmp renamed over the file); creates the folder.
void write_csv_log(const std::string& path, const CsvLogOut& log);

}  // namespace nn
