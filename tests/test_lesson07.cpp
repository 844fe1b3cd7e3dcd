// Lesson 07: the loops agree with nn::attention_forward, the scale experiment shows what the
// README says it shows, the naive softmax overflows where the stable one does not, and the
// gradient check passes. The README's numbers are checked against the program's.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "lessons/07-attention/attention_lesson.h"
#include "nn/attention.h"
#include "nn/rng.h"
#include "tests/test_util.h"

namespace {

std::vector<double> random_vec(nn::Rng& rng, size_t n) {
  std::vector<double> v(n);
  for (double& x : v) x = rng.normal();
  return v;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::fmax(m, std::fabs(a[i] - b[i]));
  return m;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

}  // namespace

TEST_CASE("lesson 07: the attention loops agree with nn::attention_forward", "[lesson07]") {
  nn::Rng rng(7);
  const int T = 6, C = 12;
  const std::vector<double> q = random_vec(rng, T * C), k = random_vec(rng, T * C), v = random_vec(rng, T * C);
  for (int NH : {1, 2, 3, 4, 12}) {
    INFO("NH = " << NH);
    const lesson07::AttentionTrace a = lesson07::attention_loops(q, k, v, T, C, NH);
    const std::vector<double> qkv = lesson07::pack_qkv(q, k, v, T, C);
    std::vector<double> out(T * C), preatt(static_cast<size_t>(NH * T * T)), att(preatt.size());
    nn::attention_forward(out.data(), preatt.data(), att.data(), qkv.data(), 1, T, C, NH);
    REQUIRE(max_abs_diff(a.out, out) < 1e-12);
    REQUIRE(max_abs_diff(a.att, att) < 1e-12);
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        double sum = 0.0;
        for (int t2 = 0; t2 < T; ++t2) {
          const size_t i = static_cast<size_t>((h * T + t) * T + t2);
          sum += a.att[i];
          if (t2 > t) {
            REQUIRE(a.att[i] == 0.0);
            REQUIRE(std::isinf(a.masked[i]));
            REQUIRE(a.masked[i] < 0);
          } else {
            REQUIRE(a.masked[i] == Approx(a.scores[i] / std::sqrt(static_cast<double>(C / NH))));
          }
        }
        REQUIRE(sum == Approx(1.0));
      }
    }
  }
}

TEST_CASE("lesson 07: in the hand-made example a query finds the keys like itself", "[lesson07]") {
  const lesson07::Example e = lesson07::hand_made_example();
  REQUIRE(e.tokens.size() == 5);
  const auto q = lesson07::project(e.x, e.Wq, e.T, e.C);
  const auto k = lesson07::project(e.x, e.Wk, e.T, e.C);
  const auto v = lesson07::project(e.x, e.Wv, e.T, e.C);
  REQUIRE(q[0] == 2.0);  // Wq = 2 I
  REQUIRE(v == e.x);     // Wv = I
  const lesson07::AttentionTrace a = lesson07::attention_loops(q, k, v, e.T, e.C, 1);
  // row 4 is a B: the two B's (positions 1 and 4) share almost all of its attention
  const double* row4 = &a.att[4 * 5];
  REQUIRE(row4[1] == Approx(row4[4]));
  REQUIRE(row4[1] + row4[4] > 0.9);
  REQUIRE(a.att[0] == 1.0);  // the first position can only see itself
}

TEST_CASE("lesson 07 part scale: var(q.k) ~ hs unscaled, ~1 scaled, and the unscaled softmax saturates",
          "[lesson07]") {
  double last_maxp = 0.0;
  for (int hs : lesson07::scale_head_sizes()) {
    const lesson07::ScaleRow r = lesson07::measure_scale(hs, 2000, 16, 42);
    INFO("hs = " << hs << ": var raw " << r.var_raw << ", scaled " << r.var_scaled << ", max p raw " << r.maxp_raw
                 << ", scaled " << r.maxp_scaled);
    REQUIRE(r.var_raw == Approx(hs).epsilon(0.08));
    REQUIRE(r.var_scaled == Approx(1.0).epsilon(0.08));
    REQUIRE(r.maxp_raw > last_maxp);  // more peaked at every larger head size
    last_maxp = r.maxp_raw;
    REQUIRE(r.maxp_scaled > 0.2);
    REQUIRE(r.maxp_scaled < 0.3);  // scaled: about the same at every head size
    REQUIRE(r.entropy_scaled > r.entropy_raw);
    REQUIRE(r.jac_scaled > r.jac_raw);
  }
  REQUIRE(last_maxp > 0.85);  // hs = 256 unscaled: nearly one-hot
}

TEST_CASE("lesson 07 part softmax: the naive softmax overflows in float, the stable one does not", "[lesson07]") {
  const float big[] = {1000.0f, 999.0f, 998.0f};
  const float small[] = {1.0f, 2.0f, 3.0f};
  const float negative[] = {-1000.0f, -1001.0f, -1002.0f};
  float naive[3], stable[3], stable_small[3];
  lesson07::softmax_naive(naive, big, 3);
  lesson07::softmax_stable(stable, big, 3);
  lesson07::softmax_stable(stable_small, small, 3);
  REQUIRE(std::isnan(naive[0]));
  for (int i = 0; i < 3; ++i) {
    REQUIRE(std::isfinite(stable[i]));
    // (1000, 999, 998) = (3, 2, 1) + 997: softmax(x + c) = softmax(x), so the reverse of (1, 2, 3)'s
    REQUIRE(stable[i] == Approx(stable_small[2 - i]).epsilon(1e-6));
  }
  REQUIRE(stable[0] + stable[1] + stable[2] == Approx(1.0f));
  lesson07::softmax_naive(naive, negative, 3);
  REQUIRE(std::isnan(naive[0]));  // 0 / 0
  lesson07::softmax_stable(stable, negative, 3);
  REQUIRE(stable[0] == Approx(stable_small[2]));
  lesson07::softmax_naive(naive, small, 3);  // where nothing overflows, both agree
  for (int i = 0; i < 3; ++i) REQUIRE(naive[i] == Approx(stable_small[i]).epsilon(1e-6));
}

TEST_CASE("lesson 07: every part runs, cross-checks pass, the notebook's files are written", "[lesson07]") {
  testing::TempDir dir("lesson07");
  lesson07::Options o;
  o.quick = true;
  o.out_dir = dir.file("out");
  testing::CaptureCout capture;
  REQUIRE(lesson07::run(o) == 0);
  const std::string text = capture.text();
  INFO(text);
  REQUIRE_THAT(text, Catch::Contains("PASS: attention_backward agrees"));
  REQUIRE_THAT(text, !Catch::Contains("MISMATCH"));
  REQUIRE_THAT(text, Catch::Contains("cross-check with nn::attention_forward (NH = 4)"));
  const std::string csv = testing::read_text(dir.file("out/scale.csv"));
  REQUIRE_THAT(csv, Catch::StartsWith("hs,var_raw,var_scaled"));
  const std::string js = testing::read_text(dir.file("out/multihead.json"));
  REQUIRE_THAT(js, Catch::Contains("\"NH\": 4"));
}

TEST_CASE("lesson 07's README quotes what part scale prints, and names its exercise",
          "[lesson07][docs]") {
  const std::string readme = testing::read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/07-attention/README.md");
  const lesson07::Options defaults;
  for (int hs : lesson07::scale_head_sizes()) {
    const lesson07::ScaleRow r = lesson07::measure_scale(hs, defaults.queries, defaults.keys, defaults.seed);
    for (const std::string& s : {fixed(r.var_raw, 2), fixed(r.var_scaled, 3), fixed(r.maxp_raw, 3)}) {
      INFO("hs = " << hs << ": the README should quote " << s);
      REQUIRE_THAT(readme, Catch::Contains(s));
    }
  }
  REQUIRE_THAT(readme, Catch::Contains("exercises/12_causal_attention_forward"));
}

TEST_CASE("lesson 07's README points the debugger at the line after the softmax", "[lesson07][docs]") {
  // The README says: break attention_lesson.cpp:186, just after a row's softmax.
  const std::string readme = testing::read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/07-attention/README.md");
  REQUIRE_THAT(readme, Catch::Contains("break attention_lesson.cpp:186 "));
  std::istringstream src(testing::read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/07-attention/attention_lesson.cpp"));
  std::string line;
  for (int n = 1; n <= 186 && std::getline(src, line); ++n) {
    if (n == 185) REQUIRE_THAT(line, Catch::Contains("// out_t = sum_t2 att[t2] v_t2"));
  }
  REQUIRE_THAT(line, Catch::Contains("for (int i = 0; i < hs; ++i) {"));
}
