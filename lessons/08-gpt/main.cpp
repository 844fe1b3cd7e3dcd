// Stand-alone lesson 08: build target `lesson08`, run ./build/release/bin/lesson08 --help.
#include "lessons/08-gpt/gpt_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson08::Options>("lesson08", "Lesson 08: the GPT", argc, argv,
                                                    lesson08::add_options, lesson08::run);
}
