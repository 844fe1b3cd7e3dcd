// tests/gpt_test_options.h: the trainer's options for a tiny, quick run (2 layers, C 16,
// context 16, 8 steps, evaluated at step 4 and 8, no log, quiet), shared by the tests that
// train through gpt::train on a small corpus file of their own.
#pragma once

#include <string>

#include "gpt/train.h"
#include "tests/test_util.h"

namespace testing {

inline gpt::TrainOptions tiny_train_options(const TempDir& dir, const std::string& corpus) {
  gpt::TrainOptions o;
  o.n_layer = 2;
  o.n_head = 2;
  o.n_embd = 16;
  o.block_size = 16;
  o.batch_size = 4;
  o.max_iters = 8;
  o.warmup_iters = 2;
  o.eval_interval = 4;
  o.eval_iters = 2;
  o.data = corpus;
  o.out_dir = dir.file("out");
  o.log = "none";
  o.quiet = true;
  return o;
}

}  // namespace testing
