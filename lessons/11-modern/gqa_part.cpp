// Lesson 11, part gqa: grouped-query attention, measured in lesson 10's language.
//
// A decoder keeps every earlier position's k and v (the KV cache). Per generated token and
// layer, attention reads all of them: 2 (k and v) x context x (KV heads x hs) floats. With
// grouped-query attention NH query heads share NKV key/value heads (query head h reads KV
// head h / (NH / NKV)), so the cache, and the bytes a token reads, shrink by NH / NKV:
//     KV-cache bytes per token = 2 * L * NKV * hs * 4   (fp32)
// while the FLOPs stay those of NH heads (every query head still scores every position).
// At long contexts a step of decode attention is a stream through the cache, so like lesson
// 10's weights it should take cache bytes / bandwidth, and fewer KV heads proportionally
// less time. This part counts the bytes, times kernels::attention_decode (its fastest rung,
// v3, which reads each KV row once for its group of query heads) against the context for
// each NKV, and computes from the times the achieved GB/s, the fraction of the measured
// memory bandwidth (kernels/ceilings.h's STREAM triad) and how proportional the savings are
// (gqa_conclusions). v2, whose query heads each read their KV head on their own, is timed at
// the longest context beside it: GQA saves bandwidth only in a kernel that reads this way.
#include "lessons/11-modern/gqa_part.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/ceilings.h"
#include "kernels/clock.h"
#include "kernels/decode.h"
#include "kernels/harness.h"
#include "kernels/splitmix64.h"
#include "lessons/11-modern/modern_lesson.h"
#include "nn/check.h"

namespace lesson11 {

void add_gqa_options(CLI::App& app, GqaOptions& o) {
  app.add_option("--gqa-layers", o.layers, "gqa: layers of the model whose cache is counted")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--gqa-heads", o.heads, "gqa: query heads NH")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--gqa-embd", o.embd, "gqa: channels C (head size C / NH)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--gqa-kv-heads", o.kv_heads, "gqa: KV head counts to time, e.g. 12,4,1 (default: every divisor of NH)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_option("--gqa-contexts", o.contexts, "gqa: context lengths to time, e.g. 256,1024,8192")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--gqa-batches", o.batches, "gqa: sequences per decode step, e.g. 1,4")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--gqa-seconds", o.seconds, "gqa: seconds per timed point (at least 3 calls, the median kept)")
      ->check(CLI::Range(0.0, 60.0))
      ->capture_default_str();
  app.add_option("--gqa-threads", o.threads, "gqa: threads for the timings and the bandwidth (0: all)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_flag("--gqa-cpu-time", o.cpu_time,
               "gqa: time with the calling thread's CPU clock, not the wall clock (needs --gqa-threads 1): on a busy "
               "machine it leaves out the time the thread waited for a core (memory contention stays in)");
  app.add_option("--gqa-json", o.json, "gqa: write the measurements and conclusions as JSON to this file");
}

namespace {

std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

std::string bytes_str(double b) {
  if (b >= 1024.0 * 1024.0 * 1024.0) return fmt(b / (1024.0 * 1024.0 * 1024.0), 2) + " GiB";
  if (b >= 1024.0 * 1024.0) return fmt(b / (1024.0 * 1024.0), 1) + " MiB";
  return fmt(b / 1024.0, 1) + " KiB";
}

std::string times(double r) { return fmt(r, r < 10 ? 2 : 1) + "x"; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double load_average() {
  double l[1] = {0.0};
  return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

// Median seconds of one call of `fn` (after one untimed call): at least 3 calls, more until
// `seconds` have passed (at most 200).
// The calling thread's CPU time in seconds (what --gqa-cpu-time measures with).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <class Fn>
double median_seconds(Fn&& fn, double seconds, bool cpu_clock) {
  fn();
  std::vector<double> t;
  const double start = kernels::now_seconds();
  while (t.size() < 3 || (t.size() < 200 && kernels::now_seconds() - start < seconds)) {
    const double t0 = cpu_clock ? thread_cpu_seconds() : kernels::now_seconds();
    fn();
    t.push_back((cpu_clock ? thread_cpu_seconds() : kernels::now_seconds()) - t0);
  }
  return median(t);
}

const GqaPoint* find(const std::vector<GqaPoint>& pts, int batch, int context, int kv) {
  for (const GqaPoint& p : pts)
    if (p.batch == batch && p.context == context && p.kv_heads == kv) return &p;
  return nullptr;
}

}  // namespace

// ---- conclusions from the measurements -------------------------------------------------------

std::vector<std::string> gqa_conclusions(const std::vector<GqaPoint>& points, double bandwidth, double llc_bytes,
                                         int heads) {
  std::vector<std::string> out;
  if (points.empty() || bandwidth <= 0.0) return out;
  int longest = 0;
  std::vector<int> batches;
  for (const GqaPoint& p : points) {
    longest = std::max(longest, p.context);
    if (std::find(batches.begin(), batches.end(), p.batch) == batches.end()) batches.push_back(p.batch);
  }
  std::sort(batches.begin(), batches.end());
  const std::string bw = fmt(bandwidth / 1e9, 1) + " GB/s";
  const std::string llc = bytes_str(llc_bytes);

  // 0. the arithmetic's floor: at the shortest context the cache sits in the faster caches,
  // and a step costs its (query head, position) pairs' dot, exp and axpy
  {
    const GqaPoint* small = nullptr;
    for (const GqaPoint& p : points)
      if (p.kv_heads == heads && (small == nullptr || p.context < small->context ||
                                  (p.context == small->context && p.batch < small->batch)))
        small = &p;
    if (small != nullptr && small->in_cache) {
      const double pairs = static_cast<double>(small->batch) * small->context * heads;
      const double ns_pair = small->us_per_step * 1e3 / pairs;
      const double bytes_pair_mha = small->cache_bytes / pairs;  // 2 hs 4 at NKV = NH
      const double ns_bytes_mha = bytes_pair_mha / bandwidth * 1e9;
      const double crossover = heads * ns_pair / ns_bytes_mha;  // NKV where bytes / bandwidth = arithmetic
      out.push_back("  - the arithmetic: at T = " + std::to_string(small->context) + " (cache in the faster caches) a "
                    "(query head, position) pair took " + fmt(ns_pair, 1) + " ns (q.k, exp, p v); streaming its k, v (" +
                    fmt(bytes_pair_mha, 0) + " bytes at NKV = NH, NKV / NH of that with grouped heads) from DRAM takes " +
                    fmt(ns_bytes_mha, 1) + " ns at " + bw + ". So the bytes set the time down to NKV ~ " +
                    fmt(crossover, 1) + ", the arithmetic below: " +
                    (crossover >= heads ? "on this machine even NKV = NH is compute-bound."
                                        : crossover < 1.0 ? "on this machine even MQA stays bandwidth-bound."
                                                          : "fewer KV heads than that save bytes but little time."));
    }
  }

  for (const int B : batches) {
    std::vector<const GqaPoint*> row;  // the longest context, every NKV, most KV heads first
    for (const GqaPoint& p : points)
      if (p.batch == B && p.context == longest) row.push_back(&p);
    std::sort(row.begin(), row.end(), [](const GqaPoint* a, const GqaPoint* b) { return a->kv_heads > b->kv_heads; });
    if (row.empty()) continue;
    const std::string at = "B = " + std::to_string(B) + ", T = " + std::to_string(longest);

    // 1. the law: time = cache bytes / bandwidth, where the cache streams from DRAM
    std::vector<const GqaPoint*> dram;
    for (const GqaPoint* p : row)
      if (!p->in_cache) dram.push_back(p);
    if (dram.empty()) {
      out.push_back("  - " + at + ": every cache here fits in the last-level cache (" + llc +
                    "): the DRAM law was not tested (longer contexts or a larger batch would test it).");
    } else {
      double lo = 1e300, hi = 0.0;
      std::string list;
      for (const GqaPoint* p : dram) {
        const double f = p->gb_per_s * 1e9 / bandwidth;
        lo = std::min(lo, f);
        hi = std::max(hi, f);
        list += (list.empty() ? "" : ", ") + std::string("NKV ") + std::to_string(p->kv_heads) + " " + fmt(p->gb_per_s, 1);
      }
      std::string verdict;
      if (lo >= 0.5 && hi <= 1.5)
        verdict = "time per token follows cache bytes / bandwidth: decode attention is a stream through the cache.";
      else if (hi < 0.5)
        verdict = "below half the bandwidth: at these sizes something other than the bytes (the NH heads' dot "
                  "products and exponentials, or thread overhead) sets the time.";
      else
        verdict = "the law holds for some NKV and not for others: see the table.";
      out.push_back("  - " + at + ", caches beyond the last-level cache (" + llc + "): read at " + list + " GB/s = " +
                    fmt(lo, 2) + " to " + fmt(hi, 2) + " of the measured " + bw + "; " + verdict);
    }
    const std::vector<const GqaPoint*> in_llc = [&] {
      std::vector<const GqaPoint*> v;
      for (const GqaPoint* p : row)
        if (p->in_cache) v.push_back(p);
      return v;
    }();
    if (!in_llc.empty()) {
      double best = 0.0;
      int best_kv = 0;
      for (const GqaPoint* p : in_llc)
        if (p->gb_per_s > best) {
          best = p->gb_per_s;
          best_kv = p->kv_heads;
        }
      out.push_back("  - " + at + ", caches that fit in the last-level cache: up to " + fmt(best, 1) + " GB/s (NKV " +
                    std::to_string(best_kv) + ", " + fmt(best * 1e9 / bandwidth, 2) + " of DRAM's " + bw + ")" +
                    (best * 1e9 > bandwidth ? ": read from the cache, faster than the DRAM law says."
                                            : ": no faster than DRAM here; the bytes are not what limits these."));
    }

    // 2. fewer KV heads: proportionally less time?
    const GqaPoint* mha = row.front();
    if (mha->kv_heads == heads && row.size() > 1) {
      std::string list;
      double worst = 1e300;
      int worst_kv = 0;
      for (size_t k = 1; k < row.size(); ++k) {
        const double fewer = static_cast<double>(heads) / row[k]->kv_heads;
        const double faster = mha->us_per_step / row[k]->us_per_step;
        const double share = faster / fewer;
        if (share < worst) {
          worst = share;
          worst_kv = row[k]->kv_heads;
        }
        list += (list.empty() ? "" : ", ") + std::string("NKV ") + std::to_string(row[k]->kv_heads) + ": " +
                times(fewer) + " fewer bytes, " + times(faster) + " faster";
      }
      std::string verdict;
      if (worst >= 0.7)
        verdict = "proportional (each at least 0.7 of the byte ratio): fewer KV heads cost proportionally less.";
      else
        verdict = "less than proportional from NKV " + std::to_string(worst_kv) + " on (" + fmt(worst, 2) +
                  " of the byte ratio): the FLOPs stay those of " + std::to_string(heads) +
                  " query heads, so once the cache is small the arithmetic, not the bytes, sets the time.";
      out.push_back("  - " + at + ", against NKV = NH = " + std::to_string(heads) + ": " + list + "; " + verdict);
    }

    // 3. the kernel must read each KV head once for its group
    std::string list;
    double lo = 1e300, hi = 0.0;
    for (const GqaPoint* p : row) {
      if (p->us_per_step_v2 <= 0.0 || p->kv_heads == heads) continue;
      const double r = p->us_per_step_v2 / p->us_per_step;
      lo = std::min(lo, r);
      hi = std::max(hi, r);
      list += (list.empty() ? "" : ", ") + std::string("NKV ") + std::to_string(p->kv_heads) + " " + times(r);
    }
    if (!list.empty()) {
      out.push_back("  - " + at + ": v2, whose query heads each read their KV head, took " + list +
                    " v3's time" + (lo >= 1.2 ? ": the saving needs a kernel that reads a KV head once per group."
                                   : hi < 1.2 ? ": no clear gain from reading once here (the re-reads hit in cache)."
                                              : ": a gain for some NKV only."));
    }
  }
  return out;
}

// ---- part gqa --------------------------------------------------------------------------------

int run_gqa_part(const Options& all) {
  const GqaOptions& o = all.gqa;
  NN_CHECK(o.embd % o.heads == 0, "part gqa: --gqa-embd " << o.embd << " must be a multiple of --gqa-heads " << o.heads);
  NN_CHECK(!o.contexts.empty() && !o.batches.empty(), "part gqa: needs at least one context and one batch");
  const int NH = o.heads, C = o.embd, hs = C / NH, L = o.layers;
  std::vector<int> divisors;
  for (int k = NH; k >= 1; --k)
    if (NH % k == 0) divisors.push_back(k);
  std::vector<int> kvs = o.kv_heads.empty() ? divisors : o.kv_heads;
  for (const int k : kvs) NN_CHECK(NH % k == 0, "part gqa: --gqa-kv-heads " << k << " does not divide NH = " << NH);
  std::sort(kvs.begin(), kvs.end(), std::greater<int>());
  kvs.erase(std::unique(kvs.begin(), kvs.end()), kvs.end());
  std::vector<int> contexts = o.contexts, batches = o.batches;
  std::sort(contexts.begin(), contexts.end());
  std::sort(batches.begin(), batches.end());

  const double load_before = load_average();
  kernels::warn_if_busy(std::cout);
  const int saved_threads = omp_get_max_threads();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();
  NN_CHECK(!o.cpu_time || threads == 1, "part gqa: --gqa-cpu-time needs --gqa-threads 1 (the CPU clock of one thread "
                                        "would miss the others' work)");
  const double llc = static_cast<double>(kernels::last_level_cache_bytes());
  const auto triad = static_cast<size_t>(std::max(2.0 * llc, 32.0 * (1 << 20)));
  const double bw = kernels::measure_triad_bandwidth(threads, triad, 0.2);
  const double bw1 = kernels::measure_triad_bandwidth(1, triad, 0.2);

  std::cout << "== part gqa: grouped-query attention and the KV cache (L " << L << ", NH " << NH << ", C " << C
            << ", hs " << hs << ")\n\n"
            << "Query head h reads KV head h / (NH / NKV): the cache holds NKV heads, not NH.\n"
            << "KV-cache bytes per token = 2 (k, v) * L * NKV * hs * 4 (fp32):\n\n"
            << "  " << std::setw(5) << "NKV" << std::setw(12) << "" << std::setw(16) << "bytes/token" << std::setw(28)
            << "per sequence at T = " + std::to_string(contexts.back()) << "\n";
  for (const int k : divisors) {
    const double per_token = 2.0 * L * k * hs * 4.0;
    const std::string name = k == NH ? "(MHA)" : k == 1 ? "(MQA)" : "(GQA " + std::to_string(NH / k) + ":1)";
    std::cout << "  " << std::setw(5) << k << std::setw(12) << name << std::setw(16) << bytes_str(per_token)
              << std::setw(28) << bytes_str(per_token * contexts.back()) << "\n";
  }
  std::cout << "\nMeasured bandwidth (STREAM triad, " << bytes_str(static_cast<double>(triad)) << " per array): "
            << fmt(bw / 1e9, 2) << " GB/s on " << threads << " thread" << (threads == 1 ? "" : "s") << ", "
            << fmt(bw1 / 1e9, 2) << " GB/s on 1. Last-level cache: " << bytes_str(llc) << ".\n"
            << "Timed: kernels::attention_decode (v3: " << kernels::attention_decode_versions().back().summary
            << "), one layer, one new token per sequence at position T-1, " << threads << " thread"
            << (threads == 1 ? "" : "s") << ", " << (o.cpu_time ? "the thread's CPU clock" : "the wall clock")
            << ";\nthe median of at least 3 calls over " << o.seconds
            << " s per point. bytes = 2 B T NKV hs 4, the cache the step reads; GB/s = bytes / time.\n\n";

  // One cache per batch size, as large as the largest point needs (NKV = NH at the longest
  // context), random: the values do not change the speed. Smaller NKV use its first part
  // with rows NKV * hs floats wide.
  std::vector<GqaPoint> points;
  const int maxT = contexts.back();
  for (const int B : batches) {
    const size_t cache = static_cast<size_t>(B) * static_cast<size_t>(maxT) * static_cast<size_t>(C);
    std::vector<float> kc(cache), vc(cache), qkv(static_cast<size_t>(B) * 3 * static_cast<size_t>(C)),
        out(static_cast<size_t>(B) * static_cast<size_t>(C));
    auto fill = [](std::vector<float>& v, uint64_t seed) {  // uniform in [-1, 1)
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>(static_cast<double>(kernels::splitmix64(seed, i) >> 40) / (1 << 23) - 1.0);
    };
    fill(kc, 11);
    fill(vc, 12);
    fill(qkv, 13);
    std::cout << "B = " << B << " (" << B << " token" << (B == 1 ? "" : "s") << " per step), microseconds per step of one layer:\n"
              << "  " << std::setw(8) << "T";
    for (const int k : kvs) std::cout << std::setw(13) << ("NKV " + std::to_string(k));
    std::cout << "\n";
    for (const int T : contexts) {
      std::cout << "  " << std::setw(8) << T << std::flush;
      for (const int k : kvs) {
        GqaPoint p;
        p.batch = B;
        p.context = T;
        p.kv_heads = k;
        // cache (B, T, NKV hs): the step reads positions 0 .. T-1 (writes the new one at T-1)
        auto step = [&](const kernels::AttentionDecodeFn fn) {
          fn(out.data(), kc.data(), vc.data(), qkv.data(), B, 1, T - 1, C, NH, k, T);
        };
        p.us_per_step = 1e6 * median_seconds([&] { step(kernels::attention_decode); }, o.seconds, o.cpu_time);
        p.cache_bytes = 2.0 * B * T * static_cast<double>(k) * hs * 4.0;
        p.gb_per_s = p.cache_bytes / (p.us_per_step * 1e-6) / 1e9;
        p.in_cache = p.cache_bytes <= llc;
        if (T == maxT)
          p.us_per_step_v2 = 1e6 * median_seconds([&] { step(kernels::attention_decode_v2); }, o.seconds, o.cpu_time);
        points.push_back(p);
        std::cout << std::setw(13) << fmt(p.us_per_step, p.us_per_step < 100 ? 1 : 0) << std::flush;
      }
      std::cout << "\n";
    }
    std::cout << "  GB/s at T = " << maxT << ":";
    for (const int k : kvs) std::cout << "  NKV " << k << " " << fmt(find(points, B, maxT, k)->gb_per_s, 1);
    std::cout << "\n  v2 (no sharing) at T = " << maxT << ", us:";
    for (const int k : kvs) std::cout << "  NKV " << k << " " << fmt(find(points, B, maxT, k)->us_per_step_v2, 0);
    std::cout << "\n\n";
  }
  const double load_after = load_average();
  omp_set_num_threads(saved_threads);

  const std::vector<std::string> lines = gqa_conclusions(points, bw, llc, NH);
  std::cout << "What the measurements say (a model of L = " << L << " layers takes L times each step):\n";
  for (const std::string& line : lines) std::cout << line << "\n";
  std::cout << "Load average (1 min) before " << fmt(load_before, 2) << ", after " << fmt(load_after, 2) << ", on "
            << threads << " thread" << (threads == 1 ? "" : "s") << ".\n";

  if (!o.json.empty()) {
    using kernels::harness::json_number;
    using kernels::harness::json_string;
    const kernels::harness::MachineInfo m = kernels::harness::machine_info();
    std::ostringstream js;
    js << "{\"schema\": \"nnlab-lesson11-gqa/1\", \"part\": \"gqa\",\n \"machine\": {\"cpu\": " << json_string(m.cpu)
       << ", \"cores\": " << m.cores << ", \"threads\": " << threads << ", \"simd\": " << json_string(m.simd)
       << ", \"compiler\": " << json_string(m.compiler) << ", \"flags\": " << json_string(m.flags)
       << ", \"date\": " << json_string(m.date) << ", \"load_before\": " << json_number(load_before)
       << ", \"load_after\": " << json_number(load_after) << "},\n \"model\": {\"n_layer\": " << L
       << ", \"n_head\": " << NH << ", \"n_embd\": " << C << ", \"head_size\": " << hs << "},\n"
       << " \"bandwidth_gb_s\": " << json_number(bw / 1e9) << ", \"bandwidth_1thread_gb_s\": " << json_number(bw1 / 1e9)
       << ", \"llc_bytes\": " << json_number(llc) << ", \"seconds_per_point\": " << json_number(o.seconds)
       << ", \"clock\": " << json_string(o.cpu_time ? "thread cpu time" : "wall")
       << ", \"kernel\": " << json_string("kernels::attention_decode v" +
                                          std::to_string(kernels::attention_decode_versions().back().number))
       << ",\n \"bytes_per_token\": [";
    for (size_t i = 0; i < divisors.size(); ++i)
      js << (i ? ", " : "") << "{\"kv_heads\": " << divisors[i]
         << ", \"bytes\": " << json_number(2.0 * L * divisors[i] * hs * 4.0) << "}";
    js << "],\n \"points\": [";
    for (size_t i = 0; i < points.size(); ++i) {
      const GqaPoint& p = points[i];
      js << (i ? ",\n  " : "\n  ") << "{\"batch\": " << p.batch << ", \"context\": " << p.context
         << ", \"kv_heads\": " << p.kv_heads << ", \"us_per_step\": " << json_number(p.us_per_step)
         << ", \"us_per_token\": " << json_number(p.us_per_step / p.batch)
         << ", \"cache_bytes\": " << json_number(p.cache_bytes) << ", \"gb_per_s\": " << json_number(p.gb_per_s)
         << ", \"in_llc\": " << (p.in_cache ? "true" : "false") << ", \"us_per_step_v2\": "
         << (p.us_per_step_v2 > 0.0 ? json_number(p.us_per_step_v2) : "null") << "}";
    }
    js << "],\n \"conclusions\": [";
    for (size_t i = 0; i < lines.size(); ++i) js << (i ? ",\n  " : "\n  ") << json_string(lines[i]);
    js << "]}\n";
    std::ofstream f(o.json);
    NN_CHECK(f.good(), "part gqa: cannot write " << o.json);
    f << js.str();
    NN_CHECK(f.good(), "part gqa: writing " << o.json << " failed");
    std::cout << "wrote " << o.json << "\n";
  }
  return 0;
}

}  // namespace lesson11
