// Lesson 11, part swiglu: GPT-2's MLP is  proj(gelu(fc(x)))  with fc (4C, C) and proj (C, 4C)
// and their biases; Llama's is  down(silu(gate(x)) * up(x))  with three bias-free matrices of
// H x C. With H = 8C/3 (rounded up to 32, gpt::default_ffn_hidden) the parameter count stays
// ~8 C^2: the third matrix is paid for by a narrower hidden layer. The gate op itself is
// kernels/swiglu.h: v2 against v1, and the backward against finite differences.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "gpt/model.h"
#include "kernels/swiglu.h"
#include "lessons/11-modern/modern_lesson.h"
#include "nn/check.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"

namespace lesson11 {

int run_swiglu_part(const Options& opts) {
  const int C = channels_of(opts);
  const int H = gpt::default_ffn_hidden(C);
  std::printf("== part swiglu: GELU MLP (GPT-2) vs SwiGLU MLP (Llama) at C = %d\n", C);
  const long long c = C, h4 = 4LL * C, h = H;
  const long long gelu_w = 2 * h4 * c, gelu_b = h4 + c;
  const long long swiglu = 3 * h * c;
  std::printf("  GELU MLP:   fc (4C x C) + proj (C x 4C) = %lld weights + %lld biases = %lld\n", gelu_w, gelu_b,
              gelu_w + gelu_b);
  std::printf("  SwiGLU MLP: gate, up (H x C) + down (C x H), H = 8C/3 rounded up to 32 = %d: %lld weights, no biases\n",
              H, swiglu);
  std::printf("  SwiGLU / GELU weights: %.4f (8C^2 vs 3 H C); activations per token: 4C = %lld vs 2H = %lld\n",
              static_cast<double>(swiglu) / static_cast<double>(gelu_w), h4, 2 * h);
  std::printf("  out = silu(g) * u, silu(g) = g / (1 + exp(-g)); dg = dout u s (1 + g (1 - s)), du = dout silu(g)\n");

  // v2 (SIMD poly_exp over threads) against v1 (std::exp loops), on a fused gate_up
  // projection (rows, 2H): g = the first H floats of a row, u = the next H (ld = 2H).
  nn::Rng rng(opts.seed);
  const int rows = opts.quick ? 16 : 512;
  std::vector<float> gu(static_cast<size_t>(rows) * 2 * H), dout(static_cast<size_t>(rows) * H);
  for (float& v : gu) v = 3.0f * rng.normal();
  for (float& v : dout) v = rng.normal();
  std::vector<float> o1(dout.size()), o2(dout.size()), d1(gu.size(), 0.0f), d2(gu.size(), 0.0f);
  kernels::swiglu_forward_v1<float>(o1.data(), gu.data(), gu.data() + H, rows, H, 2 * H);
  kernels::swiglu_forward_v2(o2.data(), gu.data(), gu.data() + H, rows, H, 2 * H);
  kernels::swiglu_backward_v1<float>(d1.data(), d1.data() + H, dout.data(), gu.data(), gu.data() + H, rows, H, 2 * H);
  kernels::swiglu_backward_v2(d2.data(), d2.data() + H, dout.data(), gu.data(), gu.data() + H, rows, H, 2 * H);
  // The bench's tolerance (kernels/bench/llama_ops.cpp): |v2 - v1| <= 1e-6 + 1e-5 |v1|, v2's
  // exp being a polynomial good to ~1e-7 relative. The figure printed: the largest |diff|, and
  // the largest share of the allowed error that any element used.
  double diff = 0.0, used = 0.0;
  auto compare = [&](const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
      diff = std::max(diff, d);
      used = std::max(used, d / (1e-6 + 1e-5 * std::fabs(static_cast<double>(a[i]))));
    }
  };
  compare(o1, o2);
  compare(d1, d2);
  std::printf("swiglu v2 vs v1 (%d x %d, from a fused (rows, 2H) projection): max |diff| %.2e, %.0f%% of the"
              " tolerance 1e-6 + 1e-5 |v1| (forward and backward)\n", rows, H, diff, 100.0 * used);
  NN_CHECK(used <= 1.0, "swiglu v2 disagrees with v1 beyond 1e-6 + 1e-5 |v1|");

  // The backward against central differences in double: L = sum(out * r).
  const int gr = 3, gh = 6;
  std::vector<double> ggu(gr * 2 * gh), r(gr * gh), dgu(ggu.size(), 0.0);
  for (double& v : ggu) v = 2.0 * rng.normal();
  for (double& v : r) v = rng.normal();
  auto loss = [&] {
    std::vector<double> out(gr * gh);
    kernels::swiglu_forward_v1<double>(out.data(), ggu.data(), ggu.data() + gh, gr, gh, 2 * gh);
    double L = 0.0;
    for (size_t i = 0; i < out.size(); ++i) L += out[i] * r[i];
    return L;
  };
  kernels::swiglu_backward_v1<double>(dgu.data(), dgu.data() + gh, r.data(), ggu.data(), ggu.data() + gh, gr, gh, 2 * gh);
  const nn::GradCheckResult chk = nn::check_gradient(loss, ggu, dgu);
  std::printf("gradient check of swiglu_backward_v1 (double, %d x %d gate and up): max rel err %.2e: %s\n", gr, gh,
              chk.max_rel_err, chk.ok ? "ok" : "FAILED");
  NN_CHECK(chk.ok, "swiglu_backward_v1 disagrees with finite differences:\n" << chk.report);

  std::ostringstream js;
  js << "{\"C\": " << C << ", \"H\": " << H << ", \"gelu_mlp_params\": " << gelu_w + gelu_b
     << ", \"gelu_mlp_weights\": " << gelu_w << ", \"swiglu_mlp_params\": " << swiglu
     << ", \"v1_v2_max_diff\": " << jnum(diff) << ", \"gradcheck_max_rel_err\": " << jnum(chk.max_rel_err) << "}";
  record_part("swiglu", js.str());
  return 0;
}

}  // namespace lesson11
