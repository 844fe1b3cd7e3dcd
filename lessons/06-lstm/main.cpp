// Stand-alone lesson 06: build target `lesson06`, run ./build/release/bin/lesson06 --help.
#include "lessons/06-lstm/lstm_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson06::Options>("lesson06", "Lesson 06: LSTM", argc, argv,
                                                    lesson06::add_options, lesson06::run);
}
