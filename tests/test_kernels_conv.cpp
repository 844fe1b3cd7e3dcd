// kernels/conv: every rung of the convolution ladder agrees with v1 (the plain loops), v1
// agrees with nn's double loops (whose backward is checked against finite differences in
// tests/test_conv.cpp), results do not depend on the thread count, and the 2x2 max-pool
// rung gives the reference's outputs and argmax bit for bit.
#include <omp.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "nn/conv.h"
#include "nn/rng.h"

namespace {

std::vector<float> random_floats(nn::Rng& rng, int64_t n, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.normal(0.0f, scale);
  return v;
}

std::string shape_str(const kernels::ConvShape& s) {
  std::ostringstream os;
  os << "B=" << s.B << " C=" << s.C << " H=" << s.H << " W=" << s.W << " OC=" << s.OC << " K=" << s.KH << "x"
     << s.KW << " stride=" << s.stride << " pad=" << s.pad;
  return os.str();
}

// The first i with NOT |got - want| <= atol + rtol |want| (NaN never passes), or "".
std::string mismatch(const float* got, const std::vector<double>& want, double atol, double rtol) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got[i];
    if (!(std::fabs(g - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      std::ostringstream os;
      os << "[" << i << "] got " << g << ", want " << want[i];
      return os.str();
    }
  }
  return "";
}
std::string mismatch(const std::vector<float>& got, const std::vector<float>& want, double atol, double rtol) {
  return mismatch(got.data(), std::vector<double>(want.begin(), want.end()), atol, rtol);
}

// Odd sizes, padding, stride 2, non-square kernels, batch 1, and batches that do not fill the
// backward's fixed chunks of 4 images (5, 9); C*KH*KW <= 27 at stride 1 takes v4's direct
// path (lesson 04's conv1 and a 3-channel 3x3), the rest its im2col path.
std::vector<kernels::ConvShape> shapes() {
  return {
      {2, 3, 7, 5, 4, 3, 3, 1, 1},    // "same" 3x3, direct in v4 (27 taps)
      {2, 2, 9, 7, 3, 3, 3, 2, 0},    // stride 2
      {1, 3, 6, 7, 2, 5, 5, 1, 2},    // 5x5, pad 2 (75 taps: im2col)
      {3, 4, 5, 5, 5, 1, 1, 1, 0},    // 1x1 (direct)
      {2, 2, 8, 9, 3, 5, 5, 2, 1},    // 5x5, stride 2, pad 1
      {1, 1, 4, 3, 2, 3, 3, 2, 2},    // more padding than image, stride 2
      {2, 3, 6, 5, 2, 3, 1, 1, 0},    // 3x1 (direct)
      {5, 1, 28, 28, 32, 3, 3, 1, 1}, // lesson 04's conv1, 5 images (direct)
      {9, 32, 14, 14, 64, 3, 3, 1, 1},// lesson 04's conv2, 9 images (im2col per image)
      {1, 5, 11, 13, 7, 3, 3, 1, 1},  // 45 taps, batch 1
  };
}

nn::Conv2dDims to_nn(const kernels::ConvShape& s) { return {s.B, s.C, s.H, s.W, s.OC, s.KH, s.KW, s.stride, s.pad}; }

struct Grads {
  std::vector<float> dx, dw, db;
};

constexpr float kLeftover = 0.25f;  // parameter grads start here: they must accumulate onto it
constexpr float kSentinel = -777.0f;

// One rung's backward on fresh buffers, with a sentinel after each output.
Grads run_backward(kernels::ConvBackwardFn fn, const kernels::ConvShape& s, const std::vector<float>& g,
                   const std::vector<float>& x, const std::vector<float>& w, bool with_dinp, bool with_dbias) {
  Grads r;
  r.dx.assign(x.size() + 1, std::numeric_limits<float>::quiet_NaN());
  r.dw.assign(w.size() + 1, kLeftover);
  r.db.assign(static_cast<size_t>(s.OC) + 1, kLeftover);
  r.dx.back() = r.dw.back() = r.db.back() = kSentinel;
  fn(with_dinp ? r.dx.data() : nullptr, r.dw.data(), with_dbias ? r.db.data() : nullptr, g.data(), x.data(),
     w.data(), s);
  REQUIRE(r.dx.back() == kSentinel);
  REQUIRE(r.dw.back() == kSentinel);
  REQUIRE(r.db.back() == kSentinel);
  r.dx.pop_back();
  r.dw.pop_back();
  r.db.pop_back();
  return r;
}

}  // namespace

TEST_CASE("conv2d ladder: the table lists v1..v4 in order and finds them by number and name", "[conv][kernels]") {
  const auto& versions = kernels::conv2d_versions();
  REQUIRE(versions.size() == 4);
  for (size_t i = 0; i < versions.size(); ++i) REQUIRE(versions[i].number == static_cast<int>(i) + 1);
  REQUIRE(kernels::conv2d_version("v3").fn.forward == &kernels::conv2d_forward_v3);
  REQUIRE(kernels::conv2d_version("direct-thin").number == 4);
  REQUIRE_THROWS_AS(kernels::conv2d_version("v9"), std::invalid_argument);
}

TEST_CASE("conv2d v1 (float loops) agrees with nn's double loops, forward and backward", "[conv][kernels]") {
  for (const kernels::ConvShape& s : shapes()) {
    INFO(shape_str(s));
    nn::Rng rng(21);
    const auto x = random_floats(rng, s.inp_size());
    const auto w = random_floats(rng, s.weight_size(), 0.3f);
    const auto b = random_floats(rng, s.OC);
    const auto g = random_floats(rng, s.out_size());
    const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()),
        gd(g.begin(), g.end());
    const nn::Conv2dDims d = to_nn(s);
    std::vector<double> want(static_cast<size_t>(s.out_size()));
    nn::conv2d_forward_loops<double>(want.data(), xd.data(), wd.data(), bd.data(), d);
    std::vector<float> out(want.size() + 1, kSentinel);
    kernels::conv2d_forward_v1(out.data(), x.data(), w.data(), b.data(), s, /*relu=*/false);
    CHECK(out.back() == kSentinel);
    CHECK(mismatch(out.data(), want, 1e-5, 1e-4) == "");
    kernels::conv2d_forward_v1(out.data(), x.data(), w.data(), b.data(), s, /*relu=*/true);
    for (double& v : want) v = std::max(v, 0.0);
    CHECK(mismatch(out.data(), want, 1e-5, 1e-4) == "");

    std::vector<double> dxd(xd.size()), dwd(wd.size(), 0.0), dbd(bd.size(), 0.0);
    nn::conv2d_backward_loops<double>(dxd.data(), dwd.data(), dbd.data(), gd.data(), xd.data(), wd.data(), d);
    for (double& v : dwd) v += kLeftover;
    for (double& v : dbd) v += kLeftover;
    const Grads r = run_backward(&kernels::conv2d_backward_v1, s, g, x, w, true, true);
    CHECK(mismatch(r.dx.data(), dxd, 1e-4, 1e-4) == "");
    CHECK(mismatch(r.dw.data(), dwd, 1e-4, 1e-4) == "");
    CHECK(mismatch(r.db.data(), dbd, 1e-4, 1e-4) == "");
  }
}

TEST_CASE("conv2d every rung agrees with v1: forward (with and without ReLU) and backward", "[conv][kernels]") {
  for (const kernels::ConvShape& s : shapes()) {
    nn::Rng rng(22);
    const auto x = random_floats(rng, s.inp_size());
    const auto w = random_floats(rng, s.weight_size(), 0.3f);
    const auto b = random_floats(rng, s.OC);
    const auto g = random_floats(rng, s.out_size());
    for (const kernels::ConvVersion& v : kernels::conv2d_versions()) {
      INFO(shape_str(s) << ", " << v.id() << " " << v.name);
      for (bool relu : {false, true}) {
        INFO("relu " << relu);
        std::vector<float> ref(static_cast<size_t>(s.out_size())), out(ref.size() + 1, std::numeric_limits<float>::quiet_NaN());
        out.back() = kSentinel;
        kernels::conv2d_forward_v1(ref.data(), x.data(), w.data(), b.data(), s, relu);
        v.fn.forward(out.data(), x.data(), w.data(), b.data(), s, relu);
        REQUIRE(out.back() == kSentinel);
        out.pop_back();
        CHECK(mismatch(out, ref, 1e-5, 1e-4) == "");
        // bias nullptr: no bias added
        kernels::conv2d_forward_v1(ref.data(), x.data(), w.data(), nullptr, s, relu);
        v.fn.forward(out.data(), x.data(), w.data(), nullptr, s, relu);
        CHECK(mismatch(out, ref, 1e-5, 1e-4) == "");
      }
      for (bool with_dinp : {true, false}) {
        INFO("dinp " << with_dinp);
        const Grads ref = run_backward(&kernels::conv2d_backward_v1, s, g, x, w, with_dinp, true);
        const Grads got = run_backward(v.fn.backward, s, g, x, w, with_dinp, /*with_dbias=*/with_dinp);
        if (with_dinp) CHECK(mismatch(got.dx, ref.dx, 1e-4, 1e-4) == "");
        if (!with_dinp) CHECK(std::isnan(got.dx[0]));  // skipped: left untouched
        CHECK(mismatch(got.dw, ref.dw, 1e-4, 1e-4) == "");
        if (with_dinp) {
          CHECK(mismatch(got.db, ref.db, 1e-4, 1e-4) == "");
        } else {
          CHECK(got.db[0] == kLeftover);  // dbias nullptr: not written
        }
      }
    }
  }
}

TEST_CASE("conv2d rungs give the same bits on 1 and 2 threads", "[conv][kernels][determinism]") {
  const int saved = omp_get_max_threads();
  for (const kernels::ConvShape& s : shapes()) {
    nn::Rng rng(23);
    const auto x = random_floats(rng, s.inp_size());
    const auto w = random_floats(rng, s.weight_size(), 0.3f);
    const auto b = random_floats(rng, s.OC);
    const auto g = random_floats(rng, s.out_size());
    for (const kernels::ConvVersion& v : kernels::conv2d_versions()) {
      INFO(shape_str(s) << ", " << v.id());
      std::vector<float> out[2];
      Grads grads[2];
      for (int t = 1; t <= 2; ++t) {
        omp_set_num_threads(t);
        out[t - 1].assign(static_cast<size_t>(s.out_size()), 0.0f);
        v.fn.forward(out[t - 1].data(), x.data(), w.data(), b.data(), s, true);
        grads[t - 1] = run_backward(v.fn.backward, s, g, x, w, true, true);
      }
      CHECK(out[0] == out[1]);
      CHECK(grads[0].dx == grads[1].dx);
      CHECK(grads[0].dw == grads[1].dw);
      CHECK(grads[0].db == grads[1].db);
    }
  }
  omp_set_num_threads(saved);
}

TEST_CASE("conv2d rungs reject a bad shape", "[conv][kernels]") {
  std::vector<float> buf(64);
  const kernels::ConvShape bad{1, 1, 2, 2, 1, 5, 5, 1, 0};  // kernel larger than the image
  for (const kernels::ConvVersion& v : kernels::conv2d_versions()) {
    INFO(v.id());
    REQUIRE_THROWS_AS(v.fn.forward(buf.data(), buf.data(), buf.data(), nullptr, bad, false), std::invalid_argument);
  }
}

TEST_CASE("maxpool2x2 gives nn::maxpool2d's outputs, argmax and gradient bit for bit", "[conv][pool][kernels]") {
  struct S {
    int B, C, H, W;
  };
  for (const S sz : {S{2, 3, 6, 8}, S{1, 2, 7, 5}, S{3, 1, 28, 28}, S{1, 1, 2, 3}}) {
    INFO("B=" << sz.B << " C=" << sz.C << " H=" << sz.H << " W=" << sz.W);
    nn::Rng rng(24);
    auto x = random_floats(rng, static_cast<int64_t>(sz.B) * sz.C * sz.H * sz.W);
    // ties and a NaN: the first of equal maxima wins, a NaN never does
    x[1] = x[0];
    x[static_cast<size_t>(sz.W)] = std::numeric_limits<float>::quiet_NaN();
    x[2] = x[3] = 0.0f;
    const int OH = sz.H / 2, OW = sz.W / 2;
    const size_t n_out = static_cast<size_t>(sz.B) * sz.C * OH * OW;
    std::vector<float> ref(n_out), out(n_out);
    std::vector<int32_t> ref_arg(n_out), arg(n_out);
    nn::maxpool2d_forward<float>(ref.data(), ref_arg.data(), x.data(), sz.B, sz.C, sz.H, sz.W, 2, 2);
    kernels::maxpool2x2_forward(out.data(), arg.data(), x.data(), sz.B, sz.C, sz.H, sz.W);
    CHECK(arg == ref_arg);
    for (size_t i = 0; i < n_out; ++i) {
      INFO(i);
      CHECK(std::memcmp(&out[i], &ref[i], sizeof(float)) == 0);
    }
    const auto g = random_floats(rng, static_cast<int64_t>(n_out));
    std::vector<float> dref(x.size()), dx(x.size() + 1, std::numeric_limits<float>::quiet_NaN());
    dx.back() = kSentinel;
    nn::maxpool2d_backward<float>(dref.data(), g.data(), ref_arg.data(), sz.B, sz.C, sz.H, sz.W, 2, 2);
    kernels::maxpool2x2_backward(dx.data(), g.data(), arg.data(), sz.B, sz.C, sz.H, sz.W);
    REQUIRE(dx.back() == kSentinel);
    dx.pop_back();
    CHECK(dx == dref);
  }
}

TEST_CASE("conv2d_relu_maxpool2x2 = conv (top rung, ReLU) then maxpool2x2, bit for bit, any thread count",
          "[conv][pool][kernels]") {
  const int saved = omp_get_max_threads();
  for (const kernels::ConvShape& s : shapes()) {
    if (s.OH() < 2 || s.OW() < 2) continue;
    INFO(shape_str(s));
    nn::Rng rng(25);
    const auto x = random_floats(rng, s.inp_size());
    const auto w = random_floats(rng, s.weight_size(), 0.3f);
    const auto b = random_floats(rng, s.OC);
    const size_t n_pool = static_cast<size_t>(s.B) * s.OC * (s.OH() / 2) * (s.OW() / 2);
    std::vector<float> act_ref(static_cast<size_t>(s.out_size())), pool_ref(n_pool);
    std::vector<int32_t> arg_ref(n_pool);
    kernels::conv2d_forward(act_ref.data(), x.data(), w.data(), b.data(), s, /*relu=*/true);
    kernels::maxpool2x2_forward(pool_ref.data(), arg_ref.data(), act_ref.data(), s.B, s.OC, s.OH(), s.OW());
    for (int t = 1; t <= 2; ++t) {
      INFO(t << " threads");
      omp_set_num_threads(t);
      std::vector<float> act(act_ref.size() + 1, std::numeric_limits<float>::quiet_NaN()), pool(n_pool + 1);
      std::vector<int32_t> arg(n_pool + 1, -1);
      act.back() = pool.back() = kSentinel;
      arg.back() = 12345;
      kernels::conv2d_relu_maxpool2x2_forward(act.data(), pool.data(), arg.data(), x.data(), w.data(), b.data(), s);
      REQUIRE(act.back() == kSentinel);
      REQUIRE(pool.back() == kSentinel);
      REQUIRE(arg.back() == 12345);
      act.pop_back();
      pool.pop_back();
      arg.pop_back();
      CHECK(act == act_ref);
      CHECK(pool == pool_ref);
      CHECK(arg == arg_ref);
    }
  }
  omp_set_num_threads(saved);
}
