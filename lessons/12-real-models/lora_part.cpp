// Lesson 12, part lora: PLACEHOLDER (the scaffold); its owner replaces this file.
#include <iostream>

#include "lessons/12-real-models/real_lesson.h"

namespace lesson12 {

int run_lora_part(const Options&) {
  std::cerr << "lesson12 --part lora: not written yet\n";
  return 1;
}

}  // namespace lesson12
