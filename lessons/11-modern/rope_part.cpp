// Lesson 11, part rope: rotary position embedding (kernels/rope.h) on one q and one k. GPT-2
// adds a learned vector wpe[p] to the token's embedding; Llama adds nothing and instead turns
// q and k, pair (i, i + hs/2) by the angle p * theta^(-2i/hs). A rotation by a and then the
// transpose of a rotation by b is a rotation by a - b, so q_p . k_p' depends on p - p' only:
// the part prints the dot products for pairs of positions with equal differences.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/rope.h"
#include "lessons/11-modern/modern_lesson.h"
#include "nn/check.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"

namespace lesson11 {

int run_rope_part(const Options& opts) {
  const int hs = opts.quick ? 16 : 64;
  const double theta = kernels::kRopeTheta;
  const int maxT = opts.quick ? 128 : 4096;
  std::printf("== part rope: rotary position embedding, one head of hs = %d, theta = %.0f\n", hs, theta);
  std::printf("pairs (i, i + hs/2) turn by p * theta^(-2i/hs): out_i = x_i cos - x_{i+hs/2} sin,"
              " out_{i+hs/2} = x_{i+hs/2} cos + x_i sin\n");
  std::vector<double> cos(static_cast<size_t>(maxT) * hs / 2), sin(cos.size());
  kernels::rope_tables<double>(cos.data(), sin.data(), maxT, hs, theta);

  nn::Rng rng(opts.seed);
  std::vector<double> q(hs), k(hs);
  for (double& v : q) v = rng.normal();
  for (double& v : k) v = rng.normal();
  // q at position p, k at position p2: one token (B = T = 1, NH = 1) rotated with pos0 = p.
  auto rotated = [&](const std::vector<double>& x, int p) {
    std::vector<double> out(hs);
    kernels::rope_forward_v1<double>(out.data(), x.data(), cos.data(), sin.data(), 1, 1, 1, hs, hs, p);
    return out;
  };
  auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  double plain = dot(q, k);
  std::printf("q . k unrotated: %+.6f\n", plain);
  const int far = maxT - 4;
  const std::vector<std::pair<int, int>> pairs = {{3, 0}, {10, 7}, {100, 97}, {far, far - 3},
                                                  {0, 0}, {50, 50}, {far, far},
                                                  {9, 0}, {40, 31}, {far - 1, far - 10}};
  std::printf("  %6s %6s %6s   q_p . k_p'\n", "p", "p'", "p-p'");
  std::ostringstream pj;
  double spread = 0.0;
  std::vector<std::pair<int, double>> by_diff;
  for (const auto& [p, p2] : pairs) {
    const double d = dot(rotated(q, p), rotated(k, p2));
    std::printf("  %6d %6d %6d   %+.12f\n", p, p2, p - p2, d);
    for (const auto& [diff, other] : by_diff) {
      if (diff == p - p2) spread = std::max(spread, std::fabs(d - other));
    }
    by_diff.emplace_back(p - p2, d);
    if (pj.tellp() > 0) pj << ", ";
    pj << "{\"p\": " << p << ", \"p2\": " << p2 << ", \"diff\": " << p - p2 << ", \"dot\": " << jnum(d) << "}";
  }
  std::printf("equal p - p' give equal dot products: largest spread %.2e (double rounding): attention sees only"
              " the offset\n", spread);
  NN_CHECK(spread < 1e-9, "RoPE dot products at equal offsets differ by " << spread);

  // v2 (SIMD pairs over threads) against v1 on a qkv-shaped buffer: q of every token, from a
  // KV-cache offset pos0 = 5.
  const int B = 2, T = opts.quick ? 16 : 256, NH = 4, C = NH * hs, pos0 = 5;
  std::vector<float> fcos(static_cast<size_t>(T + pos0) * hs / 2), fsin(fcos.size());
  kernels::rope_tables<float>(fcos.data(), fsin.data(), T + pos0, hs, theta);
  std::vector<float> qkv(static_cast<size_t>(B) * T * 3 * C);
  for (float& v : qkv) v = rng.normal();
  std::vector<float> o1 = qkv, o2 = qkv;
  kernels::rope_forward_v1<float>(o1.data(), qkv.data(), fcos.data(), fsin.data(), B, T, NH, hs, 3 * C, pos0);
  kernels::rope_forward_v2(o2.data(), qkv.data(), fcos.data(), fsin.data(), B, T, NH, hs, 3 * C, pos0);
  double v_diff = 0.0;
  for (size_t i = 0; i < o1.size(); ++i) v_diff = std::max(v_diff, std::fabs(static_cast<double>(o1[i]) - o2[i]));
  std::printf("rope v2 vs v1 on q of a qkv buffer (%d x %d x %d heads, pos0 = %d): max |diff| %.2e\n", B, T, NH, pos0,
              v_diff);
  NN_CHECK(v_diff < 1e-5, "rope v2 disagrees with v1 by " << v_diff);

  // The backward against central differences: L = sum(rope(x) * r), dL/dx = rope_backward(r).
  const int gT = 3, gNH = 2, ghs = 8, gpos0 = 2;
  std::vector<double> gcos((gT + gpos0) * ghs / 2), gsin(gcos.size());
  kernels::rope_tables<double>(gcos.data(), gsin.data(), gT + gpos0, ghs, theta);
  const int n = gT * gNH * ghs;
  std::vector<double> gx(n), r(n), dx(n);
  for (double& v : gx) v = rng.normal();
  for (double& v : r) v = rng.normal();
  auto loss = [&] {
    std::vector<double> out(n);
    kernels::rope_forward_v1<double>(out.data(), gx.data(), gcos.data(), gsin.data(), 1, gT, gNH, ghs, gNH * ghs, gpos0);
    double L = 0.0;
    for (int i = 0; i < n; ++i) L += out[i] * r[i];
    return L;
  };
  kernels::rope_backward_v1<double>(dx.data(), r.data(), gcos.data(), gsin.data(), 1, gT, gNH, ghs, gNH * ghs, gpos0);
  const nn::GradCheckResult c = nn::check_gradient(loss, gx, dx);
  std::printf("gradient check of rope_backward_v1 (double, %d tokens x %d heads x %d, pos0 = %d): max rel err %.2e: %s\n",
              gT, gNH, ghs, gpos0, c.max_rel_err, c.ok ? "ok" : "FAILED");
  NN_CHECK(c.ok, "rope_backward_v1 disagrees with finite differences:\n" << c.report);

  std::ostringstream js;
  js << "{\"hs\": " << hs << ", \"theta\": " << jnum(theta) << ", \"unrotated_dot\": " << jnum(plain)
     << ", \"pairs\": [" << pj.str() << "], \"max_spread_equal_diff\": " << jnum(spread)
     << ", \"v1_v2_max_diff\": " << jnum(v_diff) << ", \"gradcheck_max_rel_err\": " << jnum(c.max_rel_err) << "}";
  record_part("rope", js.str());
  return 0;
}

}  // namespace lesson11
