// The CUDA flash attention (kernels/cuda/flash_attention.cu) on the emulator: every forward and
// backward version against the CPU reference, kernels/flash_attention.h's v1, run in double on
// the same inputs (out, lse, dqkv), at grouped-query sizes that are not multiples of the 32 x 32
// tiles, for each head-size instance (HS = 32, 64, 128); outputs NaN-prefilled (every element
// written); the same bits run to run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/bench/ops.h"
#include "kernels/cuda/device.h"
#include "kernels/flash_attention.h"
#include "kernels/harness.h"

namespace kc = kernels::cuda;
namespace cb = kernels::cuda::bench;

namespace {

struct Size {
  int B, T, C, NH, NKV;
};

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (const double x : v) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace

TEST_CASE("cuda emu: flash attention forward and backward match the CPU reference", "[cuda][emu-kernels]") {
  kc::Device& dev = kc::emulator();
  const auto& forward = dev.kernels().flash_attention;
  const auto& backward = dev.kernels().flash_attention_backward;
  REQUIRE(!forward.empty());
  REQUIRE(forward.size() == backward.size());
  // hs = 12 (HS 32), 64 (HS 64) and 72 (HS 128); T = 45 and 70 cross the 32-row tiles; NKV = 1
  // is multi-query, 2 of 4 grouped-query, 2 of 2 multi-head
  const Size s = GENERATE(Size{2, 45, 48, 4, 2}, Size{1, 70, 128, 2, 2}, Size{1, 33, 72, 1, 1}, Size{1, 40, 128, 2, 1});
  INFO("B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH << " NKV=" << s.NKV);
  const size_t n_qkv = static_cast<size_t>(s.B) * s.T * kernels::flash_qkv_channels(s.C, s.NH, s.NKV);
  const size_t n_out = static_cast<size_t>(s.B) * s.T * s.C, n_lse = static_cast<size_t>(s.B) * s.NH * s.T;
  std::vector<float> qkv_host, dout_host;
  const kernels::Array<float> qkv = cb::random_buffer(dev, n_qkv, 61, -2.0f, 2.0f, &qkv_host);
  const kernels::Array<float> dout = cb::random_buffer(dev, n_out, 62, -1.0f, 1.0f, &dout_host);

  // the reference: the CPU's plain loops in double
  const std::vector<double> qkv_d(qkv_host.begin(), qkv_host.end()), dout_d(dout_host.begin(), dout_host.end());
  std::vector<double> out_d(n_out), lse_d(n_lse), dqkv_d(n_qkv);
  kernels::flash_attention_forward_v1(out_d.data(), lse_d.data(), qkv_d.data(), s.B, s.T, s.C, s.NH, s.NKV);
  kernels::flash_attention_backward_v1(dqkv_d.data(), dout_d.data(), qkv_d.data(), out_d.data(), lse_d.data(), s.B,
                                       s.T, s.C, s.NH, s.NKV);
  const double max_dqkv = max_abs(dqkv_d);

  for (size_t v = 0; v < forward.size(); ++v) {
    INFO("forward " << forward[v].id() << ", backward " << backward[v].id());
    kernels::Array<float> out(dev, n_out, kernels::uninitialized), lse(dev, n_lse, kernels::uninitialized),
        dqkv(dev, n_qkv, kernels::uninitialized);
    out.fill_bytes(0xFF);  // NaN: an element never written fails the comparison
    lse.fill_bytes(0xFF);
    dqkv.fill_bytes(0xFF);
    forward[v].fn(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH, s.NKV);
    backward[v].fn(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.C, s.NH, s.NKV);
    dev.synchronize();
    const auto c_out = kernels::harness::compare("out", out.to_vector(), out_d, {2e-5, 1e-4});
    const auto c_lse = kernels::harness::compare("lse", lse.to_vector(), lse_d, {2e-5, 1e-4});
    // the backward reads the device's float out and lse: their rounding carries into dqkv
    const auto c_dqkv = kernels::harness::compare("dqkv", dqkv.to_vector(), dqkv_d, {2e-5 * max_dqkv, 2e-4});
    INFO(c_out.report << c_lse.report << c_dqkv.report);
    CHECK(c_out.ok());
    CHECK(c_lse.ok());
    CHECK(c_dqkv.ok());
    // run again on the same buffers: the same bits (no atomics, fixed summation order)
    const std::vector<float> first = dqkv.to_vector();
    backward[v].fn(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.C, s.NH, s.NKV);
    dev.synchronize();
    CHECK(dqkv.to_vector() == first);
  }
}

TEST_CASE("cuda emu: flash attention refuses bad sizes and head sizes over 128", "[cuda][emu-kernels]") {
  kc::Device& dev = kc::emulator();
  const auto& forward = dev.kernels().flash_attention;
  const auto& backward = dev.kernels().flash_attention_backward;
  kernels::Array<float> buf(dev, 4 * (132 + 2 * 132), kernels::uninitialized);
  float* p = buf.data();
  for (size_t v = 0; v < forward.size(); ++v) {
    CHECK_THROWS_WITH(forward[v].fn(p, p, p, 1, 4, 132, 1, 1), Catch::Contains("head size") && Catch::Contains("132"));
    CHECK_THROWS_WITH(backward[v].fn(p, p, p, p, p, 1, 4, 132, 1, 1), Catch::Contains("head size"));
    CHECK_THROWS_WITH(forward[v].fn(p, p, p, 1, 4, 8, 4, 3), Catch::Contains("NKV=3"));
    CHECK_THROWS_AS(backward[v].fn(p, p, p, p, p, 1, 4, 8, 4, 3), kc::Error);
  }
}
