// Lesson 12, part hf: PLACEHOLDER (the scaffold); its owner replaces this file.
#pragma once

#include <CLI/CLI.hpp>

namespace lesson12 {

struct HfPartOptions {};
inline void add_hf_options(CLI::App&, HfPartOptions&) {}

}  // namespace lesson12
