// Stand-alone lesson 15: build target `lesson15`, run ./build/release/bin/lesson15 --help.
#include "lessons/15-compression/compression_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson15::Options>("lesson15", "Lesson 15: compression that changes the arithmetic",
                                                    argc, argv, lesson15::add_options, lesson15::run);
}
