// Lessons 05 and 06: the two sequence tasks, written once for both cells.
//
// Lesson 05 runs them with the vanilla RNN, lesson 06 with the LSTM and then both side by
// side. Everything cell-specific lives in nn/recurrent.{h,cpp}; here is the model around
// the cell, the training loop (truncated BPTT, clipping, Adam, a cosine schedule), the
// evaluation, and the outputs the notebooks plot.
//
//   chars   a character-level language model: one-hot char -> recurrent layer -> linear
//           head -> softmax over the vocabulary; trained to predict the next character,
//           then sampled from a prompt at a temperature.
//   plant   one-step-ahead prediction of a simulated tank's sensors (lessons/common/plant.h) from their
//           past and the pump command, against persistence and ARX baselines.
//   gradients  how the gradient reaching h_t shrinks (or grows) with its distance in time
//           from the loss, for several recurrent weight scales.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/optim.h"
#include "nn/recurrent.h"
#include "nn/rng.h"
#include "io/text.h"

namespace seqlab {

// ---- the model: recurrent layer + linear head ------------------------------------------
//   xs (steps, B, C) -> hs = Recurrent(xs) (steps, B, H) -> out = hs W^T + b (steps*B, O)
// The head is applied to every step at once: (steps * B) rows of one matmul.
class SeqModel {
 public:
  SeqModel(nn::CellType cell, int input_size, int hidden_size, int output_size, nn::Rng& rng);

  // xs (steps, B, C) -> out (steps * B, O), valid until the next forward. xs must stay
  // alive until backward() returns. The recurrent state carries over from the last call.
  const float* forward(const float* xs, int steps, int B);
  // dout (steps * B, O) -> parameter gradients (accumulated). dh_norms: see nn::rnn_backward.
  void backward(const float* dout, float* dh_norms = nullptr);
  void reset_state() { rnn.reset_state(); }

  std::vector<nn::Param> params();
  int64_t num_params() const;
  int input_size() const { return rnn.input_size(); }
  int output_size() const { return head.out_features; }

  nn::Recurrent rnn;
  nn::Linear head;

 private:
  const float* hs_ = nullptr;
  int steps_ = 0, batch_ = 0;
  std::vector<float> out_, dhs_;
};

// Characters as one-hot vectors: ids (N) -> out (N, V), out[i][ids[i]] = 1.
// (x W^T with a one-hot x just picks column ids[i] of W: an embedding lookup.)
void one_hot(std::vector<float>& out, const std::vector<int32_t>& ids, int V);

// ---- training options, shared by both tasks -----------------------------------------------
struct TrainOptions {
  std::string cell = "rnn";       // rnn | lstm
  int hidden = 256;               // H
  int seq_len = 64;               // steps of truncated BPTT per chunk
  int batch_size = 32;            // B parallel streams
  float lr = 3e-3f;               // Adam, cosine-decayed to lr * lr_min_frac
  float lr_min_frac = 0.1f;
  float clip = 1.0f;              // max global gradient norm (0: no clipping)
  int64_t iters = 2000;           // optimizer steps
  double budget_s = 0.0;          // also stop after this many seconds (0: no limit). The
                                  // schedule then runs on time, and the run depends on the
                                  // machine's speed: only --iters runs are reproducible.
  int eval_every = 200;           // iterations between validation passes
  uint64_t seed = 42;
  std::string out_dir = "out/lesson05";
  std::string load;               // start from this checkpoint (same model and data)
};

// One point of a learning curve (what the notebook plots).
struct CurvePoint {
  int64_t iter = 0;
  double seconds = 0.0;  // training time so far (evaluation excluded)
  double train_loss = 0.0;
  double val_loss = 0.0;
};

// ---- task 1: characters ---------------------------------------------------------------------
struct CharOptions : TrainOptions {
  std::string corpus;             // a text file; default: Tiny Shakespeare, else a Debian text
  std::string prompt = "ROMEO:";
  bool prompt_given = true;       // false: `prompt` is the lesson's default, and a text without its
                                  // characters samples from a newline instead (said so), not an error
  float temperature = 0.8f;
  int sample_len = 500;
  int eval_chunks = 0;            // validation chunks per pass (0: the whole validation text)
};

struct CharResult {
  std::string cell;
  std::string corpus;
  int64_t iters = 0;
  double seconds = 0.0;
  double train_loss = 0.0;  // mean over the last eval interval
  double val_loss = 0.0;    // after the last iteration, nats per character
  std::vector<CurvePoint> curve;
  std::string sample;       // prompt + generated text
};

// Trains (or, with iters = 0 and a checkpoint, only loads) and samples. Writes to out_dir:
// char_<cell>.jsonl (the curve), char_<cell>.safetensors (weights + vocabulary),
// char_<cell>_sample.txt. Prints progress to os.
CharResult run_char_task(const CharOptions& o, std::ostream& os);

// Generates n characters after the prompt. The model's state is reset first.
std::string sample_text(SeqModel& model, const nn::CharVocab& vocab, const std::string& prompt,
                        int n, float temperature, nn::Rng& rng);

// ---- task 2: the plant ------------------------------------------------------------------------
struct PlantOptions : TrainOptions {
  PlantOptions() {
    hidden = 32;
    seq_len = 64;
    batch_size = 16;
    lr = 1e-2f;
    iters = 3000;
    eval_every = 100;
    out_dir = "out/lesson05";
  }
  int dead_time = 20;       // steps from pump command to inflow (lessons::TankConfig)
  int train_steps = 20000;  // length of the simulated training run (seed 1)
  int val_steps = 5000;     // and of the validation run (seed 2)
  int arx_na = 2;           // ARX: past outputs used
  int arx_nb_short = 2;     // ARX "short": too few past inputs to see the dead time
};

// One-step-ahead RMSE on the validation run, in physical units, per predicted sensor.
struct PlantScores {
  std::string model;
  double level_rmse = 0.0;    // m
  double outflow_rmse = 0.0;  // m^3/s
};

struct PlantResult {
  std::string cell;
  int dead_time = 0;
  int64_t iters = 0;
  double seconds = 0.0;
  std::vector<CurvePoint> curve;       // losses on standardised values (MSE)
  std::vector<PlantScores> scores;     // persistence, ARX short, ARX long, the network
};

// Simulates, trains, evaluates. Writes plant_<cell>_d<dead>.jsonl (curve),
// plant_<cell>_d<dead>.json (scores), plant_<cell>_d<dead>_val.csv (a window of the
// validation run with every model's prediction).
PlantResult run_plant_task(const PlantOptions& o, std::ostream& os);

// ---- gradients vs distance in time -----------------------------------------------------------
struct GradientRow {
  std::string cell;
  double scale = 0.0;   // multiplier on the recurrent weights Wh
  int distance = 0;     // steps between h_t and the loss (0 = the last step)
  double norm = 0.0;    // ||dL/dh_t|| / ||dL/dh_last||
};

// A fresh layer (hidden H, input C), a random input sequence of `steps`, the loss on the
// last step only; BPTT reports ||dL/dh_t|| for every t. Repeated for each scale of Wh.
std::vector<GradientRow> gradient_vs_distance(nn::CellType cell, int H, int C, int steps,
                                              const std::vector<double>& scales, uint64_t seed);
// Writes the rows as CSV (cell,scale,distance,norm) and prints a short table to os.
void report_gradients(const std::vector<GradientRow>& rows, const std::string& csv_path,
                      std::ostream& os);

// "0.1234"
std::string fixed(double v, int digits = 4);

// ---- printing for the small parts (lesson 05's cell, lesson 06's gates) --------------------
// "  name    ( 0.1234, -0.5678)  note"
void print_values(std::ostream& os, const std::string& name, const double* v, int n, const char* note = "");
// Checks `grad` (the backward pass's dL/dparam) against central finite differences of
// `loss` (nn/gradcheck.h), prints one line with the largest difference, and the mismatches
// if any. Returns whether it agreed.
bool check_and_report(std::ostream& os, const char* name, const std::function<double()>& loss,
                      std::vector<double>& param, const std::vector<double>& grad);

}  // namespace seqlab
