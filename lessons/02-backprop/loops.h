// Lesson 02, part 2: a small MLP whose forward and backward passes are written out as
// loops, trained by gradient descent on two interleaved spirals. See README.md.
//
//   point (2) -> layer 1 -> tanh -> (H) -> layer 2 -> tanh -> (H) -> layer 3 -> logits (2)
//   loss = -log softmax(logits)[label], averaged over the examples
//
// Everything is double, so the loops' gradients can be compared with the autograd's
// (autograd.h) down to rounding error; nn/ runs the same math in float, in matrix form.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <vector>

namespace lesson02 {

// ---- data -------------------------------------------------------------------------------
// Two spirals wound into each other: class 0 and class 1 take turns as you walk outward
// from the centre, so no straight line (and no single neuron) can separate them.
struct PointSet {
  std::vector<double> points;  // (N, 2): point n is (points[2n], points[2n + 1])
  std::vector<int> labels;     // (N), 0 or 1
  int size() const { return static_cast<int>(labels.size()); }
  const double* point(int n) const { return points.data() + 2 * static_cast<std::ptrdiff_t>(n); }
};
PointSet make_spirals(int points_per_class, double noise, uint64_t seed);

// ---- the network --------------------------------------------------------------------------
constexpr int kLoopsInputs = 2;   // a point (x, y)
constexpr int kLoopsClasses = 2;  // spiral 0 or spiral 1

// The parameters, laid out like nn::Linear's: weight (out, in), row o holds the weights
// into output o. The same struct holds the gradients (one number per parameter).
struct MlpParams {
  int hidden = 0;              // H
  std::vector<double> w1;      // (H, 2)
  std::vector<double> b1;      // (H)
  std::vector<double> w2;      // (H, H)
  std::vector<double> b2;      // (H)
  std::vector<double> w3;      // (2, H)
  std::vector<double> b3;      // (2)

  static constexpr std::array<const char*, 6> kNames = {"w1", "b1", "w2", "b2", "w3", "b3"};
  // The six tensors in the order of kNames: for update loops and comparisons.
  std::array<std::vector<double>*, 6> tensors() { return {&w1, &b1, &w2, &b2, &w3, &b3}; }
  std::array<const std::vector<double>*, 6> tensors() const { return {&w1, &b1, &w2, &b2, &w3, &b3}; }
};
MlpParams zero_params(int hidden);  // all zero: gradient buffers
// Weights ~ U(-a, a), a = sqrt(6 / (in + out)) (Glorot, as nn::Linear does for tanh); biases 0.
MlpParams init_params(int hidden, uint64_t seed);

// One example's trip through the network: the forward pass fills the values, the
// backward pass the gradients with respect to them (the d* fields, one per value).
struct ExampleActivations {
  std::vector<double> h1_pre, h1;  // (H) layer 1 output before and after tanh
  std::vector<double> h2_pre, h2;  // (H) layer 2 output before and after tanh
  std::vector<double> logits;      // (2)
  std::vector<double> probs;       // (2) softmax(logits)
  double loss = 0.0;               // -log probs[label]
  std::vector<double> dlogits;     // (2) d(scale * loss)/d logits
  std::vector<double> dh2, dh2_pre, dh1, dh1_pre;  // (H) each
  explicit ExampleActivations(int hidden = 0);
};

// One example forward: fills the values of `act`, returns the loss.
double forward_example(const MlpParams& net, const double* point, int label, ExampleActivations& act);
// One example backward, after its forward: fills the d* fields of `act` (assigned) and
// ACCUMULATES into `grads` the gradient of (scale * loss). With scale = 1/B summed over
// B examples, that is the gradient of the mean loss.
void backward_example(const MlpParams& net, const double* point, int label, ExampleActivations& act,
                      double scale, MlpParams& grads);

// The mean loss over the first `count` examples (0 = all), and its gradient, ASSIGNED to
// `grads` (zeroed here first).
double loss_and_gradients(const MlpParams& net, const PointSet& data, int count, MlpParams& grads);
// The same loss and gradients, computed by building the network out of autograd Values.
double autograd_loss_and_gradients(const MlpParams& net, const PointSet& data, int count,
                                   MlpParams& grads);
// Fraction of points whose larger logit is their label.
double accuracy(const MlpParams& net, const PointSet& data);
// Largest |a - b| over all parameters.
double max_abs_diff(const MlpParams& a, const MlpParams& b);

// ---- training -------------------------------------------------------------------------------
struct LoopsConfig {
  int points_per_class = 150;  // 300 training points
  double noise = 0.04;         // std of the Gaussian jitter; the outer radius is 1
  int hidden = 16;             // H
  int epochs = 3000;           // full-batch gradient-descent steps
  double lr = 1.0;
  uint64_t seed = 1;           // data and initial weights; the test set uses seed + 1
  int print_every = 500;       // 0 = print nothing while training
};

struct LoopsResult {
  double initial_loss = 0.0;
  double final_loss = 0.0;
  double train_accuracy = 0.0;
  double test_accuracy = 0.0;
  double seconds = 0.0;
  MlpParams params;
};
// Trains from scratch, printing progress to `os`. Same config, same result, bit for bit.
LoopsResult train_loops(const LoopsConfig& cfg, std::ostream& os);

// Prints every intermediate value of one example's forward and backward pass.
void trace_one_example(std::ostream& os, const MlpParams& net, const PointSet& data, int index);

}  // namespace lesson02
