// Lesson 12, part speed: PLACEHOLDER (the scaffold); its owner replaces this file.
#include <iostream>

#include "lessons/12-real-models/real_lesson.h"

namespace lesson12 {

int run_speed_part(const Options&) {
  std::cerr << "lesson12 --part speed: not written yet\n";
  return 1;
}

}  // namespace lesson12
