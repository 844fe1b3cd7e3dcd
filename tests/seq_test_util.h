// tests/seq_test_util.h: shared by the lesson 05 and 06 tests.
#pragma once

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lessons/05-rnn/seq_tasks.h"
#include "tests/test_util.h"

namespace testing {

// The rows of a "cell  Wh x   d=1 ..." table quoted in a README: (cell, scale) -> the five
// values at d = 1, 5, 10, 20, 50.
inline std::vector<std::pair<std::string, std::vector<double>>> quoted_gradient_rows(const std::string& readme) {
  std::vector<std::pair<std::string, std::vector<double>>> rows;
  std::istringstream lines(readme);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string cell, scale;
    words >> cell >> scale;
    if (cell != "rnn" && cell != "lstm") continue;
    std::vector<double> values;
    for (double v; words >> v;) values.push_back(v);
    if (values.size() == 5) rows.push_back({cell + " " + scale, values});
  }
  return rows;
}

// The README quotes what part 2 prints; this keeps the quote true to the code (to 5%:
// another CPU's SIMD width rounds the float matmuls differently).
inline void check_quoted_gradients(const std::string& readme_path, std::vector<std::pair<nn::CellType, double>> cases) {
  const auto quoted = quoted_gradient_rows(testing::read_text(readme_path));
  REQUIRE(quoted.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto rows = seqlab::gradient_vs_distance(cases[i].first, 64, 8, 60, {cases[i].second}, 42);
    const int ds[] = {1, 5, 10, 20, 50};
    for (int k = 0; k < 5; ++k) {
      double got = -1.0;
      for (const auto& r : rows)
        if (r.distance == ds[k]) got = r.norm;
      INFO(readme_path << ": row '" << quoted[i].first << "' at d=" << ds[k]);
      REQUIRE(got == Approx(quoted[i].second[static_cast<size_t>(k)]).epsilon(0.05));
    }
  }
}

}  // namespace testing
