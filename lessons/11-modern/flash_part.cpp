// Lesson 11, part flash: full attention (kernels/attention.h) keeps the (B, NH, T, T) scores
// and probabilities for its backward, and the backward two more such maps: memory O(T^2).
// Flash attention (kernels/flash_attention.h) keeps one log-sum-exp per query row, O(T), and
// recomputes the probabilities in the backward from q, k and lse. The part counts both
// (the maps vs lse + flash's tiles, from the sizes the code allocates) and times the two best
// rungs, forward + backward, in alternating rounds (medians), after checking that they agree.
// The full record at T up to 4096 is docs/benchmarks/flash-attention-cpu.md
// (build/release/bin/bench_flash_attention, which also measures the memory as peak RSS).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/flash_attention.h"
#include "kernels/harness.h"
#include "lessons/11-modern/modern_lesson.h"
#include "nn/check.h"

namespace lesson11 {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double m = 0.0, scale = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0.0 ? m / scale : m;
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes < 1024.0 * 1024.0 ? "%.3f MiB" : "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

int run_flash_part(const Options& opts) {
  const int B = 1, NH = opts.quick ? 2 : 6, hs = opts.quick ? 16 : 64, C = NH * hs;
  std::vector<int> Ts = opts.flash_T;
  if (Ts.empty()) Ts = opts.quick ? std::vector<int>{32, 64} : std::vector<int>{256, 512, 1024};
  const int threads = omp_get_max_threads();
  const auto& full_f = kernels::attention_versions().back();
  const auto& full_b = kernels::attention_backward_versions().back();
  const auto& flash_f = kernels::flash_attention_versions().back();
  const auto& flash_b = kernels::flash_attention_backward_versions().back();
  std::printf("== part flash: full attention (attention %s, %s) vs flash attention (flash_attention %s, %s)\n",
              full_f.id().c_str(), full_f.name, flash_f.id().c_str(), flash_f.name);
  std::printf("B = %d, %d heads of %d (C = %d), causal, forward + backward, %d threads, %d alternating rounds\n", B, NH,
              hs, C, threads, opts.flash_rounds);
  std::printf("memory beyond qkv, out, dout, dqkv: full = preatt, att, dpreatt, datt (B,NH,T,T) floats each;\n"
              "flash = lse (B,NH,T) + its tiles and the backward's D (flash_attention_scratch_bytes)\n");
  std::printf("  %6s %14s %14s %8s %10s %10s %8s %10s %10s\n", "T", "full maps", "flash lse+tiles", "ratio", "full ms",
              "flash ms", "flash/full", "diff out", "diff dqkv");

  std::ostringstream rows;
  int first_T = 0, last_T = 0, flash_faster = 0;
  double first_full = 0.0, first_flash = 0.0, last_full = 0.0, last_flash = 0.0;
  for (size_t ti = 0; ti < Ts.size(); ++ti) {
    const int T = Ts[ti];
    const size_t n = static_cast<size_t>(B) * T * C, tt = static_cast<size_t>(B) * NH * T * T;
    std::vector<float> qkv(3 * n), dout(n);
    kernels::harness::fill_random(qkv, opts.seed + T, -2.0f, 2.0f);
    kernels::harness::fill_random(dout, opts.seed + 2 * T);
    std::vector<float> out_full(n), out_flash(n), dqkv_full(3 * n), dqkv_flash(3 * n);
    std::vector<float> preatt(tt), att(tt), dpreatt(tt), datt(tt), lse(static_cast<size_t>(B) * NH * T);
    auto run_full = [&] {
      full_f.fn(out_full.data(), preatt.data(), att.data(), qkv.data(), B, T, C, NH);
      full_b.fn(dqkv_full.data(), dpreatt.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    };
    auto run_flash = [&] {
      flash_f.fn(out_flash.data(), lse.data(), qkv.data(), B, T, C, NH, NH);
      flash_b.fn(dqkv_flash.data(), dout.data(), qkv.data(), out_flash.data(), lse.data(), B, T, C, NH, NH);
    };
    // Correct before fast: at the first T the full path's best rung against attention v1 (the
    // loops), then at every T flash against the full path; a disagreement stops the part.
    run_full();
    run_flash();
    if (ti == 0) {
      std::vector<float> o1(n), p1(tt), a1(tt), d1(3 * n), dp1(tt), da1(tt);
      kernels::attention_forward_v1<float>(o1.data(), p1.data(), a1.data(), qkv.data(), B, T, C, NH);
      kernels::attention_backward_v1<float>(d1.data(), dp1.data(), da1.data(), dout.data(), qkv.data(), a1.data(), B, T,
                                            C, NH);
      const double e = std::max(max_rel_diff(out_full, o1), max_rel_diff(dqkv_full, d1));
      NN_CHECK(e < 1e-4, "attention " << full_f.id() << " disagrees with v1 by " << e);
    }
    const double diff_out = max_rel_diff(out_flash, out_full), diff_d = max_rel_diff(dqkv_flash, dqkv_full);
    NN_CHECK(diff_out < 1e-4 && diff_d < 1e-4,
             "flash attention disagrees with full attention at T = " << T << ": " << diff_out << ", " << diff_d);

    std::vector<double> t_full, t_flash;
    for (int r = 0; r < opts.flash_rounds; ++r) {  // A B A B: both see the same machine
      double t0 = now_s();
      run_full();
      t_full.push_back(now_s() - t0);
      t0 = now_s();
      run_flash();
      t_flash.push_back(now_s() - t0);
    }
    const double ms_full = 1e3 * kernels::harness::median_of(t_full);
    const double ms_flash = 1e3 * kernels::harness::median_of(t_flash);
    const double full_bytes = 4.0 * static_cast<double>(tt * sizeof(float));
    const double flash_bytes =
        static_cast<double>(lse.size() * sizeof(float)) +
        static_cast<double>(kernels::flash_attention_scratch_bytes(flash_f.number, false, B, T, C, NH, NH, threads) +
                            kernels::flash_attention_scratch_bytes(flash_b.number, true, B, T, C, NH, NH, threads));
    std::printf("  %6d %14s %14s %7.1fx %10.2f %10.2f %9.2f %10.1e %10.1e\n", T, mib(full_bytes).c_str(),
                mib(flash_bytes).c_str(), full_bytes / flash_bytes, ms_full, ms_flash, ms_flash / ms_full, diff_out,
                diff_d);
    if (ti == 0) first_T = T, first_full = full_bytes, first_flash = flash_bytes;
    last_T = T, last_full = full_bytes, last_flash = flash_bytes;
    flash_faster += ms_flash < ms_full ? 1 : 0;
    if (rows.tellp() > 0) rows << ", ";
    rows << "{\"T\": " << T << ", \"full_bytes\": " << static_cast<long long>(full_bytes)
         << ", \"flash_bytes\": " << static_cast<long long>(flash_bytes)
         << ", \"full_ms\": " << jnum(ms_full) << ", \"flash_ms\": " << jnum(ms_flash)
         << ", \"max_rel_diff_out\": " << jnum(diff_out) << ", \"max_rel_diff_dqkv\": " << jnum(diff_d) << "}";
  }
  // What the table shows, from its own numbers (whichever way they came out).
  if (first_T > 0 && last_T > first_T) {
    std::printf("from T = %d to %d (x%.0f): full's maps grew x%.0f, flash's bytes x%.1f\n", first_T, last_T,
                static_cast<double>(last_T) / first_T, last_full / first_full, last_flash / first_flash);
  }
  std::printf("flash was faster than full at %d of %zu sizes here (timed on %d threads; see\n"
              "docs/benchmarks/flash-attention-cpu.md for the idle record up to T = 4096)\n", flash_faster, Ts.size(),
              threads);

  std::ostringstream js;
  js << "{\"B\": " << B << ", \"NH\": " << NH << ", \"hs\": " << hs << ", \"threads\": " << threads
     << ", \"rounds\": " << opts.flash_rounds << ", \"full\": \"attention " << full_f.id() << "\", \"flash\": \"flash_attention "
     << flash_f.id() << "\", \"rows\": [" << rows.str() << "]}";
  record_part("flash", js.str());
  return 0;
}

}  // namespace lesson11
