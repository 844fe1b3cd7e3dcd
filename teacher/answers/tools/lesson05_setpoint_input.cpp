// Lesson 05 question 6: the plant task of `nnlab lesson05 --part plant`, trained as the program
// trains it (same plant runs, scaling, residual target, model, seed, batches, Adam, cosine lr,
// clipping, validation every 100 iterations), with the setpoint as an optional fourth input.
// Usage: drv 3|4 [dead_time]. With 3 inputs it must print the program's rnn row.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>
#include "lessons/05-rnn/seq_tasks.h"
#include "lessons/common/plant.h"
#include "nn/ops.h"
#include "nn/optim.h"

namespace {
std::vector<std::string> g_inputs = {"pump", "level", "outflow"};
const std::vector<std::string> kOutputs = {"level", "outflow"};
struct PlantData {
  lessons::Series series;
  int rows = 0;
  std::vector<float> x, y_now, y_next, dy;
};
PlantData make_plant_data(int steps, int dead_time, uint64_t seed) {
  lessons::TankConfig cfg;
  cfg.steps = steps;
  cfg.dead_time = dead_time;
  cfg.seed = seed;
  PlantData d;
  d.series = lessons::simulate_tank(cfg);
  d.rows = steps - 1;
  const std::vector<float> in = d.series.columns(g_inputs);
  const std::vector<float> out = d.series.columns(kOutputs);
  const auto O = static_cast<std::ptrdiff_t>(kOutputs.size());
  d.x.assign(in.begin(), in.begin() + d.rows * static_cast<std::ptrdiff_t>(g_inputs.size()));
  d.y_now.assign(out.begin(), out.end() - O);
  d.y_next.assign(out.begin() + O, out.end());
  d.dy.resize(d.y_next.size());
  for (size_t i = 0; i < d.dy.size(); ++i) d.dy[i] = d.y_next[i] - d.y_now[i];
  return d;
}
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
class SeriesBatcher {
 public:
  SeriesBatcher(const std::vector<float>& x, const std::vector<float>& y, int rows, int C, int O, int B, int steps)
      : x_(x), y_(y), C_(C), O_(O), B_(B), steps_(steps), stream_len_(rows / B) {
    chunks_ = stream_len_ / steps;
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
std::vector<float> predict_series(seqlab::SeqModel& model, const std::vector<float>& xs, int rows, int chunk) {
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

int main(int argc, char** argv) {
  if (std::atoi(argv[1]) == 4) g_inputs.push_back("setpoint");
  const int dead_time = argc > 2 ? std::atoi(argv[2]) : 20;
  const seqlab::PlantOptions o;  // the program's defaults: H 32, T 64, B 16, lr 1e-2, 3000 iters, eval 100
  const int C = static_cast<int>(g_inputs.size()), O = 2;
  const PlantData train = make_plant_data(o.train_steps, dead_time, 1);
  const PlantData val = make_plant_data(o.val_steps, dead_time, 2);
  const Scaler xs_scale = Scaler::fit(train.x, C);
  const Scaler ys_scale = Scaler::fit(train.dy, O);
  const std::vector<float> train_x = xs_scale.apply(train.x), train_y = ys_scale.apply(train.dy);
  const std::vector<float> val_x = xs_scale.apply(val.x);
  SeriesBatcher batcher(train_x, train_y, train.rows, C, O, o.batch_size, o.seq_len);
  nn::Rng rng(o.seed);
  seqlab::SeqModel model(nn::CellType::RNN, C, o.hidden, O, rng);
  std::vector<nn::Param> params = model.params();
  nn::Adam adam(params, nn::AdamConfig{o.lr, 0.9f, 0.999f, 1e-8f, 0.0f});
  std::vector<float> xs, ys, dpred;
  for (int64_t it = 1; it <= o.iters; ++it) {
    adam.config().lr = nn::cosine_lr(o.lr, o.lr_min_frac, static_cast<double>(it - 1) / static_cast<double>(o.iters));
    nn::zero_grads(params);
    if (!batcher.next(xs, ys)) {
      batcher.restart();
      model.reset_state();
      batcher.next(xs, ys);
    }
    const int64_t n = static_cast<int64_t>(ys.size());
    const float* pred = model.forward(xs.data(), o.seq_len, o.batch_size);
    dpred.resize(ys.size());
    nn::mse_forward(pred, ys.data(), n);
    nn::mse_backward(dpred.data(), pred, ys.data(), n);
    model.backward(dpred.data());
    nn::clip_grad_norm(params, o.clip);
    adam.step();
    if (it % o.eval_every == 0 || it == o.iters) predict_series(model, val_x, val.rows, o.seq_len);  // resets the state, as the program's validation
  }
  const std::vector<float> net_std = predict_series(model, val_x, val.rows, o.seq_len);
  std::vector<float> net(net_std.size());
  for (size_t i = 0; i < net.size(); ++i) net[i] = val.y_now[i] + ys_scale.invert(net_std[i], i % 2);
  const int from = std::max(dead_time + 5, o.arx_na);
  std::cout << "inputs " << C << " (";
  for (const auto& s : g_inputs) std::cout << s << " ";
  std::cout << "), dead time " << dead_time << ", " << model.num_params() << " parameters: rnn level "
            << 1000.0 * rmse(net, val.y_next, O, 0, from) << " mm, outflow " << 1000.0 * rmse(net, val.y_next, O, 1, from)
            << " l/s\n";
}
