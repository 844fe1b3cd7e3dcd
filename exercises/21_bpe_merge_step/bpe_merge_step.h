// Exercise 21_bpe_merge_step (lesson 11): one step of byte-pair encoding's training loop,
// the heart of the GPT-2 / Llama tokenizers. You write the bodies in bpe_merge_step.cpp;
// `nnlab check` runs the tests in test.cpp.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ex {

// The adjacent pair (ids[i], ids[i + 1]) that occurs most often in `ids`. Among pairs with the
// same count, the smallest (left, right) (compare left first, then right): Hugging Face's
// tie-break. Every position counts, overlapping ones too: in {7, 7, 7} the pair (7, 7) occurs
// twice. Fewer than two ids: {-1, -1}.
std::pair<int32_t, int32_t> most_frequent_pair(const std::vector<int32_t>& ids);

// `ids` with every occurrence of the pair (a, b) replaced by `new_id`, scanning left to right:
// a pair that was merged is consumed, so {7, 7, 7} with (7, 7) -> 9 gives {9, 7}.
std::vector<int32_t> merge_pair(const std::vector<int32_t>& ids, int32_t a, int32_t b, int32_t new_id);

}  // namespace ex
