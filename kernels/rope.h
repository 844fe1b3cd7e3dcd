// kernels/rope.h: rotary position embedding (Su et al. 2021, "RoFormer"), forward and
// backward, with Hugging Face Llama's pairing (rotate_half).
//
// Each head vector x (hs floats) of a token at position p is rotated pair by pair: element i
// is paired with element i + hs/2 (HF's rotate_half, NOT the interleaved (2i, 2i+1) pairs of
// the paper and of Meta's original code: the two differ by a permutation of the projection's
// rows, so a checkpoint converted for one gives garbage with the other), and the pair turns
// by the angle p * freq_i,  freq_i = theta^(-2i / hs),  i = 0 .. hs/2 - 1:
//   out_i          = x_i cos(p freq_i) - x_{i+hs/2} sin(p freq_i)
//   out_{i+hs/2}   = x_{i+hs/2} cos(p freq_i) + x_i sin(p freq_i)
// so q_p . k_p' depends on p - p' only: attention sees relative positions, and there is no
// position table to learn. theta = 10000 (Llama 1 and 2; kRopeTheta) unless told otherwise.
// The backward is the inverse rotation (a rotation's inverse is its transpose: the angle
// negated), applied to the gradient:  dinp_i = dout_i cos + dout_{i+hs/2} sin, ...
//
// Layout: the attention's (kernels/attention.h): a token's heads side by side, head h at
// h * hs, consecutive positions `stride` floats apart. So RoPE on q and k is a call on the
// qkv buffer (B, T, 3C) where it lies, no transpose:
//   rope_forward(qkv, qkv, cos, sin, B, T, NH, hs, 3 * C, pos0)            q (at offset 0)
//   rope_forward(qkv + C, qkv + C, cos, sin, B, T, NH_kv, hs, 3 * C, pos0)  k (at offset C)
// (with grouped-query heads, k's offset and head count are the caller's). out may be inp
// (in place). pos0 is the position of the first of the T tokens: 0 in training, the cache
// length for the KV-cache decoder (a token at position p rotates by p, wherever it sits in
// the batch).
//
// Tables: cos and sin (maxT, hs/2), row p = the angles p * freq_i, computed once
// (rope_tables) in double and rounded to float once. (HF computes them in float32: at
// position 4096 its angle carries float32's rounding of p * freq, up to ~2e-4 rad; ours is
// the correctly rounded cosine of the exact angle.) A call reads rows pos0 .. pos0 + T - 1.
//
// Versions (code in kernels/rope.cpp; 16 B per pair (read x, x', write out, out'), the
// tables' 8 B per pair per position, shared across heads and batch: from cache; figures: q
// of a qkv buffer at B x T x NH x HS = 8 x 1024 x 12 x 64, 1 thread, on the 2-core VM while
// it was BUSY (load ~8, two rounds: noisy, to be re-measured idle), `nnlab bench rope`):
//   v1  plain loops over (b, t, h, i) in F: the reference (and the lesson's code).
//                                                               14.8 / 19.7 ms
//   v2  SIMD over i (W pairs at once: x_i and x_{i+hs/2} are two contiguous loads, which is
//       the point of HF's pairing for vector units; the interleaved pairing needs shuffles),
//       positions across OpenMP threads. mul/sub in the same order as v1: validated at
//       1e-6 + 1e-6 |ref| (an FMA contraction of v1's loop by the compiler may differ in the
//       last bit).                                              15.4 / 13.4 ms
//       NOT faster than v1, honestly: GCC at -O3 already vectorises v1's inner loop (the same
//       two contiguous loads; the pairing is what makes that possible), and both stream q
//       from memory at a few GB/s. The saving left is the pass itself: rotating q and k as the
//       attention loads them (inside its kernel) instead of in a pass of their own.
//   backward v1  plain loops, the inverse rotation: the reference.
//   backward v2  v2 with the angle negated.
#pragma once

#include <string>
#include <vector>

#include "kernels/versions.h"

namespace kernels {

// Llama's theta (HF LlamaConfig.rope_theta).
inline constexpr double kRopeTheta = 10000.0;

// cos, sin (maxT, hs/2): row p, entry i = cos / sin of p * theta^(-2i/hs), in double then
// rounded to F. hs must be even.
template <typename F>
void rope_tables(F* cos, F* sin, int maxT, int hs, double theta = kRopeTheta);

// out, inp: B*T token rows of `stride` floats, each holding NH heads of hs (hs even) from its
// start; cos, sin from rope_tables with at least pos0 + T rows. out may be inp.
// Forward: out = the rotation of inp; backward: out = the inverse rotation (dinp from dout),
// ASSIGNED. Elements of a row past NH * hs are neither read nor written.
using RopeFn = void (*)(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                        int stride, int pos0);

// F = float (the naive backend) or double (gradient checks).
template <typename F>
void rope_forward_v1(F* out, const F* inp, const F* cos, const F* sin, int B, int T, int NH, int hs, int stride,
                     int pos0);
void rope_forward_v2(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                     int stride, int pos0);
template <typename F>
void rope_backward_v1(F* dinp, const F* dout, const F* cos, const F* sin, int B, int T, int NH, int hs, int stride,
                      int pos0);
void rope_backward_v2(float* dinp, const float* dout, const float* cos, const float* sin, int B, int T, int NH,
                      int hs, int stride, int pos0);

// The fastest validated versions (v2).
void rope_forward(float* out, const float* inp, const float* cos, const float* sin, int B, int T, int NH, int hs,
                  int stride, int pos0);
void rope_backward(float* dinp, const float* dout, const float* cos, const float* sin, int B, int T, int NH, int hs,
                   int stride, int pos0);

const std::vector<OpVersion<RopeFn>>& rope_versions();
const OpVersion<RopeFn>& rope_version(const std::string& number_or_name);
const std::vector<OpVersion<RopeFn>>& rope_backward_versions();
const OpVersion<RopeFn>& rope_backward_version(const std::string& number_or_name);

}  // namespace kernels
