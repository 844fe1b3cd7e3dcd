// Lesson 13, part mpc: the learned model in an MPC against the tuned PI (see mpc_part.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/harness.h"
#include "lessons/13-control/control_lesson.h"
#include "lessons/13-control/mpc.h"
#include "lessons/13-control/plant_model.h"
#include "lessons/13-control/scenario.h"
#include "nn/check.h"

namespace lesson13 {

namespace {

// --quick shrinks what the user left at its default.
struct Sizes {
  int train_steps, epochs, horizon, iters, rollout_steps;
  std::vector<int> hidden;
};

Sizes sizes_for(const Options& opts) {
  const MpcOptions& o = opts.mpc;
  const MpcOptions def;
  Sizes s{o.train_steps, o.epochs, o.horizon, o.iters, o.rollout_steps, {32, 32}};
  if (opts.quick) {
    if (o.train_steps == def.train_steps) s.train_steps = 6000;
    if (o.epochs == def.epochs) s.epochs = 4;
    if (o.horizon == def.horizon) s.horizon = 40;
    if (o.iters == def.iters) s.iters = 12;
    if (o.rollout_steps == def.rollout_steps) s.rollout_steps = 30;
    s.hidden = {16, 16};
  }
  return s;
}

std::string metrics_json(const LoopMetrics& m) {
  std::ostringstream js;
  js << "\"iae\": " << jnum(m.iae) << ", \"ise\": " << jnum(m.ise) << ", \"max_abs_error\": " << jnum(m.max_abs_error)
     << ", \"overshoot_pct\": " << jnum(m.overshoot_pct) << ", \"settling_time\": " << jnum(m.settling_time)
     << ", \"setpoint_steps\": " << m.setpoint_steps << ", \"unsettled\": " << m.unsettled
     << ", \"u_bound_violations\": " << m.u_bound_violations << ", \"rate_violations\": " << m.rate_violations
     << ", \"level_violations\": " << m.level_violations << ", \"constraint_violations\": " << m.constraint_violations
     << ", \"effort_du\": " << jnum(m.effort_du) << ", \"effort_u\": " << jnum(m.effort_u)
     << ", \"compute_ms_median\": " << jnum(m.compute_ms_median) << ", \"compute_ms_max\": " << jnum(m.compute_ms_max);
  return js.str();
}

std::string fmt(double v, const char* f = "%.3g") {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Where the MPC does worse than the PI (lower is better for every one of these). An unsettled
// step counts as worse than any settling time; NaN (no step) compares as equal.
std::vector<std::pair<std::string, std::string>> mpc_worse(const LoopMetrics& pi, const LoopMetrics& mpc) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto cmp = [&](const char* name, double a_pi, double a_mpc, const char* f = "%.4g") {
    if (std::isfinite(a_pi) && std::isfinite(a_mpc) && a_mpc > a_pi * (1 + 1e-9) + 1e-12) {
      out.emplace_back(name, std::string("mpc ") + fmt(a_mpc, f) + " vs pi " + fmt(a_pi, f));
    }
  };
  cmp("iae", pi.iae, mpc.iae);
  cmp("ise", pi.ise, mpc.ise);
  cmp("overshoot_pct", pi.overshoot_pct, mpc.overshoot_pct);
  if (mpc.unsettled > pi.unsettled) {
    out.emplace_back("unsettled", "mpc " + std::to_string(mpc.unsettled) + " steps unsettled vs pi " +
                                      std::to_string(pi.unsettled));
  } else {
    cmp("settling_time", pi.settling_time, mpc.settling_time);
  }
  cmp("constraint_violations", pi.constraint_violations, mpc.constraint_violations, "%.0f");
  cmp("effort_du", pi.effort_du, mpc.effort_du);
  cmp("compute_ms_median", pi.compute_ms_median, mpc.compute_ms_median);
  return out;
}

void write_log(const std::string& path, const ClosedLoopRun& pi, const ClosedLoopRun& mpc) {
  std::ofstream f(path);
  NN_CHECK(f, "cannot write " << path);
  f << "t,setpoint,drain,dead_time,level_pi,u_pi,level_mpc,u_mpc\n";
  for (size_t t = 0; t < pi.u.size(); ++t) {
    f << t << ',' << pi.setpoint[t] << ',' << pi.drain[t] << ',' << pi.dead_time[t] << ',' << pi.level_true[t] << ','
      << pi.u[t] << ',' << mpc.level_true[t] << ',' << mpc.u[t] << '\n';
  }
  NN_CHECK(f.good(), "writing " << path << " failed");
}

// ---- --linear-check ------------------------------------------------------------------------------

std::string jarray(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + jnum(v[i]);
  return s + "]";
}

void write_linear_check(const std::string& path, const MpcConfig& mc, double du_max) {
  const lessons::TankConfig tank;  // the tank of lessons 05-06
  const double y_op = 0.5;
  const double u_op = tank.outflow_coeff * std::sqrt(y_op) / tank.pump_gain;
  // level(t+1) = level + dt/A (g u(t-d) - k sqrt(level)): d/dlevel = 1 - dt/A k / (2 sqrt(level)).
  const double a = 1.0 - tank.dt / tank.area * tank.outflow_coeff / (2.0 * std::sqrt(y_op));
  const double b = tank.dt / tank.area * tank.pump_gain;
  const double c = y_op - a * y_op - b * u_op;  // (y_op, u_op) is a fixed point
  const int d = tank.dead_time;

  // The PI on the linear plant, the same loop as run_closed_loop without noise: row t is y(t)
  // and the command computed from it; the pipe delivers u(t - d).
  const double sp0 = 0.5, sp1 = 0.55;
  const int step_at = 10, steps = 400;
  lessons::PiController pi(tank.kp, tank.ki, tank.dt, 0.0, 1.0);
  const double u_rest = ((1.0 - a) * sp0 - c) / b;
  pi.reset(u_rest);
  std::vector<double> pipe(static_cast<size_t>(d), u_rest), ys, us, rs;
  double y = sp0;
  for (int t = 0; t < steps; ++t) {
    const double r = t < step_at ? sp0 : sp1;
    const double u = pi.step(r, y);
    ys.push_back(y);
    us.push_back(u);
    rs.push_back(r);
    double arriving = u;
    if (d > 0) {
      arriving = pipe.front();
      pipe.erase(pipe.begin());
      pipe.push_back(u);
    }
    y = a * y + b * arriving + c;
  }
  MetricsOptions mo;
  mo.dt = tank.dt;
  mo.settling_band = 0.05;
  mo.constraints = {0.0, 1.0, 1.0};
  mo.u_prev0 = u_rest;
  mo.level_max = tank.max_level;
  const LoopMetrics pm = loop_metrics(rs, ys, us, mo);

  // One MPC problem on the linear model: off the operating point (y0 = 0.48), a wiggle in the
  // pipe, the reference 0.55: the rate limit is active on the first moves.
  MpcProblem p;
  p.horizon = mc.horizon;
  p.q = mc.q;
  p.r_du = mc.r_du;
  p.u_min = 0.0;
  p.u_max = 1.0;
  p.du_max = du_max;
  std::vector<double> u_past;
  for (int i = 0; i <= d; ++i) u_past.push_back(u_op + 0.01 * std::sin(0.3 * i));
  p.u_prev = u_past.back();
  p.ref.assign(static_cast<size_t>(p.horizon), 0.55);
  const double y0 = 0.48;
  LinearRollout lin(a, b, c, d, y0, std::vector<double>(u_past.end() - d, u_past.end()));
  SolverOptions so;
  so.max_iters = 20000;
  so.tol = 1e-10;
  so.projection_sweeps = 5000;
  so.projection_tol = 1e-15;
  const MpcSolution sol = solve_mpc(lin, p, {}, so);

  std::ostringstream js;
  js << "{\"plant\": {\"a\": " << kernels::harness::json_number(a, 12) << ", \"b\": "
     << kernels::harness::json_number(b, 12) << ", \"c\": " << kernels::harness::json_number(c, 12)
     << ", \"dead_time\": " << d << ", \"dt\": " << jnum(tank.dt) << ", \"y_op\": " << jnum(y_op)
     << ", \"u_op\": " << kernels::harness::json_number(u_op, 12) << "},\n";
  js << " \"pi\": {\"kp\": " << jnum(tank.kp) << ", \"ki\": " << jnum(tank.ki) << ", \"u_min\": 0, \"u_max\": 1"
     << ", \"setpoint_from\": " << jnum(sp0) << ", \"setpoint_to\": " << jnum(sp1) << ", \"step_at\": " << step_at
     << ", \"steps\": " << steps << "},\n";
  js << " \"pi_response\": {\"y\": " << jarray(ys) << ",\n  \"u\": " << jarray(us) << "},\n";
  js << " \"pi_metrics\": {\"iae\": " << jnum(pm.iae) << ", \"ise\": " << jnum(pm.ise)
     << ", \"overshoot\": " << jnum(pm.overshoot_pct) << ", \"settling_time\": " << jnum(pm.settling_time)
     << ", \"settling_band\": " << jnum(mo.settling_band) << "},\n";
  js << " \"mpc\": {\"horizon\": " << p.horizon << ", \"q\": " << jnum(p.q) << ", \"r_du\": " << jnum(p.r_du)
     << ", \"u_min\": " << jnum(p.u_min) << ", \"u_max\": " << jnum(p.u_max) << ", \"du_max\": " << jnum(p.du_max)
     << ", \"y0\": " << jnum(y0) << ", \"u_past\": " << jarray(u_past) << ",\n  \"ref\": " << jarray(p.ref)
     << ",\n  \"moves\": " << jarray(sol.moves) << ",\n  \"cost\": " << kernels::harness::json_number(sol.cost, 12)
     << ", \"solver\": \"accelerated projected gradient (FISTA, backtracking, restart; Dykstra projection)\""
     << ", \"iterations\": " << sol.iterations << ", \"converged\": " << (sol.converged ? "true" : "false")
     << ", \"last_step\": " << jnum(sol.last_step) << "}}\n";
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::ofstream f(path);
  NN_CHECK(f, "cannot write the linear check record " << path);
  f << js.str();
  NN_CHECK(f.good(), "writing " << path << " failed");
  std::printf("linear check: y(t+1) = %.6f y + %.6f u(t-%d) + %.6f at (%.2f m, u %.4f); PI step %.2f -> %.2f: IAE %.4g, "
              "overshoot %.3g%%, settling %s s; MPC on it: cost %.9g in %d iterations (%s, last step %.2g) -> %s\n",
              a, b, d, c, y_op, u_op, sp0, sp1, pm.iae, pm.overshoot_pct, fmt(pm.settling_time, "%.0f").c_str(),
              sol.cost, sol.iterations, sol.converged ? "converged" : "max_iters", sol.last_step, path.c_str());
}

}  // namespace

int run_mpc_part(const Options& opts) {
  const MpcOptions& o = opts.mpc;
  const Sizes sz = sizes_for(opts);
  std::filesystem::create_directories(opts.out_dir);
  std::printf("== part mpc: the learned model in a model-predictive controller, against the tuned PI ==\n");

  // 1. The model.
  lessons::TankConfig id_cfg;
  id_cfg.steps = sz.train_steps;
  id_cfg.seed = opts.seed;
  PlantModelConfig pmc;
  pmc.hidden = sz.hidden;
  pmc.epochs = sz.epochs;
  pmc.na = o.na;
  pmc.nk = o.nk;
  pmc.rollout_steps = sz.rollout_steps;
  std::string source = "trained", model_path = opts.out_dir + "/mpc_model.safetensors";
  TrainReport rep;
  PlantModel model = [&] {
    if (!o.model.empty()) {
      source = "loaded";
      model_path = o.model;
      return load_plant_model(o.model);
    }
    IdentificationOptions io;
    io.dither = o.dither;
    const lessons::Series train = identification_series(id_cfg, io);
    PlantModel m = train_plant_model(train, pmc, opts.seed, &rep);
    save_plant_model(m, model_path);
    return m;
  }();
  lessons::TankConfig val_cfg = id_cfg;
  val_cfg.seed = opts.seed + 1000;
  val_cfg.steps = std::max(2000, sz.train_steps / 4);
  IdentificationOptions vo;
  vo.dither = o.dither;
  const lessons::Series val = identification_series(val_cfg, vo);
  const double val_rmse = one_step_rmse(val, model.one_step_predictions(val), model.lag());
  const double persist_rmse = one_step_rmse(val, val.channel("level"), model.lag());
  const int mc_h = sz.horizon;  // the model as the MPC uses it: rollouts over the horizon
  const double val_rollout_rmse = rollout_rmse(model, val, mc_h);
  std::string hidden_js = "[";
  for (size_t i = 0; i < model.cfg.hidden.size(); ++i) hidden_js += (i ? ", " : "") + std::to_string(model.cfg.hidden[i]);
  hidden_js += "]";
  std::printf("model: NARX MLP, %d level lags + %d pump lags from u(t-%d) -> %s -> the next change of level, %lld parameters, %s%s\n",
              model.cfg.na, model.cfg.nb, model.cfg.nk, hidden_js.c_str(), static_cast<long long>(model.mlp.num_params()),
              source.c_str(),
              source == "trained" ? (" on " + std::to_string(sz.train_steps) + " identification steps, " +
                                     std::to_string(sz.epochs) + " epochs, " + fmt(rep.seconds, "%.2f") + " s")
                                        .c_str()
                                  : (" from " + model_path).c_str());
  if (source == "trained" && pmc.rollout_steps > 0) {
    std::printf("fine-tuned on %d-step rollouts: rollout MSE %.3g -> %.3g m^2 (first -> last epoch)\n",
                pmc.rollout_steps, rep.rollout_mse_first, rep.rollout_mse_last);
  }
  std::printf("on a validation run (seed %llu): one-step RMSE %.5f m (persistence %.5f m), %d-step rollout RMSE %.4f m\n",
              static_cast<unsigned long long>(val_cfg.seed), val_rmse, persist_rmse, mc_h, val_rollout_rmse);

  // 2. The loops.
  MpcConfig mc;
  mc.horizon = sz.horizon;
  mc.q = o.q;
  mc.r_du = o.r_du;
  mc.solver.max_iters = sz.iters;
  mc.bias_gain = o.bias_gain;
  mc.level_gain = o.level_gain;
  std::vector<Scenario> scs = standard_scenarios(opts.quick, opts.seed);
  for (Scenario& sc : scs) sc.constraints.du_max = o.du_max;
  const lessons::TankConfig tank;
  std::printf("MPC: horizon %d, q %g, r_du %g, u in [0, 1], |du| <= %g, at most %d iterations per step (tol %g); "
              "PI: kp %g, ki %g (lessons 05-06)\n\n",
              mc.horizon, mc.q, mc.r_du, o.du_max, mc.solver.max_iters, mc.solver.tol, tank.kp, tank.ki);
  std::printf("%-16s %-4s %9s %9s %8s %8s %6s %6s %9s %9s %9s\n", "scenario", "ctrl", "IAE", "ISE", "overshoot",
              "settling", "unset", "viol", "sum|du|", "ms med", "ms max");

  std::ostringstream js;
  js << "{\"model\": {\"source\": \"" << source << "\", \"path\": " << kernels::harness::json_string(model_path)
     << ", \"na\": " << model.cfg.na << ", \"nb\": " << model.cfg.nb << ", \"nk\": " << model.cfg.nk << ", \"hidden\": " << hidden_js
     << ", \"params\": " << model.mlp.num_params() << ", \"train_steps\": " << (source == "trained" ? sz.train_steps : 0)
     << ", \"epochs\": " << (source == "trained" ? sz.epochs : 0)
     << ", \"train_seconds\": " << (source == "trained" ? jnum(rep.seconds) : "null")
     << ", \"rollout_steps\": " << (source == "trained" ? pmc.rollout_steps : 0)
     << ", \"val_rmse\": " << jnum(val_rmse) << ", \"persistence_rmse\": " << jnum(persist_rmse)
     << ", \"val_rollout_rmse\": " << jnum(val_rollout_rmse) << ", \"rollout_rmse_steps\": " << mc_h << "},\n";
  js << " \"mpc\": {\"horizon\": " << mc.horizon << ", \"q\": " << jnum(mc.q) << ", \"r_du\": " << jnum(mc.r_du)
     << ", \"du_max\": " << jnum(o.du_max) << ", \"max_iters\": " << mc.solver.max_iters << ", \"tol\": "
     << jnum(mc.solver.tol) << ", \"bias_gain\": " << jnum(mc.bias_gain) << ", \"level_gain\": " << jnum(mc.level_gain)
     << ", \"solver\": \"accelerated projected gradient through the network's rollout\"},\n \"scenarios\": [";
  std::vector<std::string> verdicts;
  for (size_t i = 0; i < scs.size(); ++i) {
    const Scenario& sc = scs[i];
    PiLoopController pi(tank.kp, tank.ki);
    MpcController mpc(model, mc);
    const ClosedLoopRun rp = run_closed_loop(sc, pi);
    const ClosedLoopRun rm = run_closed_loop(sc, mpc);
    write_log(opts.out_dir + "/mpc_" + sc.name + ".csv", rp, rm);
    for (const ClosedLoopRun* r : {&rp, &rm}) {
      const LoopMetrics& m = r->metrics;
      std::printf("%-16s %-4s %9.4g %9.4g %7s%% %8s %6d %6d %9.4g %9.3g %9.3g\n", sc.name.c_str(), r->controller.c_str(),
                  m.iae, m.ise, fmt(m.overshoot_pct, "%.1f").c_str(), fmt(m.settling_time, "%.0f").c_str(), m.unsettled,
                  m.constraint_violations, m.effort_du, m.compute_ms_median, m.compute_ms_max);
    }
    const auto worse = mpc_worse(rp.metrics, rm.metrics);
    std::string list;
    for (const auto& w : worse) {
      verdicts.push_back(sc.name + ": " + w.first + " (" + w.second + ")");
      list += (list.empty() ? "\"" : ", \"") + w.first + "\"";
    }
    const double iters_mean = static_cast<double>(mpc.total_iterations()) / std::max(mpc.solves(), 1);
    js << (i ? ",\n  " : "\n  ") << "{\"name\": \"" << sc.name << "\", \"description\": "
       << kernels::harness::json_string(sc.description) << ", \"steps\": " << sc.steps << ",\n   \"pi\": {"
       << metrics_json(rp.metrics) << "},\n   \"mpc\": {" << metrics_json(rm.metrics)
       << ", \"iterations_mean\": " << jnum(iters_mean) << ", \"unconverged_steps\": " << mpc.unconverged()
       << "},\n   \"mpc_worse\": [" << list << "]}";
  }
  js << "],\n \"linear_check\": " << (o.linear_check.empty() ? "null" : kernels::harness::json_string(o.linear_check))
     << "}";
  std::printf("\nviolations: u outside [0, 1] + |du| > %g + tank empty/overflowing, per step. The PI is tuned without "
              "a rate limit.\n",
              o.du_max);
  if (verdicts.empty()) {
    std::printf("The MPC does no worse than the PI on any metric of any scenario.\n");
  } else {
    std::printf("Where the MPC does WORSE than the PI (computed from the table):\n");
    for (const std::string& v : verdicts) std::printf("  %s\n", v.c_str());
  }
  std::printf("logs: %s/mpc_<scenario>.csv, model: %s\n", opts.out_dir.c_str(), model_path.c_str());

  if (!o.linear_check.empty()) {
    MpcConfig lc = mc;
    write_linear_check(o.linear_check, lc, o.du_max);
  }
  record_part("mpc", js.str());
  return 0;
}

}  // namespace lesson13
