// Lesson 13, part export (export_part.h): train the plant model, export it as C99 (fp32 and
// int8), compile it, check it against the C++ model, measure its size, RAM, time per step and
// its jitter at a fixed sample period. The exporter itself is export_c.cpp.
#include "lessons/13-control/export_part.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "kernels/decode.h"
#include "kernels/harness.h"
#include "lessons/13-control/control_lesson.h"
#include "lessons/13-control/export_c.h"
#include "lessons/13-control/scenario.h"
#include "lessons/common/parts.h"
#include "nn/check.h"

namespace lesson13 {

namespace {

using kernels::harness::json_string;

// "key value key value ..." as the C driver prints its measurements.
std::map<std::string, double> parse_kv(const std::string& text, const std::string& what) {
  std::map<std::string, double> kv;
  std::istringstream in(text);
  std::string key;
  double v = 0.0;
  while (in >> key >> v) kv[key] = v;
  NN_CHECK(!kv.empty(), what << " printed nothing readable:\n" << text);
  return kv;
}

double at(const std::map<std::string, double>& kv, const std::string& key) {
  const auto it = kv.find(key);
  NN_CHECK(it != kv.end(), "the C driver's output has no '" << key << "'");
  return it->second;
}

struct FormatResult {
  std::string format, c_file;
  int64_t c_bytes = 0;
  CodeSize size;
  Agreement agree;
  double rmse = 0.0;
  std::map<std::string, double> bench;
};

// The controller of the closed-loop run IS the exported C file (loaded into this process): its
// <name>_control computes the PI's command from the setpoint and the measured level and runs the
// plant model on it (the loop's soft sensor / fault monitor: its prediction of the next level and
// the residual of the last one). step() first waits for its tick: the sample instant is an
// absolute deadline on CLOCK_MONOTONIC (clock_nanosleep TIMER_ABSTIME: a fixed grid, so one late
// tick does not delay the next). Outside the timed part, lessons::PiController (C++, double) is
// fed the same measurements: the C controller's command is checked against it every tick.
class ExportedLoopController : public Controller {
 public:
  ExportedLoopController(LoadedExport& controller, double kp, double ki, int period_us)
      : c_(controller), kp_(kp), ki_(ki), ref_(kp, ki, 1.0), period_ns_(1000LL * period_us) {}
  std::string name() const override { return "exported C controller"; }
  void reset(const LoopStart& start) override {
    c_.control_init(static_cast<float>(start.u_rest));
    ref_ = lessons::PiController(kp_, ki_, start.dt, start.constraints.u_min, start.constraints.u_max);
    ref_.reset(start.u_rest);
    late_ns.clear();
    compute_ns.clear();
    residual.clear();
    max_u_diff = 0.0;
    deadline_ = now_ns() + period_ns_;
  }
  double step(int t, double setpoint, const Sensed& seen) override {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(deadline_ / 1000000000LL);
    ts.tv_nsec = static_cast<long>(deadline_ % 1000000000LL);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
    }
    const int64_t woke = now_ns();
    late_ns.push_back(static_cast<double>(woke - deadline_));
    float r = 0.0f;
    const float u = c_.control(static_cast<float>(setpoint), static_cast<float>(seen.level), &r);
    compute_ns.push_back(static_cast<double>(now_ns() - woke));
    if (t > 0) residual.push_back(r);
    max_u_diff = std::max(max_u_diff, std::fabs(static_cast<double>(u) - ref_.step(setpoint, seen.level)));
    deadline_ += period_ns_;
    return u;
  }
  std::vector<double> late_ns, compute_ns, residual;
  double max_u_diff = 0.0;  // max |u_C - u_C++| over the run

 private:
  static int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  }
  LoadedExport& c_;
  double kp_, ki_;
  lessons::PiController ref_;
  int64_t period_ns_ = 0, deadline_ = 0;
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

void add_export_options(CLI::App& app, ExportOptions& o) {
  app.add_option("--export-formats", o.formats, "Part export: weight formats of the C file (fp32, int8)")
      ->capture_default_str();
  app.add_option("--export-steps", o.steps, "Part export: periods of the run compared with the C++ model (--quick: 3000)")
      ->check(CLI::Range(100, 10000000))->capture_default_str();
  app.add_option("--export-bench-repeats", o.bench_repeats, "Part export: timed passes over those periods (--quick: 2)")
      ->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--export-period-us", o.period_us, "Part export: sample period of the real-time run, microseconds")
      ->check(CLI::Range(50, 10000000))->capture_default_str();
  app.add_option("--export-ticks", o.ticks, "Part export: ticks of the real-time run (--quick: 500)")
      ->check(CLI::Range(10, 10000000))->capture_default_str();
}

int run_export_part(const Options& opts) {
  const ExportOptions& o = opts.export_;
  const int steps = opts.quick ? std::min(o.steps, 3000) : o.steps;
  const int repeats = opts.quick ? std::min(o.bench_repeats, 2) : o.bench_repeats;
  const int ticks = std::min(opts.quick ? std::min(o.ticks, 500) : o.ticks, steps);
  std::cout << "== part export: the plant model as C99 for a controller ==\n";

  // -- the model: trained on one plant run, checked on another
  lessons::TankConfig tc;
  tc.steps = opts.quick ? 4000 : 20000;
  tc.seed = opts.seed;
  PlantModelConfig pc;
  if (opts.quick) {
    pc.hidden = {12, 8};
    pc.epochs = 2;
  }
  TrainReport tr;
  const PlantModel model = train_plant_model(identification_series(tc), pc, opts.seed + 1, &tr);
  // the exported file carries the loop's PI beside the model: the whole controller of the loop
  ExportSpec spec = spec_from_plant_model(model);
  spec.pi.enabled = true;
  spec.pi.kp = static_cast<float>(tc.kp);
  spec.pi.ki = static_cast<float>(tc.ki);
  spec.pi.dt = static_cast<float>(tc.dt);
  spec.pi.u_min = 0.0f;
  spec.pi.u_max = 1.0f;
  lessons::TankConfig vc = tc;
  vc.steps = steps;
  vc.seed = opts.seed + 1000;
  const lessons::Series val = lessons::simulate_tank(vc);
  const std::vector<float> inputs = val.columns({"level", "pump"});
  const std::vector<float> level = val.channel("level");
  std::string hidden;
  for (size_t l = 0; l + 1 < spec.layers.size(); ++l) hidden += (l ? ", " : "") + std::to_string(spec.layers[l].out);
  std::cout << "model: the lesson's PlantModel, NARX MLP " << spec.inputs() << " -> [" << hidden << "] -> 1 (tanh), "
            << spec.params() << " parameters, history " << spec.history << " periods of level and pump; trained on "
            << tc.steps << " periods of identification data (seed " << tc.seed << ", " << tr.seconds
            << " s), checked on " << steps << " periods of the plant under its PI (seed " << vc.seed << ")\n";

  const std::string cc = find_c_compiler();
  NN_CHECK(!cc.empty(), "part export needs a C compiler: install cc / gcc / clang, or set NNLAB_CC");
  const std::string dir = opts.out_dir + "/export";
  std::filesystem::create_directories(dir);
  std::cout << "compiler: " << cc << " -std=c99 -Wall -Wextra -Werror -pedantic -O2\n"
            << "tolerance: " << export_tolerance_text() << "\n\n";

  std::vector<FormatResult> results;
  for (const std::string& fname : lessons::split_list(o.formats)) {
    const kernels::WeightFormat f = kernels::parse_format(fname);
    NN_CHECK(f == kernels::WeightFormat::f32 || f == kernels::WeightFormat::int8,
             "--export-formats: the C file stores fp32 or int8, not " << fname);
    FormatResult r;
    r.format = kernels::format_name(f);
    const std::string sub = dir + "/" + r.format;
    std::filesystem::create_directories(sub);
    const BuiltExport b = build_export(spec, f, sub, cc);
    r.c_file = b.c_file;
    r.c_bytes = static_cast<int64_t>(std::filesystem::file_size(b.c_file));
    r.size = measure_code_size(cc, b.c_file, sub, spec.name);
    const CommandResult info = run_command("'" + b.driver_exe + "' info");
    NN_CHECK(info.status == 0, "the C driver's info failed:\n" << info.output);
    r.size.state_bytes = static_cast<int64_t>(at(parse_kv(info.output, "info"), "state_bytes"));
    r.agree = compare_with_cpp(spec, f, inputs, b.driver_exe, sub);
    NN_CHECK(r.agree.bad == 0, "the exported C (" << r.format << ") disagrees with the C++ model at " << r.agree.bad
                                                  << " of " << r.agree.steps << " steps, the first at " << r.agree.first_bad
                                                  << " (max |difference| " << r.agree.max_abs << ")");
    double se = 0.0;
    for (size_t t = 0; t + 1 < level.size(); ++t) {
      const double e = r.agree.c_out[t] - level[t + 1];
      se += e * e;
    }
    r.rmse = std::sqrt(se / static_cast<double>(level.size() - 1));
    const CommandResult bench = run_command("'" + b.driver_exe + "' bench " + std::to_string(repeats),
                                            sub + "/" + spec.name + "_inputs.txt");
    NN_CHECK(bench.status == 0, "the C driver's bench failed:\n" << bench.output);
    r.bench = parse_kv(bench.output, "bench");
    const int64_t ram = r.size.state_bytes + std::max<int64_t>(r.size.stack_bytes, 0);
    std::cout << r.format << ": " << r.c_file << " (" << r.c_bytes << " bytes of C)\n"
              << "  agrees with the C++ model at all " << r.agree.steps << " steps: max |difference| " << r.agree.max_abs
              << " m (" << r.agree.max_rel << " relative); one-step RMSE vs the measured level " << r.rmse << " m\n"
              << "  code: .text " << r.size.text << " B, .rodata " << r.size.rodata << " B, .data " << r.size.data
              << " B, .bss " << r.size.bss << " B;  RAM: state " << r.size.state_bytes << " B + stack "
              << r.size.stack_bytes << " B (" << r.size.stack_note << ") = " << ram << " B\n"
              << "  per step over " << static_cast<int64_t>(at(r.bench, "steps")) << " timed steps: median "
              << at(r.bench, "ns_median") << " ns, p99 " << at(r.bench, "ns_p99") << " ns, max " << at(r.bench, "ns_max")
              << " ns (clock_gettime, its own cost " << at(r.bench, "timer_overhead_ns") << " ns inside); TSC ticks median "
              << at(r.bench, "tsc_median") << ", max " << at(r.bench, "tsc_max") << "; untimed mean "
              << at(r.bench, "batch_ns_per_step") << " ns\n";
    results.push_back(std::move(r));
  }

  // -- int8 against fp32
  double gap_max = -1.0, gap_rms = 0.0;
  const FormatResult* r32 = nullptr;
  const FormatResult* r8 = nullptr;
  for (const FormatResult& r : results) {
    if (r.format == "fp32") r32 = &r;
    if (r.format == "int8") r8 = &r;
  }
  if (r32 != nullptr && r8 != nullptr) {
    double se = 0.0;
    gap_max = 0.0;
    for (size_t t = 0; t < r32->agree.c_out.size(); ++t) {
      const double d = static_cast<double>(r8->agree.c_out[t]) - r32->agree.c_out[t];
      gap_max = std::max(gap_max, std::fabs(d));
      se += d * d;
    }
    gap_rms = std::sqrt(se / static_cast<double>(r32->agree.c_out.size()));
    std::cout << "\nint8 vs fp32: the predicted level differs by " << gap_rms << " m RMS, " << gap_max
              << " m at most (the sensor's noise is " << tc.level_noise << " m)\n";
  }

  // -- the real-time run: the first format's file at a fixed period
  std::map<std::string, double> rt;
  if (!results.empty()) {
    const FormatResult& r = r32 != nullptr ? *r32 : results.front();
    const std::string sub = dir + "/" + r.format;
    const std::string rt_inputs = sub + "/rt_inputs.txt";
    write_inputs(rt_inputs, std::vector<float>(inputs.begin(), inputs.begin() + 2 * static_cast<size_t>(ticks)), 2);
    const CommandResult run = run_command("'" + sub + "/" + spec.name + "_driver' rt " + std::to_string(o.period_us), rt_inputs);
    NN_CHECK(run.status == 0, "the real-time run failed:\n" << run.output);
    rt = parse_kv(run.output, "rt");
    std::cout << "\nreal time (" << r.format << ", a replay of the measured plant signals): " << ticks << " ticks of "
              << o.period_us << " us at absolute deadlines: wake-up lateness median " << at(rt, "late_ns_median") / 1e3
              << " us, p99 " << at(rt, "late_ns_p99") / 1e3 << " us, max " << at(rt, "late_ns_max") / 1e3
              << " us; longest step " << at(rt, "step_ns_max") / 1e3 << " us; outputs after the next tick: "
              << at(rt, "missed") << " (an ordinary process: no real-time priority)\n";
  }

  // -- the closed loop: the exported file on the controller, one tick per sample period
  struct Loop {
    std::string scenario;
    int ticks = 0;
    double late_med = 0, late_p99 = 0, late_max = 0, compute_max = 0, compute_med = 0, residual_rms = 0;
    int missed = 0;
    double iae = 0, iae_pi = 0, max_u_diff = 0;
  } loop;
  bool have_loop = false;
  if (r32 != nullptr) {
    const std::string sub = dir + "/fp32";
    LoadedExport loaded(cc, spec, r32->c_file, sub);
    Scenario sc = standard_scenarios(opts.quick, opts.seed).front();  // setpoint steps
    sc.steps = std::min(sc.steps, ticks);
    NN_CHECK(sc.constraints.u_min == spec.pi.u_min && sc.constraints.u_max == spec.pi.u_max,
             "the scenario's pump range differs from the exported PI's");
    ExportedLoopController ctrl(loaded, tc.kp, tc.ki, o.period_us);
    const ClosedLoopRun run = run_closed_loop(sc, ctrl);
    PiLoopController pi(tc.kp, tc.ki);
    const ClosedLoopRun plain = run_closed_loop(sc, pi);
    loop.scenario = sc.name;
    loop.ticks = sc.steps;
    loop.late_med = quantile(ctrl.late_ns, 0.5);
    loop.late_p99 = quantile(ctrl.late_ns, 0.99);
    loop.late_max = quantile(ctrl.late_ns, 1.0);
    loop.compute_med = quantile(ctrl.compute_ns, 0.5);
    loop.compute_max = quantile(ctrl.compute_ns, 1.0);
    for (size_t i = 0; i < ctrl.late_ns.size(); ++i) loop.missed += ctrl.late_ns[i] + ctrl.compute_ns[i] > 1000.0 * o.period_us;
    double se = 0.0;
    for (double e : ctrl.residual) se += e * e;
    loop.residual_rms = std::sqrt(se / static_cast<double>(std::max<size_t>(ctrl.residual.size(), 1)));
    loop.iae = run.metrics.iae;
    loop.iae_pi = plain.metrics.iae;
    loop.max_u_diff = ctrl.max_u_diff;
    have_loop = true;
    std::cout << "closed loop (" << sc.name << ", " << sc.steps << " ticks of " << o.period_us
              << " us; the exported C file closes the loop: dlopen'ed, " << loaded.state_bytes()
              << " B of state, its PI computes the command and its model predicts the next level on every tick): "
              << "wake-up lateness median " << loop.late_med / 1e3
              << " us, p99 " << loop.late_p99 / 1e3 << " us, max " << loop.late_max / 1e3 << " us; compute per tick median "
              << loop.compute_med / 1e3 << " us, max " << loop.compute_max / 1e3 << " us; ticks whose command came after the next tick: "
              << loop.missed << "; residual RMS " << loop.residual_rms << " m; the C command vs the C++ PI's on the same "
              << "measurements: max |difference| " << loop.max_u_diff << " (held to " << kControlAtol << "); IAE "
              << loop.iae << " (the C++ PI's own loop, untimed: " << loop.iae_pi << ")\n";
    NN_CHECK(loop.max_u_diff <= kControlAtol, "the exported controller's command differs from the C++ PI's by "
                                                  << loop.max_u_diff << " (more than " << kControlAtol << ")");
  }

  // -- the record
  std::ostringstream js;
  js << "{\"model\": {\"kind\": \"plant-model\", \"inputs\": " << spec.inputs() << ", \"hidden\": [" << hidden
     << "], \"params\": " << spec.params() << ", \"history\": " << spec.history << ", \"signals\": [\"level\", \"pump\"]}"
     << ", \"compiler\": " << json_string(cc) << ", \"flags\": \"-std=c99 -Wall -Wextra -Werror -pedantic -O2\""
     << ", \"tolerance\": {\"atol\": " << jnum(kExportAtol) << ", \"rtol\": " << jnum(kExportRtol) << "}"
     << ", \"steps\": " << steps << ", \"formats\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const FormatResult& r = results[i];
    js << (i ? ", " : "") << "{\"format\": " << json_string(r.format) << ", \"c_file\": " << json_string(r.c_file)
       << ", \"c_bytes\": " << r.c_bytes << ", \"text_bytes\": " << r.size.text << ", \"rodata_bytes\": " << r.size.rodata
       << ", \"data_bytes\": " << r.size.data << ", \"bss_bytes\": " << r.size.bss
       << ", \"state_bytes\": " << r.size.state_bytes << ", \"stack_bytes\": " << r.size.stack_bytes
       << ", \"ram_bytes\": " << r.size.state_bytes + std::max<int64_t>(r.size.stack_bytes, 0)
       << ", \"max_abs_error\": " << jnum(r.agree.max_abs) << ", \"max_rel_error\": " << jnum(r.agree.max_rel)
       << ", \"steps_outside\": " << r.agree.bad << ", \"rmse_vs_measured\": " << jnum(r.rmse);
    for (const char* k : {"ns_median", "ns_p99", "ns_max", "tsc_median", "tsc_p99", "tsc_max", "timer_overhead_ns",
                          "batch_ns_per_step"}) {
      js << ", \"" << k << "\": " << jnum(at(r.bench, k));
    }
    js << ", \"bench_steps\": " << static_cast<int64_t>(at(r.bench, "steps")) << "}";
  }
  js << "], \"int8_vs_fp32\": {\"max_abs\": " << jnum(gap_max < 0 ? NAN : gap_max)
     << ", \"rms\": " << jnum(gap_max < 0 ? NAN : gap_rms) << "}";
  if (!rt.empty()) {
    js << ", \"realtime\": {\"mode\": \"replay\", \"period_us\": " << o.period_us << ", \"ticks\": " << ticks;
    for (const char* k : {"late_ns_median", "late_ns_p99", "late_ns_max", "step_ns_max", "missed"}) {
      js << ", \"" << k << "\": " << jnum(at(rt, k));
    }
    js << "}";
  }
  if (have_loop) {
    js << ", \"closed_loop\": {\"scenario\": " << json_string(loop.scenario) << ", \"period_us\": " << o.period_us
       << ", \"ticks\": " << loop.ticks << ", \"late_ns_median\": " << jnum(loop.late_med)
       << ", \"late_ns_p99\": " << jnum(loop.late_p99) << ", \"late_ns_max\": " << jnum(loop.late_max)
       << ", \"compute_ns_median\": " << jnum(loop.compute_med) << ", \"compute_ns_max\": " << jnum(loop.compute_max)
       << ", \"missed\": " << loop.missed << ", \"residual_rms\": " << jnum(loop.residual_rms)
       << ", \"iae\": " << jnum(loop.iae) << ", \"iae_pi\": " << jnum(loop.iae_pi)
       << ", \"max_u_diff\": " << jnum(loop.max_u_diff) << ", \"u_atol\": " << jnum(kControlAtol) << "}";
  }
  js << "}";
  record_part("export", js.str());
  return 0;
}

}  // namespace lesson13
