#!/usr/bin/env python3
"""scripts/control_peer.py: lesson 13's PI loop and MPC checked against real control tools.

    python3 scripts/control_peer.py RECORD.json [--no-do-mpc] [--quiet]
    python3 scripts/control_peer.py --make-reference RECORD.json   (a record from this file's
                                    own plain-Python reference; development and self-test)

RECORD.json is what `nnlab lesson13 --part mpc --linear-check RECORD.json` writes: the tank
linearised at an operating point, y(t+1) = a y(t) + b u(t-d) + c, the PI loop's step response
on that linear plant and its metrics, and one MPC problem on it with the C++ solver's moves
(the format: /work/notes/l13-shared.md, lessons/13-control/mpc_part.h). This script:

  (a) the PI loop, two ways.
      1. python-control: the plant as the discrete transfer function
           P(z) = b / (z^d (z - a))            (the dead time as d poles at z = 0)
         the PI law of lessons/common/plant.h (I(t) = I(t-1) + ki dt e(t), u = kp e + I(t)) as
           C(z) = kp + ki dt z / (z - 1)
         closed (feedback(P C, 1) for y, feedback(C, P) for u) and driven by the setpoint
         step with control.forced_response, in deviations from the rest point. Linear, so it
         holds only while the command stays inside [u_min, u_max]: when the C++ response
         saturates, the comparison stops at the first saturated sample (and says so).
      2. the same loop as a plain recursion with the clamp and anti-windup of PiController
         (the nonlinear loop, every sample).
      y and u are compared with the record's, and the metrics (IAE, ISE, overshoot, settling
      time, with lesson13::loop_metrics's definitions, lessons/13-control/scenario.h) are
      recomputed from python-control's y and compared with the record's; control.step_info
      (whose overshoot and settling time are those definitions for one step from rest, in
      deviations, with yfinal = the step and SettlingTimeThreshold = the band) gives them a
      third time, on python-control's closed loop and on the record's y.
  (b) the MPC problem (horizon H, weights q and r_du, bounds, rate limit, past inputs,
      reference): moves m[j] = u(t+j), j < H; y(t+k+1) = a y(t+k) + b u(t+k-d) + c;
        J = q sum_{k=1..H} (ref[k-1] - y(t+k))^2 + r_du sum_{j<H} (m[j] - m[j-1])^2,
        m[-1] = u(t-1);  u_min <= m[j] <= u_max;  |m[j] - m[j-1]| <= du_max
      solved with CasADi twice (qpOASES, as the QP it is, and IPOPT, as an NLP), and with
      do-mpc (its own model/MPC formulation on CasADi and IPOPT: the dead time as a chain of
      states, the rate limit as nonlinear constraints on a "last command" state) when it is
      installed. The record's moves must match the QP's and their cost must not exceed the
      optimum by more than the tolerance (below).

Tolerances, and why:
  - the record's numbers are written with 6 significant digits (kernels::harness::json_number),
    a relative error up to 5e-6 per number; signals are compared with
    |ours - theirs| <= 1e-5 * max(1, max|signal|) (twice that rounding, plus the recursion's
    double rounding, ~1e-13, well inside).
  - metrics: IAE, ISE relative 1e-4 (a sum of up to a few thousand rounded terms; the
    rounding errors do not all point the same way, but we allow them to); overshoot
    absolute 0.01 percentage points; settling time within one sample (a sample sitting within
    rounding of the band's edge can move across it).
  - MPC: the QP is strictly convex (r_du > 0 makes the Hessian positive definite), so its
    optimum m* is unique and the moves are comparable at all. A solver that stops early
    (the C++ one iterates) is judged by its cost and its distance from m*: cost gap
    (J - J*) <= 1e-4 * max(J*, 1e-12) + the rounding of the printed moves, and
    max_j |m[j] - m*[j]| <= 1e-3 (0.1% of the pump's range). With the Hessian's smallest
    eigenvalue mu, strong convexity bounds the distance by sqrt(2 (J - J*) / mu): printed,
    so a reader sees how the two tolerances relate on this problem. The three peer solvers
    must agree with each other to 1e-6 (they solve to 1e-8-ish tolerances).
Prints a table; exits 1 on any disagreement, 2 on a malformed record.
SKIP (exit 0, a line starting "SKIP:") when control or casadi is not installed (the line
says how to install them: scripts/requirements-control.txt, scripts/setup.sh).
"""

import argparse
import json
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
INSTALL_HINT = ("bash scripts/setup.sh   (or, from the repository root: /usr/bin/python3 -m venv "
                "--system-site-packages .venv && .venv/bin/pip install --require-hashes -r "
                "scripts/requirements-control.txt)")

SIGNAL_RTOL = 1e-5
METRIC_RTOL = 1e-4
OVERSHOOT_ATOL = 0.01  # percentage points
MOVE_ATOL = 1e-3
COST_RTOL = 1e-4
PEER_ATOL = 1e-6


def import_peers(want_do_mpc=True):
    """(np, control, casadi, do_mpc or None); re-executes in <repo>/.venv when this Python lacks
    them (the pinned copies live there); None when they are missing everywhere."""
    try:
        import numpy as np
        import control
        import casadi
    except ImportError:
        if (os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(REPO, ".venv"))
                and not os.environ.get("NNLAB_CONTROL_PEER_REEXEC")):
            os.environ["NNLAB_CONTROL_PEER_REEXEC"] = "1"
            os.execv(VENV_PY, [VENV_PY, os.path.abspath(__file__)] + sys.argv[1:])
        return None
    do_mpc = None
    if want_do_mpc:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its optional ONNX / OPC UA features are not installed
            try:
                import do_mpc
            except ImportError:
                do_mpc = None
    try:
        casadi.GlobalOptions.setNumpyMode(-1)  # numpy on casadi values: the legacy behaviour, silently
    except AttributeError:
        pass
    return np, control, casadi, do_mpc


# ---- the record --------------------------------------------------------------------------------

def need(obj, path, keys):
    for k in keys:
        if k not in obj:
            raise ValueError(f"the record has no {path}.{k}")


def check_record(rec):
    for part in ("plant", "pi", "pi_response", "pi_metrics", "mpc"):
        if part not in rec:
            raise ValueError(f"the record has no '{part}' object")
    need(rec["plant"], "plant", ["a", "b", "c", "dead_time", "dt", "y_op", "u_op"])
    need(rec["pi"], "pi", ["kp", "ki", "u_min", "u_max", "setpoint_from", "setpoint_to", "step_at", "steps"])
    need(rec["pi_response"], "pi_response", ["y", "u"])
    need(rec["pi_metrics"], "pi_metrics", ["iae", "ise", "overshoot", "settling_time", "settling_band"])
    need(rec["mpc"], "mpc", ["horizon", "q", "r_du", "u_min", "u_max", "du_max", "y0", "u_past", "ref", "moves", "cost"])
    steps = int(rec["pi"]["steps"])
    for k in ("y", "u"):
        if len(rec["pi_response"][k]) != steps:
            raise ValueError(f"pi_response.{k} has {len(rec['pi_response'][k])} values, pi.steps is {steps}")
    m = rec["mpc"]
    H = int(m["horizon"])
    if len(m["ref"]) != H or len(m["moves"]) != H:
        raise ValueError(f"mpc.ref and mpc.moves must have horizon = {H} values, have {len(m['ref'])} and {len(m['moves'])}")
    d = int(rec["plant"]["dead_time"])
    if len(m["u_past"]) < max(d, 1):
        raise ValueError(f"mpc.u_past has {len(m['u_past'])} values; the dead time {d} needs u(t-d) .. u(t-1)")


# ---- the PI loop ---------------------------------------------------------------------------------

def rest_command(plant, level):
    """The command that holds `level` on the linear plant: level = a level + b u + c."""
    return ((1.0 - plant["a"]) * level - plant["c"]) / plant["b"]


def setpoints(pi):
    return [pi["setpoint_from"] if t < pi["step_at"] else pi["setpoint_to"] for t in range(int(pi["steps"]))]


def pi_loop_recursion(plant, pi):
    """The loop as lessons::PiController and a pipe of d commands run it (clamp, anti-windup).
    Row t: y(t) the level at time t, u(t) the command computed from it. Also returns the first t
    at which the loop left the linear law (the anti-windup held the integral, or the clamp cut
    the command), or None: python-control's linear loop holds only before it."""
    a, b, c, d, dt = plant["a"], plant["b"], plant["c"], int(plant["dead_time"]), plant["dt"]
    y = pi["setpoint_from"]
    u_rest = rest_command(plant, y)
    integral = u_rest
    pipe = [u_rest] * d  # oldest first: pipe[0] = u(t-d)
    ys, us, first_nonlinear = [], [], None
    for r in setpoints(pi):
        e = r - y
        integral_next = integral + pi["ki"] * dt * e
        u_raw = pi["kp"] * e + integral_next
        held = (u_raw > pi["u_max"] and e > 0) or (u_raw < pi["u_min"] and e < 0)
        if not held:
            integral = integral_next
        u = min(max(pi["kp"] * e + integral, pi["u_min"]), pi["u_max"])
        if first_nonlinear is None and (held or u != pi["kp"] * e + integral):
            first_nonlinear = len(ys)
        ys.append(y)
        us.append(u)
        if d > 0:
            pipe.append(u)
            arriving = pipe.pop(0)
        else:
            arriving = u
        y = a * y + b * arriving + c
    return ys, us, first_nonlinear


def pi_transfer_functions(control, plant, pi):
    """P(z) = b / (z^d (z - a)), C(z) = kp + ki dt z / (z - 1): the closed loops r -> y, r -> u."""
    a, b, d, dt = plant["a"], plant["b"], int(plant["dead_time"]), plant["dt"]
    den_p = [1.0, -a] + [0.0] * d  # z^d (z - a)
    P = control.tf([b], den_p, dt)
    kp, kidt = pi["kp"], pi["ki"] * dt
    C = control.tf([kp + kidt, -kp], [1.0, -1.0], dt)  # (kp (z - 1) + ki dt z) / (z - 1)
    T_y = control.feedback(P * C, 1)
    T_u = control.feedback(C, P)
    return P, C, T_y, T_u


def pi_loop_control(np, control, plant, pi):
    """python-control's linear closed loop: y and u in absolute units (rest point + deviation)."""
    _, _, T_y, T_u = pi_transfer_functions(control, plant, pi)
    steps = int(pi["steps"])
    t = np.arange(steps) * plant["dt"]
    delta = pi["setpoint_to"] - pi["setpoint_from"]
    r_dev = np.where(np.arange(steps) >= pi["step_at"], delta, 0.0)
    y_dev = control.forced_response(T_y, t, r_dev).outputs
    u_dev = control.forced_response(T_u, t, r_dev).outputs
    return pi["setpoint_from"] + np.asarray(y_dev), rest_command(plant, pi["setpoint_from"]) + np.asarray(u_dev)


def loop_metrics(r, y, dt, band):
    """lesson13::loop_metrics's definitions (scenario.h) for IAE, ISE, overshoot (% of the step)
    and settling time (the largest over settled steps; NaN when none settled)."""
    iae = sum(abs(ri - yi) for ri, yi in zip(r, y)) * dt
    ise = sum((ri - yi) ** 2 for ri, yi in zip(r, y)) * dt
    changes = [t for t in range(1, len(r)) if r[t] != r[t - 1]]
    overshoot, settling, unsettled = 0.0, float("nan"), 0
    for i, t0 in enumerate(changes):
        t1 = changes[i + 1] if i + 1 < len(changes) else len(r)
        delta = r[t0] - r[t0 - 1]
        sign = 1.0 if delta > 0 else -1.0
        seg = range(t0, t1)
        overshoot = max(overshoot, 100.0 * max(0.0, max((y[t] - r[t]) * sign for t in seg)) / abs(delta))
        inside = [abs(y[t] - r[t]) <= band * abs(delta) for t in seg]
        if not inside[-1]:
            unsettled += 1
            continue
        s = len(inside)
        while s > 0 and inside[s - 1]:
            s -= 1
        ts = dt * s
        settling = ts if math.isnan(settling) else max(settling, ts)
    return {"iae": iae, "ise": ise, "overshoot": overshoot, "settling_time": settling, "unsettled": unsettled}


# ---- the MPC problem -----------------------------------------------------------------------------

def mpc_problem(plant, mpc):
    """The problem's numbers, with the past split into the pipe u(t-d) .. u(t-1) and u(t-1)."""
    d = int(plant["dead_time"])
    past = [float(v) for v in mpc["u_past"]]
    return {
        "a": plant["a"], "b": plant["b"], "c": plant["c"], "d": d, "H": int(mpc["horizon"]),
        "q": mpc["q"], "r_du": mpc["r_du"], "u_min": mpc["u_min"], "u_max": mpc["u_max"],
        "du_max": mpc["du_max"], "y0": mpc["y0"], "pipe": past[len(past) - d:] if d > 0 else [],
        "u_prev": past[-1], "ref": [float(v) for v in mpc["ref"]],
    }


def mpc_rollout(p, m):
    """y(t+1) .. y(t+H) for moves m (numbers or CasADi symbols)."""
    y, out = p["y0"], []
    for k in range(p["H"]):
        j = k - p["d"]
        u = p["pipe"][k] if j < 0 else m[j]
        y = p["a"] * y + p["b"] * u + p["c"]
        out.append(y)
    return out


def mpc_cost(p, m):
    J = 0
    for rk, yk in zip(p["ref"], mpc_rollout(p, m)):
        J = J + p["q"] * (rk - yk) ** 2
    for j in range(p["H"]):
        du = m[j] - (p["u_prev"] if j == 0 else m[j - 1])
        J = J + p["r_du"] * du ** 2
    return J


def quiet(fn, *args, **kwargs):
    """fn(...) with the process's stdout sent to /dev/null: qpOASES prints its licence banner
    from C++ on every instance, into the table."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        return fn(*args, **kwargs)
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def mpc_casadi(np, ca, p, solver):
    """CasADi on the same problem: 'qpoases' (qpsol, the QP) or 'ipopt' (nlpsol)."""
    H = p["H"]
    m = ca.SX.sym("m", H)
    J = mpc_cost(p, [m[j] for j in range(H)])
    du = [m[0] - p["u_prev"]] + [m[j] - m[j - 1] for j in range(1, H)]
    g = ca.vertcat(*du)
    lbx, ubx = [p["u_min"]] * H, [p["u_max"]] * H
    lbg, ubg = [-p["du_max"]] * H, [p["du_max"]] * H
    x0 = [min(max(p["u_prev"], p["u_min"]), p["u_max"])] * H
    if solver == "qpoases":
        S = quiet(ca.qpsol, "S", "qpoases", {"x": m, "f": J, "g": g},
                     {"printLevel": "none", "error_on_fail": False, "terminationTolerance": 1e-12})
    else:
        S = ca.nlpsol("S", "ipopt", {"x": m, "f": J, "g": g},
                      {"ipopt.print_level": 0, "print_time": False, "ipopt.tol": 1e-12,
                       "ipopt.sb": "yes", "error_on_fail": False})
    sol = quiet(S, x0=x0, lbx=lbx, ubx=ubx, lbg=lbg, ubg=ubg)
    moves = np.array(sol["x"]).reshape(-1)
    ok = bool(S.stats().get("success", False))
    # The Hessian (constant: the cost is quadratic) and its smallest eigenvalue, mu.
    Hs = ca.Function("h", [m], [ca.hessian(J, m)[0]])(np.zeros(H))
    eig = np.linalg.eigvalsh(np.array(Hs))
    return moves, float(mpc_cost(p, list(moves))), ok, (float(eig.min()), float(eig.max()))


def mpc_do_mpc(np, do_mpc, p):
    """do-mpc's own formulation: states y, the pipe (d states, oldest first) and the last command;
    lterm on the NEXT level (so the stages k = 0 .. H-1 score y(t+1) .. y(t+H), as J does),
    rterm r_du on the move, the rate limit as nonlinear constraints, ref as a time-varying
    parameter."""
    d, H = p["d"], p["H"]
    model = do_mpc.model.Model("discrete")
    y = model.set_variable("_x", "y")
    pipe = [model.set_variable("_x", f"p{i}") for i in range(d)]
    u_last = model.set_variable("_x", "u_last")
    u = model.set_variable("_u", "u")
    ref = model.set_variable("_tvp", "ref")
    arriving = pipe[0] if d > 0 else u
    y_next = p["a"] * y + p["b"] * arriving + p["c"]
    model.set_rhs("y", y_next)
    for i in range(d):
        model.set_rhs(f"p{i}", pipe[i + 1] if i + 1 < d else u)
    model.set_rhs("u_last", u)
    model.setup()

    mpc = do_mpc.controller.MPC(model)
    mpc.settings.n_horizon = H
    mpc.settings.t_step = 1.0
    mpc.settings.n_robust = 0
    mpc.settings.store_full_solution = False
    mpc.settings.nlpsol_opts = {"ipopt.print_level": 0, "print_time": False, "ipopt.tol": 1e-12, "ipopt.sb": "yes"}
    # The expressions again, from the set-up model's own symbols (do-mpc wraps the variables).
    x = model.x
    arriving = x["p0"] if d > 0 else model.u["u"]
    y_next = p["a"] * x["y"] + p["b"] * arriving + p["c"]
    u, u_last, ref = model.u["u"], x["u_last"], model.tvp["ref"]
    mpc.set_objective(lterm=p["q"] * (ref - y_next) ** 2, mterm=x["y"] * 0)
    mpc.set_rterm(u=p["r_du"])
    mpc.bounds["lower", "_u", "u"] = p["u_min"]
    mpc.bounds["upper", "_u", "u"] = p["u_max"]
    mpc.set_nl_cons("du_up", u - u_last, ub=p["du_max"])
    mpc.set_nl_cons("du_down", u_last - u, ub=p["du_max"])
    tvp = mpc.get_tvp_template()

    def tvp_fun(_t):
        for k in range(H + 1):
            tvp["_tvp", k, "ref"] = p["ref"][min(k, H - 1)]  # stage k scores y(t+k+1) against ref[k]
        return tvp

    mpc.set_tvp_fun(tvp_fun)
    mpc.setup()
    x0 = np.array([p["y0"]] + list(p["pipe"]) + [p["u_prev"]]).reshape(-1, 1)
    mpc.x0 = x0
    mpc.u0 = np.array([[p["u_prev"]]])
    mpc.set_initial_guess()
    quiet(mpc.make_step, x0)
    moves = np.array([float(mpc.opt_x_num["_u", j, 0][0]) for j in range(H)])
    ok = bool(mpc.solver_stats.get("success", False))
    return moves, float(mpc_cost(p, list(moves))), ok


# ---- the reference record (development, self-test) ------------------------------------------------

def make_reference(path, setpoint_to=0.55):
    """A record from this file's own Python: the tank of lessons/common/plant.h (TankConfig's
    defaults) linearised at 0.5 m, its PI loop by pi_loop_recursion, the MPC solved with scipy's
    SLSQP (not CasADi, so the check compares two different solvers)."""
    import numpy as np
    from scipy.optimize import minimize
    dt, area, pump_gain, outflow, dead = 1.0, 1.0, 0.0375, 0.03, 20
    y_op = 0.5
    u_op = outflow * math.sqrt(y_op) / pump_gain
    a = 1.0 - dt / area * outflow / (2.0 * math.sqrt(y_op))  # d/dy of y + dt/A (g u - k sqrt(y))
    b = dt / area * pump_gain
    c = y_op - a * y_op - b * u_op  # y_op is a fixed point
    plant = {"a": a, "b": b, "c": c, "dead_time": dead, "dt": dt, "y_op": y_op, "u_op": u_op}
    pi = {"kp": 1.0, "ki": 0.012, "u_min": 0.0, "u_max": 1.0, "setpoint_from": 0.5, "setpoint_to": setpoint_to,
          "step_at": 10, "steps": 400}
    ys, us, _ = pi_loop_recursion(plant, pi)
    met = loop_metrics(setpoints(pi), ys, dt, 0.05)
    H = 30
    u_past = [u_op + 0.01 * math.sin(0.3 * i) for i in range(dead + 1)]
    mpc = {"horizon": H, "q": 1.0, "r_du": 0.05, "u_min": 0.0, "u_max": 1.0, "du_max": 0.05, "y0": 0.48,
           "u_past": u_past, "ref": [0.55] * H}
    p = mpc_problem(plant, mpc)
    cons = [{"type": "ineq", "fun": (lambda m, j=j: p["du_max"] - (m[j] - (p["u_prev"] if j == 0 else m[j - 1])))}
            for j in range(H)]
    cons += [{"type": "ineq", "fun": (lambda m, j=j: p["du_max"] + (m[j] - (p["u_prev"] if j == 0 else m[j - 1])))}
             for j in range(H)]
    res = minimize(lambda m: mpc_cost(p, list(m)), np.full(H, p["u_prev"]), method="SLSQP",
                   bounds=[(p["u_min"], p["u_max"])] * H, constraints=cons, options={"ftol": 1e-14, "maxiter": 500})
    mpc.update({"moves": [float(v) for v in res.x], "cost": float(res.fun), "solver": "scipy-slsqp",
                "iterations": int(res.nit)})

    def r6(v):  # the record's 6 significant digits
        return float(f"{v:.6g}")
    rec = {"plant": plant, "pi": pi, "pi_response": {"y": [r6(v) for v in ys], "u": [r6(v) for v in us]},
           "pi_metrics": {"iae": r6(met["iae"]), "ise": r6(met["ise"]), "overshoot": r6(met["overshoot"]),
                          "settling_time": met["settling_time"], "settling_band": 0.05},
           "mpc": {k: ([r6(x) for x in v] if isinstance(v, list) else v) for k, v in mpc.items()}}
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
    print(f"wrote {path} (Python reference: PI recursion, MPC by scipy SLSQP in {res.nit} iterations)")


# ---- the comparison ----------------------------------------------------------------------------------

class Table:
    def __init__(self):
        self.rows, self.failed = [], 0

    def add(self, what, ours, theirs, diff, tol, ok, note=""):
        self.rows.append((what, ours, theirs, diff, tol, "ok" if ok else "DIFFERS", note))
        if not ok:
            self.failed += 1

    def print(self):
        head = ("check", "peer", "record (C++)", "difference", "tolerance", "", "")
        fmt = "{:<62} {:>11} {:>12} {:>11} {:>11}  {:<7} {}"
        print(fmt.format(*head))
        for r in self.rows:
            print(fmt.format(*[f"{v:.6g}" if isinstance(v, float) else str(v) for v in r]))


def compare_signal(np, table, name, peer, rec, upto, note=""):
    peer, rec = np.asarray(peer[:upto], dtype=float), np.asarray(rec[:upto], dtype=float)
    diff = float(np.max(np.abs(peer - rec))) if upto > 0 else 0.0
    tol = SIGNAL_RTOL * max(1.0, float(np.max(np.abs(rec))) if upto > 0 else 1.0)
    i = int(np.argmax(np.abs(peer - rec))) if upto > 0 else 0
    table.add(f"{name} (max |diff| of {upto} samples)", float(peer[i]) if upto else float("nan"),
              float(rec[i]) if upto else float("nan"), diff, tol, diff <= tol, note or f"worst at t = {i}")


def num(v):
    """A record's number; null (what the C++ writes for NaN, e.g. a step that never settled) is NaN."""
    return float("nan") if v is None else float(v)


def close_metric(ours, theirs, rtol=0.0, atol=0.0):
    if math.isnan(ours) or math.isnan(theirs):
        return math.isnan(ours) and math.isnan(theirs)
    return abs(ours - theirs) <= atol + rtol * abs(theirs)


def run_checks(rec, peers, use_do_mpc):
    np, control, ca, do_mpc = peers
    plant, pi, resp, met = rec["plant"], rec["pi"], rec["pi_response"], rec["pi_metrics"]
    table = Table()
    steps, dt, band = int(pi["steps"]), plant["dt"], met["settling_band"]

    # (a) the PI loop
    y_cl, u_cl = pi_loop_control(np, control, plant, pi)
    y_rec, u_rec = resp["y"], resp["u"]
    # Where the loop stops being linear: the recursion (checked against the record just below)
    # knows when the anti-windup held the integral or the clamp cut the command. (Not the
    # record's u reaching a bound: the anti-windup acts while u_raw = kp e + I' is past the bound,
    # and the command kp e + I may stay just inside it.)
    y_rc, u_rc, first_nl = pi_loop_recursion(plant, pi)
    sat = first_nl is not None
    linear_upto = first_nl if sat else steps
    note = (f"anti-windup/clamp from t = {first_nl}: linear part only" if sat
            else "linear throughout: every sample")
    compare_signal(np, table, "PI y, python-control closed loop", y_cl, y_rec, linear_upto, note)
    compare_signal(np, table, "PI u, python-control closed loop", u_cl, u_rec, linear_upto, note)
    compare_signal(np, table, "PI y, recursion with clamp/anti-windup", y_rc, y_rec, steps)
    compare_signal(np, table, "PI u, recursion with clamp/anti-windup", u_rc, u_rec, steps)

    r = setpoints(pi)
    ours = loop_metrics(r, list(y_cl) if not sat else y_rc, dt, band)
    src = "python-control y" if not sat else "recursion y (not linear)"
    for k, rtol, atol in (("iae", METRIC_RTOL, 1e-12), ("ise", METRIC_RTOL, 1e-15), ("overshoot", 0.0, OVERSHOOT_ATOL),
                          ("settling_time", 0.0, dt * 1.0001)):
        theirs = num(met[k])
        ok = close_metric(ours[k], theirs, rtol, atol)
        table.add(f"PI {k} (from {src})", float(ours[k]), theirs, abs(ours[k] - theirs),
                  f"{rtol:g} rel" if rtol else f"{atol:.4g}", ok)

    # control.step_info: one step from rest, in deviations (yfinal = the step, threshold = band)
    delta = pi["setpoint_to"] - pi["setpoint_from"]
    k0 = int(pi["step_at"])
    tt = np.arange(steps - k0) * dt
    os_rec, st_rec = num(met["overshoot"]), num(met["settling_time"])
    infos = []
    if not sat:
        _, _, T_y, _ = pi_transfer_functions(control, plant, pi)
        infos.append(("closed-loop TF", control.step_info(T_y, tt, SettlingTimeThreshold=band)))
    y_dev = np.asarray(y_rec[k0:], dtype=float) - pi["setpoint_from"]
    infos.append(("record's y", control.step_info(y_dev, tt, final_output=delta, SettlingTimeThreshold=band)))
    for src_name, info in infos:
        ov, st = float(info["Overshoot"]), float(info["SettlingTime"])
        table.add(f"PI overshoot %, step_info({src_name})", ov, os_rec, abs(ov - os_rec), OVERSHOOT_ATOL,
                  close_metric(ov, os_rec, 0.0, OVERSHOOT_ATOL))
        table.add(f"PI settling time, step_info({src_name})", st, st_rec, abs(st - st_rec), dt,
                  close_metric(st, st_rec, 0.0, dt * 1.0001))

    # (b) the MPC
    p = mpc_problem(plant, rec["mpc"])
    m_rec = np.asarray(rec["mpc"]["moves"], dtype=float)
    J_rec_own = float(mpc_cost(p, list(m_rec)))
    m_qp, J_qp, ok_qp, (mu, lam_max) = mpc_casadi(np, ca, p, "qpoases")
    m_ip, J_ip, ok_ip, _ = mpc_casadi(np, ca, p, "ipopt")
    table.add("MPC qpOASES solved", "yes" if ok_qp else "no", "", "", "", ok_qp)
    table.add("MPC IPOPT solved", "yes" if ok_ip else "no", "", "", "", ok_ip)
    d_ip = float(np.max(np.abs(m_ip - m_qp)))
    table.add("MPC moves, IPOPT vs qpOASES (max |diff|)", float(J_ip), float(J_qp), d_ip, PEER_ATOL, d_ip <= PEER_ATOL,
              "cost: IPOPT's, qpOASES's")
    if use_do_mpc and do_mpc is not None:
        m_dm, J_dm, ok_dm = mpc_do_mpc(np, do_mpc, p)
        d_dm = float(np.max(np.abs(m_dm - m_qp)))
        table.add("MPC moves, do-mpc vs qpOASES (max |diff|)", float(J_dm), float(J_qp), d_dm, PEER_ATOL,
                  ok_dm and d_dm <= PEER_ATOL, "cost: do-mpc's, qpOASES's")
    elif use_do_mpc:
        table.add("MPC do-mpc", "not installed", "", "", "", True, "second opinion skipped")
    d_rec = float(np.max(np.abs(m_rec - m_qp)))
    j = int(np.argmax(np.abs(m_rec - m_qp)))
    table.add("MPC moves, record vs qpOASES (max |diff|)", float(m_qp[j]), float(m_rec[j]), d_rec, MOVE_ATOL,
              d_rec <= MOVE_ATOL, f"worst move j = {j}")
    # The record's moves are printed with 6 significant digits: |dm_j| <= 5e-6 |m_j|. The cost is
    # quadratic, so that rounding moves it by at most |g . dm| + dm' Hess dm / 2 (g its gradient
    # at the record's moves, exact by central differences on a quadratic).
    dm = 5e-6 * np.abs(m_rec)
    grad = np.zeros_like(m_rec)
    for jj in range(len(m_rec)):
        e = np.zeros_like(m_rec)
        e[jj] = 1e-4
        grad[jj] = (float(mpc_cost(p, list(m_rec + e))) - float(mpc_cost(p, list(m_rec - e)))) / 2e-4
    round_J = float(np.dot(np.abs(grad), dm)) + 0.5 * lam_max * float(np.dot(dm, dm))
    gap = J_rec_own - J_qp
    tol_gap = COST_RTOL * max(J_qp, 1e-12) + round_J
    table.add("MPC cost of the record's moves - optimum", J_rec_own, J_qp, gap, tol_gap, gap <= tol_gap,
              f"distance bound sqrt(2 gap / mu) = {math.sqrt(2 * max(gap, 0) / mu):.3g}, mu = {mu:.3g}")
    J_said = float(rec["mpc"]["cost"])
    ok = abs(J_said - J_rec_own) <= 1e-5 * max(1.0, abs(J_rec_own)) + round_J
    table.add("MPC cost the record states vs its moves' cost", J_rec_own, J_said, abs(J_said - J_rec_own),
              1e-5 * max(1.0, abs(J_rec_own)) + round_J, ok, "the record's cost is this J")
    viol = sum(1 for v in m_rec if v < p["u_min"] - 1e-9 or v > p["u_max"] + 1e-9)
    prev = p["u_prev"]
    for v in m_rec:
        viol += 1 if abs(v - prev) > p["du_max"] + 1e-5 else 0
        prev = v
    table.add("MPC record's moves: bound/rate violations", float(viol), 0.0, float(viol), 0, viol == 0,
              "rate: 1e-5 for the printed digits")
    m = rec["mpc"]
    solver = f"{m.get('solver', '?')} ({m.get('iterations', '?')} iterations"
    if "converged" in m:
        solver += f", {'converged' if m['converged'] else 'NOT converged'}, last step {m.get('last_step', '?')}"
    return table, {"solver": solver + ")", "saturated": bool(sat)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("record", help="the JSON of `nnlab lesson13 --part mpc --linear-check FILE`")
    ap.add_argument("--make-reference", action="store_true",
                    help="write RECORD from this file's own Python reference instead of checking it")
    ap.add_argument("--reference-step", type=float, default=0.55, metavar="LEVEL",
                    help="with --make-reference: the PI step goes 0.5 m -> LEVEL (0.9: the pump saturates)")
    ap.add_argument("--no-do-mpc", action="store_true", help="leave do-mpc's second opinion out")
    args = ap.parse_args()

    peers = import_peers(want_do_mpc=not args.no_do_mpc)
    if peers is None:
        print("SKIP: python-control and CasADi are not installed; install them with:\n  " + INSTALL_HINT)
        return 0
    if args.make_reference:
        make_reference(args.record, args.reference_step)
        return 0
    try:
        with open(args.record) as f:
            rec = json.load(f)
        check_record(rec)
    except (OSError, ValueError) as e:
        print(f"control_peer: {args.record}: {e}", file=sys.stderr)
        return 2
    np, control, ca, do_mpc = peers
    table, info = run_checks(rec, peers, not args.no_do_mpc)
    print(f"control_peer: {args.record}: python-control {control.__version__}, CasADi {ca.__version__}"
          + (f", do-mpc {do_mpc.__version__}" if do_mpc is not None else "")
          + f"; the record's MPC solver: {info['solver']}")
    table.print()
    if table.failed:
        print(f"control_peer: {table.failed} check(s) DIFFER")
        return 1
    print(f"control_peer: all {len(table.rows)} checks agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
