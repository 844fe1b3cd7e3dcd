// Stand-alone lesson 02: build target `lesson02`, run ./build/release/bin/lesson02 --help.
#include "lessons/02-backprop/backprop.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson02::Options>(
      "lesson02", "Lesson 02: backprop and gradient descent", argc, argv, lesson02::add_options,
      lesson02::run);
}
