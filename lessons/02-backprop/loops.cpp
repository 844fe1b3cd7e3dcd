// Lesson 02, part 2: the same small MLP with its backward pass written as loops.
//
//   point (2) -> layer 1 -> tanh -> h1 (H) -> layer 2 -> tanh -> h2 (H) -> layer 3 -> logits (2)
//   loss = -log softmax(logits)[label], averaged over the examples
//
// Read top-down: the data (two spirals), the loops of one layer (forward and backward),
// one example forward and backward, the gradient over a batch, the same gradient from the
// autograd of part 1 (to check the loops), training, and the part itself.
// Good breakpoints: lesson02::forward_example, lesson02::backward_example.
#include "lessons/02-backprop/loops.h"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <numbers>
#include <sstream>
#include <string>

#include "lessons/02-backprop/autograd.h"
#include "lessons/02-backprop/backprop.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace lesson02 {

// ---- data: two spirals ---------------------------------------------------------------------
PointSet make_spirals(int points_per_class, double noise, uint64_t seed) {
  NN_CHECK(points_per_class > 0, "need at least one point per class, got " << points_per_class);
  NN_CHECK(noise >= 0.0, "noise is a standard deviation and cannot be negative, got " << noise);
  // 1.5 turns each: enough that every straight line cuts through both spirals several times.
  constexpr double kTurns = 1.5;
  nn::Rng rng(seed);
  PointSet set;
  // Classes alternate (0, 1, 0, 1, ...) so that the first few points hold both classes.
  for (int i = 0; i < points_per_class; ++i) {
    for (int label = 0; label < kLoopsClasses; ++label) {
      // t in [0, 1): how far along its spiral the point lies, from the centre outward
      const auto t = static_cast<double>(rng.uniform());
      const double radius = 0.1 + 0.9 * t;
      // spiral 1 is spiral 0 rotated by half a turn
      const double angle = 2.0 * std::numbers::pi * kTurns * t + std::numbers::pi * label;
      const double jitter_x = noise * static_cast<double>(rng.normal());
      const double jitter_y = noise * static_cast<double>(rng.normal());
      set.points.push_back(radius * std::cos(angle) + jitter_x);
      set.points.push_back(radius * std::sin(angle) + jitter_y);
      set.labels.push_back(label);
    }
  }
  return set;
}

// ---- parameters ---------------------------------------------------------------------------
MlpParams zero_params(int hidden) {
  NN_CHECK(hidden > 0, "the hidden layer needs at least one unit, got " << hidden);
  MlpParams p;
  p.hidden = hidden;
  const auto H = static_cast<size_t>(hidden);
  p.w1.assign(H * kLoopsInputs, 0.0);
  p.b1.assign(H, 0.0);
  p.w2.assign(H * H, 0.0);
  p.b2.assign(H, 0.0);
  p.w3.assign(kLoopsClasses * H, 0.0);
  p.b3.assign(kLoopsClasses, 0.0);
  return p;
}

MlpParams init_params(int hidden, uint64_t seed) {
  MlpParams p = zero_params(hidden);
  nn::Rng rng(seed);
  // Glorot: the spread that keeps a tanh layer's outputs about as spread as its inputs.
  auto fill = [&rng](std::vector<double>& weight, int in, int out) {
    const double a = std::sqrt(6.0 / (in + out));
    for (double& w : weight) {
      w = a * (2.0 * static_cast<double>(rng.uniform()) - 1.0);
    }
  };
  fill(p.w1, kLoopsInputs, hidden);
  fill(p.w2, hidden, hidden);
  fill(p.w3, hidden, kLoopsClasses);
  return p;
}

ExampleActivations::ExampleActivations(int hidden)
    : h1_pre(static_cast<size_t>(hidden)), h1(static_cast<size_t>(hidden)),
      h2_pre(static_cast<size_t>(hidden)), h2(static_cast<size_t>(hidden)), logits(kLoopsClasses),
      probs(kLoopsClasses), dlogits(kLoopsClasses), dh2(static_cast<size_t>(hidden)),
      dh2_pre(static_cast<size_t>(hidden)), dh1(static_cast<size_t>(hidden)),
      dh1_pre(static_cast<size_t>(hidden)) {}

// ---- the loops of one layer, for one example ---------------------------------------------------
// nn::linear_forward / linear_backward (nn/ops.cpp) run exactly these loops for every row
// of a batch at once; see run_loops_part's closing note.
namespace {

// in (I), weight (O, I), bias (O) -> out (O)
void linear_forward_one(double* out, const double* in, const std::vector<double>& weight,
                        const std::vector<double>& bias, int in_size, int out_size) {
  for (int o = 0; o < out_size; ++o) {
    // out_o = b_o + sum_i W_oi in_i
    double sum = bias[static_cast<size_t>(o)];
    for (int i = 0; i < in_size; ++i) {
      sum += weight[static_cast<size_t>(o * in_size + i)] * in[i];
    }
    out[o] = sum;
  }
}

// dout (O) -> din (I) assigned (skipped if nullptr), dweight (O, I) and dbias (O) accumulated
void linear_backward_one(double* din, std::vector<double>& dweight, std::vector<double>& dbias,
                         const double* dout, const double* in, const std::vector<double>& weight,
                         int in_size, int out_size) {
  for (int o = 0; o < out_size; ++o) {
    // out_o = b_o + sum_i W_oi in_i, so d out_o / d W_oi = in_i and d out_o / d b_o = 1:
    //   dL/dW_oi += dL/dout_o * in_i
    //   dL/db_o  += dL/dout_o
    for (int i = 0; i < in_size; ++i) {
      dweight[static_cast<size_t>(o * in_size + i)] += dout[o] * in[i];
    }
    dbias[static_cast<size_t>(o)] += dout[o];
  }
  if (din == nullptr) return;
  for (int i = 0; i < in_size; ++i) {
    // in_i feeds every output o, with d out_o / d in_i = W_oi; the paths add up:
    //   dL/din_i = sum_o dL/dout_o * W_oi
    double sum = 0.0;
    for (int o = 0; o < out_size; ++o) {
      sum += dout[o] * weight[static_cast<size_t>(o * in_size + i)];
    }
    din[i] = sum;
  }
}

// h = tanh(pre), element by element
void tanh_forward_one(double* h, const double* pre, int n) {
  for (int j = 0; j < n; ++j) {
    h[j] = std::tanh(pre[j]);
  }
}

// dL/dpre_j = dL/dh_j * (1 - h_j^2): the derivative of tanh, from its saved output
void tanh_backward_one(double* dpre, const double* dh, const double* h, int n) {
  for (int j = 0; j < n; ++j) {
    dpre[j] = dh[j] * (1.0 - h[j] * h[j]);
  }
}

}  // namespace

// ---- one example: forward, then backward ---------------------------------------------------------
double forward_example(const MlpParams& net, const double* point, int label, ExampleActivations& act) {
  const int H = net.hidden;
  NN_CHECK(static_cast<int>(act.h1.size()) == H,
           "activations are sized for " << act.h1.size() << " hidden units, the network has " << H);
  NN_CHECK(0 <= label && label < kLoopsClasses, "label " << label << " is not 0 or 1");
  linear_forward_one(act.h1_pre.data(), point, net.w1, net.b1, kLoopsInputs, H);
  tanh_forward_one(act.h1.data(), act.h1_pre.data(), H);
  linear_forward_one(act.h2_pre.data(), act.h1.data(), net.w2, net.b2, H, H);
  tanh_forward_one(act.h2.data(), act.h2_pre.data(), H);
  linear_forward_one(act.logits.data(), act.h2.data(), net.w3, net.b3, H, kLoopsClasses);

  // softmax(z)_k = exp(z_k - max) / sum_j exp(z_j - max); subtracting the max changes
  // nothing mathematically and keeps exp() from overflowing.
  double max_logit = act.logits[0];
  for (int k = 1; k < kLoopsClasses; ++k) {
    max_logit = std::fmax(max_logit, act.logits[static_cast<size_t>(k)]);
  }
  double sum_exp = 0.0;
  for (int k = 0; k < kLoopsClasses; ++k) {
    act.probs[static_cast<size_t>(k)] = std::exp(act.logits[static_cast<size_t>(k)] - max_logit);
    sum_exp += act.probs[static_cast<size_t>(k)];
  }
  for (int k = 0; k < kLoopsClasses; ++k) {
    act.probs[static_cast<size_t>(k)] /= sum_exp;
  }
  // loss = -log p_label = log(sum_j exp(z_j - max)) + max - z_label, from the logits so
  // that a probability rounding to 0 gives a large finite loss, not inf
  act.loss = std::log(sum_exp) + max_logit - act.logits[static_cast<size_t>(label)];
  return act.loss;
}

void backward_example(const MlpParams& net, const double* point, int label, ExampleActivations& act,
                      double scale, MlpParams& grads) {
  const int H = net.hidden;
  // softmax + cross-entropy: dL/dz_k = p_k - [k == label], times scale (1/B for a mean)
  for (int k = 0; k < kLoopsClasses; ++k) {
    const double target = k == label ? 1.0 : 0.0;
    act.dlogits[static_cast<size_t>(k)] = scale * (act.probs[static_cast<size_t>(k)] - target);
  }
  // layer 3: logits = W3 h2 + b3
  linear_backward_one(act.dh2.data(), grads.w3, grads.b3, act.dlogits.data(), act.h2.data(), net.w3,
                      H, kLoopsClasses);
  // h2 = tanh(h2_pre)
  tanh_backward_one(act.dh2_pre.data(), act.dh2.data(), act.h2.data(), H);
  // layer 2: h2_pre = W2 h1 + b2
  linear_backward_one(act.dh1.data(), grads.w2, grads.b2, act.dh2_pre.data(), act.h1.data(), net.w2,
                      H, H);
  // h1 = tanh(h1_pre)
  tanh_backward_one(act.dh1_pre.data(), act.dh1.data(), act.h1.data(), H);
  // layer 1: h1_pre = W1 point + b1; nobody needs d loss / d point, hence nullptr
  linear_backward_one(nullptr, grads.w1, grads.b1, act.dh1_pre.data(), point, net.w1, kLoopsInputs,
                      H);
}

// ---- a batch: the mean loss and its gradient ----------------------------------------------------
namespace {

int batch_count(const PointSet& data, int count) {
  NN_CHECK(data.size() > 0, "the data set is empty");
  NN_CHECK(count >= 0, "count must be >= 0 (0 = all), got " << count);
  return count == 0 || count > data.size() ? data.size() : count;
}

void set_to_zero(MlpParams& grads) {
  for (std::vector<double>* tensor : grads.tensors()) {
    for (double& g : *tensor) {
      g = 0.0;
    }
  }
}

}  // namespace

double loss_and_gradients(const MlpParams& net, const PointSet& data, int count, MlpParams& grads) {
  const int B = batch_count(data, count);
  if (grads.hidden != net.hidden) {
    grads = zero_params(net.hidden);
  }
  set_to_zero(grads);  // parameter gradients accumulate below, so start from 0
  ExampleActivations act(net.hidden);
  // d(mean loss)/d param = sum over examples of d((1/B) loss_b)/d param
  const double scale = 1.0 / B;
  double total_loss = 0.0;
  for (int b = 0; b < B; ++b) {
    total_loss += forward_example(net, data.point(b), data.labels[static_cast<size_t>(b)], act);
    backward_example(net, data.point(b), data.labels[static_cast<size_t>(b)], act, scale, grads);
  }
  return total_loss / B;
}

double accuracy(const MlpParams& net, const PointSet& data) {
  ExampleActivations act(net.hidden);
  int correct = 0;
  for (int n = 0; n < data.size(); ++n) {
    const int label = data.labels[static_cast<size_t>(n)];
    forward_example(net, data.point(n), label, act);
    // predicted class = the larger logit (ties go to class 0)
    const int predicted = act.logits[1] > act.logits[0] ? 1 : 0;
    correct += predicted == label ? 1 : 0;
  }
  return static_cast<double>(correct) / data.size();
}

double max_abs_diff(const MlpParams& a, const MlpParams& b) {
  NN_CHECK(a.hidden == b.hidden, "comparing networks of " << a.hidden << " and " << b.hidden
                                                          << " hidden units");
  double worst = 0.0;
  const auto ta = a.tensors();
  const auto tb = b.tensors();
  for (size_t t = 0; t < ta.size(); ++t) {
    for (size_t i = 0; i < ta[t]->size(); ++i) {
      const double diff = std::fabs((*ta[t])[i] - (*tb[t])[i]);
      if (std::isnan(diff) || diff > worst) worst = diff;  // a NaN sticks
    }
  }
  return worst;
}

// ---- the same gradient from the autograd of part 1 ----------------------------------------------
double autograd_loss_and_gradients(const MlpParams& net, const PointSet& data, int count,
                                   MlpParams& grads) {
  const int B = batch_count(data, count);
  const int H = net.hidden;
  Graph g;
  // One leaf per parameter, tensor by tensor in the order of MlpParams::kNames.
  std::array<std::vector<Value>, 6> leaves;
  const auto tensors = net.tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (double p : *tensors[t]) {
      leaves[t].push_back(g.leaf(p));
    }
  }
  const std::vector<Value>& w1 = leaves[0];
  const std::vector<Value>& b1 = leaves[1];
  const std::vector<Value>& w2 = leaves[2];
  const std::vector<Value>& b2 = leaves[3];
  const std::vector<Value>& w3 = leaves[4];
  const std::vector<Value>& b3 = leaves[5];
  auto at = [](const std::vector<Value>& v, int index) { return v[static_cast<size_t>(index)]; };

  Value total = g.constant(0.0);
  for (int b = 0; b < B; ++b) {
    const std::array<Value, 2> x = {g.constant(data.point(b)[0]), g.constant(data.point(b)[1])};
    std::vector<Value> h1;
    for (int j = 0; j < H; ++j) {
      Value pre = at(b1, j);
      for (int i = 0; i < kLoopsInputs; ++i) pre = pre + at(w1, j * kLoopsInputs + i) * x[static_cast<size_t>(i)];
      h1.push_back(tanh(pre));
    }
    std::vector<Value> h2;
    for (int j = 0; j < H; ++j) {
      Value pre = at(b2, j);
      for (int m = 0; m < H; ++m) pre = pre + at(w2, j * H + m) * at(h1, m);
      h2.push_back(tanh(pre));
    }
    std::vector<Value> logits;
    for (int k = 0; k < kLoopsClasses; ++k) {
      Value z = at(b3, k);
      for (int j = 0; j < H; ++j) z = z + at(w3, k * H + j) * at(h2, j);
      logits.push_back(z);
    }
    // loss_b = log(sum_k exp(z_k)) - z_label. No max subtracted: the logits stay small
    // here, and the shift would not change a single derivative.
    Value sum_exp = exp(logits[0]);
    for (int k = 1; k < kLoopsClasses; ++k) sum_exp = sum_exp + exp(at(logits, k));
    const Value loss_b = log(sum_exp) - at(logits, data.labels[static_cast<size_t>(b)]);
    total = total + loss_b;
  }
  const Value loss = total / static_cast<double>(B);
  g.backward(loss);

  grads = zero_params(H);
  auto grad_tensors = grads.tensors();
  for (size_t t = 0; t < grad_tensors.size(); ++t) {
    for (size_t i = 0; i < leaves[t].size(); ++i) {
      (*grad_tensors[t])[i] = leaves[t][i].grad();
    }
  }
  return loss.data();
}

// ---- training: gradient descent on the whole set -------------------------------------------------
namespace {

std::string percent(double fraction) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << 100.0 * fraction << "%";
  return os.str();
}

}  // namespace

LoopsResult train_loops(const LoopsConfig& cfg, std::ostream& os) {
  NN_CHECK(cfg.epochs >= 0, "epochs must be >= 0, got " << cfg.epochs);
  NN_CHECK(cfg.lr > 0.0, "the learning rate must be positive, got " << cfg.lr);
  const PointSet train = make_spirals(cfg.points_per_class, cfg.noise, cfg.seed);
  const PointSet test = make_spirals(cfg.points_per_class, cfg.noise, cfg.seed + 1);
  LoopsResult result;
  result.params = init_params(cfg.hidden, cfg.seed);
  MlpParams& net = result.params;
  MlpParams grads = zero_params(cfg.hidden);

  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch <= cfg.epochs; ++epoch) {
    const double loss = loss_and_gradients(net, train, 0, grads);
    NN_CHECK(std::isfinite(loss), "the loss became " << loss << " at epoch " << epoch
                                                     << ": the learning rate " << cfg.lr
                                                     << " is too high");
    if (epoch == 0) result.initial_loss = loss;
    result.final_loss = loss;
    if (cfg.print_every > 0 && epoch % cfg.print_every == 0) {
      os << "  epoch " << std::setw(5) << epoch << "  loss " << std::fixed << std::setprecision(4)
         << loss << std::defaultfloat << std::setprecision(6) << "  train accuracy "
         << percent(accuracy(net, train)) << "\n";
    }
    if (epoch == cfg.epochs) break;  // the last pass only measures the loss
    // gradient descent: param -= lr * d(mean loss)/d param, for every parameter
    auto params = net.tensors();
    const auto param_grads = grads.tensors();
    for (size_t t = 0; t < params.size(); ++t) {
      std::vector<double>& p = *params[t];
      const std::vector<double>& g = *param_grads[t];
      for (size_t i = 0; i < p.size(); ++i) {
        p[i] -= cfg.lr * g[i];
      }
    }
  }
  const auto stop = std::chrono::steady_clock::now();
  result.seconds = std::chrono::duration<double>(stop - start).count();
  result.train_accuracy = accuracy(net, train);
  result.test_accuracy = accuracy(net, test);
  return result;
}

// ---- --trace: one example, every number -------------------------------------------------------------
namespace {

void print_values(std::ostream& os, const std::string& name, const double* values, size_t n) {
  os << "  " << std::left << std::setw(10) << name << std::right << "(" << n << ")";
  for (size_t i = 0; i < n; ++i) {
    os << " " << std::setprecision(4) << values[i];
  }
  os << std::setprecision(6) << "\n";
}

void print_values(std::ostream& os, const std::string& name, const std::vector<double>& values) {
  print_values(os, name, values.data(), values.size());
}

}  // namespace

void trace_one_example(std::ostream& os, const MlpParams& net, const PointSet& data, int index) {
  NN_CHECK(0 <= index && index < data.size(), "no example " << index << " in a set of " << data.size());
  ExampleActivations act(net.hidden);
  MlpParams grads = zero_params(net.hidden);
  const int label = data.labels[static_cast<size_t>(index)];
  const double loss = forward_example(net, data.point(index), label, act);
  backward_example(net, data.point(index), label, act, 1.0, grads);
  os << "one example, forward (--trace): point " << index << ", label " << label << "\n";
  print_values(os, "point", data.point(index), kLoopsInputs);
  print_values(os, "h1_pre", act.h1_pre);
  print_values(os, "h1", act.h1);
  print_values(os, "h2_pre", act.h2_pre);
  print_values(os, "h2", act.h2);
  print_values(os, "logits", act.logits);
  print_values(os, "probs", act.probs);
  os << "  loss       -log probs[" << label << "] = " << loss << "\n";
  os << "backward, from the loss down (gradients of this one example's loss):\n";
  print_values(os, "dlogits", act.dlogits);
  print_values(os, "dh2", act.dh2);
  print_values(os, "dh2_pre", act.dh2_pre);
  print_values(os, "dh1", act.dh1);
  print_values(os, "dh1_pre", act.dh1_pre);
  print_values(os, "dw3", grads.w3);
  print_values(os, "db3", grads.b3);
  print_values(os, "dw2 row 0", grads.w2.data(), static_cast<size_t>(net.hidden));
  print_values(os, "db2", grads.b2);
  print_values(os, "dw1", grads.w1);
  print_values(os, "db1", grads.b1);
}

// ---- the part ---------------------------------------------------------------------------------------
int run_loops_part(const Options& opts) {
  std::cout << "== Part 2: the same kind of MLP, forward and backward written as loops ==\n\n";
  const LoopsConfig cfg;
  std::cout << "data      two interleaved spirals: " << 2 * cfg.points_per_class
            << " training points, " << 2 * cfg.points_per_class << " test points (noise "
            << cfg.noise << ", seed " << cfg.seed << ")\n"
            << "network   2-" << cfg.hidden << "-" << cfg.hidden
            << "-2, tanh, softmax + cross-entropy, double precision\n\n";

  // 1. The loops against the autograd, on the untrained network and a few points.
  const PointSet train = make_spirals(cfg.points_per_class, cfg.noise, cfg.seed);
  const MlpParams initial = init_params(cfg.hidden, cfg.seed);
  if (opts.trace) {
    trace_one_example(std::cout, initial, train, 0);
    std::cout << "\n";
  }
  constexpr int kCheckPoints = 8;
  MlpParams loop_grads;
  MlpParams graph_grads;
  const double loop_loss = loss_and_gradients(initial, train, kCheckPoints, loop_grads);
  const double graph_loss = autograd_loss_and_gradients(initial, train, kCheckPoints, graph_grads);
  std::cout << "check: gradients of the mean loss over " << kCheckPoints
            << " points, hand-written loops vs the autograd of part 1\n"
            << "  loss " << loop_loss << " (loops) vs " << graph_loss << " (autograd)\n";
  const auto loop_tensors = loop_grads.tensors();
  const auto graph_tensors = graph_grads.tensors();
  double worst = std::fabs(loop_loss - graph_loss);
  for (size_t t = 0; t < loop_tensors.size(); ++t) {
    double tensor_worst = 0.0;
    for (size_t i = 0; i < loop_tensors[t]->size(); ++i) {
      const double diff = std::fabs((*loop_tensors[t])[i] - (*graph_tensors[t])[i]);
      if (std::isnan(diff) || diff > tensor_worst) tensor_worst = diff;
    }
    std::cout << "  d loss/d " << MlpParams::kNames[t] << ": max |loops - autograd| = " << tensor_worst
              << "\n";
    if (std::isnan(tensor_worst) || tensor_worst > worst) worst = tensor_worst;
  }
  // Both sides do the same arithmetic in a different order: agreement to ~1e-16 is
  // expected; anything above 1e-9 is a bug in one of them.
  if (!(worst <= 1e-9)) {
    std::cerr << "error: the loops and the autograd disagree by " << worst
              << ": a backward loop in loops.cpp is wrong\n";
    return 1;
  }

  // 2. Training.
  std::cout << "\ntraining: full-batch gradient descent, lr " << cfg.lr << ", " << cfg.epochs
            << " epochs\n";
  const LoopsResult result = train_loops(cfg, std::cout);
  std::cout << "result    loss " << std::fixed << std::setprecision(4) << result.initial_loss << " -> "
            << result.final_loss << std::defaultfloat << std::setprecision(6) << ", train accuracy "
            << percent(result.train_accuracy) << ", test accuracy " << percent(result.test_accuracy)
            << " (" << 2 * cfg.points_per_class << " new points), " << std::fixed
            << std::setprecision(2) << result.seconds << std::defaultfloat << std::setprecision(6)
            << " s\n\n";

  // 3. Where these loops live in nn/.
  std::cout
      << "The same in matrix form: nn::linear_forward / nn::linear_backward (nn/ops.cpp) run\n"
         "linear_forward_one / linear_backward_one for a whole batch of B rows at once:\n"
         "  Y = X W^T + b          X (B,in), W (out,in), Y (B,out)\n"
         "  dX = dY W              (assigned)\n"
         "  dW += dY^T X           (accumulated)\n"
         "  db += sum over rows of dY\n"
         "and nn::softmax_cross_entropy_backward computes dlogits = (probs - onehot) / B.\n"
         "Part 3 (--part train) trains nn::Mlp with them on Fashion-MNIST.\n";
  return 0;
}

}  // namespace lesson02
