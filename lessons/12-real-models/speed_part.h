// Lesson 12, part speed: PLACEHOLDER (the scaffold); its owner replaces this file.
#pragma once

#include <CLI/CLI.hpp>

namespace lesson12 {

struct SpeedOptions {};
inline void add_speed_options(CLI::App&, SpeedOptions&) {}

}  // namespace lesson12
