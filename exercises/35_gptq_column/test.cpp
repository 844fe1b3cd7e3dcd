// Tests of exercise 35_gptq_column. One column by hand on a 2 x 3 matrix; the columns before j
// untouched and the last column with nothing to push; clamping at qmax; and the whole sweep
// (every column in turn, with U from a real calibration set of correlated inputs) giving a
// smaller output error ||X W^T - X Q^T|| than round-to-nearest at 3 bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "exercises/35_gptq_column/gptq_column.h"
#include "exercises/test_util.h"

namespace {

// The upper Cholesky factor U of (X^T X + damp I)^-1 (H^-1 = U^T U), in double, as floats.
std::vector<float> inverse_hessian_factor(const std::vector<float>& X, int T, int K, double damp) {
  std::vector<double> H(K * K, 0.0), inv(K * K, 0.0);
  for (int a = 0; a < K; ++a)
    for (int b = 0; b < K; ++b) {
      for (int t = 0; t < T; ++t) H[a * K + b] += static_cast<double>(X[t * K + a]) * X[t * K + b];
      if (a == b) H[a * K + b] += damp;
    }
  for (int i = 0; i < K; ++i) inv[i * K + i] = 1.0;
  for (int c = 0; c < K; ++c) {  // Gauss-Jordan: H is symmetric positive definite, no pivoting
    const double p = H[c * K + c];
    for (int k = 0; k < K; ++k) H[c * K + k] /= p, inv[c * K + k] /= p;
    for (int r = 0; r < K; ++r) {
      if (r == c) continue;
      const double f = H[r * K + c];
      for (int k = 0; k < K; ++k) H[r * K + k] -= f * H[c * K + k], inv[r * K + k] -= f * inv[c * K + k];
    }
  }
  // inv = U^T U with U upper (U is the transpose of inv's lower Cholesky factor), row by row.
  std::vector<double> U(K * K, 0.0);
  for (int i = 0; i < K; ++i) {
    double d = inv[i * K + i];
    for (int k = 0; k < i; ++k) d -= U[k * K + i] * U[k * K + i];
    U[i * K + i] = std::sqrt(d);
    for (int j = i + 1; j < K; ++j) {
      double v = inv[i * K + j];
      for (int k = 0; k < i; ++k) v -= U[k * K + i] * U[k * K + j];
      U[i * K + j] = v / U[i * K + i];
    }
  }
  return std::vector<float>(U.begin(), U.end());
}

double output_error(const std::vector<float>& X, const std::vector<float>& W, const std::vector<float>& Q, int T,
                    int K, int N) {
  double e = 0.0;
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      double d = 0.0;
      for (int k = 0; k < K; ++k) d += static_cast<double>(X[t * K + k]) * (W[n * K + k] - Q[n * K + k]);
      e += d * d;
    }
  return std::sqrt(e);
}

}  // namespace

TEST_CASE("gptq_column: one column by hand", "[ex35]") {
  // W (2, 3); U upper; scales 0.5 and 1; qmax 7; column j = 0.
  std::vector<float> W = {1.2f, 0.5f, -1.0f, 2.6f, 1.0f, 0.0f};
  const std::vector<float> U = {2.0f, 0.5f, -1.0f, 0.0f, 1.0f, 0.25f, 0.0f, 0.0f, 1.0f};
  const std::vector<float> scales = {0.5f, 1.0f};
  ex::gptq_column(W.data(), 2, 3, 0, U.data(), scales.data(), 7);
  // row 0: 1.2 / 0.5 = 2.4 -> 2 -> q 1.0; err (1.2 - 1.0) / 2 = 0.1; w1 = 0.5 - 0.05, w2 = -1 + 0.1
  // row 1: 2.6 -> 3 -> q 3.0; err -0.4 / 2 = -0.2; w1 = 1 + 0.1, w2 = 0 - 0.2
  const std::vector<float> want = {1.0f, 0.45f, -0.9f, 3.0f, 1.1f, -0.2f};
  for (size_t i = 0; i < W.size(); ++i) {
    INFO("W[" << i / 3 << "][" << i % 3 << "]: got " << W[i] << ", want " << want[i]);
    if (i % 3 == 1 && ex_test::close(W[i], i < 3 ? 0.4f : 1.2f, 1e-6, 1e-5))
      FAIL("Likely cause: the error was not divided by U[j][j]");
    CHECK(ex_test::close(W[i], want[i], 1e-6, 1e-5));
  }
}

TEST_CASE("gptq_column: earlier columns untouched, the last column pushes nothing, levels clamp at qmax", "[ex35]") {
  nn::Rng rng(35);
  const int rows = 5, cols = 7;
  std::vector<float> W = ex_test::random_normal(rng, rows * cols);
  std::vector<float> U(cols * cols, 0.0f);
  for (int i = 0; i < cols; ++i)
    for (int j = i; j < cols; ++j) U[i * cols + j] = i == j ? 1.0f + rng.uniform() : rng.normal(0.0f, 0.3f);
  const std::vector<float> scales(rows, 0.1f);
  const std::vector<float> before = W;
  ex::gptq_column(W.data(), rows, cols, 3, U.data(), scales.data(), 3);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < 3; ++k) {
      INFO("row " << r << ", column " << k << " (before j = 3) changed: " << before[r * cols + k] << " -> "
                  << W[r * cols + k]);
      CHECK(W[r * cols + k] == before[r * cols + k]);
    }
    const float level = W[r * cols + 3] / 0.1f;
    INFO("row " << r << ": column 3 holds " << W[r * cols + 3] << " = " << level << " steps; levels lie in [-3, 3]");
    CHECK(std::fabs(level - std::nearbyint(level)) < 1e-4);
    CHECK(std::fabs(level) <= 3.0001f);
  }
  std::vector<float> W2 = before;
  ex::gptq_column(W2.data(), rows, cols, cols - 1, U.data(), scales.data(), 3);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < cols - 1; ++k) CHECK(W2[r * cols + k] == before[r * cols + k]);
}

TEST_CASE("gptq_column: the sweep beats round-to-nearest on the layer's output at 3 bits", "[ex35]") {
  nn::Rng rng(350);
  const int T = 64, K = 24, N = 10, qmax = 3;
  // correlated inputs: each channel a mix of a few shared factors plus noise
  std::vector<float> F = ex_test::random_normal(rng, T * 4), X(T * K);
  std::vector<float> mix = ex_test::random_normal(rng, 4 * K);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) {
      float v = 0.1f * rng.normal(0.0f, 1.0f);
      for (int f = 0; f < 4; ++f) v += F[t * 4 + f] * mix[f * K + k];
      X[t * K + k] = v;
    }
  const std::vector<float> W = ex_test::random_normal(rng, N * K);
  std::vector<float> scales(N);
  for (int n = 0; n < N; ++n) {
    float amax = 0.0f;
    for (int k = 0; k < K; ++k) amax = std::max(amax, std::fabs(W[n * K + k]));
    scales[n] = amax / qmax;
  }
  std::vector<float> rtn = W;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      rtn[n * K + k] = scales[n] * std::clamp(std::nearbyint(W[n * K + k] / scales[n]), -3.0f, 3.0f);
  const std::vector<float> U = inverse_hessian_factor(X, T, K, 0.01 * T);
  std::vector<float> gptq = W;
  for (int j = 0; j < K; ++j) ex::gptq_column(gptq.data(), N, K, j, U.data(), scales.data(), qmax);
  const double e_rtn = output_error(X, W, rtn, T, K, N), e_gptq = output_error(X, W, gptq, T, K, N);
  INFO("||X W^T - X Q^T||: round-to-nearest " << e_rtn << ", GPTQ " << e_gptq);
  if (e_gptq == e_rtn) FAIL("Likely cause: the error is not pushed onto the later columns (this is RTN)");
  CHECK(e_gptq < 0.8 * e_rtn);
}
