// Lesson 01: a neuron and an MLP in plain loops. See lessons/01-neuron/README.md.
//
//   inputs x (N) -> neuron: z = sum_i w_i * x_i + b -> y = step(z) or sigmoid(z)
//   inputs x (2) -> hidden layer (H neurons) -> h (H) -> output neuron -> y
//   loss = 1/4 sum over the four XOR cases of (y - target)^2
//
// Read top-down: activations, one neuron, a network of neurons, weights set by hand, the
// XOR task and its loss, learning by random nudges, learning along measured slopes, the
// three parts as the program prints them, the CSV files, and the command line last.
// Good breakpoints: lesson01::neuron_forward, lesson01::nudge_train, lesson01::gradient_train.
#include "lessons/01-neuron/neuron.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "nn/check.h"
#include "nn/cli_checks.h"

namespace lesson01 {

namespace {

// A number printed with a fixed number of decimals: "0.2500", "-1.5000".
std::string fixed(double value, int decimals = 4) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  std::string printed = text;
  // -1 * 0 is -0 in floating point, and -0.00001 rounds to "-0.0000": print both as 0.
  if (printed.front() == '-' && printed.find_first_not_of("-0.") == std::string::npos) printed.erase(0, 1);
  return printed;
}

// All the digits that matter, for files: "0.2513785312", "3.02e-12" (a loss can get tiny).
std::string precise(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.10g", value);
  return text;
}

// A loss for the tables, 8 characters wide: "0.251379", or "3.02e-09" once six decimals
// would round it to zero.
std::string loss_text(double loss) {
  if (loss == 0.0 || loss >= 1e-3) return fixed(loss, 6);
  char text[64];
  std::snprintf(text, sizeof(text), "%.2e", loss);
  return text;
}

// "(1.0000, 0.0000)": a list of inputs as the trace prints them.
std::string vector_text(const std::vector<double>& values, int decimals = 4) {
  std::string text = "(";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += fixed(values[i], decimals);
  }
  return text + ")";
}

}  // namespace

// ---- activations ----------------------------------------------------------------------------
// step(z) = 1 if z >= 0 else 0. The neuron fires or it does not: a comparator, a relay.
double step(double z) {
  if (z >= 0.0) return 1.0;
  return 0.0;
}

// sigmoid(z) = 1 / (1 + exp(-z)): 0 far below zero, 0.5 at zero, 1 far above. Unlike the
// step, a small change in z always makes a small change in the output, and that is what
// lets the training below feel whether a nudge helped.
double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

double activate(Activation activation, double z) {
  if (activation == Activation::step) return step(z);
  return sigmoid(z);
}

// ---- one neuron -----------------------------------------------------------------------------
double neuron_forward(const Neuron& neuron, const std::vector<double>& inputs, Activation activation,
                      bool trace) {
  NN_CHECK(neuron.weights.size() == inputs.size(),
           "a neuron with " << neuron.weights.size() << " weights got " << inputs.size()
                            << " inputs: it needs exactly one weight per input");
  // z = sum_i w_i * x_i + b: every input pushes z up or down in proportion to its weight.
  double weighted_sum = 0.0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const double term = neuron.weights[i] * inputs[i];
    weighted_sum += term;
    if (trace) {
      std::cout << "      w[" << i << "] * x[" << i << "] = " << fixed(neuron.weights[i]) << " * "
                << fixed(inputs[i]) << " = " << std::setw(8) << fixed(term)
                << "    sum so far " << fixed(weighted_sum) << "\n";
    }
  }
  // The bias moves the threshold: the neuron fires when sum_i w_i x_i >= -b.
  weighted_sum += neuron.bias;
  if (trace) {
    std::cout << "      + bias b           = " << std::setw(8) << fixed(neuron.bias)
              << "    weighted_sum z = " << fixed(weighted_sum) << "\n";
  }
  // y = f(z)
  const double output = activate(activation, weighted_sum);
  if (trace) {
    if (activation == Activation::step) {
      std::cout << "      activation: step(" << fixed(weighted_sum) << ") = " << fixed(output, 0)
                << (weighted_sum >= 0.0 ? "   (z >= 0: fires)" : "   (z < 0: stays off)") << "\n";
    } else {
      std::cout << "      activation: sigmoid(z) = 1 / (1 + exp(" << fixed(-weighted_sum)
                << ")) = " << fixed(output) << "\n";
    }
  }
  return output;
}

// ---- a network of neurons -----------------------------------------------------------------------
// h_j = f(sum_i W_ji x_i + b_j): the hidden layer is several neurons looking at the same inputs.
std::vector<double> hidden_layer_forward(const Mlp& mlp, const std::vector<double>& inputs, bool trace) {
  std::vector<double> hidden_outputs;
  for (size_t j = 0; j < mlp.hidden.size(); ++j) {
    if (trace) std::cout << "    hidden neuron h[" << j << "] sees x = " << vector_text(inputs) << "\n";
    const double h = neuron_forward(mlp.hidden[j], inputs, mlp.activation, trace);
    hidden_outputs.push_back(h);
  }
  return hidden_outputs;
}

// y = f(sum_j v_j h_j + c): the output neuron sees the hidden outputs, not the inputs.
double mlp_forward(const Mlp& mlp, const std::vector<double>& inputs, bool trace) {
  const std::vector<double> hidden_outputs = hidden_layer_forward(mlp, inputs, trace);
  if (trace) std::cout << "    output neuron sees x = h = " << vector_text(hidden_outputs) << "\n";
  const double output = neuron_forward(mlp.output, hidden_outputs, mlp.activation, trace);
  if (trace) std::cout << "    network output y = " << fixed(output) << "\n";
  return output;
}

// ---- weights set by hand ----------------------------------------------------------------------
// For inputs 0/1 the weighted sum of two inputs with weights 1 is the number of inputs that
// are on (0, 1 or 2); the bias picks the threshold that number must reach.
Neuron and_neuron() { return Neuron{{1.0, 1.0}, -1.5}; }   // fires when both are on: 2 - 1.5 >= 0
Neuron or_neuron() { return Neuron{{1.0, 1.0}, -0.5}; }    // fires when at least one is on
Neuron nand_neuron() { return Neuron{{-1.0, -1.0}, 1.5}; }  // AND with every sign flipped

// A step only looks at the sign of z, so step(10 z) = step(z). The sigmoid is sharper the
// larger |z|: sigmoid(10 * 0.5) = 0.9933, sigmoid(10 * -0.5) = 0.0067.
Neuron scale_neuron(const Neuron& neuron, double factor) {
  Neuron scaled = neuron;
  for (double& weight : scaled.weights) {
    weight *= factor;
  }
  scaled.bias *= factor;
  return scaled;
}

// Fires when -10 level + 3 demand - 20 switch + 5 >= 0, that is when
//   level <= 0.5 + 0.3 demand - 2 switch.
// The setpoint is 0.5 of the tank, raised by up to 0.3 when water is drawn off (a
// feedforward term), and the high-level switch weighs so much that it always wins (an
// interlock): with the switch tripped, no level reading in [0, 1] can turn the pump on.
Neuron pump_controller_neuron() { return Neuron{{-10.0, 3.0, -20.0}, 5.0}; }

Mlp hand_set_xor_mlp(Activation activation) {
  // The step version uses the gates as they are; a sigmoid needs them 10x sharper to give
  // outputs close to 0 and 1.
  double factor = 1.0;
  if (activation == Activation::sigmoid) factor = 10.0;
  Mlp mlp;
  mlp.activation = activation;
  mlp.hidden.push_back(scale_neuron(or_neuron(), factor));    // h1 = OR(x1, x2)
  mlp.hidden.push_back(scale_neuron(nand_neuron(), factor));  // h2 = NAND(x1, x2)
  mlp.output = scale_neuron(and_neuron(), factor);             // y = AND(h1, h2)
  return mlp;
}

// ---- the task and its loss ---------------------------------------------------------------------
std::vector<Example> xor_examples() {
  return {
      {{0.0, 0.0}, 0.0},
      {{0.0, 1.0}, 1.0},
      {{1.0, 0.0}, 1.0},
      {{1.0, 1.0}, 0.0},
  };
}

// loss = 1/N sum_n (y_n - target_n)^2. Zero when every output equals its target; squaring
// makes a big miss cost much more than two small ones and keeps every term positive.
double mean_squared_error(const Mlp& mlp, const std::vector<Example>& examples) {
  double sum_of_squares = 0.0;
  for (const Example& example : examples) {
    const double output = mlp_forward(mlp, example.inputs);
    const double error = output - example.target;
    sum_of_squares += error * error;
  }
  return sum_of_squares / static_cast<double>(examples.size());
}

bool all_correct(const Mlp& mlp, const std::vector<Example>& examples) {
  for (const Example& example : examples) {
    const double output = mlp_forward(mlp, example.inputs);
    const bool says_one = output > 0.5;
    const bool should_be_one = example.target > 0.5;
    if (says_one != should_be_one) return false;
  }
  return true;
}

// Tries every (w1, w2, b) on a grid and counts the XOR cases each step neuron gets right.
SingleNeuronSearch search_single_neuron_for_xor(double grid_limit, double grid_step) {
  NN_CHECK(grid_limit > 0.0 && grid_step > 0.0, "the search grid needs a positive limit and step");
  const std::vector<Example> examples = xor_examples();
  // Integer counters, so the grid values are exact multiples of the step (no drift).
  const int points_per_axis = static_cast<int>(std::lround(2.0 * grid_limit / grid_step)) + 1;
  SingleNeuronSearch search;
  for (int i1 = 0; i1 < points_per_axis; ++i1) {
    for (int i2 = 0; i2 < points_per_axis; ++i2) {
      for (int ib = 0; ib < points_per_axis; ++ib) {
        Neuron candidate;
        candidate.weights = {-grid_limit + i1 * grid_step, -grid_limit + i2 * grid_step};
        candidate.bias = -grid_limit + ib * grid_step;
        int correct = 0;
        for (const Example& example : examples) {
          const double output = neuron_forward(candidate, example.inputs, Activation::step);
          if (output == example.target) correct += 1;
        }
        search.neurons_tried += 1;
        if (correct > search.best_correct) {
          search.best_correct = correct;
          search.best = candidate;
        }
      }
    }
  }
  return search;
}

// ---- learning: the parameters ------------------------------------------------------------------
std::vector<Parameter> list_parameters(Mlp& mlp) {
  std::vector<Parameter> parameters;
  for (size_t j = 0; j < mlp.hidden.size(); ++j) {
    Neuron& neuron = mlp.hidden[j];
    for (size_t i = 0; i < neuron.weights.size(); ++i) {
      const std::string name = "hidden[" + std::to_string(j) + "].weights[" + std::to_string(i) + "]";
      parameters.push_back({name, &neuron.weights[i]});
    }
    parameters.push_back({"hidden[" + std::to_string(j) + "].bias", &neuron.bias});
  }
  for (size_t i = 0; i < mlp.output.weights.size(); ++i) {
    parameters.push_back({"output.weights[" + std::to_string(i) + "]", &mlp.output.weights[i]});
  }
  parameters.push_back({"output.bias", &mlp.output.bias});
  return parameters;
}

Mlp random_mlp(int inputs, int hidden, double init_scale, nn::Rng& rng) {
  NN_CHECK(inputs > 0 && hidden > 0, "a network needs at least one input and one hidden neuron");
  Mlp mlp;
  mlp.activation = Activation::sigmoid;
  mlp.hidden.resize(static_cast<size_t>(hidden));
  for (Neuron& neuron : mlp.hidden) {
    for (int i = 0; i < inputs; ++i) {
      neuron.weights.push_back(init_scale * (2.0 * rng.uniform() - 1.0));
    }
    neuron.bias = init_scale * (2.0 * rng.uniform() - 1.0);
  }
  for (int j = 0; j < hidden; ++j) {
    mlp.output.weights.push_back(init_scale * (2.0 * rng.uniform() - 1.0));
  }
  mlp.output.bias = init_scale * (2.0 * rng.uniform() - 1.0);
  return mlp;
}

namespace {

void check_config(const TrainConfig& config) {
  NN_CHECK(config.hidden > 0, "the network needs at least one hidden neuron, got " << config.hidden);
  NN_CHECK(config.max_evaluations > 0, "the loss evaluation budget must be positive");
  NN_CHECK(config.nudge_size > 0.0, "the nudge size must be positive, got " << config.nudge_size);
  NN_CHECK(config.learning_rate > 0.0, "the learning rate must be positive, got " << config.learning_rate);
  NN_CHECK(config.slope_h > 0.0, "the slope step h must be positive, got " << config.slope_h);
}

// Bookkeeping for the report, not part of either method: the four forward passes it
// costs are not counted as loss evaluations.
void note_if_solved(TrainResult& result, int step, int evaluations, const std::vector<Example>& examples) {
  if (result.solved_at_step >= 0) return;
  if (!all_correct(result.mlp, examples)) return;
  result.solved_at_step = step;
  result.solved_at_evaluations = evaluations;
}

}  // namespace

// ---- learning by random nudges ----------------------------------------------------------------
TrainResult nudge_train(const TrainConfig& config) {
  check_config(config);
  const std::vector<Example> examples = xor_examples();
  nn::Rng rng(config.seed);
  TrainResult result;
  result.method = "nudge";
  result.mlp = random_mlp(2, config.hidden, config.init_scale, rng);
  std::vector<Parameter> parameters = list_parameters(result.mlp);  // points into result.mlp
  const auto parameter_count = static_cast<uint32_t>(parameters.size());

  double loss = mean_squared_error(result.mlp, examples);
  int evaluations = 1;
  result.initial_loss = loss;
  result.curve.push_back({0, evaluations, loss});
  note_if_solved(result, 0, evaluations, examples);

  int step = 0;
  while (evaluations < config.max_evaluations) {
    step += 1;
    // Pick one parameter, and an amount uniform in [-nudge_size, +nudge_size].
    const uint32_t index = rng.below(parameter_count);
    double* value = parameters[index].value;
    const double old_value = *value;
    const double nudge = config.nudge_size * (2.0 * rng.uniform() - 1.0);
    *value = old_value + nudge;
    // Try it: the only information this method ever gets is this one number.
    const double old_loss = loss;
    const double new_loss = mean_squared_error(result.mlp, examples);
    evaluations += 1;
    const bool better = new_loss < old_loss;
    if (better) {
      loss = new_loss;
      result.kept_nudges += 1;
    } else {
      *value = old_value;  // undo: put back the exact old value
    }
    if (step <= config.trace_steps) {
      std::cout << "    step " << step << ": " << parameters[index].name << " " << fixed(old_value)
                << (nudge >= 0.0 ? " + " : " - ") << fixed(std::fabs(nudge)) << " = "
                << fixed(old_value + nudge) << ", loss " << fixed(new_loss, 6)
                << (better ? " < " : " >= ") << fixed(old_loss, 6)
                << (better ? ": keep" : ": undo") << "\n";
    }
    result.curve.push_back({step, evaluations, loss});
    if (better) note_if_solved(result, step, evaluations, examples);
  }
  result.steps = step;
  result.evaluations = evaluations;
  result.final_loss = loss;
  return result;
}

// ---- learning along measured slopes -------------------------------------------------------------
TrainResult gradient_train(const TrainConfig& config) {
  check_config(config);
  const std::vector<Example> examples = xor_examples();
  nn::Rng rng(config.seed);
  TrainResult result;
  result.method = "gradient";
  result.mlp = random_mlp(2, config.hidden, config.init_scale, rng);  // the same start as nudge_train
  std::vector<Parameter> parameters = list_parameters(result.mlp);   // points into result.mlp
  const size_t parameter_count = parameters.size();
  const int evaluations_per_step = static_cast<int>(parameter_count) + 1;

  double loss = mean_squared_error(result.mlp, examples);
  int evaluations = 1;
  result.initial_loss = loss;
  result.curve.push_back({0, evaluations, loss});
  note_if_solved(result, 0, evaluations, examples);

  std::vector<double> slopes(parameters.size());
  int step = 0;
  // One step costs one loss evaluation per parameter, plus one at the new weights.
  while (evaluations + evaluations_per_step <= config.max_evaluations) {
    step += 1;
    const bool trace = step <= config.trace_steps;
    if (trace) std::cout << "    step " << step << ": loss(w) = " << fixed(loss, 8) << "\n";
    // slope_k = (loss(w + h e_k) - loss(w)) / h: move one parameter a tiny step h, see how
    // much the loss changes, put the parameter back. The slope says which way is downhill
    // along that parameter, and how steep it is.
    for (size_t k = 0; k < parameter_count; ++k) {
      double* value = parameters[k].value;
      const double old_value = *value;
      *value = old_value + config.slope_h;
      const double loss_nudged = mean_squared_error(result.mlp, examples);
      evaluations += 1;
      *value = old_value;
      slopes[k] = (loss_nudged - loss) / config.slope_h;
      if (trace) {
        std::cout << "      " << std::left << std::setw(20) << parameters[k].name
                  << std::right << " = " << std::setw(8) << fixed(old_value) << ": loss(w + h) = "
                  << fixed(loss_nudged, 8) << ", slope = " << std::setw(8)
                  << fixed(slopes[k]) << "\n";
      }
    }
    // w_k -= learning_rate * slope_k: every parameter at once, each against its own slope,
    // steep ones moving more than flat ones.
    for (size_t k = 0; k < parameter_count; ++k) {
      *parameters[k].value -= config.learning_rate * slopes[k];
    }
    loss = mean_squared_error(result.mlp, examples);
    evaluations += 1;
    if (trace) {
      std::cout << "      every w -= " << fixed(config.learning_rate, 2) << " * slope: loss(w) = "
                << fixed(loss, 8) << "\n";
    }
    result.curve.push_back({step, evaluations, loss});
    note_if_solved(result, step, evaluations, examples);
  }
  result.steps = step;
  result.evaluations = evaluations;
  result.final_loss = loss;
  return result;
}

double loss_at_evaluations(const TrainResult& result, int evaluations) {
  NN_CHECK(!result.curve.empty(), "an empty training curve has no loss");
  double loss = result.curve.front().loss;
  for (const CurvePoint& point : result.curve) {
    if (point.evaluations > evaluations) break;
    loss = point.loss;
  }
  return loss;
}

namespace {

int median(std::vector<int> values) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

MethodComparison compare_methods(const TrainConfig& config, int seeds) {
  NN_CHECK(seeds > 0, "compare on at least one seed, got " << seeds);
  MethodComparison comparison;
  comparison.seeds = seeds;
  std::vector<int> nudge_evaluations;
  std::vector<int> gradient_evaluations;
  for (int seed = 1; seed <= seeds; ++seed) {
    TrainConfig seeded = config;
    seeded.seed = static_cast<uint64_t>(seed);
    seeded.trace_steps = 0;
    const TrainResult nudged = nudge_train(seeded);
    const TrainResult descended = gradient_train(seeded);
    if (nudged.solved_at_step >= 0) {
      comparison.nudge_solved += 1;
      nudge_evaluations.push_back(nudged.solved_at_evaluations);
    }
    if (descended.solved_at_step >= 0) {
      comparison.gradient_solved += 1;
      gradient_evaluations.push_back(descended.solved_at_evaluations);
    }
    comparison.nudge_mean_final_loss += nudged.final_loss / seeds;
    comparison.gradient_mean_final_loss += descended.final_loss / seeds;
  }
  comparison.nudge_median_evaluations = median(nudge_evaluations);
  comparison.gradient_median_evaluations = median(gradient_evaluations);
  return comparison;
}

// ---- the parts, as the program prints them ---------------------------------------------------
namespace {

TrainConfig config_from(const Options& opts, bool trace) {
  TrainConfig config;
  config.hidden = opts.hidden;
  config.max_evaluations = opts.steps + 1;  // the loss of the initial weights, then one per nudge
  config.nudge_size = opts.nudge_size;
  config.learning_rate = opts.lr;
  config.seed = opts.seed;
  config.trace_steps = 0;
  if (trace) config.trace_steps = opts.trace_steps;
  return config;
}

void print_truth_table(const Mlp& mlp, const std::vector<Example>& examples) {
  std::cout << "    x1 x2 | target | output\n";
  for (const Example& example : examples) {
    const double output = mlp_forward(mlp, example.inputs);
    std::cout << "     " << fixed(example.inputs[0], 0) << "  " << fixed(example.inputs[1], 0) << " |      "
              << fixed(example.target, 0) << " | " << fixed(output) << (output > 0.5 ? "  -> 1" : "  -> 0")
              << "\n";
  }
}

void print_gate(const std::string& name, const Neuron& gate, bool trace) {
  const Neuron sharp = scale_neuron(gate, 10.0);
  std::cout << "  " << name << ": w = " << vector_text(gate.weights, 1) << ", b = " << fixed(gate.bias, 1)
            << "   (sigmoid column: the same neuron with w and b times 10)\n";
  std::cout << "    x1 x2 |      z | step(z) | sigmoid(10 z)\n";
  for (const Example& example : xor_examples()) {
    // z = w1 x1 + w2 x2 + b, spelled out for the table; neuron_forward computes the same.
    const double z = gate.weights[0] * example.inputs[0] + gate.weights[1] * example.inputs[1] + gate.bias;
    const double hard = neuron_forward(gate, example.inputs, Activation::step);
    const double soft = neuron_forward(sharp, example.inputs, Activation::sigmoid);
    std::cout << "     " << fixed(example.inputs[0], 0) << "  " << fixed(example.inputs[1], 0) << " | "
              << std::setw(6) << fixed(z, 2) << " |       " << fixed(hard, 0) << " | " << fixed(soft) << "\n";
  }
  if (trace) {
    const std::vector<double> inputs = {1.0, 1.0};
    std::cout << "    trace: " << name << " with step, x = " << vector_text(inputs, 0) << "\n";
    neuron_forward(gate, inputs, Activation::step, true);
  }
}

struct SensorReading {
  double level;           // 0 = empty, 1 = full (from a level transmitter)
  double demand;          // 0..1: how much water is drawn off downstream
  double high_switch;     // 1 = the high-level float switch is tripped
  const char* situation;  // what is happening in the plant
};

int run_inference_part(const Options& opts) {
  std::cout << "== Part 1: inference: neurons with weights set by hand ==\n\n";
  std::cout << "A neuron: z = w1 x1 + w2 x2 + b, output = step(z) = 1 if z >= 0 else 0.\n"
               "The weights say how much each input counts; the bias sets the threshold.\n\n";

  std::cout << "-- 1a. One neuron as a logic gate --\n";
  print_gate("AND", and_neuron(), opts.trace);
  print_gate("OR", or_neuron(), false);
  print_gate("NAND", nand_neuron(), false);
  std::cout << "\n";

  std::cout << "-- 1b. One neuron as a tank-fill pump controller --\n";
  const Neuron pump = pump_controller_neuron();
  std::cout << "  inputs: level (0 empty .. 1 full), demand (0..1), high-level switch (0/1)\n"
            << "  w = " << vector_text(pump.weights, 1) << ", b = " << fixed(pump.bias, 1) << "\n"
            << "  pump on  <=>  -10 level + 3 demand - 20 switch + 5 >= 0\n"
            << "           <=>  level <= 0.5 + 0.3 demand - 2 switch\n"
            << "  (setpoint 0.5, raised by demand: feedforward; the switch overrides all: interlock)\n";
  const std::vector<SensorReading> readings = {
      {0.20, 0.0, 0.0, "tank low"},
      {0.55, 0.0, 0.0, "just above the setpoint, nothing drawn off"},
      {0.55, 1.0, 0.0, "same level, full demand downstream"},
      {0.85, 1.0, 0.0, "nearly full"},
      {0.30, 0.5, 1.0, "level transmitter reads low but the high switch trips (sensor fault)"},
      {1.00, 0.0, 1.0, "full"},
  };
  std::cout << "    level demand switch |      z | pump | situation\n";
  for (const SensorReading& reading : readings) {
    const std::vector<double> inputs = {reading.level, reading.demand, reading.high_switch};
    const double z = pump.weights[0] * reading.level + pump.weights[1] * reading.demand +
                     pump.weights[2] * reading.high_switch + pump.bias;
    const double pump_on = neuron_forward(pump, inputs, Activation::step);
    std::cout << "     " << fixed(reading.level, 2) << "   " << fixed(reading.demand, 2) << "      "
              << fixed(reading.high_switch, 0) << " | " << std::setw(6) << fixed(z, 2) << " | "
              << (pump_on > 0.5 ? " on " : " off") << " | " << reading.situation << "\n";
  }
  if (opts.trace) {
    const std::vector<double> inputs = {readings[2].level, readings[2].demand, readings[2].high_switch};
    std::cout << "    trace: pump controller, x = (level, demand, switch) = " << vector_text(inputs, 2) << "\n";
    neuron_forward(pump, inputs, Activation::step, true);
  }
  std::cout << "\n";

  std::cout << "-- 1c. XOR: one neuron cannot, two layers can --\n";
  const SingleNeuronSearch search = search_single_neuron_for_xor(2.0, 0.25);
  std::cout << "  Tried " << search.neurons_tried << " single step neurons (w1, w2, b each from -2 to 2 in "
            << "steps of 0.25):\n  the best gets " << search.best_correct << " of 4 XOR cases right "
            << "(w = " << vector_text(search.best.weights, 2) << ", b = " << fixed(search.best.bias, 2)
            << "). None gets 4:\n"
            << "  (0,1) and (1,0) on need w1 + b >= 0 and w2 + b >= 0; adding them, w1 + w2 + b >= -b,\n"
            << "  and (0,0) off needs b < 0, so w1 + w2 + b > 0: (1,1) would be on too. One line cannot\n"
            << "  cut the plane with (0,1), (1,0) on one side and (0,0), (1,1) on the other.\n\n";

  const Mlp xor_mlp = hand_set_xor_mlp(Activation::step);
  std::cout << "  Two layers: h1 = OR(x1, x2), h2 = NAND(x1, x2), y = AND(h1, h2), all step neurons.\n";
  std::cout << "    x1 x2 | h1=OR h2=NAND | y=AND(h1,h2) | XOR\n";
  bool all_right = true;
  for (const Example& example : xor_examples()) {
    const std::vector<double> hidden_outputs = hidden_layer_forward(xor_mlp, example.inputs);
    const double output = mlp_forward(xor_mlp, example.inputs);
    if (output != example.target) all_right = false;
    std::cout << "     " << fixed(example.inputs[0], 0) << "  " << fixed(example.inputs[1], 0) << " |     "
              << fixed(hidden_outputs[0], 0) << "       " << fixed(hidden_outputs[1], 0) << " |            "
              << fixed(output, 0) << " |   " << fixed(example.target, 0) << "\n";
  }
  std::cout << "  " << (all_right ? "All four cases right." : "WRONG: the hand-set XOR network fails a case.")
            << " The hidden layer turned the inputs into (h1, h2), where one line suffices.\n";
  if (opts.trace) {
    const std::vector<double> inputs = {1.0, 0.0};
    std::cout << "    trace: XOR network, x = " << vector_text(inputs, 0) << "\n";
    mlp_forward(xor_mlp, inputs, true);
  }
  std::cout << "\n";
  return all_right ? 0 : 1;
}

void print_curve(const TrainResult& result, int rows) {
  const int last_step = result.steps;
  const int every = std::max(1, last_step / rows);
  std::cout << "    step | loss evaluations | loss\n";
  for (const CurvePoint& point : result.curve) {
    if (point.step % every != 0 && point.step != last_step) continue;
    std::cout << "    " << std::setw(4) << point.step << " | " << std::setw(16) << point.evaluations << " | "
              << loss_text(point.loss) << "\n";
  }
}

void print_outcome(const TrainResult& result) {
  const std::vector<Example> examples = xor_examples();
  if (result.solved_at_step >= 0) {
    std::cout << "  Solved XOR (all four outputs on the right side of 0.5) after " << result.solved_at_step
              << " steps, " << result.solved_at_evaluations << " loss evaluations.\n";
  } else {
    std::cout << "  NOT solved: after " << result.steps << " steps some XOR case is still on the wrong side "
              << "of 0.5.\n  The search got stuck (a local minimum) or needs more steps: try another --seed, "
              << "more --steps or --hidden 3.\n";
  }
  std::cout << "  Loss " << loss_text(result.initial_loss) << " -> " << loss_text(result.final_loss) << " after "
            << result.steps << " steps, " << result.evaluations << " loss evaluations.\n";
  print_truth_table(result.mlp, examples);
}

TrainResult run_nudge_part(const Options& opts) {
  std::cout << "== Part 2: nudge: learn XOR without calculus ==\n\n";
  std::cout << "  A 2-" << opts.hidden << "-1 sigmoid network starts from random weights (seed " << opts.seed
            << ").\n  Each step: pick one weight or bias at random, add a random amount in [-"
            << fixed(opts.nudge_size, 2) << ", +" << fixed(opts.nudge_size, 2)
            << "],\n  compute the loss; keep the change if the loss went down, else undo.\n"
            << "  loss = mean over the 4 XOR cases of (output - target)^2\n";
  if (opts.trace) std::cout << "  The first " << opts.trace_steps << " steps in full:\n";
  const TrainResult result = nudge_train(config_from(opts, opts.trace));
  print_curve(result, 10);
  std::cout << "  " << result.kept_nudges << " of " << result.steps << " nudges were kept.\n";
  print_outcome(result);
  if (opts.trace) {
    const std::vector<double> inputs = {1.0, 0.0};
    std::cout << "    trace: the trained network, x = " << vector_text(inputs, 0) << "\n";
    mlp_forward(result.mlp, inputs, true);
  }
  std::cout << "\n";
  return result;
}

TrainResult run_gradient_part(const Options& opts, const TrainResult& nudged) {
  std::cout << "== Part 3: gradient: which way is downhill? ==\n\n";
  const int parameter_count = 3 * opts.hidden + opts.hidden + 1;
  std::cout << "  Same network, same initial weights. Each step: for each of the " << parameter_count
            << " weights and biases, add h = 1e-4,\n  measure the loss, put it back: slope = (loss(w + h) - "
               "loss(w)) / h. Then move every weight\n  against its slope: w -= "
            << fixed(opts.lr, 2) << " * slope. One step costs " << parameter_count + 1
            << " loss evaluations.\n";
  if (opts.trace) std::cout << "  The first " << opts.trace_steps << " steps in full:\n";
  const TrainResult result = gradient_train(config_from(opts, opts.trace));
  print_curve(result, 10);
  print_outcome(result);

  std::cout << "\n  Same budget of loss evaluations, two ways to spend it:\n";
  std::cout << "    loss evaluations | nudge loss | gradient loss\n";
  for (const int evaluations : {1, 101, 201, 501, 1001, 2001, 5001, 10001, 20001}) {
    if (evaluations > nudged.evaluations && evaluations > result.evaluations) break;
    std::cout << "    " << std::setw(16) << evaluations << " | " << std::setw(10)
              << loss_text(loss_at_evaluations(nudged, evaluations)) << " | "
              << loss_text(loss_at_evaluations(result, evaluations)) << "\n";
  }
  const int budget = std::min(nudged.evaluations, result.evaluations);
  const double nudge_loss = loss_at_evaluations(nudged, budget);
  const double gradient_loss = loss_at_evaluations(result, budget);
  std::cout << "  After " << budget << " loss evaluations: nudge " << loss_text(nudge_loss) << ", gradient "
            << loss_text(gradient_loss) << ": " << (gradient_loss < nudge_loss ? "the slopes" : "the nudges")
            << " got further on this seed.\n";

  if (opts.seeds > 0) {
    const MethodComparison comparison = compare_methods(config_from(opts, false), opts.seeds);
    std::cout << "\n  One seed is an anecdote. Seeds 1 to " << comparison.seeds << ", the same "
              << budget << " loss evaluations each:\n";
    std::cout << "                  | solved XOR | median evaluations to solve | mean final loss\n";
    std::cout << "    random nudges | " << std::setw(4) << comparison.nudge_solved << " of " << std::setw(2)
              << comparison.seeds << " | " << std::setw(27) << comparison.nudge_median_evaluations << " | "
              << loss_text(comparison.nudge_mean_final_loss) << "\n";
    std::cout << "    slopes        | " << std::setw(4) << comparison.gradient_solved << " of " << std::setw(2)
              << comparison.seeds << " | " << std::setw(27) << comparison.gradient_median_evaluations << " | "
              << loss_text(comparison.gradient_mean_final_loss) << "\n";
  }
  std::cout << "\n  With " << parameter_count << " numbers to learn, blind nudges are not a bad method: a step costs one\n"
            << "  loss evaluation, and when they work they are quick. But they get stuck: a stuck run lumps\n"
            << "  cases together (two outputs at 0.50 or three at 0.67, the mean of their targets), and\n"
            << "  every nudge it tries from there goes uphill. The slopes keep going downhill, but\n"
            << "  measuring them costs one loss evaluation per weight, every step: " << parameter_count
            << " here, 124 million\n"
            << "  for GPT-2 small. Backprop (lesson 02) computes the same slopes exactly, all of them in\n"
            << "  one backward pass that costs about two forward passes, however many weights.\n\n";
  return result;
}

// ---- the CSV files the notebook reads ------------------------------------------------------------
void write_curves_csv(const std::string& path, const std::vector<TrainResult>& results) {
  std::ofstream file(path);
  NN_CHECK(file.is_open(), "cannot write the training curves to '" << path << "': does the directory exist?");
  file << "method,step,evaluations,loss\n";
  for (const TrainResult& result : results) {
    for (const CurvePoint& point : result.curve) {
      file << result.method << "," << point.step << "," << point.evaluations << "," << precise(point.loss)
           << "\n";
    }
  }
  NN_CHECK(file.good(), "writing '" << path << "' failed: is the disk full?");
  std::cout << "Wrote the training curves to " << path << "\n";
}

// Each network's output on a 41 x 41 grid over [-0.5, 1.5]^2: its decision boundary.
void write_grid_csv(const std::string& path, const std::vector<TrainResult>& results) {
  std::ofstream file(path);
  NN_CHECK(file.is_open(), "cannot write the grid to '" << path << "': does the directory exist?");
  std::vector<std::string> names = {"hand_set"};
  std::vector<Mlp> networks = {hand_set_xor_mlp(Activation::sigmoid)};
  for (const TrainResult& result : results) {
    names.push_back(result.method);
    networks.push_back(result.mlp);
  }
  constexpr int kGridPoints = 41;
  file << "network,x1,x2,output\n";
  for (size_t n = 0; n < networks.size(); ++n) {
    for (int i = 0; i < kGridPoints; ++i) {
      for (int j = 0; j < kGridPoints; ++j) {
        const double x1 = -0.5 + 0.05 * i;
        const double x2 = -0.5 + 0.05 * j;
        const double output = mlp_forward(networks[n], {x1, x2});
        file << names[n] << "," << fixed(x1, 2) << "," << fixed(x2, 2) << "," << fixed(output, 6) << "\n";
      }
    }
  }
  NN_CHECK(file.good(), "writing '" << path << "' failed: is the disk full?");
  std::cout << "Wrote the decision-boundary grid to " << path << "\n";
}

}  // namespace

// ---- command line -------------------------------------------------------------------------------
void add_options(CLI::App& app, Options& opts) {
  app.add_option("--part", opts.part, "Which part to run")
      ->check(CLI::IsMember({"inference", "nudge", "gradient", "all"}))
      ->capture_default_str();
  app.add_flag("--trace", opts.trace,
               "Print every intermediate value for one input (and the first training steps in full)");
  app.add_option("--trace-steps", opts.trace_steps, "With --trace: how many training steps to print in full")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--seed", opts.seed, "Seed for the initial weights and the nudges (same seed, same run)")->check(nn::Seed())
      ->capture_default_str();
  app.add_option("--steps", opts.steps,
                 "Nudge steps; the gradient part gets the same number of loss evaluations")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--hidden", opts.hidden, "Hidden neurons of the trained XOR network")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--nudge-size", opts.nudge_size, "A nudge is uniform in [-size, +size]")
      ->check(nn::FiniteRange(1e-6, 100.0))
      ->capture_default_str();
  app.add_option("--lr", opts.lr, "Gradient part: w -= lr * slope")
      ->check(nn::FiniteRange(1e-6, 1000.0))
      ->capture_default_str();
  app.add_option("--seeds", opts.seeds, "Gradient part: compare both methods on seeds 1..N (0: skip)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--csv", opts.csv, "Write the training curves (method,step,evaluations,loss) to this file");
  app.add_option("--grid", opts.grid,
                 "Write the XOR networks' outputs on a 41x41 grid (network,x1,x2,output) to this file");
}

int run(const Options& opts) {
  const bool all = opts.part == "all";
  int status = 0;
  if (all || opts.part == "inference") status = run_inference_part(opts);

  std::vector<TrainResult> trained;  // what --csv and --grid write
  if (all || opts.part == "nudge") {
    trained.push_back(run_nudge_part(opts));
  } else if (opts.part == "gradient") {
    // The comparison needs the nudge run too: same seed, same result, printed nothing.
    trained.push_back(nudge_train(config_from(opts, false)));
  }
  if (all || opts.part == "gradient") {
    trained.push_back(run_gradient_part(opts, trained.front()));
  }

  if (!opts.csv.empty()) write_curves_csv(opts.csv, trained);
  if (!opts.grid.empty()) write_grid_csv(opts.grid, trained);
  return status;
}

}  // namespace lesson01
