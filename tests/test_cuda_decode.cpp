// The inference kernels (kernels/cuda/decode.cu): every version of matvec in every weight
// format and every version of attention_decode, validated against the host references
// (kernels/decode.h) through the op descriptions (kernels/cuda/bench/decode.cpp) on the
// emulator; the KV cache's rows checked directly; bad sizes; run-to-run determinism. On the
// GPU when there is one (tag [device]; reported as skipped without a GPU).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/cuda/bench/ops.h"
#include "kernels/cuda/device.h"
#include "kernels/decode.h"
#include "kernels/harness.h"

namespace cb = kernels::cuda::bench;
namespace kc = kernels::cuda;

namespace {

const char* const kFormats[] = {"fp32", "bf16", "int8", "int4", "sparse24", "w8a8"};

// Every version of `op` at those of its test sizes that start with `prefix` ("" for all).
// Returns how many sizes ran.
int validate(kc::Device& dev, const std::string& name, const std::string& prefix) {
  const cb::Op& op = cb::op(name);
  const std::vector<cb::Variant> variants = op.variants(dev);
  REQUIRE(variants.size() >= 2);
  int sizes = 0;
  uint64_t seed = 1;
  for (const std::string& size : op.test_sizes) {
    if (size.rfind(prefix, 0) != 0) continue;
    ++sizes;
    const auto problem = op.make(dev, size, seed++);
    for (size_t v = 0; v < variants.size(); ++v) {
      INFO(op.name << " " << variants[v].id << " (" << variants[v].name << ") at " << problem->shape()
                   << " on " << dev.info().name);
      const kernels::harness::Check c = problem->validate(v);
      INFO(c.report);
      CHECK(c.ok());
    }
  }
  return sizes;
}

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  kernels::harness::fill_random(v, seed);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cuda emu: matvec, every version in every weight format", "[cuda][emu-kernels][decode]") {
  for (const char* f : kFormats) {
    SECTION(f) {
      // the format's sizes: aligned and shifted data, one and two tiles, n = 1 .. 17
      CHECK(validate(kc::emulator(), "matvec", std::string(f) + " ") >= 5);
    }
  }
}

TEST_CASE("cuda emu: attention_decode, every version", "[cuda][emu-kernels][decode]") {
  CHECK(validate(kc::emulator(), "attention_decode", "") >= 11);
  // six of them with grouped-query heads (NKV = NH / 2 and 1): n 1 and > 1, pos 0 and > 0
  const std::vector<std::string>& sizes = cb::op("attention_decode").test_sizes;
  CHECK(std::count_if(sizes.begin(), sizes.end(), [](const std::string& s) { return s.find("NKV=") != std::string::npos; }) >= 6);
}

TEST_CASE("cuda emu: attention_decode appends the new k, v rows and touches no other", "[cuda][emu-kernels][decode]") {
  kc::Device& dev = kc::emulator();
  const int B = 2, n = 3, pos = 4, C = 12, NH = 3, maxT = 9;
  for (const int NKV : {NH, 1}) {  // multi-head: rows of C floats; multi-query: one head's hs
    const int KV = C / NH * NKV;
    const size_t uC = C, uKV = static_cast<size_t>(KV), width = uC + 2 * uKV;
    const size_t cache = static_cast<size_t>(B) * maxT * uKV;
    const std::vector<float> qkv = random_floats(static_cast<size_t>(B) * n * width, 7);
    std::vector<float> k0 = random_floats(cache, 8), v0 = random_floats(cache, 9);
    for (auto& v : dev.kernels().attention_decode) {
      INFO("attention_decode " << v.id() << " NKV=" << NKV);
      kernels::Array<float> dq(dev, qkv, kernels::uninitialized), dk(dev, k0, kernels::uninitialized),
          dv(dev, v0, kernels::uninitialized), dout(dev, static_cast<size_t>(B) * n * uC, kernels::uninitialized);
      v.fn(dout.data(), dk.data(), dv.data(), dq.data(), B, n, pos, C, NH, NKV, maxT);
      dev.synchronize();
      const std::vector<float> k = dk.to_vector(), vv = dv.to_vector();
      size_t wrong = 0;
      for (int b = 0; b < B; ++b)
        for (int t = 0; t < maxT; ++t)
          for (int c = 0; c < KV; ++c) {
            const size_t at = (static_cast<size_t>(b) * maxT + t) * uKV + c;
            float want_k = k0[at], want_v = v0[at];
            if (t >= pos && t < pos + n) {  // the new rows: qkv's k and v of position t - pos
              const size_t row = (static_cast<size_t>(b) * n + (t - pos)) * width;
              want_k = qkv[row + uC + c];
              want_v = qkv[row + uC + uKV + c];
            }
            wrong += (k[at] != want_k) + (vv[at] != want_v);
          }
      CHECK(wrong == 0);
      // and the output is the host reference's
      std::vector<float> hk = k0, hv = v0, hout(static_cast<size_t>(B) * n * uC);
      kernels::attention_decode_v1(hout.data(), hk.data(), hv.data(), qkv.data(), B, n, pos, C, NH, NKV, maxT);
      const std::vector<double> want(hout.begin(), hout.end());
      const kernels::harness::Check c = cb::compare_device("out", dout, want, {1e-5, 1e-4});
      INFO(c.report);
      CHECK(c.ok());
    }
  }
}

TEST_CASE("cuda emu: inference kernels give the same bits run after run", "[cuda][emu-kernels][decode]") {
  kc::Device& dev = kc::emulator();
  const int rows = 29, cols = 128, n = 3;
  const std::vector<float> w = random_floats(static_cast<size_t>(rows) * cols, 11);
  const std::vector<float> x = random_floats(static_cast<size_t>(n) * cols, 12);
  for (const char* f : kFormats) {
    const kernels::PackedWeights p = kernels::pack_weights(w.data(), rows, cols, kernels::parse_format(f));
    kernels::Array<uint8_t> data(dev, p.data.to_vector(), kernels::uninitialized),
        index(dev, std::max<size_t>(1, p.index.size()), kernels::uninitialized);
    kernels::Array<float> scales(dev, std::max<size_t>(1, p.scales.size()), kernels::uninitialized),
        dx(dev, x, kernels::uninitialized), y(dev, static_cast<size_t>(n) * rows, kernels::uninitialized);
    if (!p.scales.empty()) scales.upload(p.scales.data(), p.scales.size());
    if (!p.index.empty()) index.upload(p.index.data(), p.index.size());
    const kernels::WeightsView view{p.format, rows, cols, data.data(), p.scales.empty() ? nullptr : scales.data(),
                                    p.index.empty() ? nullptr : index.data()};
    for (auto& v : dev.kernels().matvec) {
      INFO(f << " matvec " << v.id());
      v.fn(y.data(), dx.data(), view, nullptr, n);
      const std::vector<float> first = y.to_vector();
      y.fill_bytes(0xFF);
      v.fn(y.data(), dx.data(), view, nullptr, n);
      CHECK(same_bits(first, y.to_vector()));
    }
  }
}

// w8a8 (lesson 15): x quantised per row on the device, int32 dot products. Without a bias y is
// sx * sw * dot, two float multiplies that nothing can contract, so every version must give the
// CPU reference's floats bit for bit: the same quantised bytes, the same integer sums.
// Shapes: cols a multiple of 16 (v2's dp4a path) and not (its byte path); n over one pass of
// 8; a row of x all zero (scale 0) and one with a single huge entry (everything else rounds
// to 0 or +-1).
TEST_CASE("cuda emu: matvec w8a8 equals the CPU matvec v1 bit for bit", "[cuda][emu-kernels][decode][int8]") {
  kc::Device& dev = kc::emulator();
  struct Shape {
    int rows, cols, n;
  };
  for (const Shape s : {Shape{37, 96, 3}, Shape{21, 1056, 2}, Shape{13, 104, 10}, Shape{8, 33, 1}}) {
    INFO("rows " << s.rows << " cols " << s.cols << " n " << s.n);
    const std::vector<float> w = random_floats(static_cast<size_t>(s.rows) * s.cols, 21);
    std::vector<float> x = random_floats(static_cast<size_t>(s.n) * s.cols, 22);
    if (s.n >= 2) {
      std::fill(x.begin(), x.begin() + s.cols, 0.0f);  // row 0: all zero
      x[static_cast<size_t>(s.cols) + 5] = 1000.0f;     // row 1: one outlier
    }
    const kernels::PackedWeights p = kernels::pack_weights(w.data(), s.rows, s.cols, kernels::WeightFormat::w8a8);
    std::vector<float> want(static_cast<size_t>(s.n) * s.rows);
    kernels::matvec_v1(want.data(), x.data(), p.view(), nullptr, s.n);
    kernels::Array<uint8_t> data(dev, p.data.to_vector(), kernels::uninitialized);
    kernels::Array<float> scales(dev, p.scales.to_vector(), kernels::uninitialized),
        dx(dev, x, kernels::uninitialized), y(dev, want.size(), kernels::uninitialized);
    const kernels::WeightsView view{p.format, s.rows, s.cols, data.data(), scales.data(), nullptr};
    for (auto& v : dev.kernels().matvec) {
      INFO("matvec " << v.id());
      y.fill_bytes(0xFF);
      v.fn(y.data(), dx.data(), view, nullptr, s.n);
      const std::vector<float> got = y.to_vector();
      CHECK(same_bits(got, want));
    }
  }
}

TEST_CASE("cuda emu: inference kernels refuse impossible sizes", "[cuda][emu-kernels][decode]") {
  kc::Device& dev = kc::emulator();
  kernels::Array<float> buf(dev, 4096, kernels::uninitialized);
  float* p = buf.data();
  for (auto& v : dev.kernels().attention_decode) {
    INFO("attention_decode " << v.id());
    CHECK_THROWS_AS(v.fn(p, p, p, p, 1, 1, 0, 10, 3, 3, 4), kc::Error);  // C % NH != 0
    CHECK_THROWS_AS(v.fn(p, p, p, p, 1, 2, 3, 8, 2, 2, 4), kc::Error);   // pos + n > maxT
    CHECK_THROWS_AS(v.fn(p, p, p, p, 1, 1, 0, 12, 4, 3, 4), kc::Error);  // NH % NKV != 0
    CHECK_THROWS_AS(v.fn(p, p, p, p, 1, 1, 0, 12, 4, 0, 4), kc::Error);  // NKV < 1
  }
  // int4 needs cols % 32, sparse24 cols % 8: a view that breaks the packing rules is refused
  const kernels::WeightsView int4{kernels::WeightFormat::int4, 2, 48, p, p, nullptr};
  const kernels::WeightsView sparse{kernels::WeightFormat::sparse24, 2, 12, p, nullptr, reinterpret_cast<uint8_t*>(p)};
  for (auto& v : dev.kernels().matvec) {
    INFO("matvec " << v.id());
    CHECK_THROWS_AS(v.fn(p, p, int4, nullptr, 1), kc::Error);
    CHECK_THROWS_AS(v.fn(p, p, sparse, nullptr, 1), kc::Error);
  }
}

TEST_CASE("cuda gpu: the inference kernels on the GPU", "[cuda][device][decode]") {
  std::string why;
  kc::Device* gpu = kc::gpu(&why);
  if (!gpu) {
    std::cout << "SKIPPED: no GPU (" << why << ")\n";
    return;
  }
  CHECK(validate(*gpu, "matvec", "") >= 25);
  CHECK(validate(*gpu, "attention_decode", "") >= 11);
}
