// Stand-alone lesson 11: build target `lesson11`, run ./build/release/bin/lesson11 --help.
#include "lessons/11-modern/modern_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson11::Options>("lesson11", "Lesson 11: from nanoGPT to a modern LLM", argc, argv,
                                                    lesson11::add_options, lesson11::run);
}
