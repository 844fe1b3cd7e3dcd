// Lesson 13, part soft-sensor. PLACEHOLDER written with the lesson's skeleton: its owner replaces this
// header (what the part does, its options, its JSON fields).
#pragma once

#include <CLI/CLI.hpp>

namespace lesson13 {

struct SoftSensorOptions {};
inline void add_soft_sensor_options(CLI::App&, SoftSensorOptions&) {}

}  // namespace lesson13
