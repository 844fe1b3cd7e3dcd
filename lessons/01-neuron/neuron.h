// Lesson 01: a neuron and an MLP in plain loops. See lessons/01-neuron/README.md.
//
// Three parts, run in this order by `nnlab lesson01` (or one with --part):
//   inference  neurons with weights set by hand: logic gates, a pump controller, XOR
//   nudge      learn XOR without calculus: nudge one weight at random, keep it if the loss drops
//   gradient   the slope of the loss for every weight, measured by nudging each one a little;
//              step all weights downhill, and compare with random nudges
//
// Everything is double and written as loops over std::vector: no matrices yet (lesson 02).
// Good breakpoints: lesson01::neuron_forward, lesson01::nudge_train, lesson01::gradient_train.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "nn/rng.h"

namespace lesson01 {

struct Options {
  std::string part = "all";  // which part to run: inference | nudge | gradient | all
  bool trace = false;        // print every intermediate value for one input
  int trace_steps = 3;       // with --trace: how many training steps to print in full
  uint64_t seed = 11;        // initial weights and nudges; 11 is a typical run (README: try 1)
  int steps = 5000;          // nudge-training steps; the gradient part gets as many loss evaluations
  int hidden = 2;            // hidden neurons of the trained XOR network (2-hidden-1)
  double nudge_size = 1.0;   // a nudge is uniform in [-nudge_size, +nudge_size]
  double lr = 8.0;           // gradient part: w -= lr * slope
  int seeds = 20;            // gradient part: compare both methods on seeds 1..seeds (0: skip)
  std::string csv;           // if set, write the training curves here (the notebook reads it)
  std::string grid;          // if set, write the XOR networks' outputs on a 41 x 41 grid here
};

void add_options(CLI::App& app, Options& opts);
int run(const Options& opts);

// ---- activations ----------------------------------------------------------------------------
enum class Activation { step, sigmoid };
double step(double z);     // 1 if z >= 0, else 0: the neuron "fires" or not
double sigmoid(double z);  // 1 / (1 + exp(-z)): a smooth step between 0 and 1
double activate(Activation activation, double z);

// ---- one neuron -----------------------------------------------------------------------------
struct Neuron {
  std::vector<double> weights;  // one per input: how much each input counts, and with what sign
  double bias = 0.0;            // shifts the threshold: the neuron fires when w.x >= -bias
};

// y = activation(sum_i weights[i] * inputs[i] + bias). With trace, prints every term.
double neuron_forward(const Neuron& neuron, const std::vector<double>& inputs, Activation activation,
                      bool trace = false);

// ---- a network of neurons: inputs -> hidden layer -> one output neuron ----------------------
struct Mlp {
  std::vector<Neuron> hidden;  // each hidden neuron sees every input
  Neuron output;               // sees every hidden neuron's output
  Activation activation = Activation::sigmoid;  // used by every neuron
};

std::vector<double> hidden_layer_forward(const Mlp& mlp, const std::vector<double>& inputs,
                                         bool trace = false);
double mlp_forward(const Mlp& mlp, const std::vector<double>& inputs, bool trace = false);

// ---- weights set by hand ----------------------------------------------------------------------
// Step-activation gates on inputs 0/1. Multiply every weight and the bias by ~10 and the
// same neuron works with a sigmoid (see scale_neuron).
Neuron and_neuron();   // w = (1, 1),   b = -1.5
Neuron or_neuron();    // w = (1, 1),   b = -0.5
Neuron nand_neuron();  // w = (-1, -1), b = +1.5
Neuron scale_neuron(const Neuron& neuron, double factor);

// A tank-fill pump as one step neuron. Inputs: level (0 = empty, 1 = full), outflow demand
// (0..1), high-level switch (0 or 1). Pump on while level < 0.5 + 0.3 * demand, never with
// the high-level switch tripped.
Neuron pump_controller_neuron();

// XOR as two layers: h1 = OR(x1, x2), h2 = NAND(x1, x2), y = AND(h1, h2).
// Activation::step uses the gates as they are; Activation::sigmoid scales them by 10.
Mlp hand_set_xor_mlp(Activation activation);

// ---- the task and its loss --------------------------------------------------------------------
struct Example {
  std::vector<double> inputs;
  double target = 0.0;
};
std::vector<Example> xor_examples();  // (0,0)->0, (0,1)->1, (1,0)->1, (1,1)->0

// loss = 1/N sum_n (mlp(x_n) - target_n)^2, over the N examples
double mean_squared_error(const Mlp& mlp, const std::vector<Example>& examples);
// Every output on the right side of 0.5: the truth table read as 0/1 is right.
bool all_correct(const Mlp& mlp, const std::vector<Example>& examples);

// How many of the four XOR cases the best single step neuron gets right, searching
// w1, w2, b over a grid from -grid_limit to +grid_limit. Never 4 (README: why).
struct SingleNeuronSearch {
  int neurons_tried = 0;
  int best_correct = 0;
  Neuron best;
};
SingleNeuronSearch search_single_neuron_for_xor(double grid_limit, double grid_step);

// ---- learning -----------------------------------------------------------------------------
// Every number the network can learn, with a name for printing: "hidden[1].weights[0]".
struct Parameter {
  std::string name;
  double* value = nullptr;  // points into the Mlp: valid while that Mlp lives and keeps its size
};
std::vector<Parameter> list_parameters(Mlp& mlp);

// An inputs-hidden-1 sigmoid MLP, every weight and bias uniform in [-init_scale, init_scale].
Mlp random_mlp(int inputs, int hidden, double init_scale, nn::Rng& rng);

struct TrainConfig {
  int hidden = 2;                // hidden neurons
  double init_scale = 1.0;       // initial weights uniform in [-init_scale, init_scale]
  int max_evaluations = 2001;    // budget: how many times the loss may be computed, the first included
  double nudge_size = 1.0;       // nudge: uniform in [-nudge_size, +nudge_size]
  double learning_rate = 8.0;    // gradient: w -= learning_rate * slope
  double slope_h = 1e-4;         // gradient: slope = (loss(w + h) - loss(w)) / h
  uint64_t seed = 1;             // the same seed gives both methods the same initial weights
  int trace_steps = 0;           // print the first trace_steps steps in full
};

struct CurvePoint {
  int step = 0;
  int evaluations = 0;  // loss evaluations so far, the first one included
  double loss = 0.0;    // the loss of the current weights after this step
};

struct TrainResult {
  std::string method;              // "nudge" or "gradient"
  Mlp mlp;                         // the trained network
  std::vector<CurvePoint> curve;   // one point per step, step 0 = the initial weights
  int steps = 0;
  int evaluations = 0;             // loss evaluations spent, the first included
  int kept_nudges = 0;             // nudge only: how many nudges lowered the loss
  double initial_loss = 0.0;
  double final_loss = 0.0;
  int solved_at_step = -1;         // first step after which all four cases were right (-1: never)
  int solved_at_evaluations = -1;  // ... and the loss evaluations spent until then
};

// Random nudges: pick one parameter at random, add a random amount; keep it if the loss
// went down, else put the old value back. One loss evaluation per step.
TrainResult nudge_train(const TrainConfig& config);

// Slopes by finite differences: for each parameter, slope = (loss(w + h) - loss(w)) / h;
// then every w -= learning_rate * slope. One loss evaluation per parameter per step, plus one.
TrainResult gradient_train(const TrainConfig& config);

// The loss after `evaluations` loss evaluations: the last curve point within that budget.
double loss_at_evaluations(const TrainResult& result, int evaluations);

// One seed is an anecdote: both methods on seeds 1..seeds, same config otherwise.
struct MethodComparison {
  int seeds = 0;
  int nudge_solved = 0;                      // seeds on which nudging solved XOR
  int gradient_solved = 0;
  int nudge_median_evaluations = -1;         // median loss evaluations to solve, over the solved seeds
  int gradient_median_evaluations = -1;      // (-1: solved on none)
  double nudge_mean_final_loss = 0.0;        // over all seeds, solved or not
  double gradient_mean_final_loss = 0.0;
};
MethodComparison compare_methods(const TrainConfig& config, int seeds);

}  // namespace lesson01
