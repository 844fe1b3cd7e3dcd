// io/csv_log.h: plant logs from CSV (lesson 13). Every malformed input is an nn::Error naming the
// file and the line; units convert; missing values are filled by the stated rule (and a gap too
// long is refused, naming the rows); resampling is exact on a linear signal and holds commands;
// the writer's files read back; mangled and truncated copies of a good file either load or fail
// with nn::Error (never a crash, never a NaN); and the logs the lesson ships are what the
// command that made them writes today.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "io/csv_log.h"
#include "lessons/13-control/soft_sensor_part.h"
#include "nn/check.h"
#include "nn/rng.h"
#include "tests/test_util.h"

using namespace testing;  // error_of, TempDir, read_text
using Catch::Contains;

namespace {

// level in cm (a length in [0, 1.5] m, interpolated), pump in % (a fraction, held)
nn::CsvLogSpec small_spec() {
  nn::CsvLogSpec spec;
  spec.time_column = "t";
  spec.max_gap_s = 5.0;
  spec.signals = {{"level", "level_cm", "cm", "length", 0.0, 1.5, nn::Resample::Linear},
                  {"pump", "pump_pct", "%", "fraction", 0.0, 1.0, nn::Resample::Hold}};
  return spec;
}

std::string parse_error(const std::string& text, const nn::CsvLogSpec& spec = small_spec()) {
  return error_of([&] { nn::parse_csv_log(text, "log.csv", spec); });
}

}  // namespace

TEST_CASE("csv_log: a good file: units to SI, extra columns ignored, comments and CRLF", "[lesson13][csv]") {
  const std::string text =
      "# a comment before the header\n"
      "t,pump_pct,other,level_cm\r\n"
      "0,50,x,40\n"
      "# a comment between rows\n"
      "1.5, 25 ,y,41.5\r\n"
      "3,+100,z,42\n";
  const nn::CsvLog log = nn::parse_csv_log(text, "log.csv", small_spec());
  REQUIRE(log.rows() == 3);
  CHECK(log.time == std::vector<double>{0.0, 1.5, 3.0});
  CHECK(log.line == std::vector<int>{3, 5, 6});
  CHECK(log.units == std::vector<std::string>{"m", "1"});
  CHECK(log.signal("level")[1] == Approx(0.415).epsilon(1e-15));
  CHECK(log.signal("pump") == std::vector<double>{0.5, 0.25, 1.0});
  CHECK(log.filled == 0);
  CHECK_FALSE(log.iso_time);
  CHECK_THAT(error_of([&] { (void)log.signal("flow"); }), Contains("no signal 'flow'") && Contains("level, pump"));
}

TEST_CASE("csv_log: ISO 8601 timestamps", "[lesson13][csv]") {
  double s = 0.0;
  REQUIRE(nn::parse_iso8601("1970-01-01T00:00:00Z", s));
  CHECK(s == 0.0);
  REQUIRE(nn::parse_iso8601("2026-01-02T03:04:05", s));
  CHECK(s == 1767323045.0);  // date -u -d 2026-01-02T03:04:05 +%s
  REQUIRE(nn::parse_iso8601("2024-02-29T23:59:59.250Z", s));
  CHECK(std::abs(s - 1709251199.25) <= 1e-6);
  for (const char* bad : {"2026-13-01T00:00:00", "2025-02-29T00:00:00", "2026-01-02T24:00:00", "2026-01-02T03:04",
                          "2026-01-02T03:04:05.", "2026-01-02T03:04:05+01:00", "2026/01/02T03:04:05", "x"}) {
    INFO(bad);
    CHECK_FALSE(nn::parse_iso8601(bad, s));
  }
  CHECK(nn::format_iso8601(1767323045.0) == "2026-01-02T03:04:05.000Z");
  CHECK(nn::format_iso8601(1709251199.9996) == "2024-03-01T00:00:00.000Z");  // rounds into the next day
  const nn::CsvLog log = nn::parse_csv_log(
      "t,level_cm,pump_pct\n2026-01-02T03:04:05Z,10,1\n2026-01-02T03:04:06.500Z,11,2\n", "log.csv", small_spec());
  CHECK(log.iso_time);
  CHECK(std::abs(log.time[1] - log.time[0] - 1.5) <= 1e-6);
}

TEST_CASE("csv_log: every malformed input is an nn::Error with the file and line", "[lesson13][csv]") {
  SECTION("an empty file, or only comments") {
    CHECK_THAT(parse_error(""), Contains("log.csv: the file is empty"));
    CHECK_THAT(parse_error("# only\n# comments\n\n"), Contains("log.csv: the file is empty"));
  }
  SECTION("a header and no rows") {
    CHECK_THAT(parse_error("# c\nt,level_cm,pump_pct\n"), Contains("log.csv:2: the header is the last line"));
  }
  SECTION("a mapped column missing from the header") {
    const std::string e = parse_error("t,level,pump_pct\n0,1,2\n");
    CHECK_THAT(e, Contains("log.csv:1: the header has no column 'level_cm'") && Contains("signal 'level'") &&
                      Contains("'t', 'level', 'pump_pct'"));
    CHECK_THAT(parse_error("time,level_cm,pump_pct\n0,1,2\n"), Contains("log.csv:1: the header has no column 't'"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct,level_cm\n0,1,2,3\n"), Contains("names column 'level_cm' twice"));
  }
  SECTION("a wrong column count") {
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,2\n"),
               Contains("log.csv:3: 2 fields, but the header (line 1) has 3"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,1,5,2\n"), Contains("log.csv:3: 4 fields"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,1,5\n2,10,5\n3,1,5\n\n4,1,2,5\n"),
               Contains("log.csv:7: 4 fields"));  // the blank line 6 is skipped, but counted
  }
  SECTION("a repeated or non-monotonic timestamp") {
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,1,2\n1,1,2\n"),
               Contains("log.csv:4: the time 1 is the same as the previous row's (line 3)") && Contains("repeated"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n2,1,2\n1.5,1,2\n"),
               Contains("log.csv:4: the time 1.5 is before the previous row's (line 3)"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n2026-01-02T03:04:05,1,2\n2026-01-02T03:04:04,1,2\n"),
               Contains("log.csv:3: the time 2026-01-02T03:04:04 is before"));
  }
  SECTION("a bad or missing timestamp") {
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\nnoon,1,2\n"),
               Contains("log.csv:3: the timestamp 'noon' is neither seconds"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n,1,2\n"), Contains("log.csv:3: the timestamp (column 't') is missing"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n2026-01-02T03:04:05,1,2\n"),
               Contains("log.csv:3: the timestamp '2026-01-02T03:04:05' is ISO 8601, but the rows above use seconds"));
  }
  SECTION("text in a number, inf") {
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,12.3abc,2\n"),
               Contains("log.csv:3, column 'level_cm': '12.3abc' is not a number"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,--\n"), Contains("log.csv:2, column 'pump_pct': '--' is not a number"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,inf,2\n"), Contains("log.csv:3, column 'level_cm': 'inf' is not finite"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,1e400,2\n"),
               Contains("log.csv:3, column 'level_cm': '1e400' is too large"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,1,-Infinity\n"), Contains("log.csv:3") && Contains("not finite"));
  }
  SECTION("a truncated last line") {
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,1,2\n2,1"),
               Contains("log.csv:4: the last line has no newline") && Contains("truncated"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,1,2\n2,1,2"), Contains("log.csv:4: the last line has no newline"));
    // an earlier error is reported first
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,x,2\n2,1"), Contains("log.csv:3, column 'level_cm': 'x'"));
    CHECK_THAT(parse_error("t,level_cm"), Contains("log.csv:1: the last line has no newline"));
  }
  SECTION("a value out of its physical range") {
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,200,2\n"),
               Contains("log.csv:3, column 'level_cm': 200 cm = 2 m is outside the physical range of level, [0, 1.5] m"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,-3\n"), Contains("log.csv:2, column 'pump_pct': -3 % = -0.03 1"));
  }
  SECTION("missing values over a gap longer than the limit name the rows") {
    // rows at t = 0..6; level missing at t = 1, 2, 3, 4, 5 (lines 3-7): 6 s between its neighbours > 5 s
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,,2\n2,NA,2\n3,nan,2\n4,NaN,2\n5,null,2\n6,3,2\n"),
               Contains("signal 'level' (column 'level_cm') misses 5 values on lines 3-7: 6 s between the values "
                        "around them"));
    // at the end: 6 s from the last missing row back to the nearest value
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n1,1,\n7,1,\n"),
               Contains("signal 'pump' (column 'pump_pct') misses 2 values on lines 3-4: 7 s to the nearest value"));
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,\n1,1,\n"), Contains("signal 'pump' (column 'pump_pct') has no value "
                                                                          "in any row (lines 2-3)"));
  }
  SECTION("the mapping: an unknown unit, a unit of the wrong quantity") {
    nn::CsvLogSpec spec = small_spec();
    spec.signals[0].unit = "furlong";
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n", spec), Contains("unknown unit 'furlong'") && Contains("l/min"));
    spec = small_spec();
    spec.signals[0].unit = "l/min";
    CHECK_THAT(parse_error("t,level_cm,pump_pct\n0,1,2\n", spec),
               Contains("signal 'level' expects a length, but its column 'level_cm' is mapped with unit 'l/min', a flow"));
  }
  SECTION("not text") {
    const char with_nul[] = "t,level_cm,pump_pct\n0,1,2\n1,1\0,2\n";
    CHECK_THAT(parse_error(std::string(with_nul, sizeof with_nul - 1)), Contains("log.csv:3") && Contains("NUL"));
  }
}

TEST_CASE("csv_log: missing values are interpolated linearly in time, held at the edges", "[lesson13][csv]") {
  const nn::CsvLog log = nn::parse_csv_log(
      "t,level_cm,pump_pct\n0,,10\n1,10,\n2,NA,30\n5,40,40\n6,50,\n", "log.csv", small_spec());
  const std::vector<double>& y = log.signal("level");
  const std::vector<double>& u = log.signal("pump");
  CHECK(y[0] == Approx(0.10));                    // the start: the nearest value held
  CHECK(y[2] == Approx(0.10 + 0.30 * (1.0 / 4)));  // between t = 1 (0.10) and t = 5 (0.40): by time, not by row
  CHECK(u[1] == Approx(0.20));
  CHECK(u[4] == Approx(0.40));                    // the end: held
  CHECK(log.filled == 4);
}

TEST_CASE("csv_log: written logs read back (seconds and ISO 8601, every unit, missing values)", "[lesson13][csv]") {
  nn::Rng rng(23);
  const int n = 200;
  nn::CsvLogOut out;
  out.comments = {"a test log", "second line"};
  out.time_column = "stamp";
  double t = 1767600000.0;
  for (int i = 0; i < n; ++i) {
    t += 0.001 * (1 + rng.below(3000));  // whole milliseconds, uneven
    out.time.push_back(t);
  }
  nn::CsvLogSpec spec;
  spec.time_column = "stamp";
  spec.max_gap_s = 100.0;
  std::vector<std::vector<double>> want;
  for (const nn::UnitInfo& u : nn::known_units()) {
    nn::CsvColumnOut c;
    c.column = "c_" + u.name;
    c.unit = u.name;
    c.digits = 17;  // round-trip precision
    for (int i = 0; i < n; ++i) c.values.push_back(rng.uniform(-2.0f, 2.0f) * 1.234567);
    c.values[7] = std::nan("");  // written as missing, read back as the interpolation
    want.push_back(c.values);
    out.columns.push_back(c);
    spec.signals.push_back({u.name, c.column, u.name, u.quantity});
  }
  for (bool iso : {false, true}) {
    out.iso_time = iso;
    TempDir dir("csv_log_roundtrip");
    nn::write_csv_log(dir.file("sub/log.csv"), out);
    const std::string text = read_text(dir.file("sub/log.csv"));
    CHECK(text.rfind("# a test log\n# second line\nstamp,c_m,c_cm", 0) == 0);
    const nn::CsvLog back = nn::read_csv_log(dir.file("sub/log.csv"), spec);
    REQUIRE(back.rows() == n);
    CHECK(back.iso_time == iso);
    CHECK(back.filled == static_cast<int64_t>(nn::known_units().size()));
    for (int i = 0; i < n; ++i) {
      // seconds: the shortest round-trip text, exact; ISO 8601: whole milliseconds (the times are)
      const double d = std::abs(back.time[static_cast<size_t>(i)] - out.time[static_cast<size_t>(i)]);
      CHECK(d <= (iso ? 1e-5 : 0.0));
    }
    for (size_t s = 0; s < want.size(); ++s) {
      const std::vector<double>& got = back.values[s];
      for (int i = 0; i < n; ++i) {
        if (i == 7) {
          const double expect = want[s][6] + (want[s][8] - want[s][6]) * (back.time[7] - back.time[6]) / (back.time[8] - back.time[6]);
          CHECK(got[7] == Approx(expect).epsilon(1e-12));
        } else {
          INFO(spec.signals[s].unit << " row " << i);
          CHECK(std::abs(got[static_cast<size_t>(i)] - want[s][static_cast<size_t>(i)]) <= 1e-14 * (1 + std::abs(want[s][static_cast<size_t>(i)])));
        }
      }
    }
  }
  nn::CsvLogOut bad = out;
  bad.columns[0].values[3] = std::numeric_limits<double>::infinity();
  CHECK_THAT(error_of([&] { nn::format_csv_log(bad); }), Contains("inf cannot be written"));
  bad = out;
  bad.time[5] = bad.time[4];
  CHECK_THAT(error_of([&] { nn::format_csv_log(bad); }), Contains("row 5") && Contains("not after"));
}

TEST_CASE("csv_log: resampling is exact on a linear signal, holds commands, refuses holes", "[lesson13][csv]") {
  nn::Rng rng(5);
  nn::CsvLogSpec spec = small_spec();
  spec.signals[0].unit = "m";
  spec.signals[0].max = 1e9;
  std::ostringstream text;
  text << std::setprecision(17) << "t,level_cm,pump_pct\n";
  std::vector<double> times, pumps;
  int tenths = 100;
  for (int i = 0; i < 300; ++i) {
    const double t = tenths / 10.0;
    times.push_back(t);
    pumps.push_back(static_cast<double>(rng.below(101)));
    text << t << "," << 3.0 + 0.25 * t << "," << pumps.back() << "\n";  // level = 3 + t / 4
    tenths += 3 + static_cast<int>(rng.below(25));                       // steps of 0.3 .. 2.7 s
  }
  const nn::CsvLog log = nn::parse_csv_log(text.str(), "lin.csv", spec);
  for (double period : {1.0, 0.25, 2.5}) {
    const nn::CsvLog r = nn::resample_csv_log(log, spec, period);
    INFO("period " << period);
    REQUIRE(r.rows() == static_cast<int>(std::floor((times.back() - times.front()) / period + 1e-9)) + 1);
    for (int k = 0; k < r.rows(); ++k) {
      const double tg = times.front() + k * period;
      CHECK(r.time[static_cast<size_t>(k)] == tg);
      CHECK(std::abs(r.signal("level")[static_cast<size_t>(k)] - (3.0 + 0.25 * tg)) <= 1e-12 * (3.0 + 0.25 * tg));
      // hold: the last sample at or before tg
      size_t i = 0;
      while (i + 1 < times.size() && times[i + 1] <= tg) ++i;
      CHECK(r.signal("pump")[static_cast<size_t>(k)] == pumps[i] * 0.01);  // the reader's conversion
    }
  }
  // a hole longer than max_gap_s (5 s) between two rows
  const std::string holed = "t,level_cm,pump_pct\n0,1,2\n1,1,2\n8,1,2\n9,1,2\n";
  const nn::CsvLog h = nn::parse_csv_log(holed, "hole.csv", spec);
  CHECK_THAT(error_of([&] { nn::resample_csv_log(h, spec, 1.0); }),
             Contains("hole.csv:4: 7 s since the previous row (line 3), more than max_gap_s = 5 s"));
  CHECK_THAT(error_of([&] { nn::resample_csv_log(log, spec, 0.0); }), Contains("period must be positive"));
}

TEST_CASE("csv_log: truncated and mangled copies of a good log load or fail with nn::Error, never NaN",
          "[lesson13][csv]") {
  // the first 80 lines of the uneven shipped log: ISO times, gaps, missing values
  const std::string full = read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/13-control/data/tank_log_uneven.csv");
  size_t cut = 0;
  for (int i = 0; i < 80; ++i) cut = full.find('\n', cut) + 1;
  const std::string good = full.substr(0, cut);
  const nn::CsvLogSpec spec = lesson13::tank_log_spec();
  REQUIRE(nn::parse_csv_log(good, "good.csv", spec).rows() > 40);
  nn::Rng rng(2323);
  const std::string alphabet = ",\n\r.-+eE0123456789 NaTZ:#x\t";
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string s = good;
    const int kind = static_cast<int>(rng.below(5));
    const size_t pos = rng.below(static_cast<uint32_t>(s.size()));
    if (kind == 0) {
      s = s.substr(0, pos);  // truncated anywhere
    } else if (kind == 1) {
      s[pos] = alphabet[rng.below(static_cast<uint32_t>(alphabet.size()))];  // one byte changed
    } else if (kind == 2) {
      s.erase(pos, 1 + rng.below(20));  // bytes deleted
    } else if (kind == 3) {
      s.insert(pos, 1, alphabet[rng.below(static_cast<uint32_t>(alphabet.size()))]);  // a byte inserted
    } else {
      // a whole line duplicated (a repeated timestamp) or swapped with the next
      const size_t a = s.rfind('\n', pos) == std::string::npos ? 0 : s.rfind('\n', pos) + 1;
      const size_t b = s.find('\n', a);
      if (b != std::string::npos) s.insert(a, s.substr(a, b - a + 1));
    }
    try {
      const nn::CsvLog log = nn::parse_csv_log(s, "mangled.csv", spec);
      ++loaded;
      REQUIRE(log.rows() >= 1);
      for (int i = 0; i < log.rows(); ++i) {
        REQUIRE(std::isfinite(log.time[static_cast<size_t>(i)]));
        if (i > 0) REQUIRE(log.time[static_cast<size_t>(i)] > log.time[static_cast<size_t>(i - 1)]);
      }
      for (const auto& v : log.values) {
        for (double x : v) REQUIRE(std::isfinite(x));
      }
      try {
        const nn::CsvLog r = nn::resample_csv_log(log, spec, 1.0);
        for (const auto& v : r.values) {
          for (double x : v) REQUIRE(std::isfinite(x));
        }
      } catch (const nn::Error&) {
        // a hole the mangling made: refused, as it should be
      }
    } catch (const nn::Error& e) {
      ++refused;
      // every refusal names the file, and most name a line
      REQUIRE(std::string(e.what()).find("mangled.csv") != std::string::npos);
    }
  }
  INFO(loaded << " loaded, " << refused << " refused");
  CHECK(loaded > 100);
  CHECK(refused > 100);
}

TEST_CASE("lesson 13's shipped logs are what `--soft-sensor-write-logs` writes today", "[lesson13][csv]") {
  TempDir dir("lesson13_logs");
  const std::vector<std::string> made = lesson13::write_tank_logs(dir.path.string());
  REQUIRE(made.size() == lesson13::tank_log_files().size());
  const nn::CsvLogSpec spec = lesson13::tank_log_spec();
  for (size_t i = 0; i < made.size(); ++i) {
    const std::string shipped = std::string(NNLAB_SOURCE_DIR) + "/lessons/13-control/data/" + lesson13::tank_log_files()[i].name;
    INFO(shipped << " against " << made[i] << ": regenerate with `nnlab lesson13 --part soft-sensor "
                                               "--soft-sensor-write-logs lessons/13-control/data` if the simulator changed on purpose");
    const std::string a = read_text(shipped), b = read_text(made[i]);
    if (a == b) {
      SUCCEED("byte-identical");
      continue;
    }
    // Not byte-identical: a compiler that contracts the simulator's arithmetic differently (FMA)
    // may move a float by an ulp and so the 7th digit of a few values. Anything more is rot.
    const nn::CsvLog la = nn::parse_csv_log(a, shipped, spec), lb = nn::parse_csv_log(b, made[i], spec);
    REQUIRE(la.rows() == lb.rows());
    CHECK(la.time == lb.time);
    CHECK(la.filled == lb.filled);
    for (size_t s = 0; s < la.values.size(); ++s) {
      for (int r = 0; r < la.rows(); ++r) {
        const double x = la.values[s][static_cast<size_t>(r)], y = lb.values[s][static_cast<size_t>(r)];
        INFO(la.signals[s] << " row " << r);
        REQUIRE(std::abs(x - y) <= 1e-6 * std::abs(y) + 1e-12);
      }
    }
  }
}
