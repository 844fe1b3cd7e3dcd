// Lesson 13, part mpc. PLACEHOLDER written with the lesson's skeleton: its owner replaces this
// header (what the part does, its options, its JSON fields).
#pragma once

#include <CLI/CLI.hpp>

namespace lesson13 {

struct MpcOptions {};
inline void add_mpc_options(CLI::App&, MpcOptions&) {}

}  // namespace lesson13
