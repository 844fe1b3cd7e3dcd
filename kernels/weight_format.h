// kernels/weight_format.h: how a weight matrix W (rows, cols) is stored for inference
// (lesson 10), as a non-owning view the CPU kernels (kernels/decode.h) and the CUDA kernels
// (kernels/cuda/device.h) read alike. Plain C++17: nvcc compiles it too.
//
// W is a Linear layer's weight, (out channels, in channels), row-major: y = x W^T reads
// every byte of it once per call, whatever the batch (that is the whole of lesson 10).
//
//   format    data                                   scales                 index            bytes/weight
//   f32       float  [rows*cols]                     -                      -                4
//   bf16      uint16 [rows*cols]  fp32's top 16 bits -                      -                2
//             (rounded to nearest even)
//   int8      int8   [rows*cols]  q in [-127, 127]   float [rows]           -                1 + 4/cols
//             w = scales[r] * q;   scales[r] = max_c |W[r,c]| / 127 (per output channel)
//   int4      uint8  [rows*cols/2] two per byte:     float [rows*cols/32]   -                0.5 + 4/32
//             column 2j in the low nibble, 2j+1 in the high one, each stored as q + 8,
//             q in [-7, 7];  w = scales[r*cols/32 + c/32] * q;
//             scales = max |w| of the group of 32 / 7 (kInt4Group consecutive columns)
//   w8a8      exactly int8's storage (int8 data, one float scale per row); what differs is the
//             arithmetic: the matvec quantises each input row x per token (s_x = max|x| / 127,
//             kernels/int8_gemm.h quantize_rows_int8) and multiplies in integers (int32 sums):
//             y[r] = s_x * scales[r] * sum_c qx[c] q[r,c] + bias[r]   (SmoothQuant's W8A8)
//   sparse24  float  [rows*cols/2] the 2 kept values  -                     uint8 [rows*cols/8]  2 + 1/8
//             of every group of 4 columns, in column order; index: one nibble per group
//             (group g: low nibble of byte g/2 when g is even, high when odd), nibble =
//             p0 | p1 << 2 with p0 < p1 the kept positions in 0..3 (NVIDIA's 2:4 metadata)
//
// A zero scale (an all-zero row or group) stores q = 0. cols must be a multiple of 32 for
// int4 and of 8 for sparse24 (kernels::check_packable says why not).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kernels {

enum class WeightFormat { f32, bf16, int8, int4, sparse24, w8a8 };
inline constexpr int kNumWeightFormats = 6;
inline constexpr int kInt4Group = 32;

inline const char* format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::f32: return "fp32";
    case WeightFormat::bf16: return "bf16";
    case WeightFormat::int8: return "int8";
    case WeightFormat::int4: return "int4";
    case WeightFormat::sparse24: return "sparse24";
    case WeightFormat::w8a8: return "w8a8";
  }
  return "?";
}

// Bytes of each array of a packed (rows, cols) matrix, and all of them together.
inline size_t format_data_bytes(WeightFormat f, int rows, int cols) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  switch (f) {
    case WeightFormat::f32: return n * 4;
    case WeightFormat::bf16: return n * 2;
    case WeightFormat::int8: return n;
    case WeightFormat::int4: return n / 2;
    case WeightFormat::sparse24: return n / 2 * 4;
    case WeightFormat::w8a8: return n;
  }
  return 0;
}
inline size_t format_scale_count(WeightFormat f, int rows, int cols) {
  if (f == WeightFormat::int8 || f == WeightFormat::w8a8) return static_cast<size_t>(rows);
  if (f == WeightFormat::int4) return static_cast<size_t>(rows) * static_cast<size_t>(cols) / kInt4Group;
  return 0;
}
inline size_t format_index_bytes(WeightFormat f, int rows, int cols) {
  return f == WeightFormat::sparse24 ? static_cast<size_t>(rows) * static_cast<size_t>(cols) / 8 : 0;
}
inline size_t format_bytes(WeightFormat f, int rows, int cols) {
  return format_data_bytes(f, rows, cols) + format_scale_count(f, rows, cols) * sizeof(float) +
         format_index_bytes(f, rows, cols);
}

// A packed matrix seen by a kernel: pointers into host or device memory (the kernel's).
struct WeightsView {
  WeightFormat format = WeightFormat::f32;
  int rows = 0, cols = 0;
  const void* data = nullptr;     // format_data_bytes
  const float* scales = nullptr;  // format_scale_count floats (int8, int4, w8a8), else nullptr
  const uint8_t* index = nullptr; // format_index_bytes (sparse24), else nullptr
  size_t bytes() const { return format_bytes(format, rows, cols); }
};

}  // namespace kernels
