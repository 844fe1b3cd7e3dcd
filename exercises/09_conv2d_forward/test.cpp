// Tests of exercise 09_conv2d_forward. The expected values come from a hand-worked example
// and from nn::conv2d_forward_loops<double> (nn/conv.cpp) on random inputs.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "exercises/09_conv2d_forward/conv2d_forward.h"
#include "exercises/test_util.h"
#include "nn/conv.h"
#include "nn/rng.h"

namespace {

struct Case {
  int B, C, H, W, OC, KH, KW, stride, pad;
};

std::string describe(const Case& c) {
  std::ostringstream os;
  os << "B=" << c.B << " C=" << c.C << " H=" << c.H << " W=" << c.W << " OC=" << c.OC << " kernel "
     << c.KH << "x" << c.KW << " stride=" << c.stride << " pad=" << c.pad;
  return os.str();
}

// Runs the student's conv and the reference on random inputs; reports the first mismatches.
void check_against_reference(const Case& c, bool with_bias, uint64_t seed) {
  const nn::Conv2dDims d{c.B, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride, c.pad};
  nn::Rng rng(seed);
  const std::vector<float> x = ex_test::random_normal(rng, static_cast<size_t>(d.inp_size()));
  const std::vector<float> w = ex_test::random_normal(rng, static_cast<size_t>(d.weight_size()), 0.5f);
  const std::vector<float> b = ex_test::random_normal(rng, static_cast<size_t>(c.OC));
  const std::vector<double> xd = ex_test::to_double(x), wd = ex_test::to_double(w), bd = ex_test::to_double(b);
  std::vector<double> want(static_cast<size_t>(d.out_size()));
  nn::conv2d_forward_loops<double>(want.data(), xd.data(), wd.data(), with_bias ? bd.data() : nullptr, d);
  const size_t n = want.size();
  std::vector<float> got = ex_test::output_buffer(n);  // NaN inside, guards after
  ex::conv2d_forward(got.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, c.B, c.C, c.H,
                     c.W, c.OC, c.KH, c.KW, c.stride, c.pad);
  const int OH = d.OH(), OW = d.OW();
  const ex_test::Comparison cmp =
      ex_test::compare("out", {got.data(), n}, want, 1e-5, 1e-4, [&](size_t i) {
        std::ostringstream os;
        os << "out[b=" << i / (static_cast<size_t>(c.OC) * OH * OW) << "][o=" << (i / (static_cast<size_t>(OH) * OW)) % c.OC
           << "][oh=" << (i / OW) % OH << "][ow=" << i % OW << "] (OH=" << OH << ", OW=" << OW << ")";
        return os.str();
      });
  INFO(describe(c) << (with_bias ? "" : ", bias = nullptr") << "\n" << cmp.report);
  CHECK(cmp.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(got, n, "out");
  INFO(overrun);
  CHECK(overrun.empty());
}

}  // namespace

TEST_CASE("conv2d_forward: a worked example, 3x3 image, 2x2 kernel", "[09_conv2d_forward]") {
  // No padding, stride 1: out is 2x2, each the kernel's dot product with one 2x2 window.
  //   image 1 2 3    kernel  1  0    out[0][0] = 1*1 + 5*(-1) + 0.5 = -3.5
  //         4 5 6            0 -1    out[0][1] = 2 - 6 + 0.5 = -3.5, out[1][*] likewise
  //         7 8 9    bias 0.5
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> w = {1, 0, 0, -1};
  const float bias = 0.5f;
  std::vector<float> out = ex_test::output_buffer(4);
  ex::conv2d_forward(out.data(), x.data(), w.data(), &bias, 1, 1, 3, 3, 1, 2, 2, 1, 0);
  const ex_test::Comparison c =
      ex_test::compare("out", {out.data(), 4}, std::vector<double>{-3.5, -3.5, -3.5, -3.5}, 1e-6, 1e-6);
  INFO(c.report);
  CHECK(c.mismatches == 0);
  CHECK(ex_test::guard_damage(out, 4, "out").empty());
}

TEST_CASE("conv2d_forward: padding adds a border of zeros", "[09_conv2d_forward]") {
  // A 2x2 image of ones, a 3x3 kernel of ones, pad 1: out is 2x2 and every output sees all
  // 4 pixels (the rest of its window is padding): 4 each. No bias.
  const std::vector<float> x(4, 1.0f), w(9, 1.0f);
  std::vector<float> out = ex_test::output_buffer(4);
  ex::conv2d_forward(out.data(), x.data(), w.data(), nullptr, 1, 1, 2, 2, 1, 3, 3, 1, 1);
  const ex_test::Comparison c =
      ex_test::compare("out", {out.data(), 4}, std::vector<double>{4, 4, 4, 4}, 1e-6, 1e-6);
  INFO("2x2 ones, 3x3 ones kernel, pad 1, bias nullptr\n" << c.report);
  CHECK(c.mismatches == 0);
  CHECK(ex_test::guard_damage(out, 4, "out").empty());
}

TEST_CASE("conv2d_forward: random inputs, several channels, against nn::conv2d_forward_loops",
          "[09_conv2d_forward]") {
  check_against_reference({2, 3, 7, 5, 4, 3, 3, 1, 1}, true, 901);   // "same" 3x3
  check_against_reference({1, 2, 6, 7, 3, 3, 3, 1, 0}, false, 902);  // no padding, no bias
}

TEST_CASE("conv2d_forward: stride 2, odd sizes, 5x5 and non-square kernels", "[09_conv2d_forward]") {
  check_against_reference({2, 2, 9, 7, 3, 3, 3, 2, 0}, true, 903);
  check_against_reference({1, 3, 8, 9, 2, 5, 5, 2, 2}, true, 904);
  check_against_reference({2, 2, 6, 5, 3, 3, 1, 1, 0}, true, 905);
  check_against_reference({1, 1, 4, 3, 2, 3, 3, 2, 2}, true, 906);  // more padding than image
}
