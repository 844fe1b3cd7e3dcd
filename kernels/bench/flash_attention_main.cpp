// kernels/bench/flash_attention_main.cpp: the program behind docs/benchmarks/flash-attention-cpu.md
// (issue 21). Flash attention (kernels/flash_attention.h, its best rung) side by side with the
// unfused path (kernels/attention.h, its best rung, which keeps the (B,NH,T,T) scores and
// probabilities for the backward), forward + backward, at T = 256 ... 4096:
//
//   memory  the extra bytes each path needs beyond its inputs and outputs (qkv, dout, out,
//           dqkv): for the unfused path preatt, att (forward) and dpreatt, datt (backward),
//           (B,NH,T,T) floats each, plus its per-thread row scratch; for flash lse (B,NH,T)
//           and its per-thread tiles (kernels::flash_attention_scratch_bytes), the backward's
//           D (B,NH,T). Both COUNTED from the sizes the code allocates, and MEASURED: a child
//           process (this program, --probe) allocates and touches the inputs and outputs,
//           reads its peak resident set (VmHWM), runs the path once, and reads it again.
//   speed   wall time of forward + backward, the two paths ALTERNATING round by round, and
//           an unchanged peer (the sgemm_v7 product, 512^3) in the same rounds: if the peer's
//           times move, the machine moved. Medians. Before timing, flash's out and dqkv are
//           compared with the unfused path's (a path that disagrees is not timed).
//
//   build/release/bin/bench_flash_attention [--B 1] [--NH 6] [--hs 64] [--T 256,512,1024,2048,4096]
//                                           [--rounds 3] [--out docs/benchmarks/flash-attention-cpu.md]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/attention.h"
#include "kernels/clock.h"
#include "kernels/flash_attention.h"
#include "kernels/harness.h"
#include "kernels/matmul.h"
#include "kernels/simd.h"

namespace {

namespace h = kernels::harness;

struct Config {
  int B = 1, NH = 6, hs = 64, rounds = 3;
  std::vector<int> Ts = {256, 512, 1024, 2048, 4096};
  std::string out;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Peak resident set of this process so far, bytes (Linux; 0 elsewhere).
size_t vm_hwm() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return static_cast<size_t>(std::stoull(line.substr(6))) * 1024;
  }
  return 0;
}

// The two paths over one set of buffers. The unfused path's (B,NH,T,T) buffers and flash's lse
// are members allocated by alloc_extra: what each path needs beyond the shared inputs/outputs.
struct Problem {
  int B, T, C, NH;
  std::vector<float> qkv, dout, out, dqkv;
  std::vector<float> preatt, att, dpreatt, datt, lse;
  Problem(int B_, int T_, int C_, int NH_) : B(B_), T(T_), C(C_), NH(NH_) {
    const size_t n = static_cast<size_t>(B) * T * C;
    qkv.resize(3 * n);
    dout.resize(n);
    out.resize(n);
    dqkv.resize(3 * n);
    h::fill_random(qkv, 1, -2.0f, 2.0f);
    h::fill_random(dout, 2);
  }
  void alloc_extra(bool flash) {
    const size_t tt = static_cast<size_t>(B) * NH * T * T;
    if (flash) {
      lse.assign(static_cast<size_t>(B) * NH * T, 0.0f);
    } else {
      preatt.assign(tt, 0.0f);
      att.assign(tt, 0.0f);
      dpreatt.assign(tt, 0.0f);
      datt.assign(tt, 0.0f);
    }
  }
  void unfused() {
    const auto& f = kernels::attention_versions().back();
    const auto& b = kernels::attention_backward_versions().back();
    f.fn(out.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
    b.fn(dqkv.data(), dpreatt.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  }
  void flash() {
    const auto& f = kernels::flash_attention_versions().back();
    const auto& b = kernels::flash_attention_backward_versions().back();
    f.fn(out.data(), lse.data(), qkv.data(), B, T, C, NH, NH);
    b.fn(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH, NH);
  }
};

// The counted extra bytes (see the header comment). attention.cpp's v2/v3 take (hs + 1) ld
// floats of row scratch per thread in the forward, (hs + 2) ld in the backward, ld = T rounded
// up to whole registers (kernels/attention.cpp: attention_forward_heads / backward_heads).
size_t counted_unfused(int B, int T, int NH, int hs, int threads) {
  const size_t tt = 4 * static_cast<size_t>(B) * NH * T * T * sizeof(float);
  const size_t W = kernels::simd::Native::lanes;
  const size_t ld = (static_cast<size_t>(T) + W - 1) / W * W;
  return tt + static_cast<size_t>(threads) * ((hs + 1) * ld + (hs + 2) * ld) * sizeof(float);
}
size_t counted_flash(int B, int T, int NH, int hs, int threads) {
  const int v = kernels::flash_attention_versions().back().number;
  const int C = NH * hs;
  return static_cast<size_t>(B) * NH * T * sizeof(float) +
         kernels::flash_attention_scratch_bytes(v, false, B, T, C, NH, NH, threads) +
         kernels::flash_attention_scratch_bytes(v, true, B, T, C, NH, NH, threads);
}

// --probe flash|unfused B T NH hs: run one path once, print the peak-RSS growth in bytes.
int probe(const std::string& path, int B, int T, int NH, int hs) {
  Problem p(B, T, NH * hs, NH);
#pragma omp parallel
  { volatile int touch = omp_get_thread_num(); (void)touch; }  // the team's stacks exist before the baseline
  const size_t before = vm_hwm();
  p.alloc_extra(path == "flash");
  if (path == "flash") p.flash(); else p.unfused();
  std::printf("%zu\n", vm_hwm() - before);
  return 0;
}

size_t measured(const char* self, const std::string& path, int B, int T, int NH, int hs) {
  const std::string cmd = std::string(self) + " --probe " + path + " " + std::to_string(B) + " " + std::to_string(T) +
                          " " + std::to_string(NH) + " " + std::to_string(hs);
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return 0;
  unsigned long long bytes = 0;
  if (std::fscanf(f, "%llu", &bytes) != 1) bytes = 0;
  pclose(f);
  return static_cast<size_t>(bytes);
}

std::string mib(size_t bytes) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(bytes < (1u << 20) ? 3 : 1);
  os << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return scale > 0 ? m / scale : m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 7 && std::string(argv[1]) == "--probe") {
    return probe(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]));
  }
  Config cfg;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--B") cfg.B = std::stoi(v);
    else if (k == "--NH") cfg.NH = std::stoi(v);
    else if (k == "--hs") cfg.hs = std::stoi(v);
    else if (k == "--rounds") cfg.rounds = std::stoi(v);
    else if (k == "--out") cfg.out = v;
    else if (k == "--T") {
      cfg.Ts.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) cfg.Ts.push_back(std::stoi(item));
    } else {
      std::cerr << "bench_flash_attention: unknown option " << k << "\n";
      return 2;
    }
  }
  const int threads = omp_get_max_threads();
  const h::MachineInfo m = h::machine_info();
  const std::string load_start = loadavg();
  std::ostringstream md;
  md << "# Flash attention against the unfused path, CPU (issue 21)\n\n";
  // Other jobs on the machine show in the 1-minute load average: label such a run, so it is
  // not read as an idle figure. The rule is every timing command's (kernels/clock.h): a load
  // above the hardware threads means someone else ran too.
  std::ostringstream busy;
  if (kernels::warn_if_busy(busy, "at the start")) {
    std::cerr << busy.str();
    md << "**Measured under load** (1-minute load average " << load_start.substr(0, load_start.find(' '))
       << " at the start on " << std::max(1, static_cast<int>(std::thread::hardware_concurrency()))
       << " hardware threads): other jobs shared the cores, so the times below are noisy; re-run idle for the "
          "figures to quote.\n\n";
  }
  md
     << "Written by `build/release/bin/bench_flash_attention --B " << cfg.B << " --NH " << cfg.NH << " --hs " << cfg.hs
     << " --rounds " << cfg.rounds << " --out docs/benchmarks/flash-attention-cpu.md` "
     << "(kernels/bench/flash_attention_main.cpp says what is measured and how).\n\n"
     << "Machine: " << m.cpu << ", " << m.cores << " cores, " << threads << " OpenMP threads, SIMD " << m.simd << ", "
     << m.compiler << " `" << m.flags << "`; " << m.date << ".\n\n"
     << "Problem: causal self-attention, B = " << cfg.B << ", " << cfg.NH << " heads of " << cfg.hs
     << " (C = " << cfg.NH * cfg.hs << "), multi-head (NKV = NH, so both paths read the same qkv), forward + backward. "
     << "Unfused: kernels/attention.h " << kernels::attention_versions().back().id() << " ("
     << kernels::attention_versions().back().name << "), backward "
     << kernels::attention_backward_versions().back().id() << " ("
     << kernels::attention_backward_versions().back().name << "); flash: kernels/flash_attention.h "
     << kernels::flash_attention_versions().back().id() << " (" << kernels::flash_attention_versions().back().name
     << ").\n\n";

  md << "## Memory: the extra bytes each path allocates (beyond qkv, dout, out, dqkv)\n\n"
     << "Counted from the sizes the code allocates; measured as the peak-RSS growth of a child process that runs the "
        "path once (--probe).\n\n"
     << "| T | unfused counted | unfused measured | flash counted | flash measured | unfused / flash (counted) |\n"
     << "|---:|---:|---:|---:|---:|---:|\n";
  for (const int T : cfg.Ts) {
    const size_t cu = counted_unfused(cfg.B, T, cfg.NH, cfg.hs, threads);
    const size_t cf = counted_flash(cfg.B, T, cfg.NH, cfg.hs, threads);
    const size_t mu = measured(argv[0], "unfused", cfg.B, T, cfg.NH, cfg.hs);
    const size_t mf = measured(argv[0], "flash", cfg.B, T, cfg.NH, cfg.hs);
    md << "| " << T << " | " << mib(cu) << " | " << mib(mu) << " | " << mib(cf) << " | " << mib(mf) << " | "
       << static_cast<long long>(static_cast<double>(cu) / static_cast<double>(cf) + 0.5) << "x |\n";
    std::cerr << "memory T=" << T << ": unfused " << mib(cu) << " (measured " << mib(mu) << "), flash " << mib(cf)
              << " (measured " << mib(mf) << ")\n";
  }

  md << "\n## Speed: forward + backward, wall time, medians of " << cfg.rounds << " alternating rounds\n\n"
     << "| T | unfused (ms) | flash (ms) | flash / unfused | peer sgemm_v7 512^3 (ms), min-max | flash vs unfused max rel. diff (out, dqkv) |\n"
     << "|---:|---:|---:|---:|---:|---:|\n";
  std::vector<float> A(512 * 512), Bm(512 * 512), Cm(512 * 512);
  h::fill_random(A, 3);
  h::fill_random(Bm, 4);
  for (const int T : cfg.Ts) {
    Problem p(cfg.B, T, cfg.NH * cfg.hs, cfg.NH);
    p.alloc_extra(false);
    p.alloc_extra(true);
    // validate before timing: flash against the unfused path on the same inputs
    p.unfused();
    const std::vector<float> out_u = p.out, dqkv_u = p.dqkv;
    p.flash();
    const double d_out = max_rel_diff(p.out, out_u), d_dqkv = max_rel_diff(p.dqkv, dqkv_u);
    const bool agree = d_out < 1e-4 && d_dqkv < 1e-3;
    std::vector<double> tu, tf, tp;
    for (int r = 0; r < cfg.rounds && agree; ++r) {
      double t0 = now();
      p.unfused();
      tu.push_back(now() - t0);
      t0 = now();
      p.flash();
      tf.push_back(now() - t0);
      t0 = now();
      kernels::sgemm_v7(kernels::Trans::No, kernels::Trans::No, 512, 512, 512, 1.0f, A.data(), 512, Bm.data(), 512, 0.0f,
                        Cm.data(), 512);
      tp.push_back(now() - t0);
    }
    std::ostringstream row;
    row.setf(std::ios::fixed);
    row.precision(1);
    if (!agree) {
      row << "| " << T << " | - | - | not timed: flash disagrees with the unfused path | - | " << d_out << ", " << d_dqkv
          << " |\n";
    } else {
      const double mu = h::median_of(tu) * 1e3, mf = h::median_of(tf) * 1e3;
      row << "| " << T << " | " << mu << " | " << mf << " | ";
      row.precision(2);
      row << mf / mu << " | ";
      row.precision(1);
      row << h::median_of(tp) * 1e3 << " (" << *std::min_element(tp.begin(), tp.end()) * 1e3 << "-"
          << *std::max_element(tp.begin(), tp.end()) * 1e3 << ") | ";
      row << std::scientific;
      row.precision(1);
      row << d_out << ", " << d_dqkv << " |\n";
    }
    md << row.str();
    std::cerr << "speed " << row.str();
  }
  md << "\nLoad average (1, 5, 15 min) at the start: " << load_start << "; at the end: " << loadavg()
     << ". A run that started with the load above the hardware threads is labelled at the top, and "
        "the peer's spread shows how much the machine moved during the rounds.\n";
  if (!cfg.out.empty()) {
    std::ofstream f(cfg.out);
    f << md.str();
    std::cerr << "wrote " << cfg.out << "\n";
  } else {
    std::cout << md.str();
  }
  return 0;
}
