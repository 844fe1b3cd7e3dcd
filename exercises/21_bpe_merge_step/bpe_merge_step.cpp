// Exercise 21_bpe_merge_step (lesson 11): one step of byte-pair encoding's training loop.
//
// Read first: lesson 11's README (lessons/11-modern/README.md), the part on BPE; the library's
// trainer is nn::BpeTokenizer::train in io/bpe.cpp (its v1 is this loop, run on every word).
//
// Training starts from the bytes of the text (ids 0..255) and repeats:
//     (a, b) = the most frequent adjacent pair          most_frequent_pair
//     ids    = ids with every (a, b) replaced by a new id (256, 257, ...)   merge_pair
// Each step adds one token to the vocabulary and shortens the text; after k steps the text is
// encoded with 256 + k tokens. Encoding new text replays the same merges in the same order.
//
// Check your work: `nnlab check` (or `nnlab check --only 21_bpe_merge_step`).
#include "exercises/21_bpe_merge_step/bpe_merge_step.h"

#include <cstddef>
#include <map>

namespace ex {

std::pair<int32_t, int32_t> most_frequent_pair(const std::vector<int32_t>& ids) {
  // TODO: count every adjacent pair (a std::map keyed by the pair iterates in (left, right)
  //       order, which makes the tie-break easy), then return the one with the highest count,
  //       the smallest pair among equals; {-1, -1} when there is no pair at all.
  (void)ids;
  return {-1, -1};
}

std::vector<int32_t> merge_pair(const std::vector<int32_t>& ids, int32_t a, int32_t b, int32_t new_id) {
  // TODO: walk ids left to right; where ids[i] == a and ids[i + 1] == b, emit new_id and skip
  //       both, else emit ids[i] and move on by one.
  (void)a;
  (void)b;
  (void)new_id;
  return ids;
}

}  // namespace ex
