// Lesson 03: the parts, in the order the lesson text reads. Every timing goes through
// kernels/harness (validate first, then time, median of repeats), and every matmul is the
// very function `nnlab bench` and nn/ call: nothing here is a copy.
#include "lessons/03-matmul/matmul_lesson.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/ceilings.h"
#include "kernels/clock.h"
#include "kernels/harness.h"
#include "kernels/simd.h"
#include "nn/check.h"
#include "nn/cli_checks.h"

namespace lesson03 {

namespace h = kernels::harness;

void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part to run")
      ->check(CLI::IsMember({"ceilings", "stride", "ladder", "fusion", "all"}))
      ->capture_default_str();
  app.add_option("--size", o.size, "ladder: M = N = K of the product")
      ->check(CLI::Range(16, 8192))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "ladder, fusion: thread counts, e.g. --threads 1,2 (default: 1 and all)")
      ->delimiter(',')
      ->check(nn::ThreadCount())
      ->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "Timed runs per case (the median is shown)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_flag("!--no-python", o.python, "ladder: skip timing the pure-Python loop");
  app.add_flag("--quick", o.quick, "Small sizes and short measurements (a smoke test, not figures)");
  app.add_option("--out-dir", o.out_dir, "Where ladder.json/.md and fusion.json/.md go (the notebook reads them)")
      ->capture_default_str();
}

namespace {

volatile float g_sink = 0.0f;

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

kernels::Ceilings measure(const Options& o) {
  kernels::CeilingOptions c;
  if (o.quick) c.seconds = 0.05;  // arrays stay large: small ones would measure the cache
  return kernels::measure_ceilings(c);
}

h::BenchOptions bench_options(const Options& o) {
  h::BenchOptions b;
  b.threads = o.threads;
  b.timing.repeats = o.quick ? 1 : o.repeats;
  b.timing.warmup = o.quick ? 0 : 1;
  b.timing.max_seconds = o.quick ? 0.5 : 3.0;
  return b;
}

void save(const Options& o, const std::string& stem, const kernels::Ceilings& c,
          const std::vector<h::Result>& results) {
  std::filesystem::create_directories(o.out_dir);
  const h::MachineInfo machine = h::machine_info();
  const std::string base = (std::filesystem::path(o.out_dir) / stem).string();
  std::ofstream json(base + ".json");
  h::write_json(json, machine, c, results);
  std::ofstream md(base + ".md");
  h::write_markdown(md, machine, c, results);
  NN_CHECK(json && md, "cannot write " << base << ".json/.md: is --out-dir writable?");
  std::cout << "  (saved " << base << ".json and .md)\n";
}

// 1 if any variant failed validation (the harness printed which and why), else 0.
int failed(const std::vector<h::Result>& results) {
  for (const h::Result& r : results) {
    if (!r.valid && r.note.rfind("skipped", 0) != 0) {
      std::cerr << "error: " << r.op << " " << r.variant << " failed validation at " << r.shape << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

// ---- part 1: the two roofs ----------------------------------------------------------------
int run_ceilings_part(const Options& o) {
  std::cout << "\n== Part 1: the machine's two ceilings, measured ==\n"
            << "Peak FLOP/s: an FMA loop with 12 independent accumulators (kernels/ceilings.cpp).\n"
            << "Bandwidth: a[i] = b[i] + s * c[i] over arrays far larger than the caches.\n";
  kernels::warn_if_busy(std::cout);
  const kernels::Ceilings c = measure(o);
  const int lanes = kernels::simd::Native::lanes;
  // peak = cores x clock x lanes x 2 FLOP per FMA x FMA units; with 2 units (x86 since
  // Haswell and Zen, Apple M-series has 4), the measured peak implies a clock:
  const double implied_ghz = c.flops_1t / (lanes * 2.0 * 2.0) / 1e9;
  std::cout << "  SIMD: " << kernels::simd::native_name() << ", " << lanes << " floats per register\n"
            << "  peak, 1 thread:    " << std::setw(7) << fixed(c.flops_1t / 1e9, 1) << " GFLOP/s  = "
            << lanes << " lanes x 2 (an FMA is 2 FLOPs) x 2 FMA units x " << fixed(implied_ghz, 2)
            << " GHz (the clock this implies)\n"
            << "  peak, " << c.threads_all << " threads:   " << std::setw(7) << fixed(c.flops_all / 1e9, 1)
            << " GFLOP/s  (" << fixed(c.flops_all / c.flops_1t, 2) << "x one thread)\n"
            << "  bandwidth, 1 thread:  " << std::setw(5) << fixed(c.bw_1t / 1e9, 1) << " GB/s\n"
            << "  bandwidth, " << c.threads_all << " threads: " << std::setw(5) << fixed(c.bw_all / 1e9, 1)
            << " GB/s  (" << fixed(c.bw_all / c.bw_1t, 2) << "x one thread: cores share the memory bus)\n"
            << "  ridge point: " << fixed(c.flops_all / c.bw_all, 1)
            << " FLOPs per byte. A kernel doing fewer FLOPs per byte it moves is memory-bound:\n"
            << "  faster arithmetic cannot help it, moving fewer bytes can.\n";
  return 0;
}

// ---- part 2: cache lines --------------------------------------------------------------------
int run_stride_part(const Options& o) {
  const size_t n = o.quick ? size_t{4} << 20 : size_t{64} << 20;  // floats: 16 MiB or 256 MiB
  std::cout << "\n== Part 2: memory moves in cache lines of 64 bytes (16 floats) ==\n"
            << "Sum every s-th float of " << n * 4 / (1 << 20) << " MiB. Until s = 16 every line is "
            << "loaded anyway,\nso a pass costs about the same although it uses 1/s of the data.\n";
  std::vector<float> data(n, 1.0f);
  kernels::warn_if_busy(std::cout);
  std::cout << "  stride s   floats used   pass (ms)   ns per float used\n";
  double first = 0.0;
  for (size_t s : {1, 2, 4, 8, 16, 32, 64}) {
    double best = 1e30;
    float sink = 0.0f;
    for (int rep = 0; rep < (o.quick ? 1 : 3); ++rep) {
      const double t0 = kernels::now_seconds();
      // 8 partial sums: one add chain would wait 4 cycles per add and hide the memory cost.
      float acc[8] = {};
      for (size_t i = 0; i + 7 * s < n; i += 8 * s) {
        for (size_t u = 0; u < 8; ++u) acc[u] += data[i + u * s];
      }
      best = std::min(best, kernels::now_seconds() - t0);
      for (float a : acc) sink += a;
    }
    if (s == 1) first = best;
    const size_t used = n / s;
    std::cout << "  " << std::setw(8) << s << std::setw(14) << used << std::setw(12) << fixed(best * 1e3, 2)
              << std::setw(14) << fixed(best * 1e9 / static_cast<double>(used), 3) << "\n";
    g_sink = g_sink + sink;  // the sums must be used, or the compiler drops the loop
  }
  std::cout << "  (stride 1 took " << fixed(first * 1e3, 2)
            << " ms.) Matmul's naive loop walks B down a column: stride N, one new line per multiply-add.\n";
  return 0;
}

// ---- part 3: the ladder -----------------------------------------------------------------------
double measure_python_gflops(int n) {
  // A script in a temporary file (no shell quoting), run with python3 from PATH.
  const std::filesystem::path script = std::filesystem::temp_directory_path() / "nnlab_lesson03_matmul.py";
  {
    std::ofstream py(script);
    py << "import random, time\n"
       << "n = " << n << "\n"
       << "A = [[random.random() for _ in range(n)] for _ in range(n)]\n"
       << "B = [[random.random() for _ in range(n)] for _ in range(n)]\n"
       << "C = [[0.0] * n for _ in range(n)]\n"
       << "t0 = time.perf_counter()\n"
       << "for i in range(n):\n"
       << "    for j in range(n):\n"
       << "        s = 0.0\n"
       << "        for k in range(n):\n"
       << "            s += A[i][k] * B[k][j]\n"
       << "        C[i][j] = s\n"
       << "print(time.perf_counter() - t0)\n";
  }
  const std::string cmd = "python3 \"" + script.string() + "\" 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  double seconds = 0.0;
  if (pipe != nullptr) {
    if (std::fscanf(pipe, "%lf", &seconds) != 1) seconds = 0.0;
    if (pclose(pipe) != 0) seconds = 0.0;
  }
  std::filesystem::remove(script);
  return seconds > 0.0 ? 2.0 * n * n * n / seconds / 1e9 : 0.0;
}

int run_ladder_part(const Options& o) {
  const int n = o.quick ? std::min(o.size, 192) : o.size;
  std::cout << "\n== Part 3: the ladder, C = A.B at " << n << " x " << n << " x " << n << " ==\n"
            << "Each rung is validated against a float64 reference before it is timed (kernels/harness).\n";
  const kernels::Ceilings c = measure(o);
  h::BenchOptions b = bench_options(o);
  b.sizes = {std::to_string(n)};
  const h::OpBench& op = kernels::bench::op("matmul");
  const std::vector<h::Result> results = h::run_bench(op, b, c, std::cout);
  save(o, "ladder", c, results);

  // The ladder in one table: each rung at 1 thread, then the threaded rung and the peer at
  // the most threads measured.
  const int most = std::max_element(results.begin(), results.end(), [](const h::Result& a, const h::Result& r) {
                     return a.threads < r.threads;
                   })->threads;
  std::cout << "\nThe ladder at " << n << "^3 (median of " << b.timing.repeats << "):\n"
            << "  rung                            threads    GFLOP/s   x previous   x v1   % of peak\n";
  double previous = 0.0, v1 = 0.0;
  auto row = [&](const std::string& label, int threads, double gflops, double frac_peak) {
    std::cout << "  " << std::left << std::setw(32) << label << std::right << std::setw(7) << threads
              << std::setw(11) << fixed(gflops, gflops < 1 ? 3 : 1) << std::setw(13)
              << (previous > 0 ? fixed(gflops / previous, 1) + "x" : "") << std::setw(7)
              << (v1 > 0 ? fixed(gflops / v1, 0) + "x" : "") << std::setw(12)
              << fixed(100 * frac_peak, 1) + "%" << "\n";
  };
  if (o.python) {
    const int pn = o.quick ? 32 : 96;
    const double py = measure_python_gflops(pn);
    if (py > 0) {
      row("Python loop (n=" + std::to_string(pn) + ")", 1, py, py * 1e9 / c.flops_1t);
      previous = py;
    } else {
      std::cout << "  (python3 not found: the interpreted-loop rung is skipped)\n";
    }
  }
  for (const h::Result& r : results) {
    const bool threaded_rung = r.variant == "v6" || r.peer;
    if (!r.timed || r.threads != (threaded_rung ? most : 1)) continue;
    row(r.variant + " " + r.name, r.threads, r.gflops, r.frac_peak);
    if (r.variant == "v1") v1 = r.gflops;
    if (!r.peer) previous = r.gflops;
  }
  std::cout << "  (% of peak is of the measured peak at that thread count; v1 and v2 may be skipped at big sizes.)\n";
  return failed(results);
}

// ---- part 4: fusion -----------------------------------------------------------------------
int run_fusion_part(const Options& o) {
  std::cout << "\n== Part 4: fusion: the same arithmetic, fewer passes over memory ==\n"
            << "y = cos(cos(x)): two passes (through a temporary, 16 bytes per element) vs one\n"
            << "(8 bytes). In cache the bytes are cheap and fusing gains nothing; out of cache the\n"
            << "fused pass gains whatever part of the two-pass time was spent waiting on memory.\n";
  const kernels::Ceilings c = measure(o);
  h::BenchOptions b = bench_options(o);
  if (b.threads.empty()) b.threads = {1};
  const h::OpBench& op = kernels::bench::op("cos2");
  b.sizes = o.quick ? std::vector<std::string>{"4096", "1000000"}
                    : std::vector<std::string>{"4096", "65536", "1048576", "16777216", "67108864"};
  const std::vector<h::Result> results = h::run_bench(op, b, c, std::cout);
  save(o, "fusion", c, results);
  return failed(results);
}

int run(const Options& o) {
  omp_set_dynamic(0);
  std::cout << "Lesson 03: matmul from loops to SIMD and threads (" << kernels::simd::native_name() << ", "
            << omp_get_max_threads() << " threads). Read lessons/03-matmul/README.md beside it.\n";
  if (o.quick) std::cout << "(--quick: small sizes, short runs: a smoke test, not figures to quote)\n";
  const std::map<std::string, int (*)(const Options&)> parts = {
      {"ceilings", run_ceilings_part}, {"stride", run_stride_part}, {"ladder", run_ladder_part},
      {"fusion", run_fusion_part}};
  if (o.part != "all") return parts.at(o.part)(o);
  for (const char* p : {"ceilings", "stride", "ladder", "fusion"}) {
    const int status = parts.at(p)(o);
    if (status != 0) return status;
  }
  return 0;
}

}  // namespace lesson03
