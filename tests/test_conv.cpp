// nn/conv: the plain loops and im2col + matmul agree (float and double), both backwards
// match finite differences in double (stride, padding, channels, odd sizes, kernels 1/3/5),
// max-pooling routes gradients to its winners, bad shapes throw nn::Error.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "nn/check.h"
#include "nn/conv.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace {

template <typename T>
std::vector<T> random_vec(nn::Rng& rng, int64_t n, float scale = 1.0f) {
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(rng.normal(0.0f, scale));
  return v;
}

std::string dims_str(const nn::Conv2dDims& d) {
  std::ostringstream os;
  os << "B=" << d.B << " C=" << d.C << " H=" << d.H << " W=" << d.W << " OC=" << d.OC
     << " K=" << d.KH << "x" << d.KW << " stride=" << d.stride << " pad=" << d.pad << " -> "
     << d.OH() << "x" << d.OW();
  return os.str();
}

// The first mismatch of |a - b| <= atol + rtol |b|, or "" (NaN never passes).
template <typename T>
std::string mismatch(const std::vector<T>& got, const std::vector<T>& want, double atol, double rtol) {
  if (got.size() != want.size()) return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      std::ostringstream os;
      os << "[" << i << "] got " << g << ", want " << w;
      return os.str();
    }
  }
  return "";
}

// The shapes every check runs over: stride 1 and 2, padding 0/1/2, kernels 1/3/5 (and one
// non-square), several channels, odd non-square images.
std::vector<nn::Conv2dDims> shapes() {
  return {
      {2, 3, 7, 5, 4, 3, 3, 1, 1},  // "same" 3x3
      {2, 2, 9, 7, 3, 3, 3, 2, 0},  // stride 2, no padding
      {1, 3, 6, 7, 2, 5, 5, 1, 2},  // 5x5, pad 2
      {3, 4, 5, 5, 5, 1, 1, 1, 0},  // 1x1: a linear layer per pixel
      {2, 2, 8, 9, 3, 5, 5, 2, 1},  // 5x5, stride 2, pad 1
      {1, 1, 4, 3, 2, 3, 3, 2, 2},  // more padding than image, stride 2
      {2, 3, 6, 5, 2, 3, 1, 1, 0},  // non-square kernel 3x1
  };
}

// Forward of both versions on the same inputs.
template <typename T>
void both_forwards(const nn::Conv2dDims& d, uint64_t seed, std::vector<T>& loops, std::vector<T>& im2col_out) {
  nn::Rng rng(seed);
  const auto x = random_vec<T>(rng, d.inp_size());
  const auto w = random_vec<T>(rng, d.weight_size(), 0.5f);
  const auto b = random_vec<T>(rng, d.OC);
  loops.assign(static_cast<size_t>(d.out_size()), std::numeric_limits<T>::quiet_NaN());
  im2col_out.assign(static_cast<size_t>(d.out_size()), std::numeric_limits<T>::quiet_NaN());
  std::vector<T> col(static_cast<size_t>(d.col_size())), work(static_cast<size_t>(d.out_size()));
  nn::conv2d_forward_loops<T>(loops.data(), x.data(), w.data(), b.data(), d);
  nn::conv2d_forward_im2col<T>(im2col_out.data(), x.data(), w.data(), b.data(), col.data(),
                               work.data(), d);
}

}  // namespace

TEST_CASE("conv2d output size: OH = (H + 2 pad - KH) / stride + 1", "[conv]") {
  const nn::Conv2dDims d{1, 1, 28, 28, 1, 3, 3, 1, 1};
  REQUIRE(d.OH() == 28);
  const nn::Conv2dDims s{1, 1, 9, 7, 1, 3, 3, 2, 0};
  REQUIRE(s.OH() == 4);
  REQUIRE(s.OW() == 3);
}

TEST_CASE("conv2d loops on a hand-computed example", "[conv]") {
  // A 3x3 image, a 2x2 kernel, no padding: each output is the dot product of the kernel
  // with one 2x2 window, plus the bias.
  const std::vector<double> x = {1, 2, 3,
                                 4, 5, 6,
                                 7, 8, 9};
  const std::vector<double> w = {1, 0,
                                 0, -1};  // top-left minus bottom-right
  const double bias = 0.5;
  std::vector<double> out(4, NAN);
  const nn::Conv2dDims d{1, 1, 3, 3, 1, 2, 2, 1, 0};
  nn::conv2d_forward_loops<double>(out.data(), x.data(), w.data(), &bias, d);
  REQUIRE(out == std::vector<double>{1 - 5 + 0.5, 2 - 6 + 0.5, 4 - 8 + 0.5, 5 - 9 + 0.5});
  std::vector<double> col(static_cast<size_t>(d.col_size()));
  std::vector<double> out2(4, NAN), work(4);
  nn::conv2d_forward_im2col<double>(out2.data(), x.data(), w.data(), &bias, col.data(), work.data(), d);
  REQUIRE(out2 == out);
  // im2col's rows: one per kernel position, each holding the 4 windows' pixel at it
  REQUIRE(col == std::vector<double>{1, 2, 4, 5, /**/ 2, 3, 5, 6, /**/ 4, 5, 7, 8, /**/ 5, 6, 8, 9});
}

TEST_CASE("conv2d loops and im2col agree, double and float", "[conv]") {
  for (const nn::Conv2dDims& d : shapes()) {
    INFO(dims_str(d));
    std::vector<double> a, b;
    both_forwards<double>(d, 11, a, b);
    CHECK(mismatch(b, a, 1e-12, 1e-12) == "");
    std::vector<float> fa, fb;
    both_forwards<float>(d, 11, fa, fb);
    CHECK(mismatch(fb, fa, 1e-5, 1e-4) == "");
    // and float against the double reference
    CHECK(mismatch(std::vector<double>(fb.begin(), fb.end()), a, 1e-5, 1e-4) == "");
  }
}

TEST_CASE("col2im is the adjoint of im2col: <im2col(x), y> == <x, col2im(y)>", "[conv]") {
  for (const nn::Conv2dDims& d : shapes()) {
    INFO(dims_str(d));
    nn::Rng rng(12);
    const auto x = random_vec<double>(rng, d.inp_size());
    const auto y = random_vec<double>(rng, d.col_size());
    std::vector<double> col(static_cast<size_t>(d.col_size()));
    std::vector<double> back(static_cast<size_t>(d.inp_size()), NAN);
    nn::im2col<double>(col.data(), x.data(), d);
    nn::col2im<double>(back.data(), y.data(), d);
    double lhs = 0.0, rhs = 0.0;
    for (size_t i = 0; i < col.size(); ++i) lhs += col[i] * y[i];
    for (size_t i = 0; i < x.size(); ++i) rhs += x[i] * back[i];
    CHECK(std::fabs(lhs - rhs) <= 1e-10 * (1.0 + std::fabs(lhs)));
  }
}

TEST_CASE("conv2d backward, loops and im2col, match finite differences (double)", "[conv][gradcheck]") {
  for (const nn::Conv2dDims& d : shapes()) {
    INFO(dims_str(d));
    nn::Rng rng(13);
    auto x = random_vec<double>(rng, d.inp_size());
    auto w = random_vec<double>(rng, d.weight_size(), 0.5f);
    auto b = random_vec<double>(rng, d.OC);
    const auto r = random_vec<double>(rng, d.out_size());  // L = sum r * out, so dout = r
    std::vector<double> out(static_cast<size_t>(d.out_size()));
    auto loss = [&] {
      nn::conv2d_forward_loops<double>(out.data(), x.data(), w.data(), b.data(), d);
      double sum = 0.0;
      for (size_t i = 0; i < out.size(); ++i) sum += r[i] * out[i];
      return sum;
    };
    for (const char* version : {"loops", "im2col"}) {
      INFO(version);
      // Parameter grads start from a leftover value: they must accumulate onto it.
      const double leftover = 0.25;
      std::vector<double> dx(x.size(), NAN), dw(w.size(), leftover), db(b.size(), leftover);
      if (std::string(version) == "loops") {
        nn::conv2d_backward_loops<double>(dx.data(), dw.data(), db.data(), r.data(), x.data(),
                                          w.data(), d);
      } else {
        std::vector<double> col(static_cast<size_t>(d.col_size())), work(r.size());
        nn::im2col<double>(col.data(), x.data(), d);
        nn::conv2d_backward_im2col<double>(dx.data(), dw.data(), db.data(), r.data(), w.data(),
                                           col.data(), work.data(), d);
      }
      for (double& v : dw) v -= leftover;
      for (double& v : db) v -= leftover;
      const nn::GradCheckResult gx = nn::check_gradient(loss, x, dx);
      INFO("dinp: " << gx.report);
      CHECK(gx.ok);
      const nn::GradCheckResult gw = nn::check_gradient(loss, w, dw);
      INFO("dweight: " << gw.report);
      CHECK(gw.ok);
      const nn::GradCheckResult gb = nn::check_gradient(loss, b, db);
      INFO("dbias: " << gb.report);
      CHECK(gb.ok);
    }
  }
}

TEST_CASE("conv2d float im2col backward agrees with the double loops", "[conv]") {
  for (const nn::Conv2dDims& d : shapes()) {
    INFO(dims_str(d));
    nn::Rng rng(14);
    const auto x = random_vec<double>(rng, d.inp_size());
    const auto w = random_vec<double>(rng, d.weight_size(), 0.5f);
    const auto g = random_vec<double>(rng, d.out_size());
    std::vector<double> dx(x.size()), dw(w.size(), 0.0), db(static_cast<size_t>(d.OC), 0.0);
    nn::conv2d_backward_loops<double>(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), d);
    const std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), gf(g.begin(), g.end());
    std::vector<float> dxf(x.size(), NAN), dwf(w.size(), 0.0f), dbf(db.size(), 0.0f);
    std::vector<float> col(static_cast<size_t>(d.col_size())), work(g.size());
    std::vector<float> out(g.size());
    nn::conv2d_forward_im2col<float>(out.data(), xf.data(), wf.data(), nullptr, col.data(), work.data(), d);
    nn::conv2d_backward_im2col<float>(dxf.data(), dwf.data(), dbf.data(), gf.data(), wf.data(),
                                      col.data(), work.data(), d);
    CHECK(mismatch(std::vector<double>(dxf.begin(), dxf.end()), dx, 1e-4, 1e-4) == "");
    CHECK(mismatch(std::vector<double>(dwf.begin(), dwf.end()), dw, 1e-4, 1e-4) == "");
    CHECK(mismatch(std::vector<double>(dbf.begin(), dbf.end()), db, 1e-4, 1e-4) == "");
  }
}

TEST_CASE("the Conv2d layer: forward = loops, backward accumulates, dinp nullptr skipped", "[conv]") {
  nn::Rng rng(15);
  nn::Conv2d conv("c", 3, 4, 3, 1, 1, rng);
  const int B = 2, H = 5, W = 6;
  const nn::Conv2dDims d = conv.dims(B, H, W);
  const auto x = random_vec<float>(rng, d.inp_size());
  std::vector<float> out(static_cast<size_t>(d.out_size())), ref(out.size());
  conv.forward(out.data(), x.data(), B, H, W);
  nn::conv2d_forward_loops<float>(ref.data(), x.data(), conv.weight.data(), conv.bias.data(), d);
  CHECK(mismatch(out, ref, 1e-5, 1e-4) == "");
  REQUIRE(conv.params().size() == 2);
  REQUIRE(conv.params()[0].name == "c.weight");
  REQUIRE(conv.params()[0].shape == nn::Shape{4, 3, 3, 3});

  const auto g = random_vec<float>(rng, d.out_size());
  conv.backward(nullptr, g.data(), B, H, W);
  const std::vector<float> once(conv.dweight.span().begin(), conv.dweight.span().end());
  conv.forward(out.data(), x.data(), B, H, W);
  conv.backward(nullptr, g.data(), B, H, W);
  for (size_t i = 0; i < once.size(); ++i) {
    REQUIRE(conv.dweight[static_cast<int64_t>(i)] == Approx(2.0 * once[i]).margin(1e-5));
  }
  // backward without a forward of that batch is an error, not garbage
  REQUIRE_THAT(testing::error_of([&] { conv.backward(nullptr, g.data(), B, H, W); }),
               Catch::Contains("without a forward"));
}

TEST_CASE("maxpool2d forward picks the max and remembers where", "[conv][pool]") {
  const std::vector<double> x = {1, 5, 2, 0,
                                 3, 4, 8, 7,
                                 -1, -2, -9, -3,
                                 -4, -5, -6, -8};
  std::vector<double> out(4, NAN);
  std::vector<int32_t> arg(4, -1);
  nn::maxpool2d_forward<double>(out.data(), arg.data(), x.data(), 1, 1, 4, 4, 2, 2);
  REQUIRE(out == std::vector<double>{5, 8, -1, -3});
  REQUIRE(arg == std::vector<int32_t>{1, 6, 8, 11});
  std::vector<double> dx(16, NAN);
  const std::vector<double> g = {10, 20, 30, 40};
  nn::maxpool2d_backward<double>(dx.data(), g.data(), arg.data(), 1, 1, 4, 4, 2, 2);
  std::vector<double> want(16, 0.0);
  want[1] = 10;
  want[6] = 20;
  want[8] = 30;
  want[11] = 40;
  REQUIRE(dx == want);
}

TEST_CASE("maxpool2d backward matches finite differences (double), odd sizes, overlap", "[conv][pool][gradcheck]") {
  struct Case { int B, C, H, W, K, stride; };
  for (const Case c : {Case{2, 3, 7, 5, 2, 2}, Case{1, 2, 6, 7, 3, 2}, Case{2, 1, 5, 5, 3, 1}}) {
    INFO("B=" << c.B << " C=" << c.C << " H=" << c.H << " W=" << c.W << " K=" << c.K << " stride=" << c.stride);
    nn::Rng rng(16);
    auto x = random_vec<double>(rng, static_cast<int64_t>(c.B) * c.C * c.H * c.W);  // ties: probability 0
    const int OH = (c.H - c.K) / c.stride + 1, OW = (c.W - c.K) / c.stride + 1;
    const auto r = random_vec<double>(rng, static_cast<int64_t>(c.B) * c.C * OH * OW);
    std::vector<double> out(r.size());
    std::vector<int32_t> arg(r.size());
    auto loss = [&] {
      nn::maxpool2d_forward<double>(out.data(), arg.data(), x.data(), c.B, c.C, c.H, c.W, c.K, c.stride);
      double s = 0.0;
      for (size_t i = 0; i < out.size(); ++i) s += r[i] * out[i];
      return s;
    };
    loss();
    std::vector<double> dx(x.size(), NAN);
    nn::maxpool2d_backward<double>(dx.data(), r.data(), arg.data(), c.B, c.C, c.H, c.W, c.K, c.stride);
    const nn::GradCheckResult g = nn::check_gradient(loss, x, dx);
    INFO(g.report);
    CHECK(g.ok);
  }
}

TEST_CASE("bad conv and pool shapes throw nn::Error with the sizes", "[conv]") {
  std::vector<float> buf(1024), col(1 << 16);
  // kernel larger than the padded input: 5x5 on 3x3 with pad 0
  const nn::Conv2dDims big{1, 1, 3, 3, 1, 5, 5, 1, 0};
  REQUIRE_THAT(testing::error_of([&] {
                 nn::conv2d_forward_loops<float>(buf.data(), buf.data(), buf.data(), nullptr, big);
               }),
               Catch::Contains("larger than the padded input"));
  REQUIRE_THAT(testing::error_of([&] {
                 nn::conv2d_forward_im2col<float>(buf.data(), buf.data(), buf.data(), nullptr,
                                                  col.data(), col.data(), big);
               }),
               Catch::Contains("larger than the padded input"));
  // ... but with pad 1 it fits (3 + 2 = 5)
  REQUIRE_NOTHROW(nn::conv2d_forward_loops<float>(buf.data(), buf.data(), buf.data(), nullptr,
                                                  nn::Conv2dDims{1, 1, 3, 3, 1, 5, 5, 1, 1}));
  REQUIRE_THAT(testing::error_of([&] {
                 nn::conv2d_forward_loops<float>(buf.data(), buf.data(), buf.data(), nullptr,
                                                 nn::Conv2dDims{1, 1, 4, 4, 1, 3, 3, 0, 0});
               }),
               Catch::Contains("stride"));
  REQUIRE_THAT(testing::error_of([&] {
                 nn::conv2d_forward_loops<float>(buf.data(), buf.data(), buf.data(), nullptr,
                                                 nn::Conv2dDims{1, 0, 4, 4, 1, 3, 3, 1, 0});
               }),
               Catch::Contains("positive sizes"));
  std::vector<int32_t> arg(64);
  REQUIRE_THAT(testing::error_of([&] {
                 nn::maxpool2d_forward<float>(buf.data(), arg.data(), buf.data(), 1, 1, 2, 2, 3, 1);
               }),
               Catch::Contains("larger than the input"));
  nn::Rng rng(1);
  REQUIRE_THAT(testing::error_of([&] { nn::Conv2d("bad", 1, 4, 0, 1, 0, rng); }),
               Catch::Contains("bad"));
}
