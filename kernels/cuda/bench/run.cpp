// kernels/cuda/bench/run.cpp: the GPU harness (kernels/cuda/bench/run.h): ceilings,
// validate -> time -> napkin math, the JSON and markdown records, and the goals read back.
#include "kernels/cuda/bench/run.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include <functional>

#include "kernels/clock.h"

namespace kernels::cuda::bench {

namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

// GB/s or GFLOP/s: three significant digits below 100 (the emulator's 0.00193 GB/s is not 0.0).
std::string rate(double v) {
  if (v >= 100 || v <= 0) return fixed(v, v <= 0 ? 1 : 0);
  std::ostringstream os;
  os << std::setprecision(3) << v;
  return os.str();
}

std::string percent(double frac) { return frac > 0 ? fixed(100 * frac, 0) + "%" : "-"; }

// Milliseconds with enough digits to tell 0.012 from 0.015.
std::string ms(double seconds) {
  const double m = seconds * 1e3;
  return fixed(m, m < 1 ? 4 : m < 100 ? 3 : 1);
}

std::string bytes_str(double b) {
  if (b <= 0) return "0";
  if (b < 1e6) return fixed(b / 1e3, 1) + " kB";
  if (b < 1e9) return fixed(b / 1e6, 1) + " MB";
  return fixed(b / 1e9, 2) + " GB";
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Device& choose_device(const std::string& which) {
  if (which.empty()) return default_device();
  if (which == "emu" || which == "emulator") return emulator();
  if (which == "gpu") {
    std::string why;
    Device* g = gpu(&why);
    if (!g) throw Error("--device gpu, but there is no usable GPU: " + why);
    return *g;
  }
  throw std::invalid_argument("--device '" + which + "' is not understood: use gpu or emu");
}

// ---- run 1-4 ---------------------------------------------------------------------------------

harness::Clock gpu_clock(Device& dev) {
  harness::Clock c;
  c.seconds = [&dev](const std::function<void()>& run) { return dev.time_ms(run) * 1e-3; };
  c.flush = [&dev] { dev.flush_l2(); };
  c.wait = [&dev] { dev.synchronize(); };
  return c;
}

namespace {

std::vector<size_t> choose_variants(const Op& op, const std::vector<Variant>& variants,
                                    const std::vector<std::string>& wanted) {
  return harness::choose_variants("CUDA op " + op.name, variants, wanted);
}

// Whether a row's arithmetic rounds the inputs (TF32 or BF16 tensor cores): its id, name or
// summary says so.
bool says_reduced_precision(const std::string& text) {
  const std::string t = lower(text);
  return t.find("tf32") != std::string::npos || t.find("bf16") != std::string::npos;
}

// The peer the others are compared with: the first timed one that is not TF32 or BF16
// (cuBLAS SGEMM before cuBLAS TF32: the same arithmetic as our fp32 versions), else the
// first timed one.
const Result* reference_peer(const std::vector<Result>& rows) {
  const Result* first = nullptr;
  for (const Result& r : rows) {
    if (!r.peer || !r.timed) continue;
    if (!first) first = &r;
    if (!says_reduced_precision(r.variant + " " + r.name + " " + r.summary)) return &r;
  }
  return first;
}

void napkin(std::vector<Result>& rows, const Ceilings& c) {
  for (Result& r : rows) {
    if (!r.timed) continue;
    const double s = r.timing.median;
    r.gflops = r.flops > 0 && s > 0 ? r.flops / s / 1e9 : 0.0;
    r.gbs = r.bytes > 0 && s > 0 ? r.bytes / s / 1e9 : 0.0;
    r.frac_bw = c.copy_gbs > 0 ? r.gbs / c.copy_gbs : 0.0;
  }
  const Result* peer = reference_peer(rows);
  const std::string peer_id = peer ? peer->variant : "";
  const double peer_s = peer ? peer->timing.median : 0.0, peer_gflops = peer ? peer->gflops : 0.0;
  for (Result& r : rows) {
    if (!r.timed) continue;
    if (peer && r.timing.median > 0) {
      r.vs_peer = peer_s / r.timing.median;
      r.peer_variant = peer_id;
    }
    // Our versions against the peer's measured rate where there is one (what is achievable
    // for this op on this GPU); the peers, and ops without one, against the FMA peak.
    if (r.flops > 0 && !r.peer && peer && peer_gflops > 0) {
      r.ceiling_gflops = peer_gflops;
      r.ceiling = peer_id;
    } else if (r.flops > 0 && c.fma_gflops > 0) {
      r.ceiling_gflops = c.fma_gflops;
      r.ceiling = "fma peak";
    }
    r.frac_peak = r.ceiling_gflops > 0 ? r.gflops / r.ceiling_gflops : 0.0;
  }
}

void print_table(std::ostream& log, const std::vector<Result>& rows) {
  const Result* peer = reference_peer(rows);
  log << "  " << std::left << std::setw(30) << "variant" << std::right << std::setw(11) << "ms" << std::setw(11)
      << "min ms" << std::setw(10) << "GFLOP/s" << std::setw(7) << "peak" << std::setw(9) << "GB/s" << std::setw(7)
      << "copy";
  if (peer) log << std::setw(12) << ("vs " + peer->variant);
  log << std::setw(11) << "workspace" << "\n";
  for (const Result& r : rows) {
    log << "  " << std::left << std::setw(30) << (r.variant + " " + r.name) << std::right;
    if (!r.timed) {
      log << "  " << r.note << "\n";
      continue;
    }
    log << std::setw(11) << ms(r.timing.median) << std::setw(11) << ms(r.timing.min) << std::setw(10)
        << (r.flops > 0 ? rate(r.gflops) : "-") << std::setw(7) << percent(r.frac_peak) << std::setw(9)
        << rate(r.gbs) << std::setw(7) << percent(r.frac_bw);
    if (peer) log << std::setw(12) << (r.vs_peer > 0 ? fixed(r.vs_peer, 2) + "x" : "-");
    log << std::setw(11) << (r.workspace_bytes > 0 ? bytes_str(static_cast<double>(r.workspace_bytes)) : "-")
        << "\n";
  }
}

}  // namespace

std::vector<std::string> sizes_for(const Device& dev, const Op& op, const RunOptions& opts) {
  if (!opts.sizes.empty()) return opts.sizes;
  // The GPU sizes on the emulator would take hours: it runs the test sizes.
  return opts.quick || dev.info().emulated ? op.test_sizes : op.sizes;
}

std::vector<Result> run_op(Device& dev, const Op& op, const RunOptions& opts, const Ceilings& ceilings,
                           std::ostream& log) {
  const DeviceInfo& info = dev.info();
  const std::vector<Variant> variants = op.variants(dev);
  if (variants.empty()) {
    if (!opts.variants.empty()) choose_variants(op, variants, opts.variants);  // names an absent one: say so
    log << "\n== " << op.name << ": no versions on " << info.name << " (not written yet): skipped\n";
    return {};
  }
  const std::vector<size_t> chosen = choose_variants(op, variants, opts.variants);
  const std::vector<std::string> sizes = sizes_for(dev, op, opts);
  // The emulator's times are CPU times; a GPU's include the host's launches: both suffer.
  warn_if_busy(log);
  if (sizes.empty()) {
    log << "\n== " << op.name << ": no sizes to run (the op lists none): skipped\n";
    return {};
  }
  TimingOptions timing = opts.timing;
  if (opts.quick) {
    timing.warmup = 0;
    timing.repeats = 1;
  }

  std::vector<Result> all;
  uint64_t seed = opts.seed;
  for (const std::string& size : sizes) {
    // A size the op cannot read throws std::invalid_argument (the caller's mistake: let it
    // through); a device error (out of memory) is this size's problem only.
    std::unique_ptr<Problem> problem;
    try {
      problem = op.make(dev, size, seed++);
    } catch (const Error& e) {
      log << "\n== " << op.name << " " << size << ": could not set up: " << e.what() << "\n";
      for (size_t v : chosen) {
        Result r;
        r.op = op.name;
        r.size = size;
        r.shape = size;
        r.variant = variants[v].id;
        r.name = variants[v].name;
        r.summary = variants[v].summary;
        r.peer = variants[v].peer;
        r.min_sm = variants[v].needs.min_sm;
        r.skipped = true;
        r.note = std::string("not run: could not set up the problem: ") + e.what();
        all.push_back(r);
      }
      continue;
    }
    log << "\n== " << op.name << " " << problem->shape() << ": ";
    if (problem->flops() > 0) log << fixed(problem->flops() / 1e9, 3) << " GFLOP, ";
    double least_bytes = problem->bytes(chosen.front());
    for (size_t v : chosen) least_bytes = std::min(least_bytes, problem->bytes(v));
    log << bytes_str(least_bytes) << " moved at least" << (info.emulated ? "  [EMULATED: CPU times]" : "") << "\n";

    // 1-2. validate every chosen variant before anything is timed (the one loop,
    // kernels/harness.h), skipping what this device or this form cannot run.
    const auto cannot_run = [&](size_t v) -> std::string {
      const std::string unsupported = problem->unsupported(v);
      if (!unsupported.empty()) return "skipped: " + unsupported;
      const int min_sm = variants[v].needs.min_sm;
      if (min_sm > info.sm) {
        return "skipped: needs compute capability " + std::to_string(min_sm / 10) + "." + std::to_string(min_sm % 10) +
               ", " + info.name + " is " + std::to_string(info.sm / 10) + "." + std::to_string(info.sm % 10);
      }
      return "";
    };
    std::vector<Result> rows;
    size_t i = 0;
    for (const harness::Measured& m : harness::validate_variants(op.name, *problem, variants, chosen, cannot_run, log)) {
      Result r;
      static_cast<harness::Measured&>(r) = m;
      r.size = size;
      r.min_sm = variants[chosen[i]].needs.min_sm;
      r.workspace_bytes = problem->workspace_bytes(chosen[i]);
      rows.push_back(r);
      ++i;
    }
    log << "  validated:";
    for (const Result& r : rows) log << " " << r.variant << (r.valid ? " ok " : r.skipped ? " skipped " : " FAILED ");
    log << "\n";

    // 3-4. time the valid ones, then the napkin math against the ceilings and the peer.
    harness::time_valid(rows, *problem, chosen, timing, gpu_clock(dev), log);
    napkin(rows, ceilings);
    print_table(log, rows);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

// ---- a run, saved ----------------------------------------------------------------------------


std::string device_slug(const std::string& name) {
  std::string slug;
  for (char ch : name) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isalnum(u)) {
      slug += static_cast<char>(std::tolower(u));
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? "unknown-device" : slug;
}

std::string summary_line(const Result& r) {
  std::ostringstream os;
  os << r.variant << " " << r.name << ": ";
  if (!r.timed) {
    os << r.note;
    return os.str();
  }
  os << ms(r.timing.median) << " ms";
  if (r.flops > 0) {
    os << ", " << rate(r.gflops) << " GFLOP/s";
    if (r.frac_peak > 0) os << " (" << percent(r.frac_peak) << " of " << r.ceiling << ")";
  }
  os << ", " << rate(r.gbs) << " GB/s";
  if (r.frac_bw > 0) os << " (" << percent(r.frac_bw) << " of copy)";
  if (r.vs_peer > 0 && !r.peer) os << ", " << fixed(r.vs_peer, 2) << "x " << r.peer_variant;
  if (r.workspace_bytes > 0) os << ", workspace " << bytes_str(static_cast<double>(r.workspace_bytes));
  return os.str();
}

int count_failed(const std::vector<Result>& results) {
  int n = 0;
  for (const Result& r : results) n += r.failed() ? 1 : 0;
  return n;
}

namespace {

// Seven significant digits: the samples of a microsecond kernel keep their differences.
std::string json_number(double v) { return harness::json_number(v, 7); }
using harness::json_string;

const char* json_bool(bool b) { return b ? "true" : "false"; }

std::string sm_str(int sm) { return std::to_string(sm / 10) + "." + std::to_string(sm % 10); }

}  // namespace

// The schema, "nnlab-cuda-bench/1":
//   schema, emulated, warning ("" on a GPU)
//   device   {name, emulated, sm, multiprocessors, memory_bytes, l2_bytes, runtime}
//   host     {cpu, cores, compiler, date}
//   ceilings {copy_gbs, copy_bytes, fma_gflops}
//   timing   {warmup, repeats, max_seconds, flush_l2}
//   results  [{op, size, shape, variant, name, summary, peer, min_sm, valid, timed, skipped,
//              note, max_abs_err, median_ms, min_ms, samples_ms, flops, bytes, gflops, gbs,
//              frac_bw, ceiling, ceiling_gflops, frac_peak, vs_peer, peer_variant,
//              workspace_bytes}]
void write_json(std::ostream& out, const Report& rep) {
  const DeviceInfo& d = rep.device;
  out << "{\n  \"schema\": \"nnlab-cuda-bench/1\",\n  \"emulated\": " << json_bool(d.emulated)
      << ",\n  \"warning\": " << json_string(d.emulated ? emulator_warning() : "") << ",\n";
  out << "  \"device\": {\"name\": " << json_string(d.name) << ", \"emulated\": " << json_bool(d.emulated)
      << ", \"sm\": " << d.sm << ", \"multiprocessors\": " << d.multiprocessors
      << ", \"memory_bytes\": " << d.memory_bytes << ", \"l2_bytes\": " << d.l2_bytes
      << ", \"runtime\": " << json_string(d.runtime) << "},\n";
  out << "  \"host\": {\"cpu\": " << json_string(rep.host.cpu) << ", \"cores\": " << rep.host.cores
      << ", \"compiler\": " << json_string(rep.host.compiler) << ", \"date\": " << json_string(rep.host.date)
      << ", \"energy\": " << (rep.host.energy.empty() ? "null" : rep.host.energy) << "},\n";
  out << "  \"ceilings\": {\"copy_gbs\": " << json_number(rep.ceilings.copy_gbs)
      << ", \"copy_bytes\": " << rep.ceilings.copy_bytes << ", \"fma_gflops\": " << json_number(rep.ceilings.fma_gflops)
      << "},\n";
  out << "  \"timing\": {\"warmup\": " << rep.timing.warmup << ", \"repeats\": " << rep.timing.repeats
      << ", \"max_seconds\": " << json_number(rep.timing.max_seconds)
      << ", \"flush_l2\": " << json_bool(rep.timing.flush) << "},\n";
  out << "  \"results\": [";
  for (size_t i = 0; i < rep.results.size(); ++i) {
    const Result& r = rep.results[i];
    out << (i == 0 ? "\n" : ",\n") << "    {\"op\": " << json_string(r.op) << ", \"size\": " << json_string(r.size)
        << ", \"shape\": " << json_string(r.shape) << ", \"variant\": " << json_string(r.variant)
        << ", \"name\": " << json_string(r.name) << ", \"summary\": " << json_string(r.summary)
        << ", \"peer\": " << json_bool(r.peer) << ", \"min_sm\": " << r.min_sm << ", \"valid\": " << json_bool(r.valid)
        << ", \"timed\": " << json_bool(r.timed) << ", \"skipped\": " << json_bool(r.skipped)
        << ", \"note\": " << json_string(r.note) << ", \"max_abs_err\": " << json_number(r.max_abs_err)
        << ", \"median_ms\": " << json_number(r.timing.median * 1e3) << ", \"min_ms\": " << json_number(r.timing.min * 1e3)
        << ", \"samples_ms\": [";
    for (size_t s = 0; s < r.timing.seconds.size(); ++s) out << (s ? ", " : "") << json_number(r.timing.seconds[s] * 1e3);
    out << "], \"flops\": " << json_number(r.flops) << ", \"bytes\": " << json_number(r.bytes)
        << ", \"gflops\": " << json_number(r.gflops) << ", \"gbs\": " << json_number(r.gbs)
        << ", \"frac_bw\": " << json_number(r.frac_bw) << ", \"ceiling\": " << json_string(r.ceiling)
        << ", \"ceiling_gflops\": " << json_number(r.ceiling_gflops) << ", \"frac_peak\": " << json_number(r.frac_peak)
        << ", \"vs_peer\": " << json_number(r.vs_peer) << ", \"peer_variant\": " << json_string(r.peer_variant)
        << ", \"workspace_bytes\": " << r.workspace_bytes << ", \"energy\": " << energy::json(r.energy) << "}";
  }
  out << "\n  ]\n}\n";
}

void write_markdown(std::ostream& out, const Report& rep) {
  const DeviceInfo& d = rep.device;
  out << "# CUDA kernels on " << d.name << "\n\n";
  if (d.emulated) out << "> **" << emulator_warning() << "**\n\n";
  out << "Device: " << d.name << ", compute capability " << sm_str(d.sm) << ", " << d.multiprocessors
      << (d.multiprocessors == 1 ? " SM, " : " SMs, ") << fixed(static_cast<double>(d.memory_bytes) / (1u << 30), 1)
      << " GiB, L2 " << fixed(static_cast<double>(d.l2_bytes) / kMiB, 1) << " MiB; " << d.runtime << ". Host: "
      << rep.host.cpu << ", " << rep.host.cores << " cores. " << rep.host.date << ".\n\n";
  out << "Measured ceilings: device-to-device copy " << rate(rep.ceilings.copy_gbs) << " GB/s ("
      << fixed(static_cast<double>(rep.ceilings.copy_bytes) / kMiB, 0)
      << " MiB copied, read + write counted); FP32 FMA peak "
      << (rep.ceilings.fma_gflops > 0 ? rate(rep.ceilings.fma_gflops) + " GFLOP/s" : "not measured")
      << ". Every version was validated against a CPU reference before it was timed; times are CUDA "
      << "events around one launch, " << rep.timing.warmup << " warm-up runs, then up to "
      << rep.timing.repeats << " runs" << (rep.timing.flush ? ", each after an L2 flush" : "")
      << ": median and min. % peak is of the cuBLAS peer's rate where the op has one, else of the FMA "
      << "peak; % copy is of the copy bandwidth; vs peer is the peer's time / this time.\n\n";
  out << "| op | shape | variant | ms (median) | ms (min) | GFLOP/s | % peak | GB/s | % copy | vs peer | workspace |\n";
  out << "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Result& r : rep.results) {
    out << "| " << r.op << " | " << r.shape << " | " << r.variant << " " << r.name << (r.peer ? " (peer)" : "") << " | ";
    if (!r.timed) {
      out << r.note << " | | | | | | | | |\n";
      continue;
    }
    out << ms(r.timing.median) << " | " << ms(r.timing.min) << " | " << (r.flops > 0 ? rate(r.gflops) : "-")
        << " | " << (r.frac_peak > 0 ? percent(r.frac_peak) + " of " + r.ceiling : "-") << " | " << rate(r.gbs)
        << " | " << percent(r.frac_bw) << " | "
        << (r.vs_peer > 0 ? fixed(r.vs_peer, 2) + "x " + r.peer_variant : "-") << " | "
        << (r.workspace_bytes > 0 ? bytes_str(static_cast<double>(r.workspace_bytes)) : "-") << " |\n";
  }
  if (d.emulated) out << "\n> **" << emulator_warning() << "**\n";
}

// ---- the goals, from a saved JSON --------------------------------------------------------------

namespace {

// Just enough JSON to read write_json's output back: objects, arrays, strings (the escapes
// write_json makes, plus the usual ones), numbers, true, false, null.
struct JValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;
  std::string str;
  std::vector<JValue> items;  // Array
  // Object. A struct declared here and defined below, not std::pair<std::string, JValue>:
  // clang with libstdc++ refuses a vector of pairs of the still-incomplete JValue.
  struct Member;
  std::vector<Member> members;

  const JValue* get(const std::string& key) const;
  double num(const std::string& key, double fallback = 0.0) const {
    const JValue* v = get(key);
    return v && v->kind == Kind::Number ? v->number : fallback;
  }
  std::string text(const std::string& key) const {
    const JValue* v = get(key);
    return v && v->kind == Kind::String ? v->str : "";
  }
  bool flag(const std::string& key) const {
    const JValue* v = get(key);
    return v && v->kind == Kind::Bool && v->boolean;
  }
};

struct JValue::Member {
  std::string first;
  JValue second;
};

const JValue* JValue::get(const std::string& key) const {
  for (const auto& m : members) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

class JReader {
 public:
  explicit JReader(const std::string& s) : s_(s) {}
  JValue document() {
    JValue v = value(0);
    space();
    if (pos_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("not a bench JSON (" + what + " at byte " + std::to_string(pos_) + ")");
  }
  void space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool take(char c) {
    space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    const size_t n = std::char_traits<char>::length(w);
    if (s_.compare(pos_, n, w) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) fail("unfinished escape");
        const char e = s_[pos_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u':  // kept as '?': our files never need it, and a goal never reads one
            if (pos_ + 4 > s_.size()) fail("short \\u escape");
            pos_ += 4;
            c = '?';
            break;
          default: c = e;  // \" \\ \/
        }
      }
      out += c;
    }
    expect('"');
    return out;
  }
  JValue value(int depth) {
    if (depth > 32) fail("nesting too deep");
    space();
    if (pos_ >= s_.size()) fail("unexpected end");
    JValue v;
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = JValue::Kind::Object;
      if (take('}')) return v;
      do {
        space();
        std::string key = string();
        expect(':');
        v.members.push_back({std::move(key), value(depth + 1)});
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.kind = JValue::Kind::Array;
      if (take(']')) return v;
      do {
        v.items.push_back(value(depth + 1));
      } while (take(','));
      expect(']');
    } else if (c == '"') {
      v.kind = JValue::Kind::String;
      v.str = string();
    } else if (word("true")) {
      v.kind = JValue::Kind::Bool;
      v.boolean = true;
    } else if (word("false")) {
      v.kind = JValue::Kind::Bool;
    } else if (word("null")) {
      v.kind = JValue::Kind::Null;
    } else {
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      v.kind = JValue::Kind::Number;
      v.number = std::strtod(begin, &end);
      if (end == begin) fail("unexpected character");
      pos_ += static_cast<size_t>(end - begin);
    }
    return v;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

// A result row as the goals read it.
struct Row {
  std::string op, shape, variant, name, summary;
  bool peer = false, timed = false;
  double median_ms = 0.0, flops = 0.0, bytes = 0.0;
  double workspace = 0.0;
  std::string label() const { return variant + " " + name; }
  bool says_tf32_or_bf16() const { return says_reduced_precision(variant + " " + name + " " + summary); }
};

// The numbers in a shape string: "M=N=K=4096" -> {4096}, "B=8 T=1024 C=768 NH=12" -> ...
std::vector<double> numbers_in(const std::string& s) {
  std::vector<double> out;
  for (size_t i = 0; i < s.size();) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back(std::stod(s.substr(i, j - i)));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

// "B=8 T=1024 C=768 NH=12": the value of `key` ("T"), or -1.
double shape_value(const std::string& shape, const std::string& key) {
  size_t pos = 0;
  while ((pos = shape.find(key + "=", pos)) != std::string::npos) {
    const bool starts_word = pos == 0 || !std::isalnum(static_cast<unsigned char>(shape[pos - 1]));
    const size_t at = pos + key.size() + 1;
    if (starts_word && at < shape.size() && std::isdigit(static_cast<unsigned char>(shape[at]))) {
      return std::stod(shape.substr(at));
    }
    pos = at;
  }
  return -1.0;
}

const Row* fastest(const std::vector<const Row*>& rows) {
  const Row* best = nullptr;
  for (const Row* r : rows) {
    if (r->timed && r->median_ms > 0 && (!best || r->median_ms < best->median_ms)) best = r;
  }
  return best;
}

Goal matmul_goal(const std::vector<Row>& rows) {
  Goal g{"matmul: best version >= 80% of cuBLAS SGEMM at M=N=K=4096", "NOT MEASURED", ""};
  const double want_flops = 2.0 * 4096.0 * 4096.0 * 4096.0;
  std::vector<const Row*> ours, peers;
  for (const Row& r : rows) {
    if (r.op != "matmul" || std::fabs(r.flops - want_flops) > 1e-6 * want_flops) continue;
    const std::vector<double> dims = numbers_in(r.shape);
    if (dims.empty() || !std::all_of(dims.begin(), dims.end(), [](double d) { return d == 4096.0; })) continue;
    if (r.says_tf32_or_bf16()) continue;  // TF32 and BF16 are other arithmetic: not compared with SGEMM
    (r.peer ? peers : ours).push_back(&r);
  }
  const Row* peer = fastest(peers);
  const Row* best = fastest(ours);
  if (!peer) {
    g.detail = "no timed cuBLAS SGEMM peer at M=N=K=4096 in this record";
    return g;
  }
  if (!best) {
    g.verdict = ours.empty() ? "NOT MEASURED" : "FAIL";
    g.detail = ours.empty() ? "no fp32 version of ours at M=N=K=4096" : "no fp32 version of ours was timed (validation failed?)";
    return g;
  }
  const double ratio = peer->median_ms / best->median_ms;
  g.verdict = ratio >= 0.80 ? "PASS" : "FAIL";
  g.detail = best->label() + " " + fixed(best->median_ms, 3) + " ms = " + fixed(100 * ratio, 1) + "% of " +
             peer->label() + " " + fixed(peer->median_ms, 3) + " ms (goal >= 80%)";
  return g;
}

Goal bandwidth_goal(const std::vector<Row>& rows, const std::string& op, double copy_gbs) {
  Goal g{op + ": best version >= 70% of the copy bandwidth", "NOT MEASURED", ""};
  // The op's largest shape, measured by the least bytes any variant moves there (the fused
  // version's compulsory traffic): the one that fills the GPU.
  std::map<std::string, double> least;
  for (const Row& r : rows) {
    if (r.op != op || r.peer || r.bytes <= 0) continue;
    auto it = least.find(r.shape);
    if (it == least.end() || r.bytes < it->second) least[r.shape] = r.bytes;
  }
  if (least.empty()) {
    g.detail = "no " + op + " results in this record";
    return g;
  }
  if (copy_gbs <= 0) {
    g.detail = "the record has no copy bandwidth";
    return g;
  }
  const auto largest = std::max_element(least.begin(), least.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<const Row*> at;
  for (const Row& r : rows) {
    if (r.op == op && !r.peer && r.shape == largest->first) at.push_back(&r);
  }
  const Row* best = fastest(at);
  if (!best) {
    g.verdict = "FAIL";
    g.detail = "no version was timed at " + largest->first + " (validation failed?)";
    return g;
  }
  // The compulsory bytes over the fastest time: an unfused version gets no credit for the
  // extra trips it makes.
  const double gbs = largest->second / (best->median_ms * 1e-3) / 1e9;
  const double frac = gbs / copy_gbs;
  g.verdict = frac >= 0.70 ? "PASS" : "FAIL";
  g.detail = best->label() + " at " + largest->first + ": " + fixed(gbs, 1) + " GB/s = " + fixed(100 * frac, 1) +
             "% of the copy's " + fixed(copy_gbs, 1) + " GB/s (goal >= 70%)";
  return g;
}

Goal attention_goal(const std::vector<Row>& rows) {
  Goal g{"attention: fused at least as fast as unfused at every T >= 1024, fused workspace O(T)", "NOT MEASURED", ""};
  std::map<std::string, std::vector<const Row*>> by_shape;
  for (const Row& r : rows) {
    if (r.op == "attention" && !r.peer) by_shape[r.shape].push_back(&r);
  }
  if (by_shape.empty()) {
    g.detail = "no attention results in this record";
    return g;
  }
  bool any = false, ok = true;
  std::string detail;
  for (const auto& [shape, at] : by_shape) {
    const double T = shape_value(shape, "T");
    if (T < 0) {
      detail += "cannot read T from the shape '" + shape + "'; ";
      continue;
    }
    if (T < 1024) continue;
    any = true;
    // Unfused: keeps the (B, NH, T, T) scores, a workspace growing with T^2. Fused: less
    // than that (0, or a few floats per row: O(T)). Without B and NH in the shape: any
    // workspace counts as unfused.
    const double B = shape_value(shape, "B"), NH = shape_value(shape, "NH");
    const bool known = B > 0 && NH > 0;
    const double scores = known ? B * NH * T * T * 4.0 : 0.0;
    std::vector<const Row*> fused, unfused;
    for (const Row* r : at) {
      const bool quadratic = known ? r->workspace >= 0.5 * scores : r->workspace > 0;
      (quadratic ? unfused : fused).push_back(r);
    }
    const Row* f = fastest(fused);
    const Row* u = fastest(unfused);
    detail += "T=" + fixed(T, 0) + ": ";
    if (!f) {
      ok = false;
      detail += "no fused version timed; ";
      continue;
    }
    // O(T): at most 16 floats per (batch, head, row) of scratch.
    const bool linear = known ? f->workspace <= 64.0 * B * NH * T : f->workspace == 0;
    if (!linear) ok = false;
    detail += f->label() + " " + fixed(f->median_ms, 3) + " ms (workspace " + fixed(f->workspace, 0) + " B" +
              (linear ? "" : ", NOT O(T)") + ")";
    if (u) {
      const bool faster = f->median_ms <= u->median_ms;
      if (!faster) ok = false;
      detail += (faster ? " <= " : " > ") + u->label() + " " + fixed(u->median_ms, 3) + " ms (workspace " +
                bytes_str(u->workspace) + ")";
    } else {
      detail += ", no unfused version timed";
    }
    detail += "; ";
  }
  while (!detail.empty() && (detail.back() == ' ' || detail.back() == ';')) detail.pop_back();
  if (!any) {
    g.detail = detail.empty() ? "no attention shape with T >= 1024 in this record" : detail;
    return g;
  }
  g.verdict = ok ? "PASS" : "FAIL";
  g.detail = detail;
  return g;
}

}  // namespace

bool GoalsReport::all_pass() const {
  return !goals.empty() && std::all_of(goals.begin(), goals.end(), [](const Goal& g) { return g.pass(); });
}

GoalsReport check_goals(const std::string& json_text) {
  const JValue root = JReader(json_text).document();
  const JValue* results = root.get("results");
  const JValue* device = root.get("device");
  if (root.kind != JValue::Kind::Object || !results || results->kind != JValue::Kind::Array || !device) {
    throw std::invalid_argument("not a bench JSON (no \"device\" and \"results\": write one with `nnlab cuda bench --json FILE`)");
  }
  GoalsReport rep;
  rep.device = device->text("name");
  rep.emulated = root.flag("emulated") || device->flag("emulated");
  double copy_gbs = 0.0;
  if (const JValue* c = root.get("ceilings")) copy_gbs = c->num("copy_gbs");
  std::vector<Row> rows;
  for (const JValue& item : results->items) {
    Row r;
    r.op = item.text("op");
    r.shape = item.text("shape");
    r.variant = item.text("variant");
    r.name = item.text("name");
    r.summary = item.text("summary");
    r.peer = item.flag("peer");
    r.timed = item.flag("timed") && item.flag("valid");
    r.median_ms = item.num("median_ms");
    r.flops = item.num("flops");
    r.bytes = item.num("bytes");
    r.workspace = item.num("workspace_bytes");
    rows.push_back(r);
  }
  rep.goals.push_back(matmul_goal(rows));
  for (const char* op : {"softmax", "layernorm_forward", "bias_gelu", "adamw"}) {
    rep.goals.push_back(bandwidth_goal(rows, op, copy_gbs));
  }
  rep.goals.push_back(attention_goal(rows));
  return rep;
}

void print_goals(std::ostream& out, const GoalsReport& rep) {
  out << "goals on " << (rep.device.empty() ? "an unnamed device" : rep.device) << ":\n";
  if (rep.emulated) out << "  " << emulator_warning() << " The goals are about a GPU: these verdicts mean nothing.\n";
  int passed = 0;
  for (const Goal& g : rep.goals) {
    out << "  " << std::left << std::setw(13) << g.verdict << g.name << "\n      " << g.detail << "\n";
    passed += g.pass() ? 1 : 0;
  }
  out << passed << " of " << rep.goals.size() << " goals pass" << (rep.emulated ? " (EMULATED: meaningless)" : "")
      << "\n";
}

}  // namespace kernels::cuda::bench
