// kernels/harness.h: the one harness every kernel goes through, always in this order:
//
//   1. reference   plain loops (often in double) compute what the answer must be;
//   2. validate    every version runs on the same inputs and is compared with it;
//                  a version that fails is reported and never timed;
//   3. time        warm-up, repeats, median; caches flushed before each run where the
//                  data would otherwise stay cached;
//   4. napkin math FLOPs and bytes moved, GFLOP/s and GB/s, and where that sits against
//                  the ceilings this machine was measured to have (kernels/ceilings.h):
//                  the roofline.
//
// Pieces, top-down:
//   - validation tools, shared with tests/: GuardedBuffer (misaligned start, NaN fill,
//     sentinels after the end), fill_random (never all-zero), compare (atol + rtol, NaN
//     never passes, first mismatches listed with their index);
//   - timing: time_runs, parameterised by its Clock (how to time one run, how to flush the
//     caches between runs): cpu_clock() here (steady clock, flush_caches), the GPU's in
//     kernels/cuda/bench/run.cpp (CUDA events, Device::flush_l2);
//   - the bench interface, CPU and GPU alike: Variants (an op's numbered versions, then any
//     peer such as OpenBLAS or cuBLAS), a Problem per size (inputs, reference), and the one
//     validate-then-time loop over them (validate_variants, then time_valid), which fills
//     the Measured part of a result;
//   - the CPU's front: an op (OpBench) lists its variants and makes Problems (kernels/bench/
//     lists the ops); run_bench walks 1-4 for chosen sizes and thread counts and returns
//     Results, which write_json / write_markdown save. `nnlab bench` is the command line over
//     this. The GPU's front (kernels/cuda/bench/run.h: run_op) walks the same loop on a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/ceilings.h"
#include "kernels/energy.h"
#include "kernels/versions.h"

namespace kernels::harness {

// ---- 1-2. validation ------------------------------------------------------------------

// A small, fast, seeded generator (splitmix64): kernels/ depends on nothing of ours.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  float uniform(float lo, float hi);  // [lo, hi)

 private:
  uint64_t state_;
};

// Uniform in [lo, hi). Never all-zero: a kernel that writes nothing, or writes zeros,
// cannot pass by accident against such data.
void fill_random(std::span<float> out, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// A float buffer laid out to catch the usual kernel bugs:
//   - its start is `misalign` floats past a 64-byte boundary (so code that silently
//     assumes aligned loads faults or misbehaves);
//   - it starts filled with `fill` (NaN by default: an output never written fails);
//   - `kGuard` sentinel floats follow the end: a write past the end changes them.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 16;
  explicit GuardedBuffer(size_t n, size_t misalign = 1, float fill = kNaN);
  float* data() { return storage_.data() + offset_; }
  const float* data() const { return storage_.data() + offset_; }
  size_t size() const { return n_; }
  std::span<float> span() { return {data(), n_}; }
  std::span<const float> span() const { return {data(), n_}; }
  // "" when the sentinels are intact, else which one was overwritten.
  std::string guard_damage(const std::string& name) const;

  static constexpr float kNaN = __builtin_nanf("");
  static constexpr float kSentinel = -12345.75f;

 private:
  std::vector<float> storage_;
  size_t offset_ = 0;
  size_t n_ = 0;
};

struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-4;
};

// The outcome of comparing an output with its reference.
struct Check {
  size_t checked = 0;
  size_t mismatches = 0;
  double max_abs_err = 0.0;
  std::string report;  // the first mismatches, "C[17] = 0.5 but the reference says 0.25"
  bool ok() const { return mismatches == 0 && checked > 0; }
};

// Element i passes when |got[i] - want[i]| <= atol + rtol * |want[i]|; NaN or Inf in `got`
// where `want` is finite never passes. `name` labels the report.
Check compare(const std::string& name, std::span<const float> got, std::span<const double> want,
              Tolerance tol, size_t max_listed = 5);
// The same for chosen indices only (references too slow to compute in full, e.g. one
// entry of a 2048^3 matmul costs 2048 multiply-adds; a few thousand sampled entries check
// every code path of a tiled kernel).
Check compare_at(const std::string& name, std::span<const float> got, std::span<const size_t> index,
                 std::span<const double> want, Tolerance tol, size_t max_listed = 5);
// Which entries of a product C (M, N) with inner size K a validation computes: all of them
// when M N K <= 2^26; else the four edges (where ragged tiles and panels live) and 4096
// random entries (every tile of a blocked kernel is hit many times over), so checking a
// 4096^3 product costs ~20K x 4096 multiply-adds, not 2^36. Flat indices i N + j; the matmul
// and int8 GEMM benches, CPU and GPU, share it.
std::vector<size_t> product_samples(int M, int N, int K, uint64_t seed);

// Two checks as one (mismatch counts add, reports concatenate).
Check merge(Check a, const Check& b);

// ---- 3. timing ----------------------------------------------------------------------

// The defaults are the CPU's; the GPU's are other values of the same fields
// (kernels/cuda/bench/run.h: gpu_timing()).
struct TimingOptions {
  int warmup = 1;            // untimed runs first (page faults, thread start-up, clocks)
  int repeats = 5;           // timed runs; the median is reported
  double max_seconds = 3.0;  // stop repeating once a case has used this much (>= 1 run)
  bool flush = true;         // the clock's flush before each timed run (CPU caches, GPU L2)
  // After timing, where an energy counter is readable (kernels/energy.h): back-to-back runs,
  // unflushed, for at least this long, and their joules per run. 0: not measured.
  double energy_seconds = 0.25;
};

struct Timing {
  std::vector<double> seconds;  // every timed run
  double median = 0.0;
  double min = 0.0;
};

// Evicts the caches by writing and reading a buffer larger than the last-level cache,
// so the next run starts from memory, as it would inside a real program.
void flush_caches();

// What time_runs is parameterised by: how to time one run and how to flush between runs.
struct Clock {
  // Runs `run` once and returns how long it took, in seconds.
  std::function<double(const std::function<void()>& run)> seconds;
  // Evicts what the last run left cached (called before each timed run when asked to).
  std::function<void()> flush;
  // Waits until work still queued is done (a GPU's stream after the warm-up); may be empty.
  std::function<void()> wait;
};

// The CPU's clock: the steady clock around the call, flush_caches() between runs.
Clock cpu_clock();

// The median of a sample (the mean of the middle two for an even count); 0 when empty.
double median_of(std::vector<double> v);

// Warm-up runs, then up to `repeats` timed runs (each after clock.flush when opts.flush),
// stopping once max_seconds are used; a case slower than the whole budget in its warm-up
// gets one timed run. Median and min of the samples.
Timing time_runs(const std::function<void()>& run, const TimingOptions& opts, const Clock& clock = cpu_clock());

// ---- the bench interface ------------------------------------------------------------

// One thing that can be timed: a numbered version of an op ("v3", "cache-blocked"), or a
// peer it is compared with ("openblas", "cublas"). Peers are validated the same way. CPU and
// GPU benches both list Variants; `needs` is what the version needs from the machine (a GPU
// version's oldest compute capability: the GPU loop skips it on an older device).
struct Variant {
  std::string id;       // "v3", "openblas"
  std::string name;     // "cache-blocked"
  std::string summary;  // one line: what it changes
  bool peer = false;
  Requirements needs = {};
};

// A ladder's versions as Variants, in ladder order (ids "v1", "v2", ... from the numbers):
// what every op's bench lists first, before its peers.
template <class Fn, class W>
std::vector<Variant> variants_of(const std::vector<OpVersion<Fn, W>>& versions) {
  std::vector<Variant> out;
  for (const OpVersion<Fn, W>& v : versions) out.push_back({v.id(), v.name, v.summary, false, v.needs});
  return out;
}

// An op at one size, with its inputs made and its reference ready to compare against.
class Problem {
 public:
  virtual ~Problem() = default;
  virtual std::string shape() const = 0;  // "M=N=K=1024"
  // Useful floating-point operations (an FMA counts 2); 0 when the op is not about FLOPs.
  virtual double flops() const = 0;
  // Bytes variant v moves to and from memory at least (its compulsory traffic): what
  // a perfect cache would leave. Versions that make extra passes move more.
  virtual double bytes(size_t variant) const = 0;
  // Runs variant v on the problem's inputs (the timed call).
  virtual void run(size_t variant) = 0;
  // Runs variant v and compares its output with the reference.
  virtual Check validate(size_t variant) = 0;
  // Thread count for what runs next (OpenMP by default; peers may need their own call).
  virtual void set_threads(int threads);
  // Whether to flush the caches before each timed run (when TimingOptions.flush asks for
  // it at all). Yes by default: the data starts in memory, as for a big layer in a real
  // program. A problem whose working set fits in cache may say no: flushing would time
  // memory instead of the cache level it fits in, and a sweep from L1-sized to
  // memory-sized data (the fused ops' benches) needs both ends.
  virtual bool flush_between_runs() const { return true; }
  // Scratch bytes variant v allocates for itself (the GPU's attention: its T x T scores).
  virtual size_t workspace_bytes(size_t /*variant*/) const { return 0; }
  // Why variant v does not compute this problem at all ("" when it does): the GPU matmul's
  // lesson rungs at a transposed, biased or accumulating form (Requirements::plain_only).
  // Such a variant is skipped with this note, neither validated nor timed.
  virtual std::string unsupported(size_t /*variant*/) const { return ""; }
};

// ---- the one validate-then-time loop ------------------------------------------------

// One variant at one size, as the loop fills it: the part of a result the CPU's Result
// (below) and the GPU's (kernels/cuda/bench/run.h) share.
struct Measured {
  std::string op, shape;               // "matmul", "M=N=K=1024"
  std::string variant, name, summary;  // "v3", "cache-blocked", its one line
  bool peer = false;
  bool valid = false;    // passed validation
  bool timed = false;    // valid and timed
  bool skipped = false;  // neither validated nor timed (too slow at this size, needs a newer GPU...)
  std::string note;      // why it was not timed, or what the validation said
  double max_abs_err = 0.0;
  Timing timing;
  double flops = 0.0, bytes = 0.0;
  double gflops = 0.0, gbs = 0.0;         // achieved (median)
  double frac_peak = 0.0, frac_bw = 0.0;  // of the ceilings the front end measures against
  double vs_peer = 0.0;                   // the peer's time / this time (1.0 = as fast), 0 = none
  // Joules, read from the counters over back-to-back runs after timing (measure_energy), or
  // why not: every record says one or the other, never an estimate.
  energy::Measurement energy;
};

// Whether `wanted` (ids or names) names variant v.
bool named(const std::vector<std::string>& wanted, const Variant& v);
// The variants to run, in the op's order (all when `wanted` is empty). A wanted name that
// no variant has throws std::invalid_argument "<what> has no variant 'x': it has v1, v2, ...".
std::vector<size_t> choose_variants(const std::string& what, const std::vector<Variant>& variants,
                                    const std::vector<std::string>& wanted);

// 1-2. A row per chosen variant, in order: skipped when skip(v) gives a reason (the row's
// note), else run and compared with the problem's reference. A run that throws (a device
// error) fails like a mismatch; every failure is reported to `log` with its mismatches.
std::vector<Measured> validate_variants(const std::string& op, Problem& problem, const std::vector<Variant>& variants,
                                        const std::vector<size_t>& chosen,
                                        const std::function<std::string(size_t variant)>& skip, std::ostream& log);

// Joules per run of `run`, read from `meter`'s counters: back-to-back runs through the clock
// (no flush between them) until min_seconds have passed, then the clock's wait. Counters
// update every millisecond or so, hence a fixed stretch rather than one run. What a package
// counter reads includes idle power and other processes. Not readable: why, in .reason.
energy::Measurement measure_energy(const std::function<void()>& run, const Clock& clock, energy::Meter& meter,
                                   double min_seconds);

// 3. Times one validated row (variant v of the problem) with the clock; a throw while timing
// leaves it untimed, with the reason in its note and in `log`.
void time_row(Measured& row, Problem& problem, size_t v, const TimingOptions& opts, const Clock& clock,
              std::ostream& log);
// ... every valid row of them (rows[i] is variant chosen[i]): never what was not validated.
template <class Row>
void time_valid(std::vector<Row>& rows, Problem& problem, const std::vector<size_t>& chosen, const TimingOptions& opts,
                const Clock& clock, std::ostream& log) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].valid) time_row(rows[i], problem, chosen[i], opts, clock, log);
  }
}

struct OpBench {
  std::string name;     // "matmul"
  std::string summary;  // one line
  std::string size_help;                   // how a size is written: "N or MxNxK"
  std::vector<std::string> default_sizes;  // what `nnlab bench <op>` runs
  std::vector<std::string> quick_sizes;    // what --quick (and the tests) run
  std::vector<Variant> variants;
  // Throws std::invalid_argument when a size is not one this op can read (checked before
  // anything is measured, so a typo fails at once). Optional.
  std::function<void(const std::string& size)> check_size;
  // Makes the inputs and reference for a size; throws std::invalid_argument on a bad size.
  std::function<std::unique_ptr<Problem>(const std::string& size, uint64_t seed)> make;
  // Variants too slow for big sizes are skipped above this many FLOPs (or bytes) with a
  // note, unless asked for by name: v1 naive at 2048^3 would take minutes.
  std::function<bool(size_t variant, const Problem&)> too_slow;
};

// ---- run 1-4, report ----------------------------------------------------------------

struct BenchOptions {
  std::vector<std::string> variants;  // ids or names; empty: all
  std::vector<std::string> sizes;     // empty: the op's default sizes
  std::vector<int> threads;           // empty: {1, all}
  TimingOptions timing;
  uint64_t seed = 1;
};

// A CPU row: the loop's Measured (frac_peak and frac_bw of the ceilings measured at this
// thread count), plus the thread count and the roofline.
struct Result : Measured {
  int threads = 1;
  bool flushed = false;  // caches flushed before each timed run (else: warm, in cache)
  double intensity = 0.0;               // FLOPs per byte
  double roofline = 0.0;                // attainable GFLOP/s (min(peak, intensity * bw))
  std::string bound;                    // "compute" or "memory": which roof is lower here
  double frac_roof = 0.0;               // achieved / what the roofline allows here: the
                                        // kernel's distance to its own roof
};

// Throws std::invalid_argument, naming what is allowed, for an unknown variant, a size the
// op cannot read or a thread count below 1. run_bench calls it first; so can a front end
// before it spends time measuring ceilings.
void check_options(const OpBench& op, const BenchOptions& opts);

// Runs an op: for every size, reference + validation of all chosen variants (with the
// largest thread count), then timing for each thread count. Progress and the napkin-math
// table go to `log` as it goes.
std::vector<Result> run_bench(const OpBench& op, const BenchOptions& opts, const Ceilings& ceilings,
                              std::ostream& log);

// The machine a result came from: CPU model, cores, SIMD, compiler and flags.
struct MachineInfo {
  std::string cpu, compiler, flags, simd, date;
  int cores = 0;
  int omp_max_threads = 0;
  std::string energy;  // the energy counters probed, as a JSON object (energy::probe_json)
};
MachineInfo machine_info();

// JSON pieces the writers share (the GPU harness too): a quoted, escaped string; a number
// with `precision` significant digits, or null when it is not finite.
std::string json_string(const std::string& s);
std::string json_number(double v, int precision = 6);
// The machine as JSON object fields, without the braces: "cpu": ..., "cores": ...,
// "omp_max_threads": ..., "simd": ..., "compiler": ..., "flags": ..., "date": ..., "energy":
// {"readable": ..., "counters": [...], "reason": ...} (what the
// lessons' records put in their "machine" objects, with fields of their own after).
std::string json_fields(const MachineInfo& m);

void write_json(std::ostream& out, const MachineInfo& machine, const Ceilings& ceilings,
                const std::vector<Result>& results);
void write_markdown(std::ostream& out, const MachineInfo& machine, const Ceilings& ceilings,
                    const std::vector<Result>& results);

}  // namespace kernels::harness
