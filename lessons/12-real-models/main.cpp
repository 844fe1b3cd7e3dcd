// Stand-alone lesson 12: build target `lesson12`, run ./build/release/bin/lesson12 --help.
#include "lessons/12-real-models/real_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson12::Options>("lesson12", "Lesson 12: real models on our kernels", argc, argv,
                                                    lesson12::add_options, lesson12::run);
}
