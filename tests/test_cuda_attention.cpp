// The CUDA attention ladder beyond "every version matches the reference"
// (tests/test_cuda_kernels.cpp does that): the fused version's O(T) memory against the
// unfused versions' O(T^2), the versions agreeing with each other at sizes that are not
// multiples of any tile, and every backward version fed the probabilities an unfused
// forward left in its workspace (the GPT trainer's chain). All on the emulator.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/bench/ops.h"
#include "kernels/cuda/device.h"
#include "nn/attention.h"

namespace kc = kernels::cuda;
namespace cb = kernels::cuda::bench;

namespace {

// The index of the first version with / without a workspace: the unfused and fused rungs.
size_t first_version(const std::vector<kernels::OpVersion<kc::AttentionFn, kc::WorkspaceFn>>& versions, bool fused, int B, int T, int C,
                     int NH) {
  for (size_t v = 0; v < versions.size(); ++v) {
    const bool none = !versions[v].workspace || versions[v].workspace(B, T, C, NH) == 0;
    if (none == fused) return v;
  }
  FAIL("no " << (fused ? "fused" : "unfused") << " attention version");
  return 0;
}

// Device bytes held by a Problem at this size after validating version v (so with v's
// workspace allocated and its run done).
size_t memory_of_problem(kc::Device& dev, const std::string& size, size_t v) {
  const size_t before = dev.memory_in_use();
  const auto problem = cb::op("attention").make(dev, size, 7);
  const kernels::harness::Check c = problem->validate(v);
  INFO(c.report);
  CHECK(c.ok());
  return dev.memory_in_use() - before;
}

std::vector<float> run_version(kc::Device& dev, size_t v, const kernels::Array<float>& qkv, int B, int T, int C, int NH) {
  const auto& version = dev.kernels().attention.at(v);
  const size_t ws = version.workspace ? version.workspace(B, T, C, NH) : 0;
  kernels::Array<float> workspace;
  if (ws) workspace = kernels::Array<float>(dev, ws / sizeof(float), kernels::uninitialized);
  kernels::Array<float> out(dev, static_cast<size_t>(B) * T * C, kernels::uninitialized);
  out.fill_bytes(0xFF);
  version.fn(out.data(), ws ? workspace.data() : nullptr, qkv.data(), B, T, C, NH);
  dev.synchronize();
  return out.to_vector();
}

}  // namespace

TEST_CASE("cuda emu: attention workspace is T^2 unfused, none fused", "[cuda][emu-kernels]") {
  kc::Device& dev = kc::emulator();
  const auto& versions = dev.kernels().attention;
  const int B = 2, C = 64, NH = 4;
  const size_t fused = first_version(versions, true, B, 64, C, NH);
  const size_t unfused = first_version(versions, false, B, 64, C, NH);
  for (const int T : {64, 128}) {
    INFO("T=" << T);
    CHECK(versions[fused].workspace(B, T, C, NH) == 0);
    // the (B,NH,T,T) scores in floats
    CHECK(versions[unfused].workspace(B, T, C, NH) == static_cast<size_t>(B) * NH * T * T * sizeof(float));
    // and the Problem hands each version what it asks for
    const auto problem = cb::op("attention").make(dev, "2x" + std::to_string(T) + "x64x4", 1);
    CHECK(problem->workspace_bytes(fused) == 0);
    CHECK(problem->workspace_bytes(unfused) == versions[unfused].workspace(B, T, C, NH));
  }
  // doubling T quadruples the unfused workspace
  CHECK(versions[unfused].workspace(B, 128, C, NH) == 4 * versions[unfused].workspace(B, 64, C, NH));
}

TEST_CASE("cuda emu: attention fused memory grows as T, unfused as T^2", "[cuda][emu-kernels]") {
  kc::Device& dev = kc::emulator();
  const auto& versions = dev.kernels().attention;
  const int B = 1, C = 32, NH = 2;
  const size_t fused = first_version(versions, true, B, 64, C, NH);
  const size_t unfused = first_version(versions, false, B, 64, C, NH);
  // qkv (B,T,3C) and out (B,T,C): 16 B T C bytes, linear in T
  const auto io = [&](int T) { return static_cast<size_t>(16) * B * T * C; };
  const size_t fused64 = memory_of_problem(dev, "1x64x32x2", fused);
  const size_t fused128 = memory_of_problem(dev, "1x128x32x2", fused);
  CHECK(fused64 == io(64));
  CHECK(fused128 == io(128));
  CHECK(fused128 == 2 * fused64);  // twice the positions, twice the memory
  const size_t unfused64 = memory_of_problem(dev, "1x64x32x2", unfused);
  const size_t unfused128 = memory_of_problem(dev, "1x128x32x2", unfused);
  CHECK(unfused64 == io(64) + static_cast<size_t>(4) * B * NH * 64 * 64);
  CHECK(unfused128 == io(128) + static_cast<size_t>(4) * B * NH * 128 * 128);
  CHECK(unfused128 - io(128) == 4 * (unfused64 - io(64)));  // the scores: four times
}

TEST_CASE("cuda emu: attention versions agree off the tile sizes", "[cuda][emu-kernels]") {
  kc::Device& dev = kc::emulator();
  // T = 97: 3 tiles of 32 + 1, 1 tile of 64 + 33; hs = 24, not a power of two (the fused
  // version pads it to 32 with zeros); hs = 72 takes the HS = 128 instance.
  struct Size {
    int B, T, C, NH;
  };
  for (const Size s : {Size{1, 97, 48, 2}, Size{1, 41, 72, 1}}) {
    INFO("B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH);
    std::vector<float> host;
    const kernels::Array<float> qkv =
        cb::random_buffer(dev, static_cast<size_t>(s.B) * s.T * 3 * s.C, 11, -3.0f, 3.0f, &host);
    const size_t n = dev.kernels().attention.size();
    const std::vector<float> first = run_version(dev, 0, qkv, s.B, s.T, s.C, s.NH);
    const std::vector<double> want(first.begin(), first.end());
    for (size_t v = 1; v < n; ++v) {
      INFO("v1 vs " << dev.kernels().attention[v].id());
      const kernels::harness::Check c =
          kernels::harness::compare("out", run_version(dev, v, qkv, s.B, s.T, s.C, s.NH), want, {5e-5, 1e-4});
      INFO(c.report);
      CHECK(c.ok());
    }
  }
}

TEST_CASE("cuda emu: attention fused version refuses a head size over 128", "[cuda][emu-kernels]") {
  kc::Device& dev = kc::emulator();
  const auto& versions = dev.kernels().attention;
  const size_t fused = first_version(versions, true, 1, 4, 132, 1);
  kernels::Array<float> qkv(dev, 4 * 3 * 132, kernels::uninitialized), out(dev, 4 * 132, kernels::uninitialized);
  CHECK_THROWS_WITH(versions[fused].fn(out.data(), nullptr, qkv.data(), 1, 4, 132, 1),
                    Catch::Contains("head size") && Catch::Contains("132"));
}

// The GPT trainer's chain: an unfused forward (v1, v2) leaves the probabilities in its
// workspace, which goes straight to every backward version as att. dqkv is compared with
// nn::attention_forward / nn::attention_backward in double on the same qkv and dout.
TEST_CASE("cuda emu: attention backward from the forward's workspace", "[cuda][emu-kernels]") {
  kc::Device& dev = kc::emulator();
  const int B = 2, T = 35, C = 24, NH = 2;  // hs = 12; T: one full tile of 32 and a partial one
  const size_t n_qkv = static_cast<size_t>(B) * T * 3 * C;
  std::vector<float> qkv_host, dout_host;
  const kernels::Array<float> qkv = cb::random_buffer(dev, n_qkv, 21, -3.0f, 3.0f, &qkv_host);
  const kernels::Array<float> dout = cb::random_buffer(dev, static_cast<size_t>(B) * T * C, 22, -1.0f, 1.0f, &dout_host);

  // the reference, in double
  const std::vector<double> qkv_d(qkv_host.begin(), qkv_host.end());
  const std::vector<double> dout_d(dout_host.begin(), dout_host.end());
  const size_t n_att = static_cast<size_t>(B) * NH * T * T;
  std::vector<double> out_d(static_cast<size_t>(B) * T * C), preatt(n_att), att(n_att), datt(n_att), dpreatt(n_att);
  std::vector<double> want(n_qkv);
  nn::attention_forward(out_d.data(), preatt.data(), att.data(), qkv_d.data(), B, T, C, NH);
  nn::attention_backward(want.data(), dpreatt.data(), datt.data(), dout_d.data(), qkv_d.data(), att.data(), B, T, C,
                         NH);
  double max_want = 0.0;
  for (const double w : want) max_want = std::max(max_want, std::fabs(w));

  const auto& forward = dev.kernels().attention;
  const auto& backward = dev.kernels().attention_backward;
  REQUIRE(backward.size() >= 2);
  for (size_t f = 0; f < forward.size(); ++f) {
    if (!forward[f].workspace || forward[f].workspace(B, T, C, NH) == 0) continue;  // the fused one keeps no att
    const size_t ws_bytes = forward[f].workspace(B, T, C, NH);
    REQUIRE(ws_bytes >= n_att * sizeof(float));
    kernels::Array<float> att_ws(dev, ws_bytes / sizeof(float), kernels::uninitialized),
        out(dev, static_cast<size_t>(B) * T * C, kernels::uninitialized);
    att_ws.fill_bytes(0xFF);  // above the diagonal it stays NaN: the backward must not read it
    forward[f].fn(out.data(), att_ws.data(), qkv.data(), B, T, C, NH);
    for (size_t v = 0; v < backward.size(); ++v) {
      INFO("forward " << forward[f].id() << " then backward " << backward[v].id());
      const size_t bw_bytes = backward[v].workspace ? backward[v].workspace(B, T, C, NH) : 0;
      kernels::Array<float> scratch;
      if (bw_bytes) scratch = kernels::Array<float>(dev, bw_bytes / sizeof(float), kernels::uninitialized);
      kernels::Array<float> dqkv(dev, n_qkv, kernels::uninitialized);
      dqkv.fill_bytes(0xFF);
      backward[v].fn(dqkv.data(), bw_bytes ? scratch.data() : nullptr, dout.data(), qkv.data(), att_ws.data(), B, T,
                      C, NH);
      dev.synchronize();
      // the forward's probabilities carry their own float rounding here: a little looser
      // than the bench's backward-only tolerance
      const kernels::harness::Check c = kernels::harness::compare("dqkv", dqkv.to_vector(), want, {2e-5 * max_want, 1e-4});
      INFO(c.report);
      CHECK(c.ok());
    }
  }
}
