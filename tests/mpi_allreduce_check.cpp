// tests/mpi_allreduce_check.cpp: the ring all-reduce (kernels/comm.h v1, written over
// MPI_Sendrecv) against MPI_Allreduce (v2), on the ranks mpirun started, then both timed.
//
//   mpirun -np 2 build/release/bin/nnlab_mpi_check [--quick] [--json PATH]
//
// Checks, on every rank, for buffers of 1 float to 4M floats (--quick: 64K): on values whose
// sums are exact in any order, both versions give the exact sum; on values that round, the ring
// is within a few float steps of MPI's and every rank holds the same bits (each rank passes a
// hash of its result to its right neighbour, which compares). Then times both (median of 9 after
// 2 warm-up) and prints, on rank 0, the time and the "bus bandwidth" 2 (N - 1) / N x bytes / time
// (what each rank sent, the quantity NCCL's tests report). --json PATH: rank 0 also writes the
// timings as {"ranks", "engine", "sizes": [{"floats", "bytes", "ring_ms", "library_ms"}, ...]}:
// what lesson 14's link part fits its latency and bandwidth to. Exit status 1 if any check
// fails on any rank.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/comm.h"
#include "kernels/comm_mpi.h"

namespace {

float exact_value(int r, int64_t i) { return static_cast<float>((r + 1) * 0.25 + static_cast<double>(i % 97) * 0.5 - 3.0); }
float round_value(int r, int64_t i) { return std::sin(0.37f * static_cast<float>(i % 10007) + 1.3f * static_cast<float>(r)) / 3.0f; }

uint64_t fnv(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ULL;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    quick = quick || std::string(argv[i]) == "--quick";
    if (std::string(argv[i]) == "--json" && i + 1 < argc) json = argv[++i];
  }
  std::unique_ptr<kernels::comm::Comm> comm = kernels::comm::mpi_launched() ? kernels::comm::make_mpi_comm(&argc, &argv)
                                                                           : kernels::comm::make_local_comm();
  kernels::comm::Comm& c = *comm;
  const int N = c.size(), r = c.rank();
  if (r == 0) std::printf("%d ranks, engine %s\n", N, c.name().c_str());
  const int64_t largest = quick ? (int64_t{1} << 16) : (int64_t{1} << 22);
  int failures = 0;
  for (int64_t n = 1; n <= largest; n = n < 1024 ? n * 3 + 1 : n * 4) {
    for (const auto& v : kernels::comm::allreduce_versions()) {
      std::vector<float> a(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] = exact_value(r, i);
      v.fn(c, a.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        double want = 0.0;
        for (int q = 0; q < N; ++q) want += exact_value(q, i);
        if (a[static_cast<size_t>(i)] != static_cast<float>(want)) {
          std::printf("FAIL rank %d: %s, n = %lld: element %lld is %.9g, the exact sum is %.9g\n", r, v.name,
                      static_cast<long long>(n), static_cast<long long>(i), a[static_cast<size_t>(i)], want);
          ++failures;
          break;
        }
      }
    }
    std::vector<float> ring(static_cast<size_t>(n)), lib(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ring[static_cast<size_t>(i)] = lib[static_cast<size_t>(i)] = round_value(r, i);
    kernels::comm::allreduce_ring(c, ring.data(), n);
    kernels::comm::allreduce_library(c, lib.data(), n);
    double worst = 0.0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(static_cast<double>(ring[static_cast<size_t>(i)]) - lib[static_cast<size_t>(i)]));
    if (worst > N * N * 6e-8) {
      std::printf("FAIL rank %d: n = %lld: the ring is %.3g from MPI_Allreduce (more than rounding)\n", r,
                  static_cast<long long>(n), worst);
      ++failures;
    }
    // the same bits on every rank: my hash against my left neighbour's, in four exact 16-bit pieces
    const uint64_t h = fnv(ring);
    float mine[4], theirs[4];
    for (int k = 0; k < 4; ++k) mine[k] = static_cast<float>((h >> (16 * k)) & 0xFFFF);
    c.sendrecv(mine, 4, (r + 1) % N, theirs, 4, (r - 1 + N) % N);
    if (std::memcmp(mine, theirs, sizeof mine) != 0) {
      std::printf("FAIL rank %d: n = %lld: the ring's result differs from rank %d's\n", r, static_cast<long long>(n),
                  (r - 1 + N) % N);
      ++failures;
    }
  }
  // every rank's failures, summed
  float f = static_cast<float>(failures);
  c.allreduce_sum(&f, 1);
  if (r == 0) std::printf("checks: %s (%d failures over all ranks)\n", f == 0 ? "passed" : "FAILED", static_cast<int>(f));

  if (r == 0) std::printf("\n%12s %14s %14s %12s %12s\n", "floats", "ring ms", "MPI ms", "ring GB/s", "MPI GB/s");
  std::string rows;
  for (int64_t n = 256; n <= largest; n *= 4) {
    std::vector<float> buf(static_cast<size_t>(n), 1.0f);
    double ms[2];
    for (int k = 0; k < 2; ++k) {
      const auto& v = kernels::comm::allreduce_versions()[static_cast<size_t>(k)];
      std::vector<double> t;
      for (int rep = 0; rep < 11; ++rep) {
        c.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        v.fn(c, buf.data(), n);
        const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (rep >= 2) t.push_back(dt);
      }
      std::sort(t.begin(), t.end());
      ms[k] = t[t.size() / 2];
    }
    const double bus = N > 1 ? 2.0 * (N - 1) / N * static_cast<double>(n) * sizeof(float) : 0.0;
    if (r == 0)
      std::printf("%12lld %14.4f %14.4f %12.2f %12.2f\n", static_cast<long long>(n), ms[0], ms[1], bus / ms[0] / 1e6,
                  bus / ms[1] / 1e6);
    char row[200];
    std::snprintf(row, sizeof row, "%s{\"floats\": %lld, \"bytes\": %lld, \"ring_ms\": %.6g, \"library_ms\": %.6g}",
                  rows.empty() ? "" : ", ", static_cast<long long>(n), static_cast<long long>(n * 4), ms[0], ms[1]);
    rows += row;
  }
  if (r == 0 && !json.empty()) {
    std::FILE* out = std::fopen(json.c_str(), "w");
    if (out == nullptr || std::fprintf(out, "{\"ranks\": %d, \"engine\": \"%s\", \"sizes\": [%s]}\n", N, c.name().c_str(),
                                       rows.c_str()) < 0 || std::fclose(out) != 0) {
      std::printf("FAIL: cannot write %s\n", json.c_str());
      return 1;
    }
  }
  return f == 0 ? 0 : 1;
}
