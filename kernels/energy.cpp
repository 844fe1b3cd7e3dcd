// kernels/energy.cpp: the counters (powercap RAPL, perf RAPL, NVML), the meter over them, and
// the estimate model with its energy roofline. See kernels/energy.h for what each reads and
// where the model's figures come from.
#include "kernels/energy.h"

#include <dlfcn.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "kernels/harness.h"

namespace kernels::energy {

namespace fs = std::filesystem;

// ---- reading one counter ------------------------------------------------------------------

// A counter's running total in joules (raw: it may wrap), NaN when the read fails.
struct Meter::Reader {
  virtual ~Reader() = default;
  virtual double joules() = 0;
};

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// The first line of a small file, or "" (err set to errno) when it cannot be read.
std::string read_line(const std::string& path, int* err = nullptr) {
  errno = 0;
  std::ifstream f(path);
  if (!f) {
    if (err) *err = errno ? errno : ENOENT;
    return "";
  }
  std::string line;
  if (!std::getline(f, line)) {
    if (err) *err = errno ? errno : EIO;
    return "";
  }
  if (err) *err = 0;
  return trim(line);
}

// powercap: energy_uj, microjoules as a decimal integer.
struct PowercapReader : Meter::Reader {
  std::string path;
  explicit PowercapReader(std::string p) : path(std::move(p)) {}
  double joules() override {
    int err = 0;
    const std::string s = read_line(path, &err);
    if (err != 0 || s.empty()) return std::nan("");
    try {
      return static_cast<double>(std::stoull(s)) * 1e-6;
    } catch (const std::exception&) {
      return std::nan("");
    }
  }
};

// perf: a 64-bit count of the power PMU's event, times its scale (joules per count).
struct PerfReader : Meter::Reader {
  int fd = -1;
  double scale = 0.0;
  PerfReader(int f, double s) : fd(f), scale(s) {}
  ~PerfReader() override {
    if (fd >= 0) close(fd);
  }
  double joules() override {
    uint64_t count = 0;
    if (read(fd, &count, sizeof count) != static_cast<ssize_t>(sizeof count)) return std::nan("");
    return static_cast<double>(count) * scale;
  }
};

// NVML, loaded at run time: the few entry points we call, with nvml.h's types reduced to what
// their ABI is (an enum is an int, a device handle an opaque pointer).
struct Nvml {
  using Device = void*;
  int (*init)() = nullptr;                                   // nvmlInit_v2
  int (*count)(unsigned*) = nullptr;                         // nvmlDeviceGetCount_v2
  int (*handle)(unsigned, Device*) = nullptr;                // nvmlDeviceGetHandleByIndex_v2
  int (*name)(Device, char*, unsigned) = nullptr;            // nvmlDeviceGetName
  int (*energy)(Device, unsigned long long*) = nullptr;      // nvmlDeviceGetTotalEnergyConsumption (mJ)
  const char* (*error)(int) = nullptr;                       // nvmlErrorString
  std::string why_not;                                       // "" when loaded and initialised
  std::string err(int rc) const { return error ? error(rc) : "NVML error " + std::to_string(rc); }
};
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlNotSupported = 3;

// Loads and initialises NVML from `library` (once per library name; never unloaded).
const Nvml& nvml(const std::string& library) {
  static std::vector<std::pair<std::string, std::unique_ptr<Nvml>>> loaded;
  for (const auto& [lib, n] : loaded) {
    if (lib == library) return *n;
  }
  auto n = std::make_unique<Nvml>();
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    n->why_not = "cannot load " + library + " (" + (e ? e : "not found") + "): no NVIDIA driver here";
  } else {
    n->init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
    n->count = reinterpret_cast<int (*)(unsigned*)>(dlsym(h, "nvmlDeviceGetCount_v2"));
    n->handle = reinterpret_cast<int (*)(unsigned, Nvml::Device*)>(dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
    n->name = reinterpret_cast<int (*)(Nvml::Device, char*, unsigned)>(dlsym(h, "nvmlDeviceGetName"));
    n->energy = reinterpret_cast<int (*)(Nvml::Device, unsigned long long*)>(
        dlsym(h, "nvmlDeviceGetTotalEnergyConsumption"));
    n->error = reinterpret_cast<const char* (*)(int)>(dlsym(h, "nvmlErrorString"));
    if (!n->init || !n->count || !n->handle || !n->energy) {
      n->why_not = library + " lacks nvmlInit_v2 / nvmlDeviceGetTotalEnergyConsumption (a driver older than 2017?)";
    } else if (const int rc = n->init(); rc != kNvmlSuccess) {
      n->why_not = "nvmlInit failed: " + n->err(rc);
    }
  }
  loaded.emplace_back(library, std::move(n));
  return *loaded.back().second;
}

struct NvmlReader : Meter::Reader {
  const Nvml* lib;
  Nvml::Device dev;
  NvmlReader(const Nvml* l, Nvml::Device d) : lib(l), dev(d) {}
  double joules() override {
    unsigned long long mj = 0;
    if (lib->energy(dev, &mj) != kNvmlSuccess) return std::nan("");
    return static_cast<double>(mj) * 1e-3;
  }
};

using Found = std::vector<std::pair<Counter, std::unique_ptr<Meter::Reader>>>;

Counter unavailable(const std::string& source, const std::string& path, const std::string& reason) {
  Counter c;
  c.source = source;
  c.name = "none";
  c.path = path;
  c.reason = reason;
  return c;
}

// ---- probing each source ------------------------------------------------------------------

// powercap zones: <root>/<type>:<n>[:<m>] directories holding energy_uj.
void probe_powercap(const std::string& root, Found& out) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    out.emplace_back(unavailable("powercap", root,
                                 "no " + root + ": no RAPL driver here (virtual machines and containers usually hide RAPL)"),
                     nullptr);
    return;
  }
  std::vector<fs::path> zones;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.find(':') != std::string::npos) zones.push_back(e.path());
  }
  std::sort(zones.begin(), zones.end());
  const size_t before = out.size();
  for (const fs::path& z : zones) {
    const std::string zone = z.filename().string();  // "intel-rapl:0:1"
    const std::string energy = (z / "energy_uj").string();
    if (!fs::exists(z / "energy_uj", ec) && !fs::is_symlink(z / "energy_uj", ec)) continue;  // not an energy zone
    Counter c;
    c.source = "powercap";
    c.path = energy;
    const std::string zname = read_line((z / "name").string());
    const bool sub = std::count(zone.begin(), zone.end(), ':') > 1;
    const bool mmio = zone.find("mmio") != std::string::npos;
    std::string parent;
    if (sub) parent = read_line((z.parent_path() / zone.substr(0, zone.rfind(':')) / "name").string());
    c.name = (sub && !parent.empty() ? parent + "/" : "") + (zname.empty() ? zone : zname) + (mmio ? " (mmio)" : "");
    // Whole packages only: sub-zones are inside them, psys contains them, and the mmio
    // interface (newer Intel) is a second window on package-0.
    c.in_total = !sub && !mmio && zname.rfind("package", 0) == 0;
    const std::string range = read_line((z / "max_energy_range_uj").string());
    try {
      c.wrap_joules = range.empty() ? 0.0 : static_cast<double>(std::stoull(range)) * 1e-6;
    } catch (const std::exception&) {
      c.wrap_joules = 0.0;
    }
    int err = 0;
    const std::string value = read_line(energy, &err);
    bool number = false;
    if (err == 0) {
      try {
        (void)std::stoull(value);
        number = true;
      } catch (const std::exception&) {
      }
    }
    if (err != 0) {
      c.reason = open_failure(energy, err);
    } else if (!number) {
      c.reason = energy + " holds '" + value + "', not a count of microjoules";
    } else {
      c.readable = true;
    }
    auto reader = c.readable ? std::make_unique<PowercapReader>(energy) : nullptr;
    out.emplace_back(std::move(c), std::move(reader));
  }
  if (out.size() == before) {
    out.emplace_back(unavailable("powercap", root, root + " has no zone with an energy_uj (no RAPL zones)"), nullptr);
  }
}

long perf_event_open(perf_event_attr* attr, int cpu) {
  return syscall(SYS_perf_event_open, attr, -1, cpu, -1, 0);
}

void probe_perf(const std::string& dir, bool counted, Found& out) {
  const PerfEvent ev = read_perf_event(dir);
  if (!ev.ok) {
    out.emplace_back(unavailable("perf", dir, ev.reason), nullptr);
    return;
  }
  for (int cpu : ev.cpus) {
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.type = ev.type;
    attr.size = sizeof attr;
    attr.config = ev.config;
    Counter c;
    c.source = "perf";
    c.name = "package (cpu " + std::to_string(cpu) + ")";
    std::ostringstream p;
    p << "perf type=" << ev.type << " config=0x" << std::hex << ev.config << std::dec << " cpu=" << cpu;
    c.path = p.str();
    c.in_total = !counted;  // powercap's packages already counted: the same joules
    const long fd = perf_event_open(&attr, cpu);
    std::unique_ptr<Meter::Reader> reader;
    if (fd < 0) {
      const int err = errno;
      c.reason = "perf_event_open: " + std::string(std::strerror(err));
      const std::string paranoid = read_line("/proc/sys/kernel/perf_event_paranoid");
      if (err == EACCES || err == EPERM) {
        c.reason += " (a system-wide event needs CAP_PERFMON or root, or kernel.perf_event_paranoid <= 0; it is " +
                    (paranoid.empty() ? std::string("unknown") : paranoid) + ")";
      }
    } else {
      c.readable = true;
      reader = std::make_unique<PerfReader>(static_cast<int>(fd), ev.scale);
    }
    out.emplace_back(std::move(c), std::move(reader));
  }
}

void probe_nvml(const std::string& library, Found& out) {
  const Nvml& n = nvml(library);
  if (!n.why_not.empty()) {
    out.emplace_back(unavailable("nvml", library, n.why_not), nullptr);
    return;
  }
  unsigned count = 0;
  if (const int rc = n.count(&count); rc != kNvmlSuccess || count == 0) {
    out.emplace_back(unavailable("nvml", library, rc != kNvmlSuccess ? "nvmlDeviceGetCount: " + n.err(rc) : "NVML sees no GPU"),
                     nullptr);
    return;
  }
  for (unsigned i = 0; i < count; ++i) {
    Counter c;
    c.source = "nvml";
    c.path = "nvml device " + std::to_string(i);
    c.name = "gpu " + std::to_string(i);
    c.in_total = true;
    Nvml::Device dev = nullptr;
    if (const int rc = n.handle(i, &dev); rc != kNvmlSuccess) {
      c.reason = "nvmlDeviceGetHandleByIndex: " + n.err(rc);
      out.emplace_back(std::move(c), nullptr);
      continue;
    }
    char devname[96] = {};
    if (n.name && n.name(dev, devname, sizeof devname) == kNvmlSuccess) c.name += " (" + std::string(devname) + ")";
    unsigned long long mj = 0;
    std::unique_ptr<Meter::Reader> reader;
    if (const int rc = n.energy(dev, &mj); rc != kNvmlSuccess) {
      c.reason = rc == kNvmlNotSupported
                     ? "nvmlDeviceGetTotalEnergyConsumption is not supported on this GPU (it needs Volta or newer)"
                     : "nvmlDeviceGetTotalEnergyConsumption: " + n.err(rc);
    } else {
      c.readable = true;
      reader = std::make_unique<NvmlReader>(&n, dev);
    }
    out.emplace_back(std::move(c), std::move(reader));
  }
}

Found probe_all(const Paths& paths) {
  Found found;
  probe_powercap(paths.powercap, found);
  const bool counted = std::any_of(found.begin(), found.end(), [](const auto& f) { return f.first.readable && f.first.in_total; });
  if (paths.use_perf) probe_perf(paths.perf_power, counted, found);
  if (paths.use_nvml) probe_nvml(paths.nvml_library, found);
  return found;
}

}  // namespace

// ---- public: counters, the meter ------------------------------------------------------------

std::string open_failure(const std::string& path, int err) {
  if (err == EACCES || err == EPERM) {
    return "permission denied on " + path + ": energy_uj is readable by root only since Linux 5.10 "
           "(CVE-2020-8694, the Platypus attack); run as root or make it readable";
  }
  return "cannot read " + path + ": " + std::strerror(err);
}

PerfEvent read_perf_event(const std::string& dir, const std::string& event) {
  PerfEvent ev;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    ev.reason = "no " + dir + ": the kernel offers no RAPL \"power\" PMU to perf here";
    return ev;
  }
  const std::string type = read_line(dir + "/type");
  const std::string spec = read_line(dir + "/events/" + event);
  if (type.empty() || spec.empty()) {
    ev.reason = dir + " has no " + (type.empty() ? "type" : "events/" + event);
    return ev;
  }
  const size_t at = spec.find("event=");
  if (at == std::string::npos) {
    ev.reason = dir + "/events/" + event + " is '" + spec + "', not event=<code>";
    return ev;
  }
  try {
    ev.type = static_cast<uint32_t>(std::stoul(type));
    ev.config = std::stoull(spec.substr(at + 6), nullptr, 0);
    const std::string scale = read_line(dir + "/events/" + event + ".scale");
    ev.scale = scale.empty() ? 0.0 : std::stod(scale);
  } catch (const std::exception&) {
    ev.reason = dir + ": cannot parse type '" + type + "' or event '" + spec + "'";
    return ev;
  }
  const std::string unit = read_line(dir + "/events/" + event + ".unit");
  if (ev.scale <= 0.0 || (!unit.empty() && unit != "Joules")) {
    ev.reason = dir + "/events/" + event + ": scale '" + std::to_string(ev.scale) + "' unit '" + unit +
                "' (want a positive scale in Joules)";
    return ev;
  }
  // cpumask: one CPU per package, as "0" or "0,32" or "0-1"
  std::string mask = read_line(dir + "/cpumask");
  if (mask.empty()) mask = "0";
  std::stringstream ss(mask);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      const size_t dash = part.find('-');
      const int lo = std::stoi(part.substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
      for (int c = lo; c <= hi; ++c) ev.cpus.push_back(c);
    } catch (const std::exception&) {
      ev.reason = dir + "/cpumask is '" + mask + "'";
      return ev;
    }
  }
  ev.ok = true;
  return ev;
}

double delta_joules(double start, double end, double wrap) {
  if (end >= start || wrap <= 0.0) return end - start;
  // the counter went past its range and started again from 0: what was left to the top, then
  // what it counted from 0 (its values run 0 .. wrap)
  return (wrap - start) + end;
}

std::vector<Counter> probe(const Paths& paths) {
  std::vector<Counter> out;
  for (auto& f : probe_all(paths)) out.push_back(std::move(f.first));
  return out;
}

Meter::Meter(const Paths& paths) {
  for (auto& f : probe_all(paths)) {
    counters_.push_back(std::move(f.first));
    readers_.push_back(std::move(f.second));
  }
  if (counters_.empty()) probe_reason_ = "no energy counter probed";
}

Meter::~Meter() = default;

bool Meter::readable() const {
  for (size_t i = 0; i < counters_.size(); ++i) {
    if (readers_[i] && counters_[i].in_total) return true;
  }
  return false;
}

std::string Meter::reason() const {
  if (readable()) return "";
  if (!probe_reason_.empty()) return probe_reason_;
  std::string out;
  for (const Counter& c : counters_) {
    const std::string why = c.readable ? c.name + " is readable but not a whole package or GPU" : c.reason;
    out += (out.empty() ? "" : "; ") + c.source + ": " + why;
  }
  return out;
}

void Meter::start() {
  start_.assign(counters_.size(), std::nan(""));
  for (size_t i = 0; i < counters_.size(); ++i) {
    if (readers_[i]) start_[i] = readers_[i]->joules();
  }
  start_seconds_ = now_seconds();
}

Measurement Meter::stop() {
  Measurement m;
  m.seconds = now_seconds() - start_seconds_;
  if (start_.size() != counters_.size()) throw std::logic_error("energy::Meter::stop() without start()");
  std::string failed;
  for (size_t i = 0; i < counters_.size(); ++i) {
    if (!readers_[i]) continue;
    const double end = readers_[i]->joules();
    if (std::isnan(end) || std::isnan(start_[i])) {
      failed += (failed.empty() ? "" : ", ") + counters_[i].name;
      continue;
    }
    const double j = delta_joules(start_[i], end, counters_[i].wrap_joules);
    m.parts.push_back({counters_[i].name, j, counters_[i].in_total});
    if (counters_[i].in_total) {
      m.joules += j;
      m.readable = true;
    }
  }
  if (!m.readable) m.reason = failed.empty() ? reason() : "reading " + failed + " failed";
  return m;
}

Meter& system_meter() {
  static Meter meter;
  return meter;
}

std::string json(const Measurement& m) {
  using harness::json_number;
  using harness::json_string;
  if (!m.readable) {
    return "{\"readable\": false, \"reason\": " + json_string(m.reason.empty() ? "not measured" : m.reason) + "}";
  }
  std::string out = "{\"readable\": true, \"kind\": \"measured\", \"joules\": " + json_number(m.joules) +
                    ", \"seconds\": " + json_number(m.seconds) + ", \"watts\": " + json_number(m.watts()) +
                    ", \"runs\": " + std::to_string(m.runs) + ", \"joules_per_run\": " + json_number(m.joules_per_run()) +
                    ", \"counters\": {";
  for (size_t i = 0; i < m.parts.size(); ++i) {
    out += (i ? ", " : "") + json_string(m.parts[i].name) + ": " + json_number(m.parts[i].joules);
  }
  return out + "}}";
}

std::string probe_json(const Meter& meter) {
  using harness::json_string;
  std::string names;
  for (const Counter& c : meter.counters()) {
    if (c.readable) names += (names.empty() ? "" : ", ") + json_string(c.source + " " + c.name);
  }
  return std::string("{\"readable\": ") + (meter.readable() ? "true" : "false") + ", \"counters\": [" + names +
         "], \"reason\": " + json_string(meter.reason()) + "}";
}

// ---- estimated ------------------------------------------------------------------------------

const char* name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::int8: return "int8";
    case Precision::int4: return "int4";
    case Precision::ternary: return "ternary";
  }
  return "?";
}

double EnergyModel::pj_per_mac(Precision p) const {
  switch (p) {
    case Precision::fp32: return pj_mac_fp32;
    case Precision::bf16: return pj_mac_bf16;
    case Precision::int8: return pj_mac_int8;
    case Precision::int4: return pj_mac_int4;
    case Precision::ternary: return pj_mac_ternary;
  }
  return 0.0;
}

Estimate estimate_joules(double macs, Precision precision, double dram_bytes, double sram_bytes,
                         const EnergyModel& model) {
  Estimate e;
  e.model = model.name;
  e.compute_joules = macs * model.pj_per_mac(precision) * 1e-12;
  e.dram_joules = dram_bytes * model.pj_per_dram_byte * 1e-12;
  e.sram_joules = sram_bytes * model.pj_per_sram_byte * 1e-12;
  return e;
}

std::string JoulesPerToken::label() const {
  std::ostringstream os;
  os << std::setprecision(4) << joules << " J/token " << (kind == Kind::measured ? "(measured)" : "(estimate)");
  return os.str();
}

JoulesPerToken per_token(const Measurement& m, double tokens) {
  if (!m.readable) throw std::invalid_argument("no joules per token from an unreadable measurement: " + m.reason);
  if (tokens <= 0) throw std::invalid_argument("joules per token needs at least one token");
  return {JoulesPerToken::Kind::measured, m.joules / tokens};
}

JoulesPerToken per_token(const Estimate& e, double tokens) {
  if (tokens <= 0) throw std::invalid_argument("joules per token needs at least one token");
  return {JoulesPerToken::Kind::estimated, e.joules() / tokens};
}

JoulesPerToken measured_or_estimated(const Measurement& m, const Estimate& e, double tokens) {
  return m.readable ? per_token(m, tokens) : per_token(e, tokens);
}

// ---- the energy roofline ----------------------------------------------------------------------

std::vector<WeightFormat> weight_formats() {
  return {
      {"fp32", 32.0, 1.0, Precision::fp32, "32-bit float"},
      {"bf16", 16.0, 1.0, Precision::bf16, "16-bit brain float"},
      {"int8", 8.0, 1.0, Precision::int8, "8-bit integer, a scale per row (ignored: < 0.1%)"},
      {"int4", 4.0 + 16.0 / 128.0, 1.0, Precision::int4, "4-bit integer + a 16-bit scale per 128"},
      {"ternary", 2.0, 1.0, Precision::ternary, "{-1, 0, +1}, 4 a byte (log2 3 = 1.58 is the bound)"},
      {"sparse24", (16.0 + 2.0) / 2.0, 0.5, Precision::bf16, "2:4 bf16: 2 of 4 kept, 16 bits + 2-bit index each"},
  };
}

std::vector<RooflineRow> energy_roofline(double params, const EnergyModel& model) {
  std::vector<RooflineRow> rows;
  for (const WeightFormat& f : weight_formats()) {
    RooflineRow r;
    r.format = f;
    r.bytes_per_token = params * f.bits_per_weight / 8.0;
    r.energy = estimate_joules(params * f.macs_per_weight, f.precision, r.bytes_per_token, 0.0, model);
    r.fetch_share = r.energy.joules() > 0 ? r.energy.dram_joules / r.energy.joules() : 0.0;
    r.balance_macs_per_byte = model.pj_per_dram_byte / model.pj_per_mac(f.precision);
    // intensity at batch b = b * macs_per_weight / (bits_per_weight / 8)
    r.balance_batch = r.balance_macs_per_byte * (f.bits_per_weight / 8.0) / f.macs_per_weight;
    rows.push_back(r);
  }
  return rows;
}

void write_roofline(std::ostream& out, double params, const std::vector<RooflineRow>& rows, const EnergyModel& model) {
  auto num = [](double v, int digits) {  // digits significant, but never an exponent
    std::ostringstream os;
    if (v >= 1000) {
      os << std::fixed << std::setprecision(0) << v;
    } else {
      os << std::setprecision(digits) << v;
    }
    return os.str();
  };
  out << "Energy roofline, ESTIMATE (no counter read): a decoder with " << num(params / 1e6, 4)
      << "M weights, one token at batch 1 reads every weight once from DRAM.\n"
      << "Model: " << model.citation << "; " << num(model.pj_per_dram_byte, 4) << " pJ per DRAM byte.\n\n";
  out << "| format | bits/weight | MB/token | pJ/MAC | fetch mJ | arithmetic mJ | mJ/token (estimate) | fetch share "
         "| MAC/byte at balance | batch at balance |\n";
  out << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const RooflineRow& r : rows) {
    out << "| " << r.format.name << " | " << num(r.format.bits_per_weight, 4) << " | " << num(r.bytes_per_token / 1e6, 4)
        << " | " << num(model.pj_per_mac(r.format.precision), 3) << " | " << num(r.energy.dram_joules * 1e3, 4) << " | "
        << num(r.energy.compute_joules * 1e3, 4) << " | " << num(r.energy.joules() * 1e3, 4) << " | "
        << num(100 * r.fetch_share, 3) << "% | " << num(r.balance_macs_per_byte, 4) << " | " << num(r.balance_batch, 4)
        << " |\n";
  }
  // what the table shows, computed from its rows
  double lo = 1.0, hi = 0.0, min_batch = 1e300;
  for (const RooflineRow& r : rows) {
    lo = std::min(lo, r.fetch_share);
    hi = std::max(hi, r.fetch_share);
    min_batch = std::min(min_batch, r.balance_batch);
  }
  if (rows.empty()) return;
  out << "\nBelow the balance batch, fetching the weights costs more energy than multiplying them. At batch 1\n"
      << "the fetch is " << num(100 * lo, 3) << "% to " << num(100 * hi, 3) << "% of each format's energy"
      << (lo > 0.9 ? ", so joules per token follow bytes per token" : "") << "; the arithmetic catches up only from a batch of "
      << num(min_batch, 3) << " (the lowest balance above).\n";
}

}  // namespace kernels::energy
