// Lesson 13, part export. PLACEHOLDER written with the lesson's skeleton: its owner replaces this
// header (what the part does, its options, its JSON fields).
#pragma once

#include <CLI/CLI.hpp>

namespace lesson13 {

struct ExportOptions {};
inline void add_export_options(CLI::App&, ExportOptions&) {}

}  // namespace lesson13
