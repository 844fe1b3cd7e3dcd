// kernels/bench/llama_ops.cpp: the modern block's ops (kernels/rmsnorm.h, rope.h, swiglu.h)
// for the harness: every rung validated against v1 (the plain loops), then timed, with the
// GPT ops' problem class (kernels/bench/ladder.h).
//
// Sizes: RMSNorm "NxC" (rows x channels); RoPE "BxTxNHxHS", applied to q inside a qkv buffer
// (B, T, 3C), C = NH * HS, at stride 3C from position 5 (the attention's layout and a nonzero
// KV-cache offset: the k and v thirds must come back untouched); SwiGLU "NxH", reading g and u
// as the halves of one fused projection (N, 2H) (ld = 2H) and writing the backward into its
// gradient (N, 2H).
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ladder.h"
#include "kernels/bench/ops.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace kernels::bench {

namespace {

using namespace kit;  // LadderProblem, ladder, problem, dims_shape, f

const std::vector<const char*> kRowsDims = {"N", "C"};
const char* kRowsSizeHelp = "NxC, e.g. 8192x768";
const std::vector<const char*> kRopeDims = {"B", "T", "NH", "HS"};
const char* kRopeHelp = "BxTxNHxHS (HS even), e.g. 8x1024x12x64";
const std::vector<const char*> kSwigluDims = {"N", "H"};
const char* kSwigluHelp = "NxH, e.g. 8192x2048";

constexpr int kRopePos0 = 5;  // the bench's position offset (a KV cache holding 5 tokens)

// A RoPE problem: q of a qkv buffer (B, T, 3C) through version v of `versions`.
std::unique_ptr<LadderProblem> rope_problem(const std::vector<size_t>& d, uint64_t seed,
                                            const std::vector<OpVersion<RopeFn>>& versions) {
  if (d[3] % 2 != 0) throw std::invalid_argument("rope: HS = " + std::to_string(d[3]) + " must be even (pairs)");
  auto p = problem(seed);
  const int B = static_cast<int>(d[0]), T = static_cast<int>(d[1]), NH = static_cast<int>(d[2]),
            hs = static_cast<int>(d[3]);
  const int C = NH * hs;
  const size_t n = d[0] * d[1] * 3 * static_cast<size_t>(C);  // the qkv buffer
  const size_t half = d[3] / 2;
  const size_t table = (d[1] + kRopePos0) * half;
  float* cos = p->input(table);  // overwritten with the real tables below (inputs are never written by a rung)
  float* sin = p->input(table);
  rope_tables(cos, sin, T + kRopePos0, hs);
  const float* inp = p->input(n);
  // in/out: k and v (and anything past the heads) must keep their random start
  float* out = p->inout("out", n, {1e-6, 1e-6});
  const OpVersion<RopeFn>* table_of = versions.data();
  p->finish(dims_shape(kRopeDims, d), 6.0 * f(d[0] * d[1] * static_cast<size_t>(C)) / 2.0,
            {8.0 * f(d[0] * d[1] * static_cast<size_t>(C))},
            [=](size_t v) { table_of[v].fn(out, inp, cos, sin, B, T, NH, hs, 3 * C, kRopePos0); });
  return p;
}

}  // namespace

// ---- RMSNorm --------------------------------------------------------------------------------------
harness::OpBench rmsnorm_bench() {
  return ladder("rmsnorm", "RMSNorm forward: plain loops vs SIMD rows across threads", kRowsDims, kRowsSizeHelp,
                {"768x128", "8192x768"}, {"7x33", "45x77"}, rmsnorm_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), C = static_cast<int>(d[1]);
                  const size_t n = d[0] * d[1];
                  const float* inp = p->input(n, -2.0f, 2.0f);
                  const float* weight = p->input(d[1], 0.5f, 1.5f);
                  float* out = p->output("out", n, {1e-6, 1e-5});
                  float* rstd = p->output("rstd", d[0], {1e-6, 1e-5});
                  // 3 FLOPs per element for the statistics and the scaling (x^2 add, 2 muls)
                  p->finish(dims_shape(kRowsDims, d), 4.0 * f(n), {8.0 * f(n)}, [=](size_t v) {
                    rmsnorm_versions()[v].fn(out, rstd, inp, weight, N, C, kRmsnormEps);
                  });
                  return p;
                });
}

harness::OpBench rmsnorm_backward_bench() {
  return ladder("rmsnorm_backward", "RMSNorm backward: loops vs SIMD rows in fixed chunks across threads", kRowsDims,
                kRowsSizeHelp, {"768x128", "8192x768"}, {"7x33", "45x77"}, rmsnorm_backward_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), C = static_cast<int>(d[1]);
                  const size_t n = d[0] * d[1];
                  const float* dout = p->input(n);
                  const float* inp = p->input(n, -2.0f, 2.0f);
                  const float* weight = p->input(d[1], 0.5f, 1.5f);
                  // rstd as the forward (v1) gives it for inp
                  float* rstd = p->input(d[0]);
                  std::vector<float> scratch(n);
                  rmsnorm_forward_v1(scratch.data(), rstd, inp, weight, N, C, kRmsnormEps);
                  float* dinp = p->inout("dinp", n, {5e-6, 1e-5});
                  // dweight: v1 (the reference) adds the N rows' terms (|dout xhat| <= ~4 here) in one
                  // float chain, whose rounding grows with N (at N = 8192 it is off by 2.4e-4 at
                  // |dweight| ~ 20, where v2's chunks are closer to the exact sum): 4 N u absolute on
                  // top, N u <= 3e-6 at the test sizes.
                  const double chain = 4.0 * f(d[0]) * 0x1p-24;
                  float* dweight = p->inout("dweight", d[1], {1e-5 + chain, 1e-5});
                  p->finish(dims_shape(kRowsDims, d), 8.0 * f(n), {16.0 * f(n)}, [=](size_t v) {
                    rmsnorm_backward_versions()[v].fn(dinp, dweight, dout, inp, weight, rstd, N, C);
                  });
                  return p;
                });
}

// ---- RoPE -----------------------------------------------------------------------------------------
harness::OpBench rope_bench() {
  return ladder("rope", "RoPE forward on q inside qkv (rotate_half pairs): loops vs SIMD pairs", kRopeDims, kRopeHelp,
                {"8x1024x12x64"}, {"2x7x3x10", "3x5x2x38"}, rope_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) { return rope_problem(d, seed, rope_versions()); });
}

harness::OpBench rope_backward_bench() {
  return ladder("rope_backward", "RoPE backward (the inverse rotation): loops vs SIMD pairs", kRopeDims, kRopeHelp,
                {"8x1024x12x64"}, {"2x7x3x10", "3x5x2x38"}, rope_backward_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  return rope_problem(d, seed, rope_backward_versions());
                });
}

// ---- SwiGLU ---------------------------------------------------------------------------------------
harness::OpBench swiglu_bench() {
  return ladder("swiglu", "SwiGLU silu(g) * u from a fused gate_up projection: std::exp loop vs SIMD poly_exp",
                kSwigluDims, kSwigluHelp, {"8192x2048"}, {"7x37", "45x77"}, swiglu_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), H = static_cast<int>(d[1]);
                  const size_t n = d[0] * d[1];
                  const float* proj = p->input(2 * n, -8.0f, 8.0f);  // (N, 2H) = [g | u] per row
                  float* out = p->output("out", n, {1e-6, 1e-5});
                  p->finish(dims_shape(kSwigluDims, d), 0.0, {12.0 * f(n)}, [=](size_t v) {
                    swiglu_versions()[v].fn(out, proj, proj + H, N, H, 2 * H);
                  });
                  return p;
                });
}

harness::OpBench swiglu_backward_bench() {
  return ladder("swiglu_backward", "SwiGLU backward into the fused projection's gradient: std::exp loop vs SIMD",
                kSwigluDims, kSwigluHelp, {"8192x2048"}, {"7x37", "45x77"}, swiglu_backward_versions(),
                [](const std::vector<size_t>& d, uint64_t seed) {
                  auto p = problem(seed);
                  const int N = static_cast<int>(d[0]), H = static_cast<int>(d[1]);
                  const size_t n = d[0] * d[1];
                  const float* dout = p->input(n);
                  const float* proj = p->input(2 * n, -8.0f, 8.0f);
                  // (N, 2H): [dg | du] per row, every element assigned
                  float* dproj = p->output("dproj", 2 * n, {2e-6, 1e-5});
                  p->finish(dims_shape(kSwigluDims, d), 0.0, {20.0 * f(n)}, [=](size_t v) {
                    swiglu_backward_versions()[v].fn(dproj, dproj + H, dout, proj, proj + H, N, H, 2 * H);
                  });
                  return p;
                });
}

}  // namespace kernels::bench
