// Lesson 06: the LSTM parts and the RNN-vs-LSTM comparison. The tasks are lesson 05's
// (lessons/05-rnn/seq_tasks.cpp) with the cell switched.
#include "lessons/06-lstm/lstm_lesson.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <vector>

#include "lessons/05-rnn/seq_tasks.h"
#include "nn/check.h"
#include "nn/cli_checks.h"
#include "nn/recurrent.h"
#include "nn/rng.h"

namespace lesson06 {

void add_options(CLI::App& app, Options& o) {
  app.add_option("--part", o.part, "Which part to run")
      ->check(CLI::IsMember({"gates", "gradients", "chars", "plant", "compare", "all"}))
      ->capture_default_str();
  lesson05::add_seq_flags(app, o.flags, "out/lesson06");
  app.add_option("--compare-budget", o.compare_budget_s,
                 "Part compare: seconds of training for each character model (the same for both)")
      ->check(nn::FiniteRange(1.0, 1e7))->capture_default_str()->group("Comparison (part compare)");
  app.add_option("--dead-times", o.dead_times, "Part compare: plant dead times to try")
      ->check(CLI::Range(0, 10000))->capture_default_str()->group("Comparison (part compare)");
}

// ---- part 1: the gates of one step, checked -------------------------------------------------

int run_gates_part(const Options& opts) {
  std::ostream& os = std::cout;
  os << "== Part 1: one LSTM step, gate by gate ==\n";
  constexpr int B = 1, C = 3, H = 4;
  nn::Rng rng(opts.flags.seed);
  std::vector<double> Wx(4 * H * C), Wh(4 * H * H), b(4 * H), x(B * C), h_prev(B * H), c_prev(B * H);
  for (double& v : Wx) v = rng.uniform(-0.8f, 0.8f);
  for (double& v : Wh) v = rng.uniform(-0.8f, 0.8f);
  for (double& v : b) v = rng.uniform(-0.2f, 0.2f);
  for (int j = 0; j < H; ++j) b[static_cast<size_t>(H + j)] += 1.0;  // forget bias 1, as nn::Recurrent
  for (double& v : x) v = rng.uniform(-1.0f, 1.0f);
  for (double& v : h_prev) v = rng.uniform(-0.5f, 0.5f);
  for (double& v : c_prev) v = rng.uniform(-1.0f, 1.0f);

  std::vector<double> h(B * H), c(B * H), gates(B * 4 * H);
  nn::lstm_cell_forward(h.data(), c.data(), gates.data(), x.data(), h_prev.data(), c_prev.data(), Wx.data(),
                        Wh.data(), b.data(), B, C, H);
  os << "z = x Wx^T + h_prev Wh^T + b, four slices of H = " << H << ":\n";
  seqlab::print_values(os, "x", x.data(), C);
  seqlab::print_values(os, "h_prev", h_prev.data(), H);
  seqlab::print_values(os, "c_prev", c_prev.data(), H, "the cell: the memory carried from the last step");
  seqlab::print_values(os, "i", &gates[0], H, "input gate  sigmoid(z_i): how much of g to write");
  seqlab::print_values(os, "f", &gates[H], H, "forget gate sigmoid(z_f): how much of c_prev to keep");
  seqlab::print_values(os, "g", &gates[2 * H], H, "candidate   tanh(z_g): what to write");
  seqlab::print_values(os, "o", &gates[3 * H], H, "output gate sigmoid(z_o): how much of the cell to show");
  seqlab::print_values(os, "c", c.data(), H, "c = f * c_prev + i * g");
  seqlab::print_values(os, "h", h.data(), H, "h = o * tanh(c)");
  os << "  dc/dc_prev = f: along the cell the gradient is multiplied by the forget gate, not by\n"
        "  Wh and tanh' as in the RNN: with f near 1 it survives many steps.\n";

  // L = r_h . h + r_c . c, so every output path is exercised; check all six gradients.
  std::vector<double> rh(B * H), rc(B * H);
  for (double& v : rh) v = rng.uniform(-1.0f, 1.0f);
  for (double& v : rc) v = rng.uniform(-1.0f, 1.0f);
  auto loss = [&]() {
    std::vector<double> hh(B * H), cc(B * H), gg(B * 4 * H);
    nn::lstm_cell_forward(hh.data(), cc.data(), gg.data(), x.data(), h_prev.data(), c_prev.data(), Wx.data(),
                          Wh.data(), b.data(), B, C, H);
    double L = 0.0;
    for (int j = 0; j < B * H; ++j) L += rh[static_cast<size_t>(j)] * hh[static_cast<size_t>(j)] +
                                         rc[static_cast<size_t>(j)] * cc[static_cast<size_t>(j)];
    return L;
  };
  std::vector<double> dx(x.size()), dh_prev(h_prev.size()), dc_prev(c_prev.size());
  std::vector<double> dWx(Wx.size(), 0.0), dWh(Wh.size(), 0.0), db(b.size(), 0.0);
  nn::lstm_cell_backward(dx.data(), dh_prev.data(), dc_prev.data(), dWx.data(), dWh.data(), db.data(), rh.data(),
                         rc.data(), gates.data(), c.data(), c_prev.data(), x.data(), h_prev.data(), Wx.data(),
                         Wh.data(), B, C, H);
  bool all_ok = true;
  auto check = [&](const char* name, std::vector<double>& param, const std::vector<double>& grad) {
    all_ok = seqlab::check_and_report(os, name, loss, param, grad) && all_ok;
  };
  os << "finite differences (double, h = 1e-6):\n";
  check("Wx", Wx, dWx);
  check("Wh", Wh, dWh);
  check("b", b, db);
  check("x", x, dx);
  check("h_prev", h_prev, dh_prev);
  check("c_prev", c_prev, dc_prev);
  NN_CHECK(all_ok, "the LSTM backward disagrees with finite differences: see the mismatches above");
  return 0;
}

// ---- part 2: gradients vs distance, RNN next to LSTM ----------------------------------------
int run_gradients_part(const Options& opts) {
  std::cout << "== Part 2: the gradient reaching h_t vs its distance from the loss, RNN and LSTM ==\n"
            << "Fresh layers (H = 64), 60 random steps, the loss on the last step only.\n";
  auto rows = seqlab::gradient_vs_distance(nn::CellType::RNN, 64, 8, 60, {1.0, 2.0}, opts.flags.seed);
  const auto lstm = seqlab::gradient_vs_distance(nn::CellType::LSTM, 64, 8, 60, {1.0, 2.0}, opts.flags.seed);
  rows.insert(rows.end(), lstm.begin(), lstm.end());
  seqlab::report_gradients(rows, opts.flags.out_dir + "/gradients.csv", std::cout);
  return 0;
}

// ---- parts 3 and 4: the tasks with an LSTM ---------------------------------------------------
int run_chars_part(const Options& opts) {
  std::cout << "== Part 3: the character model with an LSTM cell ==\n";
  seqlab::run_char_task(lesson05::char_options(opts.flags, "lstm"), std::cout);
  return 0;
}

int run_plant_part(const Options& opts) {
  std::cout << "== Part 4: the plant with an LSTM cell ==\n";
  seqlab::run_plant_task(lesson05::plant_options(opts.flags, "lstm"), std::cout);
  return 0;
}

// ---- part 5: RNN vs LSTM ----------------------------------------------------------------------
int run_compare_part(const Options& opts) {
  std::ostream& os = std::cout;
  os << "== Part 5: RNN vs LSTM on the same data and budget ==\n";
  lesson05::SeqFlags f = opts.flags;
  // Characters: the same corpus, seed and wall-clock budget for both cells. The LSTM does
  // ~4x the work per step, so it gets fewer steps: the comparison is per second, which is
  // what a user pays for. (--iters still caps both.)
  if (f.budget_s <= 0 && !f.quick) f.budget_s = opts.compare_budget_s;
  if (f.iters < 0 && !f.quick) f.iters = 1000000;
  std::vector<seqlab::CharResult> chars;
  for (const char* cell : {"rnn", "lstm"}) {
    os << "\n-- characters, " << cell << " --\n";
    chars.push_back(seqlab::run_char_task(lesson05::char_options(f, cell), os));
  }
  // The plant at several dead times: the longer the delay between the pump and the
  // level, the further back the network must remember the pump command.
  lesson05::SeqFlags pf = opts.flags;
  std::vector<seqlab::PlantResult> plants;
  for (int d : opts.dead_times) {
    for (const char* cell : {"rnn", "lstm"}) {
      os << "\n-- plant, dead time " << d << ", " << cell << " --\n";
      pf.dead_time = d;
      plants.push_back(seqlab::run_plant_task(lesson05::plant_options(pf, cell), os));
    }
  }

  const std::string chars_csv = f.out_dir + "/compare_chars.csv";
  const std::string plant_csv = f.out_dir + "/compare_plant.csv";
  {
    std::ofstream csv(chars_csv);
    NN_CHECK(csv.is_open(), "cannot write " << chars_csv);
    csv << "cell,iters,seconds,train_loss,val_loss\n";
    for (const auto& r : chars) csv << r.cell << "," << r.iters << "," << r.seconds << "," << r.train_loss << ","
                                    << r.val_loss << "\n";
  }
  {
    std::ofstream csv(plant_csv);
    NN_CHECK(csv.is_open(), "cannot write " << plant_csv);
    csv << "dead_time,cell,model,level_rmse,outflow_rmse\n";
    for (const auto& r : plants)
      for (const auto& s : r.scores)
        csv << r.dead_time << "," << r.cell << "," << s.model << "," << s.level_rmse << "," << s.outflow_rmse << "\n";
  }

  os << "\nsummary   characters (same budget):\n";
  for (const auto& r : chars) {
    os << "          " << std::left << std::setw(5) << r.cell << std::right << " " << std::setw(7) << r.iters
       << " iterations in " << seqlab::fixed(r.seconds, 1) << " s, validation loss " << seqlab::fixed(r.val_loss)
       << " nats/char\n";
  }
  os << "          plant, level RMSE on the validation run (mm):\n"
     << "          dead time   persistence   ARX short   ARX long        RNN       LSTM\n";
  for (size_t i = 0; i + 1 < plants.size(); i += 2) {
    const auto& rnn = plants[i].scores;
    const auto& lstm = plants[i + 1].scores;
    os << "          " << std::setw(9) << plants[i].dead_time;
    for (double v : {rnn[0].level_rmse, rnn[1].level_rmse, rnn[2].level_rmse, rnn[3].level_rmse, lstm[3].level_rmse}) {
      os << std::setw(12) << seqlab::fixed(1000.0 * v, 3);
    }
    os << "\n";
  }
  os << "wrote     " << chars_csv << ", " << plant_csv << "\n";
  return 0;
}

int run(const Options& opts) {
  if (opts.part == "gates") return run_gates_part(opts);
  if (opts.part == "gradients") return run_gradients_part(opts);
  if (opts.part == "chars") return run_chars_part(opts);
  if (opts.part == "plant") return run_plant_part(opts);
  if (opts.part == "compare") return run_compare_part(opts);
  // "all": the compare part trains the LSTM on both tasks already (next to the RNN).
  for (auto* part : {&run_gates_part, &run_gradients_part, &run_compare_part}) {
    if (const int rc = part(opts); rc != 0) return rc;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lesson06
