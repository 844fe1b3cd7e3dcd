// Lesson 02: the options and the order the parts run in. The parts themselves live in
// autograd.cpp, loops.cpp and train.cpp.
#include "lessons/02-backprop/backprop.h"

#include <iostream>

#include "nn/check.h"
#include "nn/cli_checks.h"

namespace lesson02 {

void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part to run")
      ->check(CLI::IsMember({"autograd", "loops", "train", "all"}))
      ->capture_default_str();
  app.add_flag("--trace", o.trace, "autograd/loops: print every value and gradient, step by step");

  auto* g = "Training (part train)";
  app.add_option("--dataset", o.dataset, "MNIST-format dataset to train on")
      ->check(CLI::IsMember({"fashion-mnist", "mnist"}))->capture_default_str()->group(g);
  app.add_option("--data-dir", o.data_dir,
                 "Directory with the IDX files (default: $NNLAB_DATA/<dataset>, data/<dataset>, "
                 "/usr/share/datasets/<dataset>)")->group(g);
  app.add_option("--hidden", o.hidden, "Hidden layer widths, e.g. --hidden 256 128")
      ->check(CLI::PositiveNumber)->capture_default_str()->group(g);
  app.add_option("--activation", o.activation, "Activation between layers")
      ->check(CLI::IsMember({"relu", "tanh", "sigmoid"}))->capture_default_str()->group(g);
  app.add_option("--optimizer", o.optimizer, "Optimizer")
      ->check(CLI::IsMember({"adam", "sgd"}))->capture_default_str()->group(g);
  app.add_option("--epochs", o.epochs, "Passes over the training set")
      ->check(CLI::Range(1, 1000))->capture_default_str()->group(g);
  app.add_option("--batch-size", o.batch_size, "Images per step")
      ->check(CLI::Range(1, 65536))->capture_default_str()->group(g);
  app.add_option("--lr", o.lr, "Peak learning rate")
      ->check(nn::FiniteRange(1e-7, 10.0))->capture_default_str()->group(g);
  app.add_option("--lr-min-frac", o.lr_min_frac, "Cosine decay ends at lr * this")
      ->check(nn::FiniteRange(0.0, 1.0))->capture_default_str()->group(g);
  app.add_option("--momentum", o.momentum, "SGD momentum")
      ->check(nn::FiniteRange(0.0, 0.999))->capture_default_str()->group(g);
  app.add_option("--weight-decay", o.weight_decay, "L2 weight decay")
      ->check(nn::FiniteRange(0.0, 1.0))->capture_default_str()->group(g);
  app.add_option("--seed", o.seed, "Seed for initialisation and shuffling (same seed, same run)")->check(nn::Seed())
      ->capture_default_str()->group(g);
  app.add_option("--threads", o.threads, "OpenMP threads (0 = OMP_NUM_THREADS or all cores)")
      ->check(nn::ThreadCount())->capture_default_str()->group(g);
  app.add_option("--limit-train", o.limit_train, "Use only the first N training images (0 = all)")
      ->check(nn::WholeNumber(0, std::numeric_limits<long long>::max()))->capture_default_str()->group(g);
  app.add_option("--limit-test", o.limit_test, "Use only the first N test images (0 = all)")
      ->check(nn::WholeNumber(0, std::numeric_limits<long long>::max()))->capture_default_str()->group(g);
  app.add_option("--out-dir", o.out_dir, "Where the log, checkpoint and predictions go")
      ->capture_default_str()->group(g);
}

int run(const Options& o) {
  if (o.part == "autograd") return run_autograd_part(o);
  if (o.part == "loops") return run_loops_part(o);
  if (o.part == "train") return run_train_part(o);
  // "all": the three parts in order, stopping at the first that fails.
  for (auto* part : {&run_autograd_part, &run_loops_part, &run_train_part}) {
    const int status = part(o);
    if (status != 0) return status;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lesson02
