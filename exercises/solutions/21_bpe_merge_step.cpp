// Reference solution of exercise 21_bpe_merge_step (lesson 11). Try it yourself first:
// exercises/21_bpe_merge_step/bpe_merge_step.cpp.
#include <cstddef>
#include <map>

#include "exercises/21_bpe_merge_step/bpe_merge_step.h"

namespace ex {

std::pair<int32_t, int32_t> most_frequent_pair(const std::vector<int32_t>& ids) {
  std::map<std::pair<int32_t, int32_t>, int> counts;  // ordered by (left, right)
  for (size_t i = 0; i + 1 < ids.size(); ++i) ++counts[{ids[i], ids[i + 1]}];
  std::pair<int32_t, int32_t> best = {-1, -1};
  int best_count = 0;
  for (const auto& [pair, count] : counts) {
    if (count > best_count) {  // strictly more: the first (smallest) pair wins a tie
      best = pair;
      best_count = count;
    }
  }
  return best;
}

std::vector<int32_t> merge_pair(const std::vector<int32_t>& ids, int32_t a, int32_t b, int32_t new_id) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  size_t i = 0;
  while (i < ids.size()) {
    if (i + 1 < ids.size() && ids[i] == a && ids[i + 1] == b) {
      out.push_back(new_id);
      i += 2;  // both consumed: an overlapping pair starting at i + 1 is not merged
    } else {
      out.push_back(ids[i]);
      i += 1;
    }
  }
  return out;
}

}  // namespace ex
