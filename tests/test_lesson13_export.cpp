// Lesson 13, the C99 export (lessons/13-control/export_c.h): a trained NARX network becomes one
// C file that a plain C compiler builds with -std=c99 -Wall -Wextra -Werror -pedantic; its
// outputs over a long simulated run (5000 steps of a plant run the network was not trained on)
// match the C++ model to kExportAtol + kExportRtol |y| at every step, fp32 and int8 (against the
// C++ model with the same int8 weights dequantised); the int8-vs-fp32 gap is measured and
// bounded; the spec's checks refuse what cannot be exported. With a PI in the spec the file is the
// loop's whole controller: loaded with dlopen, it closes the loop on the simulated tank and its
// command matches lessons::PiController's to kControlAtol at every period.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lessons/13-control/export_c.h"
#include "lessons/13-control/scenario.h"
#include "nn/check.h"
#include "tests/test_util.h"

namespace {

lessons::Series tank_run(uint64_t seed, int steps) {
  lessons::TankConfig cfg;
  cfg.steps = steps;
  cfg.seed = seed;
  return lessons::simulate_tank(cfg);
}

// A small network, trained briefly: the check is of the export, not of the training.
const lesson13::ExportSpec& trained_spec() {
  static const lesson13::ExportSpec spec = [] {
    lesson13::NarxConfig nc;
    nc.hidden = {12, 8};
    nc.epochs = 2;
    return lesson13::train_narx(tank_run(1, 3000), nc, 5);
  }();
  return spec;
}

// (steps, 2): level, pump of a run the network never saw.
std::vector<float> inputs_of(const lessons::Series& s) {
  return s.columns({"level", "pump"});
}

}  // namespace

TEST_CASE("lesson13 export: the C++ reference runs the spec's features and history rule", "[lesson13][export]") {
  const lesson13::ExportSpec& spec = trained_spec();
  REQUIRE(spec.history == 24);
  REQUIRE(spec.inputs() == 28);
  lesson13::SpecRunner run(spec, kernels::WeightFormat::f32);
  // the first sample fills the whole history
  const float first[2] = {0.4f, 0.3f};
  run.step(first);
  for (int i = 0; i < spec.inputs(); ++i) {
    const lesson13::ExportFeature& f = spec.features[static_cast<size_t>(i)];
    const float want = (first[f.signal] - f.mean) / f.std;
    CHECK(run.features()[static_cast<size_t>(i)] == want);
  }
  // then each step shifts by one: after k more steps lag k is still the first sample
  const float second[2] = {0.5f, 0.7f};
  run.step(second);
  CHECK(run.features()[0] == (0.5f - spec.features[0].mean) / spec.features[0].std);  // level lag 0
  CHECK(run.features()[1] == (0.4f - spec.features[1].mean) / spec.features[1].std);  // level lag 1
  CHECK(run.features()[4] == (0.7f - spec.features[4].mean) / spec.features[4].std);  // pump lag 0
  CHECK(run.features()[5] == (0.3f - spec.features[5].mean) / spec.features[5].std);  // pump lag 1
}

TEST_CASE("lesson13 export: the NARX network predicts better than persistence", "[lesson13][export]") {
  const lessons::Series val = tank_run(2, 3000);
  const std::vector<float> pred = lesson13::one_step_predictions(trained_spec(), kernels::WeightFormat::f32, val);
  const std::vector<float> y = val.channel("level");
  double se_net = 0.0, se_hold = 0.0;
  for (size_t t = 100; t + 1 < y.size(); ++t) {
    se_net += (pred[t] - y[t + 1]) * (pred[t] - y[t + 1]);
    se_hold += (y[t] - y[t + 1]) * (y[t] - y[t + 1]);
  }
  INFO("one-step MSE: network " << se_net << ", persistence " << se_hold);
  CHECK(se_net < se_hold);
}

TEST_CASE("lesson13 export: the C file compiles with -std=c99 -Werror and matches the C++ model over 5000 steps",
          "[lesson13][export]") {
  const std::string cc = lesson13::find_c_compiler();
  if (cc.empty()) {
    WARN("no C compiler on this machine (cc, gcc, clang, $NNLAB_CC): the export is not compiled here");
    return;
  }
  testing::TempDir dir("lesson13-export");
  const lesson13::ExportSpec& spec = trained_spec();
  const std::vector<float> inputs = inputs_of(tank_run(9, 5000));
  std::vector<float> out_fp32, out_int8, ref_fp32;
  for (kernels::WeightFormat f : {kernels::WeightFormat::f32, kernels::WeightFormat::int8}) {
    const std::string sub = (dir.path / kernels::format_name(f)).string();
    std::filesystem::create_directories(sub);
    const lesson13::BuiltExport b = lesson13::build_export(spec, f, sub, cc);
    // the file says what it computes, its shapes and its tolerance
    std::ifstream in(b.c_file);
    std::stringstream text;
    text << in.rdbuf();
    CHECK_THAT(text.str(), Catch::Contains("28 -> 12 -> 8 -> 1") && Catch::Contains(lesson13::export_tolerance_text()) &&
                               Catch::Contains("tank_narx_step"));
    CHECK(text.str().find("malloc") == std::string::npos);
    // the object alone, without the driver: what a controller's firmware would link
    const lesson13::CodeSize cs = lesson13::measure_code_size(cc, b.c_file, sub, spec.name);
    CHECK(cs.text > 0);
    CHECK(cs.rodata + cs.data > 0);
    CHECK(cs.bss == 0);  // nothing global to write: the state is the caller's
    const lesson13::Agreement a = lesson13::compare_with_cpp(spec, f, inputs, b.driver_exe, sub);
    INFO(kernels::format_name(f) << ": max |c - cpp| " << a.max_abs << ", max relative " << a.max_rel << ", " << a.bad
                                 << " of " << a.steps << " steps outside, the first at " << a.first_bad);
    CHECK(a.steps == 5000);
    CHECK(a.bad == 0);
    if (f == kernels::WeightFormat::f32) {
      out_fp32 = a.c_out;
      ref_fp32 = a.ref_out;
    } else {
      out_int8 = a.c_out;
    }
  }
  // int8 against fp32: the price of the quantisation, measured in metres of predicted level.
  // Bounded loosely (a few mm): a wrong scale or a transposed row would be off by the level itself.
  double gap = 0.0;
  for (size_t t = 0; t < out_fp32.size(); ++t) gap = std::max(gap, std::fabs(static_cast<double>(out_int8[t] - out_fp32[t])));
  INFO("int8 vs fp32, max |difference| of the predicted level: " << gap << " m");
  CHECK(gap > 0.0);
  CHECK(gap < 5e-3);
}

TEST_CASE("lesson13 export: the lesson's PlantModel as C agrees with PlantModel::one_step_predictions",
          "[lesson13][export]") {
  const std::string cc = lesson13::find_c_compiler();
  if (cc.empty()) {
    WARN("no C compiler on this machine: skipped");
    return;
  }
  lessons::TankConfig tc;
  tc.steps = 3000;
  tc.seed = 3;
  lesson13::PlantModelConfig pc;
  pc.hidden = {10, 6};
  pc.epochs = 1;
  const lesson13::PlantModel m = lesson13::train_plant_model(lesson13::identification_series(tc), pc, 4);
  const lesson13::ExportSpec spec = lesson13::spec_from_plant_model(m);
  CHECK(spec.inputs() == pc.na + pc.nb);
  CHECK(spec.history == m.lag());
  testing::TempDir dir("lesson13-export-plant");
  const lesson13::BuiltExport b = lesson13::build_export(spec, kernels::WeightFormat::f32, dir.path.string(), cc);
  const lessons::Series val = tank_run(11, 4000);
  const lesson13::Agreement a =
      lesson13::compare_with_cpp(spec, kernels::WeightFormat::f32, inputs_of(val), b.driver_exe, dir.path.string());
  CHECK(a.bad == 0);
  // ... and against the model's own code path (its batched forward), from the first row it
  // predicts (before that it holds the level; the C file repeats the first sample instead)
  const std::vector<float> want = m.one_step_predictions(val);
  int64_t outside = 0;
  double worst = 0.0;
  for (size_t t = static_cast<size_t>(m.lag() - 1); t < want.size(); ++t) {
    const double err = std::fabs(static_cast<double>(a.c_out[t]) - want[t]);
    worst = std::max(worst, err);
    outside += !(err <= lesson13::kExportAtol + lesson13::kExportRtol * std::fabs(static_cast<double>(want[t])));
  }
  INFO("C against PlantModel::one_step_predictions: max |difference| " << worst << " m");
  CHECK(outside == 0);
}

TEST_CASE("lesson13 export: a wrong C file is caught (the comparison can fail)", "[lesson13][export]") {
  const std::string cc = lesson13::find_c_compiler();
  if (cc.empty()) {
    WARN("no C compiler on this machine: skipped");
    return;
  }
  testing::TempDir dir("lesson13-export-wrong");
  // the C file from a network whose output bias is off by 5% of the change's spread (about
  // 5e-5 m of level): the comparison with the true model must see it at every step
  lesson13::ExportSpec wrong = trained_spec();
  wrong.layers.back().bias[0] += 0.05f;
  const lesson13::BuiltExport b = lesson13::build_export(wrong, kernels::WeightFormat::f32, dir.path.string(), cc);
  const std::vector<float> inputs = inputs_of(tank_run(9, 300));
  const lesson13::Agreement a = lesson13::compare_with_cpp(trained_spec(), kernels::WeightFormat::f32, inputs,
                                                           b.driver_exe, dir.path.string());
  CHECK(a.bad == a.steps);
  CHECK(a.first_bad == 0);
}

TEST_CASE("lesson13 export: the spec refuses what cannot be exported", "[lesson13][export]") {
  lesson13::ExportSpec s = trained_spec();
  s.name = "Bad-Name";
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("C identifier"));
  s = trained_spec();
  s.features[0].lag = s.history;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("lag"));
  s = trained_spec();
  s.layers[1].weight[3] = std::nanf("");
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("not finite"));
  s = trained_spec();
  s.layers.pop_back();
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("one output"));
  CHECK_THROWS_WITH(lesson13::generate_c(trained_spec(), kernels::WeightFormat::int4, "x"), Catch::Contains("fp32 or int8"));
}

namespace {

lesson13::ExportSpec with_pi(lesson13::ExportSpec spec, const lessons::TankConfig& tc) {
  spec.pi.enabled = true;
  spec.pi.kp = static_cast<float>(tc.kp);
  spec.pi.ki = static_cast<float>(tc.ki);
  spec.pi.dt = static_cast<float>(tc.dt);
  return spec;
}

// The loaded C file as the loop's controller, lessons::PiController fed the same measurements
// beside it (what the export part does, without the real-time waits).
class CController : public lesson13::Controller {
 public:
  CController(lesson13::LoadedExport& c, double kp, double ki) : c_(c), kp_(kp), ki_(ki), ref_(kp, ki, 1.0) {}
  std::string name() const override { return "c"; }
  void reset(const lesson13::LoopStart& start) override {
    c_.control_init(static_cast<float>(start.u_rest));
    ref_ = lessons::PiController(kp_, ki_, start.dt, start.constraints.u_min, start.constraints.u_max);
    ref_.reset(start.u_rest);
    residuals.clear();
    max_u_diff = 0.0;
  }
  double step(int t, double setpoint, const lesson13::Sensed& seen) override {
    float r = -1.0f;
    const float u = c_.control(static_cast<float>(setpoint), static_cast<float>(seen.level), &r);
    if (t == 0) first_residual = r;
    else residuals.push_back(r);
    max_u_diff = std::max(max_u_diff, std::fabs(static_cast<double>(u) - ref_.step(setpoint, seen.level)));
    return u;
  }
  std::vector<double> residuals;
  double max_u_diff = 0.0, first_residual = -1.0;

 private:
  lesson13::LoadedExport& c_;
  double kp_, ki_;
  lessons::PiController ref_;
};

}  // namespace

TEST_CASE("lesson13 export: the C file with its PI closes the loop like the C++ PI", "[lesson13][export]") {
  const std::string cc = lesson13::find_c_compiler();
  if (cc.empty()) {
    WARN("no C compiler on this machine: skipped");
    return;
  }
  testing::TempDir dir("lesson13-export-pi");
  const lessons::TankConfig tc;
  const lesson13::ExportSpec spec = with_pi(trained_spec(), tc);
  lesson13::Scenario sc = lesson13::standard_scenarios(true).front();  // setpoint steps
  sc.steps = std::min(sc.steps, 3000);
  const lesson13::ClosedLoopRun plain = [&] {
    lesson13::PiLoopController pi(tc.kp, tc.ki);
    return lesson13::run_closed_loop(sc, pi);
  }();
  for (kernels::WeightFormat f : {kernels::WeightFormat::f32, kernels::WeightFormat::int8}) {
    const std::string sub = (dir.path / kernels::format_name(f)).string();
    std::filesystem::create_directories(sub);
    const lesson13::BuiltExport b = lesson13::build_export(spec, f, sub, cc);
    lesson13::LoadedExport loaded(cc, spec, b.c_file, sub);
    CController ctrl(loaded, tc.kp, tc.ki);
    const lesson13::ClosedLoopRun run = lesson13::run_closed_loop(sc, ctrl);
    INFO(kernels::format_name(f) << ": max |u_c - u_cpp| " << ctrl.max_u_diff << "; IAE " << run.metrics.iae
                                 << " vs the C++ PI's loop " << plain.metrics.iae);
    CHECK(ctrl.max_u_diff <= lesson13::kControlAtol);
    CHECK(ctrl.first_residual == 0.0);  // no prediction before the first period
    // its own loop (the commands differ by rounding only): the same IAE to 1e-4 relative
    CHECK(std::fabs(run.metrics.iae - plain.metrics.iae) <= 1e-4 * plain.metrics.iae);
    // the model inside predicts the next level: its residuals are the sensor noise's size, not the level's
    double se = 0.0;
    for (double r : ctrl.residuals) se += r * r;
    const double rms = std::sqrt(se / static_cast<double>(ctrl.residuals.size()));
    INFO("residual RMS " << rms << " m, sensor noise " << tc.level_noise << " m");
    CHECK(rms < 4.0 * tc.level_noise);
    CHECK(rms > 0.5 * tc.level_noise);
  }

  // a wrong gain in the C file: caught within the run
  lesson13::ExportSpec wrong = spec;
  wrong.pi.kp *= 1.01f;
  const std::string sub = (dir.path / "wrong").string();
  std::filesystem::create_directories(sub);
  const lesson13::BuiltExport b = lesson13::build_export(wrong, kernels::WeightFormat::f32, sub, cc);
  lesson13::LoadedExport loaded(cc, wrong, b.c_file, sub);
  CController ctrl(loaded, tc.kp, tc.ki);
  lesson13::run_closed_loop(sc, ctrl);
  CHECK(ctrl.max_u_diff > 100 * lesson13::kControlAtol);
}

TEST_CASE("lesson13 export: a PI needs the measurement and the command as the model's two signals", "[lesson13][export]") {
  lesson13::ExportSpec s = with_pi(trained_spec(), lessons::TankConfig{});
  s.validate();
  s.pi.command = 0;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("exactly those two signals"));
  s = with_pi(trained_spec(), lessons::TankConfig{});
  s.pi.u_max = s.pi.u_min;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("u_min < u_max"));
  s = with_pi(trained_spec(), lessons::TankConfig{});
  s.pi.ki = -1.0f;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("ki >= 0"));
  const std::string cc = lesson13::find_c_compiler();
  if (cc.empty()) return;
  // a file without the PI has no controller to call
  testing::TempDir dir("lesson13-export-nopi");
  const lesson13::BuiltExport b = lesson13::build_export(trained_spec(), kernels::WeightFormat::f32, dir.path.string(), cc);
  lesson13::LoadedExport loaded(cc, trained_spec(), b.c_file, dir.path.string());
  CHECK_THROWS_WITH(loaded.control_init(0.5f), Catch::Contains("no controller"));
  float r = 0.0f;
  CHECK_THROWS_WITH(loaded.control(0.5f, 0.5f, &r), Catch::Contains("no controller"));
}
