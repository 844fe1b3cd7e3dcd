// kernels/bench/decode.cpp: matvec over packed weights (kernels/decode.h) for the harness:
// the op a GPT spends its generation time in. Every version in every weight format, at sizes
// whose weights do not fit in the last-level cache, so the GB/s column reads as "what
// fraction of the machine's bandwidth does this version reach in this format".
//
// Sizes: "FORMAT:ROWSxCOLS" (one input row, a single token) or "FORMAT:NxROWSxCOLS" (N input
// rows: a batch of sequences, or drafts to verify), FORMAT one of fp32 bf16 int8 int4 sparse24
// w8a8 (fp32 when left out; w8a8 is int8's bytes with x quantised per row and integer dot
// products, its reference the same arithmetic in double on the quantised values), each number optionally with K or M: "int8:4Kx4K", "fp32:8x4096x4096".
// The format is part of the size, not the variant: one problem holds one packed matrix.
//
// Also attention_decode (sizes "BxPOSxCxNH[xNKV]"): one new token per sequence over its KV cache,
// NKV grouped key/value heads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/decode.h"
#include "kernels/int8_gemm.h"

namespace kernels::bench {

using harness::Check;
using harness::GuardedBuffer;

namespace {

constexpr const char* kMatvecHelp =
    "FORMAT:ROWSxCOLS or FORMAT:NxROWSxCOLS (N input rows), FORMAT fp32, bf16, int8, int4, sparse24 or w8a8, "
    "e.g. int8:4096x4096 or fp32:8x4Kx4K";

struct MatvecSize {
  WeightFormat format = WeightFormat::f32;
  int n = 1, rows = 0, cols = 0;
};

MatvecSize parse_matvec_size(const std::string& size) {
  MatvecSize s;
  std::string dims = size;
  const size_t colon = size.find(':');
  if (colon != std::string::npos) {
    try {
      s.format = parse_format(size.substr(0, colon));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("matvec size '" + size + "': " + e.what());
    }
    dims = size.substr(colon + 1);
  }
  const size_t count = static_cast<size_t>(std::count(dims.begin(), dims.end(), 'x')) + 1;
  const std::vector<size_t> d = parse_dims("matvec", dims, count == 3 ? 3 : 2, kMatvecHelp);
  s.n = count == 3 ? static_cast<int>(d[0]) : 1;
  s.rows = static_cast<int>(d[d.size() - 2]);
  s.cols = static_cast<int>(d[d.size() - 1]);
  const std::string why = check_packable(s.format, s.rows, s.cols);
  if (!why.empty()) throw std::invalid_argument("matvec size '" + size + "': " + why);
  return s;
}

std::vector<harness::Variant> matvec_variants() {
  std::vector<harness::Variant> out = harness::variants_of(matvec_versions());
  return out;
}

class MatvecProblem : public harness::Problem {
 public:
  MatvecProblem(const MatvecSize& s, uint64_t seed)
      : s_(s), nx_(static_cast<size_t>(s.n) * static_cast<size_t>(s.cols)),
        ny_(static_cast<size_t>(s.n) * static_cast<size_t>(s.rows)), x_(nx_), y_(ny_),
        bias_(static_cast<size_t>(s.rows)), want_(ny_) {
    {
      // W in [-1, 1): a trained layer's weights are smaller, but the format does not care.
      std::vector<float> w(static_cast<size_t>(s.rows) * static_cast<size_t>(s.cols));
      harness::fill_random(w, seed, -1.0f, 1.0f);
      packed_ = pack_weights(w.data(), s.rows, s.cols, s.format);
    }  // the fp32 original goes before anything is measured
    harness::fill_random(x_.span(), seed + 1);
    harness::fill_random(bias_, seed + 2);
    // Reference: the unpacked weights (what every version must agree with), one row at a
    // time, summed in double.
    std::vector<float> row(static_cast<size_t>(s.cols));
    if (s.format == WeightFormat::w8a8) {  // x quantised per row, integer sums (exact in double)
      std::vector<int8_t> qx(nx_);
      std::vector<float> sx(static_cast<size_t>(s.n));
      quantize_rows_int8(x_.data(), s.n, s.cols, qx.data(), sx.data());
      const auto* q = static_cast<const int8_t*>(packed_.view().data);
      for (int r = 0; r < s.rows; ++r)
        for (int b = 0; b < s.n; ++b) {
          double dot = 0.0;
          for (int c = 0; c < s.cols; ++c)
            dot += static_cast<double>(qx[static_cast<size_t>(b) * static_cast<size_t>(s.cols) + static_cast<size_t>(c)]) *
                   q[static_cast<size_t>(r) * static_cast<size_t>(s.cols) + static_cast<size_t>(c)];
          want_[static_cast<size_t>(b) * static_cast<size_t>(s.rows) + static_cast<size_t>(r)] =
              static_cast<double>(sx[static_cast<size_t>(b)]) * packed_.view().scales[r] * dot + bias_[static_cast<size_t>(r)];
        }
    }
    for (int r = 0; r < s.rows && s.format != WeightFormat::w8a8; ++r) {
      unpack_weights(row_view(r), row.data());
      for (int b = 0; b < s.n; ++b) {
        const float* x = x_.data() + static_cast<size_t>(b) * static_cast<size_t>(s.cols);
        double acc = bias_[static_cast<size_t>(r)];
        for (int c = 0; c < s.cols; ++c) acc += static_cast<double>(row[static_cast<size_t>(c)]) * x[c];
        want_[static_cast<size_t>(b) * static_cast<size_t>(s.rows) + static_cast<size_t>(r)] = acc;
      }
    }
  }

  std::string shape() const override {
    std::ostringstream os;
    os << format_name(s_.format) << " n=" << s_.n << " rows=" << short_count(static_cast<size_t>(s_.rows))
       << " cols=" << short_count(static_cast<size_t>(s_.cols));
    return os.str();
  }
  // Dense-equivalent: 2 FLOPs per weight per input row (sparse24's pruned zeros included).
  double flops() const override {
    return 2.0 * static_cast<double>(s_.n) * static_cast<double>(s_.rows) * static_cast<double>(s_.cols);
  }
  // The packed weights (data, scales, index) once, x, y and the bias. v1 ("naive") walks the
  // input rows outermost and reads the weights once per input row: n times.
  double bytes(size_t variant) const override {
    const double weights = static_cast<double>(packed_.bytes());
    const double vectors = 4.0 * static_cast<double>(nx_ + ny_ + static_cast<size_t>(s_.rows));
    const bool naive = std::string(matvec_versions()[variant].name) == "naive";
    return (naive ? static_cast<double>(s_.n) : 1.0) * weights + vectors;
  }
  bool flush_between_runs() const override { return !fits_in_cache(bytes(1)); }

  void run(size_t variant) override {
    matvec_versions()[variant].fn(y_.data(), x_.data(), packed_.view(), bias_.data(), s_.n);
  }

  Check validate(size_t variant) override {
    std::fill(y_.data(), y_.data() + ny_, GuardedBuffer::kNaN);
    run(variant);
    // Float sums of cols products of magnitude < 1 against a double sum: the error grows
    // with cols (a few ulps of partial sums up to ~sqrt(cols)).
    Check c = harness::compare("y", y_.span(), want_, {1e-6 * static_cast<double>(s_.cols), 1e-5});
    const std::string damage = y_.guard_damage("y");
    if (!damage.empty()) {
      ++c.mismatches;
      c.report += damage;
    }
    return c;
  }

  const MatvecSize& size() const { return s_; }

 private:
  // Row r of the packed matrix as a one-row view (cols % 8 == 0 for sparse24 and % 32 for
  // int4: every row starts on a whole byte of data and index).
  WeightsView row_view(int r) const {
    WeightsView v = packed_.view();
    const size_t first = static_cast<size_t>(r) * static_cast<size_t>(s_.cols);
    const auto* data = static_cast<const uint8_t*>(v.data);
    v.rows = 1;
    switch (s_.format) {
      case WeightFormat::f32: v.data = data + first * 4; break;
      case WeightFormat::bf16: v.data = data + first * 2; break;
      case WeightFormat::int8:
      case WeightFormat::w8a8:
        v.data = data + first;
        v.scales += r;
        break;
      case WeightFormat::int4:
        v.data = data + first / 2;
        v.scales += first / kInt4Group;
        break;
      case WeightFormat::sparse24:
        v.data = data + first / 2 * 4;
        v.index += first / 8;
        break;
    }
    return v;
  }

  MatvecSize s_;
  size_t nx_, ny_;
  PackedWeights packed_;
  GuardedBuffer x_, y_;
  std::vector<float> bias_;
  std::vector<double> want_;
};

// ---- attention_decode ------------------------------------------------------------------------
// Sizes "BxPOSxCxNH[xNKV]": B sequences with POS positions in the cache, one new position each
// (generation), C channels in NH query heads sharing NKV key/value heads (grouped-query
// attention; NKV = NH when left out): "1x1024x768x12" is GPT-2 small at context 1024,
// "1x1024x768x12x4" the same with 4 KV heads (a third of the cache).

constexpr const char* kAttentionHelp = "BxPOSxCxNH[xNKV] (B sequences, POS cached positions, C channels, NH heads, "
                                       "NKV key/value heads dividing NH, NH when left out), e.g. 1x1024x768x12 or "
                                       "1x1024x768x12x4";

std::vector<harness::Variant> attention_decode_variants() {
  std::vector<harness::Variant> out = harness::variants_of(attention_decode_versions());
  return out;
}

// B, POS, C, NH, NKV from a size (NKV = NH when the size has four numbers).
std::vector<size_t> parse_attention_size(const std::string& size) {
  const size_t count = std::count(size.begin(), size.end(), 'x') == 4 ? 5 : 4;
  std::vector<size_t> d = parse_dims("attention_decode", size, count, kAttentionHelp);
  if (d.size() == 4) d.push_back(d[3]);
  if (d[2] % d[3] != 0)
    throw std::invalid_argument("attention_decode size '" + size + "': C must be a multiple of NH");
  if (d[3] % d[4] != 0)
    throw std::invalid_argument("attention_decode size '" + size + "': NKV must divide NH");
  return d;
}

class AttentionDecodeProblem : public harness::Problem {
 public:
  AttentionDecodeProblem(int B, int pos, int C, int NH, int NKV, uint64_t seed)
      : B_(B), pos_(pos), C_(C), NH_(NH), NKV_(NKV), maxT_(pos + 1), uC_(static_cast<size_t>(C)),
        uKV_(static_cast<size_t>(C / NH) * static_cast<size_t>(NKV)), width_(uC_ + 2 * uKV_),
        cache_(static_cast<size_t>(B) * static_cast<size_t>(maxT_) * uKV_), qkv_(static_cast<size_t>(B) * width_),
        kcache_(cache_), vcache_(cache_), out_(static_cast<size_t>(B) * uC_), want_(out_.size()) {
    harness::fill_random(qkv_.span(), seed, -2.0f, 2.0f);
    harness::fill_random(kcache_.span(), seed + 1, -2.0f, 2.0f);
    harness::fill_random(vcache_.span(), seed + 2, -2.0f, 2.0f);
    // Every run writes the same new k, v at position pos: write them now, so the reference
    // sees the cache every run leaves.
    for (int b = 0; b < B; ++b) {
      const size_t at = (static_cast<size_t>(b) * static_cast<size_t>(maxT_) + static_cast<size_t>(pos)) * uKV_;
      std::copy_n(qkv_.data() + static_cast<size_t>(b) * width_ + uC_, uKV_, kcache_.data() + at);
      std::copy_n(qkv_.data() + static_cast<size_t>(b) * width_ + uC_ + uKV_, uKV_, vcache_.data() + at);
    }
    // Reference in double: softmax over t <= pos of q.k_t / sqrt(hs), then the sum of p_t v_t,
    // query head h reading KV head h / (NH / NKV).
    const int hs = C / NH, group = NH / NKV;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    std::vector<double> p(static_cast<size_t>(pos + 1));
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) {
        const size_t head = static_cast<size_t>(h) * static_cast<size_t>(hs);
        const size_t kvh = static_cast<size_t>(h / group) * static_cast<size_t>(hs);
        const float* q = qkv_.data() + static_cast<size_t>(b) * width_ + head;
        double mx = -1e300, sum = 0.0;
        for (int t = 0; t <= pos; ++t) {
          const float* k = kcache_.data() + (static_cast<size_t>(b) * static_cast<size_t>(maxT_) + static_cast<size_t>(t)) * uKV_ + kvh;
          double d = 0.0;
          for (int j = 0; j < hs; ++j) d += static_cast<double>(q[j]) * k[j];
          p[static_cast<size_t>(t)] = d * scale;
          mx = std::max(mx, d * scale);
        }
        for (double& v : p) sum += (v = std::exp(v - mx));
        for (int j = 0; j < hs; ++j) {
          double acc = 0.0;
          for (int t = 0; t <= pos; ++t)
            acc += p[static_cast<size_t>(t)] *
                   vcache_.data()[(static_cast<size_t>(b) * static_cast<size_t>(maxT_) + static_cast<size_t>(t)) * uKV_ + kvh + static_cast<size_t>(j)];
          want_[static_cast<size_t>(b) * uC_ + head + static_cast<size_t>(j)] = acc / sum;
        }
      }
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "B=" << B_ << " pos=" << short_count(static_cast<size_t>(pos_)) << " C=" << C_ << " NH=" << NH_;
    if (NKV_ != NH_) os << " NKV=" << NKV_;
    return os.str();
  }
  // q.k and p v: 2 multiply-adds per query channel per position.
  double flops() const override { return 4.0 * static_cast<double>(B_) * static_cast<double>(pos_ + 1) * static_cast<double>(C_); }
  // The K and V caches read (the part that grows with the context), qkv in, out and the new
  // k, v rows written. v1 and v2 read a KV head once per query head of its group (NH / NKV
  // times: from memory once the cache outgrows the caches); v3 reads it once.
  double bytes(size_t variant) const override {
    const double reads = attention_decode_versions()[variant].number >= 3 ? 1.0 : static_cast<double>(NH_ / NKV_);
    return 4.0 * (2.0 * static_cast<double>(cache_) * reads + static_cast<double>(qkv_.size()) +
                  static_cast<double>(out_.size()) + 2.0 * static_cast<double>(B_) * static_cast<double>(uKV_));
  }
  bool flush_between_runs() const override { return !fits_in_cache(bytes(0)); }

  void run(size_t variant) override {
    attention_decode_versions()[variant].fn(out_.data(), kcache_.data(), vcache_.data(), qkv_.data(), B_, 1, pos_, C_,
                                            NH_, NKV_, maxT_);
  }

  Check validate(size_t variant) override {
    std::fill(out_.data(), out_.data() + out_.size(), GuardedBuffer::kNaN);
    run(variant);
    Check c = harness::compare("out", out_.span(), want_, {1e-5, 1e-4});
    for (const GuardedBuffer* b : {&out_, &kcache_, &vcache_}) {
      const std::string damage = b->guard_damage(b == &out_ ? "out" : b == &kcache_ ? "kcache" : "vcache");
      if (!damage.empty()) {
        ++c.mismatches;
        c.report += damage;
      }
    }
    return c;
  }

 private:
  int B_, pos_, C_, NH_, NKV_, maxT_;
  size_t uC_, uKV_, width_, cache_;
  GuardedBuffer qkv_, kcache_, vcache_, out_;
  std::vector<double> want_;
};

}  // namespace

harness::OpBench attention_decode_bench() {
  harness::OpBench op;
  op.name = "attention_decode";
  op.summary = "one new position per sequence attends over its KV cache: bytes of the cache per token";
  op.size_help = kAttentionHelp;
  // GPT-2 small's attention (C = 768, 12 heads) at contexts 1024 (6 MB of cache) and 8192
  // (50 MB), and 8 sequences at 1024; at 8192 also with 4 KV heads and 1 (multi-query).
  op.default_sizes = {"1x1024x768x12", "1x8192x768x12", "8x1024x768x12", "1x8192x768x12x4", "1x8192x768x12x1"};
  op.quick_sizes = {"2x37x36x3", "1x5x64x2", "2x37x48x4x2", "1x5x64x4x1"};
  op.variants = attention_decode_variants();
  op.check_size = [](const std::string& size) { parse_attention_size(size); };
  op.make = [](const std::string& size, uint64_t seed) -> std::unique_ptr<harness::Problem> {
    const std::vector<size_t> d = parse_attention_size(size);
    return std::make_unique<AttentionDecodeProblem>(static_cast<int>(d[0]), static_cast<int>(d[1]),
                                                    static_cast<int>(d[2]), static_cast<int>(d[3]),
                                                    static_cast<int>(d[4]), seed);
  };
  return op;
}

harness::OpBench matvec_bench() {
  harness::OpBench op;
  op.name = "matvec";
  op.summary = "y = x W^T + b with W packed (fp32, bf16, int8, int4, 2:4) and n small: bytes of W per call";
  op.size_help = kMatvecHelp;
  // Every format at 4096 x 4096 (fp32 64 MB, int4 9 MB) and 8192 x 8192 (fp32 256 MB, int4
  // 36 MB), both above a usual last-level cache at fp32; and a batch of 8 at 4096 x 4096 in
  // fp32 and int4 (the same bytes of W, 8 times the work).
  for (const char* dims : {"4096x4096", "8192x8192"})
    for (const char* f : {"fp32", "bf16", "int8", "int4", "sparse24"}) op.default_sizes.push_back(std::string(f) + ":" + dims);
  op.default_sizes.push_back("fp32:8x4096x4096");
  op.default_sizes.push_back("int4:8x4096x4096");
  // Odd rows, a batch that is not a multiple of 4, every format.
  op.quick_sizes = {"fp32:3x37x96", "bf16:37x75", "int8:5x37x96", "int4:2x37x64", "sparse24:3x37x104"};
  op.variants = matvec_variants();
  op.check_size = [](const std::string& size) { parse_matvec_size(size); };
  op.make = [](const std::string& size, uint64_t seed) -> std::unique_ptr<harness::Problem> {
    return std::make_unique<MatvecProblem>(parse_matvec_size(size), seed);
  };
  // v1 decodes one weight at a time through a switch and reads W n times: past 64M weight
  // reads (8192 x 8192 at n = 1) a call takes long enough to dominate the whole bench.
  op.too_slow = [](size_t variant, const harness::Problem& p) {
    const MatvecSize& s = static_cast<const MatvecProblem&>(p).size();
    const double reads = static_cast<double>(s.n) * static_cast<double>(s.rows) * static_cast<double>(s.cols);
    return std::string(matvec_versions()[variant].name) == "naive" && reads >= 64.0 * 1024 * 1024;
  };
  return op;
}

}  // namespace kernels::bench
