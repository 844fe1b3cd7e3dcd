// Stand-alone lesson 05: build target `lesson05`, run ./build/release/bin/lesson05 --help.
#include "lessons/05-rnn/rnn_lesson.h"
#include "lessons/common/cli.h"

int main(int argc, char** argv) {
  return lessons::run_standalone<lesson05::Options>("lesson05", "Lesson 05: recurrent networks", argc,
                                                    argv, lesson05::add_options, lesson05::run);
}
