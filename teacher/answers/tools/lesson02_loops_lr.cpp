// Lesson 02 question 5: the loops part's training with another lr (LoopsConfig is not a flag).
#include "lessons/02-backprop/loops.h"
#include <cstdlib>
#include <iostream>
int main(int argc, char** argv) {
  lesson02::LoopsConfig cfg;
  cfg.lr = std::atof(argv[1]);
  if (argc > 2) cfg.print_every = std::atoi(argv[2]);
  if (argc > 3) cfg.epochs = std::atoi(argv[3]);
  const lesson02::LoopsResult r = lesson02::train_loops(cfg, std::cout);
  std::cout << "lr " << cfg.lr << ": loss " << r.initial_loss << " -> " << r.final_loss << ", train " << r.train_accuracy
            << ", test " << r.test_accuracy << "\n";
}
