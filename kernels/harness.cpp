// kernels/harness.cpp: reference -> validate -> time -> napkin math, for every op.
#include "kernels/harness.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "kernels/clock.h"
#include "kernels/simd.h"
#include "kernels/splitmix64.h"

#ifndef NNLAB_CXX_FLAGS
#define NNLAB_CXX_FLAGS "unknown"
#endif

namespace kernels::harness {

// ---- 1-2. validation ------------------------------------------------------------------

uint64_t Random::next_u64() {
  // splitmix64 (kernels/splitmix64.h): a counter through a strong bit mixer.
  const uint64_t z = splitmix64(state_);
  state_ += kSplitMix64Gamma;
  return z;
}

float Random::uniform(float lo, float hi) {
  // The top 24 bits make a float in [0, 1) exactly.
  const float unit = static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);
  return lo + (hi - lo) * unit;
}

void fill_random(std::span<float> out, uint64_t seed, float lo, float hi) {
  Random rng(seed);
  for (float& x : out) x = rng.uniform(lo, hi);
  // An all-zero buffer would let a kernel that writes nothing pass: make sure.
  if (!out.empty() && std::all_of(out.begin(), out.end(), [](float x) { return x == 0.0f; })) {
    out[0] = hi > 0.0f ? hi / 2 : lo / 2;
  }
}

GuardedBuffer::GuardedBuffer(size_t n, size_t misalign, float fill) : n_(n) {
  constexpr size_t kAlignFloats = 64 / sizeof(float);
  storage_.assign(n + kAlignFloats + misalign + kGuard, kSentinel);
  // First 64-byte boundary inside the storage, then `misalign` floats past it.
  const auto base = reinterpret_cast<uintptr_t>(storage_.data());
  const size_t to_boundary = ((64 - base % 64) % 64) / sizeof(float);
  offset_ = to_boundary + misalign;
  std::fill(storage_.begin() + static_cast<ptrdiff_t>(offset_),
            storage_.begin() + static_cast<ptrdiff_t>(offset_ + n), fill);
}

std::string GuardedBuffer::guard_damage(const std::string& name) const {
  for (size_t g = 0; g < kGuard; ++g) {
    const float v = storage_[offset_ + n_ + g];
    if (!(v == kSentinel)) {
      std::ostringstream os;
      os << name << ": the sentinel " << g << " past the end (index " << n_ + g << " of a "
         << n_ << "-element buffer) was overwritten with " << v << ": a write runs past the end\n";
      return os.str();
    }
  }
  return "";
}

namespace {

void note_mismatch(Check& c, const std::string& name, size_t i, float got, double want,
                   size_t max_listed) {
  if (c.mismatches < max_listed) {
    std::ostringstream os;
    os << std::setprecision(8) << "  " << name << "[" << i << "] = " << got
       << " but the reference says " << want << "\n";
    c.report += os.str();
  }
  ++c.mismatches;
}

void compare_one(Check& c, const std::string& name, size_t i, float got, double want, Tolerance tol,
                 size_t max_listed) {
  ++c.checked;
  const double err = std::fabs(static_cast<double>(got) - want);
  // Written so that NaN fails: every comparison with NaN is false.
  const bool ok = err <= tol.atol + tol.rtol * std::fabs(want);
  if (!ok) {
    note_mismatch(c, name, i, got, want, max_listed);
  }
  if (std::isfinite(err)) c.max_abs_err = std::max(c.max_abs_err, err);
}

void finish_report(Check& c, const std::string& name, size_t max_listed) {
  if (c.mismatches > max_listed) {
    c.report += "  ... and " + std::to_string(c.mismatches - max_listed) + " more\n";
  }
  if (c.mismatches > 0) {
    c.report = name + ": " + std::to_string(c.mismatches) + " of " + std::to_string(c.checked) +
               " elements differ from the reference\n" + c.report;
  }
}

}  // namespace

Check compare(const std::string& name, std::span<const float> got, std::span<const double> want,
              Tolerance tol, size_t max_listed) {
  Check c;
  if (got.size() != want.size()) {
    c.mismatches = 1;
    c.report = name + ": " + std::to_string(got.size()) + " outputs but the reference has " +
               std::to_string(want.size()) + "\n";
    return c;
  }
  for (size_t i = 0; i < got.size(); ++i) compare_one(c, name, i, got[i], want[i], tol, max_listed);
  finish_report(c, name, max_listed);
  return c;
}

Check compare_at(const std::string& name, std::span<const float> got, std::span<const size_t> index,
                 std::span<const double> want, Tolerance tol, size_t max_listed) {
  Check c;
  for (size_t s = 0; s < index.size() && s < want.size(); ++s) {
    const size_t i = index[s];
    const float g = i < got.size() ? got[i] : GuardedBuffer::kNaN;
    compare_one(c, name, i, g, want[s], tol, max_listed);
  }
  finish_report(c, name, max_listed);
  return c;
}

std::vector<size_t> product_samples(int M, int N, int K, uint64_t seed) {
  const size_t m = static_cast<size_t>(M), n = static_cast<size_t>(N), total = m * n;
  std::vector<size_t> samples;
  if (static_cast<double>(total) * K <= 64.0 * 1024 * 1024) {
    samples.resize(total);
    for (size_t i = 0; i < total; ++i) samples[i] = i;
    return samples;
  }
  for (size_t j = 0; j < n; ++j) {
    samples.push_back(j);                // first row
    samples.push_back((m - 1) * n + j);  // last row
  }
  for (size_t i = 0; i < m; ++i) {
    samples.push_back(i * n);          // first column
    samples.push_back(i * n + n - 1);  // last column
  }
  Random rng(seed);
  for (int r = 0; r < 4096; ++r) samples.push_back(rng.next_u64() % total);
  return samples;
}

Check merge(Check a, const Check& b) {
  a.checked += b.checked;
  a.mismatches += b.mismatches;
  a.max_abs_err = std::max(a.max_abs_err, b.max_abs_err);
  a.report += b.report;
  return a;
}

// ---- 3. timing ----------------------------------------------------------------------

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void flush_caches() {
  // Twice the last-level cache, written then read: whatever the kernel left in any level
  // is gone. Allocated once; the sum goes to a volatile so the reads cannot be dropped.
  static std::vector<float> buffer(2 * last_level_cache_bytes() / sizeof(float));
  static volatile float sink = 0.0f;
  float sum = 0.0f;
  for (size_t i = 0; i < buffer.size(); i += 16) buffer[i] += 1.0f;  // one touch per line
  for (size_t i = 0; i < buffer.size(); i += 16) sum += buffer[i];
  sink = sink + sum;
}

Clock cpu_clock() {
  Clock c;
  c.seconds = [](const std::function<void()>& run) {
    const double t0 = now_seconds();
    run();
    return now_seconds() - t0;
  };
  c.flush = flush_caches;
  return c;
}

Timing time_runs(const std::function<void()>& run, const TimingOptions& opts, const Clock& clock) {
  Timing t;
  const double warmup_start = now_seconds();
  for (int w = 0; w < opts.warmup; ++w) run();
  if (clock.wait) clock.wait();
  // A case slower than the whole budget gets one timed run after its warm-up.
  const bool slow = now_seconds() - warmup_start > opts.max_seconds;
  const double budget_start = now_seconds();
  for (int r = 0; r < std::max(1, opts.repeats); ++r) {
    if (r > 0 && (slow || now_seconds() - budget_start > opts.max_seconds)) break;
    if (opts.flush) clock.flush();
    t.seconds.push_back(clock.seconds(run));
  }
  t.median = median_of(t.seconds);
  t.min = *std::min_element(t.seconds.begin(), t.seconds.end());
  return t;
}

// ---- the bench interface ------------------------------------------------------------

void Problem::set_threads(int threads) { omp_set_num_threads(threads); }

// ---- the one validate-then-time loop --------------------------------------------------

bool named(const std::vector<std::string>& wanted, const Variant& v) {
  return std::find(wanted.begin(), wanted.end(), v.id) != wanted.end() ||
         std::find(wanted.begin(), wanted.end(), v.name) != wanted.end();
}

std::vector<size_t> choose_variants(const std::string& what, const std::vector<Variant>& variants,
                                    const std::vector<std::string>& wanted) {
  std::vector<size_t> chosen;
  for (size_t v = 0; v < variants.size(); ++v) {
    if (wanted.empty() || named(wanted, variants[v])) chosen.push_back(v);
  }
  for (const std::string& w : wanted) {
    const bool exists =
        std::any_of(variants.begin(), variants.end(), [&](const Variant& v) { return v.id == w || v.name == w; });
    if (!exists) {
      std::string ids;
      for (const Variant& v : variants) ids += (ids.empty() ? "" : ", ") + v.id;
      throw std::invalid_argument(what + " has no variant '" + w + "': it has " + ids);
    }
  }
  return chosen;
}

std::vector<Measured> validate_variants(const std::string& op, Problem& problem, const std::vector<Variant>& variants,
                                        const std::vector<size_t>& chosen,
                                        const std::function<std::string(size_t variant)>& skip, std::ostream& log) {
  std::vector<Measured> rows;
  for (size_t v : chosen) {
    Measured r;
    r.op = op;
    r.shape = problem.shape();
    r.variant = variants[v].id;
    r.name = variants[v].name;
    r.summary = variants[v].summary;
    r.peer = variants[v].peer;
    r.flops = problem.flops();
    r.bytes = problem.bytes(v);
    const std::string why_not = skip ? skip(v) : "";
    if (!why_not.empty()) {
      r.skipped = true;
      r.note = why_not;
    } else {
      Check check;
      try {
        check = problem.validate(v);
      } catch (const std::runtime_error& e) {  // a device error (kernels::cuda::Error), say
        check.mismatches = 1;
        check.report = std::string("  the run failed: ") + e.what() + "\n";
      }
      r.valid = check.ok();
      r.max_abs_err = check.max_abs_err;
      if (!r.valid) {
        r.note = "FAILED validation, not timed";
        log << "  " << r.variant << " " << r.name << " FAILED validation:\n" << check.report;
      }
    }
    rows.push_back(r);
  }
  return rows;
}

energy::Measurement measure_energy(const std::function<void()>& run, const Clock& clock, energy::Meter& meter,
                                   double min_seconds) {
  if (!meter.readable()) {
    energy::Measurement m;
    m.reason = "not readable here: " + meter.reason();
    return m;
  }
  meter.start();
  double busy = 0.0;
  long runs = 0;
  do {
    busy += clock.seconds(run);
    ++runs;
  } while (busy < min_seconds && runs < 1000000);
  if (clock.wait) clock.wait();
  energy::Measurement m = meter.stop();
  m.runs = runs;
  return m;
}

void time_row(Measured& row, Problem& problem, size_t v, const TimingOptions& opts, const Clock& clock,
              std::ostream& log) {
  try {
    row.timing = time_runs([&] { problem.run(v); }, opts, clock);
    row.timed = true;
    if (opts.energy_seconds > 0) {
      row.energy = measure_energy([&] { problem.run(v); }, clock, energy::system_meter(), opts.energy_seconds);
    } else {
      row.energy.reason = "not measured (energy_seconds = 0)";
    }
  } catch (const std::runtime_error& e) {
    row.note = std::string("failed while timing: ") + e.what();
    log << "  " << row.variant << " " << row.note << "\n";
  }
}

// ---- run 1-4 (the CPU's front) ----------------------------------------------------------

namespace {

std::vector<size_t> choose_variants(const OpBench& op, const std::vector<std::string>& wanted) {
  return choose_variants("op " + op.name, op.variants, wanted);
}

void napkin(Result& r, const Ceilings& c) {
  const double s = r.timing.median;
  r.gflops = r.flops > 0 ? r.flops / s / 1e9 : 0.0;
  r.gbs = r.bytes > 0 ? r.bytes / s / 1e9 : 0.0;
  const double peak = c.flops_at(r.threads), bw = c.bw_at(r.threads);
  r.frac_peak = peak > 0 && r.flops > 0 ? r.flops / s / peak : 0.0;
  r.frac_bw = bw > 0 && r.bytes > 0 ? r.bytes / s / bw : 0.0;
  if (r.flops > 0 && r.bytes > 0) {
    r.intensity = r.flops / r.bytes;
    const double memory_roof = r.intensity * bw;
    r.roofline = std::min(peak, memory_roof) / 1e9;
    r.bound = memory_roof < peak ? "memory" : "compute";
    r.frac_roof = r.flops / s / std::min(peak, memory_roof);
  } else {
    // No FLOPs worth counting (a copy, a cos chain): bandwidth is the only roof.
    r.bound = "memory";
    r.roofline = 0.0;
    r.frac_roof = r.frac_bw;
  }
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

std::string percent(double frac) { return frac > 0 ? fixed(100 * frac, 0) + "%" : "-"; }

void print_table(std::ostream& log, const std::vector<Result>& rows, const std::string& peer) {
  log << "  " << std::left << std::setw(26) << "variant" << std::right << std::setw(10) << "ms"
      << std::setw(10) << "GFLOP/s" << std::setw(7) << "peak" << std::setw(9) << "GB/s"
      << std::setw(6) << "bw" << std::setw(8) << "FLOP/B" << std::setw(9) << "bound" << std::setw(6)
      << "roof";
  if (!peer.empty()) log << std::setw(14) << ("vs " + peer);
  log << "\n";
  for (const Result& r : rows) {
    log << "  " << std::left << std::setw(26) << (r.variant + " " + r.name) << std::right;
    if (!r.timed) {
      log << "  " << r.note << "\n";
      continue;
    }
    log << std::setw(10) << fixed(r.timing.median * 1e3, r.timing.median < 0.01 ? 3 : 1)
        << std::setw(10) << (r.flops > 0 ? fixed(r.gflops, 1) : "-") << std::setw(7)
        << percent(r.frac_peak) << std::setw(9) << fixed(r.gbs, 1) << std::setw(6)
        << percent(r.frac_bw) << std::setw(8) << (r.intensity > 0 ? fixed(r.intensity, 1) : "-")
        << std::setw(9) << r.bound << std::setw(6) << percent(r.frac_roof);
    if (!peer.empty()) log << std::setw(14) << (r.vs_peer > 0 ? fixed(r.vs_peer, 2) + "x" : "-");
    log << "\n";
  }
}

}  // namespace

void check_options(const OpBench& op, const BenchOptions& opts) {
  choose_variants(op, opts.variants);
  if (op.check_size) {
    for (const std::string& size : opts.sizes) op.check_size(size);
  }
  for (int t : opts.threads) {
    if (t < 1) throw std::invalid_argument("a thread count must be at least 1, not " + std::to_string(t));
  }
}

std::vector<Result> run_bench(const OpBench& op, const BenchOptions& opts, const Ceilings& ceilings,
                              std::ostream& log) {
  check_options(op, opts);
  const std::vector<size_t> chosen = choose_variants(op, opts.variants);
  const std::vector<std::string> sizes = opts.sizes.empty() ? op.default_sizes : opts.sizes;
  std::vector<int> threads = opts.threads;
  if (threads.empty()) {
    threads = {1};
    if (ceilings.threads_all > 1) threads.push_back(ceilings.threads_all);
  }
  const int max_threads = *std::max_element(threads.begin(), threads.end());
  std::string peer;
  for (size_t v : chosen) {
    if (op.variants[v].peer) peer = op.variants[v].id;
  }

  std::vector<Result> all;
  warn_if_busy(log);
  for (const std::string& size : sizes) {
    std::unique_ptr<Problem> problem = op.make(size, opts.seed);
    log << "\n== " << op.name << " " << problem->shape() << ": ";
    if (problem->flops() > 0) log << fixed(problem->flops() / 1e9, 3) << " GFLOP, ";
    double least_bytes = problem->bytes(chosen.front());
    for (size_t v : chosen) least_bytes = std::min(least_bytes, problem->bytes(v));
    log << fixed(least_bytes / 1e6, 1) << " MB moved at least\n";

    // 1-2. reference and validation, once per size, with the most threads (the threaded
    // paths are the ones with the subtle bugs).
    problem->set_threads(max_threads);
    const auto too_slow = [&](size_t v) -> std::string {
      if (op.too_slow && op.too_slow(v, *problem) && !named(opts.variants, op.variants[v])) {
        return "skipped at this size (too slow; name it with --variants to run it)";
      }
      return "";
    };
    const std::vector<Measured> validated = validate_variants(op.name, *problem, op.variants, chosen, too_slow, log);
    log << "  validated: ";
    for (const Measured& r : validated) log << r.variant << (r.valid ? " ok  " : r.note.empty() ? "" : " --  ");
    log << "\n";

    // 3-4. time each validated variant at each thread count, then the napkin math.
    TimingOptions timing = opts.timing;
    timing.flush = timing.flush && problem->flush_between_runs();
    if (opts.timing.flush && !timing.flush) {
      log << "  caches not flushed between runs: the working set fits in cache\n";
    }
    for (int t : threads) {
      problem->set_threads(t);
      std::vector<Result> rows;
      for (const Measured& m : validated) {
        Result r;
        static_cast<Measured&>(r) = m;
        r.threads = t;
        rows.push_back(r);
      }
      time_valid(rows, *problem, chosen, timing, cpu_clock(), log);
      for (Result& r : rows) {
        if (!r.timed) continue;
        r.flushed = timing.flush;
        napkin(r, ceilings);
      }
      const auto peer_row = std::find_if(rows.begin(), rows.end(),
                                         [](const Result& r) { return r.peer && r.timed; });
      if (peer_row != rows.end()) {
        for (Result& r : rows) {
          if (r.timed) r.vs_peer = peer_row->timing.median / r.timing.median;
        }
      }
      log << " " << t << (t == 1 ? " thread" : " threads") << " (ceilings: "
          << fixed(ceilings.flops_at(t) / 1e9, 0) << " GFLOP/s, " << fixed(ceilings.bw_at(t) / 1e9, 1)
          << " GB/s):\n";
      print_table(log, rows, peer_row != rows.end() ? peer : "");
      all.insert(all.end(), rows.begin(), rows.end());
    }
    problem->set_threads(max_threads);
  }
  warn_if_busy(log, "after timing");
  return all;
}

// ---- report ---------------------------------------------------------------------------

std::string json_fields(const MachineInfo& m) {
  return "\"cpu\": " + json_string(m.cpu) + ", \"cores\": " + std::to_string(m.cores) +
         ", \"omp_max_threads\": " + std::to_string(m.omp_max_threads) + ", \"simd\": " + json_string(m.simd) +
         ", \"compiler\": " + json_string(m.compiler) + ", \"flags\": " + json_string(m.flags) +
         ", \"date\": " + json_string(m.date) + ", \"energy\": " + (m.energy.empty() ? "null" : m.energy);
}

MachineInfo machine_info() {
  MachineInfo m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      m.cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  if (m.cpu.empty()) m.cpu = "unknown CPU";
  m.cores = static_cast<int>(std::thread::hardware_concurrency());
  m.omp_max_threads = omp_get_max_threads();
  m.simd = simd::native_name();
#if defined(__clang__)
  m.compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  m.compiler = std::string("g++ ") + __VERSION__;
#else
  m.compiler = "unknown compiler";
#endif
  m.flags = NNLAB_CXX_FLAGS;
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  m.date = date;
  m.energy = energy::probe_json(energy::system_meter());
  return m;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string json_number(double v, int precision) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os << std::setprecision(precision) << v;
  return os.str();
}

void write_json(std::ostream& out, const MachineInfo& m, const Ceilings& c,
                const std::vector<Result>& results) {
  out << "{\n  \"machine\": {\"cpu\": " << json_string(m.cpu) << ", \"cores\": " << m.cores
      << ", \"omp_max_threads\": " << m.omp_max_threads << ", \"simd\": " << json_string(m.simd)
      << ", \"compiler\": " << json_string(m.compiler) << ", \"flags\": " << json_string(m.flags)
      << ", \"date\": " << json_string(m.date) << ", \"energy\": " << (m.energy.empty() ? "null" : m.energy)
      << "},\n";
  out << "  \"ceilings\": {\"threads_all\": " << c.threads_all
      << ", \"gflops_1t\": " << json_number(c.flops_1t / 1e9)
      << ", \"gflops_all\": " << json_number(c.flops_all / 1e9)
      << ", \"gbs_1t\": " << json_number(c.bw_1t / 1e9) << ", \"gbs_all\": " << json_number(c.bw_all / 1e9)
      << ", \"simd\": " << json_string(c.simd) << "},\n";
  out << "  \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out << (i == 0 ? "\n" : ",\n") << "    {\"op\": " << json_string(r.op)
        << ", \"variant\": " << json_string(r.variant) << ", \"name\": " << json_string(r.name)
        << ", \"peer\": " << (r.peer ? "true" : "false") << ", \"shape\": " << json_string(r.shape)
        << ", \"threads\": " << r.threads << ", \"valid\": " << (r.valid ? "true" : "false")
        << ", \"timed\": " << (r.timed ? "true" : "false")
        << ", \"flushed\": " << (r.flushed ? "true" : "false") << ", \"note\": " << json_string(r.note)
        << ", \"median_s\": " << json_number(r.timing.median) << ", \"samples_s\": [";
    for (size_t s = 0; s < r.timing.seconds.size(); ++s) {
      out << (s ? ", " : "") << json_number(r.timing.seconds[s]);
    }
    out << "], \"flops\": " << json_number(r.flops) << ", \"bytes\": " << json_number(r.bytes)
        << ", \"gflops\": " << json_number(r.gflops) << ", \"gbs\": " << json_number(r.gbs)
        << ", \"intensity\": " << json_number(r.intensity) << ", \"frac_peak\": " << json_number(r.frac_peak)
        << ", \"frac_bw\": " << json_number(r.frac_bw) << ", \"roofline_gflops\": " << json_number(r.roofline)
        << ", \"bound\": " << json_string(r.bound) << ", \"frac_roof\": " << json_number(r.frac_roof)
        << ", \"vs_peer\": " << json_number(r.vs_peer) << ", \"energy\": " << energy::json(r.energy) << "}";
  }
  out << "\n  ]\n}\n";
}

void write_markdown(std::ostream& out, const MachineInfo& m, const Ceilings& c,
                    const std::vector<Result>& results) {
  out << "Machine: " << m.cpu << ", " << m.cores << " cores, " << m.simd << "; " << m.compiler
      << "; flags `" << m.flags << "`; " << m.date << ".\n\n";
  out << "Measured ceilings: " << fixed(c.flops_1t / 1e9, 1) << " GFLOP/s and "
      << fixed(c.bw_1t / 1e9, 1) << " GB/s with 1 thread; " << fixed(c.flops_all / 1e9, 1)
      << " GFLOP/s and " << fixed(c.bw_all / 1e9, 1) << " GB/s with " << c.threads_all
      << " threads (FMA loop, STREAM triad). Caches are flushed before each timed run, except\n"
      << "for shapes marked (warm), whose data fits in cache and is timed there.\n\n";
  out << "| op | shape | threads | variant | ms (median) | GFLOP/s | % peak | GB/s | % bw | bound | % of roof | vs peer |\n";
  out << "|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const Result& r : results) {
    out << "| " << r.op << " | " << r.shape << (r.timed && !r.flushed ? " (warm)" : "") << " | " << r.threads << " | " << r.variant << " "
        << r.name << " | ";
    if (!r.timed) {
      out << r.note << " | | | | | | | |\n";
      continue;
    }
    out << fixed(r.timing.median * 1e3, 3) << " | " << (r.flops > 0 ? fixed(r.gflops, 1) : "-")
        << " | " << percent(r.frac_peak) << " | " << fixed(r.gbs, 1) << " | " << percent(r.frac_bw)
        << " | " << r.bound << " | " << percent(r.frac_roof) << " | " << (r.vs_peer > 0 ? fixed(r.vs_peer, 2) + "x" : "-") << " |\n";
  }
}

}  // namespace kernels::harness
