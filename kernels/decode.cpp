// kernels/decode.cpp: packing, matvec and attention over a KV cache (kernels/decode.h).
#include "kernels/decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <omp.h>

#include "kernels/int8_gemm.h"
#include "kernels/simd.h"

#if defined(__AVX2__) || (defined(__AVX512VNNI__) && defined(__AVX512BW__))
#include <immintrin.h>
#endif

namespace kernels {

namespace {

// One weight of a packed matrix as a float: what every version must agree with.
float weight_at(const WeightsView& w, int r, int c) {
  const size_t i = static_cast<size_t>(r) * static_cast<size_t>(w.cols) + static_cast<size_t>(c);
  switch (w.format) {
    case WeightFormat::f32: return static_cast<const float*>(w.data)[i];
    case WeightFormat::bf16: return bf16_to_float(static_cast<const uint16_t*>(w.data)[i]);
    case WeightFormat::int8:
    case WeightFormat::w8a8:  // int8's storage; only the matvec's arithmetic differs
      return w.scales[r] * static_cast<float>(static_cast<const int8_t*>(w.data)[i]);
    case WeightFormat::int4: {
      const uint8_t byte = static_cast<const uint8_t*>(w.data)[i / 2];
      const int q = ((c & 1) ? (byte >> 4) : (byte & 0xF)) - 8;
      return w.scales[i / kInt4Group] * static_cast<float>(q);
    }
    case WeightFormat::sparse24: {
      const size_t g = i / 4;  // the group of 4 columns
      const uint8_t nib = static_cast<uint8_t>((g & 1) ? (w.index[g / 2] >> 4) : (w.index[g / 2] & 0xF));
      const int p0 = nib & 3, p1 = (nib >> 2) & 3, p = c & 3;
      const float* vals = static_cast<const float*>(w.data) + g * 2;
      return p == p0 ? vals[0] : p == p1 ? vals[1] : 0.0f;
    }
  }
  return 0.0f;
}

// The k and v parts of each new qkv row (B, n, C + 2 KV), KV = NKV * hs, into the caches
// (B, maxT, KV) at row pos+i. NKV == NH: the thirds of (B, n, 3C).
void append_kv(float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C, int KV, int maxT) {
  const size_t uC = static_cast<size_t>(C), uKV = static_cast<size_t>(KV), width = uC + 2 * uKV;
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < n; ++i) {
      const float* row = qkv + (static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i)) * width;
      const size_t at = (static_cast<size_t>(b) * static_cast<size_t>(maxT) + static_cast<size_t>(pos + i)) * uKV;
      std::memcpy(kcache + at, row + uC, uKV * sizeof(float));
      std::memcpy(vcache + at, row + uC + uKV, uKV * sizeof(float));
    }
}

}  // namespace

std::string check_packable(WeightFormat f, int rows, int cols) {
  if (rows < 1 || cols < 1) return "a matrix needs rows and cols >= 1, got " + std::to_string(rows) + " x " + std::to_string(cols);
  if (f == WeightFormat::int4 && cols % kInt4Group != 0)
    return "int4 packs groups of " + std::to_string(kInt4Group) + " columns: cols must be a multiple of " +
           std::to_string(kInt4Group) + ", got " + std::to_string(cols);
  if (f == WeightFormat::sparse24 && cols % 8 != 0)
    return "sparse24 packs two groups of 4 columns per index byte: cols must be a multiple of 8, got " +
           std::to_string(cols);
  return "";
}

WeightFormat parse_format(const std::string& name) {
  if (name == "fp32" || name == "f32") return WeightFormat::f32;
  if (name == "bf16") return WeightFormat::bf16;
  if (name == "int8") return WeightFormat::int8;
  if (name == "int4") return WeightFormat::int4;
  if (name == "sparse24") return WeightFormat::sparse24;
  if (name == "w8a8") return WeightFormat::w8a8;
  throw std::invalid_argument("unknown weight format '" + name + "': use fp32, bf16, int8, int4, sparse24 or w8a8");
}

uint16_t float_to_bf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a (quiet) NaN
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x = 0.0f;
  std::memcpy(&x, &u, 4);
  return x;
}

namespace {

template <class T>
Array<T> copy_into(const Array<T>& a, Memory& mem) {
  if (&a.memory() == &mem) return a;
  Array<T> out(mem, a.size(), uninitialized);
  if (!a.empty()) out.upload(a.to_vector());
  return out;
}

}  // namespace

PackedWeights PackedWeights::to(Memory& mem) const {
  PackedWeights p;
  p.format = format;
  p.rows = rows;
  p.cols = cols;
  p.data = copy_into(data, mem);
  p.scales = copy_into(scales, mem);
  p.index = copy_into(index, mem);
  return p;
}

PackedWeights pack_weights(const float* w, int rows, int cols, WeightFormat f) {
  const std::string why = check_packable(f, rows, cols);
  if (!why.empty()) throw std::invalid_argument("cannot pack a " + std::to_string(rows) + " x " + std::to_string(cols) +
                                                " matrix as " + format_name(f) + ": " + why);
  PackedWeights p;
  p.format = f;
  p.rows = rows;
  p.cols = cols;
  p.data = Array<uint8_t>(host_memory(), format_data_bytes(f, rows, cols));  // zero-filled
  p.scales = Array<float>(host_memory(), format_scale_count(f, rows, cols));
  p.index = Array<uint8_t>(host_memory(), format_index_bytes(f, rows, cols));
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  switch (f) {
    case WeightFormat::f32:
      std::memcpy(p.data.data(), w, n * sizeof(float));
      break;
    case WeightFormat::bf16: {
      auto* out = reinterpret_cast<uint16_t*>(p.data.data());
      for (size_t i = 0; i < n; ++i) out[i] = float_to_bf16(w[i]);
      break;
    }
    case WeightFormat::int8:
    case WeightFormat::w8a8: {  // the same bytes: w8a8 differs in the matvec only
      auto* out = reinterpret_cast<int8_t*>(p.data.data());
      for (int r = 0; r < rows; ++r) {
        const float* row = w + static_cast<size_t>(r) * static_cast<size_t>(cols);
        float amax = 0.0f;
        for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(row[c]));
        const float scale = amax / 127.0f;
        p.scales[static_cast<size_t>(r)] = scale;
        for (int c = 0; c < cols; ++c) {
          const float q = scale > 0.0f ? std::nearbyint(row[c] / scale) : 0.0f;
          out[static_cast<size_t>(r) * static_cast<size_t>(cols) + static_cast<size_t>(c)] =
              static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
        }
      }
      break;
    }
    case WeightFormat::int4: {
      for (size_t g = 0; g < n / kInt4Group; ++g) {
        const float* grp = w + g * kInt4Group;
        float amax = 0.0f;
        for (int j = 0; j < kInt4Group; ++j) amax = std::max(amax, std::fabs(grp[j]));
        const float scale = amax / 7.0f;
        p.scales[g] = scale;
        for (int j = 0; j < kInt4Group; ++j) {
          const float q = scale > 0.0f ? std::clamp(std::nearbyint(grp[j] / scale), -7.0f, 7.0f) : 0.0f;
          const auto stored = static_cast<uint8_t>(static_cast<int>(q) + 8);
          const size_t i = g * kInt4Group + static_cast<size_t>(j);
          p.data[i / 2] = static_cast<uint8_t>(p.data[i / 2] | ((i & 1) ? stored << 4 : stored));
        }
      }
      break;
    }
    case WeightFormat::sparse24: {
      auto* vals = reinterpret_cast<float*>(p.data.data());
      for (size_t g = 0; g < n / 4; ++g) {
        const float* grp = w + g * 4;
        // the two largest |w|; ties keep the lower position
        int best = 0;
        for (int j = 1; j < 4; ++j)
          if (std::fabs(grp[j]) > std::fabs(grp[best])) best = j;
        int second = best == 0 ? 1 : 0;
        for (int j = 0; j < 4; ++j)
          if (j != best && std::fabs(grp[j]) > std::fabs(grp[second])) second = j;
        const int p0 = std::min(best, second), p1 = std::max(best, second);
        vals[g * 2] = grp[p0];
        vals[g * 2 + 1] = grp[p1];
        const auto nib = static_cast<uint8_t>(p0 | (p1 << 2));
        p.index[g / 2] = static_cast<uint8_t>(p.index[g / 2] | ((g & 1) ? nib << 4 : nib));
      }
      break;
    }
  }
  return p;
}

void unpack_weights(const WeightsView& w, float* out) {
  for (int r = 0; r < w.rows; ++r)
    for (int c = 0; c < w.cols; ++c) out[static_cast<size_t>(r) * static_cast<size_t>(w.cols) + static_cast<size_t>(c)] = weight_at(w, r, c);
}

// ---- w8a8: integer arithmetic ----------------------------------------------------------------------
// y[b, r] = s_x[b] * s_w[r] * sum_c qx[b, c] q[r, c] + bias[r]: x quantised per input row
// (per token) by quantize_rows_int8, the sum exact in int32. Every version computes the same
// int32 sums (integers), and all of them turn a sum into y with this one function, compiled
// once (noinline: the same instructions, so no version can contract it into an FMA where
// another does not): the versions agree bit for bit.
namespace {
[[gnu::noinline]] float w8a8_output(float sx, float sw, int32_t dot, const float* bias, int r) {
  const float v = sx * sw * static_cast<float>(dot);
  return bias != nullptr ? v + bias[r] : v;
}
}  // namespace

void matvec_v1(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  if (w.format == WeightFormat::w8a8) {  // quantise x, then plain integer dot products
    const auto ucols = static_cast<size_t>(w.cols);
    std::vector<int8_t> qx(ucols);
    const auto* q = static_cast<const int8_t*>(w.data);
    for (int b = 0; b < n; ++b) {
      float sx = 0.0f;
      quantize_rows_int8(x + static_cast<size_t>(b) * ucols, 1, w.cols, qx.data(), &sx);
      for (int r = 0; r < w.rows; ++r) {
        int32_t dot = 0;
        for (size_t c = 0; c < ucols; ++c)
          dot += static_cast<int32_t>(qx[c]) * static_cast<int32_t>(q[static_cast<size_t>(r) * ucols + c]);
        y[static_cast<size_t>(b) * static_cast<size_t>(w.rows) + static_cast<size_t>(r)] =
            w8a8_output(sx, w.scales[r], dot, bias, r);
      }
    }
    return;
  }
  for (int b = 0; b < n; ++b) {
    const float* xb = x + static_cast<size_t>(b) * static_cast<size_t>(w.cols);
    for (int r = 0; r < w.rows; ++r) {
      float acc = bias != nullptr ? bias[r] : 0.0f;
      for (int c = 0; c < w.cols; ++c) acc += weight_at(w, r, c) * xb[c];
      y[static_cast<size_t>(b) * static_cast<size_t>(w.rows) + static_cast<size_t>(r)] = acc;
    }
  }
}

// ---- matvec v2, v3: SIMD, dequantised in registers --------------------------------------------
// The plain loop every version computes (v1 above, one weight at a time):
//   y[b, r] = bias[r] + sum_c W[r, c] x[b, c]          for b < n, r < rows
// v1 walks b outermost, so it reads all of W once per input row: n times per call. v2 turns
// the loops round: for each row r it streams W[r, :] from memory once, dequantises W lanes
// (a register's worth) at a time, and multiplies that register into every input row b, so W
// is read once per call whatever n is (the batch > 1 lesson: a step of n sequences costs
// about what a step of one costs while the weights dominate the bytes).
//
// Inputs are taken kBatch at a time: kBatch inputs x 2 registers of columns = 8 accumulators
// (AVX2 has 16 ymm registers: 8 accumulators, 2 weight registers and the x loads fit; and 2
// FMA ports x 4-cycle latency want 8 independent sums in flight). With n > kBatch the row is
// walked again for the next kBatch inputs, but from L1/L2 (a row is cols x bytes/weight: 16
// KB of fp32 at cols = 4096), not from memory.
namespace {

using V = simd::Native;
constexpr int kBatch = 4;
// Below this many weights a call is a few microseconds, about what waking the threads
// costs: v3 runs it on one thread.
constexpr size_t kMinThreaded = size_t{1} << 15;

// One row of a packed matrix: where its weights, scales and index bytes start.
struct Row {
  const void* data;
  const float* scales;   // int8: this row's scale; int4: this row's first group's scale
  const uint8_t* index;  // sparse24: this row's first index byte (cols % 8 == 0: whole bytes)
};

Row row_of(const WeightsView& w, int r) {
  const size_t first = static_cast<size_t>(r) * static_cast<size_t>(w.cols);  // first weight of row r
  Row row{nullptr, nullptr, nullptr};
  switch (w.format) {
    case WeightFormat::f32: row.data = static_cast<const float*>(w.data) + first; break;
    case WeightFormat::bf16: row.data = static_cast<const uint16_t*>(w.data) + first; break;
    case WeightFormat::int8:
    case WeightFormat::w8a8:
      row.data = static_cast<const int8_t*>(w.data) + first;
      row.scales = w.scales + r;
      break;
    case WeightFormat::int4:
      row.data = static_cast<const uint8_t*>(w.data) + first / 2;
      row.scales = w.scales + first / kInt4Group;
      break;
    case WeightFormat::sparse24:
      row.data = static_cast<const float*>(w.data) + first / 2;
      row.index = w.index + first / 8;
      break;
  }
  return row;
}

// Weight c of a row as a float, one at a time: the tails and the portable fallback. int8
// leaves the row's scale out (v2 applies it once to the row's sum), int4 applies its group's.
template <WeightFormat F>
float scalar_weight(const Row& row, int c) {
  const auto uc = static_cast<size_t>(c);
  if constexpr (F == WeightFormat::f32) {
    return static_cast<const float*>(row.data)[uc];
  } else if constexpr (F == WeightFormat::bf16) {
    return bf16_to_float(static_cast<const uint16_t*>(row.data)[uc]);
  } else if constexpr (F == WeightFormat::int8) {
    return static_cast<float>(static_cast<const int8_t*>(row.data)[uc]);
  } else if constexpr (F == WeightFormat::int4) {
    const uint8_t byte = static_cast<const uint8_t*>(row.data)[uc / 2];
    const int q = ((c & 1) ? (byte >> 4) : (byte & 0xF)) - 8;
    return row.scales[uc / kInt4Group] * static_cast<float>(q);
  } else {
    const size_t g = uc / 4;  // the group of 4 columns within the row
    const uint8_t nib = static_cast<uint8_t>((g & 1) ? (row.index[g / 2] >> 4) : (row.index[g / 2] & 0xF));
    const int p0 = nib & 3, p1 = (nib >> 2) & 3, p = c & 3;
    const float* vals = static_cast<const float*>(row.data) + g * 2;
    return p == p0 ? vals[0] : p == p1 ? vals[1] : 0.0f;
  }
}

#if defined(__AVX2__) && defined(__FMA__)
// sparse24 on AVX2: columns c..c+7 are two groups: 4 kept values and one index byte. A table
// built once maps each of the 256 index bytes to the permutation that moves value k to its
// column (lane 4 of the zero-extended values is 0.0: the columns that were pruned).
struct Sparse24Table {
  alignas(32) int32_t perm[256][8];
  Sparse24Table() {
    for (int byte = 0; byte < 256; ++byte) {
      for (int lane = 0; lane < 8; ++lane) perm[byte][lane] = 4;
      for (int half = 0; half < 2; ++half) {
        const int nib = (byte >> (4 * half)) & 0xF;
        const int p0 = nib & 3, p1 = (nib >> 2) & 3;
        perm[byte][4 * half + p1] = 2 * half + 1;
        perm[byte][4 * half + p0] = 2 * half;  // after p1: p0 wins if they coincide, as in weight_at
      }
    }
  }
};
inline const Sparse24Table& sparse24_table() {
  static const Sparse24Table table;
  return table;
}
#endif

// W consecutive weights of a row, from column c (a multiple of V::lanes), as one register.
// The packed formats go through kernels/simd.h's loads (AVX2 in the register, AVX-512 as two
// AVX2 halves, NEON and Portable lane by lane: the same numbers as scalar_weight); sparse24
// is a table-driven permute on AVX2 and scalar_weight through a small buffer elsewhere.
template <class Vec, WeightFormat F>
typename Vec::reg load_weights(const Row& row, int c) {
  constexpr int W = Vec::lanes;
  const auto uc = static_cast<size_t>(c);
  if constexpr (F == WeightFormat::f32) {
    return Vec::load(static_cast<const float*>(row.data) + uc);
  }
#if defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
  else if constexpr (W == 16 && !Vec::portable) {  // AVX-512: two AVX2 halves
    return simd::Avx512::from_halves(load_weights<simd::Avx2, F>(row, c), load_weights<simd::Avx2, F>(row, c + 8));
  }
#endif
  else if constexpr (F == WeightFormat::bf16) {
    return Vec::load_bf16(static_cast<const uint16_t*>(row.data) + uc);
  } else if constexpr (F == WeightFormat::int8) {
    return Vec::load_i8(static_cast<const int8_t*>(row.data) + uc);
  } else if constexpr (F == WeightFormat::int4) {
    return Vec::load_i4(static_cast<const uint8_t*>(row.data) + uc / 2, row.scales[uc / kInt4Group]);
  }
#if defined(__AVX2__) && defined(__FMA__)
  else if constexpr (W == 8 && !Vec::portable) {  // sparse24 on AVX2: a permute of the 4 kept values
    using A = simd::Avx2;
    return A::permute(A::load4(static_cast<const float*>(row.data) + uc / 2), sparse24_table().perm[row.index[uc / 8]]);
  }
#endif
  else {
    float buf[W];
    for (int j = 0; j < W; ++j) buf[j] = scalar_weight<F>(row, c + j);
    return Vec::load(buf);
  }
}

// sums[b] = sum_c W[r, c] x[b, c] for NB inputs (x rows cols apart): one pass over the row.
template <class Vec, WeightFormat F, int NB>
void row_dot(float* sums, const Row& row, const float* x, int cols) {
  constexpr int W = Vec::lanes;
  const auto ucols = static_cast<size_t>(cols);
  typename Vec::reg acc0[NB], acc1[NB];  // two registers of columns per input
  for (int b = 0; b < NB; ++b) acc0[b] = acc1[b] = Vec::zero();
  int c = 0;
  for (; c + 2 * W <= cols; c += 2 * W) {
    const typename Vec::reg w0 = load_weights<Vec, F>(row, c);
    const typename Vec::reg w1 = load_weights<Vec, F>(row, c + W);
    for (int b = 0; b < NB; ++b) {
      const float* xb = x + static_cast<size_t>(b) * ucols;
      acc0[b] = Vec::fma(w0, Vec::load(xb + c), acc0[b]);
      acc1[b] = Vec::fma(w1, Vec::load(xb + c + W), acc1[b]);
    }
  }
  for (; c + W <= cols; c += W) {
    const typename Vec::reg w0 = load_weights<Vec, F>(row, c);
    for (int b = 0; b < NB; ++b) acc0[b] = Vec::fma(w0, Vec::load(x + static_cast<size_t>(b) * ucols + c), acc0[b]);
  }
  for (int b = 0; b < NB; ++b) sums[b] = Vec::sum(Vec::add(acc0[b], acc1[b]));
  for (; c < cols; ++c) {  // the last cols % W columns (f32, bf16, int8 of any width; sparse24 on AVX-512)
    const float wc = scalar_weight<F>(row, c);
    for (int b = 0; b < NB; ++b) sums[b] += wc * x[static_cast<size_t>(b) * ucols + static_cast<size_t>(c)];
  }
}

// Output row r for all n inputs: y[b, r] for b < n. Reads W[r, :] from memory once.
template <class Vec, WeightFormat F>
void matvec_row(float* y, const float* x, const WeightsView& w, const float* bias, int n, int r) {
  const Row row = row_of(w, r);
  const auto ucols = static_cast<size_t>(w.cols), urows = static_cast<size_t>(w.rows);
  for (int b0 = 0; b0 < n; b0 += kBatch) {
    float sums[kBatch];
    const float* xb = x + static_cast<size_t>(b0) * ucols;
    switch (std::min(kBatch, n - b0)) {
      case 1: row_dot<Vec, F, 1>(sums, row, xb, w.cols); break;
      case 2: row_dot<Vec, F, 2>(sums, row, xb, w.cols); break;
      case 3: row_dot<Vec, F, 3>(sums, row, xb, w.cols); break;
      default: row_dot<Vec, F, kBatch>(sums, row, xb, w.cols); break;
    }
    for (int b = 0; b < std::min(kBatch, n - b0); ++b) {
      float v = sums[b];
      if constexpr (F == WeightFormat::int8) v *= *row.scales;  // the row's scale, once per row
      if (bias != nullptr) v += bias[r];
      y[static_cast<size_t>(b0 + b) * urows + static_cast<size_t>(r)] = v;
    }
  }
}

// Rows [r0, r1) in order; `threaded`: across OpenMP threads, contiguous blocks of rows each
// (schedule(static)). Each output is one thread's fixed-order sum either way, so v2 and v3
// agree bit for bit, at any thread count.
template <class Vec, WeightFormat F>
void matvec_rows(float* y, const float* x, const WeightsView& w, const float* bias, int n, bool threaded) {
  const bool parallel = threaded && static_cast<size_t>(w.rows) * static_cast<size_t>(w.cols) >= kMinThreaded;
  if (!parallel) {
    for (int r = 0; r < w.rows; ++r) matvec_row<Vec, F>(y, x, w, bias, n, r);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int r = 0; r < w.rows; ++r) matvec_row<Vec, F>(y, x, w, bias, n, r);
}

// ---- w8a8 in v2, v3: integer SIMD dot products -----------------------------------------------------
// x is quantised once per call (n rows, n small), then each weight row is streamed once and
// multiplied into every quantised input in integers:
//   AVX-512 VNNI  vpdpbusd (u8 x s8, 4 products into each int32 lane): the input shifted to
//                 u8 (qx + 128, prepared once per call), and the row's own byte sum taken in
//                 the same pass (one more vpdpbusd with ones) for sum (qx + 128) q - 128 sum q.
//                 64 weights per instruction; the ragged end with masked loads (zeros).
//   AVX2          vpmaddubsw + vpmaddwd on |qx| (u8, prepared once) and q with qx's sign
//                 (vpsignb; q in [-127, 127], so no overflow; pair sums <= 2 * 127 * 127).
//   otherwise     plain int32 loops (Portable<8>, NEON: no sdot here yet).
// The weight bytes are int8's, so both formats read the same bytes; what w8a8 saves is the
// per-weight int8 -> float conversion and FMA (16 weights per 3-4 instructions) in favour of
// 64 (or 32) weights per instruction: it wins where int8 is compute-bound (weights in
// cache, or a core that cannot convert as fast as memory delivers).
enum class IntDot { scalar, avx2, vnni };

// dots[b] = sum_c qx[b, c] q[c] for NB inputs; qx rows `cols` apart, prep likewise (the
// per-call transformed inputs: qx + 128 for vnni, |qx| for avx2, unused for scalar).
template <IntDot D, int NB>
void int_row_dot(int32_t* dots, const int8_t* q, const int8_t* qx, const uint8_t* prep, int cols) {
  const auto ucols = static_cast<size_t>(cols);
  int c = 0;
  for (int b = 0; b < NB; ++b) dots[b] = 0;
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if constexpr (D == IntDot::vnni) {
    __m512i acc[NB];
    for (int b = 0; b < NB; ++b) acc[b] = _mm512_setzero_si512();
    __m512i qsum = _mm512_setzero_si512();
    const __m512i ones = _mm512_set1_epi8(1);
    for (; c < cols; c += 64) {
      const __mmask64 m = cols - c >= 64 ? ~__mmask64(0) : (__mmask64(1) << (cols - c)) - 1;
      const __m512i wq = _mm512_maskz_loadu_epi8(m, q + c);
      qsum = _mm512_dpbusd_epi32(qsum, ones, wq);
      for (int b = 0; b < NB; ++b)
        acc[b] = _mm512_dpbusd_epi32(acc[b], _mm512_maskz_loadu_epi8(m, prep + static_cast<size_t>(b) * ucols + c), wq);
    }
    const int32_t corr = 128 * _mm512_reduce_add_epi32(qsum);
    for (int b = 0; b < NB; ++b) dots[b] = _mm512_reduce_add_epi32(acc[b]) - corr;
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (D == IntDot::avx2) {
    __m256i acc[NB];
    for (int b = 0; b < NB; ++b) acc[b] = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    for (; c + 32 <= cols; c += 32) {
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c));
      for (int b = 0; b < NB; ++b) {
        const size_t off = static_cast<size_t>(b) * ucols + static_cast<size_t>(c);
        const __m256i xs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qx + off));
        const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(prep + off));
        acc[b] = _mm256_add_epi32(acc[b], _mm256_madd_epi16(_mm256_maddubs_epi16(xa, _mm256_sign_epi8(wq, xs)), ones));
      }
    }
    for (int b = 0; b < NB; ++b) {
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[b]);
      for (int32_t v : lanes) dots[b] += v;
    }
  }
#endif
  (void)prep;
  for (; c < cols; ++c)  // scalar: all of it; avx2: the last cols % 32
    for (int b = 0; b < NB; ++b)
      dots[b] += static_cast<int32_t>(qx[static_cast<size_t>(b) * ucols + static_cast<size_t>(c)]) *
                 static_cast<int32_t>(q[c]);
}

template <IntDot D>
void matvec_w8a8_rows(float* y, const WeightsView& w, const float* bias, int n, bool threaded, const int8_t* qx,
                      const uint8_t* prep, const float* sx) {
  const auto ucols = static_cast<size_t>(w.cols), urows = static_cast<size_t>(w.rows);
  auto one_row = [&](int r) {
    const int8_t* q = static_cast<const int8_t*>(w.data) + static_cast<size_t>(r) * ucols;
    for (int b0 = 0; b0 < n; b0 += kBatch) {
      int32_t dots[kBatch];
      const size_t off = static_cast<size_t>(b0) * ucols;
      switch (std::min(kBatch, n - b0)) {
        case 1: int_row_dot<D, 1>(dots, q, qx + off, prep + off, w.cols); break;
        case 2: int_row_dot<D, 2>(dots, q, qx + off, prep + off, w.cols); break;
        case 3: int_row_dot<D, 3>(dots, q, qx + off, prep + off, w.cols); break;
        default: int_row_dot<D, kBatch>(dots, q, qx + off, prep + off, w.cols); break;
      }
      for (int b = 0; b < std::min(kBatch, n - b0); ++b)
        y[static_cast<size_t>(b0 + b) * urows + static_cast<size_t>(r)] = w8a8_output(sx[b0 + b], w.scales[r], dots[b], bias, r);
    }
  };
  const bool parallel = threaded && static_cast<size_t>(w.rows) * ucols >= kMinThreaded;
  if (!parallel) {
    for (int r = 0; r < w.rows; ++r) one_row(r);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int r = 0; r < w.rows; ++r) one_row(r);
}

void matvec_w8a8(float* y, const float* x, const WeightsView& w, const float* bias, int n, bool threaded,
                 bool use_simd) {
  if (n == 0) return;
  const size_t count = static_cast<size_t>(n) * static_cast<size_t>(w.cols);
  std::vector<int8_t> qx(count);
  std::vector<uint8_t> prep(count);
  std::vector<float> sx(static_cast<size_t>(n));
  quantize_rows_int8(x, n, w.cols, qx.data(), sx.data());  // per token: one scale per input row
  IntDot d = IntDot::scalar;
  (void)use_simd;  // a build with neither VNNI nor AVX2 has only the plain loops
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if (use_simd) d = IntDot::vnni;
#elif defined(__AVX2__)
  if (use_simd) d = IntDot::avx2;
#endif
  for (size_t i = 0; i < count; ++i)
    prep[i] = d == IntDot::vnni ? static_cast<uint8_t>(static_cast<uint8_t>(qx[i]) ^ 0x80u)     // qx + 128
                                : static_cast<uint8_t>(qx[i] < 0 ? -qx[i] : qx[i]);              // |qx|
  switch (d) {
    case IntDot::vnni: matvec_w8a8_rows<IntDot::vnni>(y, w, bias, n, threaded, qx.data(), prep.data(), sx.data()); break;
    case IntDot::avx2: matvec_w8a8_rows<IntDot::avx2>(y, w, bias, n, threaded, qx.data(), prep.data(), sx.data()); break;
    case IntDot::scalar: matvec_w8a8_rows<IntDot::scalar>(y, w, bias, n, threaded, qx.data(), prep.data(), sx.data()); break;
  }
}

template <class Vec>
void matvec_simd(float* y, const float* x, const WeightsView& w, const float* bias, int n, bool threaded) {
  switch (w.format) {
    case WeightFormat::f32: matvec_rows<Vec, WeightFormat::f32>(y, x, w, bias, n, threaded); break;
    case WeightFormat::bf16: matvec_rows<Vec, WeightFormat::bf16>(y, x, w, bias, n, threaded); break;
    case WeightFormat::int8: matvec_rows<Vec, WeightFormat::int8>(y, x, w, bias, n, threaded); break;
    case WeightFormat::int4: matvec_rows<Vec, WeightFormat::int4>(y, x, w, bias, n, threaded); break;
    case WeightFormat::sparse24: matvec_rows<Vec, WeightFormat::sparse24>(y, x, w, bias, n, threaded); break;
    case WeightFormat::w8a8: matvec_w8a8(y, x, w, bias, n, threaded, !Vec::portable); break;
  }
}

void check_matvec(const WeightsView& w, int n) {
  const std::string why = check_packable(w.format, w.rows, w.cols);
  if (!why.empty()) throw std::invalid_argument(std::string("matvec on a ") + format_name(w.format) + " matrix: " + why);
  if (n < 0) throw std::invalid_argument("matvec: n must be >= 0, got " + std::to_string(n));
}

}  // namespace

// ---- v2: SIMD, one thread ----------------------------------------------------------------------
void matvec_v2(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  check_matvec(w, n);
  matvec_simd<V>(y, x, w, bias, n, false);
}

// ---- v3: v2's rows across OpenMP threads ------------------------------------------------------
// One thread cannot keep enough loads in flight to use a socket's memory bandwidth; several
// streaming disjoint blocks of rows can.
void matvec_v3(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  check_matvec(w, n);
  matvec_simd<V>(y, x, w, bias, n, true);
}

void matvec_portable(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  check_matvec(w, n);
  matvec_simd<simd::Portable<8>>(y, x, w, bias, n, false);
}

const std::vector<MatvecVersion>& matvec_versions() {
  static const std::vector<MatvecVersion> versions = {
      {1, "naive", "one weight at a time: dequantise, multiply, add (the reference)", matvec_v1},
      {2, "simd", "dequantise a register of weights at a time; each row read once for all n inputs", matvec_v2},
      {3, "simd-threads", "v2 with the rows split across OpenMP threads", matvec_v3},
  };
  return versions;
}

void matvec(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  matvec_versions().back().fn(y, x, w, bias, n);
}

// The argument checks every CPU rung makes (v1 included: a wrong NKV would read past the
// caches' rows).
void check_attention_decode(int B, int n, int pos, int C, int NH, int NKV, int maxT) {
  if (B < 0 || NH < 1 || C % NH != 0 || NKV < 1 || NH % NKV != 0 || pos < 0 || n < 0 || pos + n > maxT)
    throw std::invalid_argument("attention_decode: needs C % NH == 0, NKV >= 1 dividing NH, and 0 <= pos, pos + n <= "
                                "maxT; got B=" + std::to_string(B) + " C=" + std::to_string(C) + " NH=" +
                                std::to_string(NH) + " NKV=" + std::to_string(NKV) + " pos=" + std::to_string(pos) +
                                " n=" + std::to_string(n) + " maxT=" + std::to_string(maxT));
}

namespace {

// The plain-loop attention of v1 and int8 v1 over a cache whose values come from `at(row, c)`:
// the float stored at cache row `row` (b maxT + t), channel c of the KV width; the k cache's
// and the v cache's readers are passed separately. Scores and sums in double.
template <class KAt, class VAt>
void attention_over_cache(float* out, const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT,
                          const KAt& k_at, const VAt& v_at) {
  const int hs = C / NH, group = NH / NKV;  // query head h reads KV head h / group
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const size_t uC = static_cast<size_t>(C), uKV = static_cast<size_t>(NKV) * static_cast<size_t>(hs);
  const size_t width = uC + 2 * uKV;  // one qkv row: q (C) | k (KV) | v (KV)
  std::vector<double> score(static_cast<size_t>(pos + n));
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < n; ++i)
      for (int h = 0; h < NH; ++h) {
        const float* q = qkv + (static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i)) * width +
                         static_cast<size_t>(h) * static_cast<size_t>(hs);
        const size_t kvh = static_cast<size_t>(h / group) * static_cast<size_t>(hs);
        const int len = pos + i + 1;
        double mx = -1e300;
        for (int t = 0; t < len; ++t) {
          const size_t row = static_cast<size_t>(b) * static_cast<size_t>(maxT) + static_cast<size_t>(t);
          double d = 0.0;
          for (int j = 0; j < hs; ++j) d += static_cast<double>(q[j]) * static_cast<double>(k_at(row, kvh + static_cast<size_t>(j)));
          score[static_cast<size_t>(t)] = d * scale;
          mx = std::max(mx, score[static_cast<size_t>(t)]);
        }
        double sum = 0.0;
        for (int t = 0; t < len; ++t) sum += (score[static_cast<size_t>(t)] = std::exp(score[static_cast<size_t>(t)] - mx));
        float* o = out + (static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i)) * uC +
                   static_cast<size_t>(h) * static_cast<size_t>(hs);
        for (int j = 0; j < hs; ++j) {
          double acc = 0.0;
          for (int t = 0; t < len; ++t) {
            const size_t row = static_cast<size_t>(b) * static_cast<size_t>(maxT) + static_cast<size_t>(t);
            acc += score[static_cast<size_t>(t)] * static_cast<double>(v_at(row, kvh + static_cast<size_t>(j)));
          }
          o[j] = static_cast<float>(acc / sum);
        }
      }
}

}  // namespace

void attention_decode_v1(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int NKV, int maxT) {
  check_attention_decode(B, n, pos, C, NH, NKV, maxT);
  const size_t uKV = static_cast<size_t>(NKV) * static_cast<size_t>(C / NH);
  // 1. append the new keys and values
  append_kv(kcache, vcache, qkv, B, n, pos, C, static_cast<int>(uKV), maxT);
  // 2. each new query attends over positions 0 .. pos+i
  attention_over_cache(
      out, qkv, B, n, pos, C, NH, NKV, maxT, [&](size_t row, size_t c) { return kcache[row * uKV + c]; },
      [&](size_t row, size_t c) { return vcache[row * uKV + c]; });
}

// ---- attention_decode v2: threads over (b, i, h), float SIMD --------------------------------------
// v1's arithmetic in float, two passes over a scores buffer per (sequence b, new position i,
// head h): pass 1 scores[t] = q.k_t / sqrt(hs) for t <= pos+i (SIMD dot products over hs) and
// their max; pass 2 p_t = exp(scores[t] - max), out = sum_t p_t v_t / sum_t p_t, accumulated
// as hs-wide rows (o += p_t v_t reads v_t in order, one cache line after the next). The
// B * n * NH items are independent: OpenMP hands them out in contiguous blocks
// (schedule(static)), each item one thread's fixed-order loop, so results do not depend on
// the thread count. With grouped heads each query head reads its KV head's rows on its own:
// a KV head is read NH / NKV times per token (from DRAM, once the cache outgrows the caches).
namespace {

// q . k over hs floats.
float dot(const float* q, const float* k, int hs) {
  constexpr int W = V::lanes;
  V::reg acc = V::zero();
  int j = 0;
  for (; j + W <= hs; j += W) acc = V::fma(V::load(q + j), V::load(k + j), acc);
  float s = V::sum(acc);
  for (; j < hs; ++j) s += q[j] * k[j];
  return s;
}

// o += p * v over hs floats.
void axpy(float* o, float p, const float* v, int hs) {
  constexpr int W = V::lanes;
  const V::reg vp = V::set1(p);
  int j = 0;
  for (; j + W <= hs; j += W) V::store(o + j, V::fma(vp, V::load(v + j), V::load(o + j)));
  for (; j < hs; ++j) o[j] += p * v[j];
}

// The sizes both float rungs share.
struct DecodeShape {
  int hs, group, len0;        // head size, query heads per KV head, positions before query 0 (pos)
  size_t uC, uKV, width;      // C, NKV * hs, one qkv row (C + 2 KV)
  float scale;                // 1 / sqrt(hs), rounded to float once
};

DecodeShape decode_shape(int pos, int C, int NH, int NKV) {
  DecodeShape s{};
  s.hs = C / NH;
  s.group = NH / NKV;
  s.len0 = pos;
  s.uC = static_cast<size_t>(C);
  s.uKV = static_cast<size_t>(NKV) * static_cast<size_t>(s.hs);
  s.width = s.uC + 2 * s.uKV;
  s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.hs)));
  return s;
}

// Query heads h0 .. h0+g-1 of (sequence b, new position i), each reading its KV head
// (h / group): each head's arithmetic is v2's per-item loop exactly (the same dot, the same
// max, the same exp, the same double sum, the same axpy order over t), so the outputs are bit
// for bit v2's whatever g is; only the loop order ACROSS heads changes: for each position t
// the heads' k (then v) slices are read in head order, one contiguous stretch of the cache
// row, and a KV head's slice is used by all its query heads in the run while it is in L1.
// score holds g * len floats.
void attend_heads(float* out, const float* kcache, const float* vcache, const float* qkv, const DecodeShape& s, int b,
                  int i, int n, int h0, int g, int maxT, float* score) {
  const size_t hs = static_cast<size_t>(s.hs);
  const size_t bi = static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i);
  const float* kb = kcache + static_cast<size_t>(b) * static_cast<size_t>(maxT) * s.uKV;
  const float* vb = vcache + static_cast<size_t>(b) * static_cast<size_t>(maxT) * s.uKV;
  const float* q0 = qkv + bi * s.width + static_cast<size_t>(h0) * hs;
  float* o0 = out + bi * s.uC + static_cast<size_t>(h0) * hs;
  const int len = s.len0 + i + 1;  // causal: positions 0 .. pos+i
  const size_t ulen = static_cast<size_t>(len);
  constexpr int kMaxHeads = 64;  // heads per call (the callers split more)
  float mx[kMaxHeads];
  double sum[kMaxHeads];
  size_t slice[kMaxHeads];  // head a's KV slice within a cache row
  for (int a = 0; a < g; ++a) {
    mx[a] = -INFINITY;
    sum[a] = 0.0;
    slice[a] = static_cast<size_t>((h0 + a) / s.group) * hs;
  }
  // pass 1: scores and their max, the run's k slices of row t in order
  for (int t = 0; t < len; ++t) {
    const float* k = kb + static_cast<size_t>(t) * s.uKV;
    for (int a = 0; a < g; ++a) {
      const float sc = dot(q0 + static_cast<size_t>(a) * hs, k + slice[a], s.hs) * s.scale;
      score[static_cast<size_t>(a) * ulen + static_cast<size_t>(t)] = sc;
      mx[a] = std::max(mx[a], sc);
    }
  }
  // pass 2: out = sum_t exp(s_t - max) v_t / sum_t exp(s_t - max), the v slices of row t in order
  std::fill(o0, o0 + static_cast<size_t>(g) * hs, 0.0f);
  for (int t = 0; t < len; ++t) {
    const float* v = vb + static_cast<size_t>(t) * s.uKV;
    for (int a = 0; a < g; ++a) {
      const float p = std::exp(score[static_cast<size_t>(a) * ulen + static_cast<size_t>(t)] - mx[a]);
      sum[a] += p;
      axpy(o0 + static_cast<size_t>(a) * hs, p, v + slice[a], s.hs);
    }
  }
  for (int a = 0; a < g; ++a) {
    const auto inv = static_cast<float>(1.0 / sum[a]);
    float* o = o0 + static_cast<size_t>(a) * hs;
    for (size_t j = 0; j < hs; ++j) o[j] *= inv;
  }
}

}  // namespace

void attention_decode_v2(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int NKV, int maxT) {
  // qkv (B, n, C + 2 KV), kcache, vcache (B, maxT, KV), out (B, n, C); KV = NKV * hs
  check_attention_decode(B, n, pos, C, NH, NKV, maxT);
  const DecodeShape s = decode_shape(pos, C, NH, NKV);
  // 1. append the new keys and values (before any query reads them: query i sees i's own k, v)
  append_kv(kcache, vcache, qkv, B, n, pos, C, static_cast<int>(s.uKV), maxT);
  // 2. every (b, i, h) on its own
  const int items = B * n * NH;
  const bool parallel = static_cast<size_t>(items) * static_cast<size_t>(pos + n) * s.uC >= kMinThreaded;
#pragma omp parallel if (parallel)
  {
    std::vector<float> score(static_cast<size_t>(pos + n));  // one per thread
#pragma omp for schedule(static)
    for (int item = 0; item < items; ++item) {
      const int h = item % NH, i = (item / NH) % n, b = item / (NH * n);
      attend_heads(out, kcache, vcache, qkv, s, b, i, n, h, 1, maxT, score.data());
    }
  }
}

// ---- attention_decode v3: grouped, each KV row read once, in order -----------------------------
// v2 with the items turned round: one item is (b, i, a run of query heads), and for each
// position the run's heads read their k (then v) slices of the cache row in order
// (attend_heads): a contiguous stretch of the row, each KV head's slice once for all its
// query heads. v2 reads one head's hs floats from every row (a stride of NKV hs floats: a new
// page every row or two once the cache outgrows the TLB's reach) and each KV head NH / NKV
// times per token; v3 streams the cache's bytes once, which is the saving grouped-query
// attention promises, and only a kernel that reads this way gets it. A run is all NH heads
// unless there are fewer (b, i) items than threads (batch 1, one new token); then the heads
// are cut into contiguous runs, one per thread, on KV-head boundaries when there are at
// least as many KV heads as runs (MQA: query heads of the one group, each run reading the
// KV head once). Runs are at most 64 heads. Each head's arithmetic is v2's, so v3 equals v2
// bit for bit, for every thread count and every cut.
void attention_decode_v3(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int NKV, int maxT) {
  check_attention_decode(B, n, pos, C, NH, NKV, maxT);
  const DecodeShape s = decode_shape(pos, C, NH, NKV);
  append_kv(kcache, vcache, qkv, B, n, pos, C, static_cast<int>(s.uKV), maxT);
  const int rows = B * n;  // (b, i)
  if (rows == 0) return;
  const bool parallel = static_cast<size_t>(rows) * static_cast<size_t>(NH) * static_cast<size_t>(pos + n) * s.uC >=
                        kMinThreaded;
  const int threads = parallel ? omp_get_max_threads() : 1;
  const int runs = std::min(NH, std::max({1, (threads + rows - 1) / rows, (NH + 63) / 64}));
  // run r's first query head: on KV-head boundaries when runs <= NKV (unless that makes a
  // run wider than attend_heads' 64), else an even cut of the NH heads (at most 64 each)
  bool aligned = runs <= NKV;
  auto first = [&](int r) { return aligned ? (NKV * r / runs) * s.group : NH * r / runs; };
  auto widest_run = [&] {
    int w = 0;
    for (int r = 0; r < runs; ++r) w = std::max(w, first(r + 1) - first(r));
    return w;
  };
  int widest = widest_run();
  if (widest > 64) {
    aligned = false;
    widest = widest_run();
  }
  const int items = rows * runs;
#pragma omp parallel if (parallel)
  {
    std::vector<float> score(static_cast<size_t>(widest) * static_cast<size_t>(pos + n));  // one per thread
#pragma omp for schedule(static)
    for (int item = 0; item < items; ++item) {
      const int r = item % runs, bi = item / runs;
      const int h0 = first(r), g = first(r + 1) - h0;
      if (g > 0) attend_heads(out, kcache, vcache, qkv, s, bi / n, bi % n, n, h0, g, maxT, score.data());
    }
  }
}

const std::vector<AttentionDecodeVersion>& attention_decode_versions() {
  static const std::vector<AttentionDecodeVersion> versions = {
      {1, "naive", "plain loops over the cache, scores in double (the reference)", attention_decode_v1},
      {2, "simd-threads", "float SIMD dot products, (b, i, h) across OpenMP threads", attention_decode_v2},
      {3, "grouped", "v2 with each cache row read once, in order, by all the query heads (runs of heads across threads)",
       attention_decode_v3},
  };
  return versions;
}

void attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                      int NH, int NKV, int maxT) {
  attention_decode_versions().back().fn(out, kcache, vcache, qkv, B, n, pos, C, NH, NKV, maxT);
}

// ---- attention over an int8 KV cache (lesson 15) ------------------------------------------------
// The cache holds, per position and KV head, hs int8 values and one float scale:
//   s = max_c |x_c| / 127,  q_c = clamp(round(x_c * (1 / s)), -127, 127),  x_c ~ q_c s
// gpt::quantize_dequantize_heads_int8's rounding exactly (the same float operations), so a
// Decoder over this cache computes what gpt::compressed_logits(..., {.kv_int8 = true})
// computes over the dequantised values, to the summation order.

float quantize_head_int8(const float* x, int hs, int8_t* q) {
  float amax = 0.0f;
  for (int c = 0; c < hs; ++c) amax = std::max(amax, std::fabs(x[c]));
  const float s = amax / 127.0f;
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  for (int c = 0; c < hs; ++c) q[c] = static_cast<int8_t>(std::clamp(std::nearbyint(x[c] * inv), -127.0f, 127.0f));
  return s;
}

void append_kv_int8(int8_t* kcache, int8_t* vcache, float* kscale, float* vscale, const float* qkv, int B, int n,
                    int pos, int C, int NH, int NKV, int maxT) {
  // qkv (B, n, C + 2 KV); kcache, vcache (B, maxT, KV) int8; kscale, vscale (B, maxT, NKV)
  check_attention_decode(B, n, pos, C, NH, NKV, maxT);
  const int hs = C / NH;
  const size_t uC = static_cast<size_t>(C), uhs = static_cast<size_t>(hs), uNKV = static_cast<size_t>(NKV);
  const size_t uKV = uNKV * uhs, width = uC + 2 * uKV;
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < n; ++i) {
      const float* row = qkv + (static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i)) * width;
      const size_t t = static_cast<size_t>(b) * static_cast<size_t>(maxT) + static_cast<size_t>(pos + i);
      for (size_t h = 0; h < uNKV; ++h) {
        kscale[t * uNKV + h] = quantize_head_int8(row + uC + h * uhs, hs, kcache + t * uKV + h * uhs);
        vscale[t * uNKV + h] = quantize_head_int8(row + uC + uKV + h * uhs, hs, vcache + t * uKV + h * uhs);
      }
    }
}

void attention_decode_int8_v1(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                              const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT) {
  // 1. quantise the new keys and values into the cache (checks the sizes)
  append_kv_int8(kcache, vcache, kscale, vscale, qkv, B, n, pos, C, NH, NKV, maxT);
  // 2. attention_decode_v1 over the dequantised values: each cached value as the float
  //    q * s (what quantize_dequantize_heads_int8 writes), the sums in double
  const size_t uhs = static_cast<size_t>(C / NH), uNKV = static_cast<size_t>(NKV), uKV = uNKV * uhs;
  attention_over_cache(
      out, qkv, B, n, pos, C, NH, NKV, maxT,
      [&](size_t row, size_t c) { return static_cast<float>(kcache[row * uKV + c]) * kscale[row * uNKV + c / uhs]; },
      [&](size_t row, size_t c) { return static_cast<float>(vcache[row * uKV + c]) * vscale[row * uNKV + c / uhs]; });
}

// ---- int8 v2: SIMD + threads, dequantised in registers -----------------------------------------------
// attention_decode_v2's two passes per (b, i, h), reading int8: a register of W int8 values
// is widened to W floats (exact) and multiplied in; the scales come out of the inner loops:
//   q . k_t       = s_k[t] * sum_c q_c kq_t,c          (one multiply per position)
//   sum_t p_t v_t = sum_t (p_t s_v[t]) vq_t            (v's scale folded into the weight p_t)
// while the softmax's denominator stays sum_t p_t. A position's bytes are hs + 4 instead of
// 4 hs: where the cache, not the weights, is what a step streams (long contexts), that is
// what it saves.
namespace {

// W int8 -> W floats. AVX-512 has no such load in kernels/simd.h: two AVX2 halves, as the
// packed-weight loads of matvec do.
template <class Vec>
typename Vec::reg load_i8_as(const int8_t* p) {
#if defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
  if constexpr (Vec::lanes == 16 && !Vec::portable) {
    return simd::Avx512::from_halves(simd::Avx2::load_i8(p), simd::Avx2::load_i8(p + 8));
  } else
#endif
  {
    return Vec::load_i8(p);
  }
}

// sum_c q_c k_c over hs channels, k in int8 (unscaled).
template <class Vec>
float dot_i8(const float* q, const int8_t* k, int hs) {
  constexpr int W = Vec::lanes;
  typename Vec::reg acc = Vec::zero();
  int j = 0;
  for (; j + W <= hs; j += W) acc = Vec::fma(Vec::load(q + j), load_i8_as<Vec>(k + j), acc);
  float s = Vec::sum(acc);
  for (; j < hs; ++j) s += q[j] * static_cast<float>(k[j]);
  return s;
}

// o += p * v over hs channels, v in int8 (p already carries v's scale).
template <class Vec>
void axpy_i8(float* o, float p, const int8_t* v, int hs) {
  constexpr int W = Vec::lanes;
  const typename Vec::reg vp = Vec::set1(p);
  int j = 0;
  for (; j + W <= hs; j += W) Vec::store(o + j, Vec::fma(vp, load_i8_as<Vec>(v + j), Vec::load(o + j)));
  for (; j < hs; ++j) o[j] += p * static_cast<float>(v[j]);
}

template <class Vec>
void attention_decode_int8_simd(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                                const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT,
                                bool threaded) {
  // qkv (B, n, C + 2 KV), caches (B, maxT, KV) int8 + scales (B, maxT, NKV), out (B, n, C)
  append_kv_int8(kcache, vcache, kscale, vscale, qkv, B, n, pos, C, NH, NKV, maxT);
  const DecodeShape s = decode_shape(pos, C, NH, NKV);
  const size_t hs = static_cast<size_t>(s.hs), uNKV = static_cast<size_t>(NKV);
  const int items = B * n * NH;
  const bool parallel =
      threaded && static_cast<size_t>(items) * static_cast<size_t>(pos + n) * s.uC >= kMinThreaded;
#pragma omp parallel if (parallel)
  {
    std::vector<float> score(static_cast<size_t>(pos + n));  // one per thread
#pragma omp for schedule(static)
    for (int item = 0; item < items; ++item) {
      const int h = item % NH, i = (item / NH) % n, b = item / (NH * n);
      const size_t bi = static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i);
      const size_t kvh = static_cast<size_t>(h / s.group);
      const size_t row0 = static_cast<size_t>(b) * static_cast<size_t>(maxT);  // this sequence's position 0
      const float* q = qkv + bi * s.width + static_cast<size_t>(h) * hs;
      float* o = out + bi * s.uC + static_cast<size_t>(h) * hs;
      const int len = pos + i + 1;  // causal: positions 0 .. pos+i
      // pass 1: score_t = s_k[t] (q . kq_t) / sqrt(hs), and the max
      float mx = -INFINITY;
      for (int t = 0; t < len; ++t) {
        const size_t row = row0 + static_cast<size_t>(t);
        const float d = dot_i8<Vec>(q, kcache + row * s.uKV + kvh * hs, s.hs);
        const float sc = kscale[row * uNKV + kvh] * d * s.scale;
        score[static_cast<size_t>(t)] = sc;
        mx = std::max(mx, sc);
      }
      // pass 2: out = sum_t p_t s_v[t] vq_t / sum_t p_t, p_t = exp(score_t - max)
      std::fill(o, o + hs, 0.0f);
      double sum = 0.0;
      for (int t = 0; t < len; ++t) {
        const size_t row = row0 + static_cast<size_t>(t);
        const float p = std::exp(score[static_cast<size_t>(t)] - mx);
        sum += p;
        axpy_i8<Vec>(o, p * vscale[row * uNKV + kvh], vcache + row * s.uKV + kvh * hs, s.hs);
      }
      const auto inv = static_cast<float>(1.0 / sum);
      for (size_t j = 0; j < hs; ++j) o[j] *= inv;
    }
  }
}

}  // namespace

void attention_decode_int8_v2(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                              const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT) {
  attention_decode_int8_simd<V>(out, kcache, vcache, kscale, vscale, qkv, B, n, pos, C, NH, NKV, maxT, true);
}

void attention_decode_int8_portable(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                                    const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT) {
  attention_decode_int8_simd<simd::Portable<8>>(out, kcache, vcache, kscale, vscale, qkv, B, n, pos, C, NH, NKV,
                                                maxT, false);
}

const std::vector<AttentionDecodeInt8Version>& attention_decode_int8_versions() {
  static const std::vector<AttentionDecodeInt8Version> versions = {
      {1, "naive", "plain loops over the dequantised cache, scores in double (the reference)",
       attention_decode_int8_v1},
      {2, "simd-threads", "int8 widened in registers, scales once per position, (b, i, h) across OpenMP threads",
       attention_decode_int8_v2},
  };
  return versions;
}

void attention_decode_int8(float* out, int8_t* kcache, int8_t* vcache, float* kscale, float* vscale,
                           const float* qkv, int B, int n, int pos, int C, int NH, int NKV, int maxT) {
  attention_decode_int8_versions().back().fn(out, kcache, vcache, kscale, vscale, qkv, B, n, pos, C, NH, NKV, maxT);
}

}  // namespace kernels
