// kernels/versions.h: the one lookup every op's versions table shares.
//
// Each op keeps a table of its numbered versions (struct with `number`, `name`, ...), in
// ladder order; `find_version` picks one by number ("3"), by number with a v ("v3") or by
// name ("cache-blocked"), and otherwise throws std::invalid_argument naming what exists.
//
// OpVersion<Fn> is that struct for an op whose versions all share the signature Fn: the
// GPT training ops (kernels/attention.h, layernorm.h, gelu.h, ...) use it, so a backend is
// a table of named rungs (gpt/backend_cpu.cpp) and the tests and the bench iterate them.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace kernels {

template <class Fn>
struct OpVersion {
  int number;
  const char* name;
  const char* summary;
  Fn fn;
};

template <class Version>
const Version& find_version(const std::vector<Version>& versions, const std::string& number_or_name,
                            const char* op) {
  std::string names;
  for (const Version& v : versions) {
    const std::string number = std::to_string(v.number);
    const bool with_v = number_or_name.size() > 1 && number_or_name[0] == 'v' &&
                        number_or_name.compare(1, std::string::npos, number) == 0;
    if (number_or_name == number || with_v || number_or_name == v.name) {
      return v;
    }
    names += names.empty() ? "" : ", ";
    names += v.name;
  }
  std::string message = "unknown ";
  message += op;
  message += " version '" + number_or_name + "': use a number 1.." + std::to_string(versions.size()) +
             " or a name (" + names + ")";
  throw std::invalid_argument(message);
}

}  // namespace kernels
