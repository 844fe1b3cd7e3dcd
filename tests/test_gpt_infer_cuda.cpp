// tests/test_gpt_infer_cuda.cpp: the cuda backend's inference ops (gpt/backend.h:
// matvec_forward, attention_decode) on the CUDA emulator (what NNLAB_DEVICE=emu gives), op
// by op against the host references (kernels::matvec_v1, kernels::attention_decode_v1) and,
// where the cpu backend has them, against the cpu backend, on random data in every weight
// format. Also: decoding one position at a time gives what one call over all of them gives,
// and bad sizes come back as nn::Error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/backend_cuda.h"
#include "gpt/memory.h"
#include "kernels/cuda/device.h"
#include "kernels/decode.h"
#include "kernels/harness.h"
#include "nn/check.h"

namespace kc = kernels::cuda;

namespace {

const char* const kFormats[] = {"fp32", "bf16", "int8", "int4", "sparse24"};

std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  kernels::harness::fill_random(v, seed, lo, hi);
  return v;
}

// max |a - b|
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double err = 0.0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
  return err;
}

// A packed matrix copied into a backend's memory, and the view of it there.
struct DeviceWeights {
  gpt::Array<uint8_t> data, index;
  gpt::Array<float> scales;
  kernels::WeightsView view;
  DeviceWeights(gpt::Memory& mem, const kernels::PackedWeights& p)
      : data(mem, p.data.size()), index(mem, p.index.size()), scales(mem, p.scales.size()) {
    data.upload(p.data.data(), p.data.size());
    index.upload(p.index.data(), p.index.size());
    scales.upload(p.scales.data(), p.scales.size());
    view = {p.format, p.rows, p.cols, data.data(), p.scales.empty() ? nullptr : scales.data(),
            p.index.empty() ? nullptr : index.data()};
  }
};

// Whether a backend's op threw because it has no inference ops at all (the Backend
// default), as opposed to failing.
bool lacks_inference_ops(const nn::Error& e) { return std::string(e.what()).find("no inference ops") != std::string::npos; }

// y (n, rows) from backend `be` (any memory) for host x, bias (empty: none).
std::vector<float> matvec_on(gpt::Backend& be, const kernels::PackedWeights& p, const std::vector<float>& x,
                             const std::vector<float>& bias, int n) {
  gpt::Memory& mem = be.memory();
  DeviceWeights w(mem, p);
  gpt::Array<float> dx(mem, x.size()), db(mem, bias.size()), dy(mem, static_cast<size_t>(n) * p.rows);
  dx.upload(x.data(), x.size());
  db.upload(bias.data(), bias.size());
  be.matvec_forward(dy.data(), dx.data(), w.view, bias.empty() ? nullptr : db.data(), n);
  be.synchronize();
  return dy.to_vector();
}

struct DecodeResult {
  std::vector<float> out, kcache, vcache;
};

DecodeResult decode_on(gpt::Backend& be, const std::vector<float>& qkv, const std::vector<float>& k0,
                       const std::vector<float>& v0, int B, int n, int pos, int C, int NH, int maxT) {
  gpt::Memory& mem = be.memory();
  gpt::Array<float> dq(mem, qkv.size()), dk(mem, k0.size()), dv(mem, v0.size()),
      dout(mem, static_cast<size_t>(B) * n * C);
  dq.upload(qkv.data(), qkv.size());
  dk.upload(k0.data(), k0.size());
  dv.upload(v0.data(), v0.size());
  be.attention_decode(dout.data(), dk.data(), dv.data(), dq.data(), B, n, pos, C, NH, NH, maxT);
  be.synchronize();
  return {dout.to_vector(), dk.to_vector(), dv.to_vector()};
}

}  // namespace

TEST_CASE("gpt cuda infer: matvec_forward agrees with the host in every format", "[gpt][cuda][infer]") {
  auto cuda = gpt::make_cuda_backend(kc::emulator(), "fp32");
  auto cpu = gpt::make_backend("cpu");
  const int rows = 45, cols = 96;  // rows past a multiple of 8, cols a multiple of 32 (int4)
  const std::vector<float> w = random_floats(static_cast<size_t>(rows) * cols, 1);
  for (const char* f : kFormats) {
    for (int n : {1, 4}) {
      for (bool with_bias : {true, false}) {
        INFO(f << " n=" << n << (with_bias ? " with bias" : " no bias"));
        const kernels::PackedWeights p = kernels::pack_weights(w.data(), rows, cols, kernels::parse_format(f));
        const std::vector<float> x = random_floats(static_cast<size_t>(n) * cols, 2);
        const std::vector<float> bias = with_bias ? random_floats(rows, 3) : std::vector<float>{};
        std::vector<float> want(static_cast<size_t>(n) * rows);
        kernels::matvec_v1(want.data(), x.data(), p.view(), with_bias ? bias.data() : nullptr, n);

        const std::vector<float> got = matvec_on(*cuda, p, x, bias, n);
        // float sums of 96 products of size <= 1 in two orders: a few 1e-6 apart; a wrong
        // weight is ~1e-2 (an int4 step) or more
        CHECK(max_abs_diff(got, want) < 1e-4);
        try {
          const std::vector<float> host = matvec_on(*cpu, p, x, bias, n);  // outside CHECK, which catches
          CHECK(max_abs_diff(got, host) < 1e-4);
        } catch (const nn::Error& e) {
          if (!lacks_inference_ops(e)) throw;
          WARN("the cpu backend has no matvec_forward yet: compared with kernels::matvec_v1 only");
        }
      }
    }
  }
}

TEST_CASE("gpt cuda infer: attention_decode agrees with the host", "[gpt][cuda][infer]") {
  auto cuda = gpt::make_cuda_backend(kc::emulator(), "fp32");
  auto cpu = gpt::make_backend("cpu");
  const int B = 2, C = 24, NH = 2, maxT = 12;  // hs = 12
  for (int n : {1, 3}) {
    for (int pos : {0, 5}) {
      INFO("n=" << n << " pos=" << pos);
      const std::vector<float> qkv = random_floats(static_cast<size_t>(B) * n * 3 * C, 4, -2.0f, 2.0f);
      const std::vector<float> k0 = random_floats(static_cast<size_t>(B) * maxT * C, 5, -2.0f, 2.0f);
      const std::vector<float> v0 = random_floats(static_cast<size_t>(B) * maxT * C, 6, -2.0f, 2.0f);
      DecodeResult want{std::vector<float>(static_cast<size_t>(B) * n * C), k0, v0};
      kernels::attention_decode_v1(want.out.data(), want.kcache.data(), want.vcache.data(), qkv.data(), B, n, pos, C,
                                   NH, NH, maxT);
      const DecodeResult got = decode_on(*cuda, qkv, k0, v0, B, n, pos, C, NH, maxT);
      CHECK(max_abs_diff(got.out, want.out) < 1e-5);
      CHECK(got.kcache == want.kcache);  // copies: exact
      CHECK(got.vcache == want.vcache);
      try {
        const DecodeResult host = decode_on(*cpu, qkv, k0, v0, B, n, pos, C, NH, maxT);
        CHECK(max_abs_diff(got.out, host.out) < 1e-5);
        CHECK(got.kcache == host.kcache);
        CHECK(got.vcache == host.vcache);
      } catch (const nn::Error& e) {
        if (!lacks_inference_ops(e)) throw;
        WARN("the cpu backend has no attention_decode yet: compared with kernels::attention_decode_v1 only");
      }
    }
  }
}

TEST_CASE("gpt cuda infer: one position at a time equals all positions at once", "[gpt][cuda][infer]") {
  // A prompt of T positions in one call (pos 0, n = T) and the same T positions decoded one
  // by one (pos = t, n = 1) must give the same outputs and the same caches: query t sees
  // positions 0..t either way.
  auto cuda = gpt::make_cuda_backend(kc::emulator(), "fp32");
  const int B = 2, T = 7, C = 16, NH = 2, maxT = 8;
  const std::vector<float> qkv = random_floats(static_cast<size_t>(B) * T * 3 * C, 7, -2.0f, 2.0f);
  const std::vector<float> empty(static_cast<size_t>(B) * maxT * C, 0.0f);
  const DecodeResult all = decode_on(*cuda, qkv, empty, empty, B, T, 0, C, NH, maxT);

  gpt::Memory& mem = cuda->memory();
  gpt::Array<float> dk(mem, empty.size()), dv(mem, empty.size()), dq(mem, static_cast<size_t>(B) * 3 * C),
      dout(mem, static_cast<size_t>(B) * C);
  std::vector<float> one_by_one(static_cast<size_t>(B) * T * C);
  for (int t = 0; t < T; ++t) {
    std::vector<float> step(static_cast<size_t>(B) * 3 * C);  // (B, 1, 3C): position t of each sequence
    for (int b = 0; b < B; ++b)
      std::copy_n(qkv.begin() + (static_cast<ptrdiff_t>(b) * T + t) * 3 * C, 3 * C, step.begin() + b * 3 * C);
    dq.upload(step.data(), step.size());
    cuda->attention_decode(dout.data(), dk.data(), dv.data(), dq.data(), B, 1, t, C, NH, NH, maxT);
    const std::vector<float> o = dout.to_vector();
    for (int b = 0; b < B; ++b)
      std::copy_n(o.begin() + b * C, C, one_by_one.begin() + (static_cast<ptrdiff_t>(b) * T + t) * C);
  }
  CHECK(max_abs_diff(one_by_one, all.out) < 1e-5);
  CHECK(dk.to_vector() == all.kcache);
  CHECK(dv.to_vector() == all.vcache);
}

TEST_CASE("gpt cuda infer: bad sizes are nn::Error", "[gpt][cuda][infer]") {
  auto cuda = gpt::make_cuda_backend(kc::emulator(), "fp32");
  gpt::Array<float> buf(cuda->memory(), 1024);
  float* p = buf.data();
  CHECK_THROWS_AS(cuda->attention_decode(p, p, p, p, 1, 2, 7, 8, 2, 2, 8), nn::Error);  // pos + n > maxT
  const kernels::WeightsView bad{kernels::WeightFormat::int4, 2, 40, p, p, nullptr};  // int4 cols % 32 != 0
  CHECK_THROWS_AS(cuda->matvec_forward(p, p, bad, nullptr, 1), nn::Error);
  // the plan names both inference ops
  bool matvec = false, decode = false;
  for (const auto& row : gpt::kernel_plan(*cuda)) {
    matvec = matvec || row.second.rfind("matvec ", 0) == 0;
    decode = decode || row.second.rfind("attention_decode ", 0) == 0;
  }
  CHECK(matvec);
  CHECK(decode);
}
