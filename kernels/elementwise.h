// kernels/elementwise.h: element-wise ops, and the point of them in this course: FUSION.
//
// An element-wise op does a few FLOPs per element and moves 8 bytes (read 4, write 4): on
// data bigger than the caches it runs at memory speed, unless its arithmetic is slower
// still. Chaining two of them through memory (tmp = f(x); y = g(tmp)) moves 16 bytes per
// element; computing y = g(f(x)) in one pass keeps the intermediate in a register and
// moves 8. That is fusion, and the whole of it: it removes bytes, not arithmetic, so it
// pays exactly as far as the unfused version was waiting on memory.
//
// The example: y = cos(cos(x)) over n floats. Why not std::cos? Because it is a libm call
// of ~8 ns per element (argument checks, a reduction exact for any float, no SIMD): at
// that cost both versions are compute-bound, they run at the same speed, and the memory
// effect this file is about is invisible. So the versions use poly_cos below, a cos in
// plain arithmetic on SIMD registers, ~20x cheaper (the libm variant stays in the bench
// as the peer, kernels/bench/cos2.cpp). Even so, two poly_cos cost about as much as
// moving 8 bytes from memory on one core (on the 2-core AMD EPYC this was written on:
// ~0.8 ns of arithmetic against ~0.5 ns of memory time per element): out of cache, v1
// waits on memory and v2 on the FMA units, so fusing gains ~1.3-1.5x there, not 2x, and
// nothing in cache. More cores (v3) add arithmetic faster than bandwidth. Where the op is
// cheaper than the bytes (bias_gelu, layernorm), the gain gets closer to the byte ratio.
//
// Versions (code in kernels/elementwise.cpp; bytes per element counted as STREAM counts
// them, reads + writes, no write-allocate; figures: ms at n = 64M floats, 1 thread unless
// noted, 2-core AMD EPYC, docs/benchmarks/lesson03-fusion.md):
//   v1  unfused: tmp = cos(x), then y = cos(tmp). Two passes; the intermediate makes a
//       round trip through memory. The reference.                16 B/element   76.2 ms
//   v2  fused: y = cos(cos(x)) in one pass, tmp stays in a register. Attacks the
//       extra round trip: half the bytes; the gain is the part of v1's time that was
//       memory time: out of cache 1.5x; in cache none (at n = 1M, warm in L3, v2
//       took 0.82 ms against v1's 0.79).                        8 B/element    51.8 ms
//   v3  v2 split across OpenMP threads: each core brings its own FMA units (and its own
//       outstanding cache misses) to the same memory.            8 B/element   28.4 ms (2 threads)
// cos2_forward() below is v3: the fastest validated version.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/simd.h"
#include "kernels/versions.h"

namespace kernels {

// ---- element-wise math on SIMD registers ----------------------------------------------
// Templates over a kernels/simd.h type V: Native in the kernels, Portable<1> for the tail
// of a buffer (the same arithmetic, one lane), Portable<8> in the tests. Shared by the
// fused ops: softmax (exp) and bias_gelu (exp) use them too.

// cos(x): range reduction, then a polynomial.
//   1. x = k * 2pi + r with k = round(x / 2pi), so r is in [-pi, pi]. The product k * 2pi
//      must not be rounded (at x = 1e4 one rounding of it is an error of 5e-4), so 2pi is
//      split in three (Cody & Waite 1980): C1 = 6.28125 has 8 significant bits and C2 10,
//      so k * C1 and k * C2 are exact in float for |k| < 16384 (|x| < 1.03e5) whether or
//      not the machine has FMA, and C3 holds the rest of 2pi to float precision. (C2 had
//      12 bits until the portable build was tested: without FMA, k * C2 then rounded past
//      |x| ~ 2.5e4 and the error reached 1.01e-6 at 1e5, over the bound below.)
//   2. cos(r) = sin(pi/2 - |r|), and b = pi/2 - |r| is in [-pi/2, pi/2]: no quadrant
//      bookkeeping, just an abs.
//   3. sin(b) = b + b^3 (c3 + c5 b^2 + c7 b^4 + c9 b^6). Taylor's c_n = +-1/n! would need
//      a b^11 term too: a truncated Taylor series is exact at 0 and worst at the ends
//      (b^11/11! = 3.6e-6 at pi/2). These c_n were fitted instead to make the LARGEST
//      error on [-pi/2, pi/2] as small as possible (a minimax fit, Remez's algorithm, run
//      once in mpmath): 1e-8 with one term fewer, so one FMA less per cos. They stay
//      close to the 1/n!; c9 moves most (2.61e-6 against 1/9! = 2.76e-6), standing in
//      for the terms left out.
// Accuracy: absolute error <= 1e-6 for |x| <= 1e5, tested over 2M points in
// tests/test_kernels_fused.cpp, on the machine's SIMD path and (scripts/test_simd_paths.sh)
// on the portable path without FMA (measured: 1.5e-7 both ways). Most of it is the float
// rounding of r, ~ulp(pi)/2. Past |x| ~ 1.03e5 the products k * C1, k * C2 start to round;
// with FMA they are not rounded and the accuracy holds further.
template <class V>
typename V::reg poly_cos(typename V::reg x) {
  using reg = typename V::reg;
  const reg k = V::round(V::mul(x, V::set1(0.159154937f)));  // x / 2pi, to nearest
  reg r = V::fma(k, V::set1(-6.28125f), x);                   // exact: k * C1 has <= 22 bits
  r = V::fma(k, V::set1(-0.0019359588623046875f), r);         // exact: k * C2 has <= 24 bits
  r = V::fma(k, V::set1(6.51682740e-7f), r);                  // -k * C3, C3 = -6.517e-7
  // b = pi/2 - |r|, with pi/2 as hi + lo so its own rounding (4e-8) is not lost.
  const reg b = V::add(V::sub(V::set1(1.57079637f), V::abs(r)), V::set1(-4.37113883e-8f));
  const reg b2 = V::mul(b, b);
  // sin(b) = b + b^3 p(b^2), Horner in b^2.
  reg p = V::set1(2.60516617e-6f);              // c9 (Taylor: 1/9! = 2.7557e-6)
  p = V::fma(p, b2, V::set1(-1.98099554e-4f));  // c7 (-1/7! = -1.9841e-4)
  p = V::fma(p, b2, V::set1(8.33308417e-3f));   // c5 (1/5! = 8.3333e-3)
  p = V::fma(p, b2, V::set1(-1.66666612e-1f));  // c3 (-1/3! = -1.6666667e-1)
  return V::fma(V::mul(p, b2), b, b);           // b + b^3 * p(b^2)
}

// exp(x) = 2^k * exp(r): k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2].
//   - ln 2 = 0.693359375 (9 bits: k * it is exact) - 2.12194442e-4 (Cody-Waite again);
//   - exp(r) by its Taylor series to r^7 (the next term, r^8 / 8!, is < 6e-9 there);
//   - 2^k written straight into the exponent bits (V::exp2i).
// Accuracy: relative error <= 1e-6 on [-87, 88] (measured: 8e-8, tested). Inputs are
// clamped to [-88, 88]: below -87.7 the result is exactly 0 (the true value is < 1.2e-38,
// so the absolute error is below that: exp(-inf) = 0, as a masked softmax needs); above 88
// it saturates at exp(88) = 1.65e38 instead of overflowing. NaN inputs are not supported.
template <class V>
typename V::reg poly_exp(typename V::reg x) {
  using reg = typename V::reg;
  x = V::min(V::max(x, V::set1(-88.0f)), V::set1(88.0f));
  const reg k = V::round(V::mul(x, V::set1(1.44269502f)));  // x / ln 2, to nearest
  reg r = V::fma(k, V::set1(-0.693359375f), x);
  r = V::fma(k, V::set1(2.12194442e-4f), r);
  // exp(r) = 1 + r + r^2/2! + ... + r^7/7!, Horner.
  reg p = V::set1(1.98412701e-4f);            // 1/7!
  p = V::fma(p, r, V::set1(1.38888892e-3f));  // 1/6!
  p = V::fma(p, r, V::set1(8.33333377e-3f));  // 1/5!
  p = V::fma(p, r, V::set1(4.16666679e-2f));  // 1/4!
  p = V::fma(p, r, V::set1(1.66666672e-1f));  // 1/3!
  p = V::fma(p, r, V::set1(0.5f));            // 1/2!
  p = V::fma(p, r, V::set1(1.0f));
  p = V::fma(p, r, V::set1(1.0f));
  return V::mul(p, V::exp2i(k));
}

// The same on one float (for tails and scalar code).
inline float poly_cosf(float x) {
  using S = simd::Portable<1>;
  return poly_cos<S>(S::set1(x)).v[0];
}
inline float poly_expf(float x) {
  using S = simd::Portable<1>;
  return poly_exp<S>(S::set1(x)).v[0];
}

// ---- y = cos(cos(x)): the versions ------------------------------------------------------
// out (n) = cos(cos(inp (n))). tmp (n) is scratch for the intermediate: only the unfused
// v1 writes it (that buffer IS the cost of not fusing); the others ignore it (nullptr is
// fine). out may not alias inp or tmp.
using Cos2Fn = void (*)(float* out, float* tmp, const float* inp, size_t n);

void cos2_forward_v1(float* out, float* tmp, const float* inp, size_t n);
void cos2_forward_v2(float* out, float* tmp, const float* inp, size_t n);
void cos2_forward_v3(float* out, float* tmp, const float* inp, size_t n);

// The fastest validated version (v3).
void cos2_forward(float* out, float* tmp, const float* inp, size_t n);

using Cos2Version = OpVersion<Cos2Fn>;  // number, name, summary, fn (kernels/versions.h)
// Every version, in order: the bench and the tests iterate over this.
const std::vector<Cos2Version>& cos2_versions();
// By number ("2") or name ("v2", "fused"); throws std::invalid_argument.
const Cos2Version& cos2_version(const std::string& number_or_name);

}  // namespace kernels
