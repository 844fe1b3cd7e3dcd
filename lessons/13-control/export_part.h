// Lesson 13, part export: the trained plant model as a controller's C code, checked and measured.
//
// The lesson's plant model (plant_model.h: the NARX network the MPC predicts with and the fault
// detector's residuals come from) is trained on identification data (seed --seed) and exported
// through export_c.h's spec_from_plant_model; then for each weight format (fp32, int8 with
// per-row scales, lesson 10's format):
//   - generated as ONE C99 file (export_c.h: generate_c) and compiled by a plain C compiler
//     with -std=c99 -Wall -Wextra -Werror -pedantic (the compiler is found at run time);
//   - run by its C driver over a plant run it was not trained on (--export-steps periods) and
//     compared at every step with the C++ model (nn::Mlp; for int8 the same int8 weights
//     dequantised) to kExportAtol + kExportRtol |y| (export_c.h says why that tolerance);
//   - its size: .text / .rodata / .data / .bss of the object compiled alone (-O2, `size -A`),
//     its RAM: sizeof the state struct (the C compiler's, through the driver) + step()'s stack
//     frame (-fstack-usage);
//   - its time per step: every step of --export-bench-repeats passes over the inputs timed with
//     clock_gettime(CLOCK_MONOTONIC) and the TSC (rdtsc: reference cycles at the TSC's rate, not
//     core cycles), median / p99 / max; the timer's own cost is reported beside it, and the
//     mean of an untimed pass (batch_ns_per_step) is the cost without a timer in it;
//   - the int8-vs-fp32 gap of the predicted level, and each format's one-step RMSE against the
//     measured next level (noise included).
// Then the fp32 file runs at a fixed sample period (--export-period-us) with absolute deadlines
// (clock_nanosleep TIMER_ABSTIME on CLOCK_MONOTONIC, a fixed grid), one step per tick, fed the
// recorded plant measurements in order (a replay at the real rate: the plant does not react to
// it), and reports the wake-up lateness (median / p99 / max), the longest step, and the ticks
// whose output came after the next deadline. Then the closed loop: the spec carries the loop's
// PI (export_c.h: ExportPi, lessons::PiController's law in fp32), so the C file is the whole
// controller; the fp32 file compiled as a shared object and loaded into this process (export_c.h:
// LoadedExport) closes the loop on every tick of run_closed_loop (scenario.h; the first standard
// scenario, setpoint steps, at most --export-ticks ticks): each tick waits for its absolute
// deadline, then <name>_control computes the pump command from the setpoint and the measured
// level and runs the model on it (its prediction of the next level: the loop's soft sensor /
// fault monitor; the residual RMS is reported). Reported: the wake-up lateness, the compute time
// per tick, ticks whose command came after the next deadline, the C command against
// lessons::PiController's fed the same measurements (max |difference|, held to kControlAtol: the
// part fails beyond it), and the loop's IAE next to the C++ PI's own loop.
// Nothing here is real-time scheduled (no SCHED_FIFO, no isolated core): the jitter is what an
// ordinary Linux process sees on this machine's load.
//
// JSON (record_part "export"):
//   {"model": {"kind", "inputs", "hidden": [...], "params", "history", "signals": [...]},
//    "compiler", "flags", "tolerance": {"atol", "rtol"}, "steps",
//    "formats": [{"format", "c_file", "c_bytes", "text_bytes", "rodata_bytes", "data_bytes",
//                 "bss_bytes", "state_bytes", "stack_bytes", "ram_bytes", "max_abs_error",
//                 "max_rel_error", "steps_outside", "rmse_vs_measured",
//                 "ns_median", "ns_p99", "ns_max", "tsc_median", "tsc_p99", "tsc_max",
//                 "timer_overhead_ns", "batch_ns_per_step", "bench_steps"}],
//    "int8_vs_fp32": {"max_abs", "rms"},
//    "realtime": {"mode": "replay", "period_us", "ticks", "late_ns_median", "late_ns_p99",
//                 "late_ns_max", "step_ns_max", "missed"},
//    "closed_loop": {"scenario", "period_us", "ticks", "late_ns_median", "late_ns_p99", "late_ns_max",
//                    "compute_ns_median", "compute_ns_max", "missed", "residual_rms", "iae", "iae_pi",
//                    "max_u_diff", "u_atol"}}
//   ram_bytes = state_bytes + stack_bytes; errors in metres of level; *_ns in nanoseconds.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace lesson13 {

struct ExportOptions {
  std::string formats = "fp32,int8";
  int steps = 20000;        // the compared run (--quick: 3000)
  int bench_repeats = 20;   // timed passes over those inputs (--quick: 2)
  int period_us = 1000;     // the real-time run's sample period
  int ticks = 5000;         // its length (--quick: 500)
};
void add_export_options(CLI::App& app, ExportOptions& opts);

}  // namespace lesson13
