// kernels/decode.cpp: packing, matvec and attention over a KV cache (kernels/decode.h).
#include "kernels/decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace kernels {

namespace {

// One weight of a packed matrix as a float: what every version must agree with.
float weight_at(const WeightsView& w, int r, int c) {
  const size_t i = static_cast<size_t>(r) * static_cast<size_t>(w.cols) + static_cast<size_t>(c);
  switch (w.format) {
    case WeightFormat::f32: return static_cast<const float*>(w.data)[i];
    case WeightFormat::bf16: return bf16_to_float(static_cast<const uint16_t*>(w.data)[i]);
    case WeightFormat::int8: return w.scales[r] * static_cast<float>(static_cast<const int8_t*>(w.data)[i]);
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
  throw std::invalid_argument("unknown weight format '" + name + "': use fp32, bf16, int8, int4 or sparse24");
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

PackedWeights pack_weights(const float* w, int rows, int cols, WeightFormat f) {
  const std::string why = check_packable(f, rows, cols);
  if (!why.empty()) throw std::invalid_argument("cannot pack a " + std::to_string(rows) + " x " + std::to_string(cols) +
                                                " matrix as " + format_name(f) + ": " + why);
  PackedWeights p;
  p.format = f;
  p.rows = rows;
  p.cols = cols;
  p.data.assign(format_data_bytes(f, rows, cols), 0);
  p.scales.assign(format_scale_count(f, rows, cols), 0.0f);
  p.index.assign(format_index_bytes(f, rows, cols), 0);
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
    case WeightFormat::int8: {
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

void matvec_v1(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  for (int b = 0; b < n; ++b) {
    const float* xb = x + static_cast<size_t>(b) * static_cast<size_t>(w.cols);
    for (int r = 0; r < w.rows; ++r) {
      float acc = bias != nullptr ? bias[r] : 0.0f;
      for (int c = 0; c < w.cols; ++c) acc += weight_at(w, r, c) * xb[c];
      y[static_cast<size_t>(b) * static_cast<size_t>(w.rows) + static_cast<size_t>(r)] = acc;
    }
  }
}

const std::vector<MatvecVersion>& matvec_versions() {
  static const std::vector<MatvecVersion> versions = {
      {1, "naive", "one weight at a time: dequantise, multiply, add (the reference)", matvec_v1},
  };
  return versions;
}

void matvec(float* y, const float* x, const WeightsView& w, const float* bias, int n) {
  matvec_versions().back().fn(y, x, w, bias, n);
}

void attention_decode_v1(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                         int NH, int maxT) {
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const size_t uC = static_cast<size_t>(C);
  // 1. append the new keys and values
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < n; ++i) {
      const float* row = qkv + (static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i)) * 3 * uC;
      const size_t at = (static_cast<size_t>(b) * static_cast<size_t>(maxT) + static_cast<size_t>(pos + i)) * uC;
      std::memcpy(kcache + at, row + uC, uC * sizeof(float));
      std::memcpy(vcache + at, row + 2 * uC, uC * sizeof(float));
    }
  // 2. each new query attends over positions 0 .. pos+i
  std::vector<double> score(static_cast<size_t>(pos + n));
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < n; ++i)
      for (int h = 0; h < NH; ++h) {
        const float* q = qkv + (static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i)) * 3 * uC +
                         static_cast<size_t>(h) * static_cast<size_t>(hs);
        const int len = pos + i + 1;
        double mx = -1e300;
        for (int t = 0; t < len; ++t) {
          const float* k = kcache + (static_cast<size_t>(b) * static_cast<size_t>(maxT) + static_cast<size_t>(t)) * uC +
                           static_cast<size_t>(h) * static_cast<size_t>(hs);
          double d = 0.0;
          for (int j = 0; j < hs; ++j) d += static_cast<double>(q[j]) * k[j];
          score[static_cast<size_t>(t)] = d * scale;
          mx = std::max(mx, score[static_cast<size_t>(t)]);
        }
        double sum = 0.0;
        for (int t = 0; t < len; ++t) sum += (score[static_cast<size_t>(t)] = std::exp(score[static_cast<size_t>(t)] - mx));
        float* o = out + (static_cast<size_t>(b) * static_cast<size_t>(n) + static_cast<size_t>(i)) * uC +
                   static_cast<size_t>(h) * static_cast<size_t>(hs);
        for (int j = 0; j < hs; ++j) {
          double acc = 0.0;
          for (int t = 0; t < len; ++t)
            acc += score[static_cast<size_t>(t)] *
                   vcache[(static_cast<size_t>(b) * static_cast<size_t>(maxT) + static_cast<size_t>(t)) * uC +
                          static_cast<size_t>(h) * static_cast<size_t>(hs) + static_cast<size_t>(j)];
          o[j] = static_cast<float>(acc / sum);
        }
      }
}

const std::vector<AttentionDecodeVersion>& attention_decode_versions() {
  static const std::vector<AttentionDecodeVersion> versions = {
      {1, "naive", "plain loops over the cache, scores in double (the reference)", attention_decode_v1},
  };
  return versions;
}

void attention_decode(float* out, float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int C,
                      int NH, int maxT) {
  attention_decode_versions().back().fn(out, kcache, vcache, qkv, B, n, pos, C, NH, maxT);
}

}  // namespace kernels
