// kernels/ceilings.h: what this machine can do at most, measured here, not copied from a
// datasheet. Two numbers bound every kernel (the roofline model):
//
//   peak FLOP/s  an FMA-throughput loop: many independent accumulators so the FMA units
//                never wait on a previous result (latency x ports registers in flight);
//   bandwidth    a STREAM-style triad a[i] = b[i] + s * c[i] over arrays far larger than
//                the last-level cache; bytes counted as STREAM does (3 x 4 per element:
//                two reads, one write; the write-allocate read is not counted).
//
// Both for 1 thread and for all threads (OpenMP). A kernel doing F FLOPs while moving
// B bytes can go no faster than min(peak, (F / B) * bandwidth): F / B is its arithmetic
// intensity, and whichever roof is lower at that intensity is what bounds it.
#pragma once

#include <cstddef>
#include <string>

namespace kernels {

struct Ceilings {
  int threads_all = 1;     // what "all threads" was
  double flops_1t = 0.0;   // FLOP/s, one thread
  double flops_all = 0.0;  // FLOP/s, all threads
  double bw_1t = 0.0;      // bytes/s, one thread
  double bw_all = 0.0;     // bytes/s, all threads
  std::string simd;        // the SIMD the FMA loop used ("AVX2+FMA")

  // The ceilings at t threads: measured at 1 and at all; in between, compute scales with
  // t (each core has its own FMA units) and bandwidth with t until the all-thread figure.
  double flops_at(int threads) const;
  double bw_at(int threads) const;
};

struct CeilingOptions {
  double seconds = 0.25;     // per measurement (each is repeated, best kept)
  size_t triad_bytes = 0;    // per array; 0: 4 x the last-level cache, at least 64 MiB
  int threads_all = 0;       // 0: omp_get_max_threads()
};

Ceilings measure_ceilings(const CeilingOptions& opts = {});

// The two micro-benchmarks on their own: FLOP/s and bytes/s with `threads` threads.
double measure_fma_peak(int threads, double seconds);
double measure_triad_bandwidth(int threads, size_t bytes_per_array, double seconds);
// Peak int8 multiply-add throughput in ops/s (2 per multiply-add, like an FMA's 2 FLOPs) with
// `threads` threads: independent accumulator chains of the best int8 dot-product instruction
// the build has (int8_peak_method() names it: AVX-512 VNNI vpdpbusd, else AVX2 vpmaddubsw +
// vpmaddwd + vpaddd, else scalar int32 multiply-adds). The roof kernels/int8_gemm.h aims at.
double measure_int8_peak(int threads, double seconds);
const char* int8_peak_method();

// The last-level cache in bytes (from the OS; 32 MiB if it will not say).
size_t last_level_cache_bytes();

}  // namespace kernels
