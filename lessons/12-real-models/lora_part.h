// Lesson 12, part lora: PLACEHOLDER (the scaffold); its owner replaces this file.
#pragma once

#include <CLI/CLI.hpp>

namespace lesson12 {

struct LoraOptions {};
inline void add_lora_options(CLI::App&, LoraOptions&) {}

}  // namespace lesson12
