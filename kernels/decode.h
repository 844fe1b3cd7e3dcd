// kernels/decode.h: the two ops a GPT spends its time in when it GENERATES text one token at
// a time (lesson 10), over plain host buffers:
//
//   matvec            y (n, rows) = x (n, cols) W^T + bias, with W packed in one of the
//                     formats of kernels/weight_format.h (fp32, bf16, int8, int4, 2:4, w8a8)
//                     and dequantised on the fly. n is small (1 token, or a few: a batch
//                     of sequences, or the k drafts speculative decoding verifies), so
//                     every weight is used n times per load: 2n FLOPs per weight read, far
//                     below any machine's FLOPs per byte. Time = bytes of W / bandwidth.
//   attention_decode  the new query rows of n positions attend over the KV cache of every
//                     earlier position: O(T) work per token instead of recomputing O(T^2).
//
// Versions (code in kernels/decode.cpp):
//   matvec v1  naive: for each input row, for each output, dequantise one weight at a time
//              (a switch on the format per weight); the reference. Its input loop is the
//              outer one, so it reads all of W once PER INPUT ROW: n times per call.
//   matvec v2  simd: one kernel per format, dequantising a register of weights at a time
//              (bf16: widen and shift into the high half; int8: widen and convert, the row's
//              scale applied once to its sum; int4: unpack nibbles, minus 8, times the group's
//              scale; sparse24: a 256-entry table turns each index byte into the permutation
//              that puts the 4 kept values of 2 groups in their 8 columns), and the loops
//              turned round: each weight row is read once and used for all n inputs (4 at a
//              time, 8 accumulators). Attacks v1's per-weight decode (compute) and its n
//              reads of W (bytes). One thread.
//   matvec v3  simd-threads: v2's rows split across OpenMP threads in contiguous blocks
//              (schedule(static)): one core cannot keep enough loads in flight to use the
//              socket's bandwidth. Same sums in the same order: bit for bit v2's output.
//   attention_decode v1  naive: plain loops, scores in double; the reference.
//   attention_decode v2  simd-threads: float SIMD dot products over a head's channels,
//              two passes over a scores buffer, the (b, i, h) items across OpenMP threads.
//              With grouped-query heads each query head reads its KV head on its own.
//   attention_decode v3  grouped: v2's arithmetic per head, the items turned round to
//              (b, i, a run of heads): for each position the heads read their k (then v)
//              slices of the cache row in order, a KV head's slice once for the NH / NKV
//              query heads that share it, so a token streams the cache's bytes once, in
//              order (v2: one head's slice per row, NH / NKV times). Bit for bit v2's
//              output. Lesson 11's part gqa measures it.
//   attention_decode_int8 v1  naive (lesson 15): the cache in int8, one float scale per KV
//              head and position (gpt::quantize_dequantize_heads_int8's rounding); v1's loops
//              over the dequantised values q s, scores in double; the reference.
//   attention_decode_int8 v2  simd-threads: v2's two passes reading int8, widened to float in
//              registers; k's scale applied once per position's dot product (s_k sum q_c kq_c),
//              v's folded into the softmax weight (p_t s_v). Attacks the bytes: a position's
//              head costs hs + 4 bytes instead of 4 hs. Part kv of lesson 15 times it.
//   w8a8 (lesson 15) in every matvec version: x quantised per input row (per token) with
//              kernels/int8_gemm.h's quantize_rows_int8, int32 dot products with the int8
//              weights (v1 plain loops; v2, v3 AVX-512 VNNI vpdpbusd or AVX2 vpmaddubsw, plain
//              loops elsewhere), then y = s_x s_w[r] dot + bias: the same int32 sums and the
//              same float epilogue in every version, so they agree bit for bit. It reads the
//              same bytes as int8 and skips int8's per-weight int8 -> float conversion and FMA:
//              `nnlab bench matvec`, 1 thread, v2, Zen 4 (busy machine, medians of 9):
//              1x768x768 int8 36 us, w8a8 17 us; 4096x4096 int8 2.26 ms (7.4 GB/s), w8a8 0.81
//              ms (21 GB/s, 91% of the triad's bandwidth); 8x4096x4096 int8 7.5 ms, w8a8 3.9 ms.
// The SIMD code dequantises with kernels/simd.h's packed-weight loads (V::load_bf16, load_i8,
// load_i4): in registers on AVX2 (and as two AVX2 halves on AVX-512); on NEON and the
// Portable<8> fallback the tests also run, lane by lane in plain C++: the same numbers.
// sparse24 is permuted in a register on AVX2 and dequantised weight by weight elsewhere. `nnlab bench matvec` measures them
// (kernels/bench/decode.cpp: sizes like int8:4096x4096 or fp32:8x4096x4096).
// `matvec` and `attention_decode` below are the last versions in their tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/versions.h"
#include "kernels/memory.h"
#include "kernels/weight_format.h"

namespace kernels {

// ---- packing (quantisation) ----------------------------------------------------------------
// An owning packed matrix in one Memory (kernels/memory.h): pack_weights packs on the host,
// to() moves it into a backend's memory (the GPT decoder's, the GPU harness's). The one
// packed-weight type of the tree, for the CPU and the GPU kernels alike: view()'s pointers
// are in that memory.
struct PackedWeights {
  WeightFormat format = WeightFormat::f32;
  int rows = 0, cols = 0;
  Array<uint8_t> data;
  Array<float> scales;  // empty where the format has none
  Array<uint8_t> index;  // sparse24's 2-of-4 positions, else empty
  WeightsView view() const { return {format, rows, cols, data.data(), scales.data(), index.data()}; }
  size_t bytes() const { return data.bytes() + scales.bytes() + index.bytes(); }
  Memory& memory() const { return data.memory(); }
  // A copy in `mem` (through the host when the memories differ; a plain copy when they are
  // the same).
  PackedWeights to(Memory& mem) const;
};
// Empty string when W (rows, cols) can be packed in `f`, else why not (int4: cols % 32,
// sparse24: cols % 8, any: rows or cols < 1).
std::string check_packable(WeightFormat f, int rows, int cols);
// "fp32", "bf16", "int8", "int4", "sparse24", "w8a8" (also "f32"); std::invalid_argument otherwise.
WeightFormat parse_format(const std::string& name);
// Packs W (rows, cols) row-major: rounds (bf16), quantises (int8, int4: round to nearest,
// scales as in weight_format.h) or keeps the two largest |w| of every 4 (sparse24: on a
// matrix already 2:4-sparse this loses nothing; ties keep the lower position).
// std::invalid_argument when check_packable says no.
PackedWeights pack_weights(const float* w, int rows, int cols, WeightFormat f);
// W as the kernels see it: the floats the packed matrix stands for (rows * cols).
void unpack_weights(const WeightsView& w, float* out);
// fp32 -> bf16 bits, round to nearest even (NaN stays NaN), and back.
uint16_t float_to_bf16(float x);
float bf16_to_float(uint16_t b);

// ---- matvec ----------------------------------------------------------------------------------
// y (n, w.rows) = x (n, w.cols) W^T + bias (w.rows; may be nullptr). y is assigned; no aliasing.
using MatvecFn = void (*)(float* y, const float* x, const WeightsView& w, const float* bias, int n);
using MatvecVersion = OpVersion<MatvecFn>;  // number, name, summary, fn (kernels/versions.h)
const std::vector<MatvecVersion>& matvec_versions();
void matvec_v1(float* y, const float* x, const WeightsView& w, const float* bias, int n);
// v2 and v3 throw std::invalid_argument when w's sizes do not suit its format (check_packable).
void matvec_v2(float* y, const float* x, const WeightsView& w, const float* bias, int n);
void matvec_v3(float* y, const float* x, const WeightsView& w, const float* bias, int n);
// v2's kernel instantiated with simd::Portable<8> (plain loops, scalar dequantisation): the
// fallback NEON uses, run by the tests on every machine.
void matvec_portable(float* y, const float* x, const WeightsView& w, const float* bias, int n);
// The fastest version (the table's last).
void matvec(float* y, const float* x, const WeightsView& w, const float* bias, int n);

// ---- attention over a KV cache ---------------------------------------------------------------
// B sequences, each with `pos` positions already in the cache, get n new positions
// pos .. pos+n-1 (n = 1 when generating; n > 1 for a prompt or k drafts to verify), with NH
// query heads of hs = C / NH channels sharing NKV key/value heads (grouped-query attention,
// kernels/flash_attention.h's layout: query head h reads KV head h / (NH / NKV); NKV = NH is
// multi-head attention, NKV = 1 multi-query). KV = NKV * hs:
//   qkv (B, n, C + 2 KV)  each new position's [q (C) | k (KV) | v (KV)], as the qkv
//                         projection writes them (NKV = NH: (B, n, 3C))
//   kcache, vcache (B, maxT, KV): first the n new k and v rows are written at [pos, pos+n),
//   then out (B, n, C) = for query i (position pos+i) and head h:
//     softmax over t2 in [0, pos+i] of q_h.k[t2]_(h/group) / sqrt(hs), weighted sum of v[t2]_(h/group)
// exactly nn::attention_forward's rows pos..pos+n-1 on the whole sequence (causal) when
// NKV = NH. Requires pos + n <= maxT, C % NH == 0, NH % NKV == 0 (std::invalid_argument).
using AttentionDecodeFn = void (*)(float* out, float* kcache, float* vcache, const float* qkv, int B, int n,
                                   int pos, int C, int NH, int NKV, int maxT);
using AttentionDecodeVersion = OpVersion<AttentionDecodeFn>;  // kernels/versions.h
const std::vector<AttentionDecodeVersion>& attention_decode_versions();
// v1: plain loops, scores in double; the reference.
void attention_decode_v1(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int NKV, int maxT);
// v2: float, threads over (b, i, h).
void attention_decode_v2(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int NKV, int maxT);
// v3: v2 with each cache row read once, in order, for all its query heads; bit for bit v2.
void attention_decode_v3(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int NKV, int maxT);
// The fastest version (the table's last).
void attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                      int NH, int NKV, int maxT);

// ---- attention over an int8 KV cache (lesson 15) ------------------------------------------------
// attention_decode with the cache stored in int8: per layer
//   kcache, vcache (B, maxT, KV) int8    the keys and values, KV = NKV * hs
//   kscale, vscale (B, maxT, NKV) float  one scale per position and KV head
// Each head's hs values x of a new position are stored as q = clamp(round(x * (1 / s)), -127,
// 127) with s = max |x| / 127 (0 for an all-zero head): exactly gpt::quantize_dequantize_heads_int8's
// rounding, so the cache gives back q s, the values gpt::compressed_logits(..., {.kv_int8 =
// true}) attends over. The 4 hs bytes of a head at a position become hs + 4: about 4x fewer for
// the attention of a long context to stream. Same arguments and checks as attention_decode
// (std::invalid_argument), the new rows quantised into the cache first.
// Stores the hs values of one head as int8 in q; returns their scale.
float quantize_head_int8(const float* x, int hs, int8_t* q);
// Quantises the k and v of qkv's n new positions into the caches at [pos, pos+n).
void append_kv_int8(int8_t* kcache, int8_t* vcache, float* kscale, float* vscale, const float* qkv, int B, int n,
                    int pos, int C, int NH, int NKV, int maxT);
using AttentionDecodeInt8Fn = void (*)(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                                       const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT);
using AttentionDecodeInt8Version = OpVersion<AttentionDecodeInt8Fn>;
const std::vector<AttentionDecodeInt8Version>& attention_decode_int8_versions();
// v1: plain loops over the dequantised values (q s as a float), scores in double; the reference.
void attention_decode_int8_v1(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                              const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT);
// v2: SIMD (int8 widened in registers, the scales once per position), threads over (b, i, h).
void attention_decode_int8_v2(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                              const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT);
// v2's kernel with simd::Portable<8> on one thread (the fallback NEON-less machines use).
void attention_decode_int8_portable(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                                    const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT);
// The fastest version (the table's last).
void attention_decode_int8(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                           const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT);

}  // namespace kernels
