// Stand-alone lesson 04: build target `lesson04`, run ./build/release/bin/lesson04 --help.
#include "lessons/04-cnn/cnn.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson04::Options>(
      "lesson04", "Lesson 04: convolutional networks", argc, argv, lesson04::add_options,
      lesson04::run);
}
