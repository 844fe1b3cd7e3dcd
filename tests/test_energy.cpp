// tests/test_energy.cpp: kernels/energy.h -- the counters read through fake powercap and perf
// trees in a temp directory (several packages, sub-zones, wrap-around, an unreadable file),
// the reasons given when nothing is readable, the estimate model's arithmetic against hand
// computation, the energy roofline, that a measurement and an estimate never pass for each
// other, and the harness's records carrying an "energy" field either way.
#include <catch2/catch.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <unistd.h>

#include "kernels/energy.h"
#include "kernels/harness.h"
#include "tests/cli_helpers.h"

namespace fs = std::filesystem;
namespace e = kernels::energy;
using Catch::Contains;

namespace {

// A fresh directory under the system temp dir, removed when the test ends.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("nnlab-energy-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

// One powercap zone: name, energy_uj, max_energy_range_uj.
void zone(const fs::path& root, const std::string& dir, const std::string& name, uint64_t uj, uint64_t range_uj) {
  write(root / dir / "name", name);
  write(root / dir / "energy_uj", std::to_string(uj));
  write(root / dir / "max_energy_range_uj", std::to_string(range_uj));
}

e::Paths fake(const fs::path& root) {
  e::Paths p;
  p.powercap = (root / "powercap").string();
  p.perf_power = (root / "no-power-pmu").string();
  p.nvml_library = (root / "libnvidia-ml-absent.so.1").string();
  return p;
}

const e::Counter* find(const std::vector<e::Counter>& cs, const std::string& name) {
  for (const e::Counter& c : cs) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

double part(const e::Measurement& m, const std::string& name) {
  for (const e::CounterJoules& p : m.parts) {
    if (p.name == name) return p.joules;
  }
  return -1.0;
}

}  // namespace

TEST_CASE("energy: a machine without counters says why for each source", "[energy]") {
  TempDir t;
  const e::Paths p = fake(t.path);
  const std::vector<e::Counter> cs = e::probe(p);
  REQUIRE(cs.size() == 3);  // powercap, perf, nvml: one "none" each, with its reason
  for (const e::Counter& c : cs) {
    CHECK_FALSE(c.readable);
    CHECK_FALSE(c.reason.empty());
  }
  CHECK(cs[0].source == "powercap");
  CHECK_THAT(cs[0].reason, Contains("no " + p.powercap) && Contains("virtual machines"));
  CHECK(cs[1].source == "perf");
  CHECK_THAT(cs[1].reason, Contains("power\" PMU"));
  CHECK(cs[2].source == "nvml");
  CHECK_THAT(cs[2].reason, Contains("cannot load") && Contains("libnvidia-ml-absent"));

  e::Meter meter(p);
  CHECK_FALSE(meter.readable());
  CHECK_THAT(meter.reason(), Contains("powercap: ") && Contains("nvml: "));
  meter.start();
  const e::Measurement m = meter.stop();
  CHECK_FALSE(m.readable);
  CHECK(m.joules == 0.0);
  CHECK_THAT(e::json(m), Contains("\"readable\": false") && Contains("\"reason\": \"powercap: "));

  // a powercap directory with no energy zones is a different reason
  fs::create_directories(t.path / "powercap" / "intel-rapl");
  CHECK_THAT(e::probe(p)[0].reason, Contains("no zone with an energy_uj"));
}

TEST_CASE("energy: powercap packages, sub-zones and psys are read, only packages summed", "[energy]") {
  TempDir t;
  const fs::path pc = t.path / "powercap";
  const uint64_t range = 262143328850;  // a real max_energy_range_uj
  fs::create_directories(pc / "intel-rapl");  // the control type: no energy_uj, skipped
  zone(pc, "intel-rapl:0", "package-0", 1000000, range);
  zone(pc, "intel-rapl:0:0", "core", 500000, range);
  zone(pc, "intel-rapl:0:1", "dram", 200000, range);
  zone(pc, "intel-rapl:1", "package-1", 7000000, range);
  zone(pc, "intel-rapl:2", "psys", 9000000, range);
  e::Meter meter(fake(t.path));
  const std::vector<e::Counter>& cs = meter.counters();
  REQUIRE(find(cs, "package-0") != nullptr);
  REQUIRE(find(cs, "package-0/core") != nullptr);
  REQUIRE(find(cs, "package-0/dram") != nullptr);
  REQUIRE(find(cs, "package-1") != nullptr);
  REQUIRE(find(cs, "psys") != nullptr);
  CHECK(find(cs, "package-0")->in_total);
  CHECK(find(cs, "package-1")->in_total);
  CHECK_FALSE(find(cs, "package-0/dram")->in_total);
  CHECK_FALSE(find(cs, "psys")->in_total);
  CHECK(find(cs, "package-0")->wrap_joules == Approx(262143.32885));
  CHECK(meter.readable());
  CHECK(meter.reason().empty());

  meter.start();
  zone(pc, "intel-rapl:0", "package-0", 3500000, range);    // +2.5 J
  zone(pc, "intel-rapl:0:0", "core", 1500000, range);       // +1.0 J
  zone(pc, "intel-rapl:0:1", "dram", 450000, range);        // +0.25 J
  zone(pc, "intel-rapl:1", "package-1", 7750000, range);    // +0.75 J
  zone(pc, "intel-rapl:2", "psys", 19000000, range);        // +10 J
  const e::Measurement m = meter.stop();
  REQUIRE(m.readable);
  CHECK(part(m, "package-0") == Approx(2.5));
  CHECK(part(m, "package-0/core") == Approx(1.0));
  CHECK(part(m, "package-0/dram") == Approx(0.25));
  CHECK(part(m, "package-1") == Approx(0.75));
  CHECK(part(m, "psys") == Approx(10.0));
  CHECK(m.joules == Approx(3.25));  // the two packages, nothing counted twice
  CHECK(m.seconds >= 0.0);
  const std::string j = e::json(m);
  CHECK_THAT(j, Contains("\"readable\": true") && Contains("\"kind\": \"measured\"") &&
                    Contains("\"joules\": 3.25") && Contains("\"package-1\": 0.75"));
  CHECK_THAT(e::probe_json(meter), Contains("\"readable\": true") &&
                                       Contains("\"powercap package-0\"") && Contains("\"reason\": \"\""));
}

TEST_CASE("energy: a counter that wraps past max_energy_range_uj", "[energy]") {
  CHECK(e::delta_joules(10.0, 25.0, 100.0) == Approx(15.0));
  CHECK(e::delta_joules(90.0, 5.0, 100.0) == Approx(15.0));  // 10 to the top, 5 from 0
  CHECK(e::delta_joules(5.0, 3.0, 0.0) == Approx(-2.0));     // no known range: not guessed

  TempDir t;
  const fs::path pc = t.path / "powercap";
  zone(pc, "intel-rapl:0", "package-0", 999000000, 1000000000);  // 999 J of a 1000 J range
  e::Meter meter(fake(t.path));
  meter.start();
  zone(pc, "intel-rapl:0", "package-0", 4000000, 1000000000);  // wrapped: 1 J to the top + 4 J
  const e::Measurement m = meter.stop();
  REQUIRE(m.readable);
  CHECK(m.joules == Approx(5.0));
}

TEST_CASE("energy: an unreadable energy_uj is listed with its reason and not summed", "[energy]") {
  TempDir t;
  const fs::path pc = t.path / "powercap";
  zone(pc, "intel-rapl:0", "package-0", 1000000, 1000000000);
  zone(pc, "intel-rapl:1", "package-1", 1000000, 1000000000);
  // package-1's energy_uj: a link to nothing (root reads any mode, so a chmod would not do)
  fs::remove(pc / "intel-rapl:1" / "energy_uj");
  fs::create_symlink(t.path / "gone", pc / "intel-rapl:1" / "energy_uj");
  zone(pc, "intel-rapl:2", "package-2", 0, 1000000000);
  write(pc / "intel-rapl:2" / "energy_uj", "garbage");

  e::Meter meter(fake(t.path));
  const e::Counter* p1 = find(meter.counters(), "package-1");
  REQUIRE(p1 != nullptr);
  CHECK_FALSE(p1->readable);
  CHECK_THAT(p1->reason, Contains("cannot read") && Contains("No such file"));
  const e::Counter* p2 = find(meter.counters(), "package-2");
  REQUIRE(p2 != nullptr);
  CHECK_FALSE(p2->readable);
  CHECK_THAT(p2->reason, Contains("'garbage'"));
  CHECK(meter.readable());  // package-0 still is

  meter.start();
  zone(pc, "intel-rapl:0", "package-0", 3000000, 1000000000);
  const e::Measurement m = meter.stop();
  CHECK(m.joules == Approx(2.0));
  CHECK(m.parts.size() == 1);

  // the reason a non-root user gets since Linux 5.10
  CHECK_THAT(e::open_failure("/x/energy_uj", EACCES), Contains("permission denied") &&
                                                          Contains("CVE-2020-8694") && Contains("5.10"));
}

TEST_CASE("energy: the perf power PMU's event is read from its sysfs files", "[energy]") {
  TempDir t;
  const fs::path pw = t.path / "power";
  CHECK_THAT(e::read_perf_event(pw.string()).reason, Contains("no " + pw.string()));
  write(pw / "type", "23");
  CHECK_THAT(e::read_perf_event(pw.string()).reason, Contains("has no events/energy-pkg"));
  write(pw / "events" / "energy-pkg", "event=0x02");
  write(pw / "events" / "energy-pkg.scale", "2.3283064365386962890625e-10");
  write(pw / "events" / "energy-pkg.unit", "Joules");
  write(pw / "cpumask", "0,32-33");
  const e::PerfEvent ev = e::read_perf_event(pw.string());
  REQUIRE(ev.ok);
  CHECK(ev.type == 23);
  CHECK(ev.config == 2);
  CHECK(ev.scale == Approx(2.3283064365386962890625e-10));
  CHECK(ev.cpus == std::vector<int>{0, 32, 33});
  write(pw / "events" / "energy-pkg.unit", "Watts");
  CHECK_FALSE(e::read_perf_event(pw.string()).ok);
}

TEST_CASE("energy: the estimate model's arithmetic, by hand", "[energy]") {
  const e::EnergyModel model;
  // Horowitz 45 nm: fp32 3.7 + 0.9, fp16 1.1 + 0.4, int8 0.2 + int32 add 0.1
  CHECK(model.pj_per_mac(e::Precision::fp32) == Approx(4.6));
  CHECK(model.pj_per_mac(e::Precision::bf16) == Approx(1.5));
  CHECK(model.pj_per_mac(e::Precision::int8) == Approx(0.3));
  CHECK(model.pj_per_mac(e::Precision::int4) == Approx(0.15));
  CHECK(model.pj_per_mac(e::Precision::ternary) == Approx(0.1));
  CHECK(model.pj_per_dram_byte == Approx(162.5));
  CHECK(model.pj_per_sram_byte == Approx(1.25));
  CHECK_THAT(model.citation, Contains("Horowitz") && Contains("ISSCC 2014") && Contains("45 nm"));

  // 1e9 fp32 multiply-adds, 1e9 DRAM bytes, 2e9 SRAM bytes:
  // 4.6e-3 J + 0.1625 J + 2.5e-3 J = 0.1696 J
  const e::Estimate est = e::estimate_joules(1e9, e::Precision::fp32, 1e9, 2e9);
  static_assert(e::Estimate::estimate);
  CHECK(est.compute_joules == Approx(4.6e-3));
  CHECK(est.dram_joules == Approx(0.1625));
  CHECK(est.sram_joules == Approx(2.5e-3));
  CHECK(est.joules() == Approx(0.1696));
  CHECK(est.model == model.name);
  // int8 does the same work for 0.3 / 4.6 of the arithmetic energy
  CHECK(e::estimate_joules(1e9, e::Precision::int8, 0).joules() == Approx(3e-4));
}

TEST_CASE("energy: the energy roofline of six formats", "[energy]") {
  const double P = 1e6;
  const std::vector<e::RooflineRow> rows = e::energy_roofline(P);
  REQUIRE(rows.size() == 6);
  const char* names[] = {"fp32", "bf16", "int8", "int4", "ternary", "sparse24"};
  for (size_t i = 0; i < 6; ++i) CHECK(rows[i].format.name == names[i]);
  // fp32: 4e6 bytes x 162.5 pJ = 0.65 mJ fetch; 1e6 x 4.6 pJ = 4.6 uJ arithmetic
  CHECK(rows[0].bytes_per_token == Approx(4e6));
  CHECK(rows[0].energy.dram_joules == Approx(6.5e-4));
  CHECK(rows[0].energy.compute_joules == Approx(4.6e-6));
  CHECK(rows[0].fetch_share == Approx(6.5e-4 / (6.5e-4 + 4.6e-6)));
  // balance: 162.5 / 4.6 MAC per byte; a weight is 4 bytes, so batch 4 x 162.5 / 4.6 = 141.3
  CHECK(rows[0].balance_macs_per_byte == Approx(162.5 / 4.6));
  CHECK(rows[0].balance_batch == Approx(4 * 162.5 / 4.6));
  // int4 with a 16-bit scale per 128: 4.125 bits; 0.515625 bytes per weight
  CHECK(rows[3].bytes_per_token == Approx(515625.0));
  CHECK(rows[3].energy.compute_joules == Approx(1e6 * 0.15e-12));
  // ternary: 2 bits; 0.25e6 bytes; adds only
  CHECK(rows[4].bytes_per_token == Approx(250000.0));
  CHECK(rows[4].energy.compute_joules == Approx(1e6 * 0.1e-12));
  // 2:4 bf16: 9 bits per dense weight, half the multiply-adds at bf16
  CHECK(rows[5].bytes_per_token == Approx(1.125e6));
  CHECK(rows[5].energy.compute_joules == Approx(0.5e6 * 1.5e-12));
  CHECK(rows[5].balance_batch == Approx(162.5 / 1.5 * 1.125 / 0.5));
  // at batch 1 every format is fetch-bound, and joules follow bytes
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].fetch_share > 0.9);
    CHECK(rows[i].balance_batch > 1.0);
  }
  CHECK(rows[4].energy.joules() < rows[3].energy.joules());
  CHECK(rows[3].energy.joules() < rows[2].energy.joules());
  CHECK(rows[2].energy.joules() < rows[1].energy.joules());
  CHECK(rows[1].energy.joules() < rows[0].energy.joules());

  std::ostringstream os;
  e::write_roofline(os, P, rows);
  const std::string table = os.str();
  CHECK_THAT(table, Contains("ESTIMATE") && Contains("Horowitz") &&
                        Contains("| fp32 | 32 | 4 | 4.6 | 0.65 |") && Contains("| sparse24 | 9 |"));
}

TEST_CASE("energy: a measurement and an estimate never pass for each other", "[energy]") {
  static_assert(!std::is_convertible_v<e::Estimate, e::Measurement>);
  static_assert(!std::is_convertible_v<e::Measurement, e::Estimate>);
  const e::JoulesPerToken est = e::per_token(e::estimate_joules(1e6, e::Precision::bf16, 2e6), 1);
  CHECK(est.kind == e::JoulesPerToken::Kind::estimated);
  CHECK_THAT(est.label(), Contains("(estimate)"));
  CHECK_THAT(est.label(), !Contains("measured"));

  e::Measurement m;
  m.readable = true;
  m.joules = 2.0;
  const e::JoulesPerToken meas = e::per_token(m, 4);
  CHECK(meas.kind == e::JoulesPerToken::Kind::measured);
  CHECK(meas.joules == Approx(0.5));
  CHECK_THAT(meas.label(), Contains("0.5 J/token (measured)"));
  // nothing readable: no number at all, rather than an estimate in its place
  e::Measurement none;
  none.reason = "no counters";
  CHECK_THROWS_WITH(e::per_token(none, 4), Contains("no counters"));
  // a table's column takes the measurement when there is one, and says which it took
  const e::Estimate guess = e::estimate_joules(0, e::Precision::fp32, 8e9);  // 1.3 J
  CHECK(e::measured_or_estimated(m, guess, 4).kind == e::JoulesPerToken::Kind::measured);
  CHECK(e::measured_or_estimated(m, guess, 4).joules == Approx(0.5));
  const e::JoulesPerToken col = e::measured_or_estimated(none, guess, 2);
  CHECK(col.kind == e::JoulesPerToken::Kind::estimated);
  CHECK(col.joules == Approx(0.65));
  CHECK_THAT(col.label(), Contains("0.65 J/token (estimate)"));
}

TEST_CASE("energy: the harness measures joules per run, or says why not", "[energy][harness]") {
  namespace h = kernels::harness;
  TempDir t;
  const fs::path pc = t.path / "powercap";
  zone(pc, "intel-rapl:0", "package-0", 0, 1000000000);
  e::Meter meter(fake(t.path));
  // each run costs exactly 1 mJ on the fake counter
  uint64_t uj = 0;
  const auto run = [&] {
    uj += 1000;
    write(pc / "intel-rapl:0" / "energy_uj", std::to_string(uj));
  };
  const e::Measurement m = h::measure_energy(run, h::cpu_clock(), meter, 0.01);
  REQUIRE(m.readable);
  CHECK(m.runs >= 1);
  CHECK(m.joules == Approx(1e-3 * static_cast<double>(m.runs)));
  CHECK(m.joules_per_run() == Approx(1e-3));

  // without a counter: not measured, and the record says why
  e::Meter none(fake(t.path / "elsewhere"));
  int calls = 0;
  const e::Measurement n = h::measure_energy([&] { ++calls; }, h::cpu_clock(), none, 0.01);
  CHECK_FALSE(n.readable);
  CHECK(calls == 0);
  CHECK_THAT(n.reason, Contains("not readable here: powercap: no "));

  h::Result r;
  r.op = "x";
  r.energy = n;
  std::ostringstream os;
  h::write_json(os, h::machine_info(), kernels::Ceilings{}, {r});
  const std::string json = os.str();
  CHECK_THAT(json, Contains("\"energy\": {\"readable\": false, \"reason\": \"not readable here: powercap: no "));
  // the machine says what this process's counters are
  CHECK_THAT(json, Contains("\"date\": ") && Contains(", \"energy\": {\"readable\": "));
  CHECK_THAT(h::json_fields(h::machine_info()), Contains("\"energy\": {\"readable\": "));
}

TEST_CASE("nnlab energy: every counter's reading or reason, a child's joules, the roofline", "[energy][cli]") {
  const auto probe = testing::run_program("nnlab", "energy --seconds 0.05");
  INFO(probe.output);
  REQUIRE(probe.status == 0);
  CHECK_THAT(probe.output, Contains("powercap") && Contains("perf") && Contains("nvml"));
  // either a measurement or the reason, never both, never a bare number
  const bool readable = e::system_meter().readable();
  CHECK_THAT(probe.output, readable ? Contains("energy (measured): ") : Contains("energy: not readable here ("));

  // a child's exit status comes back, and the run is measured (or said not to be)
  const auto child = testing::run_program("nnlab", "energy --run \"exit 3\" --roofline --params 1e6");
  INFO(child.output);
  CHECK(child.status == 3);
  CHECK_THAT(child.output, Contains("exit status 3"));
  CHECK_THAT(child.output, Contains("ESTIMATE") && Contains("| ternary | 2 | 0.25 |"));

  const auto bad = testing::run_program("nnlab", "energy --seconds nan");
  CHECK(bad.status != 0);
}
