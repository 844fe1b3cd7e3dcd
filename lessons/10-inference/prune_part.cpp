// Lesson 10, part prune (being written: issue 8).
#include "lessons/10-inference/inference_lesson.h"
#include "nn/check.h"
namespace lesson10 {
int run_prune_part(const Options&) { NN_CHECK(false, "part prune: not written yet"); return 1; }
}  // namespace lesson10
