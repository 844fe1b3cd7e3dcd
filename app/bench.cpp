// app/bench.cpp: `nnlab bench`. The work is in kernels/harness.cpp; this is the command line.
#include "app/bench.h"

#include <omp.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "kernels/bench/ops.h"
#include "kernels/ceilings.h"
#include "kernels/harness.h"
#include "nn/cli_checks.h"

namespace app {

void add_bench_options(CLI::App& app, BenchOptions& opts) {
  app.add_option("ops", opts.ops, "Ops to run (`all` for every one); none: list them");
  app.add_option("-v,--variants", opts.variants, "Variants by id or name (v1,v5,openblas); default: all")
      ->delimiter(',');
  app.add_option("-s,--sizes", opts.sizes, "Sizes, as the op reads them (see --list); default: the op's")
      ->delimiter(',');
  app.add_option("-t,--threads", opts.threads, "Thread counts (1,2); default: 1 and all")
      ->delimiter(',')
      ->check(nn::ThreadCount())
      ->check(CLI::PositiveNumber);
  app.add_option("--repeats", opts.repeats, "Timed runs per case; the median is reported")
      ->check(CLI::Range(1, 1000));
  app.add_option("--warmup", opts.warmup, "Untimed runs before timing")->check(CLI::Range(0, 100));
  app.add_option("--max-seconds", opts.max_seconds, "Stop repeating a case after this long")
      ->check(nn::FiniteRange(0.0, 3600.0));
  app.add_flag("--no-flush", opts.no_flush, "Do not flush the caches before each timed run");
  app.add_flag("--quick", opts.quick, "Small sizes, one repeat: checks everything runs");
  app.add_flag("--list", opts.list, "List the ops, their variants and sizes");
  app.add_option("-o,--out", opts.out_dir, "Folder for the JSON and markdown results");
  app.add_option("--name", opts.name, "File stem for the results (default: the op's name, or `all`)");
  app.add_option("--seed", opts.seed, "Seed of the random inputs")->check(nn::Seed());
}

namespace {

void list_ops(std::ostream& out) {
  for (const kernels::harness::OpBench& op : kernels::bench::ops()) {
    out << op.name << ": " << op.summary << "\n  sizes: " << op.size_help << " (default";
    for (const std::string& s : op.default_sizes) out << " " << s;
    out << ")\n";
    for (const kernels::harness::Variant& v : op.variants) {
      out << "  " << v.id << "  " << v.name << ": " << v.summary << "\n";
    }
  }
  if (!kernels::bench::have_openblas()) {
    out << "(OpenBLAS was not found at build time: install libopenblas-dev and rebuild to compare)\n";
  }
}

}  // namespace

int run_bench(const BenchOptions& opts) {
  namespace h = kernels::harness;
  if (opts.list || opts.ops.empty()) {
    list_ops(std::cout);
    if (opts.ops.empty() && !opts.list) std::cout << "\nRun one: nnlab bench matmul --sizes 1024 --threads 1\n";
    return 0;
  }
  std::vector<const h::OpBench*> chosen;
  for (const std::string& name : opts.ops) {
    if (name == "all") {
      for (const h::OpBench& op : kernels::bench::ops()) chosen.push_back(&op);
    } else {
      chosen.push_back(&kernels::bench::op(name));  // throws for an unknown op, naming them
    }
  }
  h::BenchOptions b;
  b.variants = opts.variants;
  b.sizes = opts.sizes;
  b.threads = opts.threads;
  b.timing.repeats = opts.quick ? 1 : opts.repeats;
  b.timing.warmup = opts.quick ? 0 : opts.warmup;
  b.timing.max_seconds = opts.max_seconds;
  b.timing.flush = !opts.no_flush;
  b.seed = opts.seed;
  // Bad variants, sizes and paths fail now, not after minutes of measuring.
  for (const h::OpBench* op : chosen) {
    h::BenchOptions per_op = b;
    if (opts.quick && opts.sizes.empty()) per_op.sizes = op->quick_sizes;
    h::check_options(*op, per_op);
  }
  std::filesystem::create_directories(opts.out_dir);

  const h::MachineInfo machine = h::machine_info();
  std::cout << "machine: " << machine.cpu << ", " << machine.cores << " cores, " << machine.simd
            << ", OpenMP max threads " << machine.omp_max_threads << "\n";
  if (kernels::bench::have_openblas()) std::cout << "peer: OpenBLAS " << kernels::bench::openblas_config() << "\n";
  std::cout << "measuring ceilings (FMA loop, STREAM triad)... " << std::flush;
  kernels::CeilingOptions copts;
  if (opts.quick) copts.seconds = 0.05;
  const kernels::Ceilings ceilings = kernels::measure_ceilings(copts);
  std::cout << ceilings.flops_1t / 1e9 << " GFLOP/s and " << ceilings.bw_1t / 1e9 << " GB/s on 1 thread, "
            << ceilings.flops_all / 1e9 << " GFLOP/s and " << ceilings.bw_all / 1e9 << " GB/s on "
            << ceilings.threads_all << "\n";
  for (const h::OpBench* op : chosen)  // int8 ops: their own roof (2 ops per int8 multiply-add)
    if (op->name == "int8_gemm")
      std::cout << "int8 peak (" << kernels::int8_peak_method() << "): "
                << kernels::measure_int8_peak(1, copts.seconds) / 1e9 << " GOP/s on 1 thread, "
                << kernels::measure_int8_peak(ceilings.threads_all, copts.seconds) / 1e9 << " GOP/s on "
                << ceilings.threads_all << "\n";

  std::vector<h::Result> results;
  for (const h::OpBench* op : chosen) {
    h::BenchOptions per_op = b;
    if (opts.quick && opts.sizes.empty()) per_op.sizes = op->quick_sizes;
    const std::vector<h::Result> r = h::run_bench(*op, per_op, ceilings, std::cout);
    results.insert(results.end(), r.begin(), r.end());
  }

  const std::string stem = !opts.name.empty() ? opts.name : chosen.size() == 1 ? chosen[0]->name : "all";
  const std::filesystem::path json = std::filesystem::path(opts.out_dir) / (stem + ".json");
  const std::filesystem::path md = std::filesystem::path(opts.out_dir) / (stem + ".md");
  {
    std::ofstream out(json);
    h::write_json(out, machine, ceilings, results);
    if (!out) throw std::runtime_error("cannot write " + json.string());
  }
  {
    std::ofstream out(md);
    h::write_markdown(out, machine, ceilings, results);
    if (!out) throw std::runtime_error("cannot write " + md.string());
  }
  std::cout << "\nwrote " << json.string() << " and " << md.string() << "\n";
  int failed = 0;
  for (const h::Result& r : results) failed += !r.valid && r.note.rfind("skipped", 0) != 0;
  if (failed > 0) {
    std::cerr << "error: " << failed << " variant(s) failed validation (see above)\n";
    return 1;
  }
  return 0;
}

}  // namespace app
