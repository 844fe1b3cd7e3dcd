// Lesson 11, part norm: LayerNorm (GPT-2) and RMSNorm (Llama) on the same rows. The diff is
// one line of the loop: RMSNorm subtracts no mean and adds no bias, so its row statistic is
// one sum (of squares) instead of two. Then the ladder's discipline: rmsnorm v2 against v1,
// the backward against finite differences in double, v1 and v2 timed through the harness.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench/ops.h"
#include "kernels/harness.h"
#include "kernels/layernorm.h"
#include "kernels/rmsnorm.h"
#include "lessons/11-modern/modern_lesson.h"
#include "nn/check.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"

namespace lesson11 {

namespace {

namespace h = kernels::harness;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// The mean and the root mean square of every element of `v`.
std::pair<double, double> mean_rms(const std::vector<float>& v) {
  double s = 0.0, s2 = 0.0;
  for (float x : v) s += x, s2 += static_cast<double>(x) * x;
  const double n = static_cast<double>(v.size());
  return {s / n, std::sqrt(s2 / n)};
}

// One op's ladder through the harness at one size: every rung validated against v1, then the
// valid ones timed (medians). Returns "op variant ms" rows as JSON objects and prints them.
std::string time_ladder(const h::OpBench& op, const std::string& size, bool quick, std::ostringstream& rows_json) {
  auto problem = op.make(size, 1);
  std::vector<size_t> chosen;
  for (size_t v = 0; v < op.variants.size(); ++v) chosen.push_back(v);
  std::ostringstream log;
  auto rows = h::validate_variants(op.name, *problem, op.variants, chosen, [](size_t) { return std::string(); }, log);
  h::TimingOptions t;
  t.repeats = quick ? 2 : 5;
  t.max_seconds = quick ? 0.2 : 1.0;
  h::time_valid(rows, *problem, chosen, t, h::cpu_clock(), log);
  std::string line;
  for (const auto& r : rows) {
    NN_CHECK(r.valid, op.name << " " << r.variant << " failed validation against v1: " << r.note << "\n" << log.str());
    const double ms = 1e3 * r.timing.median;
    std::printf("  %-18s %-3s %-14s %8.3f ms  (max |diff| vs v1 %.1e)\n", op.name.c_str(), r.variant.c_str(),
                r.name.c_str(), ms, r.max_abs_err);
    if (rows_json.tellp() > 0) rows_json << ", ";
    rows_json << "{\"op\": \"" << op.name << "\", \"variant\": \"" << r.variant << "\", \"ms\": " << jnum(ms) << "}";
  }
  return line;
}

}  // namespace

int run_norm_part(const Options& opts) {
  const int C = channels_of(opts);
  const int rows = opts.quick ? 32 : 1024;
  std::printf("== part norm: LayerNorm (GPT-2) vs RMSNorm (Llama), %d rows of C = %d\n", rows, C);
  std::printf("LayerNorm: out = (x - mean) / sqrt(var + eps) * w + b       two statistics, two reductions\n");
  std::printf("RMSNorm:   out = x / sqrt(mean(x^2) + eps) * w              one statistic, no bias\n");

  // Rows with a mean of their own (0.5 + N(0, 1)): where the two differ. With w = 1, b = 0
  // LayerNorm's output has mean 0 and rms 1 per row; RMSNorm's keeps the row's mean, scaled by
  // 1 / rms(x): mean 0.5 / sqrt(1.25) = 0.447, rms 1.
  nn::Rng rng(opts.seed);
  const size_t n = static_cast<size_t>(rows) * C;
  std::vector<float> x(n), w(C, 1.0f), b(C, 0.0f);
  for (float& v : x) v = 0.5f + rng.normal();
  std::vector<float> ln(n), mean(rows), rstd(rows), rms1(n), rrstd(rows), rms2(n), rrstd2(rows);
  kernels::layernorm_forward_v1<float>(ln.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, C);
  kernels::rmsnorm_forward_v1<float>(rms1.data(), rrstd.data(), x.data(), w.data(), rows, C, kernels::kRmsnormEps);
  const auto [ln_mean, ln_rms] = mean_rms(ln);
  const auto [rn_mean, rn_rms] = mean_rms(rms1);
  std::printf("rows of 0.5 + N(0,1), weight 1, bias 0:\n");
  std::printf("  layernorm out: mean %+.4f, rms %.4f   (centred and scaled)\n", ln_mean, ln_rms);
  std::printf("  rmsnorm   out: mean %+.4f, rms %.4f   (scaled only: the mean survives, as 0.5/sqrt(1.25) = 0.447)\n",
              rn_mean, rn_rms);
  std::printf("  row 0, first 4:  x");
  for (int i = 0; i < 4; ++i) std::printf(" %+.3f", x[i]);
  std::printf(" | ln");
  for (int i = 0; i < 4; ++i) std::printf(" %+.3f", ln[i]);
  std::printf(" | rms");
  for (int i = 0; i < 4; ++i) std::printf(" %+.3f", rms1[i]);
  std::printf("\n");

  // v2 (SIMD rows over threads) against v1 (the loops), forward and backward.
  kernels::rmsnorm_forward_v2(rms2.data(), rrstd2.data(), x.data(), w.data(), rows, C, kernels::kRmsnormEps);
  const double fwd_diff = std::max(max_abs_diff(rms1, rms2), max_abs_diff(rrstd, rrstd2));
  std::vector<float> dout(n), dx1(n, 0.0f), dx2(n, 0.0f), dw1(C, 0.0f), dw2(C, 0.0f);
  for (float& v : dout) v = rng.normal();
  kernels::rmsnorm_backward_v1<float>(dx1.data(), dw1.data(), dout.data(), x.data(), w.data(), rrstd.data(), rows, C);
  kernels::rmsnorm_backward_v2(dx2.data(), dw2.data(), dout.data(), x.data(), w.data(), rrstd.data(), rows, C);
  const double bwd_diff = std::max(max_abs_diff(dx1, dx2), max_abs_diff(dw1, dw2));
  std::printf("rmsnorm v2 vs v1: max |diff| forward %.2e, backward %.2e (sums in another order: a few ulps)\n",
              fwd_diff, bwd_diff);
  NN_CHECK(fwd_diff < 1e-4 && bwd_diff < 1e-2 * rows / 32.0 + 1e-3, "rmsnorm v2 disagrees with v1");

  // The backward against central differences, in double: L = sum(out * r) for a random r, so
  // dL/dout = r; check dL/dx and dL/dweight.
  const int gr = 3, gc = 8;
  std::vector<double> gx(gr * gc), gw(gc), r(gr * gc);
  for (double& v : gx) v = 0.3 + rng.normal();
  for (double& v : gw) v = 1.0 + 0.5 * rng.normal();
  for (double& v : r) v = rng.normal();
  auto loss = [&] {
    std::vector<double> out(gr * gc), st(gr);
    kernels::rmsnorm_forward_v1<double>(out.data(), st.data(), gx.data(), gw.data(), gr, gc, 1e-5);
    double L = 0.0;
    for (size_t i = 0; i < out.size(); ++i) L += out[i] * r[i];
    return L;
  };
  std::vector<double> out(gr * gc), st(gr), dgx(gr * gc, 0.0), dgw(gc, 0.0);
  kernels::rmsnorm_forward_v1<double>(out.data(), st.data(), gx.data(), gw.data(), gr, gc, 1e-5);
  kernels::rmsnorm_backward_v1<double>(dgx.data(), dgw.data(), r.data(), gx.data(), gw.data(), st.data(), gr, gc);
  const nn::GradCheckResult cx = nn::check_gradient(loss, gx, dgx);
  const nn::GradCheckResult cw = nn::check_gradient(loss, gw, dgw);
  const double grad_err = std::max(cx.max_rel_err, cw.max_rel_err);
  std::printf("gradient check of rmsnorm_backward_v1 (double, %d x %d, central differences h = 1e-6):\n", gr, gc);
  std::printf("  dx max rel err %.2e, dweight max rel err %.2e: %s\n", cx.max_rel_err, cw.max_rel_err,
              cx.ok && cw.ok ? "ok" : "FAILED");
  NN_CHECK(cx.ok && cw.ok, "rmsnorm_backward_v1 disagrees with finite differences:\n" << cx.report << cw.report);

  // v1 and v2 through the harness: validated against v1 first, then timed (medians).
  const std::string size = std::to_string(opts.quick ? 256 : 8192) + "x" + std::to_string(C);
  std::printf("timed through the harness (kernels/harness.h; validate, then median), %s, %d threads:\n", size.c_str(),
              kernels::harness::machine_info().omp_max_threads);
  std::ostringstream timings;
  time_ladder(kernels::bench::rmsnorm_bench(), size, opts.quick, timings);
  time_ladder(kernels::bench::rmsnorm_backward_bench(), size, opts.quick, timings);

  std::ostringstream js;
  js << "{\"rows\": " << rows << ", \"C\": " << C << ", \"layernorm_out_mean\": " << jnum(ln_mean)
     << ", \"layernorm_out_rms\": " << jnum(ln_rms) << ", \"rmsnorm_out_mean\": " << jnum(rn_mean)
     << ", \"rmsnorm_out_rms\": " << jnum(rn_rms) << ", \"v1_v2_max_diff\": " << jnum(fwd_diff)
     << ", \"backward_v1_v2_max_diff\": " << jnum(bwd_diff) << ", \"gradcheck_max_rel_err\": " << jnum(grad_err)
     << ", \"timing_size\": \"" << size << "\", \"timings\": [" << timings.str() << "]}";
  record_part("norm", js.str());
  return 0;
}

}  // namespace lesson11
