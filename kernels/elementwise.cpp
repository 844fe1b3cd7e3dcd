// kernels/elementwise.cpp: y = cos(cos(x)), unfused and fused. What each version changes
// and the bytes it moves are in kernels/elementwise.h; here, the code, in ladder order.
//
// The plain loop every version computes:
//   for i < n: out[i] = cos(cos(inp[i]))
#include "kernels/elementwise.h"

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/simd.h"
#include "kernels/versions.h"

namespace kernels {

namespace {

using V = simd::Native;
constexpr size_t W = V::lanes;

// Both passes below do 4 vectors per iteration. One poly_cos is a chain of ~15 dependent
// instructions (~50 cycles of latency); the 2 FMA units of a core (10 FMAs or multiplies
// per cos) stay busy only with several independent chains in flight, and 4 written out
// side by side ran ~1.3x faster than 1 on the 2-core AMD EPYC (Zen 3) this was written on:
// the out-of-order core alone does not look far enough ahead. The last n % 4W floats: one
// vector at a time, then one float at a time with the same arithmetic (poly_cosf).
constexpr size_t kUnroll = 4;

// One pass: out[i] = cos(inp[i]).
void cos_pass(float* out, const float* inp, size_t n) {
  size_t i = 0;
  for (; i + kUnroll * W <= n; i += kUnroll * W) {
    V::reg y[kUnroll];
    for (size_t u = 0; u < kUnroll; ++u) y[u] = poly_cos<V>(V::load(inp + i + u * W));
    for (size_t u = 0; u < kUnroll; ++u) V::store(out + i + u * W, y[u]);
  }
  for (; i + W <= n; i += W) V::store(out + i, poly_cos<V>(V::load(inp + i)));
  for (; i < n; ++i) out[i] = poly_cosf(inp[i]);
}

// One pass: out[i] = cos(cos(inp[i])), the intermediate in a register.
void cos2_pass(float* out, const float* inp, size_t n) {
  size_t i = 0;
  for (; i + kUnroll * W <= n; i += kUnroll * W) {
    V::reg y[kUnroll];
    for (size_t u = 0; u < kUnroll; ++u) y[u] = poly_cos<V>(V::load(inp + i + u * W));
    for (size_t u = 0; u < kUnroll; ++u) y[u] = poly_cos<V>(y[u]);  // never leaves the registers
    for (size_t u = 0; u < kUnroll; ++u) V::store(out + i + u * W, y[u]);
  }
  for (; i + W <= n; i += W) V::store(out + i, poly_cos<V>(poly_cos<V>(V::load(inp + i))));
  for (; i < n; ++i) out[i] = poly_cosf(poly_cosf(inp[i]));
}

}  // namespace

// ---- v1: unfused, two passes -------------------------------------------------------------
// Pass 1 reads x and writes tmp (8 B/element), pass 2 reads tmp and writes y (8 more).
// When n floats do not fit in cache, tmp goes all the way to memory and back.
void cos2_forward_v1(float* out, float* tmp, const float* inp, size_t n) {
  cos_pass(tmp, inp, n);  // tmp = cos(x)
  cos_pass(out, tmp, n);  // y = cos(tmp)
}

// ---- v2: fused, one pass ---------------------------------------------------------------------
// Same arithmetic, same order, same result bit for bit: only the memory traffic changes.
void cos2_forward_v2(float* out, float* /*tmp*/, const float* inp, size_t n) {
  cos2_pass(out, inp, n);
}

// ---- v3: fused, across threads -----------------------------------------------------------------
// Blocks of 4096 floats (16 KB), handed out in contiguous runs (schedule(static)): each
// thread streams its own part of x and y. Below 64K floats the data is in cache and the
// pass takes microseconds, about what waking the threads costs: one thread does it.
namespace {
constexpr size_t kV3Block = 4096;
constexpr size_t kV3MinThreaded = size_t{1} << 16;
}  // namespace

void cos2_forward_v3(float* out, float* /*tmp*/, const float* inp, size_t n) {
  const auto blocks = static_cast<ptrdiff_t>((n + kV3Block - 1) / kV3Block);
#pragma omp parallel for schedule(static) if (n >= kV3MinThreaded)
  for (ptrdiff_t b = 0; b < blocks; ++b) {
    const size_t start = static_cast<size_t>(b) * kV3Block;
    cos2_pass(out + start, inp + start, std::min(kV3Block, n - start));
  }
}

// ---- dispatch ------------------------------------------------------------------------------------
void cos2_forward(float* out, float* tmp, const float* inp, size_t n) { cos2_forward_v3(out, tmp, inp, n); }

const std::vector<Cos2Version>& cos2_versions() {
  static const std::vector<Cos2Version> versions = {
      {1, "unfused", "tmp = cos(x); y = cos(tmp): two passes, 16 B/element", &cos2_forward_v1},
      {2, "fused", "y = cos(cos(x)) in one pass, tmp in a register: 8 B/element", &cos2_forward_v2},
      {3, "fused-threads", "v2 across OpenMP threads", &cos2_forward_v3},
  };
  return versions;
}

const Cos2Version& cos2_version(const std::string& number_or_name) {
  return find_version(cos2_versions(), number_or_name, "cos2");
}

}  // namespace kernels
