// Stand-alone lesson 14: build target `lesson14`, run ./build/release/bin/lesson14 --help.
#include "lessons/14-distributed/distributed_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson14::Options>("lesson14", "Lesson 14: beyond one machine", argc, argv,
                                                    lesson14::add_options, lesson14::run);
}
