// Lessons 05 and 06: the sequence tasks. See seq_tasks.h for the map.
#include "lessons/05-rnn/seq_tasks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "nn/check.h"
#include "nn/checkpoint.h"
#include "nn/classify.h"
#include "nn/gradcheck.h"
#include "nn/ops.h"
#include "lessons/common/plant.h"
#include "io/progress.h"

namespace seqlab {

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

void print_values(std::ostream& os, const std::string& name, const double* v, int n, const char* note) {
  os << "  " << std::left << std::setw(8) << name << std::right << "(";
  for (int i = 0; i < n; ++i) os << (i ? ", " : "") << std::setw(7) << fixed(v[i], 4);
  os << ")  " << note << "\n";
}

bool check_and_report(std::ostream& os, const char* name, const std::function<double()>& loss,
                      std::vector<double>& param, const std::vector<double>& grad) {
  const nn::GradCheckResult g = nn::check_gradient(loss, param, grad);
  os << "  gradient check " << std::left << std::setw(7) << name << std::right << " max |analytic - numeric| = "
     << std::scientific << std::setprecision(2) << g.max_abs_err << std::defaultfloat << "  "
     << (g.ok ? "ok" : "MISMATCH") << "\n";
  if (!g.ok) os << g.report;
  return g.ok;
}

// ---- the model ------------------------------------------------------------------------------
SeqModel::SeqModel(nn::CellType cell, int input_size, int hidden_size, int output_size, nn::Rng& rng)
    : rnn("rnn", cell, input_size, hidden_size, rng),
      // The head feeds a softmax or a squared error, not a ReLU: Glorot's uniform init.
      head("head", hidden_size, output_size, rng, nn::Activation::Tanh) {}

const float* SeqModel::forward(const float* xs, int steps, int B) {
  // hs (steps, B, H): time-major, so all steps together are one (steps*B, H) matrix
  hs_ = rnn.forward(xs, steps, B);
  steps_ = steps;
  batch_ = B;
  out_.resize(static_cast<size_t>(steps) * B * head.out_features);
  head.forward(out_.data(), hs_, steps * B);  // out (steps*B, O) = hs W^T + b
  return out_.data();
}

void SeqModel::backward(const float* dout, float* dh_norms) {
  NN_CHECK(hs_ != nullptr, "SeqModel::backward called before forward");
  // dhs (steps*B, H) = dout W, and the head's dW, db accumulate; then BPTT through the cell
  dhs_.resize(static_cast<size_t>(steps_) * batch_ * rnn.hidden_size());
  head.backward(dhs_.data(), dout, hs_, steps_ * batch_);
  rnn.backward(nullptr, dhs_.data(), dh_norms);  // the one-hot input needs no gradient
}

std::vector<nn::Param> SeqModel::params() {
  std::vector<nn::Param> p = rnn.params();
  for (const nn::Param& q : head.params()) p.push_back(q);
  return p;
}

int64_t SeqModel::num_params() const {
  return rnn.num_params() + head.weight.numel() + head.bias.numel();
}

void one_hot(std::vector<float>& out, const std::vector<int32_t>& ids, int V) {
  out.assign(ids.size() * static_cast<size_t>(V), 0.0f);
  for (size_t i = 0; i < ids.size(); ++i) {
    NN_CHECK(ids[i] >= 0 && ids[i] < V, "character id " << ids[i] << " outside the vocabulary of " << V);
    out[i * static_cast<size_t>(V) + static_cast<size_t>(ids[i])] = 1.0f;
  }
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- the training loop, the same for both tasks -------------------------------------------
// One iteration: zero the gradients, `step` runs forward + backward on the next chunk and
// returns its loss, the global gradient norm is clipped, Adam updates. Every eval_every
// iterations (and at the end) `validate` returns the validation loss and `checkpoint`
// saves the weights.
struct Loop {
  std::function<double()> step;
  std::function<double()> validate;
  std::function<void()> checkpoint;
};

std::vector<CurvePoint> train_loop(SeqModel& model, const TrainOptions& o, const std::string& label,
                                   const Loop& loop, nn::MetricsLog& log, std::ostream& os,
                                   double& train_seconds) {
  std::vector<nn::Param> params = model.params();
  nn::Adam adam(params, nn::AdamConfig{o.lr, 0.9f, 0.999f, 1e-8f, 0.0f});
  std::vector<CurvePoint> curve;
  // The bar counts iterations, or per mille of the time budget when that ends first.
  constexpr int64_t kPerMille = 1000;
  nn::ProgressBar bar(label, o.budget_s > 0 ? kPerMille : o.iters, os, 5.0);
  train_seconds = 0.0;
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  double last_norm = 0.0;
  for (int64_t it = 1; it <= o.iters; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    // The schedule runs on iterations, or on time when a time budget is set.
    double progress = static_cast<double>(it - 1) / static_cast<double>(o.iters);
    if (o.budget_s > 0) progress = std::max(progress, train_seconds / o.budget_s);
    adam.config().lr = nn::cosine_lr(o.lr, o.lr_min_frac, progress);

    nn::zero_grads(params);
    const double loss = loop.step();
    NN_CHECK(std::isfinite(loss), "the loss became " << loss << " at iteration " << it
                                      << ": lower --lr (now " << o.lr << ") or keep --clip on (now "
                                      << o.clip << "). The last checkpoint in " << o.out_dir
                                      << " is from before this happened");
    // Clipping: one long-range product of Jacobians can make one step's gradient huge;
    // rescaling the whole gradient to norm <= clip keeps its direction, drops its size.
    last_norm = nn::clip_grad_norm(params, o.clip);
    adam.step();
    train_seconds += seconds_since(t0);
    loss_sum += loss;
    ++loss_count;

    const bool out_of_time = o.budget_s > 0 && train_seconds >= o.budget_s;
    if (it % o.eval_every == 0 || it == o.iters || out_of_time) {
      CurvePoint p;
      p.iter = it;
      p.seconds = train_seconds;
      p.train_loss = loss_sum / static_cast<double>(loss_count);
      p.val_loss = loop.validate();
      // Adam's update came after the loss check: never save (or report) weights that
      // turned into NaN or infinity in it.
      const std::string not_saved = "at iteration " + std::to_string(it) + " (not saved: lower --lr, now " +
                                    std::to_string(o.lr) + ", or keep --clip on; the last checkpoint in " +
                                    o.out_dir + " is from before this happened)";
      nn::check_params_finite(params, "the weights " + not_saved);
      NN_CHECK(std::isfinite(p.val_loss), "the validation loss became " << p.val_loss << " " << not_saved);
      curve.push_back(p);
      loss_sum = 0.0;
      loss_count = 0;
      log.write(nn::MetricsLog::Record()
                    .add("iter", it)
                    .add("seconds", p.seconds)
                    .add("lr", static_cast<double>(adam.config().lr))
                    .add("train_loss", p.train_loss)
                    .add("val_loss", p.val_loss)
                    .add("grad_norm", last_norm));
      loop.checkpoint();
      const double done = o.budget_s > 0 ? progress * kPerMille : static_cast<double>(it);
      bar.update(static_cast<int64_t>(done), {{"train", fixed(p.train_loss)}, {"val", fixed(p.val_loss)},
                      {"|g|", fixed(last_norm, 2)}});
    }
    if (out_of_time) {
      os << "\n(time budget of " << o.budget_s << " s reached after " << it << " iterations)\n";
      break;
    }
  }
  bar.finish({{"val", curve.empty() ? std::string("-") : fixed(curve.back().val_loss)}});
  return curve;
}

void check_train_options(const TrainOptions& o) {
  NN_CHECK(o.hidden >= 1, "--hidden must be at least 1, got " << o.hidden);
  NN_CHECK(o.seq_len >= 1, "--seq-len must be at least 1, got " << o.seq_len);
  NN_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got " << o.batch_size);
  NN_CHECK(o.iters >= 0, "--iters must be >= 0, got " << o.iters);
  NN_CHECK(o.eval_every >= 1, "--eval-every must be at least 1, got " << o.eval_every);
  NN_CHECK(o.lr > 0 && std::isfinite(o.lr), "--lr must be positive, got " << o.lr);
}

std::string hex_of(const std::vector<unsigned char>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

}  // namespace

// ---- task 1: characters ---------------------------------------------------------------------
std::string sample_text(SeqModel& model, const nn::CharVocab& vocab, const std::string& prompt,
                        int n, float temperature, nn::Rng& rng) {
  const int V = vocab.size();
  // Start from the prompt (or a newline, the most common way a text starts a line).
  std::string start = prompt;
  if (start.empty()) start = vocab.contains('\n') ? "\n" : std::string(1, static_cast<char>(vocab.chars[0]));
  std::vector<int32_t> ids = vocab.encode(start);
  std::vector<float> xs;
  model.reset_state();
  // Feed the prompt in one call (B = 1, steps = its length): its last output is the
  // distribution of the first new character.
  one_hot(xs, ids, V);
  const float* logits = model.forward(xs.data(), static_cast<int>(ids.size()), 1);
  const float* last = logits + (ids.size() - 1) * static_cast<size_t>(V);
  std::string out = start;
  std::vector<int32_t> next(1);
  for (int i = 0; i < n; ++i) {
    next[0] = nn::sample_from_logits(last, V, temperature, rng.uniform());
    out += static_cast<char>(vocab.chars[static_cast<size_t>(next[0])]);
    one_hot(xs, next, V);
    last = model.forward(xs.data(), 1, 1);  // one step, carrying the state
  }
  model.reset_state();
  return out;
}

CharResult run_char_task(const CharOptions& o, std::ostream& os) {
  check_train_options(o);
  const nn::CellType cell = nn::parse_cell(o.cell);
  const nn::TextCorpus corpus = nn::load_corpus(o.corpus);
  const int V = corpus.vocab.size();
  os << "corpus    " << corpus.description << "\n"
     << "          " << corpus.text.size() << " characters, vocabulary of " << V << ", "
     << corpus.train.size() << " for training, " << corpus.val.size() << " for validation\n";
  // Clear errors now, not after the model is built or trained: the sample's prompt must be
  // made of the text's characters (a prompt given on the command line), or the default one
  // gives way to a newline, and the training text must fill a chunk.
  std::string prompt = o.prompt;
  for (size_t i = 0; i < o.prompt.size(); ++i) {
    const auto ch = static_cast<unsigned char>(o.prompt[i]);
    if (corpus.vocab.contains(ch)) continue;
    NN_CHECK(!o.prompt_given, "--prompt \"" << o.prompt << "\": its character " << i << " (byte " << static_cast<int>(ch)
                                            << ") never occurs in " << corpus.path
                                            << ", so the model could not read it: pass a --prompt made of the text's "
                                               "characters, or --prompt \"\" to start from a newline");
    os << "note      the default prompt \"" << o.prompt << "\" has characters this text never has: the sample "
       << "starts from a newline (in a text without one, its first character) instead; choose a prompt with --prompt\n";
    prompt.clear();
    break;
  }
  nn::StreamBatcher batcher(corpus.train, o.batch_size, o.seq_len);
  const int val_B = static_cast<int>(std::min<int64_t>(
      o.batch_size, (static_cast<int64_t>(corpus.val.size()) - 1) / o.seq_len));
  NN_CHECK(val_B >= 1, "the validation part of the corpus (" << corpus.val.size()
                                                              << " characters) is shorter than --seq-len "
                                                              << o.seq_len << " + 1");

  nn::Rng rng(o.seed);
  SeqModel model(cell, V, o.hidden, V, rng);
  std::vector<nn::Param> params = model.params();
  os << "model     one-hot(" << V << ") -> " << nn::cell_name(cell) << "(" << o.hidden << ") -> linear("
     << V << "), " << model.num_params() << " parameters\n"
     << "training  " << o.iters << " iterations of " << o.batch_size << " streams x " << o.seq_len
     << " characters, Adam lr " << o.lr << " (cosine to " << o.lr * o.lr_min_frac << "), clip "
     << o.clip << ", seed " << o.seed;
  if (o.budget_s > 0) os << ", at most " << o.budget_s << " s";
  os << "\n";

  const std::string stem = o.out_dir + "/char_" + nn::cell_name(cell);
  std::filesystem::create_directories(o.out_dir);
  const std::map<std::string, std::string> meta = {{"model", "char-lm"},
                                                   {"cell", nn::cell_name(cell)},
                                                   {"hidden", std::to_string(o.hidden)},
                                                   {"vocab", hex_of(corpus.vocab.chars)}};
  if (!o.load.empty()) {
    const auto loaded = nn::load_params(o.load, params);  // names and shapes must match
    nn::check_params_finite(params, "checkpoint " + o.load);
    const auto it = loaded.find("vocab");
    NN_CHECK(it != loaded.end() && it->second == meta.at("vocab"),
             "checkpoint " << o.load << " was trained on another vocabulary than " << corpus.path
                           << ": sampling from it would map its outputs to the wrong characters");
    os << "loaded    " << o.load << "\n";
  }

  std::vector<int32_t> x, y;
  std::vector<float> xs, probs, losses, dlogits;
  auto step = [&]() {
    if (!batcher.next(x, y)) {  // end of an epoch: start the streams (and the state) over
      batcher.restart();
      model.reset_state();
      batcher.next(x, y);
    }
    const int N = o.seq_len * o.batch_size;
    one_hot(xs, x, V);
    const float* logits = model.forward(xs.data(), o.seq_len, o.batch_size);  // (N, V)
    probs.resize(static_cast<size_t>(N) * V);
    losses.resize(static_cast<size_t>(N));
    dlogits.resize(static_cast<size_t>(N) * V);
    const float loss = nn::softmax_cross_entropy_forward(probs.data(), losses.data(), logits, y.data(), N, V);
    nn::softmax_cross_entropy_backward(dlogits.data(), probs.data(), y.data(), N, V);
    model.backward(dlogits.data());
    return static_cast<double>(loss);
  };
  auto validate = [&]() {
    // The validation text as val_B streams, state carried across its chunks; then the
    // training streams restart from a zero state.
    nn::StreamBatcher vb(corpus.val, val_B, o.seq_len);
    model.reset_state();
    std::vector<int32_t> vx, vy;
    std::vector<float> vxs, vprobs, vlosses;
    double sum = 0.0;
    int64_t chunks = 0;
    while ((o.eval_chunks <= 0 || chunks < o.eval_chunks) && vb.next(vx, vy)) {
      const int N = o.seq_len * val_B;
      one_hot(vxs, vx, V);
      const float* logits = model.forward(vxs.data(), o.seq_len, val_B);
      vprobs.resize(static_cast<size_t>(N) * V);
      vlosses.resize(static_cast<size_t>(N));
      sum += nn::softmax_cross_entropy_forward(vprobs.data(), vlosses.data(), logits, vy.data(), N, V);
      ++chunks;
    }
    model.reset_state();
    return sum / static_cast<double>(std::max<int64_t>(chunks, 1));
  };
  auto checkpoint = [&]() { nn::save_params(stem + ".safetensors", params, meta); };

  nn::MetricsLog log(stem + ".jsonl");
  CharResult r;
  r.cell = nn::cell_name(cell);
  r.corpus = corpus.path;
  if (o.iters > 0) {
    r.curve = train_loop(model, o, std::string("train ") + nn::cell_name(cell), {step, validate, checkpoint},
                         log, os, r.seconds);
    r.iters = r.curve.back().iter;
    r.train_loss = r.curve.back().train_loss;
    r.val_loss = r.curve.back().val_loss;
    os << "result    validation loss " << fixed(r.val_loss) << " nats/char (" << fixed(r.val_loss / std::log(2.0), 3)
       << " bits) after " << r.iters << " iterations, " << nn::format_duration(r.seconds) << " of training ("
       << fixed(1000.0 * r.seconds / static_cast<double>(r.iters), 1) << " ms/iteration)\n";
  } else {
    r.val_loss = validate();
    NN_CHECK(std::isfinite(r.val_loss), "the validation loss is " << r.val_loss << " (no training: --iters 0)"
                                            << (o.load.empty() ? "" : ": is the checkpoint " + o.load + " damaged?"));
    os << "result    validation loss " << fixed(r.val_loss) << " nats/char (no training: --iters 0)\n";
  }

  nn::Rng sample_rng(o.seed + 1);
  r.sample = sample_text(model, corpus.vocab, prompt, o.sample_len, o.temperature, sample_rng);
  std::ofstream(stem + "_sample.txt") << r.sample << "\n";
  os << "sample    (temperature " << o.temperature << ", prompt \"" << prompt << "\")\n"
     << "----------------------------------------------------------------\n"
     << r.sample << "\n"
     << "----------------------------------------------------------------\n"
     << "wrote     " << stem << ".jsonl, " << stem << ".safetensors, " << stem << "_sample.txt\n";
  return r;
}

// ---- task 2: the plant ------------------------------------------------------------------------
namespace {

// Mean and standard deviation per column of a (rows, cols) block: networks learn best from
// inputs and targets of unit scale, and the tank's level (~0.5 m) and outflow (~0.02 m^3/s)
// differ by 25x.
struct Scaler {
  std::vector<double> mean, std;
  static Scaler fit(const std::vector<float>& data, int cols) {
    Scaler s;
    s.mean.assign(static_cast<size_t>(cols), 0.0);
    s.std.assign(static_cast<size_t>(cols), 0.0);
    const size_t rows = data.size() / static_cast<size_t>(cols);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < static_cast<size_t>(cols); ++c) s.mean[c] += data[r * static_cast<size_t>(cols) + c];
    for (double& m : s.mean) m /= static_cast<double>(rows);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < static_cast<size_t>(cols); ++c) {
        const double d = data[r * static_cast<size_t>(cols) + c] - s.mean[c];
        s.std[c] += d * d;
      }
    for (double& v : s.std) v = std::sqrt(std::max(v / static_cast<double>(rows), 1e-12));
    return s;
  }
  std::vector<float> apply(const std::vector<float>& data) const {
    std::vector<float> out(data.size());
    const size_t cols = mean.size();
    for (size_t i = 0; i < data.size(); ++i) out[i] = static_cast<float>((data[i] - mean[i % cols]) / std[i % cols]);
    return out;
  }
  float invert(float v, size_t col) const { return static_cast<float>(v * std[col] + mean[col]); }
};

// The learning problem from a plant run: at step t the network sees (pump, level,
// outflow) at t and predicts (level, outflow) at t+1. It is trained on the CHANGE
// y(t+1) - y(t), and its prediction is y(t) + that change: a residual. Predicting the
// level itself would make it spend its accuracy on copying the current value through a
// tanh layer (the change per step is ~1/100 of the level's range); persistence is then
// what the network starts from, and everything it learns is an improvement on it.
const std::vector<std::string> kInputs = {"pump", "level", "outflow"};
const std::vector<std::string> kOutputs = {"level", "outflow"};

struct PlantData {
  lessons::Series series;
  int rows = 0;                  // steps - 1: the last step has no next value to predict
  std::vector<float> x;          // (rows, 3) the inputs at t
  std::vector<float> y_now;      // (rows, 2) the sensors at t
  std::vector<float> y_next;     // (rows, 2) the sensors at t+1: what is predicted
  std::vector<float> dy;         // (rows, 2) y_next - y_now: what the network is trained on
};

PlantData make_plant_data(int steps, int dead_time, uint64_t seed) {
  lessons::TankConfig cfg;
  cfg.steps = steps;
  cfg.dead_time = dead_time;
  cfg.seed = seed;
  PlantData d;
  d.series = lessons::simulate_tank(cfg);
  d.rows = steps - 1;
  const std::vector<float> in = d.series.columns(kInputs);
  const std::vector<float> out = d.series.columns(kOutputs);
  const auto O = static_cast<std::ptrdiff_t>(kOutputs.size());
  d.x.assign(in.begin(), in.begin() + d.rows * static_cast<std::ptrdiff_t>(kInputs.size()));
  d.y_now.assign(out.begin(), out.end() - O);
  d.y_next.assign(out.begin() + O, out.end());
  d.dy.resize(d.y_next.size());
  for (size_t i = 0; i < d.dy.size(); ++i) d.dy[i] = d.y_next[i] - d.y_now[i];
  return d;
}

// B streams over (rows, C) series, chunks of `steps`, time-major: as nn::StreamBatcher,
// but for float vectors.
class SeriesBatcher {
 public:
  SeriesBatcher(const std::vector<float>& x, const std::vector<float>& y, int rows, int C, int O, int B,
                int steps)
      : x_(x), y_(y), C_(C), O_(O), B_(B), steps_(steps), stream_len_(rows / B) {
    chunks_ = stream_len_ / steps;
    NN_CHECK(chunks_ >= 1, "the plant run has " << rows << " steps; --batch-size " << B << " x --seq-len "
                                                << steps << " needs at least " << static_cast<int64_t>(B) * steps
                                                << " (raise --train-steps or lower them)");
  }
  bool next(std::vector<float>& xs, std::vector<float>& ys) {
    if (chunk_ >= chunks_) return false;
    xs.resize(static_cast<size_t>(steps_) * B_ * C_);
    ys.resize(static_cast<size_t>(steps_) * B_ * O_);
    for (int t = 0; t < steps_; ++t)
      for (int s = 0; s < B_; ++s) {
        const int64_t row = s * stream_len_ + chunk_ * steps_ + t;
        std::copy_n(&x_[static_cast<size_t>(row * C_)], C_, &xs[(static_cast<size_t>(t) * B_ + s) * C_]);
        std::copy_n(&y_[static_cast<size_t>(row * O_)], O_, &ys[(static_cast<size_t>(t) * B_ + s) * O_]);
      }
    ++chunk_;
    return true;
  }
  void restart() { chunk_ = 0; }

 private:
  const std::vector<float>& x_;
  const std::vector<float>& y_;
  int C_, O_, B_, steps_;
  int64_t stream_len_, chunks_ = 0, chunk_ = 0;
};

// Runs the model over a whole series with B = 1, chunk by chunk, carrying the state:
// predictions (rows, O) in standardised units.
std::vector<float> predict_series(SeqModel& model, const std::vector<float>& xs, int rows, int chunk) {
  const int C = model.input_size();
  const int O = model.output_size();
  std::vector<float> pred(static_cast<size_t>(rows) * O);
  model.reset_state();
  for (int t0 = 0; t0 < rows; t0 += chunk) {
    const int n = std::min(chunk, rows - t0);
    const float* out = model.forward(&xs[static_cast<size_t>(t0) * C], n, 1);
    std::copy_n(out, static_cast<size_t>(n) * O, &pred[static_cast<size_t>(t0) * O]);
  }
  model.reset_state();
  return pred;
}

// RMSE of column c over rows [from, rows).
double rmse(const std::vector<float>& pred, const std::vector<float>& truth, int cols, int c, int from) {
  double s = 0.0;
  const size_t rows = truth.size() / static_cast<size_t>(cols);
  for (size_t r = static_cast<size_t>(from); r < rows; ++r) {
    const double d = pred[r * static_cast<size_t>(cols) + static_cast<size_t>(c)] -
                     truth[r * static_cast<size_t>(cols) + static_cast<size_t>(c)];
    s += d * d;
  }
  return std::sqrt(s / static_cast<double>(rows - static_cast<size_t>(from)));
}

}  // namespace

PlantResult run_plant_task(const PlantOptions& o, std::ostream& os) {
  check_train_options(o);
  NN_CHECK(o.dead_time >= 0, "--dead-time must be >= 0, got " << o.dead_time);
  NN_CHECK(o.val_steps > o.dead_time + 10, "--val-steps must be longer than the dead time + 10");
  const nn::CellType cell = nn::parse_cell(o.cell);
  const int C = static_cast<int>(kInputs.size());
  const int O = static_cast<int>(kOutputs.size());

  // Data: two runs of the same plant with different seeds (setpoints, drain, noise).
  const PlantData train = make_plant_data(o.train_steps, o.dead_time, 1);
  const PlantData val = make_plant_data(o.val_steps, o.dead_time, 2);
  const Scaler xs_scale = Scaler::fit(train.x, C);
  const Scaler ys_scale = Scaler::fit(train.dy, O);
  const std::vector<float> train_x = xs_scale.apply(train.x), train_y = ys_scale.apply(train.dy);
  const std::vector<float> val_x = xs_scale.apply(val.x), val_y = ys_scale.apply(val.dy);
  SeriesBatcher batcher(train_x, train_y, train.rows, C, O, o.batch_size, o.seq_len);
  os << "plant     tank under PI control, dead time " << o.dead_time << " steps; " << train.rows
     << " training steps (seed 1), " << val.rows << " validation steps (seed 2)\n"
     << "task      at step t see (pump, level, outflow), predict (level, outflow) at t+1\n";

  nn::Rng rng(o.seed);
  SeqModel model(cell, C, o.hidden, O, rng);
  std::vector<nn::Param> params = model.params();
  os << "model     " << nn::cell_name(cell) << "(" << o.hidden << ") -> linear(" << O << "), " << model.num_params()
     << " parameters; " << o.iters << " iterations of " << o.batch_size << " streams x " << o.seq_len
     << " steps, Adam lr " << o.lr << ", clip " << o.clip << ", seed " << o.seed << "\n";

  std::ostringstream tag;
  tag << "plant_" << nn::cell_name(cell) << "_d" << o.dead_time;
  const std::string stem = o.out_dir + "/" + tag.str();
  std::filesystem::create_directories(o.out_dir);
  if (!o.load.empty()) {
    nn::load_params(o.load, params);
    nn::check_params_finite(params, "checkpoint " + o.load);
    os << "loaded    " << o.load << "\n";
  }

  std::vector<float> xs, ys, dpred;
  auto step = [&]() {
    if (!batcher.next(xs, ys)) {
      batcher.restart();
      model.reset_state();
      batcher.next(xs, ys);
    }
    const int64_t n = static_cast<int64_t>(ys.size());
    const float* pred = model.forward(xs.data(), o.seq_len, o.batch_size);
    dpred.resize(ys.size());
    const float loss = nn::mse_forward(pred, ys.data(), n);
    nn::mse_backward(dpred.data(), pred, ys.data(), n);
    model.backward(dpred.data());
    return static_cast<double>(loss);
  };
  auto validate = [&]() {
    const std::vector<float> pred = predict_series(model, val_x, val.rows, o.seq_len);
    return static_cast<double>(nn::mse_forward(pred.data(), val_y.data(), static_cast<int64_t>(pred.size())));
  };
  auto checkpoint = [&]() {
    nn::save_params(stem + ".safetensors", params,
                    {{"model", "plant"}, {"cell", nn::cell_name(cell)}, {"hidden", std::to_string(o.hidden)},
                     {"dead_time", std::to_string(o.dead_time)}});
  };

  nn::MetricsLog log(stem + ".jsonl");
  PlantResult r;
  r.cell = nn::cell_name(cell);
  r.dead_time = o.dead_time;
  if (o.iters > 0) {
    r.curve = train_loop(model, o, "train " + tag.str(), {step, validate, checkpoint}, log, os, r.seconds);
    r.iters = r.curve.back().iter;
  }

  // ---- scores on the validation run, in physical units ----
  const std::vector<float> net_std = predict_series(model, val_x, val.rows, o.seq_len);
  std::vector<float> net(net_std.size());  // y(t) + the predicted change
  for (size_t i = 0; i < net.size(); ++i) net[i] = val.y_now[i] + ys_scale.invert(net_std[i], i % static_cast<size_t>(O));

  // The baselines see the same data: y = (level, outflow), u = pump.
  const int nb_long = o.dead_time + 5;
  const std::vector<float> train_out = train.series.columns(kOutputs), val_out = val.series.columns(kOutputs);
  const std::vector<float> train_u = train.series.columns({"pump"}), val_u = val.series.columns({"pump"});
  auto arx_pred = [&](int nb) {
    const lessons::ArxModel m = lessons::fit_arx(train_out, train_u, train.series.steps, O, 1, o.arx_na, nb);
    std::vector<float> p = lessons::arx_predict(m, val_out, val_u, val.series.steps);
    p.resize(static_cast<size_t>(val.rows) * O);  // drop the forecast past the end
    return p;
  };
  const std::vector<float> arx_short = arx_pred(o.arx_nb_short);
  const std::vector<float> arx_long = arx_pred(nb_long);
  std::vector<float> persist(val_out.begin(), val_out.begin() + static_cast<std::ptrdiff_t>(val.rows * O));

  // Every model is scored on the same rows: after the longest history any of them needs.
  const int from = std::max(nb_long, o.arx_na);
  auto score = [&](const std::string& name, const std::vector<float>& p) {
    return PlantScores{name, rmse(p, val.y_next, O, 0, from), rmse(p, val.y_next, O, 1, from)};
  };
  std::ostringstream arx_s, arx_l;
  arx_s << "ARX(na=" << o.arx_na << " nb=" << o.arx_nb_short << ")";
  arx_l << "ARX(na=" << o.arx_na << " nb=" << nb_long << ")";
  r.scores = {score("persistence", persist), score(arx_s.str(), arx_short), score(arx_l.str(), arx_long),
              score(r.cell, net)};

  os << "scores    one-step-ahead RMSE on the validation run (" << val.rows - from << " steps)\n"
     << "          model                     level (mm)   outflow (l/s)\n";
  for (const PlantScores& s : r.scores) {
    os << "          " << std::left << std::setw(26) << s.model << std::right << std::setw(10)
       << fixed(1000.0 * s.level_rmse, 3) << std::setw(16) << fixed(1000.0 * s.outflow_rmse, 4) << "\n";
  }

  // ---- files for the notebook ----
  {
    std::ofstream js(stem + ".json");
    NN_CHECK(js.is_open(), "cannot write " << stem << ".json");
    js << "{\"cell\": \"" << r.cell << "\", \"dead_time\": " << o.dead_time << ", \"hidden\": " << o.hidden
       << ", \"iters\": " << r.iters << ", \"seconds\": " << r.seconds << ", \"scores\": [";
    for (size_t i = 0; i < r.scores.size(); ++i) {
      js << (i ? ", " : "") << "{\"model\": \"" << r.scores[i].model << "\", \"level_rmse\": "
         << r.scores[i].level_rmse << ", \"outflow_rmse\": " << r.scores[i].outflow_rmse << "}";
    }
    js << "]}\n";
  }
  {
    std::ofstream csv(stem + "_val.csv");
    NN_CHECK(csv.is_open(), "cannot write " << stem << "_val.csv");
    csv << "t,setpoint,pump,level,outflow,drain,level_persistence,level_arx_short,level_arx_long,level_net,"
           "outflow_arx_long,outflow_net\n";
    const int end = std::min(val.rows, from + 1500);
    const int sp = val.series.index_of("setpoint"), pu = val.series.index_of("pump"),
              dr = val.series.index_of("drain");
    for (int t = from; t < end; ++t) {
      const size_t i = static_cast<size_t>(t) * O;
      // row t: the inputs at t, the true sensors at t+1 and every model's prediction of them
      csv << t << "," << val.series.at(t, sp) << "," << val.series.at(t, pu) << "," << val.y_next[i] << ","
          << val.y_next[i + 1] << "," << val.series.at(t + 1, dr) << "," << persist[i] << "," << arx_short[i] << ","
          << arx_long[i] << "," << net[i] << "," << arx_long[i + 1] << "," << net[i + 1] << "\n";
    }
  }
  os << "wrote     " << stem << ".jsonl, .json, _val.csv, .safetensors\n";
  return r;
}

// ---- gradients vs distance in time -----------------------------------------------------------
std::vector<GradientRow> gradient_vs_distance(nn::CellType cell, int H, int C, int steps,
                                              const std::vector<double>& scales, uint64_t seed) {
  NN_CHECK(steps >= 2, "need at least 2 steps to measure a distance, got " << steps);
  std::vector<GradientRow> rows;
  for (double scale : scales) {
    nn::Rng rng(seed);  // the same weights and inputs for every scale: only Wh's size changes
    nn::Recurrent layer("probe", cell, C, H, rng);
    for (float& w : layer.Wh.span()) w = static_cast<float>(w * scale);
    std::vector<float> xs(static_cast<size_t>(steps) * C);
    for (float& v : xs) v = rng.normal();
    layer.forward(xs.data(), steps, 1);
    // The loss looks at the last step only: L = r . h_last with a random r, so every
    // gradient that reaches an earlier h_t got there through the recurrence.
    std::vector<float> dhs(static_cast<size_t>(steps) * H, 0.0f);
    for (int j = 0; j < H; ++j) dhs[static_cast<size_t>(steps - 1) * H + j] = rng.normal();
    std::vector<float> norms(static_cast<size_t>(steps));
    nn::zero_grads(layer.params());
    layer.backward(nullptr, dhs.data(), norms.data());
    const double last = norms[static_cast<size_t>(steps - 1)];
    for (int t = steps - 1; t >= 0; --t) {
      rows.push_back({nn::cell_name(cell), scale, steps - 1 - t, norms[static_cast<size_t>(t)] / last});
    }
  }
  return rows;
}

void report_gradients(const std::vector<GradientRow>& rows, const std::string& csv_path, std::ostream& os) {
  std::filesystem::create_directories(std::filesystem::path(csv_path).parent_path());
  std::ofstream csv(csv_path);
  NN_CHECK(csv.is_open(), "cannot write " << csv_path);
  csv << "cell,scale,distance,norm\n";
  for (const GradientRow& r : rows) csv << r.cell << "," << r.scale << "," << r.distance << "," << r.norm << "\n";
  os << "          ||dL/dh_t|| / ||dL/dh_last|| at distance d = last - t\n"
     << "          cell  Wh x   d=1         d=5         d=10        d=20        d=50\n";
  for (size_t i = 0; i < rows.size();) {
    size_t j = i;
    std::ostringstream line;
    line << "          " << std::left << std::setw(6) << rows[i].cell << std::setw(6) << rows[i].scale << std::right;
    for (; j < rows.size() && rows[j].cell == rows[i].cell && rows[j].scale == rows[i].scale; ++j) {
      const int d = rows[j].distance;
      if (d == 1 || d == 5 || d == 10 || d == 20 || d == 50) {
        std::ostringstream v;
        v << std::scientific << std::setprecision(2) << rows[j].norm;
        line << std::setw(12) << v.str();
      }
    }
    os << line.str() << "\n";
    i = j;
  }
  os << "wrote     " << csv_path << "\n";
}

}  // namespace seqlab
