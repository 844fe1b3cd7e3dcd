// Stand-alone lesson 03: build target `lesson03`, run ./build/release/bin/lesson03 --help.
#include "lessons/03-matmul/matmul_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson03::Options>(
      "lesson03", "Lesson 03: matmul from loops to SIMD and threads", argc, argv, lesson03::add_options,
      lesson03::run);
}
