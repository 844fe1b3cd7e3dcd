// tests/lesson10_test_util.h: what the lesson-10 tests share: a small corpus to train the
// quick models on, and the values of a key in a part's JSON record.
#pragma once

#include <cmath>
#include <cstddef>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "nn/rng.h"
#include "tests/test_util.h"

namespace testing {

// A Shakespeare-flavoured text of at least `min_chars` characters (seeded: the same every
// run), written to <dir>/corpus.txt; returns its path.
inline std::string write_lesson10_corpus(const TempDir& dir, size_t min_chars) {
  std::string text;
  nn::Rng rng(10);
  const char* words[] = {"ROMEO: ", "speak ", "love, ", "night.\n", "JULIET: ", "the ", "moon "};
  while (text.size() < min_chars) text += words[rng.below(7)];
  const std::string path = dir.file("corpus.txt");
  std::ofstream(path) << text;
  return path;
}

// Every number written after "key": in the JSON text, in order (null, what the writers put
// for a value that is not finite, reads as NaN).
inline std::vector<double> numbers_of(const std::string& json, const std::string& key) {
  std::vector<double> out;
  const std::regex re("\"" + key + "\": (null|-?[0-9][0-9.eE+-]*)");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), re); it != std::sregex_iterator(); ++it) {
    const std::string v = (*it)[1].str();
    out.push_back(v == "null" ? std::nan("") : std::stod(v));
  }
  return out;
}

// Every string written after "key": in the JSON text, in order.
inline std::vector<std::string> strings_of(const std::string& json, const std::string& key) {
  std::vector<std::string> out;
  const std::regex re("\"" + key + "\": \"([^\"]*)\"");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), re); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

}  // namespace testing
