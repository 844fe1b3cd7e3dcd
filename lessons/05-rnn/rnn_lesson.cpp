// Lesson 05: the flags, the small parts (cell, gradients), and the order the parts run in.
// The tasks themselves (chars, plant) are in seq_tasks.cpp, shared with lesson 06.
#include "lessons/05-rnn/rnn_lesson.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

#include "nn/check.h"
#include "nn/cli_checks.h"
#include "nn/recurrent.h"
#include "nn/rng.h"

namespace lesson05 {

// ---- flags --------------------------------------------------------------------------------
void add_seq_flags(CLI::App& app, SeqFlags& f, const std::string& default_out_dir) {
  f.out_dir = default_out_dir;
  auto* g = "Training (parts chars and plant)";
  app.add_option("--hidden", f.hidden, "Hidden units H (0: 256 for chars, 32 for plant)")
      ->check(CLI::Range(0, 8192))->group(g);
  app.add_option("--seq-len", f.seq_len, "Steps per chunk of truncated BPTT (0: 64)")
      ->check(CLI::Range(0, 100000))->group(g);
  app.add_option("--batch-size", f.batch_size, "Parallel streams per step (0: 32 for chars, 16 for plant)")
      ->check(CLI::Range(0, 65536))->group(g);
  app.add_option("--lr", f.lr, "Peak Adam learning rate (0: 3e-3 for chars, 1e-2 for plant)")
      ->check(nn::FiniteRange(0.0, 10.0))->group(g);
  app.add_option("--iters", f.iters, "Optimizer steps (default: 2000 for chars, 3000 for plant)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}))->group(g);
  app.add_option("--budget", f.budget_s,
                 "Also stop after this many seconds of training (0: no limit; the run then depends "
                 "on the machine's speed)")
      ->check(nn::FiniteRange(0.0, 1e7))->capture_default_str()->group(g);
  app.add_option("--clip", f.clip, "Clip the global gradient norm to this (0: no clipping)")
      ->check(nn::FiniteRange(0.0, 1e6))->capture_default_str()->group(g);
  app.add_option("--eval-every", f.eval_every, "Iterations between validation passes (0: the part's default)")
      ->check(CLI::Range(0, 100000000))->group(g);
  app.add_option("--eval-chunks", f.eval_chunks,
                 "Characters: validation chunks per pass (0: the whole validation text; default: all, 10 with --quick)")
      ->check(CLI::Range(0, 100000000))->group(g);
  app.add_option("--seed", f.seed, "Seed for the weights and the sampling (same seed, same run)")->check(nn::Seed())
      ->capture_default_str()->group(g);
  app.add_option("--load", f.load, "Start from this checkpoint (it must be of the same model)")->group(g);
  auto* c = "Characters (part chars)";
  app.add_option("--corpus", f.corpus,
                 "Text file to train on (default: Tiny Shakespeare if found, else the Debian licence texts)")
      ->group(c);
  app.add_option("--prompt", f.prompt, "Text the sample starts from")
      ->each([&f](const std::string&) { f.prompt_given = true; })
      ->capture_default_str()
      ->group(c);
  app.add_option("--temperature", f.temperature, "Sampling temperature (0: always the likeliest character)")
      ->check(nn::FiniteRange(0.0, 100.0))->capture_default_str()->group(c);
  app.add_option("--sample-len", f.sample_len, "Characters to generate")
      ->check(CLI::Range(0, 1000000))->capture_default_str()->group(c);
  auto* p = "Plant (part plant)";
  app.add_option("--dead-time", f.dead_time, "Steps from the pump command to the inflow")
      ->check(CLI::Range(0, 10000))->capture_default_str()->group(p);
  app.add_option("--train-steps", f.train_steps, "Length of the simulated training run")
      ->check(CLI::Range(100, 100000000))->capture_default_str()->group(p);
  app.add_option("--val-steps", f.val_steps, "Length of the simulated validation run")
      ->check(CLI::Range(100, 100000000))->capture_default_str()->group(p);
  app.add_flag("--quick", f.quick, "Tiny budgets (seconds, not minutes): what the tests and notebooks run");
  app.add_option("--out-dir", f.out_dir, "Where logs, checkpoints, samples and CSV files go")
      ->capture_default_str();
}

namespace {
// A flag the user set wins; otherwise --quick's value, otherwise the part's default.
template <typename T>
void choose(T& field, T flag, T unset, bool quick, T quick_value) {
  if (flag != unset) {
    field = flag;
  } else if (quick) {
    field = quick_value;
  }
}

void common_options(seqlab::TrainOptions& t, const SeqFlags& f, const std::string& cell) {
  t.cell = cell;
  t.budget_s = f.budget_s;
  t.clip = f.clip;
  t.seed = f.seed;
  t.load = f.load;
  t.out_dir = f.out_dir;
}
}  // namespace

seqlab::CharOptions char_options(const SeqFlags& f, const std::string& cell) {
  seqlab::CharOptions o;
  common_options(o, f, cell);
  choose(o.hidden, f.hidden, 0, f.quick, 64);
  choose(o.seq_len, f.seq_len, 0, f.quick, 32);
  choose(o.batch_size, f.batch_size, 0, f.quick, 16);
  choose(o.lr, f.lr, 0.0f, false, 0.0f);
  choose(o.iters, f.iters, int64_t{-1}, f.quick, int64_t{60});
  choose(o.eval_every, f.eval_every, 0, f.quick, 20);
  choose(o.eval_chunks, f.eval_chunks, -1, f.quick, 10);
  o.corpus = f.corpus;
  o.prompt = f.prompt;
  o.prompt_given = f.prompt_given;
  o.temperature = f.temperature;
  o.sample_len = f.quick ? std::min(f.sample_len, 120) : f.sample_len;
  return o;
}

seqlab::PlantOptions plant_options(const SeqFlags& f, const std::string& cell) {
  seqlab::PlantOptions o;
  common_options(o, f, cell);
  choose(o.hidden, f.hidden, 0, false, 0);
  choose(o.seq_len, f.seq_len, 0, false, 0);
  choose(o.batch_size, f.batch_size, 0, false, 0);
  choose(o.lr, f.lr, 0.0f, false, 0.0f);
  choose(o.iters, f.iters, int64_t{-1}, f.quick, int64_t{100});
  choose(o.eval_every, f.eval_every, 0, f.quick, 25);
  o.dead_time = f.dead_time;
  o.train_steps = f.quick ? std::min(f.train_steps, 4000) : f.train_steps;
  o.val_steps = f.quick ? std::min(f.val_steps, 1500) : f.val_steps;
  return o;
}

void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part to run")
      ->check(CLI::IsMember({"cell", "gradients", "chars", "plant", "all"}))
      ->capture_default_str();
  add_seq_flags(app, o.flags, "out/lesson05");
}

// ---- part 1: one RNN cell, then BPTT, checked ----------------------------------------------

int run_cell_part(const Options& opts) {
  std::ostream& os = std::cout;
  os << "== Part 1: one RNN cell, then backpropagation through time ==\n";
  // Tiny sizes so that every number fits on the screen: one sequence (B = 1) of 3 steps,
  // 3 inputs, 4 hidden units. Doubles, so the gradient check below can be strict.
  constexpr int B = 1, C = 3, H = 4, steps = 3;
  nn::Rng rng(opts.flags.seed);
  std::vector<double> Wx(H * C), Wh(H * H), b(H), xs(steps * B * C), h0(B * H);
  for (double& v : Wx) v = rng.uniform(-0.8f, 0.8f);
  for (double& v : Wh) v = rng.uniform(-0.8f, 0.8f);
  for (double& v : b) v = rng.uniform(-0.2f, 0.2f);
  for (double& v : xs) v = rng.uniform(-1.0f, 1.0f);

  // Forward, one step at a time: h_t = tanh(x_t Wx^T + h_{t-1} Wh^T + b)
  std::vector<double> hs(steps * B * H);
  for (int t = 0; t < steps; ++t) {
    const double* x = &xs[static_cast<size_t>(t * B * C)];
    const double* h_prev = t == 0 ? h0.data() : &hs[static_cast<size_t>((t - 1) * B * H)];
    double* h = &hs[static_cast<size_t>(t * B * H)];
    nn::rnn_cell_forward(h, x, h_prev, Wx.data(), Wh.data(), b.data(), B, C, H);
    os << "step " << t << ":  h_" << t << " = tanh(x_" << t << " Wx^T + h_" << t - 1 << " Wh^T + b)\n";
    seqlab::print_values(os, "x", x, C);
    seqlab::print_values(os, "h_prev", h_prev, H);
    seqlab::print_values(os, "h", h, H);
  }

  // The loss: L = sum_t r_t . h_t with fixed random r_t, so dL/dh_t = r_t at every step
  // (the "direct" gradient); BPTT adds what flows back from step t+1 through Wh.
  std::vector<double> r(steps * B * H);
  for (double& v : r) v = rng.uniform(-1.0f, 1.0f);
  auto loss = [&]() {
    std::vector<double> h(steps * B * H);
    nn::rnn_forward(h.data(), xs.data(), h0.data(), Wx.data(), Wh.data(), b.data(), steps, B, C, H);
    double L = 0.0;
    for (size_t i = 0; i < h.size(); ++i) L += r[i] * h[i];
    return L;
  };
  std::vector<double> dWx(Wx.size(), 0.0), dWh(Wh.size(), 0.0), db(b.size(), 0.0), dxs(xs.size()), norms(steps);
  nn::rnn_backward(dxs.data(), static_cast<double*>(nullptr), dWx.data(), dWh.data(), db.data(), r.data(),
                   hs.data(), xs.data(), h0.data(), Wx.data(), Wh.data(), steps, B, C, H, norms.data());
  os << "backward through time: ||dL/dh_t|| for t = 2, 1, 0: ";
  for (int t = steps - 1; t >= 0; --t) os << seqlab::fixed(norms[static_cast<size_t>(t)], 4) << (t ? ", " : "\n");

  // Check every gradient against central differences: (L(w + h) - L(w - h)) / 2h.
  bool all_ok = true;
  auto check = [&](const char* name, std::vector<double>& param, const std::vector<double>& grad) {
    all_ok = seqlab::check_and_report(os, name, loss, param, grad) && all_ok;
  };
  os << "finite differences (double, h = 1e-6):\n";
  check("Wx", Wx, dWx);
  check("Wh", Wh, dWh);
  check("b", b, db);
  check("x", xs, dxs);
  NN_CHECK(all_ok, "BPTT disagrees with finite differences: see the mismatches above");
  return 0;
}

// ---- part 2: vanishing and exploding gradients ----------------------------------------------
int run_gradients_part(const Options& opts) {
  std::cout << "== Part 2: the gradient reaching h_t vs its distance from the loss ==\n"
            << "A fresh tanh RNN (H = 64) reads 60 random steps; the loss looks at the last one only.\n"
            << "Wh x s scales the recurrent weights (x1 is the default initialisation).\n";
  const auto rows = seqlab::gradient_vs_distance(nn::CellType::RNN, 64, 8, 60, {0.5, 1.0, 2.0, 4.0}, opts.flags.seed);
  seqlab::report_gradients(rows, opts.flags.out_dir + "/gradients_rnn.csv", std::cout);
  return 0;
}

// ---- parts 3 and 4: the tasks ---------------------------------------------------------------
int run_chars_part(const Options& opts) {
  std::cout << "== Part 3: a character-level language model (vanilla RNN) ==\n";
  seqlab::run_char_task(char_options(opts.flags, "rnn"), std::cout);
  return 0;
}

int run_plant_part(const Options& opts) {
  std::cout << "== Part 4: predicting a plant's sensors (vanilla RNN vs linear baselines) ==\n";
  seqlab::run_plant_task(plant_options(opts.flags, "rnn"), std::cout);
  return 0;
}

int run(const Options& opts) {
  if (opts.part == "cell") return run_cell_part(opts);
  if (opts.part == "gradients") return run_gradients_part(opts);
  if (opts.part == "chars") return run_chars_part(opts);
  if (opts.part == "plant") return run_plant_part(opts);
  for (auto* part : {&run_cell_part, &run_gradients_part, &run_chars_part, &run_plant_part}) {
    if (const int rc = part(opts); rc != 0) return rc;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lesson05
