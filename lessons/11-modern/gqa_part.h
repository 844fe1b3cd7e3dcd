// Lesson 11, part gqa: grouped-query attention in the language of lesson 10's parts kv and
// law. Its options, and the conclusions it draws from its measurements (a function of the
// numbers alone, so a test can hand it any).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace lesson11 {

struct GqaOptions {
  // The model whose cache is counted and whose attention is timed (GPT-2 small by default).
  int layers = 12, heads = 12, embd = 768;
  std::vector<int> kv_heads;         // timed KV head counts; empty: every divisor of heads
  std::vector<int> contexts = {256, 512, 1024, 2048, 4096};
  std::vector<int> batches = {1, 8};
  double seconds = 0.04;             // per timed point (at least 3 calls; the median is kept)
  int threads = 0;                   // OpenMP threads for the timings and the triad (0: all)
  bool cpu_time = false;             // time with the thread's CPU clock (needs threads = 1)
  std::string json;                  // write the record here (docs/benchmarks/gqa-kv-cache.json)
};

void add_gqa_options(CLI::App& app, GqaOptions& o);

struct Options;
int run_gqa_part(const Options& opts);  // gqa_part.cpp

// One timed point: a decode step of B sequences (one new token each) over a cache of
// `context` positions, one layer, with `kv_heads` KV heads.
struct GqaPoint {
  int batch = 0, context = 0, kv_heads = 0;
  double us_per_step = 0.0;     // median time of one call (B tokens, one layer), microseconds
  double cache_bytes = 0.0;     // the k and v bytes the step must read: 2 B T NKV hs 4
  double gb_per_s = 0.0;        // cache_bytes / time
  bool in_cache = false;        // cache_bytes fit in the last-level cache
  double us_per_step_v2 = 0.0;  // the same step with v2 (each query head reads its KV head); 0 if not timed
};

// What the measurements say (lines to print): the bandwidth law at the longest context,
// proportionality of time to KV heads, and v3 against v2. `bandwidth` in bytes/s (STREAM
// triad, all threads), llc_bytes the last-level cache, heads the query heads.
std::vector<std::string> gqa_conclusions(const std::vector<GqaPoint>& points, double bandwidth, double llc_bytes,
                                         int heads);

}  // namespace lesson11
