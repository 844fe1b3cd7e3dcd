// fuzz/gpt_checkpoint_text.h: a GPT checkpoint described as text, written as a real file.
//
// fuzz_gpt_checkpoint mutates this text, and tests/test_fuzz_regressions.cpp replays what it
// found: both write the file with nn::save_safetensors, so its checksum is right whatever
// the checksum covers, and what is tested is what the GPT loader does with the contents.
//
//   key=value           a metadata entry (the value runs to the end of the line)
//   @name d0 d1 ...     a tensor of that shape (at most 65536 elements; more: line ignored)
//   !name text          fill that tensor with strtof(text): "nan", "inf", "-0", "1e30", ...
//
// Other lines are ignored; the elements of a tensor without a fill are small numbers.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "nn/checkpoint.h"

namespace fuzz {

struct DescribedCheckpoint {
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::vector<float>> values;
};

inline DescribedCheckpoint describe_checkpoint(std::string_view text) {
  constexpr int64_t kMaxTensorElements = 65536;
  DescribedCheckpoint d;
  std::map<std::string, std::string> fills;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty()) continue;
    if (line[0] == '@' || line[0] == '!') {
      std::istringstream in(line.substr(1));
      std::string name;
      in >> name;
      if (name.empty() || name == "__metadata__") continue;
      if (line[0] == '!') {
        std::string v;
        in >> v;
        fills[name] = v;
        continue;
      }
      std::vector<int64_t> shape;
      int64_t numel = 1;
      long long dim = 0;
      bool ok = true;
      while (in >> dim) {
        if (dim < 0 || dim > kMaxTensorElements || (dim > 0 && numel > kMaxTensorElements / dim)) {
          ok = false;
          break;
        }
        numel *= dim;
        shape.push_back(dim);
      }
      if (ok) d.shapes[name] = shape;
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    d.metadata[line.substr(0, eq)] = line.substr(eq + 1);
  }
  for (const auto& [name, shape] : d.shapes) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
    if (const auto it = fills.find(name); it != fills.end()) {
      const float f = std::strtof(it->second.c_str(), nullptr);
      for (float& x : v) x = f;
    }
    d.values[name] = std::move(v);
  }
  return d;
}

// Writes the described checkpoint to `path`, NaN and infinity included (a file as a bug or
// a hand edit could leave it: what the loader must refuse); nn::Error when the writer refuses
// the description (e.g. a metadata key the writer reserves).
inline void write_described_checkpoint(const std::string& path, std::string_view text) {
  const DescribedCheckpoint d = describe_checkpoint(text);
  std::vector<nn::TensorRef> refs;
  for (const auto& [name, shape] : d.shapes) refs.push_back({name, shape, d.values.at(name).data()});
  nn::save_safetensors(path, refs, d.metadata, nn::NonFinite::Allow);
}

}  // namespace fuzz
