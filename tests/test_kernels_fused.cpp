// kernels/elementwise, bias_gelu, softmax, layernorm: the fused ops. Every version of every
// op against a float64 reference, on inputs that cannot pass by accident: random (never
// zero), sizes that are not multiples of the vector width (1, 7, 33, 1003, ...), rows that
// cross the chunk edges of the SIMD versions, misaligned starts and sentinels after every
// output (harness::GuardedBuffer), outputs that start as NaN. Plus the accuracy of the
// polynomial cos and exp over wide ranges, the numerics that motivate each design (softmax
// rows at 1000, layernorm rows with a large mean), and each op's bench at its quick sizes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/bias_gelu.h"
#include "kernels/elementwise.h"
#include "kernels/harness.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/simd.h"
#include "kernels/softmax.h"
#include "tests/bench_test_util.h"
#include "tests/test_util.h"

namespace h = kernels::harness;
namespace simd = kernels::simd;

namespace {

void require_ok(const h::Check& c, const std::string& what) {
  INFO(what << "\n" << c.report);
  REQUIRE(c.ok());
}

void require_guards(const h::GuardedBuffer& b, const std::string& name) {
  const std::string damage = b.guard_damage(name);
  INFO(damage);
  REQUIRE(damage.empty());
}

// ---- the polynomial math ------------------------------------------------------------------

// The largest |poly_cos(x) - cos(x)| over n points evenly spread on [-range, range], plus the
// points where the reduction is most delicate (multiples of pi/2 and of 2pi).
template <class V>
double cos_max_error(double range, int n) {
  constexpr int W = V::lanes;
  std::vector<float> x;
  for (int i = 0; i < n; ++i) x.push_back(static_cast<float>(-range + 2.0 * range * i / (n - 1)));
  const double two_pi = 2 * std::numbers::pi;
  const double step = std::max(1.0, std::floor(range / 200 / two_pi));  // in periods
  for (int k = -200; k <= 200; ++k) {
    x.push_back(static_cast<float>(k * std::numbers::pi / 2));
    x.push_back(static_cast<float>(k * step * two_pi));
  }
  while (x.size() % W != 0) x.push_back(0.5f);
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); i += W) {
    float y[W];
    V::store(y, kernels::poly_cos<V>(V::load(x.data() + i)));
    for (int l = 0; l < W; ++l) {
      const double err = std::fabs(y[l] - std::cos(static_cast<double>(x[i + l])));
      worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
  }
  return worst;
}

// The largest |poly_exp(x) - exp(x)| / exp(x) over [lo, hi].
template <class V>
double exp_max_rel_error(double lo, double hi, int n) {
  constexpr int W = V::lanes;
  double worst = 0.0;
  for (int i = 0; i < n; i += W) {
    float x[W], y[W];
    for (int l = 0; l < W; ++l) x[l] = static_cast<float>(lo + (hi - lo) * (i + l) / (n - 1));
    V::store(y, kernels::poly_exp<V>(V::load(x)));
    for (int l = 0; l < W; ++l) {
      const double want = std::exp(static_cast<double>(x[l]));
      const double err = std::fabs(y[l] - want) / want;
      worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
  }
  return worst;
}

double gelu_reference(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// The largest |gelu_tanh(x) - gelu(x)| / (1e-6 + 2e-7 |gelu(x)|) over [-20, 20]: <= 1 passes.
template <class V>
double gelu_worst_ratio(int n) {
  constexpr int W = V::lanes;
  double worst = 0.0;
  for (int i = 0; i < n; i += W) {
    float x[W], y[W];
    for (int l = 0; l < W; ++l) x[l] = static_cast<float>(-20.0 + 40.0 * (i + l) / (n - 1));
    V::store(y, kernels::gelu_tanh<V>(V::load(x)));
    for (int l = 0; l < W; ++l) {
      const double want = gelu_reference(x[l]);
      const double ratio = std::fabs(y[l] - want) / (1e-6 + 2e-7 * std::fabs(want));
      worst = std::isnan(ratio) ? INFINITY : std::max(worst, ratio);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("poly_cos is within 1e-6 of cos for |x| <= 1e5, in every SIMD type", "[kernels][fused]") {
  // The bound kernels/elementwise.h states (measured ~1.7e-7); a reduction with k * 2pi
  // rounded would be off by ~5e-4 at 1e4, a wrong polynomial by far more.
  for (double range : {4.0, 1e4, 1e5}) {
    INFO("range +-" << range);
    CHECK(cos_max_error<simd::Native>(range, 2000000) <= 1e-6);
    CHECK(cos_max_error<simd::Portable<8>>(range, 200000) <= 1e-6);
    CHECK(cos_max_error<simd::Portable<1>>(range, 20000) <= 1e-6);
  }
  REQUIRE(kernels::poly_cosf(0.0f) == Approx(1.0).margin(1e-7));
  REQUIRE(kernels::poly_cosf(static_cast<float>(std::numbers::pi)) == Approx(-1.0).margin(1e-6));
}

TEST_CASE("poly_exp is within 1e-6 relative on [-87, 88], 0 below, saturates above", "[kernels][fused]") {
  CHECK(exp_max_rel_error<simd::Native>(-87.0, 88.0, 2000000) <= 1e-6);
  CHECK(exp_max_rel_error<simd::Portable<8>>(-87.0, 88.0, 200000) <= 1e-6);
  CHECK(exp_max_rel_error<simd::Portable<1>>(-10.0, 10.0, 20000) <= 1e-6);
  REQUIRE(kernels::poly_expf(0.0f) == 1.0f);
  // exp(-inf) = 0 (a masked logit), and anything whose true value is below 1.2e-38 too.
  REQUIRE(kernels::poly_expf(-INFINITY) == 0.0f);
  REQUIRE(kernels::poly_expf(-100.0f) == 0.0f);
  // Above 88: exp(88) = 1.65e38, finite, instead of inf.
  REQUIRE(std::isfinite(kernels::poly_expf(100.0f)));
  REQUIRE(kernels::poly_expf(100.0f) == Approx(std::exp(88.0)).epsilon(1e-6));
}

TEST_CASE("gelu_tanh matches tanh-GELU in double within 1e-6 + 2e-7 |gelu| on [-20, 20]", "[kernels][fused]") {
  CHECK(gelu_worst_ratio<simd::Native>(400000) <= 1.0);
  CHECK(gelu_worst_ratio<simd::Portable<8>>(40000) <= 1.0);
  CHECK(gelu_worst_ratio<simd::Portable<1>>(4000) <= 1.0);
  // Far tails: no inf, no NaN. For x << 0, exp(-2u) saturates at 1.65e38, so the result
  // is x / 1.65e38 instead of ~0: -6e-19 at x = -1e20.
  REQUIRE(kernels::gelu_tanhf(-1e20f) == Approx(0.0).margin(1e-18));
  REQUIRE(kernels::gelu_tanhf(-30.0f) == Approx(0.0).margin(1e-30));
  REQUIRE(kernels::gelu_tanhf(1e20f) == 1e20f);
}

// ---- cos2 ---------------------------------------------------------------------------------

TEST_CASE("every cos2 version matches cos(cos(x)) in double", "[kernels][fused]") {
  // 70001 > 64K: v3's threaded path; 4096 + 5: a whole v3 block and a ragged one.
  for (const size_t n : {size_t{1}, size_t{7}, size_t{33}, size_t{1003}, size_t{4096 + 5}, size_t{70001}}) {
    for (const size_t misalign : {size_t{1}, size_t{3}}) {
      h::GuardedBuffer x(n, misalign, 0.0f);
      h::fill_random(x.span(), 100 + n, -100.0f, 100.0f);
      std::vector<double> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = std::cos(std::cos(static_cast<double>(x.data()[i])));
      for (const kernels::Cos2Version& v : kernels::cos2_versions()) {
        h::GuardedBuffer y(n, misalign + 2), tmp(n, misalign + 1);  // NaN-filled
        v.fn(y.data(), tmp.data(), x.data(), n);
        std::ostringstream what;
        what << "cos2 v" << v.number << " n=" << n << " misalign=" << misalign;
        require_ok(h::compare("y", y.span(), want, {2e-6, 0.0}), what.str());
        require_guards(y, "y");
        require_guards(tmp, "tmp");
        require_guards(x, "x");
      }
    }
  }
}

TEST_CASE("cos2 v1, v2 and v3 agree bit for bit: only the memory traffic differs", "[kernels][fused]") {
  const size_t n = 70001;  // threaded in v3, ragged at the end
  h::GuardedBuffer x(n, 1, 0.0f);
  h::fill_random(x.span(), 3, -50.0f, 50.0f);
  std::vector<float> tmp(n), y1(n), y2(n), y3(n);
  kernels::cos2_forward_v1(y1.data(), tmp.data(), x.data(), n);
  kernels::cos2_forward_v2(y2.data(), nullptr, x.data(), n);
  kernels::cos2_forward_v3(y3.data(), nullptr, x.data(), n);
  REQUIRE(y1 == y2);
  REQUIRE(y2 == y3);
}

TEST_CASE("the fused cos2 versions need no scratch", "[kernels][fused]") {
  const size_t n = 1003;
  h::GuardedBuffer x(n, 1, 0.0f);
  h::fill_random(x.span(), 5, -3.0f, 3.0f);
  for (const kernels::Cos2Version& v : kernels::cos2_versions()) {
    if (v.number == 1) continue;  // v1 writes the intermediate to tmp: that is its cost
    h::GuardedBuffer y(n);
    v.fn(y.data(), nullptr, x.data(), n);
    REQUIRE(y.data()[n - 1] == Approx(std::cos(std::cos(x.data()[n - 1]))).margin(2e-6));
  }
}

TEST_CASE("these checks can fail: a missed last element or a write past the end is caught", "[kernels][fused]") {
  const size_t n = 37;
  h::GuardedBuffer x(n + 1, 1, 0.0f);  // one more input, so the overrun below reads valid data
  h::fill_random(x.span(), 9);
  std::vector<double> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = std::cos(std::cos(static_cast<double>(x.data()[i])));
  h::GuardedBuffer short_y(n);
  kernels::cos2_forward_v2(short_y.data(), nullptr, x.data(), n - 1);  // leaves y[36] NaN
  REQUIRE_FALSE(h::compare("y", short_y.span(), want, {2e-6, 0.0}).ok());
  h::GuardedBuffer long_y(n);
  kernels::cos2_forward_v2(long_y.data(), nullptr, x.data(), n + 1);  // one past the end
  REQUIRE_FALSE(long_y.guard_damage("y").empty());
}

// ---- bias_gelu ----------------------------------------------------------------------------

namespace {

std::vector<double> bias_gelu_reference(const float* inp, const float* bias, int B, int OC) {
  std::vector<double> out(static_cast<size_t>(B) * OC);
  for (int b = 0; b < B; ++b) {
    for (int o = 0; o < OC; ++o) {
      const size_t i = static_cast<size_t>(b) * OC + o;
      out[i] = gelu_reference(static_cast<double>(inp[i]) + bias[o]);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("every bias_gelu version matches gelu(inp + bias) in double", "[kernels][fused]") {
  const int shapes[][2] = {{1, 1}, {7, 33}, {5, 1003}, {3, 3077}};
  for (const auto& s : shapes) {
    const int B = s[0], OC = s[1];
    const size_t n = static_cast<size_t>(B) * OC;
    h::GuardedBuffer inp(n, 1, 0.0f), bias(static_cast<size_t>(OC), 3, 0.0f);
    h::fill_random(inp.span(), 11, -4.0f, 4.0f);
    h::fill_random(bias.span(), 12, -1.0f, 1.0f);
    const std::vector<double> want = bias_gelu_reference(inp.data(), bias.data(), B, OC);
    for (const kernels::BiasGeluVersion& v : kernels::bias_gelu_versions()) {
      std::ostringstream what;
      what << "bias_gelu v" << v.number << " B=" << B << " OC=" << OC;
      h::GuardedBuffer out(n, 2);
      v.fn(out.data(), inp.data(), bias.data(), B, OC);
      require_ok(h::compare("out", out.span(), want, {1e-6, 1e-6}), what.str());
      require_guards(out, "out");
      // In place (out = inp), as the header allows.
      h::GuardedBuffer inout(n, 1, 0.0f);
      std::copy(inp.data(), inp.data() + n, inout.data());
      v.fn(inout.data(), inout.data(), bias.data(), B, OC);
      require_ok(h::compare("out (in place)", inout.span(), want, {1e-6, 1e-6}), what.str());
      require_guards(inout, "out (in place)");
    }
  }
}

// ---- softmax ------------------------------------------------------------------------------

namespace {

std::vector<double> softmax_reference(const float* x, int rows, int cols) {
  std::vector<double> out(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * cols;
    const double m = *std::max_element(row, row + cols);
    double sum = 0.0;
    for (int j = 0; j < cols; ++j) sum += std::exp(row[j] - m);
    for (int j = 0; j < cols; ++j) out[static_cast<size_t>(r) * cols + j] = std::exp(row[j] - m) / sum;
  }
  return out;
}

// Every version on logits x (rows, cols): matches the reference, rows sum to 1, no overrun.
void check_softmax(const h::GuardedBuffer& x, int rows, int cols, const std::string& label) {
  const std::vector<double> want = softmax_reference(x.data(), rows, cols);
  for (const kernels::SoftmaxVersion& v : kernels::softmax_versions()) {
    std::ostringstream what;
    what << "softmax v" << v.number << " " << label << " rows=" << rows << " cols=" << cols;
    h::GuardedBuffer probs(x.size(), 2);
    v.fn(probs.data(), x.data(), rows, cols);
    require_ok(h::compare("probs", probs.span(), want, {1e-12, 1e-5}), what.str());
    require_guards(probs, "probs");
    for (int r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (int j = 0; j < cols; ++j) sum += probs.data()[static_cast<size_t>(r) * cols + j];
      INFO(what.str() << " row " << r);
      REQUIRE(sum == Approx(1.0).epsilon(1e-5));
    }
  }
}

}  // namespace

TEST_CASE("every softmax version matches the double reference", "[kernels][fused]") {
  // 2053 and 5003 cross v3's and v4's 1024-float chunks, with a ragged last one.
  const int shapes[][2] = {{1, 1}, {3, 7}, {5, 33}, {2, 1003}, {3, 2053}, {1, 5003}};
  for (const auto& s : shapes) {
    const size_t n = static_cast<size_t>(s[0]) * s[1];
    h::GuardedBuffer x(n, 1, 0.0f);
    h::fill_random(x.span(), 21 + n, -8.0f, 8.0f);
    check_softmax(x, s[0], s[1], "random");
  }
}

TEST_CASE("softmax of large logits does not overflow: the max is subtracted", "[kernels][fused]") {
  // exp(1000) is inf in float (and in double); without the max, inf / inf = NaN.
  const int rows = 3, cols = 2053;
  h::GuardedBuffer x(static_cast<size_t>(rows) * cols, 1, 0.0f);
  h::fill_random(x.span(), 31, 990.0f, 1010.0f);
  x.data()[5] = 1e4f;  // row 0: one logit dominates, the rest are ~e^-9000 = 0
  check_softmax(x, rows, cols, "logits ~1000");
  // The max arriving last (v2, v4 rescale everything seen so far) and first.
  h::GuardedBuffer ramp(static_cast<size_t>(rows) * cols, 3, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < cols; ++j) {
      const float t = static_cast<float>(j) / cols;
      ramp.data()[static_cast<size_t>(r) * cols + j] = r == 0 ? 1000.0f * t : 1000.0f * (1.0f - t) - 20.0f * static_cast<float>(r);
    }
  }
  check_softmax(ramp, rows, cols, "ramps to and from 1000");
}

TEST_CASE("softmax_forward() is the version softmax.h names as the default (v3)", "[kernels][fused]") {
  // The header says "softmax_forward() below is v3": same inputs, the same bits.
  const int rows = 3, cols = 2053;
  h::GuardedBuffer x(static_cast<size_t>(rows) * cols, 1, 0.0f);
  h::fill_random(x.span(), 61, -8.0f, 8.0f);
  h::GuardedBuffer got(x.size(), 2), want(x.size(), 3);
  kernels::softmax_forward(got.data(), x.data(), rows, cols);
  kernels::softmax_version("three-pass-simd").fn(want.data(), x.data(), rows, cols);
  REQUIRE(std::equal(got.data(), got.data() + x.size(), want.data()));
  require_guards(got, "probs");
}

// ---- layernorm ----------------------------------------------------------------------------

namespace {

// Every version from `first` on inp (rows, C): out, mean and rstd match; no overrun.
void check_layernorm(const h::GuardedBuffer& x, int rows, int C, uint64_t seed, const std::string& label,
                     int first = 1) {
  h::GuardedBuffer w(static_cast<size_t>(C), 2, 0.0f), b(static_cast<size_t>(C), 3, 0.0f);
  h::fill_random(w.span(), seed, 0.5f, 1.5f);
  h::fill_random(b.span(), seed + 1, -0.5f, 0.5f);
  const kernels::LayernormReference ref = kernels::layernorm_reference(x.data(), w.data(), b.data(), rows, C);
  // Any float code rounds the mean before x - mean: up to ulp(mean)/2 * rstd * |w| (|w| <=
  // 1.5) of error, ~2e-4 for 1000 + U(-1, 1). 1e-5 for everything else.
  const double atol = 1e-5 + 1.2e-7 * ref.cond * 1.5;
  for (const kernels::LayernormVersion& v : kernels::layernorm_versions()) {
    if (v.number < first) continue;
    std::ostringstream what;
    what << "layernorm v" << v.number << " " << label << " rows=" << rows << " C=" << C;
    h::GuardedBuffer out(x.size(), 1), mean(static_cast<size_t>(rows), 2), rstd(static_cast<size_t>(rows), 3);
    v.fn(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C);
    require_ok(h::compare("out", out.span(), ref.out, {atol, 1e-5}), what.str());
    require_ok(h::compare("mean", mean.span(), ref.mean, {1e-7, 1e-6}), what.str());
    require_ok(h::compare("rstd", rstd.span(), ref.rstd, {0.0, 1e-5}), what.str());
    require_guards(out, "out");
    require_guards(mean, "mean");
    require_guards(rstd, "rstd");
  }
}

}  // namespace

TEST_CASE("every layernorm version matches the double reference", "[kernels][fused]") {
  // C = 1: variance 0, out = bias. 2053 and 5003 cross v3's chunks, raggedly.
  const int shapes[][2] = {{1, 1}, {3, 7}, {4, 33}, {2, 1003}, {3, 2053}, {1, 5003}};
  for (const auto& s : shapes) {
    const size_t n = static_cast<size_t>(s[0]) * s[1];
    h::GuardedBuffer x(n, 1, 0.0f);
    h::fill_random(x.span(), 41 + n, -2.0f, 2.0f);
    check_layernorm(x, s[0], s[1], 42 + n, "random");
  }
}

TEST_CASE("layernorm stays accurate when the mean is large against the spread", "[kernels][fused]") {
  // var = E[x^2] - E[x]^2 in float loses every digit here (kernels/layernorm.h); v2's
  // double sums and v3's per-chunk two-pass statistics must not, nor v4's 4 x W float
  // partial sums. Rows of 1000 + U(-1, 1) and 1e4 + U(-1, 1), one of them with an outlier.
  // v1 is the plain float loop the naive GPT backend runs (one float accumulator over
  // 2053 terms of 1e4: its mean is off by ~1e-3, a known limit the header states), so it
  // is checked from v2 on; the next test shows v1's drift is real and v2 is what fixes it.
  const int rows = 4, C = 2053;
  h::GuardedBuffer x(static_cast<size_t>(rows) * C, 1, 0.0f);
  h::fill_random(x.span(), 51, -1.0f, 1.0f);
  for (int r = 0; r < rows; ++r) {
    const float offset = r < 2 ? 1000.0f : 10000.0f;
    for (int i = 0; i < C; ++i) x.data()[static_cast<size_t>(r) * C + i] += offset;
  }
  x.data()[static_cast<size_t>(1) * C] = 1100.0f;  // row 1 starts with an outlier
  check_layernorm(x, rows, C, 52, "large means", 2);
}

TEST_CASE("layernorm v1 sums in float: at large means its mean drifts, in double it does not", "[kernels][fused]") {
  // The same row as the test above, through v1 in float and in double (F = double is what
  // the gradient checks run): the double mean is within 1e-9 of the float64 reference, the
  // float one is not within 1e-5 relative of it -- why v2 sums in double.
  const int C = 2053;
  std::vector<float> x(C), w(C, 1.0f), b(C, 0.0f);
  kernels::harness::fill_random(x, 51, -1.0f, 1.0f);
  for (float& xi : x) xi += 10000.0f;
  const kernels::LayernormReference ref = kernels::layernorm_reference(x.data(), w.data(), b.data(), 1, C);
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()), outd(C);
  double meand = 0.0, rstdd = 0.0;
  kernels::layernorm_forward_v1<double>(outd.data(), &meand, &rstdd, xd.data(), wd.data(), bd.data(), 1, C);
  REQUIRE(std::fabs(meand - ref.mean[0]) <= 1e-9 * std::fabs(ref.mean[0]));
  std::vector<float> outf(C);
  float meanf = 0.0f, rstdf = 0.0f;
  kernels::layernorm_forward_v1<float>(outf.data(), &meanf, &rstdf, x.data(), w.data(), b.data(), 1, C);
  CHECK(std::fabs(meanf - ref.mean[0]) > 1e-5);
  CHECK(std::isfinite(meanf));
}

// ---- versions and benches -----------------------------------------------------------------

// The header comment of each op lists one line per version ("//   v2  fused: ..."), in
// order: it may not drift from the versions table ("lists 3 versions, file has 4").
TEST_CASE("each kernel header lists exactly the versions its table has", "[kernels][fused][docs]") {
  const std::pair<const char*, size_t> headers[] = {
      {"matmul.h", kernels::sgemm_versions().size()},
      {"elementwise.h", kernels::cos2_versions().size()},
      {"bias_gelu.h", kernels::bias_gelu_versions().size()},
      {"softmax.h", kernels::softmax_versions().size()},
      {"layernorm.h", kernels::layernorm_versions().size()},
  };
  for (const auto& [file, count] : headers) {
    const std::vector<int> listed =
        testing::listed_versions(testing::read_text(std::string(NNLAB_SOURCE_DIR) + "/kernels/" + file));
    INFO(file << " lists " << listed.size() << " versions; its table has " << count);
    REQUIRE(listed.size() == count);
    for (size_t i = 0; i < listed.size(); ++i) REQUIRE(listed[i] == static_cast<int>(i + 1));  // in order
  }
}

TEST_CASE("fused ops: versions are found by number, vN and name", "[kernels][fused]") {
  REQUIRE(kernels::cos2_version("2").number == 2);
  REQUIRE(kernels::cos2_version("v1").number == 1);
  REQUIRE(kernels::cos2_version("fused").number == 2);
  REQUIRE(kernels::bias_gelu_version("fused").number == 2);
  REQUIRE(kernels::softmax_version("online").number == 2);
  REQUIRE(kernels::softmax_version("v3").number == 3);
  REQUIRE(kernels::softmax_version("three-pass-simd").number == 3);
  REQUIRE(kernels::softmax_version("online-simd").number == 4);
  REQUIRE(kernels::softmax_version("4").number == 4);
  REQUIRE(kernels::layernorm_version("one-pass").number == 2);
  REQUIRE(kernels::layernorm_version("3").number == 3);
  REQUIRE(kernels::layernorm_version("rows-parallel").number == 4);
  REQUIRE_THROWS_AS(kernels::cos2_version("v9"), std::invalid_argument);
  REQUIRE_THROWS_AS(kernels::bias_gelu_version("v3"), std::invalid_argument);
  REQUIRE_THROWS_AS(kernels::softmax_version("fast"), std::invalid_argument);
  REQUIRE_THROWS_AS(kernels::softmax_version("v5"), std::invalid_argument);
  REQUIRE_THROWS_AS(kernels::layernorm_version(""), std::invalid_argument);
}

TEST_CASE("the fused ops' benches validate and time every variant at their quick sizes", "[kernels][fused]") {
  for (const char* name : {"cos2", "bias_gelu", "softmax", "layernorm"}) testing::require_every_rung_valid_and_timed(name);
  // Unfused moves more: that is the point of the benches.
  const auto cos2 = kernels::bench::op("cos2").make("1003", 1);
  REQUIRE(cos2->bytes(0) == 2 * cos2->bytes(1));
  REQUIRE(cos2->flops() == 0.0);
  // Softmax: the three-pass versions (v1, v3) move 20 B/element, the online ones (v2, v4) 12.
  const auto sm = kernels::bench::op("softmax").make("3x7", 1);
  REQUIRE(kernels::softmax_versions().size() == 4);
  REQUIRE(sm->bytes(0) == 20.0 * 21);
  REQUIRE(sm->bytes(1) == 12.0 * 21);
  REQUIRE(sm->bytes(2) == 20.0 * 21);
  REQUIRE(sm->bytes(3) == 12.0 * 21);
  REQUIRE_THROWS_AS(kernels::bench::op("softmax").make("3", 1), std::invalid_argument);
  REQUIRE_THROWS_AS(kernels::bench::op("cos2").make("0", 1), std::invalid_argument);
  REQUIRE_THROWS_AS(kernels::bench::op("layernorm").make("4xK", 1), std::invalid_argument);
  REQUIRE(kernels::bench::op("cos2").make("4K", 1)->shape() == "n=4K");
}
