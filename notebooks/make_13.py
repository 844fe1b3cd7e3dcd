#!/usr/bin/env python3
"""Writes notebooks/13-control.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_13.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)

Lesson 13 (a network in the control loop) for automation students:
  - the tank linearised at its operating points (the gain and time constant across the level
    range: why the low levels are "the nonlinear range");
  - step responses of the PI and of an MPC on that linear plant, by hand in numpy: the
    rollout, the gradient backwards and the projected step of exercise 29, with the rate limit;
    the metrics with lesson13::loop_metrics's definitions (scenario.h);
  - the residual threshold of fault detection by hand: a quantile of fault-free residuals, the
    alarms it gives on a stuck and a drifting transmitter (lesson 13's faults part does it
    with the learned model);
  - `lesson13 --part <each> --quick --json`: the comparison table, soft-sensor errors, fault
    detection and export figures from the record (fields: lessons/13-control/*_part.h), and the
    time series the parts write under --out-dir when they write them. A part that is still the
    skeleton's placeholder is reported as not written; any other failure fails the notebook.
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import csv, glob, json, math, os, subprocess
import numpy as np
import matplotlib.pyplot as plt

src = os.environ.get("NNLAB_SOURCE_DIR", os.path.abspath(".."))
# Opened in Jupyter from notebooks/, everything this notebook writes goes to notebooks/out/,
# which git ignores; run_notebook.py runs it in a scratch folder instead.
if os.path.exists("run_notebook.py"):
    os.makedirs("out", exist_ok=True)
    os.chdir("out")
bin_dir = os.environ.get("NNLAB_BIN_DIR", os.path.join(src, "build", "release", "bin"))
quick = os.environ.get("NNLAB_QUICK") == "1"
nnlab = os.path.join(bin_dir, "nnlab")
# the stand-alone program when it is built, else the front door's subcommand (same flags)
if os.path.exists(os.path.join(bin_dir, "lesson13")):
    lesson13 = [os.path.join(bin_dir, "lesson13")]
else:
    lesson13 = [nnlab, "lesson13"]
SCHEMA = "nnlab-lesson13/1"

def print_table(header, rows):
    """Plain aligned columns (no pandas)."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for j, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if j == 0:
            print("  ".join("-" * w for w in widths))

def fmt(v, digits=4):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.{digits}g}"
    return str(v)

print("lesson 13:", " ".join(lesson13), "| quick" if quick else "")'''

linearise = '''# The tank of lessons 05-06 (lessons/common/plant.h, TankConfig's defaults), linearised:
#   level(t+1) = level + dt/A (g u(t-d) - k sqrt(level))   ->   y(t+1) = a y + b u(t-d) + c
# at an operating level y_op:  a = 1 - dt/A * k / (2 sqrt(y_op)),  b = dt/A * g.
dt, area, g_pump, k_out, dead = 1.0, 1.0, 0.0375, 0.03, 20
def linearise(y_op):
    a = 1.0 - dt / area * k_out / (2.0 * math.sqrt(y_op))
    b = dt / area * g_pump
    u_op = k_out * math.sqrt(y_op) / g_pump          # the command that holds y_op
    c = y_op - a * y_op - b * u_op                   # so that y_op is a fixed point
    return a, b, c, u_op

levels = np.linspace(0.05, 1.2, 80)
tau = [-dt / math.log(linearise(l)[0]) for l in levels]          # time constant, seconds
gain = [linearise(l)[1] / (1 - linearise(l)[0]) for l in levels]  # steady-state gain, m per unit u
fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
ax[0].plot(levels, tau); ax[0].set_xlabel("operating level (m)"); ax[0].set_ylabel("time constant (s)")
ax[1].plot(levels, gain); ax[1].set_xlabel("operating level (m)"); ax[1].set_ylabel("gain (m per unit of u)")
for a_ in ax:
    a_.axvspan(0.3, 0.8, color="g", alpha=0.08, label="setpoint range")
    a_.grid(alpha=0.3); a_.legend(fontsize=8)
fig.suptitle("the linearised tank: slower and stronger at high levels, fast and weak at low ones", fontsize=10)
plt.tight_layout(); plt.show()
for l in (0.2, 0.5, 0.8):
    a, b, c, u_op = linearise(l)
    print(f"y_op = {l} m: a = {a:.5f}, b = {b:.4f}, c = {c:.5f}, u_op = {u_op:.4f}, tau = {-dt / math.log(a):.1f} s")'''

pi_mpc = '''# PI and MPC on the linear plant at 0.5 m, a setpoint step 0.5 -> 0.6 m at t = 20.
a, b, c, u_op = linearise(0.5)
kp, ki, u_min, u_max, du_max = 1.0, 0.012, 0.0, 1.0, 0.05     # LoopConstraints' defaults
T, step_at = 250 if quick else 400, 20
r = np.where(np.arange(T) >= step_at, 0.6, 0.5)

def run_loop(controller):
    """y(t) the level at t, u(t) the command from it; the pipe holds d commands."""
    y, pipe, ys, us = 0.5, [u_op] * dead, [], []
    for t in range(T):
        u = controller(t, y, pipe)
        ys.append(y); us.append(u)
        pipe.append(u); arriving = pipe.pop(0)
        y = a * y + b * min(max(arriving, 0.0), 1.0) + c
    return np.array(ys), np.array(us)

def make_pi():
    state = {"I": u_op}
    def step(t, y, pipe):                         # lessons::PiController, anti-windup included
        e = r[t] - y
        I_next = state["I"] + ki * dt * e
        u_raw = kp * e + I_next
        if not ((u_raw > u_max and e > 0) or (u_raw < u_min and e < 0)):
            state["I"] = I_next
        return min(max(kp * e + state["I"], u_min), u_max)
    return step

def make_mpc(H=40, q=1.0, r_du=0.02, iters=60, lr=None):
    """Exercise 29's receding-horizon step, repeated: rollout, gradient backwards, projected step."""
    plan = {"m": None, "u_prev": u_op}
    lr = lr or 1.0 / (q * b * b * H * H / 4 + 4 * r_du)   # below 1 / (the Hessian's largest eigenvalue, roughly)
    def step(t, y, pipe):
        m = plan["m"] if plan["m"] is not None else np.full(H, plan["u_prev"])
        ref = np.full(H, r[t])                    # the setpoint now (no preview of future steps:
                                                  # the PI has none either)
        for _ in range(iters):
            yy, yp = np.empty(H), y
            for k in range(H):                    # y(t+k+1) = a y + b u(t+k-d) + c
                j = k - dead
                yp = a * yp + b * (pipe[k] if j < 0 else m[j]) + c
                yy[k] = yp
            gk, grad = 0.0, np.zeros(H)
            for k in range(H - 1, -1, -1):        # backwards: g = -2 q (r - y) + a g_next
                gk = -2 * q * (ref[k] - yy[k]) + a * gk
                if k - dead >= 0:
                    grad[k - dead] += b * gk
            du = np.diff(np.concatenate([[plan["u_prev"]], m]))
            grad += 2 * r_du * du
            grad[:-1] -= 2 * r_du * du[1:]
            m = np.clip(m - lr * grad, u_min, u_max)
            prev = plan["u_prev"]                 # the rate limit, move by move (a feasible-making
            for j in range(H):                    # pass, not an exact projection)
                m[j] = min(max(m[j], prev - du_max), prev + du_max); prev = m[j]
        plan["m"] = np.concatenate([m[1:], m[-1:]])   # warm start: the plan, shifted
        plan["u_prev"] = m[0]
        return float(m[0])
    return step

def loop_metrics(r, y, u, band=0.05, u_prev0=u_op):
    """lesson13::loop_metrics's definitions (lessons/13-control/scenario.h), one setpoint step."""
    e = r - y
    t0 = int(np.argmax(np.diff(r) != 0)) + 1
    delta = r[t0] - r[t0 - 1]
    seg = slice(t0, len(r))
    over = 100 * max(0.0, float(np.max((y[seg] - r[seg]) * np.sign(delta)))) / abs(delta)
    inside = np.abs(y[seg] - r[seg]) <= band * abs(delta)
    outside = np.nonzero(~inside)[0]
    settle = dt * (outside[-1] + 1) if inside[-1] else float("nan")
    du = np.diff(np.concatenate([[u_prev0], u]))
    return {"IAE": float(np.sum(np.abs(e)) * dt), "ISE": float(np.sum(e * e) * dt), "overshoot %": over,
            "settling s": settle, "rate violations": int(np.sum(np.abs(du) > du_max + 1e-9)),
            "effort sum|du|": float(np.sum(np.abs(du)))}

runs = {"PI": run_loop(make_pi()), "MPC (linear model)": run_loop(make_mpc())}
fig, ax = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
ax[0].plot(r, "k--", lw=1, label="setpoint")
for name, (y, u) in runs.items():
    ax[0].plot(y, label=name); ax[1].plot(u, label=name)
ax[0].set_ylabel("level (m)"); ax[1].set_ylabel("pump command u"); ax[1].set_xlabel("t (s)")
ax[0].axvline(step_at + dead, color="gray", lw=0.6, ls=":")
ax[0].text(step_at + dead + 2, 0.5, "the dead time: nothing moves before here", fontsize=8)
for a_ in ax: a_.grid(alpha=0.3); a_.legend(fontsize=8)
fig.suptitle("setpoint step on the linearised tank (dead time 20 s): PI against MPC", fontsize=10)
plt.tight_layout(); plt.show()
rows = []
for name, (y, u) in runs.items():
    m = loop_metrics(r, y, u)
    rows.append([name] + [fmt(v) for v in m.values()])
print_table(["controller"] + list(loop_metrics(r, *runs["PI"]).keys()), rows)'''

residuals = '''# Fault detection by hand: residual = measured level - the model's prediction of it.
# Fault-free, the residual is sensor noise plus model error; a threshold is chosen on it (here
# the 99.9% quantile of |statistic| on a fault-free run) and then used on runs with faults.
# Two statistics: the one-step residual, and the k-step one (the model rolled out from the
# level measured k steps ago, with the commands sent since) averaged over a window: a slow
# drift hides inside one step's noise, but k steps let it accumulate against the model.
rng = np.random.default_rng(13)
noise, Tf, K, WIN = 0.002, 3000 if quick else 6000, 50, 10
def plant_run(fault=None, onset=None):
    """The linear plant with a varying pump command; the level transmitter may be faulty."""
    y, pipe, meas, us = 0.5, [u_op] * dead, [], []
    for t in range(Tf):
        u = u_op + 0.1 * math.sin(t / 37.0) + 0.05 * rng.standard_normal()
        m = y + noise * rng.standard_normal()
        if fault == "stuck" and t >= onset:
            m = meas[onset - 1]                    # the transmitter freezes at its last value
        elif fault == "drift" and t >= onset:
            m += 2e-5 * (t - onset)                # 2 cm per 1000 s
        meas.append(m); us.append(u)
        pipe.append(u); y = a * y + b * pipe.pop(0) + c
    return np.array(meas), np.array(us)

def statistics(meas, us):
    """(one-step residual, k-step residual's moving mean over WIN), NaN where history is short."""
    one, kst = np.full_like(meas, np.nan), np.full_like(meas, np.nan)
    for t in range(dead + K, len(meas)):
        one[t] = meas[t] - (a * meas[t - 1] + b * us[t - 1 - dead] + c)
        yp = meas[t - K]
        for j in range(t - K, t):                  # roll the model out over the last K steps
            yp = a * yp + b * us[j - dead] + c
        kst[t] = meas[t] - yp
    mean = np.convolve(np.nan_to_num(kst), np.ones(WIN) / WIN, mode="full")[:len(kst)]
    mean[:dead + K + WIN] = np.nan
    return one, mean

clean = statistics(*plant_run())
thr = [float(np.nanquantile(np.abs(s_), 0.999)) for s_ in clean]
names = ["one-step residual", f"{K}-step residual, mean of {WIN}"]
for n_, th, s_ in zip(names, thr, clean):
    print(f"{n_}: threshold {th * 1000:.2f} mm (99.9% of fault-free); fault-free alarms: {int(np.sum(np.abs(s_) > th))} in {Tf} s")
onset = Tf // 2
fig, ax = plt.subplots(2, 2, figsize=(11, 5), sharex=True)
for row, fault in enumerate(("stuck", "drift")):
    stats = statistics(*plant_run(fault, onset))
    for col, (n_, th, s_) in enumerate(zip(names, thr, stats)):
        a_ = ax[row, col]
        alarms = np.nonzero(np.abs(s_[onset:]) > th)[0]
        delay = f"first alarm {alarms[0]} s after the onset" if alarms.size else "never detected"
        a_.plot(s_ * 1000, lw=0.5, label=n_)
        a_.axhline(th * 1000, color="r", lw=0.8, label="threshold"); a_.axhline(-th * 1000, color="r", lw=0.8)
        a_.axvline(onset, color="k", ls="--", lw=0.8, label="fault onset")
        a_.set_title(f"{fault}, {n_}: {delay}", fontsize=8); a_.grid(alpha=0.3)
        a_.legend(fontsize=6, loc="upper left")
    ax[row, 0].set_ylabel("mm")
ax[1, 0].set_xlabel("t (s)"); ax[1, 1].set_xlabel("t (s)")
plt.tight_layout(); plt.show()'''

soft_by_hand = '''# The soft sensor by hand, on the plant logs the lesson ships (lessons/13-control/data, CSV in
# cm, %, l/min): the drain flow that nobody measures, estimated from pump, level and outflow.
#   physics: d = q - k sqrt(y) with the simulator's outlet coefficient k (known exactly here only)
#   linear:  least squares on a window of the last W samples of (pump, level, outflow)
# The soft-sensor part adds the network (its errors are in the record, below).
data_dir = os.path.join(src, "lessons", "13-control", "data")
def load_log(name):
    with open(os.path.join(data_dir, name)) as f:
        rows = [line for line in f if not line.startswith("#")]
    cols = {k: np.array(v) for k, v in zip(rows[0].strip().split(","), zip(*[[float(x) if x else np.nan for x in r.strip().split(",")] for r in rows[1:]]))}
    lpm = 1e-3 / 60.0                               # l/min -> m^3/s
    return {"pump": cols["pump_pct"] / 100, "level": cols["level_cm"] / 100, "outflow": cols["outflow_lpm"] * lpm,
            "drain": cols["drain_lpm"] * lpm}

if not os.path.exists(os.path.join(data_dir, "tank_log_test.csv")):
    print(f"the shipped logs are not in {data_dir}: skipped")
else:
    train, test = load_log("tank_log_train.csv"), load_log("tank_log_test.csv")
    W = 16
    def windows(log):
        X = np.stack([log["pump"], log["level"], log["outflow"]], axis=1)
        return np.stack([X[t - W + 1:t + 1].ravel() for t in range(W - 1, len(X))]), log["drain"][W - 1:]
    Xtr, dtr = windows(train); Xte, dte = windows(test)
    mu, sd = Xtr.mean(0), Xtr.std(0) + 1e-12
    A = np.hstack([(Xtr - mu) / sd, np.ones((len(Xtr), 1))])
    theta = np.linalg.solve(A.T @ A + 1e-9 * np.trace(A.T @ A) * np.eye(A.shape[1]), A.T @ dtr)
    est = {"linear": np.hstack([(Xte - mu) / sd, np.ones((len(Xte), 1))]) @ theta,
           "physics": test["outflow"][W - 1:] - k_out * np.sqrt(np.maximum(test["level"][W - 1:], 0))}
    rmse = lambda e: float(np.sqrt(np.mean((e - dte) ** 2)))
    print_table(["estimator", "RMSE (m^3/s)", "RMSE (l/min)"], [[k, f"{rmse(v):.3g}", f"{rmse(v) * 6e4:.3g}"] for k, v in est.items()])
    n = min(1500, len(dte))
    fig, ax = plt.subplots(figsize=(9, 3.2))
    ax.plot(dte[:n] * 6e4, "k", lw=1.2, label="true drain (the simulator's)")
    for k, v in est.items():
        ax.plot(v[:n] * 6e4, lw=0.7, alpha=0.8, label=k)
    ax.set_xlabel("t (s)"); ax.set_ylabel("drain (l/min)"); ax.grid(alpha=0.3); ax.legend(fontsize=7)
    ax.set_title("soft sensor on tank_log_test.csv: the estimate against the truth", fontsize=9)
    plt.tight_layout(); plt.show()'''

run_cell = '''# The lesson's parts, each with --quick and --json; the time series they write go to out/.
parts = ["soft-sensor", "mpc", "faults", "export"]
records, not_written = {}, []
os.makedirs("lesson13-out", exist_ok=True)
for part in parts:
    path = os.path.abspath(f"lesson13-{part}.json")
    cmd = [*lesson13, "--part", part, "--json", path, "--out-dir", os.path.abspath("lesson13-out")]
    cmd += ["--quick"] if quick else []
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        if "is not written yet" in (r.stdout + r.stderr):   # the skeleton's placeholder part
            not_written.append(part)
            print(f"part {part}: NOT WRITTEN YET (the skeleton's placeholder)")
            continue
        raise RuntimeError(f"lesson13 --part {part} failed (exit status {r.returncode}):\\n{r.stdout[-3000:]}\\n{r.stderr[-3000:]}")
    with open(path) as f:
        rec = json.load(f)
    assert rec["schema"] == SCHEMA, rec.get("schema")
    assert part in rec["parts"], f"the record of --part {part} has no parts.{part}"
    records[part] = rec["parts"][part]
    print(f"part {part}: ok, fields: {', '.join(sorted(records[part].keys()))}")
written = sorted(os.path.relpath(p, "lesson13-out") for p in glob.glob("lesson13-out/**/*", recursive=True) if os.path.isfile(p))
print("files under --out-dir:", ", ".join(written[:40]) or "(none)")

def read_csv(path):
    """A CSV with a header row as {column: np.array} (numbers; text columns kept as text)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(line for line in f if not line.startswith("#")))  # '#' lines: comments
    cols = {}
    for i, name in enumerate(rows[0]):
        vals = [row[i] for row in rows[1:] if len(row) > i]
        try:
            cols[name] = np.array([float(v) if v not in ("", "NA", "NaN") else np.nan for v in vals])
        except ValueError:
            cols[name] = np.array(vals)
    return cols'''

soft_cell = '''# Soft sensor (parts.soft-sensor, lessons/13-control/soft_sensor_part.h): the unmeasured drain
# flow estimated by a network, a linear estimator and the physics formula, against the truth.
ss = records.get("soft-sensor")
if ss is None:
    print("soft-sensor: not run (see above)")
else:
    regimes = ["all", "drain_open", "drain_closed", "level_low", "level_high"]
    rows = []
    for est in ss["estimators"]:
        rows.append([est["name"]] + [fmt(est["regimes"].get(g, {}).get("rmse")) for g in regimes])
    print(f"RMSE of the drain estimate ({ss.get('units', '?')}), test log {ss['logs']['test']}:")
    print_table(["estimator"] + regimes, rows)
    print("winner per regime:", ss.get("winner"))
    fig, ax = plt.subplots(figsize=(8, 3.2))
    w = 0.8 / len(ss["estimators"])
    for i, est in enumerate(ss["estimators"]):
        ax.bar(np.arange(len(regimes)) + i * w, [est["regimes"].get(g, {}).get("rmse", np.nan) for g in regimes], w, label=est["name"])
    ax.set_xticks(np.arange(len(regimes)) + w * (len(ss["estimators"]) - 1) / 2, regimes)
    ax.set_ylabel(f"RMSE ({ss.get('units', '?')})"); ax.legend(fontsize=8); ax.grid(alpha=0.3, axis="y")
    ax.set_title("soft sensor: error by regime" + ("  [QUICK]" if quick else ""), fontsize=9)
    plt.tight_layout(); plt.show()
    # The estimates against the truth over the test log: <out-dir>/soft_sensor_test.csv (time,
    # level_m, outflow_lpm, drain_true_lpm, drain_network_lpm, drain_linear_lpm, drain_physics_lpm).
    logs = sorted(glob.glob("lesson13-out/**/soft_sensor*.csv", recursive=True))
    if logs:
        cols = read_csv(logs[0])
        n = min(1500, len(cols["time"]))
        fig, ax = plt.subplots(figsize=(9, 3.4))
        ax.plot(cols["time"][:n], cols["drain_true_lpm"][:n], "k", lw=1.3, label="true drain")
        for k in ("drain_network_lpm", "drain_linear_lpm", "drain_physics_lpm"):
            if k in cols:
                ax.plot(cols["time"][:n], cols[k][:n], lw=0.7, alpha=0.8, label=k[6:-4])
        ax.set_xlabel("t (s)"); ax.set_ylabel("drain (l/min)"); ax.grid(alpha=0.3); ax.legend(fontsize=7)
        ax.set_title(f"{os.path.basename(logs[0])}: the estimates against the truth" + ("  [QUICK]" if quick else ""), fontsize=9)
        plt.tight_layout(); plt.show()
    else:
        print("the soft-sensor part writes no time series of its estimates under --out-dir: "
              "only the record's errors are plotted")'''

mpc_cell = '''# MPC against PI (parts.mpc, lessons/13-control/mpc_part.h): the comparison table over the
# standard scenarios, the metrics where the MPC loses, and the step logs the part writes
# (<out-dir>/mpc_<scenario>.csv: t, setpoint, drain, dead_time, level_pi, u_pi, level_mpc, u_mpc).
mp = records.get("mpc")
if mp is None:
    print("mpc: not run (see above)")
else:
    model = mp.get("model", {})
    print(f"plant model: {model.get('source')}, hidden {model.get('hidden')}, {model.get('params')} parameters, "
          f"one-step RMSE {fmt(model.get('val_rmse'))} m (persistence {fmt(model.get('persistence_rmse'))} m)")
    print("MPC:", mp.get("mpc"))
    keys = ["iae", "ise", "overshoot_pct", "settling_time", "unsettled", "constraint_violations", "effort_du",
            "compute_ms_median", "compute_ms_max"]
    rows = []
    for sc in mp["scenarios"]:
        for ctrl in ("pi", "mpc"):
            rows.append([sc["name"], ctrl] + [fmt(sc[ctrl].get(k)) for k in keys])
    print_table(["scenario", "controller"] + keys, rows)
    for sc in mp["scenarios"]:
        worse = sc.get("mpc_worse", [])
        print(f"{sc['name']}: the MPC is worse than the PI on " + (", ".join(worse) if worse else "nothing measured here"))
    logs = sorted(glob.glob("lesson13-out/**/mpc_*.csv", recursive=True))
    for path in logs:
        cols = read_csv(path)
        t = cols["t"]
        fig, ax = plt.subplots(2, 1, figsize=(9, 4.8), sharex=True)
        ax[0].plot(t, cols["setpoint"], "k--", lw=1, label="setpoint")
        ax[0].plot(t, cols["level_pi"], lw=0.9, label="PI")
        ax[0].plot(t, cols["level_mpc"], lw=0.9, label="MPC")
        ax[1].plot(t, cols["u_pi"], lw=0.8, label="u PI")
        ax[1].plot(t, cols["u_mpc"], lw=0.8, label="u MPC")
        if np.nanmax(cols["drain"]) > 0:
            ax2 = ax[1].twinx(); ax2.plot(t, cols["drain"], color="gray", lw=0.8, ls=":", label="drain")
            ax2.set_ylabel("drain (m^3/s)", fontsize=8)
        d = cols["dead_time"]
        if np.nanmax(d) != np.nanmin(d):
            ax[0].set_title(f"dead time {int(np.nanmin(d))} -> {int(np.nanmax(d))} steps", fontsize=8)
        ax[0].set_ylabel("true level (m)"); ax[1].set_ylabel("pump command"); ax[1].set_xlabel("t (s)")
        for a_ in ax: a_.legend(fontsize=7, loc="upper left"); a_.grid(alpha=0.3)
        fig.suptitle(os.path.basename(path) + ("  [QUICK]" if quick else ""), fontsize=9)
        plt.tight_layout(); plt.show()
    if not logs:
        raise RuntimeError("the mpc part wrote no mpc_<scenario>.csv under --out-dir (mpc_part.h says it does)")'''

faults_cell = '''# Fault detection (parts.faults, lessons/13-control/faults_part.h): per detector, the threshold
# chosen on fault-free runs, the false alarms per hour on OTHER fault-free runs, and per fault
# kind the faults detected, missed and the detection delay. Residual time series are plotted
# when the part writes them under --out-dir (a CSV named *fault* or *residual*).
fa = records.get("faults")
if fa is None:
    print("faults: not run (see above)")
else:
    print(f"{fa.get('eval_runs')} evaluation run(s) of {fa.get('steps_per_run')} periods, {fa.get('onsets_per_kind')} onsets per "
          f"kind per run, alarm within {fa.get('within')} periods, target {fa.get('target_per_hour')} false alarms/hour")
    rows = []
    for det in fa["detectors"]:
        row = [det["name"], det.get("model", ""), fmt(det.get("threshold")), fmt(det.get("false_alarms_per_hour"))]
        for kind in ("stuck", "drift"):
            f = det["faults"][kind]
            row += [f"{f['detected']}/{f['onsets']}", fmt(f.get("delay_s_median"))]
        rows.append(row)
    print_table(["detector", "model", "threshold", "false alarms/h", "stuck found", "delay s (median)",
                 "drift found", "delay s (median)"], rows)
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
    names = [det["name"] for det in fa["detectors"]]
    for a_, kind in zip(ax, ("stuck", "drift")):
        delays = [det["faults"][kind].get("delay_s_median") for det in fa["detectors"]]
        found = [det["faults"][kind]["detected"] / max(det["faults"][kind]["onsets"], 1) for det in fa["detectors"]]
        x = np.arange(len(names))
        a_.bar(x, [0 if d is None else d for d in delays])
        a_.set_xticks(x, names)
        for i, (d, fr) in enumerate(zip(delays, found)):
            a_.text(i, 0 if d is None else d, f"{100 * fr:.0f}% found", ha="center", va="bottom", fontsize=7)
        a_.set_title(f"{kind} transmitter: median detection delay" + ("  [QUICK]" if quick else ""), fontsize=9)
        a_.set_ylabel("s"); a_.grid(alpha=0.3, axis="y")
    plt.tight_layout(); plt.show()
    logs = sorted(set(glob.glob("lesson13-out/**/*fault*.csv", recursive=True) + glob.glob("lesson13-out/**/*residual*.csv", recursive=True)))
    for path in logs[:4]:
        cols = read_csv(path)
        fig, ax = plt.subplots(figsize=(9, 3))
        for k, v in cols.items():
            if v.dtype.kind == "f" and not k.startswith("t"):
                ax.plot(v, lw=0.7, label=k)
        ax.set_title(os.path.relpath(path, "lesson13-out"), fontsize=9); ax.legend(fontsize=7); ax.grid(alpha=0.3)
        plt.tight_layout(); plt.show()
    if not logs:
        print("the faults part writes no residual time series under --out-dir: the residual plots with the "
              "threshold and the onset are the by-hand ones above")'''

export_cell = '''# Export (parts.export, lessons/13-control/export_part.h): the network as C99, its size, RAM,
# time per step and agreement with the C++ model; the fixed-period run's jitter.
ex = records.get("export")
if ex is None:
    print("export: not run (see above)")
else:
    keys = ["format", "c_bytes", "text_bytes", "rodata_bytes", "ram_bytes", "max_abs_error", "ns_median", "ns_p99", "ns_max"]
    print(f"model: {ex.get('model', {})}\\ncompiler: {ex.get('compiler')} {ex.get('flags')}")
    print_table(keys, [[fmt(f.get(k)) for k in keys] for f in ex.get("formats", [])])
    rt = ex.get("realtime", {})
    if rt:
        print(f"fixed period {rt.get('period_us')} us, {rt.get('ticks')} ticks: lateness median {fmt(rt.get('late_ns_median'))} ns, "
              f"p99 {fmt(rt.get('late_ns_p99'))} ns, max {fmt(rt.get('late_ns_max'))} ns, missed {rt.get('missed')}")
if not_written:
    print("\\nparts not written yet:", ", ".join(not_written))'''

nb = new_notebook()
nb.cells = [
    md('''# Lesson 13: a network in the control loop

The tank of lessons 05-06, now with a network in the loop: as a soft sensor, as the predictor
of a model-predictive controller, as the reference that fault detection compares the
transmitter with, and exported as C for a controller. The first half works by hand on the
linearised tank (numpy only); the second runs the lesson's parts (`lesson13 --part ...
--quick --json`) and plots their records. Under `NNLAB_QUICK=1` (what ctest does) everything is
small: a pipeline check, not a measurement.'''),
    code(setup),
    md('''## The plant, linearised

Around an operating level the tank is first order with a dead time: y(t+1) = a y + b u(t-d) + c.
The time constant and the gain change with the level, because the outlet passes k sqrt(level):
a controller tuned at 0.5 m sees a different plant at 0.2 m.'''),
    code(linearise),
    md('''## PI against MPC, by hand

The PI of lessons 05-06 (kp = 1, ki = 0.012, anti-windup), and an MPC whose optimiser is
exercise 29's: roll the model out over the horizon, take the cost's gradient backwards through
the rollout, step, project onto the pump's range and rate limit; apply the first move, repeat
at the next sample. Both on the linear plant, the same setpoint step, neither told of it in
advance; the MPC's model IS the plant here (a perfect model: the best case, which the learned
model of the mpc part does not get). The metrics are the
lesson's (IAE, ISE, overshoot, settling time into a 5% band, rate violations, travel).
`scripts/control_peer.py` checks the C++ versions of both against python-control and CasADi.'''),
    code(pi_mpc),
    md('''## Residuals and a threshold, by hand

The model predicts the next measurement; a healthy transmitter's residual is noise. The
threshold is chosen on fault-free data only, then applied to a stuck and a drifting transmitter
(exercise 30 does it with a persistence count; the faults part with the learned model). Here the
pump follows a schedule (open loop) and the model is exact: the easy case. In the faults part the
PI closes the loop on the faulty reading and the model is learned, and a drift is much harder
to see: the PI keeps the SEEN level at the setpoint.'''),
    code(residuals),
    md('''## A soft sensor by hand

The drain valve is the disturbance nothing measures. From the logs the lesson ships (the CSV a
real plant's historian would give, read here with plain Python), two estimators a control
engineer would try first: the physics formula and a linear regression on a window of the
measured signals. The network of the soft-sensor part is measured against both.'''),
    code(soft_by_hand),
    md('''## Run the parts

`lesson13 --part soft-sensor|mpc|faults|export --json ...`: each record is checked for its
schema. Without `NNLAB_QUICK=1` these are the full parts (minutes).'''),
    code(run_cell),
    md('''## Soft sensor: the drain flow nobody measures'''),
    code(soft_cell),
    md('''## MPC against PI: the comparison table'''),
    code(mpc_cell),
    md('''## Fault detection'''),
    code(faults_cell),
    md('''## Export: the controller's C code'''),
    code(export_cell),
    md('''## Questions

1. In the linearisation cell, by how much does the time constant change between 0.3 m and
   0.8 m? Which way should the PI's gain move at low levels, and why did lessons 05-06 not?
2. Set the MPC's `r_du` to 0 and then to 1: what happens to the overshoot and to the pump's
   travel? Which one breaks the rate limit more often before the rate pass catches it?
3. Shorten the MPC's horizon H below the dead time (20): what can the controller still see,
   and what does the step response do?
4. Why does the one-step residual never see the drift, while the k-step one does? Try K = 10
   and K = 150: what happens to the threshold and to the detection delay?
5. Lower the thresholds to the 99% quantile: how much sooner are the faults detected, and how
   many false alarms per hour does the fault-free run give now?'''),
]
for i, cell in enumerate(nb.cells):
    cell["id"] = f"lesson13-{i:02d}"  # stable ids: regenerating changes nothing unless a cell did
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "13-control.ipynb"))
