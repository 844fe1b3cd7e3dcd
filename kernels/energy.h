// kernels/energy.h: joules, read from the hardware where it lets us, and estimated from a
// stated model where it does not -- never the one passed off as the other (lesson 15).
//
// Two halves, two types, so that a measurement and an estimate cannot be mixed up:
//
//   Measurement  what energy counters read over an interval (Meter: start(), stop()). The
//                counters, probed in this order:
//                  - RAPL through powercap sysfs: /sys/class/powercap/intel-rapl:N[:M]/
//                    energy_uj, a microjoule counter that wraps at max_energy_range_uj
//                    (Intel since Sandy Bridge; AMD Zen too, under the same name, on
//                    Linux >= 5.8). Root-only to read since Linux 5.10 (CVE-2020-8694,
//                    "Platypus": the counter leaked what the CPU computed);
//                  - RAPL through perf: the "power" PMU (/sys/bus/event_source/devices/
//                    power: type, events/energy-pkg = "event=0x..", its .scale in joules
//                    per count), opened with perf_event_open per package;
//                  - NVML on NVIDIA GPUs (Volta and newer): nvmlDeviceGetTotalEnergyConsumption,
//                    millijoules since the driver loaded, through dlopen("libnvidia-ml.so.1")
//                    so that no build depends on the driver.
//                Each counter says why it cannot be read when it cannot ("no /sys/class/
//                powercap: no RAPL driver here (virtual machines usually hide RAPL)"). A
//                package counter includes everything the package did in the interval:
//                idle power and other processes too; nothing is subtracted.
//
//   Estimate     joules from a model: picojoules per multiply-add at each precision and per
//                byte fetched from DRAM or from on-chip SRAM (EnergyModel, figures from
//                M. Horowitz, ISSCC 2014, at 45 nm, cited below). Order-of-magnitude for a
//                modern chip: the ratios (a DRAM byte costs ~100x a bf16 multiply-add) are
//                the lesson, not the absolute values. Always labelled "estimate".
//
// And the "energy roofline" (energy_roofline): joules per token of a decoder with P weights
// at batch 1 in fp32, bf16, int8, int4, ternary and 2:4 sparse, split into weight fetch and
// arithmetic, with the batch size at which the arithmetic would cost as much as the fetch.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace kernels::energy {

// ---- measured: counters -----------------------------------------------------------------

// Where the counters live. The defaults are the real ones; tests point them at fake trees.
struct Paths {
  std::string powercap = "/sys/class/powercap";
  std::string perf_power = "/sys/bus/event_source/devices/power";
  std::string nvml_library = "libnvidia-ml.so.1";
  bool use_perf = true;  // perf is tried only when powercap gave no readable package counter
  bool use_nvml = true;
};

// One energy counter, as probed.
struct Counter {
  std::string source;  // "powercap", "perf", "nvml"
  std::string name;    // "package-0", "dram", "core", "psys", "gpu 0 (NVIDIA H100 ...)"
  std::string path;    // what is read: a file, "perf type=9 config=0x2 cpu=0", "nvml device 0"
  bool readable = false;
  std::string reason;  // why it cannot be read (empty when it can)
  // Counted in Measurement::joules: whole CPU packages and GPUs. Sub-domains (core, uncore,
  // dram inside a package) and psys (the platform, which contains the packages) are
  // reported on their own, never added: they would count the same joules twice.
  bool in_total = false;
  double wrap_joules = 0.0;  // the counter wraps to 0 after this many joules (0: never)
};

// What a Meter read over one interval: measured, never estimated.
struct CounterJoules {
  std::string name;
  double joules = 0.0;
  bool in_total = false;
};
struct Measurement {
  bool readable = false;  // some counter was read
  std::string reason;     // when not readable: why (every counter's reason)
  double seconds = 0.0;   // wall time of the interval
  double joules = 0.0;    // sum of the in_total counters (CPU packages + GPUs)
  long runs = 0;          // how many runs of the measured thing the interval held (0: not said)
  std::vector<CounterJoules> parts;  // every readable counter
  double watts() const { return seconds > 0 ? joules / seconds : 0.0; }
  double joules_per_run() const { return runs > 0 ? joules / static_cast<double>(runs) : 0.0; }
};

// Lists every counter these paths offer, readable or not, each with its reason.
std::vector<Counter> probe(const Paths& paths = {});

// Reads counters over an interval. Built from a probe; start() then stop() gives joules per
// readable counter, wrap-around accounted for (once: an interval longer than a counter's wrap
// period -- minutes for RAPL at full load -- undercounts, and nothing can tell).
class Meter {
 public:
  explicit Meter(const Paths& paths = {});
  ~Meter();
  Meter(const Meter&) = delete;
  Meter& operator=(const Meter&) = delete;

  const std::vector<Counter>& counters() const { return counters_; }
  bool readable() const;      // some in_total counter can be read
  std::string reason() const; // "" when readable, else every counter's (or the probe's) reason
  void start();
  Measurement stop();

  struct Reader;  // how one counter is read (energy.cpp)

 private:
  std::vector<Counter> counters_;
  std::vector<std::unique_ptr<Reader>> readers_;  // readers_[i] reads counters_[i] (null: unreadable)
  std::vector<double> start_;
  double start_seconds_ = 0.0;
  std::string probe_reason_;  // when there are no counters at all
};

// This process's meter on the real paths, probed once (NVML is loaded once).
Meter& system_meter();

// JSON objects. A measurement: {"readable": true, "kind": "measured", "joules": ..,
// "seconds": .., "watts": .., "runs": .., "joules_per_run": .., "counters": {"package-0": ..}}
// or {"readable": false, "reason": "..."}. A meter's probe (for a record's "machine"):
// {"readable": .., "counters": ["powercap package-0", ...], "reason": "..."}.
std::string json(const Measurement& m);
std::string probe_json(const Meter& meter);

// The reason for an errno met opening a counter file (EACCES names CVE-2020-8694).
std::string open_failure(const std::string& path, int err);

// The perf "power" PMU's energy-pkg event, as its sysfs files describe it.
struct PerfEvent {
  bool ok = false;
  std::string reason;
  uint32_t type = 0;    // power/type
  uint64_t config = 0;  // events/energy-pkg: "event=0x02"
  double scale = 0.0;   // events/energy-pkg.scale: joules per count (unit "Joules")
  std::vector<int> cpus;  // power/cpumask: one CPU per package to open it on
};
PerfEvent read_perf_event(const std::string& power_dir, const std::string& event = "energy-pkg");

// Joules between two raw readings of a counter that wraps to 0 after `wrap` (0: no wrap).
double delta_joules(double start, double end, double wrap);

// ---- estimated: a stated model ----------------------------------------------------------

enum class Precision { fp32, bf16, int8, int4, ternary };
const char* name(Precision p);

// Picojoules per operation and per byte. The defaults: M. Horowitz, "Computing's energy
// problem (and what we can do about it)", ISSCC 2014, 45 nm at 0.9 V, his table of energy
// per operation:
//   32-bit float add 0.9 pJ, multiply 3.7 pJ;  16-bit float add 0.4 pJ, multiply 1.1 pJ;
//   32-bit int add 0.1 pJ, multiply 3.1 pJ;    8-bit int add 0.03 pJ, multiply 0.2 pJ;
//   64-bit read from an 8 KB SRAM 10 pJ (32 KB: 20 pJ, 1 MB: 100 pJ);
//   64-bit read from DRAM 1.3-2.6 nJ.
// A multiply-add (what a matmul does per weight per token) is one multiply and one add into
// the accumulator:
//   fp32     3.7 + 0.9                                   = 4.6 pJ
//   bf16     1.1 + 0.4 (his 16-bit float; bf16's 8-bit mantissa multiplier is smaller still,
//            and real bf16 units accumulate in fp32: the two roughly cancel)  = 1.5 pJ
//   int8     0.2 + 0.1 (the accumulator is 32-bit)        = 0.3 pJ
//   int4     0.05 + 0.1: not in the table; a multiplier's area and energy grow about as the
//            square of its width, so 0.2 x (4/8)^2 (our assumption, stated)  = 0.15 pJ
//   ternary  no multiply: a weight in {-1, 0, +1} selects add, skip or subtract of an int8
//            activation into a 32-bit accumulator (BitNet b1.58)  = 0.1 pJ
// Bytes: DRAM 1.3 nJ / 8 bytes = 162.5 pJ per byte (the low end of his range); SRAM (8 KB)
// 10 pJ / 8 = 1.25 pJ per byte. These are 45 nm figures: a 5 nm chip's arithmetic is several
// times cheaper and HBM3 costs ~4 pJ per bit (~30 pJ per byte); what survives the shrink is
// the order of the ratio, a DRAM byte against a multiply-add, which is what the lesson uses.
struct EnergyModel {
  std::string name = "Horowitz ISSCC 2014, 45 nm";
  std::string citation =
      "M. Horowitz, \"Computing's energy problem (and what we can do about it)\", ISSCC 2014, "
      "pp. 10-14 (45 nm, 0.9 V): order-of-magnitude for a modern chip";
  double pj_mac_fp32 = 3.7 + 0.9;
  double pj_mac_bf16 = 1.1 + 0.4;
  double pj_mac_int8 = 0.2 + 0.1;
  double pj_mac_int4 = 0.2 * 0.25 + 0.1;
  double pj_mac_ternary = 0.1;
  double pj_per_dram_byte = 1300.0 / 8.0;
  double pj_per_sram_byte = 10.0 / 8.0;
  double pj_per_mac(Precision p) const;
};

// Joules from the model: never a measurement (estimate is always true; it is its own type).
struct Estimate {
  static constexpr bool estimate = true;
  std::string model;           // EnergyModel::name
  double compute_joules = 0.0; // macs x pJ per multiply-add
  double dram_joules = 0.0;    // dram_bytes x pJ per DRAM byte
  double sram_joules = 0.0;    // sram_bytes x pJ per SRAM byte
  double joules() const { return compute_joules + dram_joules + sram_joules; }
};
Estimate estimate_joules(double macs, Precision precision, double dram_bytes, double sram_bytes = 0.0,
                         const EnergyModel& model = {});

// Joules per token with where they came from on it: printed, it always says which.
struct JoulesPerToken {
  enum class Kind { measured, estimated };
  Kind kind;
  double joules = 0.0;
  std::string label() const;  // "0.0123 J/token (measured)" or "... (estimate)"
};
JoulesPerToken per_token(const Measurement& m, double tokens);  // measured (throws if not readable)
JoulesPerToken per_token(const Estimate& e, double tokens);     // estimated
// A table's column (lesson 15: joules per token for each format): the measurement when its
// counters were read, else the estimate, the label saying which.
JoulesPerToken measured_or_estimated(const Measurement& m, const Estimate& e, double tokens);

// ---- the energy roofline ----------------------------------------------------------------

// A weight format: what one weight costs to store and to multiply.
struct WeightFormat {
  std::string name;         // "fp32", "bf16", "int8", "int4", "ternary", "sparse24"
  double bits_per_weight;   // stored bits per weight of the dense matrix, metadata included
  double macs_per_weight;   // multiply-adds per weight per token (2:4 skips half)
  Precision precision;      // of the multiply-adds
  std::string note;         // what the bits hold
};
// fp32 32; bf16 16; int8 8 (+ one fp32 scale per row: ignored, < 0.1%); int4 4 + a 16-bit
// scale per group of 128 = 4.125; ternary 2 (four weights a byte, as kernels store them;
// log2(3) = 1.58 is the bound); sparse24 bf16: half the values kept, 16 bits each plus a
// 2-bit index = 9 bits per dense weight, half the multiply-adds.
std::vector<WeightFormat> weight_formats();

// One format's row: a decoder with P weights generating one token at batch 1 reads every
// weight once from DRAM and does macs_per_weight x P multiply-adds (2 FLOPs each).
struct RooflineRow {
  WeightFormat format;
  double bytes_per_token = 0.0;
  Estimate energy;               // fetch (dram_joules) + arithmetic (compute_joules)
  double fetch_share = 0.0;      // dram_joules / joules
  // The arithmetic intensity (multiply-adds per DRAM byte) at which the arithmetic costs as
  // much energy as the fetch: pJ per byte / pJ per multiply-add. Below it the fetch dominates.
  double balance_macs_per_byte = 0.0;
  // The batch at which that happens: each weight byte fetched once serves `batch` tokens,
  // so the intensity is batch x macs_per_weight / bytes_per_weight.
  double balance_batch = 0.0;
};
std::vector<RooflineRow> energy_roofline(double params, const EnergyModel& model = {});
// The table, as markdown (the lesson prints it), headed by the model and its citation.
void write_roofline(std::ostream& out, double params, const std::vector<RooflineRow>& rows,
                    const EnergyModel& model = {});

}  // namespace kernels::energy
