// Stand-alone lesson 07: build target `lesson07`, run ./build/release/bin/lesson07 --help.
#include "lessons/07-attention/attention_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson07::Options>("lesson07", "Lesson 07: attention", argc, argv,
                                                    lesson07::add_options, lesson07::run);
}
