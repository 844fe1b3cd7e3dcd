// scripts/gemm_cputime.cpp: sgemm rungs and OpenBLAS timed by PROCESS CPU time, for a loaded
// machine. On a VM whose cores other jobs share, wall-clock medians of a 1 ms product swing
// 2x with the neighbours; the CPU time a single-threaded product consumes moves far less
// (only cache pollution from context switches remains), and the minimum over many
// alternating repeats is the least disturbed figure. Single-threaded figures only: with
// several threads CPU time is not the wall time a caller waits.
// Built and run by scripts/bench_gemm_cputime.sh (see there); prints, per shape, GFLOP/s
// from the minimum and the median time of each variant, the variants alternating repeat by
// repeat, caches flushed (8 MB written) before each.
#include <cblas.h>
#include <time.h>
#include <omp.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "kernels/matmul.h"
using kernels::Trans;
static double cpu_now() {
  timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
static double wall_now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
  // args: reps variants... shapes given as MxNxK[nn|nt|tn]
  int reps = atoi(argv[1]);
  std::vector<std::string> vars, shapes;
  for (int i = 2; i < argc; ++i) { std::string a = argv[i]; if (a.find('x') != std::string::npos) shapes.push_back(a); else vars.push_back(a); }
  bool wall = getenv("WALL") != nullptr;
  for (auto& sh : shapes) {
    int M, N, K; char f[3] = "nn";
    sscanf(sh.c_str(), "%dx%dx%d%2s", &M, &N, &K, f);
    Trans ta = f[0] == 't' ? Trans::Yes : Trans::No, tb = f[1] == 't' ? Trans::Yes : Trans::No;
    int lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
    std::vector<float> A((size_t)M * K), B((size_t)K * N), C((size_t)M * N), flush(8 << 20);
    for (auto& x : A) x = (rand() % 1000) / 1000.0f - 0.5f;
    for (auto& x : B) x = (rand() % 1000) / 1000.0f - 0.5f;
    std::vector<std::vector<double>> t(vars.size());
    for (int r = 0; r < reps; ++r) {
      for (size_t v = 0; v < vars.size(); ++v) {
        for (size_t i = 0; i < flush.size(); i += 16) flush[i] += 1.0f;
        double t0 = wall ? wall_now() : cpu_now();
        if (vars[v] == "openblas") {
          cblas_sgemm(CblasRowMajor, ta == Trans::No ? CblasNoTrans : CblasTrans, tb == Trans::No ? CblasNoTrans : CblasTrans,
                      M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
        } else {
          kernels::sgemm_version(vars[v]).fn(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
        }
        t[v].push_back((wall ? wall_now() : cpu_now()) - t0);
      }
    }
    printf("%-16s", sh.c_str());
    for (size_t v = 0; v < vars.size(); ++v) {
      std::sort(t[v].begin(), t[v].end());
      double mn = t[v][0], md = t[v][t[v].size() / 2];
      printf("  %s %.1f/%.1f", vars[v].c_str(), 2.0 * M * N * K / mn * 1e-9, 2.0 * M * N * K / md * 1e-9);
    }
    printf("   (GFLOP/s min-time/median)\n");
  }
}
