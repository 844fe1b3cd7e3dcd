// Lesson 13, part soft-sensor (lessons/13-control/soft_sensor_part.h), at --quick size: the
// record has every documented field; both estimators learned the drain (far below the error of
// guessing its mean); the verdict the part prints is the one its numbers give; 1 and 2 threads
// give the same record; --soft-sensor-write-logs writes the logs and nothing else.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "io/csv_log.h"
#include "lessons/13-control/control_lesson.h"
#include "lessons/common/parts.h"
#include "tests/test_util.h"

using namespace testing;  // TempDir, CaptureCout
using Catch::Contains;

namespace {

struct Run {
  std::string record;
  std::string out;
};

Run run_quick(const std::string& out_dir, int threads) {
  lesson13::Options o;
  o.part = "soft-sensor";
  o.quick = true;
  o.threads = threads;
  o.out_dir = out_dir;
  lessons::part_records().clear();
  Run r;
  const int saved = omp_get_max_threads();
  {
    CaptureCout cap;
    omp_set_num_threads(threads);
    const int rc = lesson13::run_soft_sensor_part(o);
    omp_set_num_threads(saved);
    REQUIRE(rc == 0);
    r.out = cap.text();
  }
  for (const auto& [part, json] : lessons::part_records()) {
    if (part == "soft-sensor") r.record = json;
  }
  return r;
}

// "rmse" of `estimator` in `regime`, from the record
double rmse_of(const std::string& record, const std::string& estimator, const std::string& regime) {
  const size_t at = record.find("{\"name\": \"" + estimator + "\"");
  REQUIRE(at != std::string::npos);
  const size_t r = record.find("\"" + regime + "\": {", at);
  REQUIRE(r != std::string::npos);
  std::smatch m;
  const std::string tail = record.substr(r, 200);
  REQUIRE(std::regex_search(tail, m, std::regex("\"rmse\": ([-0-9.eE+]+)")));
  return std::stod(m[1].str());
}

std::string without_seconds(const std::string& record) {
  return std::regex_replace(record, std::regex("\"train_seconds\": [-0-9.eE+]+"), "\"train_seconds\": T");
}

}  // namespace

TEST_CASE("lesson13 soft-sensor --quick: record, estimators that learned, a computed verdict, 1 = 2 threads",
          "[lesson13][soft-sensor]") {
  TempDir dir("lesson13_soft_sensor");
  const Run a = run_quick(dir.path.string(), 1);
  for (const char* field : {"\"target\": \"drain\"", "\"units\": \"m^3/s\"", "\"logs\": {", "\"train_rows\": 5000",
                            "\"test_rows\": 3000", "\"resampling\": {", "\"rows_in\"", "\"rows_out\": 2000", "\"filled\"",
                            "\"level_rmse_m\"", "\"pump_hold_exact\"", "\"window\"", "\"settings\": {", "\"train_seconds\"",
                            "\"estimators\": [", "\"name\": \"network\"", "\"name\": \"linear\"", "\"name\": \"physics\"",
                            "\"winner\": {", "\"level_split_m\"", "\"train_max_drain\"",
                            "\"drain_beyond_train\": {\"rows\""}) {
    INFO(field << " in " << a.record);
    CHECK_THAT(a.record, Contains(field));
  }
  CHECK(std::filesystem::exists(dir.file("soft_sensor_test.csv")));

  // The test log's drain: its spread is the error of always guessing the mean.
  const nn::CsvLogSpec spec = lesson13::tank_log_spec();
  const nn::CsvLog test = nn::read_csv_log(std::string(NNLAB_SOURCE_DIR) + "/lessons/13-control/data/tank_log_test.csv", spec);
  const std::vector<double>& d = test.signal("drain");
  double mean = 0.0, var = 0.0;
  for (double x : d) mean += x;
  mean /= static_cast<double>(d.size());
  for (double x : d) var += (x - mean) * (x - mean);
  const double spread = std::sqrt(var / static_cast<double>(d.size()));
  REQUIRE(spread > 1e-3);  // the drain opens and closes in the test log (m^3/s)
  for (const char* est : {"network", "linear", "physics"}) {
    const double r = rmse_of(a.record, est, "all");
    INFO(est << ": RMSE " << r << " m^3/s against the drain's spread " << spread);
    CHECK(std::isfinite(r));
    CHECK(r < 0.25 * spread);
  }

  // The verdict is what the numbers say: lower RMSE, a tie within 2 %.
  for (const char* regime : {"all", "drain_open", "drain_closed", "level_low", "level_high", "drain_beyond_train"}) {
    const double n = rmse_of(a.record, "network", regime), l = rmse_of(a.record, "linear", regime);
    const std::string want = n < 0.98 * l ? "network" : l < 0.98 * n ? "linear" : "tie";
    INFO(regime << ": network " << n << ", linear " << l);
    CHECK_THAT(a.record, Contains("\"" + std::string(regime) + "\": \"" + want + "\""));
    if (want != "tie") CHECK_THAT(a.out, Contains(want + " wins"));
  }

  // Deterministic, and the same with 2 threads.
  TempDir dir2("lesson13_soft_sensor2");
  const Run b = run_quick(dir2.path.string(), 2);
  CHECK(without_seconds(a.record) == without_seconds(b.record));
}

TEST_CASE("lesson13 soft-sensor --soft-sensor-write-logs writes the three logs and stops", "[lesson13][soft-sensor]") {
  TempDir dir("lesson13_write_logs");
  lesson13::Options o;
  o.part = "soft-sensor";
  o.soft_sensor.write_logs = dir.file("logs");
  lessons::part_records().clear();
  {
    CaptureCout cap;
    REQUIRE(lesson13::run_soft_sensor_part(o) == 0);
    CHECK_THAT(cap.text(), Contains("tank_log_uneven.csv"));
  }
  CHECK(lessons::part_records().empty());
  for (const lesson13::TankLogFile& f : lesson13::tank_log_files()) {
    const nn::CsvLog log = nn::read_csv_log(dir.file("logs/" + f.name), lesson13::tank_log_spec());
    CHECK(log.iso_time == f.uneven);
    if (f.uneven) {
      CHECK(log.rows() < f.steps);  // rows dropped: uneven sampling
      CHECK(log.filled > 0);        // and values missing
    } else {
      CHECK(log.rows() == f.steps);
      CHECK(log.filled == 0);
    }
  }
  // a folder without logs: the part says where to find or how to make them
  lesson13::Options r;
  r.part = "soft-sensor";
  r.quick = true;
  r.out_dir = dir.file("out");
  r.soft_sensor.logs = dir.file("nowhere");
  CaptureCout cap;
  CHECK_THAT(error_of([&] { lesson13::run_soft_sensor_part(r); }), Contains("nowhere/tank_log_train.csv"));
}
