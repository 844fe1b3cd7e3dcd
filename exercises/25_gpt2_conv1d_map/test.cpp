// Tests of exercise 25_gpt2_conv1d_map. The transpose element by element, then what it is for:
// our Linear with the mapped weight computes the same y as GPT-2's x @ W + b (in double). The
// c_attn split the same way, against the known mistake of reading it as if it were already
// ours (rows [q | k | v]).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/25_gpt2_conv1d_map/gpt2_conv1d_map.h"
#include "exercises/test_util.h"
#include "nn/rng.h"

namespace {

// GPT-2's Conv1D in double: y (out) = x (in) @ w (in, out) + b.
std::vector<double> conv1d_forward(const std::vector<float>& x, const float* w, const float* b, int in, int out,
                                   size_t stride, size_t col0) {
  std::vector<double> y(static_cast<size_t>(out));
  for (int o = 0; o < out; ++o) {
    double s = b[col0 + o];
    for (int i = 0; i < in; ++i) s += static_cast<double>(x[static_cast<size_t>(i)]) * w[i * stride + col0 + o];
    y[static_cast<size_t>(o)] = s;
  }
  return y;
}

// Our Linear in float, as the student's weight feeds it: y[o] = b[o] + sum_i w[o][i] x[i].
std::vector<float> linear_forward(const std::vector<float>& x, const float* w, const float* b, int in, int out) {
  std::vector<float> y(static_cast<size_t>(out));
  for (int o = 0; o < out; ++o) {
    float s = b[o];
    for (int i = 0; i < in; ++i) s += w[static_cast<size_t>(o) * in + i] * x[static_cast<size_t>(i)];
    y[static_cast<size_t>(o)] = s;
  }
  return y;
}

void check_transpose(int in, int out, uint64_t seed) {
  nn::Rng rng(seed);
  const size_t n = static_cast<size_t>(in) * out;
  const std::vector<float> src = ex_test::random_normal(rng, n);
  std::vector<float> dst = ex_test::output_buffer(n);
  ex::conv1d_to_linear(dst.data(), src.data(), in, out);
  std::vector<double> want(n);
  for (int o = 0; o < out; ++o) {
    for (int i = 0; i < in; ++i) want[static_cast<size_t>(o) * in + i] = src[static_cast<size_t>(i) * out + o];
  }
  const std::string cause = ex_test::diagnose(
      {dst.data(), n}, want, 0.0, 0.0,
      {{"dst is src copied as it is: GPT-2's (in, out) must be transposed into our (out, in)",
        [&](size_t j) { return dst[j] == src[j]; }}});
  const auto c = ex_test::compare("dst", {dst.data(), n}, want, 0.0, 0.0, [&](size_t j) {
    std::ostringstream os;
    os << "output o = " << j / static_cast<size_t>(in) << ", input i = " << j % static_cast<size_t>(in)
       << ": src[i * out + o]";
    return os.str();
  });
  INFO("Conv1D weight (in, out) = (" << in << ", " << out << ") into a Linear weight (out, in)\n" << c.report << cause);
  CHECK(c.mismatches == 0);
  const std::string overrun = ex_test::guard_damage(dst, n, "dst");
  INFO(overrun);
  CHECK(overrun.empty());

  // What the map is for: the same y from the same x.
  const std::vector<float> x = ex_test::random_normal(rng, static_cast<size_t>(in));
  const std::vector<float> b = ex_test::random_normal(rng, static_cast<size_t>(out));
  const std::vector<double> y_hf = conv1d_forward(x, src.data(), b.data(), in, out, static_cast<size_t>(out), 0);
  const std::vector<float> y = linear_forward(x, dst.data(), b.data(), in, out);
  const auto cy = ex_test::compare("y", y, y_hf, 1e-5, 1e-5);
  INFO("our Linear with your weight against GPT-2's x @ W + b\n" << cy.report);
  CHECK(cy.mismatches == 0);
}

}  // namespace

TEST_CASE("conv1d_to_linear: GPT-2's (in, out) weight becomes our (out, in)", "[25_gpt2_conv1d_map]") {
  check_transpose(7, 5, 2501);   // c_fc-like: in < out
  check_transpose(5, 9, 2502);
  check_transpose(6, 6, 2503);   // square, like attention's c_proj: the wrong map has the right shape
  check_transpose(1, 4, 2504);   // one row
}

TEST_CASE("split_c_attn: the fused (C, 3C) c_attn into our q, k, v (C, C) and their biases",
          "[25_gpt2_conv1d_map]") {
  for (const int C : {6, 5, 1}) {
    nn::Rng rng(2510 + static_cast<uint64_t>(C));
    const size_t CC = static_cast<size_t>(C) * C, W = 3 * static_cast<size_t>(C);
    const std::vector<float> src = ex_test::random_normal(rng, CC * 3);
    const std::vector<float> bias = ex_test::random_normal(rng, W);
    std::vector<float> q = ex_test::output_buffer(CC), k = ex_test::output_buffer(CC), v = ex_test::output_buffer(CC);
    std::vector<float> qb = ex_test::output_buffer(static_cast<size_t>(C));
    std::vector<float> kb = ex_test::output_buffer(static_cast<size_t>(C));
    std::vector<float> vb = ex_test::output_buffer(static_cast<size_t>(C));
    ex::split_c_attn(q.data(), k.data(), v.data(), qb.data(), kb.data(), vb.data(), src.data(), bias.data(), C);
    const char* names[3] = {"q", "k", "v"};
    std::vector<float>* parts[3] = {&q, &k, &v};
    std::vector<float>* biases[3] = {&qb, &kb, &vb};
    for (int p = 0; p < 3; ++p) {
      const std::vector<float>& got = *parts[p];
      std::vector<double> want(CC);
      for (int o = 0; o < C; ++o) {
        for (int i = 0; i < C; ++i) want[static_cast<size_t>(o) * C + i] = src[static_cast<size_t>(i) * W + p * C + o];
      }
      const std::string cause = ex_test::diagnose(
          {got.data(), CC}, want, 0.0, 0.0,
          {{"you took rows p*C .. p*C + C - 1 of src as if it were ours (3C, C) with rows [q | k | v]; GPT-2's "
            "c_attn is (C, 3C): q, k, v are column blocks, and each needs the transpose",
            [&](size_t j) { return got[j] == src[p * CC + j]; }},
           {"the columns are right but not transposed: element (o, i) of ours is src[i * 3C + p*C + o]",
            [&](size_t j) {
              const size_t o = j / static_cast<size_t>(C), i = j % static_cast<size_t>(C);
              return got[j] == src[o * W + p * static_cast<size_t>(C) + i];
            }}});
      const auto c = ex_test::compare(names[p], {got.data(), CC}, want, 0.0, 0.0);
      INFO("C = " << C << ", the " << names[p] << " block of c_attn\n" << c.report << cause);
      CHECK(c.mismatches == 0);
      std::vector<double> want_b(static_cast<size_t>(C));
      for (int o = 0; o < C; ++o) want_b[static_cast<size_t>(o)] = bias[static_cast<size_t>(p) * C + o];
      const auto cb = ex_test::compare(std::string(names[p]) + "_bias", {biases[p]->data(), static_cast<size_t>(C)},
                                       want_b, 0.0, 0.0);
      INFO("C = " << C << ": the bias is split like the columns: " << names[p] << "_bias[o] = bias[" << p
                  << " * C + o]\n" << cb.report);
      CHECK(cb.mismatches == 0);
      const std::string overrun = ex_test::guard_damage(got, CC, names[p]) +
                                  ex_test::guard_damage(*biases[p], static_cast<size_t>(C), std::string(names[p]) + "_bias");
      INFO(overrun);
      CHECK(overrun.empty());
      // The point: our q projection of x equals GPT-2's first C outputs of x @ c_attn + b.
      const std::vector<float> x = ex_test::random_normal(rng, static_cast<size_t>(C));
      const std::vector<double> y_hf =
          conv1d_forward(x, src.data(), bias.data(), C, C, W, static_cast<size_t>(p) * C);
      const std::vector<float> y = linear_forward(x, got.data(), biases[p]->data(), C, C);
      const auto cy = ex_test::compare(std::string(names[p]) + "(x)", y, y_hf, 1e-5, 1e-5);
      INFO("our Linear with your " << names[p] << " against GPT-2's x @ c_attn + b, columns " << p * C << " .. "
                                   << (p + 1) * C - 1 << "\n" << cy.report);
      CHECK(cy.mismatches == 0);
    }
  }
}
