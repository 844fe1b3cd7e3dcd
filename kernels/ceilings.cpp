// kernels/ceilings.cpp: peak FP32 FLOP/s and memory bandwidth, measured.
#include "kernels/ceilings.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "kernels/clock.h"
#include "kernels/simd.h"

namespace kernels {

namespace {

// ---- peak FLOP/s --------------------------------------------------------------------
// Each FMA depends on the previous FMA into the same accumulator, so one accumulator runs
// at one FMA per latency (4 cycles on recent x86). The core has 2 FMA ports, so it needs
// latency x ports = 8 independent chains in flight to keep both busy; 12 leaves slack and
// still fits the 16 ymm registers of AVX2 (plus the two operands).
constexpr int kChains = 12;

// kChains * lanes FMAs per iteration, `iters` iterations; returns a value that depends
// on every accumulator so the compiler cannot drop the work.
template <class V>
float fma_loop(int64_t iters, float seed) {
  using reg = typename V::reg;
  reg acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = V::set1(seed + 0.001f * static_cast<float>(c));
  // acc = acc * m + a converges to a / (1 - m): no overflow, no denormals.
  const reg m = V::set1(0.999f);
  const reg a = V::set1(0.001f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = V::fma(acc[c], m, a);
  }
  reg total = acc[0];
  for (int c = 1; c < kChains; ++c) total = V::add(total, acc[c]);
  return V::sum(total);
}

// ---- peak int8 ops/s ------------------------------------------------------------------
// The same idea for integer dot products: kChains independent accumulators, each updated by
// one dot-product step per iteration. Inputs are fixed small bytes (1 x 1), so the int32
// sums grow by a known amount and never overflow within the iteration counts used.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
constexpr double kInt8OpsPerStep = 2.0 * 64;  // vpdpbusd zmm: 64 u8 x s8 multiply-adds
int64_t int8_loop(int64_t iters, int seed) {
  __m512i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(seed + c);
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(static_cast<char>(seed & 1));
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
  __m512i total = acc[0];
  for (int c = 1; c < kChains; ++c) total = _mm512_add_epi32(total, acc[c]);
  return _mm512_reduce_add_epi32(total);
}
#elif defined(__AVX2__)
constexpr double kInt8OpsPerStep = 2.0 * 32;  // vpmaddubsw ymm: 32 multiply-adds (+ madd, add)
int64_t int8_loop(int64_t iters, int seed) {
  __m256i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(seed + c);
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(static_cast<char>(seed));
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c)
      // b's bytes taken from the accumulator itself: otherwise maddubs(a, b) is loop-invariant
      // and the compiler computes it once. Values wrap (integers): only the timing matters.
      acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_xor_si256(acc[c], b)), ones));
  __m256i total = acc[0];
  for (int c = 1; c < kChains; ++c) total = _mm256_add_epi32(total, acc[c]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  int64_t s = 0;
  for (int32_t v : lanes) s += v;
  return s;
}
#else
constexpr double kInt8OpsPerStep = 2.0;  // one scalar int8 multiply-add per chain step
int64_t int8_loop(int64_t iters, int seed) {
  int32_t acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = seed + c;
  volatile int8_t vb = static_cast<int8_t>(seed & 1);  // not a constant the compiler folds
  const int32_t b = vb;
  for (int64_t i = 0; i < iters; ++i)  // a taken from the accumulator: no loop-invariant product
    for (int c = 0; c < kChains; ++c) acc[c] += static_cast<int8_t>(acc[c] & 0x7F) * b;
  int64_t s = 0;
  for (int32_t v : acc) s += v;
  return s;
}
#endif

// ---- STREAM triad ---------------------------------------------------------------------
void triad(float* a, const float* b, const float* c, float s, int64_t n) {
#pragma omp for schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

double measure_fma_peak(int threads, double seconds) {
  using V = simd::Native;
  const double flops_per_iter = 2.0 * kChains * V::lanes;  // an FMA is 2 FLOPs
  // Calibrate: grow the iteration count until one run takes about a tenth of the budget.
  int64_t iters = 1 << 14;
  volatile float sink = 0.0f;
  for (;;) {
    const double t0 = now_seconds();
    sink = sink + fma_loop<V>(iters, 1.0f);
    if (now_seconds() - t0 > seconds / 10 || iters > (int64_t{1} << 34)) break;
    iters *= 2;
  }
  double best = 0.0;
  const double start = now_seconds();
  while (now_seconds() - start < seconds || best == 0.0) {
    float local_sink = 0.0f;
    const double t0 = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : local_sink)
    local_sink += fma_loop<V>(iters, 1.0f + 0.01f * static_cast<float>(omp_get_thread_num()));
    const double dt = now_seconds() - t0;
    sink = sink + local_sink;
    best = std::max(best, flops_per_iter * static_cast<double>(iters) * threads / dt);
  }
  return best;
}

const char* int8_peak_method() {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  return "AVX-512 VNNI vpdpbusd";
#elif defined(__AVX2__)
  return "AVX2 vpmaddubsw+vpmaddwd";
#else
  return "scalar int32";
#endif
}

double measure_int8_peak(int threads, double seconds) {
  const double ops_per_iter = kInt8OpsPerStep * kChains;
  int64_t iters = 1 << 14;
  volatile int64_t sink = 0;
  for (;;) {  // calibrate: one run about a tenth of the budget (and < 2^24 steps: no overflow)
    const double t0 = now_seconds();
    sink = sink + int8_loop(iters, 1);
    if (now_seconds() - t0 > seconds / 10 || iters >= (int64_t{1} << 22)) break;
    iters *= 2;
  }
  double best = 0.0;
  const double start = now_seconds();
  while (now_seconds() - start < seconds || best == 0.0) {
    int64_t local_sink = 0;
    const double t0 = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : local_sink)
    local_sink += int8_loop(iters, 1 + omp_get_thread_num());
    const double dt = now_seconds() - t0;
    sink = sink + local_sink;
    best = std::max(best, ops_per_iter * static_cast<double>(iters) * threads / dt);
  }
  return best;
}

double measure_triad_bandwidth(int threads, size_t bytes_per_array, double seconds) {
  const int64_t n = static_cast<int64_t>(bytes_per_array / sizeof(float));
  // new[] without value-initialisation: the first touch happens below, in parallel, with
  // the same static schedule as the triad, so each thread's pages are its own.
  std::unique_ptr<float[]> a(new float[static_cast<size_t>(n)]);
  std::unique_ptr<float[]> b(new float[static_cast<size_t>(n)]);
  std::unique_ptr<float[]> c(new float[static_cast<size_t>(n)]);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  const double bytes = 3.0 * sizeof(float) * static_cast<double>(n);
  double best = 0.0;
  const double start = now_seconds();
  int runs = 0;
  while (now_seconds() - start < seconds || runs < 3) {
    const double t0 = now_seconds();
#pragma omp parallel num_threads(threads)
    triad(a.get(), b.get(), c.get(), 0.5f, n);
    const double dt = now_seconds() - t0;
    best = std::max(best, bytes / dt);
    ++runs;
  }
  volatile float sink = a[static_cast<size_t>(n / 2)];
  (void)sink;
  return best;
}

size_t last_level_cache_bytes() {
  // Linux: the highest cache index of cpu0 is the last level ("32768K").
  size_t best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text) || text.empty()) continue;
    size_t value = std::stoul(text);
    if (text.back() == 'K') value *= 1024;
    if (text.back() == 'M') value *= 1024 * 1024;
    best = std::max(best, value);
  }
  return best > 0 ? best : size_t{32} << 20;
}

Ceilings measure_ceilings(const CeilingOptions& opts) {
  Ceilings c;
  c.threads_all = opts.threads_all > 0 ? opts.threads_all : omp_get_max_threads();
  c.simd = simd::native_name();
  const size_t bytes = opts.triad_bytes > 0
                           ? opts.triad_bytes
                           : std::max(size_t{64} << 20, 4 * last_level_cache_bytes());
  c.flops_1t = measure_fma_peak(1, opts.seconds);
  c.flops_all = c.threads_all == 1 ? c.flops_1t : measure_fma_peak(c.threads_all, opts.seconds);
  c.bw_1t = measure_triad_bandwidth(1, bytes, opts.seconds);
  c.bw_all = c.threads_all == 1 ? c.bw_1t : measure_triad_bandwidth(c.threads_all, bytes, opts.seconds);
  return c;
}

double Ceilings::flops_at(int threads) const {
  if (threads <= 1) return flops_1t;
  if (threads >= threads_all) return flops_all;
  return flops_1t + (flops_all - flops_1t) * (threads - 1) / std::max(1, threads_all - 1);
}

double Ceilings::bw_at(int threads) const {
  if (threads <= 1) return bw_1t;
  if (threads >= threads_all) return bw_all;
  return std::min(bw_all, bw_1t * threads);
}

}  // namespace kernels
