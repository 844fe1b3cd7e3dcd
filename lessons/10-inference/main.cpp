// Stand-alone lesson 10: build target `lesson10`, run ./build/release/bin/lesson10 --help.
#include "lessons/10-inference/inference_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson10::Options>("lesson10", "Lesson 10: inference", argc, argv,
                                                    lesson10::add_options, lesson10::run);
}
