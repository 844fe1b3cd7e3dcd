// Stand-alone lesson 01: build target `lesson01`, run ./build/release/bin/lesson01 --help.
#include "lessons/01-neuron/neuron.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson01::Options>(
      "lesson01", "Lesson 01: a neuron and an MLP in plain loops", argc, argv, lesson01::add_options,
      lesson01::run);
}
