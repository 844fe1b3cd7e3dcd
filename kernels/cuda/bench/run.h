// kernels/cuda/bench/run.h: the GPU harness, the CUDA counterpart of kernels/harness.h's
// run_bench, in the same order for every op (kernels/cuda/bench/ops.h describes them):
//
//   1. reference   the op's Problem computes the answer on the CPU, in double;
//   2. validate    EVERY variant (numbered versions, then peers such as cuBLAS) runs on the
//                  device and is compared with it; a variant that fails is reported and
//                  never timed; one that needs a newer GPU (Variant::needs.min_sm) is skipped
//                  with a note;
//   3. time        with CUDA events (Device::time_ms): warm-up runs, then repeats, each
//                  after Device::flush_l2() so every run starts from DRAM; median and min;
//   4. napkin math GB/s from the bytes the variant must move, GFLOP/s from the FLOPs, the
//                  fraction of the copy bandwidth and of the FLOP ceiling measured on the
//                  same device in the same run (measure_ceilings), the ratio to the peer.
//
// On the emulator every step runs the same code, and the times are CPU times of the
// emulator: every output says so (emulator_warning()), because they say nothing about a GPU.
//
// `nnlab cuda bench` (app/cuda.cpp) and lesson 09 are the command lines over this;
// write_json / write_markdown save a run (docs/benchmarks/cuda-<gpu>.{json,md}), and
// check_goals reads a saved JSON back and judges the goals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "kernels/cuda/bench/ops.h"
#include "kernels/cuda/ceilings.h"
#include "kernels/cuda/device.h"
#include "kernels/harness.h"

namespace kernels::cuda::bench {

// The device a front end's --device asks for: "gpu" (Error saying why when there is none),
// "emu" (the emulator), "" (default_device(): NNLAB_DEVICE, else the GPU if any, else the
// emulator). Anything else: std::invalid_argument.
Device& choose_device(const std::string& which);

// ---- the ceilings, measured on the device (kernels/cuda/ceilings.h) -------------------------

using kernels::cuda::CeilingOptions;
using kernels::cuda::Ceilings;
using kernels::cuda::emulator_warning;
using kernels::cuda::measure_ceilings;

// ---- run 1-4 ---------------------------------------------------------------------------

// The one harness's TimingOptions (kernels/harness.h); a GPU's values differ from the CPU's
// defaults: 2 warm-up runs (clocks ramp up, lazy module loading), 10 timed runs, 2 s a case,
// Device::flush_l2() before each timed run.
using harness::TimingOptions;
inline TimingOptions gpu_timing() { return {2, 10, 2.0, true}; }

// The GPU's Clock for the one time_runs: CUDA events around the launch (Device::time_ms),
// Device::flush_l2() between runs, Device::synchronize() after the warm-up.
harness::Clock gpu_clock(Device& dev);

struct RunOptions {
  std::vector<std::string> sizes;     // empty: the op's sizes on a GPU, its test_sizes emulated
  std::vector<std::string> variants;  // ids or names; empty: all
  bool quick = false;                 // the op's test_sizes, 1 timed run, no warm-up
  TimingOptions timing = gpu_timing();
  uint64_t seed = 1;
};

// One variant at one size: the one loop's Measured (kernels/harness.h: op, shape "M=N=K=4096",
// variant "v3", name, summary, peer, valid, timed, skipped (needs a newer GPU, ...), note,
// max_abs_err, timing in seconds, flops, bytes, gflops, gbs; frac_bw of the measured copy
// bandwidth; frac_peak = gflops / ceiling_gflops; vs_peer), plus what a GPU row adds.
struct Result : harness::Measured {
  std::string size;                // "4096": as asked for
  int min_sm = 0;                  // the variant's needs.min_sm
  double ceiling_gflops = 0.0;     // the FLOP ceiling this row is measured against...
  std::string ceiling;             // ... and what it is ("cublas", "fma peak"); "" none
  std::string peer_variant;        // which peer vs_peer compares with
  size_t workspace_bytes = 0;      // device scratch of this variant (attention's T x T)
  bool failed() const { return !skipped && !valid; }
};

// Runs one op on `dev`: for each size, the Problem, validation of every chosen variant,
// then timing of the valid ones and the napkin math; a table goes to `log` as it goes.
// An op with no versions on this device (not written yet) or no sizes gives no rows, with
// a note in `log`. Throws std::invalid_argument for an unknown variant or a size the op
// cannot read.
std::vector<Result> run_op(Device& dev, const Op& op, const RunOptions& opts, const Ceilings& ceilings,
                           std::ostream& log);

// The sizes run_op would run.
std::vector<std::string> sizes_for(const Device& dev, const Op& op, const RunOptions& opts);

// ---- a run, saved --------------------------------------------------------------------------

struct Report {
  DeviceInfo device;
  harness::MachineInfo host;  // CPU, compiler, date
  Ceilings ceilings;
  TimingOptions timing;
  std::vector<Result> results;
};

// "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3": the file name of a device's record.
std::string device_slug(const std::string& device_name);
// One line per result, as lesson 09 prints it: "v3 shared-memory tiles  1.234 ms  ...".
std::string summary_line(const Result& r);

// JSON (schema "nnlab-cuda-bench/1", see write_json in run.cpp for the fields) and a
// markdown table; both name the device and say loudly when it was the emulator.
void write_json(std::ostream& out, const Report& report);
void write_markdown(std::ostream& out, const Report& report);
// The number of results that failed validation (skipped ones do not count).
int count_failed(const std::vector<Result>& results);

// ---- the goals, judged from a saved JSON ---------------------------------------------

struct Goal {
  std::string name;     // "matmul >= 80% of cuBLAS SGEMM at 4096^3"
  std::string verdict;  // "PASS", "FAIL" or "NOT MEASURED"
  std::string detail;   // the numbers behind it
  bool pass() const { return verdict == "PASS"; }
};

struct GoalsReport {
  std::string device;
  bool emulated = false;
  std::vector<Goal> goals;
  bool all_pass() const;
};

// Reads a bench JSON (write_json's) and judges:
//   1. matmul: the best version at M=N=K=4096 (TF32 and BF16 versions excluded) runs at
//      >= 80% of cuBLAS SGEMM (the fastest peer whose id, name and summary say neither TF32
//      nor BF16);
//   2. memory-bound fused kernels: softmax, layernorm_forward, bias_gelu and adamw, the best
//      version of each at its largest measured size, reach >= 70% of the copy bandwidth;
//   3. attention: at every measured T >= 1024 the best fused version (workspace below the
//      T x T scores) is at least as fast as the best unfused one, and its workspace is O(T).
// Throws std::invalid_argument when the text is not such a JSON.
GoalsReport check_goals(const std::string& json_text);
void print_goals(std::ostream& out, const GoalsReport& goals);

}  // namespace kernels::cuda::bench
