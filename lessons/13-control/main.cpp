// Stand-alone lesson 13: build target `lesson13`, run ./build/release/bin/lesson13 --help.
#include "lessons/13-control/control_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson13::Options>("lesson13", "Lesson 13: a network in the control loop", argc, argv,
                                                    lesson13::add_options, lesson13::run);
}
