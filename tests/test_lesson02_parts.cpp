// Lesson 02, parts 1 and 2: the scalar autograd (autograd.h) and the hand-written loops
// (loops.h). Every gradient is checked against central finite differences in double
// precision, and the loops against the autograd.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "lessons/02-backprop/autograd.h"
#include "lessons/02-backprop/backprop.h"
#include "lessons/02-backprop/loops.h"
#include "nn/check.h"
#include "nn/gradcheck.h"
#include "nn/rng.h"

using lesson02::Expression;
using lesson02::Graph;
using lesson02::Value;

using testing::CaptureCout;
using testing::read_text;

namespace {

// |got - ref| <= atol + rtol |ref|; false for NaN.
bool close(double got, double ref, double atol, double rtol) {
  return std::fabs(got - ref) <= atol + rtol * std::fabs(ref);
}

// Every node's analytic gradient against its finite difference; on failure the first
// mismatching nodes are reported with their index, and the whole graph is printed.
void require_gradients_match(const std::string& name, const Expression& build) {
  const lesson02::AutogradCheck check = lesson02::check_expression(build);
  std::ostringstream mismatches;
  int count = 0;
  for (int i = 0; i < check.graph.size(); ++i) {
    const double analytic = check.graph.node(i).grad;
    const double numeric = check.numeric[static_cast<size_t>(i)];
    if (!close(analytic, numeric, 1e-7, 1e-6)) {
      if (count < 8) {
        mismatches << "  node " << i << " (" << check.graph.node(i).op << "): analytic " << analytic
                   << " vs numeric " << numeric << "\n";
      }
      ++count;
    }
  }
  std::ostringstream graph_text;
  lesson02::print_graph(graph_text, check.graph, check.numeric);
  INFO(name << ": " << count << " mismatches\n" << mismatches.str() << graph_text.str());
  REQUIRE(count == 0);
  REQUIRE(check.graph.size() > 0);
}

// Random values away from 0 (so that division, log and relu's kink are safe), both signs.
double away_from_zero(nn::Rng& rng) {
  const double magnitude = 0.3 + 1.2 * static_cast<double>(rng.uniform());
  return rng.uniform() < 0.5f ? -magnitude : magnitude;
}

}  // namespace

// ---- part 1: the autograd ------------------------------------------------------------------
TEST_CASE("autograd: every op's gradient matches finite differences", "[lesson02][autograd]") {
  nn::Rng rng(11);
  for (int trial = 0; trial < 5; ++trial) {
    const double a = away_from_zero(rng);
    const double b = away_from_zero(rng);
    const double c = std::fabs(away_from_zero(rng));  // for log and fractional powers
    CAPTURE(trial, a, b, c);
    require_gradients_match("add", [=](Graph& g) { return g.leaf(a) + g.leaf(b); });
    require_gradients_match("sub", [=](Graph& g) { return g.leaf(a) - g.leaf(b); });
    require_gradients_match("mul", [=](Graph& g) { return g.leaf(a) * g.leaf(b); });
    require_gradients_match("div", [=](Graph& g) { return g.leaf(a) / g.leaf(b); });
    require_gradients_match("neg", [=](Graph& g) { return -g.leaf(a); });
    require_gradients_match("tanh", [=](Graph& g) { return tanh(g.leaf(a) * g.leaf(b)); });
    require_gradients_match("relu", [=](Graph& g) { return relu(g.leaf(a)) * g.leaf(b); });
    require_gradients_match("exp", [=](Graph& g) { return exp(g.leaf(a)); });
    require_gradients_match("log", [=](Graph& g) { return log(g.leaf(c)); });
    require_gradients_match("pow 3", [=](Graph& g) { return pow(g.leaf(a), 3.0); });
    require_gradients_match("pow -1.5", [=](Graph& g) { return pow(g.leaf(c), -1.5); });
    require_gradients_match("with numbers", [=](Graph& g) {
      const Value x = g.leaf(a);
      return (2.0 * x + 3.0) / (1.5 - x * 0.5) - 4.0 / x + (x - 1.0);
    });
    require_gradients_match("used twice", [=](Graph& g) {
      const Value x = g.leaf(a);
      const Value y = g.leaf(b);
      return x * x + x * y;  // x feeds three edges
    });
    require_gradients_match("composite", [=](Graph& g) {
      const Value x = g.leaf(a);
      const Value y = g.leaf(b);
      const Value z = g.leaf(c);
      const Value s = tanh(x * y + z);
      return log(exp(s) + pow(z, 2.0)) / (1.0 + relu(y) + s * s);
    });
  }
}

TEST_CASE("autograd: a value used twice gets the sum of both gradients", "[lesson02][autograd]") {
  Graph g;
  const Value a = g.leaf(3.0, "a");
  const Value b = g.leaf(-2.0, "b");
  SECTION("a * a") {
    const Value y = a * a;
    g.backward(y);
    REQUIRE(a.grad() == 6.0);  // d(a^2)/da = 2a: each of the two edges brings a
  }
  SECTION("a + a") {
    const Value y = a + a;
    g.backward(y);
    REQUIRE(a.grad() == 2.0);
  }
  SECTION("a * b + a") {
    const Value y = a * b + a;
    g.backward(y);
    REQUIRE(a.grad() == -1.0);  // b + 1
    REQUIRE(b.grad() == 3.0);   // a
  }
  SECTION("backward twice gives the same gradients, not doubled ones") {
    const Value y = a * b;
    g.backward(y);
    g.backward(y);
    REQUIRE(a.grad() == -2.0);
    REQUIRE(b.grad() == 3.0);
  }
}

TEST_CASE("autograd: nodes the output does not depend on get no gradient", "[lesson02][autograd]") {
  Graph g;
  const Value a = g.leaf(1.5);
  const Value unused = g.leaf(4.0);
  const Value side = unused * a;  // computed, but not part of y
  const Value y = a * 2.0;
  g.backward(y);
  REQUIRE(a.grad() == 2.0);
  REQUIRE(unused.grad() == 0.0);
  REQUIRE(side.grad() == 0.0);
}

TEST_CASE("autograd: the neuron's gradients equal the closed form", "[lesson02][autograd]") {
  nn::Rng rng(5);
  std::vector<lesson02::NeuronInputs> cases(1);  // the demo's numbers first
  for (int i = 0; i < 4; ++i) {
    lesson02::NeuronInputs in;
    in.x1 = away_from_zero(rng);
    in.x2 = away_from_zero(rng);
    in.w1 = away_from_zero(rng);
    in.w2 = away_from_zero(rng);
    in.b = away_from_zero(rng);
    cases.push_back(in);
  }
  for (const lesson02::NeuronInputs& in : cases) {
    CAPTURE(in.x1, in.x2, in.w1, in.w2, in.b);
    Graph g;
    const Value y = lesson02::build_neuron(g, in);
    g.backward(y);
    // y = tanh(n), n = w1 x1 + w2 x2 + b, dy/dn = 1 - y^2
    const double n = in.w1 * in.x1 + in.w2 * in.x2 + in.b;
    const double expected_y = std::tanh(n);
    const double dy_dn = 1.0 - expected_y * expected_y;
    REQUIRE(close(y.data(), expected_y, 1e-15, 1e-14));
    // leaves are created in the order x1, w1, x2, w2, b
    REQUIRE(close(g.node(0).grad, in.w1 * dy_dn, 1e-15, 1e-13));  // dy/dx1
    REQUIRE(close(g.node(1).grad, in.x1 * dy_dn, 1e-15, 1e-13));  // dy/dw1
    REQUIRE(close(g.node(2).grad, in.w2 * dy_dn, 1e-15, 1e-13));  // dy/dx2
    REQUIRE(close(g.node(3).grad, in.x2 * dy_dn, 1e-15, 1e-13));  // dy/dw2
    REQUIRE(close(g.node(4).grad, dy_dn, 1e-15, 1e-13));          // dy/db
    require_gradients_match("neuron", [in](Graph& graph) { return lesson02::build_neuron(graph, in); });
  }
  SECTION("the \"by hand\" line: the sum over paths equals backward, also with x1 used twice") {
    Graph g;
    const Value y = lesson02::build_neuron(g, lesson02::NeuronInputs{});
    g.backward(y);
    for (int i = 0; i < 5; ++i) {  // the leaves x1, w1, x2, w2, b: one path each
      REQUIRE(lesson02::chain_rule_paths(g, i, y.index()).size() == 1);
    }
    REQUIRE(lesson02::chain_rule_by_hand(g, 1, y.index()) == "2 * 1 * 1 * 0.64 = 1.28");  // dy/dw1
    // Question 2's neuron, tanh(x1*w1 + x1*w2 + b): x1 reaches y along two paths, and their
    // sum is what backward's += collects.
    const lesson02::NeuronInputs in;
    Graph g2;
    const Value x1 = g2.leaf(in.x1, "x1"), w1 = g2.leaf(in.w1, "w1"), w2 = g2.leaf(in.w2, "w2");
    const Value b = g2.leaf(in.b, "b");
    const Value y2 = lesson02::tanh((x1 * w1) + (x1 * w2) + b);
    g2.backward(y2);
    const auto paths = lesson02::chain_rule_paths(g2, x1.index(), y2.index());
    REQUIRE(paths.size() == 2);
    double sum = 0.0;
    for (const auto& path : paths) {
      double product = 1.0;
      for (double d : path) product *= d;
      sum += product;
    }
    const double dy_dn = 1.0 - y2.data() * y2.data();
    REQUIRE(close(sum, (in.w1 + in.w2) * dy_dn, 1e-15, 1e-13));
    REQUIRE(close(sum, g2.node(x1.index()).grad, 1e-15, 1e-13));
    REQUIRE(lesson02::chain_rule_paths(g2, b.index(), x1.index()).empty());  // x1 does not depend on b
  }
  SECTION("the demo's numbers: y = 0.6, dy/dn = 0.64") {
    Graph g;
    const Value y = lesson02::build_neuron(g, lesson02::NeuronInputs{});
    g.backward(y);
    REQUIRE(close(y.data(), 0.6, 1e-15, 0.0));
    REQUIRE(close(g.node(1).grad, 1.28, 1e-14, 0.0));  // dy/dw1 = x1 * 0.64
    REQUIRE(close(g.node(3).grad, -0.64, 1e-14, 0.0));  // dy/dw2 = x2 * 0.64
  }
}

TEST_CASE("autograd: the XOR MLP's loss gradients match finite differences and it learns",
          "[lesson02][autograd]") {
  lesson02::TinyXorNet net = lesson02::init_xor_net(3);
  require_gradients_match("xor loss", [&net](Graph& g) { return lesson02::build_xor_loss(g, net); });
  Graph first;
  const double initial_loss = lesson02::build_xor_loss(first, net).data();
  for (int step = 0; step < 100; ++step) {
    Graph g;
    const Value loss = lesson02::build_xor_loss(g, net);
    g.backward(loss);
    for (size_t i = 0; i < net.params.size(); ++i) {
      net.params[i] -= 0.2 * g.node(static_cast<int>(i)).grad;
    }
  }
  Graph last;
  const double final_loss = lesson02::build_xor_loss(last, net).data();
  CAPTURE(initial_loss, final_loss);
  REQUIRE(final_loss < 0.5 * initial_loss);
}

TEST_CASE("autograd: bad input ends in an error, not garbage", "[lesson02][autograd]") {
  Graph g;
  Graph other;
  const Value a = g.leaf(-1.0);
  const Value b = other.leaf(2.0);
  REQUIRE_THROWS_AS(log(a), nn::Error);
  REQUIRE_THROWS_AS(a * b, nn::Error);
  REQUIRE_THROWS_AS(a / 0.0, nn::Error);
  REQUIRE_THROWS_AS(Value().data(), nn::Error);
}

// ---- part 2: the loops ----------------------------------------------------------------------
namespace {

// Element by element, with the tensor name and index of the first mismatches.
void require_same_gradients(const lesson02::MlpParams& loops, const lesson02::MlpParams& autograd) {
  std::ostringstream mismatches;
  int count = 0;
  const auto got = loops.tensors();
  const auto ref = autograd.tensors();
  for (size_t t = 0; t < got.size(); ++t) {
    REQUIRE(got[t]->size() == ref[t]->size());
    for (size_t i = 0; i < got[t]->size(); ++i) {
      const double g = (*got[t])[i];
      const double r = (*ref[t])[i];
      if (!close(g, r, 1e-13, 1e-10)) {
        if (count < 8) {
          mismatches << "  " << lesson02::MlpParams::kNames[t] << "[" << i << "]: loops " << g
                     << " vs autograd " << r << "\n";
        }
        ++count;
      }
    }
  }
  INFO(count << " gradient entries disagree\n" << mismatches.str());
  REQUIRE(count == 0);
}

}  // namespace

TEST_CASE("loops: hand-written gradients equal the autograd's", "[lesson02][loops]") {
  for (int hidden : {3, 7, 16}) {
    for (uint64_t seed : {1u, 9u}) {
      CAPTURE(hidden, seed);
      const lesson02::PointSet data = lesson02::make_spirals(6, 0.1, seed + 100);
      const lesson02::MlpParams net = lesson02::init_params(hidden, seed);
      lesson02::MlpParams loop_grads;
      lesson02::MlpParams graph_grads;
      const double loop_loss = lesson02::loss_and_gradients(net, data, 5, loop_grads);
      const double graph_loss = lesson02::autograd_loss_and_gradients(net, data, 5, graph_grads);
      REQUIRE(close(loop_loss, graph_loss, 1e-14, 1e-12));
      require_same_gradients(loop_grads, graph_grads);
    }
  }
}

TEST_CASE("loops: hand-written gradients match finite differences", "[lesson02][loops]") {
  const lesson02::PointSet data = lesson02::make_spirals(5, 0.1, 77);
  lesson02::MlpParams net = lesson02::init_params(6, 4);
  // move the biases off their initial zeros, so a bias bug cannot hide
  nn::Rng rng(8);
  for (double& b : net.b1) b = 0.3 * static_cast<double>(rng.normal());
  for (double& b : net.b2) b = 0.3 * static_cast<double>(rng.normal());
  for (double& b : net.b3) b = 0.3 * static_cast<double>(rng.normal());
  lesson02::MlpParams grads;
  lesson02::loss_and_gradients(net, data, 0, grads);
  lesson02::MlpParams scratch;
  auto loss = [&] { return lesson02::loss_and_gradients(net, data, 0, scratch); };
  const auto params = net.tensors();
  const auto analytic = grads.tensors();
  for (size_t t = 0; t < params.size(); ++t) {
    CAPTURE(lesson02::MlpParams::kNames[t]);
    const nn::GradCheckResult r = nn::check_gradient(loss, *params[t], *analytic[t]);
    INFO(r.report);
    CAPTURE(r.max_abs_err, r.max_rel_err);
    REQUIRE(r.ok);
  }
}

TEST_CASE("loops: parameter gradients accumulate over examples", "[lesson02][loops]") {
  // backward_example adds to the gradient buffers: two examples with scale 1/2 each give
  // the gradient of their mean loss.
  const lesson02::PointSet data = lesson02::make_spirals(1, 0.1, 3);  // 2 points
  const lesson02::MlpParams net = lesson02::init_params(4, 2);
  lesson02::MlpParams summed = lesson02::zero_params(4);
  lesson02::ExampleActivations act(4);
  for (int n = 0; n < 2; ++n) {
    lesson02::forward_example(net, data.point(n), data.labels[static_cast<size_t>(n)], act);
    lesson02::backward_example(net, data.point(n), data.labels[static_cast<size_t>(n)], act, 0.5,
                               summed);
  }
  lesson02::MlpParams mean;
  lesson02::loss_and_gradients(net, data, 0, mean);
  REQUIRE(lesson02::max_abs_diff(summed, mean) < 1e-15);
}

TEST_CASE("loops: spirals are two balanced, interleaved classes", "[lesson02][loops]") {
  const lesson02::PointSet data = lesson02::make_spirals(50, 0.04, 1);
  REQUIRE(data.size() == 100);
  REQUIRE(data.points.size() == 200);
  int ones = 0;
  for (int n = 0; n < data.size(); ++n) {
    ones += data.labels[static_cast<size_t>(n)];
    REQUIRE(data.labels[static_cast<size_t>(n)] == n % 2);
    REQUIRE(std::hypot(data.point(n)[0], data.point(n)[1]) < 1.3);
  }
  REQUIRE(ones == 50);
}

TEST_CASE("loops: training is deterministic", "[lesson02][loops]") {
  lesson02::LoopsConfig cfg;
  cfg.epochs = 200;
  cfg.print_every = 0;
  std::ostringstream sink;
  const lesson02::LoopsResult first = lesson02::train_loops(cfg, sink);
  const lesson02::LoopsResult second = lesson02::train_loops(cfg, sink);
  REQUIRE(first.final_loss == second.final_loss);
  REQUIRE(lesson02::max_abs_diff(first.params, second.params) == 0.0);
  REQUIRE(first.final_loss < first.initial_loss);
}

TEST_CASE("loops: the default run separates the spirals", "[lesson02][loops]") {
  // Measured with the default config (seed 1): train 100%, test 99.0% of 300 new points.
  lesson02::LoopsConfig cfg;
  cfg.print_every = 0;
  std::ostringstream sink;
  const lesson02::LoopsResult r = lesson02::train_loops(cfg, sink);
  CAPTURE(r.initial_loss, r.final_loss, r.train_accuracy, r.test_accuracy, r.seconds);
  REQUIRE(r.final_loss < 0.1);
  REQUIRE(r.train_accuracy >= 0.98);
  REQUIRE(r.test_accuracy >= 0.95);
}

// ---- the parts as the program runs them ---------------------------------------------------------
TEST_CASE("part autograd prints the graph, and every backward step with --trace",
          "[lesson02][autograd]") {
  lesson02::Options opts;
  opts.part = "autograd";
  SECTION("without --trace") {
    CaptureCout capture;
    REQUIRE(lesson02::run_autograd_part(opts) == 0);
    const std::string out = capture.text();
    REQUIRE(out.find("max |grad - numeric|") != std::string::npos);
    REQUIRE(out.find("backward from") == std::string::npos);
  }
  SECTION("with --trace") {
    opts.trace = true;
    CaptureCout capture;
    REQUIRE(lesson02::run_autograd_part(opts) == 0);
    const std::string out = capture.text();
    INFO(out);
    REQUIRE(out.find("backward from node 9 y (tanh): grad 1") != std::string::npos);
    // the chain rule at the multiply node: dy/dw1 = x1 * dy/d(x1*w1) = 2 * 0.64
    REQUIRE(out.find("node 5 x1*w1 (mul): grad 0.64 -> parent node 1 w1 (leaf) += 2 * 0.64 = 1.28") !=
            std::string::npos);
  }
}

TEST_CASE("part loops checks against the autograd, trains, and traces one example",
          "[lesson02][loops]") {
  lesson02::Options opts;
  opts.part = "loops";
  opts.trace = true;
  CaptureCout capture;
  REQUIRE(lesson02::run_loops_part(opts) == 0);
  const std::string out = capture.text();
  INFO(out);
  REQUIRE(out.find("one example, forward (--trace)") != std::string::npos);
  REQUIRE(out.find("dh1_pre") != std::string::npos);
  REQUIRE(out.find("max |loops - autograd|") != std::string::npos);
  REQUIRE(out.find("test accuracy") != std::string::npos);
  REQUIRE(out.find("nn::linear_backward") != std::string::npos);
}

// ---- the lesson text quotes the programs: keep the quotes true ------------------------------------
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every README line that quotes program output (it starts with one of `prefixes`) must be
// a line of the output; a quote ending in "..." must start one. Only lines whose numbers
// do not depend on the compiler are quoted: rounding-level figures (the 1e-17 of the
// loops-vs-autograd check) differ between builds and are left out of the prefixes.
void require_quotes_match(const std::string& readme, const std::string& output,
                          const std::vector<std::string>& prefixes) {
  const std::vector<std::string> output_lines = lines_of(output);
  int quotes = 0;
  for (const std::string& line : lines_of(readme)) {
    bool is_quote = false;
    for (const std::string& p : prefixes) is_quote = is_quote || line.rfind(p, 0) == 0;
    if (!is_quote) continue;
    ++quotes;
    const bool elided = line.size() >= 3 && line.compare(line.size() - 3, 3, "...") == 0;
    const std::string quoted = elided ? line.substr(0, line.size() - 3) : line;
    bool found = false;
    for (const std::string& out : output_lines) {
      found = found || (elided ? out.rfind(quoted, 0) == 0 : out == quoted);
    }
    INFO("README.md quotes a line the program no longer prints:\n" << line);
    REQUIRE(found);
  }
  REQUIRE(quotes > 0);
}

}  // namespace

TEST_CASE("lesson 02's README quotes what parts 1 and 2 really print", "[lesson02][docs]") {
  const std::string readme = read_text(std::string(NNLAB_SOURCE_DIR) + "/lessons/02-backprop/README.md");
  lesson02::Options opts;
  opts.trace = true;
  std::string autograd_output;
  {
    CaptureCout capture;
    REQUIRE(lesson02::run_autograd_part(opts) == 0);
    autograd_output = capture.text();
  }
  require_quotes_match(readme, autograd_output, {"backward from node", "  node "});
  opts.trace = false;
  std::string loops_output;
  {
    CaptureCout capture;
    REQUIRE(lesson02::run_loops_part(opts) == 0);
    loops_output = capture.text();
  }
  require_quotes_match(readme, loops_output,
                       {"  epoch ", "result    loss", "  loss ", "check: gradients"});
}
