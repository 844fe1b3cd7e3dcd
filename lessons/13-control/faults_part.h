// Lesson 13, part faults. PLACEHOLDER written with the lesson's skeleton: its owner replaces this
// header (what the part does, its options, its JSON fields).
#pragma once

#include <CLI/CLI.hpp>

namespace lesson13 {

struct FaultsOptions {};
inline void add_faults_options(CLI::App&, FaultsOptions&) {}

}  // namespace lesson13
