// Lesson 13, fault detection (lessons/13-control/faults.h) and the parts faults and export
// (--quick, their JSON records): the faults do what they say, the k-step predictions are the
// one-step ones at k = 1 and the ARX rollout is arx_predict at k = 1, the detector's statistic,
// alarm and threshold rules on hand-made inputs, and the threshold meets its target on the data
// it was chosen on.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lessons/13-control/control_lesson.h"
#include "lessons/13-control/export_c.h"
#include "lessons/13-control/faults.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace {

lessons::Series tank_run(uint64_t seed, int steps) {
  lessons::TankConfig cfg;
  cfg.steps = steps;
  cfg.seed = seed;
  return lessons::simulate_tank(cfg);
}

const lesson13::ExportSpec& small_net() {
  static const lesson13::ExportSpec spec = [] {
    lesson13::NarxConfig nc;
    nc.hidden = {8};
    nc.epochs = 1;
    return lesson13::train_narx(tank_run(1, 2000), nc, 5);
  }();
  return spec;
}

}  // namespace

TEST_CASE("lesson13 faults: stuck holds the onset's value, drift adds rate (t - onset)", "[lesson13][faults]") {
  const lessons::Series s = tank_run(4, 300);
  lesson13::SensorFault f;
  f.kind = lesson13::FaultKind::stuck;
  f.onset = 100;
  const lessons::Series st = lesson13::inject(s, f);
  const std::vector<float> y = s.channel("level"), ys = st.channel("level");
  for (int t = 0; t < 300; ++t) {
    INFO("t = " << t);
    CHECK(ys[static_cast<size_t>(t)] == (t < 100 ? y[static_cast<size_t>(t)] : y[100]));
  }
  CHECK(st.channel("pump") == s.channel("pump"));  // only the level transmitter fails
  f.kind = lesson13::FaultKind::drift;
  f.drift_rate = 1e-3;
  const std::vector<float> yd = lesson13::inject(s, f).channel("level");
  CHECK(yd[99] == y[99]);
  CHECK(yd[100] == y[100]);
  CHECK(yd[250] == Approx(y[250] + 0.15).margin(1e-6));
  CHECK_THROWS_WITH(lesson13::inject(s, lesson13::SensorFault{lesson13::FaultKind::drift, 300, 1e-3}),
                    Catch::Contains("outside the run"));
}

TEST_CASE("lesson13 faults: k-step predictions at k = 1 are the one-step ones", "[lesson13][faults]") {
  const lessons::Series s = tank_run(6, 400);
  const std::vector<float> one = lesson13::one_step_predictions(small_net(), kernels::WeightFormat::f32, s);
  const std::vector<float> k1 = lesson13::k_step_predictions(small_net(), s, 1);
  const int H = small_net().history;
  for (int t = H; t < 400; ++t) {
    INFO("t = " << t);
    CHECK(k1[static_cast<size_t>(t)] == one[static_cast<size_t>(t - 1)]);  // pred of y(t) made at t - 1
  }
  // ARX: the rollout at k = 1 is arx_predict (its theta . phi in double)
  const std::vector<float> y = s.channel("level"), u = s.channel("pump");
  const lessons::ArxModel arx = lessons::fit_arx(y, u, s.steps, 1, 1, 3, 24);
  const std::vector<float> ref = lessons::arx_predict(arx, y, u, s.steps);
  const std::vector<float> a1 = lesson13::k_step_predictions(arx, s, 1);
  for (int t = arx.lag(); t < 400; ++t) {
    INFO("t = " << t);
    CHECK(a1[static_cast<size_t>(t)] == Approx(ref[static_cast<size_t>(t - 1)]).margin(1e-6));
  }
  // k > 1 feeds the model its own predictions: different from the one-step ones
  const std::vector<float> k20 = lesson13::k_step_predictions(small_net(), s, 20);
  int differ = 0;
  for (int t = H + 20; t < 400; ++t) differ += k20[static_cast<size_t>(t)] != one[static_cast<size_t>(t - 1)];
  CHECK(differ > 300);
}

TEST_CASE("lesson13 faults: the statistic, the alarm and the re-arming", "[lesson13][faults]") {
  const std::vector<float> y = {0, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<float> p = {0, 1, -1, 2, 2, 2, 0, 0};  // r = y - p = 0 -1 1 -2 -2 -2 0 0
  const std::vector<double> s2 = lesson13::residual_statistic(y, p, 2, 1);
  // from 1: the mean of r over 2 periods, from t = 2 on
  CHECK(s2[0] == 0.0);
  CHECK(s2[1] == 0.0);
  CHECK(s2[2] == 0.0);   // (-1 + 1) / 2
  CHECK(s2[3] == 0.5);   // (1 - 2) / 2
  CHECK(s2[4] == 2.0);
  CHECK(s2[5] == 2.0);
  CHECK(s2[6] == 1.0);
  CHECK(s2[7] == 0.0);
  const std::vector<double> s = {0, 3, 3, 0, 3, 3, 3, 0, 3, 3};
  CHECK(lesson13::first_alarm(s, 2.0, 1, 0) == 1);
  CHECK(lesson13::first_alarm(s, 2.0, 3, 0) == 6);
  CHECK(lesson13::first_alarm(s, 2.0, 2, 5) == 6);   // from 5: s[4] does not count, the run starts at `from`
  CHECK(lesson13::first_alarm(s, 3.0, 1, 0) == -1);  // strictly above
  CHECK(lesson13::count_alarms(s, 2.0, 1, 0) == 3);  // three episodes
  CHECK(lesson13::count_alarms(s, 2.0, 2, 0) == 3);
  CHECK(lesson13::count_alarms(s, 2.0, 3, 0) == 1);
}

TEST_CASE("lesson13 faults: the threshold meets its false-alarm target on its own data, minimally",
          "[lesson13][faults]") {
  nn::Rng rng(8);
  std::vector<std::vector<double>> runs(3, std::vector<double>(7200));  // 3 x 2 hours at dt = 1 s
  for (auto& r : runs)
    for (double& v : r) v = std::fabs(rng.normal());
  for (double target : {0.0, 1.0, 10.0}) {
    for (int persistence : {1, 3}) {
      const double thr = lesson13::choose_threshold(runs, target, persistence, 0, 1.0);
      int events = 0;
      for (const auto& r : runs) events += lesson13::count_alarms(r, thr, persistence, 0);
      INFO("target " << target << "/h, persistence " << persistence << ": threshold " << thr << ", " << events
                     << " events in 6 h");
      CHECK(events <= static_cast<int>(std::floor(target * 6.0)));
      // any lower value the statistic takes raises more: the threshold is the smallest allowed
      double below = 0.0;
      for (const auto& r : runs)
        for (double v : r)
          if (v < thr) below = std::max(below, v);
      int events_below = 0;
      for (const auto& r : runs) events_below += lesson13::count_alarms(r, below, persistence, 0);
      CHECK(events_below > static_cast<int>(std::floor(target * 6.0)));
    }
  }
}

TEST_CASE("lesson13 faults: the range/flatline check", "[lesson13][faults]") {
  const std::vector<float> y = {0.5f, 0.51f, 0.51f, 0.51f, 0.51f, 0.52f, 1.7f, 0.4f, -0.1f};
  const std::vector<double> s = lesson13::range_flatline_statistic(y, 0.0, 1.5, 3);
  const std::vector<double> want = {0, 0, 0, 0, 1, 0, 1, 0, 1};
  CHECK(s == want);
}

TEST_CASE("lesson13 parts faults and export --quick write their documented JSON fields", "[lesson13][faults][export]") {
  if (lesson13::find_c_compiler().empty()) {
    WARN("no C compiler: the export part cannot run here; skipped");
    return;
  }
  testing::TempDir dir("lesson13-parts");
  lesson13::Options o;
  o.quick = true;
  o.out_dir = dir.file("out");
  o.json = dir.file("l13.json");
  o.faults.onsets = 1;  // one faulty run per kind: the smoke run
  for (const char* part : {"faults", "export"}) {
    o.part = part;
    REQUIRE(lesson13::run(o) == 0);
    std::ifstream f(o.json);
    std::stringstream text;
    text << f.rdbuf();
    const std::string js = text.str();
    if (std::string(part) == "faults") {
      for (const char* k : {"\"detectors\"", "\"threshold\"", "\"false_alarms_per_hour\"", "\"stuck\"", "\"drift\"",
                            "\"delay_steps_median\"", "\"delay_s_median\"", "\"missed\"", "\"net-20\"", "\"arx-20\"",
                            "\"range\""}) {
        INFO(k);
        CHECK(js.find(k) != std::string::npos);
      }
    } else {
      for (const char* k : {"\"formats\"", "\"text_bytes\"", "\"rodata_bytes\"", "\"state_bytes\"", "\"stack_bytes\"",
                            "\"ram_bytes\"", "\"max_abs_error\"", "\"steps_outside\": 0", "\"ns_median\"", "\"tsc_max\"",
                            "\"int8_vs_fp32\"", "\"realtime\"", "\"late_ns_p99\"", "\"closed_loop\"", "\"iae_pi\""}) {
        INFO(k);
        CHECK(js.find(k) != std::string::npos);
      }
    }
  }
}
