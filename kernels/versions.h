// kernels/versions.h: the one lookup every op's versions table shares.
//
// Each op keeps a table of its numbered versions (struct with `number`, `name`, ...), in
// ladder order; `find_version` picks one by number ("3"), by number with a v ("v3") or by
// name ("cache-blocked"), and otherwise throws std::invalid_argument naming what exists.
//
// OpVersion<Fn> is that struct for an op whose versions all share the signature Fn, on the
// CPU and on the GPU alike: the CPU ladders (kernels/attention.h, layernorm.h, gelu.h, ...)
// and the CUDA ladders (kernels/cuda/device.h's Kernels table) both list OpVersions, so a
// backend is a table of named rungs (gpt/backend_cpu.cpp, gpt/backend_cuda.cpp) and the
// tests and the one harness (kernels/harness.h) iterate them the same way. What only a GPU
// version has to say (the oldest compute capability it runs on, matmul's plain-only rungs,
// attention's scratch bytes) sits in trailing fields a CPU version leaves at their defaults.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace kernels {

// What a version needs from the machine beyond its signature. A CPU rung needs nothing.
struct Requirements {
  // The oldest CUDA compute capability (10 * major + minor) the version runs on, set by the
  // newest hardware feature it uses (kernels/cuda/device.h names them: NNLAB_SM_MAXWELL,
  // NNLAB_SM_AMPERE); 0 for CPU versions, which run anywhere the build does.
  int min_sm = 0;
  // matmul only: the version computes the plain product C = A.B alone (lesson 09's CUDA
  // v2-v8) and refuses a transpose, a bias or accumulate; the harness skips it there.
  bool plain_only = false;
};

// WorkspaceFn: how a version says how much scratch it needs for a problem (attention's
// (B,NH,T,T) scores on the GPU: OpVersion<AttentionFn, WorkspaceFn>); ops without scratch
// leave it std::nullptr_t and never look at it.
template <class Fn, class WorkspaceFn = std::nullptr_t>
struct OpVersion {
  int number;           // 3: the rung, in ladder order from 1 (the plain-loop reference)
  const char* name;     // "cache-blocked"
  const char* summary;  // one line: what it changes compared with the rung below, and why
  Fn fn;
  Requirements needs = {};
  WorkspaceFn workspace = nullptr;

  // "v3": how the benches, the plans and the tables name the rung (derived, never typed).
  std::string id() const {
    std::string id = "v";  // appended, not "v" + to_string(...): GCC 12 warns falsely (-Wrestrict)
    id += std::to_string(number);
    return id;
  }
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
