// Tests of exercise 21_bpe_merge_step. Worked examples by hand, the edge cases (overlapping
// pairs, ties, short inputs), and the library's trainer (nn::BpeTokenizer::train, io/bpe.h)
// on a word without spaces: replaying most_frequent_pair + merge_pair must learn the same
// merges, as byte strings, in the same order.
#include <catch2/catch.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "exercises/21_bpe_merge_step/bpe_merge_step.h"
#include "io/bpe.h"

namespace {

using Ids = std::vector<int32_t>;

std::string show(const Ids& ids) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? ", " : "") << ids[i];
  os << "}";
  return os.str();
}

Ids bytes_of(const std::string& s) {
  Ids ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

}  // namespace

TEST_CASE("bpe merge step: a worked example, 'aaabdaaabac'", "[21_bpe_merge_step]") {
  // Wikipedia's example: a=97, b=98, c=99, d=100. The pairs: aa x4, ab x2, ba x1, bd x1,
  // da x1, ac x1: (a, a) wins; merging it left to right gives Z a b d Z a b a c.
  const Ids ids = bytes_of("aaabdaaabac");
  const auto p = ex::most_frequent_pair(ids);
  INFO("ids = " << show(ids) << " ('aaabdaaabac'): (97, 97) occurs 4 times, more than any other pair");
  CHECK(p.first == 97);
  CHECK(p.second == 97);
  const Ids merged = ex::merge_pair(ids, 97, 97, 256);
  INFO("merge_pair(ids, 97, 97, 256) gave " << show(merged));
  if (merged == Ids{97, 256, 98, 100, 97, 256, 98, 97, 99}) {
    FAIL("Likely cause: the scan starts a merge at the second 'a' of 'aaa': merge left to right,"
         " the first two a's become 256");
  }
  CHECK(merged == Ids{256, 97, 98, 100, 256, 97, 98, 97, 99});
  // the next step: (256, 97) x2 and (97, 98) x2 tie: the smaller pair (97, 98) wins
  const auto p2 = ex::most_frequent_pair(merged);
  INFO("after the merge, (97, 98) and (256, 97) both occur twice: the smaller pair, (97, 98), wins the tie");
  CHECK(p2.first == 97);
  CHECK(p2.second == 98);
}

TEST_CASE("bpe merge step: overlapping pairs are counted, merged pairs are consumed", "[21_bpe_merge_step]") {
  const Ids ids = {7, 7, 7, 7, 7};
  const auto p = ex::most_frequent_pair(ids);
  CHECK(p == std::make_pair(int32_t{7}, int32_t{7}));
  const Ids merged = ex::merge_pair(ids, 7, 7, 300);
  INFO("merge_pair({7, 7, 7, 7, 7}, 7, 7, 300) gave " << show(merged));
  CHECK(merged == Ids{300, 300, 7});
  CHECK(ex::merge_pair({1, 2, 3}, 2, 1, 9) == Ids{1, 2, 3});  // order matters: (2, 1) is not (1, 2)
  CHECK(ex::merge_pair({1, 2, 1, 2}, 1, 2, 5) == Ids{5, 5});
  CHECK(ex::merge_pair({}, 1, 2, 5).empty());
  CHECK(ex::merge_pair({1}, 1, 2, 5) == Ids{1});
}

TEST_CASE("bpe merge step: ties go to the smallest (left, right), short inputs have no pair", "[21_bpe_merge_step]") {
  // (5, 1), (1, 3) and (3, 2) once each: the smallest is (1, 3), not the first seen (5, 1)
  const auto p = ex::most_frequent_pair({5, 1, 3, 2});
  INFO("pairs (5, 1), (1, 3), (3, 2) once each: the smallest pair wins, got (" << p.first << ", " << p.second << ")");
  if (p == std::make_pair(int32_t{5}, int32_t{1})) FAIL("Likely cause: the first pair seen won the tie, not the smallest");
  if (p == std::make_pair(int32_t{3}, int32_t{2})) FAIL("Likely cause: the last pair seen won the tie, not the smallest");
  CHECK(p == std::make_pair(int32_t{1}, int32_t{3}));
  CHECK(ex::most_frequent_pair({}) == std::make_pair(int32_t{-1}, int32_t{-1}));
  CHECK(ex::most_frequent_pair({42}) == std::make_pair(int32_t{-1}, int32_t{-1}));
  CHECK(ex::most_frequent_pair({4, 2}) == std::make_pair(int32_t{4}, int32_t{2}));
}

TEST_CASE("bpe merge step: ten steps learn the library trainer's merges", "[21_bpe_merge_step]") {
  // One pre-token (letters only, no spaces), so the library's word-by-word counts are this
  // sequence's counts. Its ids differ from raw bytes (HF orders the bytes by their GPT-2
  // characters), so the merges are compared as byte strings.
  const std::string word = "abracadabrabarbarabracadabraabbacaddabracabra";
  const int steps = 10;
  const nn::BpeTokenizer tok = nn::BpeTokenizer::train(word, 256 + steps);
  REQUIRE(tok.merges().size() == static_cast<size_t>(steps));
  Ids ids = bytes_of(word);
  std::vector<std::string> text(256);  // id -> its bytes
  for (int b = 0; b < 256; ++b) text[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
  for (int k = 0; k < steps; ++k) {
    const auto [a, b] = ex::most_frequent_pair(ids);
    REQUIRE(a >= 0);
    const auto& m = tok.merges()[static_cast<size_t>(k)];
    INFO("step " << k << ": you merged '" << text[static_cast<size_t>(a)] << "' + '" << text[static_cast<size_t>(b)]
                 << "', the library '" << tok.vocab()[static_cast<size_t>(m.left)] << "' + '"
                 << tok.vocab()[static_cast<size_t>(m.right)] << "'");
    REQUIRE(text[static_cast<size_t>(a)] == tok.vocab()[static_cast<size_t>(m.left)]);
    REQUIRE(text[static_cast<size_t>(b)] == tok.vocab()[static_cast<size_t>(m.right)]);
    ids = ex::merge_pair(ids, a, b, 256 + k);
    text.push_back(text[static_cast<size_t>(a)] + text[static_cast<size_t>(b)]);
  }
  // and the text is now what the library's encode gives, token for token
  const std::vector<int32_t> lib = tok.encode(word);
  REQUIRE(lib.size() == ids.size());
  for (size_t i = 0; i < ids.size(); ++i) CHECK(text[static_cast<size_t>(ids[i])] == tok.vocab()[static_cast<size_t>(lib[i])]);
}
