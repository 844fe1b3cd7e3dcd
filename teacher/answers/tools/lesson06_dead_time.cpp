// Lesson 06 question 5: find the plant's dead time from data. Fits the lesson's ARX(na=2, nb)
// (lessons::fit_arx) on the training run for nb = 1..N and scores it one step ahead on the
// validation run (level RMSE, mm); then prints the pump coefficients of ARX(na=2, nb=N) per lag.
// Usage: drv DEAD_TIME [N]. The plant's dead time is only used to simulate the data.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "lessons/common/plant.h"
int main(int argc, char** argv) {
  const int dead = std::atoi(argv[1]);
  const int N = argc > 2 ? std::atoi(argv[2]) : 40;
  auto sim = [&](int steps, uint64_t seed) {
    lessons::TankConfig c;
    c.steps = steps;
    c.dead_time = dead;
    c.seed = seed;
    return lessons::simulate_tank(c);
  };
  const lessons::Series tr = sim(20000, 1), va = sim(5000, 2);
  const std::vector<float> ytr = tr.columns({"level", "outflow"}), utr = tr.columns({"pump"});
  const std::vector<float> yva = va.columns({"level", "outflow"}), uva = va.columns({"pump"});
  const int from = N + 2;
  for (int nb = 1; nb <= N; ++nb) {
    const lessons::ArxModel m = lessons::fit_arx(ytr, utr, tr.steps, 2, 1, 2, nb);
    const std::vector<float> p = lessons::arx_predict(m, yva, uva, va.steps);
    double s = 0;
    int n = 0;
    for (int t = from; t < va.steps - 1; ++t, ++n) {
      const double d = p[static_cast<size_t>(t) * 2] - yva[static_cast<size_t>(t + 1) * 2];
      s += d * d;
    }
    std::printf("nb %2d  level RMSE %.3f mm\n", nb, 1000.0 * std::sqrt(s / n));
  }
  const lessons::ArxModel m = lessons::fit_arx(ytr, utr, tr.steps, 2, 1, 2, N);
  std::printf("ARX(na=2, nb=%d), level row: pump coefficient per lag k (u(t-k) -> level(t+1)), x1000\n", N);
  for (int k = 0; k < N; ++k) std::printf("  k %2d  %8.4f\n", k, 1000.0 * m.theta[static_cast<size_t>(m.na * m.ny + k * m.nu)]);
}
