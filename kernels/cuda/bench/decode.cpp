// kernels/cuda/bench/decode.cpp: the inference ops (kernels/cuda/decode.cu) for the GPU
// harness: matvec over packed weights and attention over a KV cache.
//
// matvec sizes: "<format> <rows>x<cols>x<n> [nobias] [shifted]", format one of fp32, bf16,
// int8, int4, sparse24, w8a8 (kernels::parse_format; w8a8 quantises x to int8 too and sums in
// int32, so its versions differ from the reference only in how y's float ops round). W is random in [-1, 1), packed on the host
// (kernels::pack_weights; sparse24 keeps the 2 largest of every 4), x and bias random.
// "shifted" puts W's data 4 bytes past 16-byte alignment (v2's scalar path, whatever cols).
// The GPU sizes are 8192 x 8192 per format at n = 1 (256 MiB of fp32 weights down to 36 MiB
// of int4: far past any L2), where the time is the weights' bytes over the bandwidth: the
// point is the % of measured DRAM bandwidth. The reference is kernels::matvec_v1 (host).
//
// attention_decode sizes: "B=<b> n=<n> pos=<pos> C=<c> NH=<nh> [NKV=<nkv>]" (NKV, the
// grouped-query KV heads, defaults to NH: multi-head attention); the caches have
// maxT = pos + n + 2 rows (two rows past the new ones that must come back untouched). The
// reference is kernels::attention_decode_v1 (host, scores in double).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"  // parse_dims
#include "kernels/cuda/bench/ops.h"
#include "kernels/decode.h"

namespace kernels::cuda::bench {

namespace {

using harness::Check;
using harness::Tolerance;

constexpr double kUnitRoundoff = 0x1p-24;  // float: relative error of one rounding
constexpr Tolerance kExact{0.0, 0.0};

std::vector<std::string> words(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> out;
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

// ---- matvec ------------------------------------------------------------------------------------

struct MatvecSize {
  WeightFormat format = WeightFormat::f32;
  int rows = 0, cols = 0, n = 0;
  bool bias = true, shifted = false;
};

MatvecSize parse_matvec(const std::string& size) {
  const std::string help = "<format> <rows>x<cols>x<n> [nobias] [shifted], e.g. 'int4 8192x8192x1'";
  const std::vector<std::string> w = words(size);
  if (w.size() < 2) throw std::invalid_argument("matvec size '" + size + "': write " + help);
  MatvecSize s;
  s.format = kernels::parse_format(w[0]);
  const std::vector<size_t> d = kernels::bench::parse_dims("matvec", w[1], 3, help);
  s.rows = static_cast<int>(d[0]);
  s.cols = static_cast<int>(d[1]);
  s.n = static_cast<int>(d[2]);
  for (size_t i = 2; i < w.size(); ++i) {
    if (w[i] == "nobias") {
      s.bias = false;
    } else if (w[i] == "shifted") {
      s.shifted = true;
    } else {
      throw std::invalid_argument("matvec size '" + size + "': unknown word '" + w[i] + "'; write " + help);
    }
  }
  const std::string why = kernels::check_packable(s.format, s.rows, s.cols);
  if (!why.empty()) throw std::invalid_argument("matvec size '" + size + "': " + why);
  return s;
}

class MatvecProblem final : public Problem {
 public:
  MatvecProblem(Device& dev, const MatvecSize& s, uint64_t seed) : dev_(dev), s_(s) {
    const size_t rows = static_cast<size_t>(s.rows), cols = static_cast<size_t>(s.cols);
    const size_t n = static_cast<size_t>(s.n);
    std::vector<float> w(rows * cols);
    harness::fill_random(w, seed);
    packed_ = kernels::pack_weights(w.data(), s.rows, s.cols, s.format);
    w.clear();
    w.shrink_to_fit();

    // Device copies: data (4 bytes in when shifted), scales, index.
    const size_t shift = s.shifted ? 4 : 0;
    data_ = Array<uint8_t>(dev, packed_.data.size() + shift, kernels::uninitialized);
    dev.from_host(data_.data() + shift, packed_.data.data(), packed_.data.size());
    if (!packed_.scales.empty()) scales_ = Array<float>(dev, packed_.scales.to_vector(), kernels::uninitialized);
    if (!packed_.index.empty()) index_ = Array<uint8_t>(dev, packed_.index.to_vector(), kernels::uninitialized);
    view_ = {s.format, s.rows, s.cols, data_.data() + shift, packed_.scales.empty() ? nullptr : scales_.data(),
             packed_.index.empty() ? nullptr : index_.data()};

    std::vector<float> x, bias;
    x_ = random_buffer(dev, n * cols, seed + 1, -1.0f, 1.0f, &x);
    if (s.bias) bias_ = random_buffer(dev, rows, seed + 2, -1.0f, 1.0f, &bias);
    y_ = Array<float>(dev, n * rows, kernels::uninitialized);

    // The reference: matvec_v1 on the host, float sums in column order.
    std::vector<float> want(n * rows);
    kernels::matvec_v1(want.data(), x.data(), packed_.view(), s.bias ? bias.data() : nullptr, s.n);
    want_.assign(want.begin(), want.end());

    // Tolerance: every output is a float sum of cols products, added in a different order
    // by each version (column order, per lane then a butterfly, the int4 groups' scales
    // applied to partial sums). Rounding errors of random data grow as sqrt(cols) u times
    // the sum of |terms|; atol is 2 sqrt(cols) u max_r,b sum_c |W[r,c] x[b,c]| (+ |bias|):
    // 0.022 at 8192 columns, where the emulator's v2 differs from the reference by 3e-4 and
    // an int4 nibble off by one (a group's scale times |x|) moves an output by ~0.07.
    std::vector<float> deq(rows * cols);
    kernels::unpack_weights(packed_.view(), deq.data());
    double worst = 0.0;
    for (size_t b = 0; b < n; ++b) {
      for (size_t r = 0; r < rows; ++r) {
        double sum_abs = s.bias ? std::fabs(static_cast<double>(bias[r])) : 0.0;
        for (size_t c = 0; c < cols; ++c) sum_abs += std::fabs(static_cast<double>(deq[r * cols + c]) * x[b * cols + c]);
        worst = std::max(worst, sum_abs);
      }
    }
    tol_ = {1e-6 + 2.0 * std::sqrt(static_cast<double>(cols)) * kUnitRoundoff * worst, 0.0};
  }

  std::string shape() const override {
    std::ostringstream os;
    os << format_name(s_.format) << " rows=" << s_.rows << " cols=" << s_.cols << " n=" << s_.n
       << (s_.bias ? "" : " no bias") << (s_.shifted ? " (data 4 bytes past 16-byte alignment)" : "");
    return os.str();
  }
  double flops() const override { return 2.0 * s_.n * static_cast<double>(s_.rows) * s_.cols; }
  // The packed weights (data, scales, index) once, x, y and the bias: what a perfect cache
  // leaves. (v1's n threads per row and v2's passes of 8 input rows re-read W when n > 1 or
  // n > 8: those extra trips are the versions' own; at the GPU sizes n = 1.)
  double bytes(size_t) const override {
    return static_cast<double>(packed_.bytes()) + 4.0 * s_.n * (static_cast<double>(s_.cols) + s_.rows) +
           (s_.bias ? 4.0 * s_.rows : 0.0);
  }
  void run(size_t v) override {
    dev_.kernels().matvec.at(v).fn(y_.data(), x_.data(), view_, s_.bias ? bias_.data() : nullptr, s_.n);
  }
  Check validate(size_t v) override {
    y_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    return compare_device("y", y_, want_, tol_);
  }

 private:
  Device& dev_;
  MatvecSize s_;
  kernels::PackedWeights packed_;
  Array<uint8_t> data_, index_;
  Array<float> scales_, x_, bias_, y_;
  WeightsView view_;
  std::vector<double> want_;
  Tolerance tol_;
};

// ---- attention over a KV cache ---------------------------------------------------------------

struct DecodeSize {
  int B = 0, n = 0, pos = 0, C = 0, NH = 0, NKV = 0;
  int maxT() const { return pos + n + 2; }
  int KV() const { return C / NH * NKV; }  // floats per cache row
};

DecodeSize parse_decode(const std::string& size) {
  const std::string help = "'B=<b> n=<n> pos=<pos> C=<c> NH=<nh> [NKV=<nkv>]', e.g. 'B=1 n=1 pos=1023 C=384 NH=6'";
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("attention_decode size '" + size + "': " + why + "; write " + help);
  };
  DecodeSize d;
  int* fields[] = {&d.B, &d.n, &d.pos, &d.C, &d.NH, &d.NKV};
  const char* names[] = {"B", "n", "pos", "C", "NH", "NKV"};
  bool seen[6] = {false, false, false, false, false, false};
  for (const std::string& w : words(size)) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos) throw bad("'" + w + "' is not name=value");
    const std::string key = w.substr(0, eq), value = w.substr(eq + 1);
    int k = 0;
    while (k < 6 && key != names[k]) ++k;
    if (k == 6) throw bad("unknown name '" + key + "'");
    if (value.empty() || value.size() > 9 || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw bad("'" + w + "' needs a whole number");
    *fields[k] = std::stoi(value);
    seen[k] = true;
  }
  for (int k = 0; k < 5; ++k)
    if (!seen[k]) throw bad(std::string("no ") + names[k]);
  if (d.B < 1 || d.n < 1 || d.C < 1 || d.NH < 1) throw bad("B, n, C and NH must be at least 1");
  if (d.C % d.NH != 0) throw bad("C is not divisible by NH");
  if (!seen[5]) d.NKV = d.NH;
  if (d.NKV < 1 || d.NH % d.NKV != 0) throw bad("NKV must be at least 1 and divide NH");
  if (static_cast<double>(d.B) * d.maxT() * d.KV() > double{1 << 30}) throw bad("the caches would exceed 2^30 floats");
  return d;
}

// A cache row never written by anyone: rows at and past pos start as this, and rows past
// pos + n must still hold it afterwards.
constexpr float kUnwritten = -12345.75f;

class AttentionDecodeProblem final : public Problem {
 public:
  AttentionDecodeProblem(Device& dev, const DecodeSize& d, uint64_t seed) : dev_(dev), d_(d) {
    const size_t uC = static_cast<size_t>(d.C), B = static_cast<size_t>(d.B), n = static_cast<size_t>(d.n);
    const size_t uKV = static_cast<size_t>(d.KV());
    const size_t cache = B * static_cast<size_t>(d.maxT()) * uKV;
    // [-3, 3]: peaked softmax rows (as bench/attention.cpp), so the max subtraction and the
    // online rescaling matter.
    std::vector<float> qkv;
    qkv_ = random_buffer(dev, B * n * (uC + 2 * uKV), seed, -3.0f, 3.0f, &qkv);
    k0_.assign(cache, kUnwritten);
    v0_.assign(cache, kUnwritten);
    harness::Random rng(seed + 1);
    for (size_t b = 0; b < B; ++b) {
      for (size_t e = 0; e < static_cast<size_t>(d.pos) * uKV; ++e) {
        k0_[b * static_cast<size_t>(d.maxT()) * uKV + e] = rng.uniform(-3.0f, 3.0f);
        v0_[b * static_cast<size_t>(d.maxT()) * uKV + e] = rng.uniform(-3.0f, 3.0f);
      }
    }
    kcache_ = Array<float>(dev, k0_, kernels::uninitialized);
    vcache_ = Array<float>(dev, v0_, kernels::uninitialized);
    out_ = Array<float>(dev, B * n * uC, kernels::uninitialized);

    std::vector<float> out(B * n * uC), kc = k0_, vc = v0_;
    kernels::attention_decode_v1(out.data(), kc.data(), vc.data(), qkv.data(), d.B, d.n, d.pos, d.C, d.NH, d.NKV,
                                 d.maxT());
    want_out_.assign(out.begin(), out.end());
    want_k_.assign(kc.begin(), kc.end());
    want_v_.assign(vc.begin(), vc.end());
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "B=" << d_.B << " n=" << d_.n << " pos=" << d_.pos << " C=" << d_.C << " NH=" << d_.NH;
    if (d_.NKV != d_.NH) os << " NKV=" << d_.NKV;
    os << " (hs=" << d_.C / d_.NH << ")";
    return os.str();
  }
  // q.k and p.v: 2 hs multiply-adds per (query, head, position), query i seeing pos + i + 1
  // positions.
  double flops() const override {
    double positions = 0.0;
    for (int i = 0; i < d_.n; ++i) positions += d_.pos + i + 1;
    return 4.0 * d_.B * static_cast<double>(d_.C) * positions;
  }
  // The cache's pos earlier k and v rows read once (the n queries of one sequence, and the
  // query heads of a group, share them through the cache), qkv read, out written, the n new
  // k, v rows written. KV = C when NKV = NH.
  double bytes(size_t) const override {
    const double C = d_.C, KV = d_.KV(), B = d_.B, n = d_.n;
    return 4.0 * (2.0 * B * d_.pos * KV + B * n * (C + 2.0 * KV) + B * n * C + 2.0 * B * n * KV);
  }
  void run(size_t v) override {
    dev_.kernels().attention_decode.at(v).fn(out_.data(), kcache_.data(), vcache_.data(), qkv_.data(), d_.B, d_.n,
                                              d_.pos, d_.C, d_.NH, d_.NKV, d_.maxT());
  }
  Check validate(size_t v) override {
    // Fresh caches every time: a version that forgot to append must not find a previous
    // version's rows there.
    kcache_.upload(k0_);
    vcache_.upload(v0_);
    out_.fill_bytes(0xFF);
    run(v);
    dev_.synchronize();
    // out: a weighted mean of v's in [-3, 3]; float scores and sums against the double
    // reference (bench/attention.cpp's tolerance). The caches: copies, exact.
    Check c = compare_device("out", out_, want_out_, Tolerance{5e-5, 1e-4});
    c = harness::merge(c, compare_device("kcache", kcache_, want_k_, kExact));
    return harness::merge(c, compare_device("vcache", vcache_, want_v_, kExact));
  }

 private:
  Device& dev_;
  DecodeSize d_;
  Array<float> qkv_, kcache_, vcache_, out_;
  std::vector<float> k0_, v0_;
  std::vector<double> want_out_, want_k_, want_v_;
};

}  // namespace

Op matvec_op() {
  Op op;
  op.name = "matvec";
  op.summary = "y = x W^T + b with W packed (fp32, bf16, int8, int4, 2:4) and dequantised on the fly, or w8a8 (x "
               "quantised to int8 too, int32 dot products): naive vs warp per row with 16-byte coalesced loads";
  op.sizes = {"fp32 8192x8192x1", "bf16 8192x8192x1", "int8 8192x8192x1", "int4 8192x8192x1", "sparse24 8192x8192x1",
              "w8a8 8192x8192x1", "fp32 8192x8192x8"};
  // Every format at 37 rows (not a multiple of the 8 rows of a v2 block), 96 columns, n = 1
  // and 3; 1056 columns (two of v2's 1024-column tiles); n = 17 (three passes of 8); columns
  // whose rows are not 16-byte multiples (fp32 90, bf16 100, int8 104: v2's scalar path);
  // data 4 bytes past alignment.
  for (const char* f : {"fp32", "bf16", "int8", "int4", "sparse24", "w8a8"}) {
    const std::string s(f);
    op.test_sizes.push_back(s + " 37x96x1");
    op.test_sizes.push_back(s + " 37x96x3 nobias");
    op.test_sizes.push_back(s + " 21x1056x2");
    op.test_sizes.push_back(s + " 19x64x17");
    op.test_sizes.push_back(s + " 13x96x2 shifted");
  }
  for (const char* s : {"fp32 37x90x2", "bf16 37x100x2", "int8 37x104x2", "w8a8 37x104x2"}) op.test_sizes.push_back(s);
  op.variants = [](Device& dev) { return variants_of(dev.kernels().matvec); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<MatvecProblem>(dev, parse_matvec(size), seed);
  };
  return op;
}

Op attention_decode_op() {
  Op op;
  op.name = "attention_decode";
  op.summary = "n new queries attend over a KV cache (after appending their k, v): thread per head vs warp per "
               "head with an online softmax across lanes";
  // nanoGPT-sized (C = 384, 6 heads) at the end of a 1024 context; k = 4 drafts verified at
  // once; GPT-2 small's C and heads at 16 sequences x 4096 positions (400 MB of cache).
  // The same at 4 and 1 KV heads (grouped-query and multi-query: a third and a twelfth of the cache).
  op.sizes = {"B=1 n=1 pos=1023 C=384 NH=6", "B=1 n=4 pos=1020 C=384 NH=6", "B=16 n=1 pos=4095 C=768 NH=12",
              "B=16 n=1 pos=4095 C=768 NH=12 NKV=4", "B=16 n=1 pos=4095 C=768 NH=12 NKV=1"};
  // hs = 16, 32, 12 (not a multiple of 4: v2's scalar dot), 64 with 300 positions (two of
  // v2's 256-position chunks), pos = 0 (a prompt: only new positions).
  // Grouped-query heads: NKV = NH / 2 and 1 (MQA), n = 1 and > 1, pos = 0 and > 0, hs = 12
  // (scalar) and 16 (float4), 300 positions with NKV = 1 (chunks and a shared KV head).
  op.test_sizes = {"B=2 n=1 pos=37 C=64 NH=4", "B=1 n=3 pos=70 C=96 NH=3", "B=3 n=2 pos=5 C=24 NH=2",
                   "B=1 n=1 pos=300 C=128 NH=2", "B=1 n=5 pos=0 C=48 NH=3",
                   "B=2 n=1 pos=37 C=64 NH=4 NKV=2", "B=2 n=3 pos=0 C=64 NH=4 NKV=2", "B=2 n=2 pos=9 C=48 NH=4 NKV=1",
                   "B=1 n=1 pos=0 C=48 NH=4 NKV=1", "B=1 n=3 pos=300 C=128 NH=8 NKV=1", "B=3 n=1 pos=20 C=72 NH=6 NKV=3"};
  op.variants = [](Device& dev) { return variants_of(dev.kernels().attention_decode); };
  op.make = [](Device& dev, const std::string& size, uint64_t seed) -> std::unique_ptr<Problem> {
    return std::make_unique<AttentionDecodeProblem>(dev, parse_decode(size), seed);
  };
  return op;
}

}  // namespace kernels::cuda::bench
