// Lesson 09: CUDA, part by part. The kernels are kernels/cuda/*.cu, the harness that
// validates and times them kernels/cuda/bench/run.h; this file walks them in lesson order.
#include "lessons/09-cuda/cuda_lesson.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "lessons/09-cuda/broken_kernels.h"

namespace lesson09 {

namespace cb = kernels::cuda::bench;
using kernels::cuda::Device;

void add_options(CLI::App& app, Options& o) {
  app.add_option("part,--part", o.part, "Which part to run: info, ladder, fusion, emulator or all")
      ->check(CLI::IsMember({"info", "ladder", "fusion", "emulator", "all"}))
      ->capture_default_str();
  app.add_option("--device", o.device, "gpu or emu (default: NNLAB_DEVICE, else the GPU if there is one)")
      ->check(CLI::IsMember({"gpu", "emu"}));
  app.add_flag("--quick", o.quick, "The smallest sizes and one timed run: seconds, even emulated");
  app.add_option("--json", o.json, "Save the record of parts ladder and fusion here (notebooks/09-cuda.ipynb reads it)");
  app.add_option("--size", o.size, "Part ladder: the matmul size (default 4096 on a GPU, 128 emulated)");
}

const std::vector<std::string>& fusion_ops() {
  static const std::vector<std::string> ops = {"cos2", "bias_gelu", "residual_layernorm", "crossentropy", "attention"};
  return ops;
}

// ---- small helpers --------------------------------------------------------------------------

namespace {

std::string fixed(double v, int p) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(p) << v;
  return os.str();
}

std::string megabytes(double bytes) { return fixed(bytes / 1e6, bytes < 1e6 ? 3 : 1) + " MB"; }

void title(const std::string& t) { std::cout << "\n== " << t << " " << std::string(t.size() < 80 ? 80 - t.size() : 0, '=') << "\n"; }

// What the parts share: the device, its ceilings (measured once, when first needed) and the
// record of everything timed (saved with --json).
struct Session {
  const Options& opts;
  Device& dev;
  std::string why_no_gpu;
  cb::Report report;
  bool measured = false;

  Session(const Options& o, Device& d, std::string why) : opts(o), dev(d), why_no_gpu(std::move(why)) {
    report.device = dev.info();
    report.host = kernels::harness::machine_info();
    report.timing = timing();
  }

  cb::TimingOptions timing() const {
    cb::TimingOptions t = cb::gpu_timing();
    if (opts.quick) {
      t.warmup = 0;
      t.repeats = 1;
    } else if (dev.info().emulated) {
      t.warmup = 1;  // the emulator's times mean little: a few runs are plenty
      t.repeats = 3;
    }
    return t;
  }

  const cb::Ceilings& ceilings() {
    if (!measured) {
      cb::CeilingOptions c;
      c.quick = opts.quick || dev.info().emulated;
      report.ceilings = cb::measure_ceilings(dev, c);
      measured = true;
      std::cout << "ceilings measured on " << dev.info().name << ": copy " << fixed(report.ceilings.copy_gbs, 1)
                << " GB/s, FP32 FMA " << fixed(report.ceilings.fma_gflops, 1) << " GFLOP/s"
                << (dev.info().emulated ? "  (EMULATED: CPU figures, not a GPU's)" : "") << "\n";
    }
    return report.ceilings;
  }

  // Runs one op at one size through the harness and keeps the rows.
  std::vector<cb::Result> run(const cb::Op& op, const std::string& size) {
    cb::RunOptions r;
    r.sizes = {size};
    r.timing = timing();
    std::vector<cb::Result> rows = cb::run_op(dev, op, r, ceilings(), std::cout);
    report.results.insert(report.results.end(), rows.begin(), rows.end());
    return rows;
  }
};

// The first and last timed non-peer versions: the unfused and the fused one.
std::pair<const cb::Result*, const cb::Result*> ends_of_ladder(const std::vector<cb::Result>& rows) {
  const cb::Result* first = nullptr;
  const cb::Result* last = nullptr;
  for (const cb::Result& r : rows) {
    if (r.peer || !r.timed) continue;
    if (!first) first = &r;
    last = &r;
  }
  return {first, last};
}

}  // namespace

std::string device_line(const Device& dev, const std::string& why_no_gpu) {
  const kernels::cuda::DeviceInfo& d = dev.info();
  if (d.emulated) {
    const std::string why = why_no_gpu.empty()
                                ? "a GPU is here, but the emulator was asked for (--device emu or NNLAB_DEVICE=emu)"
                                : why_no_gpu;
    return "EMULATED on the CPU: " + why;
  }
  std::ostringstream os;
  os << "on the GPU: " << d.name << " (compute capability " << d.sm / 10 << "." << d.sm % 10 << ", "
     << d.multiprocessors << " SMs, " << fixed(static_cast<double>(d.memory_bytes) / (1u << 30), 1) << " GiB, "
     << d.runtime << ")";
  return os.str();
}

std::vector<double> rung_speedups(const std::vector<cb::Result>& results) {
  std::vector<double> out(results.size(), 0.0);
  const cb::Result* previous = nullptr;
  for (size_t i = 0; i < results.size(); ++i) {
    const cb::Result& r = results[i];
    if (r.peer || !r.timed) continue;
    if (previous && r.timing.median > 0) out[i] = previous->timing.median / r.timing.median;
    previous = &r;
  }
  return out;
}

std::vector<std::string> versions_needing_more_than(Device& dev, int sm) {
  std::vector<std::string> out;
  for (const cb::Op& op : cb::ops()) {
    for (const cb::Variant& v : op.variants(dev)) {
      if (v.peer || v.needs.min_sm <= sm) continue;
      out.push_back(op.name + " " + v.id + " (" + std::to_string(v.needs.min_sm / 10) + "." +
                    std::to_string(v.needs.min_sm % 10) + ")");
    }
  }
  return out;
}

// ---- part info ---------------------------------------------------------------------------------

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

// Which GPUs run which versions: every version states the oldest compute capability it runs
// on (needs.min_sm); the course's floor is 5.0, the oldest CUDA 12 compiles for.
void print_gpu_generations(Device& dev) {
  const std::vector<std::string> newer = versions_needing_more_than(dev, NNLAB_SM_MAXWELL);
  std::cout << "Which GPUs run which versions (each version's oldest compute capability, needs.min_sm):\n"
            << "  every version runs on compute capability 5.0 (Maxwell: GTX 750 Ti, GTX 960) and newer"
            << (newer.empty() ? "" : ", except " + joined(newer)) << ".\n"
            << "  CUDA 13 compiles for 7.5 and newer only: for an older card build with CUDA 12 (README, section 8).\n"
            << "  On 5.x the kernels are compile-checked (scripts/check_old_gpus.py), never yet run.\n";
  const kernels::cuda::DeviceInfo& d = dev.info();
  if (d.emulated) return;
  const std::vector<std::string> skipped = versions_needing_more_than(dev, d.sm);
  std::cout << "  This GPU is " << d.sm / 10 << "." << d.sm % 10 << ": "
            << (skipped.empty() ? "it runs every version" : "the harness skips " + joined(skipped)) << ".\n";
}

}  // namespace

int run_info_part(Session& s) {
  title("Part info: which device runs the kernels");
  std::cout << device_line(s.dev, s.why_no_gpu) << "\n";
  if (s.dev.info().emulated) {
    std::cout << "  The same .cu source, compiled by the host compiler, runs through the emulator\n"
                 "  (kernels/cuda/emu): every thread of every block in turn, on the CPU. What carries over\n"
                 "  to a GPU: validation (the same code computed the same numbers) and each version's bytes\n"
                 "  moved and FLOPs, properties of the algorithm. What does not: every time, GB/s and\n"
                 "  GFLOP/s below is a CPU time of the emulator and says NOTHING about a GPU.\n"
                 "  On a machine with a GPU: bash scripts/gpu_bench.sh\n";
  } else {
    std::cout << "  Times below are GPU times: CUDA events around one launch, after warm-up runs, with the\n"
                 "  L2 cache flushed before each run (every run starts from DRAM); median of the runs.\n";
  }
  print_gpu_generations(s.dev);
  return 0;
}

// ---- part ladder --------------------------------------------------------------------------------

int run_ladder_part(Session& s) {
  title("Part ladder: the matmul ladder, every rung validated, then timed");
  const cb::Op& op = cb::op("matmul");
  if (op.variants(s.dev).empty()) {
    std::cout << "matmul has no versions on " << s.dev.info().name << " yet (kernels/cuda/matmul.cu): skipped\n";
    return 0;
  }
  s.ceilings();
  const bool emulated = s.dev.info().emulated;
  std::string size = s.opts.size;
  std::string fallback;
  if (size.empty()) {
    // 4096^3 fills a GPU; on the emulator 128^3 takes about a second per version.
    size = emulated ? (s.opts.quick && !op.test_sizes.empty() ? op.test_sizes.front() : "128") : "4096";
    fallback = emulated ? (op.test_sizes.empty() ? "" : op.test_sizes.front()) : (op.sizes.empty() ? "" : op.sizes.front());
  }
  std::vector<cb::Result> rows;
  try {
    rows = s.run(op, size);
  } catch (const std::invalid_argument& e) {
    if (fallback.empty() || fallback == size) throw;
    std::cout << "(matmul does not read the size '" << size << "': " << e.what() << "; using " << fallback << ")\n";
    rows = s.run(op, fallback);
  }

  std::cout << "\nThe ladder" << (emulated ? " (EMULATED: CPU times, meaningless for a GPU)" : "") << ":\n";
  const std::vector<double> speedup = rung_speedups(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const cb::Result& r = rows[i];
    std::cout << "  " << cb::summary_line(r) << "\n";
    if (speedup[i] > 0) std::cout << "      " << fixed(speedup[i], 2) << "x the speed of the rung below";
    if (!r.peer && r.vs_peer > 0) std::cout << (speedup[i] > 0 ? ", " : "      ") << fixed(r.vs_peer, 2) << "x " << r.peer_variant;
    if (speedup[i] > 0 || (!r.peer && r.vs_peer > 0)) std::cout << "\n";
  }
  return cb::count_failed(rows) > 0 ? 1 : 0;
}

// ---- part fusion --------------------------------------------------------------------------------

int run_fusion_part(Session& s) {
  title("Part fusion: the same math in fewer memory trips");
  const bool emulated = s.dev.info().emulated;
  s.ceilings();
  int failed = 0;
  for (const std::string& name : fusion_ops()) {
    const cb::Op& op = cb::op(name);
    std::cout << "\n-- " << op.name << ": " << op.summary << "\n";
    if (op.variants(s.dev).empty()) {
      std::cout << "   no versions on " << s.dev.info().name << " yet: skipped\n";
      continue;
    }
    const std::vector<std::string>& sizes = emulated || s.opts.quick ? op.test_sizes : op.sizes;
    if (sizes.empty()) {
      std::cout << "   the op lists no sizes: skipped\n";
      continue;
    }
    // Emulated: the largest test size (the smallest with --quick); on a GPU the first GPU size.
    const std::string size = emulated && !s.opts.quick ? sizes.back() : sizes.front();
    const std::vector<cb::Result> rows = s.run(op, size);
    failed += cb::count_failed(rows);
    const auto [unfused, fused] = ends_of_ladder(rows);
    if (!unfused || !fused || unfused == fused) {
      std::cout << "   (fewer than two versions timed: nothing to compare)\n";
      continue;
    }
    std::cout << "   " << unfused->variant << " " << unfused->name << " moves " << megabytes(unfused->bytes) << ", "
              << fused->variant << " " << fused->name << " " << megabytes(fused->bytes) << " ("
              << fixed(fused->bytes / unfused->bytes, 2) << "x the bytes)";
    if (unfused->workspace_bytes > 0 || fused->workspace_bytes > 0) {
      std::cout << "; workspace " << megabytes(static_cast<double>(unfused->workspace_bytes)) << " vs "
                << megabytes(static_cast<double>(fused->workspace_bytes));
    }
    std::cout << "\n   time " << unfused->variant << " / " << fused->variant << " = "
              << fixed(unfused->timing.median / fused->timing.median, 2) << "x"
              << (emulated ? "  (EMULATED: CPU time; on a GPU, expect about the bytes ratio when memory-bound)" : "")
              << "\n";
  }
  return failed > 0 ? 1 : 0;
}

// ---- part emulator ------------------------------------------------------------------------------

int run_emulator_part(Session&) {
  title("Part emulator: three classic CUDA bugs, each caught where it happens");
  std::cout << "Each kernel below (lessons/09-cuda/broken_kernels.cu) runs on the emulator, whatever the\n"
               "device of the other parts: a GPU would hang, or return garbage now and then.\n";
  int missed = 0;
  for (const BrokenKernel& k : run_broken_kernels()) {
    std::cout << "\n-- " << k.kernel << ": " << k.bug << "\n   on a GPU: " << k.on_gpu << "\n";
    if (k.error.empty()) {
      std::cout << "   the emulator did NOT catch it (it should have: see kernels/cuda/emu/emu.h)\n";
      ++missed;
    } else {
      std::cout << "   the emulator says:\n     " << k.error << "\n";
    }
  }
  return missed > 0 ? 1 : 0;
}

// ---- run ------------------------------------------------------------------------------------------

int run(const Options& opts) {
  std::string why;
  const bool have_gpu = kernels::cuda::gpu(&why) != nullptr;
  Device& dev = cb::choose_device(opts.device);
  Session s(opts, dev, have_gpu ? "" : why);
  int status = 0;
  const bool all = opts.part == "all";
  if (all || opts.part == "info") status |= run_info_part(s);
  if (all || opts.part == "ladder") status |= run_ladder_part(s);
  if (all || opts.part == "fusion") status |= run_fusion_part(s);
  if (all || opts.part == "emulator") status |= run_emulator_part(s);

  if (!opts.json.empty()) {
    const std::filesystem::path p(opts.json);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    if (!s.measured && !s.report.results.empty()) s.ceilings();
    std::ofstream out(p);
    cb::write_json(out, s.report);
    if (!out) throw std::runtime_error("cannot write " + opts.json);
    std::cout << "\nwrote " << opts.json << "\n";
  }
  if (dev.info().emulated && opts.part != "emulator") {
    std::cout << "\n(" << cb::emulator_warning() << ")\n";
  }
  if (status != 0) std::cerr << "error: a version failed validation, or a bug went uncaught (see above)\n";
  return status;
}

}  // namespace lesson09
