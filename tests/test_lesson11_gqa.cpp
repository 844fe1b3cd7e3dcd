// Lesson 11, part gqa: a smoke run of the program at tiny sizes (every field of its JSON
// record there, every NKV timed), and its conclusions computed from the numbers: handed
// made-up measurements where the law holds and where it does not, they must say so.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "lessons/11-modern/gqa_part.h"
#include "tests/cli_helpers.h"
#include "test_util.h"

using Catch::Contains;

namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// One point of a made-up measurement: B = 1, hs = 64, time from GB/s.
lesson11::GqaPoint point(int context, int kv, double gb_per_s, double llc, double v2_factor) {
  lesson11::GqaPoint p;
  p.batch = 1;
  p.context = context;
  p.kv_heads = kv;
  p.cache_bytes = 2.0 * context * kv * 64 * 4.0;
  p.gb_per_s = gb_per_s;
  p.us_per_step = p.cache_bytes / (gb_per_s * 1e9) * 1e6;
  p.in_cache = p.cache_bytes <= llc;
  p.us_per_step_v2 = p.us_per_step * v2_factor;
  return p;
}

}  // namespace

TEST_CASE("lesson11 gqa: conclusions follow the numbers", "[lesson11][gqa]") {
  const double bw = 10e9, llc = 1 << 20;  // 10 GB/s, 1 MiB: every cache below is beyond it
  SECTION("a stream through the cache: the law holds, time proportional to KV heads") {
    std::vector<lesson11::GqaPoint> pts;
    for (const int kv : {12, 4, 1}) pts.push_back(point(8192, kv, 9.0, llc, kv == 12 ? 1.0 : 2.0));
    const std::string s = joined(lesson11::gqa_conclusions(pts, bw, llc, 12));
    INFO(s);
    CHECK_THAT(s, Contains("0.90 to 0.90 of the measured 10.0 GB/s") &&
                      Contains("time per token follows cache bytes / bandwidth") &&
                      Contains("NKV 1: 12.0x fewer bytes, 12.0x faster") &&
                      Contains("fewer KV heads cost proportionally less") &&
                      Contains("the saving needs a kernel that reads a KV head once per group"));
  }
  SECTION("compute-bound: far below the bandwidth, MQA not proportionally faster, no gain over v2") {
    std::vector<lesson11::GqaPoint> pts;
    pts.push_back(point(8192, 12, 3.0, llc, 1.0));
    pts.push_back(point(8192, 4, 2.0, llc, 1.0));
    pts.push_back(point(8192, 1, 0.5, llc, 1.05));  // 12x fewer bytes, 2x faster
    const std::string s = joined(lesson11::gqa_conclusions(pts, bw, llc, 12));
    INFO(s);
    CHECK_THAT(s, Contains("below half the bandwidth") && Contains("NKV 1: 12.0x fewer bytes, 2.00x faster") &&
                      Contains("less than proportional from NKV 1") &&
                      Contains("no clear gain from reading once here"));
    CHECK_THAT(s, !Contains("time per token follows cache bytes / bandwidth") && !Contains("proportionally less."));
  }
  SECTION("caches that fit in the last-level cache are told apart") {
    std::vector<lesson11::GqaPoint> pts = {point(256, 12, 30.0, 64.0 * (1 << 20), 1.0)};
    const std::string s = joined(lesson11::gqa_conclusions(pts, bw, 64.0 * (1 << 20), 12));
    INFO(s);
    CHECK_THAT(s, Contains("the DRAM law was not tested") && Contains("faster than the DRAM law says"));
    // 1.5 MiB over 256 x 12 pairs: 512 bytes a pair, 51.2 ns at 10 GB/s; the pair took 17.1 ns
    CHECK_THAT(s, Contains("pair took 17.1 ns") && Contains("takes 51.2 ns at 10.0 GB/s") &&
                      Contains("down to NKV ~ 4.0") && Contains("save bytes but little time"));
  }
}

TEST_CASE("lesson11 --part gqa: a smoke run at tiny sizes writes its record", "[lesson11][gqa][cli]") {
  testing::TempDir dir("gqa");
  const std::string json = dir.file("gqa.json");
  auto r = testing::run_program("lesson11", "--part gqa --gqa-layers 2 --gqa-heads 4 --gqa-embd 32 "
                                            "--gqa-contexts 8,16 --gqa-batches 1,2 --gqa-seconds 0.001 --gqa-json " + json);
  INFO(r.output);
  REQUIRE(r.status == 0);
  // bytes per token = 2 L NKV hs 4 = 2 * 2 * NKV * 8 * 4: 512, 256, 128 bytes for NKV 4, 2, 1
  CHECK_THAT(r.output, Contains("KV-cache bytes per token = 2 (k, v) * L * NKV * hs * 4") && Contains("0.5 KiB") &&
                           Contains("0.1 KiB") && Contains("What the measurements say") && Contains("(MQA)"));
  const std::string j = testing::read_text(json);
  CHECK_THAT(j, Contains("\"schema\": \"nnlab-lesson11-gqa/1\"") && Contains("\"n_head\": 4") &&
                    Contains("{\"kv_heads\": 2, \"bytes\": 256}") && Contains("\"bandwidth_gb_s\"") &&
                    Contains("\"batch\": 2, \"context\": 16, \"kv_heads\": 1") && Contains("\"conclusions\"") &&
                    Contains("\"load_before\""));
  // bad sizes: a clear error
  r = testing::run_program("lesson11", "--part gqa --gqa-heads 4 --gqa-embd 32 --gqa-kv-heads 3 --gqa-contexts 8");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("does not divide NH = 4"));
}
