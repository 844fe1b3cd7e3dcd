// Stand-alone lesson 09: build target `lesson09`, run ./build/release/bin/lesson09 --help.
#include "lessons/09-cuda/cuda_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson09::Options>("lesson09", "Lesson 09: CUDA", argc, argv, lesson09::add_options,
                                                    lesson09::run);
}
