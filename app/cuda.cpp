// app/cuda.cpp: `nnlab cuda info|bench|goals`. The work is in kernels/cuda/bench/run.cpp;
// this is the command line.
#include "app/cuda.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "kernels/cuda/bench/ops.h"
#include "kernels/cuda/bench/run.h"
#include "kernels/harness.h"
#include "nn/cli_checks.h"

namespace app {

namespace cb = kernels::cuda::bench;

void add_cuda_subcommands(CLI::App& cmd, CudaOptions& opts) {
  cmd.require_subcommand(1);

  cmd.add_subcommand("info", "The device that would be used (GPU, or the emulator and why) and the ops on it");

  CLI::App* bench = cmd.add_subcommand(
      "bench", "Validate, then time, every version of the CUDA ops on the device, against measured ceilings");
  bench->add_option("ops", opts.ops, "Ops to run (none: every one; see --list)");
  bench->add_option("--device", opts.device, "gpu or emu (default: NNLAB_DEVICE, else the GPU if there is one)")
      ->check(CLI::IsMember({"gpu", "emu"}));
  bench->add_option("-s,--sizes", opts.sizes, "Sizes, as the op reads them (default: the op's; its test sizes emulated)")
      ->delimiter(',');
  bench->add_option("-v,--variants", opts.variants, "Variants by id or name (v1,v3,cublas); default: all")
      ->delimiter(',');
  bench->add_flag("--quick", opts.quick, "The ops' test sizes, one timed run: checks everything runs");
  bench->add_option("--repeats", opts.repeats, "Timed runs per case (median and min reported)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  bench->add_option("--warmup", opts.warmup, "Untimed runs before timing")->check(CLI::Range(0, 100))->capture_default_str();
  bench->add_option("--max-seconds", opts.max_seconds, "Stop repeating a case after this long")
      ->check(nn::FiniteRange(0.0, 3600.0))->capture_default_str();
  bench->add_flag("--no-flush", opts.no_flush, "Do not flush the L2 cache before each timed run");
  bench->add_flag("--list", opts.list, "List the ops, their versions on the device, and their sizes");
  bench->add_option("--json", opts.json, "Save the record as JSON here");
  bench->add_option("--md", opts.md, "Save the record as a markdown table here");
  bench->add_option("--seed", opts.seed, "Seed of the random inputs")->check(nn::Seed())->capture_default_str();

  CLI::App* goals = cmd.add_subcommand("goals", "PASS or FAIL for the issue's goals, from a `cuda bench --json` record");
  goals->add_option("--json", opts.goals_json, "The record to judge")->required();
}

namespace {

std::string gib(size_t bytes) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << static_cast<double>(bytes) / static_cast<double>(size_t{1} << 30) << " GiB";
  return os.str();
}

void describe_device(std::ostream& out, const kernels::cuda::Device& dev) {
  const kernels::cuda::DeviceInfo& d = dev.info();
  out << "  name                " << d.name << "\n"
      << "  compute capability  " << d.sm / 10 << "." << d.sm % 10 << "\n"
      << "  multiprocessors     " << d.multiprocessors << "\n"
      << "  memory              " << gib(d.memory_bytes) << ", L2 " << d.l2_bytes / 1024 << " KiB, shared memory per block up to "
      << d.smem_per_block_optin / 1024 << " KiB\n"
      << "  runtime             " << d.runtime << "\n";
}

void list_ops(std::ostream& out, kernels::cuda::Device& dev) {
  out << "ops and their versions on " << dev.info().name << ":\n";
  for (const cb::Op& op : cb::ops()) {
    const std::vector<cb::Variant> variants = op.variants(dev);
    out << "  " << op.name << ": " << op.summary << "\n";
    if (variants.empty()) {
      out << "      (no versions yet)\n";
      continue;
    }
    // a size with spaces in it (matmul's "fwd M=.. N=.. K=.. tb") is quoted, as --sizes takes it
    auto quoted = [](const std::string& s) { return s.find(' ') == std::string::npos ? s : "\"" + s + "\""; };
    out << "      sizes:";
    for (const std::string& s : op.sizes) out << " " << quoted(s);
    out << "   test sizes:";
    for (const std::string& s : op.test_sizes) out << " " << quoted(s);
    out << "\n";
    for (const cb::Variant& v : variants) {
      out << "      " << v.id << (v.peer ? " (peer)" : "") << "  " << v.name << ": " << v.summary;
      if (v.needs.min_sm > 50) out << " [needs sm_" << v.needs.min_sm << "]";
      out << "\n";
    }
  }
}

int run_info() {
  std::string why;
  kernels::cuda::Device* gpu = kernels::cuda::gpu(&why);
  kernels::cuda::Device& dev = kernels::cuda::default_device();
  if (gpu) {
    std::cout << "GPU found:\n";
    describe_device(std::cout, *gpu);
  } else {
    std::cout << "no GPU: " << why << "\n";
  }
  if (dev.info().emulated) {
    std::cout << "\nthe device used: the EMULATOR (kernels/cuda/emu), on the CPU"
              << (gpu ? " (NNLAB_DEVICE=emu asks for it)" : "") << ":\n";
    describe_device(std::cout, dev);
    std::cout << "  Kernels run and are checked for correctness here; their times are CPU times of the\n"
                 "  emulator and say nothing about a GPU.\n";
  } else {
    std::cout << "\nthe device used: the GPU above (NNLAB_DEVICE=emu would choose the emulator)\n";
  }
  std::cout << "\n";
  list_ops(std::cout, dev);
  return 0;
}

int run_goals(const CudaOptions& opts) {
  std::ifstream in(opts.goals_json);
  if (!in) throw std::runtime_error("cannot read " + opts.goals_json + ": write it with `nnlab cuda bench --json FILE`");
  std::ostringstream text;
  text << in.rdbuf();
  const cb::GoalsReport goals = cb::check_goals(text.str());
  cb::print_goals(std::cout, goals);
  return goals.all_pass() ? 0 : 1;
}

void save(const std::string& path, const cb::Report& report, bool json) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p);
  if (json) {
    cb::write_json(out, report);
  } else {
    cb::write_markdown(out, report);
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

int run_bench(const CudaOptions& opts) {
  kernels::cuda::Device& dev = cb::choose_device(opts.device);  // --device gpu without one: Error
  if (opts.list) {
    list_ops(std::cout, dev);
    return 0;
  }
  std::vector<const cb::Op*> chosen;
  if (opts.ops.empty()) {
    for (const cb::Op& op : cb::ops()) chosen.push_back(&op);
  } else {
    for (const std::string& name : opts.ops) {
      if (name == "all") {
        for (const cb::Op& op : cb::ops()) chosen.push_back(&op);
      } else {
        chosen.push_back(&cb::op(name));  // throws for an unknown op, naming the ones there are
      }
    }
  }

  const kernels::cuda::DeviceInfo& info = dev.info();
  const std::string banner = info.emulated ? "\n!! " + cb::emulator_warning() + "\n" : "";
  std::cout << "device: " << info.name << " (compute capability " << info.sm / 10 << "." << info.sm % 10 << ", "
            << info.runtime << ")\n" << banner;

  cb::RunOptions run;
  run.sizes = opts.sizes;
  run.variants = opts.variants;
  run.quick = opts.quick;
  run.timing.repeats = opts.repeats;
  run.timing.warmup = opts.warmup;
  run.timing.max_seconds = opts.max_seconds;
  run.timing.flush = !opts.no_flush;
  run.seed = opts.seed;
  if (info.emulated && opts.sizes.empty() && !opts.quick) {
    std::cout << "(the emulator runs the ops' test sizes: their GPU sizes would take hours here; --sizes overrides)\n";
  }

  std::cout << "measuring ceilings (device-to-device copy, FP32 FMA kernel)... " << std::flush;
  cb::CeilingOptions copts;
  copts.quick = opts.quick;
  cb::Report report;
  report.device = info;
  report.host = kernels::harness::machine_info();
  report.ceilings = cb::measure_ceilings(dev, copts);
  report.timing = run.timing;
  if (opts.quick) {
    report.timing.warmup = 0;
    report.timing.repeats = 1;
  }
  std::cout << report.ceilings.copy_gbs << " GB/s copy, " << report.ceilings.fma_gflops << " GFLOP/s FMA"
            << (info.emulated ? " (EMULATED: CPU figures)" : "") << "\n";

  for (const cb::Op* op : chosen) {
    const std::vector<cb::Result> r = cb::run_op(dev, *op, run, report.ceilings, std::cout);
    report.results.insert(report.results.end(), r.begin(), r.end());
  }

  if (!opts.json.empty()) save(opts.json, report, true);
  if (!opts.md.empty()) save(opts.md, report, false);
  std::cout << banner;
  if (!opts.json.empty() || !opts.md.empty()) {
    std::cout << "\nwrote" << (opts.json.empty() ? "" : " " + opts.json) << (opts.md.empty() ? "" : " " + opts.md) << "\n";
  }
  const int failed = cb::count_failed(report.results);
  if (failed > 0) {
    std::cerr << "error: " << failed << " variant(s) failed validation on " << info.name << " (see above)\n";
    return 1;
  }
  return 0;
}

}  // namespace

int run_cuda_command(CLI::App& cuda_cmd, const CudaOptions& opts) {
  if (cuda_cmd.got_subcommand("info")) return run_info();
  if (cuda_cmd.got_subcommand("bench")) return run_bench(opts);
  if (cuda_cmd.got_subcommand("goals")) return run_goals(opts);
  return 2;  // unreachable: require_subcommand(1)
}

}  // namespace app
