// Lesson 02, part 1: the chain rule made visible with a tiny scalar autograd.
//
// Read top-down: the graph (a tape of nodes), the ops (each one's value and local
// derivatives), backward (the chain rule, applied edge by edge), the finite-difference
// check, and the two demos: a single neuron, then a small MLP fitted to XOR.
// Good breakpoints: lesson02::Graph::backward, lesson02::operator*, lesson02::tanh.
#include "lessons/02-backprop/autograd.h"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "lessons/02-backprop/backprop.h"
#include "nn/check.h"
#include "nn/rng.h"

namespace lesson02 {

// ---- Value -------------------------------------------------------------------------------
double Value::data() const {
  NN_CHECK(graph_ != nullptr, "this Value belongs to no graph: create it with Graph::leaf");
  return graph_->node(index_).data;
}

double Value::grad() const {
  NN_CHECK(graph_ != nullptr, "this Value belongs to no graph: create it with Graph::leaf");
  return graph_->node(index_).grad;
}

Value Value::named(const std::string& label) const {
  NN_CHECK(graph_ != nullptr, "this Value belongs to no graph: create it with Graph::leaf");
  graph_->node(index_).label = label;
  return *this;
}

// ---- Graph: appending nodes ---------------------------------------------------------------
const Node& Graph::node(int index) const {
  NN_CHECK(0 <= index && index < size(), "node " << index << " does not exist: the graph has "
                                                  << size() << " nodes");
  return nodes_[static_cast<size_t>(index)];
}

Node& Graph::node(int index) {
  NN_CHECK(0 <= index && index < size(), "node " << index << " does not exist: the graph has "
                                                  << size() << " nodes");
  return nodes_[static_cast<size_t>(index)];
}

void Graph::set_nudge(int node_index, double amount) {
  nudge_index_ = node_index;
  nudge_amount_ = amount;
}

Value Graph::push(Node new_node) {
  const int index = size();
  if (index == nudge_index_) {
    new_node.data += nudge_amount_;  // only numeric_gradients() does this
  }
  nodes_.push_back(std::move(new_node));
  return Value(this, index);
}

Value Graph::leaf(double data, const std::string& label) {
  Node n;
  n.data = data;
  n.op = "leaf";
  n.label = label;
  return push(std::move(n));
}

Value Graph::constant(double data) {
  Node n;
  n.data = data;
  n.op = "const";
  return push(std::move(n));
}

Value Graph::push_unary(double data, const char* op, Value parent, double local_grad) {
  NN_CHECK(parent.graph() == this, "op '" << op << "' got a Value from another graph");
  Node n;
  n.data = data;
  n.op = op;
  n.num_parents = 1;
  n.parents = {parent.index(), -1};
  n.local_grads = {local_grad, 0.0};
  return push(std::move(n));
}

Value Graph::push_binary(double data, const char* op, Value parent0, double local_grad0,
                         Value parent1, double local_grad1) {
  NN_CHECK(parent0.graph() == this && parent1.graph() == this,
           "op '" << op << "' got Values from two different graphs: build one expression in one graph");
  Node n;
  n.data = data;
  n.op = op;
  n.num_parents = 2;
  n.parents = {parent0.index(), parent1.index()};
  n.local_grads = {local_grad0, local_grad1};
  return push(std::move(n));
}

// ---- the ops: value and local derivatives --------------------------------------------------
// Each op knows only its own derivative. The chain rule in backward() connects them.
namespace {

Graph& graph_of(Value a, Value b) {
  NN_CHECK(a.graph() != nullptr && a.graph() == b.graph(),
           "these two Values belong to different graphs: build one expression in one graph");
  return *a.graph();
}

Graph& graph_of(Value a) {
  NN_CHECK(a.graph() != nullptr, "this Value belongs to no graph: create it with Graph::leaf");
  return *a.graph();
}

}  // namespace

Value operator+(Value a, Value b) {
  Graph& g = graph_of(a, b);
  const double sum = a.data() + b.data();
  // d(a + b)/da = 1, d(a + b)/db = 1: addition passes the gradient through unchanged
  return g.push_binary(sum, "add", a, 1.0, b, 1.0);
}

Value operator-(Value a, Value b) {
  Graph& g = graph_of(a, b);
  const double difference = a.data() - b.data();
  // d(a - b)/da = 1, d(a - b)/db = -1
  return g.push_binary(difference, "sub", a, 1.0, b, -1.0);
}

Value operator*(Value a, Value b) {
  Graph& g = graph_of(a, b);
  const double product = a.data() * b.data();
  // d(a b)/da = b, d(a b)/db = a: each factor's gradient is scaled by the other factor
  return g.push_binary(product, "mul", a, b.data(), b, a.data());
}

Value operator/(Value a, Value b) {
  Graph& g = graph_of(a, b);
  NN_CHECK(b.data() != 0.0, "division by zero in the autograd graph (node " << b.index() << ")");
  const double quotient = a.data() / b.data();
  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
  const double d_da = 1.0 / b.data();
  const double d_db = -a.data() / (b.data() * b.data());
  return g.push_binary(quotient, "div", a, d_da, b, d_db);
}

Value operator-(Value a) {
  Graph& g = graph_of(a);
  // d(-a)/da = -1
  return g.push_unary(-a.data(), "neg", a, -1.0);
}

Value operator+(Value a, double b) { return a + graph_of(a).constant(b); }
Value operator+(double a, Value b) { return graph_of(b).constant(a) + b; }
Value operator-(Value a, double b) { return a - graph_of(a).constant(b); }
Value operator-(double a, Value b) { return graph_of(b).constant(a) - b; }
Value operator*(Value a, double b) { return a * graph_of(a).constant(b); }
Value operator*(double a, Value b) { return graph_of(b).constant(a) * b; }
Value operator/(Value a, double b) { return a / graph_of(a).constant(b); }
Value operator/(double a, Value b) { return graph_of(b).constant(a) / b; }

Value tanh(Value x) {
  Graph& g = graph_of(x);
  const double t = std::tanh(x.data());
  // d tanh(x)/dx = 1 - tanh(x)^2: computed from the output, which we have anyway
  const double local = 1.0 - t * t;
  return g.push_unary(t, "tanh", x, local);
}

Value relu(Value x) {
  Graph& g = graph_of(x);
  const bool active = x.data() > 0.0;
  const double out = active ? x.data() : 0.0;
  // d relu(x)/dx = 1 if x > 0 else 0 (at x = 0 we pick 0, as nn::relu_backward does)
  const double local = active ? 1.0 : 0.0;
  return g.push_unary(out, "relu", x, local);
}

Value exp(Value x) {
  Graph& g = graph_of(x);
  const double e = std::exp(x.data());
  // d exp(x)/dx = exp(x)
  return g.push_unary(e, "exp", x, e);
}

Value log(Value x) {
  Graph& g = graph_of(x);
  NN_CHECK(x.data() > 0.0, "log of " << x.data() << " (node " << x.index()
                                     << "): log needs a positive argument");
  // d log(x)/dx = 1/x
  const double local = 1.0 / x.data();
  return g.push_unary(std::log(x.data()), "log", x, local);
}

Value pow(Value x, double exponent) {
  Graph& g = graph_of(x);
  const double out = std::pow(x.data(), exponent);
  // d x^k/dx = k x^(k-1)
  const double local = exponent * std::pow(x.data(), exponent - 1.0);
  return g.push_unary(out, "pow", x, local);
}

// ---- backward: the chain rule, edge by edge ------------------------------------------------
namespace {

std::string describe(const Graph& g, int index) {
  std::ostringstream os;
  const Node& n = g.node(index);
  os << "node " << index;
  if (!n.label.empty()) os << " " << n.label;
  os << " (" << n.op << ")";
  return os.str();
}

}  // namespace

void Graph::backward(Value output, std::ostream* trace) {
  NN_CHECK(output.graph() == this, "backward() got an output from another graph");
  const int out = output.index();
  for (Node& n : nodes_) {
    n.grad = 0.0;
  }

  // Which nodes does the output depend on? A node is needed if a needed node uses it.
  // The tape holds every node after its parents (a parent must exist before anything can
  // be computed from it), so one sweep from the output down finds them all.
  std::vector<bool> needed(nodes_.size(), false);
  needed[static_cast<size_t>(out)] = true;
  for (int i = out; i >= 0; --i) {
    const Node& n = nodes_[static_cast<size_t>(i)];
    if (!needed[static_cast<size_t>(i)]) continue;
    for (int p = 0; p < n.num_parents; ++p) {
      needed[static_cast<size_t>(n.parents[static_cast<size_t>(p)])] = true;
    }
  }

  // d output / d output = 1: the seed everything else is multiplied from.
  nodes_[static_cast<size_t>(out)].grad = 1.0;
  if (trace != nullptr) {
    *trace << "backward from " << describe(*this, out) << ": grad 1\n";
  }

  // Walking the tape backwards is a reverse topological order: a node comes after every
  // node that used it, so when we reach it, all its uses have added their share and its
  // grad is complete. Only then is it passed on to its parents.
  for (int i = out; i >= 0; --i) {
    if (!needed[static_cast<size_t>(i)]) continue;
    const Node& n = nodes_[static_cast<size_t>(i)];
    for (int p = 0; p < n.num_parents; ++p) {
      const int parent_index = n.parents[static_cast<size_t>(p)];
      Node& parent = nodes_[static_cast<size_t>(parent_index)];
      const double local = n.local_grads[static_cast<size_t>(p)];
      // the chain rule: dL/dparent += dnode/dparent * dL/dnode
      const double contribution = local * n.grad;
      parent.grad += contribution;
      if (trace != nullptr) {
        *trace << "  " << describe(*this, i) << ": grad " << n.grad << " -> parent "
               << describe(*this, parent_index) << " += " << local << " * " << n.grad
               << " = " << contribution << "  (now " << parent.grad << ")\n";
      }
    }
  }
}

// ---- finite differences ---------------------------------------------------------------------
std::vector<double> numeric_gradients(const Expression& build, double h) {
  Graph reference;
  build(reference);
  const int node_count = reference.size();
  std::vector<double> numeric(static_cast<size_t>(node_count), 0.0);
  for (int i = 0; i < node_count; ++i) {
    Graph plus;
    plus.set_nudge(i, +h);
    const double out_plus = build(plus).data();
    Graph minus;
    minus.set_nudge(i, -h);
    const double out_minus = build(minus).data();
    NN_CHECK(plus.size() == node_count && minus.size() == node_count,
             "the expression built " << node_count << ", then " << plus.size() << " nodes: "
                                     << "it must build the same graph every time");
    // central difference: error O(h^2), against O(h) for the one-sided (f(x+h) - f(x)) / h
    numeric[static_cast<size_t>(i)] = (out_plus - out_minus) / (2.0 * h);
  }
  return numeric;
}

AutogradCheck check_expression(const Expression& build, double h) {
  AutogradCheck result;
  const Value output = build(result.graph);
  result.graph.backward(output);
  result.numeric = numeric_gradients(build, h);
  for (int i = 0; i < result.graph.size(); ++i) {
    const double analytic = result.graph.node(i).grad;
    const double diff = std::fabs(analytic - result.numeric[static_cast<size_t>(i)]);
    // written so that a NaN difference sticks (std::fmax would drop it)
    if (std::isnan(diff) || diff > result.max_abs_diff) {
      result.max_abs_diff = diff;
    }
  }
  return result;
}

std::vector<std::vector<double>> chain_rule_paths(const Graph& graph, int from, int to) {
  if (from == to) {
    return {{}};  // one path with no edges: d(node)/d(node) = 1
  }
  std::vector<std::vector<double>> paths;
  // The tape is in creation order, so every node that reads `from` comes after it.
  for (int k = from + 1; k <= to; ++k) {
    const Node& child = graph.node(k);
    for (int j = 0; j < child.num_parents; ++j) {  // x * x reads x twice: two edges
      if (child.parents[static_cast<size_t>(j)] != from) {
        continue;
      }
      for (std::vector<double>& rest : chain_rule_paths(graph, k, to)) {
        rest.insert(rest.begin(), child.local_grads[static_cast<size_t>(j)]);
        paths.push_back(std::move(rest));
      }
    }
  }
  return paths;
}

std::string chain_rule_by_hand(const Graph& graph, int from, int to) {
  std::ostringstream os;
  double total = 0.0;
  const std::vector<std::vector<double>> paths = chain_rule_paths(graph, from, to);
  for (size_t p = 0; p < paths.size(); ++p) {
    double product = 1.0;
    for (size_t e = 0; e < paths[p].size(); ++e) {
      os << (p > 0 && e == 0 ? " + " : "") << (e > 0 ? " * " : "") << paths[p][e];
      product *= paths[p][e];
    }
    total += product;
  }
  if (paths.empty()) {
    os << "0 (no path)";
  } else {
    os << " = " << total;
  }
  return os.str();
}

void print_graph(std::ostream& os, const Graph& graph, const std::vector<double>& numeric) {
  const bool with_numeric = numeric.size() == static_cast<size_t>(graph.size());
  const std::ios::fmtflags saved_flags = os.flags();
  const std::streamsize saved_precision = os.precision();
  os << std::setprecision(6);
  os << "  " << std::setw(3) << "#" << "  " << std::left << std::setw(9) << "label" << std::setw(6)
     << "op" << std::setw(9) << "parents" << std::right << std::setw(12) << "value" << std::setw(12)
     << "grad";
  if (with_numeric) os << std::setw(12) << "numeric" << std::setw(11) << "|diff|";
  os << "\n";
  for (int i = 0; i < graph.size(); ++i) {
    const Node& n = graph.node(i);
    std::string parents;
    for (int p = 0; p < n.num_parents; ++p) {
      parents += (p > 0 ? "," : "") + std::to_string(n.parents[static_cast<size_t>(p)]);
    }
    os << "  " << std::setw(3) << i << "  " << std::left << std::setw(9) << n.label << std::setw(6)
       << n.op << std::setw(9) << parents << std::right << std::setw(12) << n.data << std::setw(12)
       << n.grad;
    if (with_numeric) {
      const double diff = std::fabs(n.grad - numeric[static_cast<size_t>(i)]);
      os << std::setw(12) << numeric[static_cast<size_t>(i)] << std::setw(11) << std::setprecision(1)
         << diff << std::setprecision(6);
    }
    os << "\n";
  }
  os.flags(saved_flags);
  os.precision(saved_precision);
}

// ---- demo 1: one neuron ------------------------------------------------------------------------
Value build_neuron(Graph& graph, const NeuronInputs& in) {
  const Value x1 = graph.leaf(in.x1, "x1");
  const Value w1 = graph.leaf(in.w1, "w1");
  const Value x2 = graph.leaf(in.x2, "x2");
  const Value w2 = graph.leaf(in.w2, "w2");
  const Value b = graph.leaf(in.b, "b");
  const Value x1w1 = (x1 * w1).named("x1*w1");
  const Value x2w2 = (x2 * w2).named("x2*w2");
  const Value sum = (x1w1 + x2w2).named("sum");
  const Value n = (sum + b).named("n");
  const Value y = tanh(n).named("y");
  return y;
}

// ---- demo 2: a tiny MLP fitted to XOR ---------------------------------------------------------
namespace {

// XOR with inputs and targets in {-1, 1}: the output is 1 when exactly one input is 1.
// No single line separates the two classes, so it needs the hidden layer.
constexpr std::array<std::array<double, 2>, 4> kXorInputs = {{{-1, -1}, {-1, 1}, {1, -1}, {1, 1}}};
constexpr std::array<double, 4> kXorTargets = {-1, 1, 1, -1};

// Offsets into TinyXorNet::params: w1 (H,2), b1 (H), w2 (1,H), b2 (1).
constexpr int kW1 = 0;
constexpr int kB1 = kW1 + TinyXorNet::kHidden * TinyXorNet::kInputs;
constexpr int kW2 = kB1 + TinyXorNet::kHidden;
constexpr int kB2 = kW2 + TinyXorNet::kHidden;
constexpr int kXorParams = kB2 + 1;

std::string xor_param_label(int i) {
  if (i < kB1) {
    return "w1[" + std::to_string(i / TinyXorNet::kInputs) + "," +
           std::to_string(i % TinyXorNet::kInputs) + "]";
  }
  if (i < kW2) return "b1[" + std::to_string(i - kB1) + "]";
  if (i < kB2) return "w2[" + std::to_string(i - kW2) + "]";
  return "b2";
}

// The network's output for one example, from parameter leaves.
Value xor_forward(Graph& graph, const std::vector<Value>& p, const std::array<double, 2>& input) {
  constexpr int H = TinyXorNet::kHidden;
  constexpr int I = TinyXorNet::kInputs;
  Value out = p[kB2];
  for (int j = 0; j < H; ++j) {
    // h_j = tanh(b1_j + sum_i w1_ji x_i)
    Value pre = p[static_cast<size_t>(kB1 + j)];
    for (int i = 0; i < I; ++i) {
      const Value x = graph.constant(input[static_cast<size_t>(i)]);
      pre = pre + p[static_cast<size_t>(kW1 + j * I + i)] * x;
    }
    const Value h = tanh(pre);
    // out = tanh(b2 + sum_j w2_j h_j), the tanh applied after the loop
    out = out + p[static_cast<size_t>(kW2 + j)] * h;
  }
  return tanh(out);
}

}  // namespace

TinyXorNet init_xor_net(uint64_t seed) {
  TinyXorNet net;
  nn::Rng rng(seed);
  net.params.resize(static_cast<size_t>(kXorParams));
  for (double& p : net.params) {
    p = static_cast<double>(rng.uniform(-1.0f, 1.0f));
  }
  return net;
}

Value build_xor_loss(Graph& graph, const TinyXorNet& net) {
  NN_CHECK(net.params.size() == static_cast<size_t>(kXorParams),
           "the XOR net has " << kXorParams << " parameters, got " << net.params.size());
  std::vector<Value> p;
  for (int i = 0; i < kXorParams; ++i) {
    p.push_back(graph.leaf(net.params[static_cast<size_t>(i)], xor_param_label(i)));
  }
  // loss = mean over the 4 examples of (out - target)^2
  Value total = graph.constant(0.0);
  for (size_t e = 0; e < kXorInputs.size(); ++e) {
    const Value out = xor_forward(graph, p, kXorInputs[e]);
    const Value error = out - kXorTargets[e];
    total = total + pow(error, 2.0);
  }
  const Value loss = (total / static_cast<double>(kXorInputs.size())).named("loss");
  return loss;
}

// ---- the part ------------------------------------------------------------------------------------
int run_autograd_part(const Options& opts) {
  std::cout << "== Part 1: the chain rule made visible, with a tiny scalar autograd ==\n\n";
  // Differences above this mean a wrong derivative; correct ones land near 1e-10.
  constexpr double kTolerance = 1e-6;

  // Demo 1: one neuron, every node printed.
  const NeuronInputs in;
  std::cout << "A neuron: y = tanh(w1*x1 + w2*x2 + b) with x1 = " << in.x1 << ", x2 = " << in.x2
            << ", w1 = " << in.w1 << ", w2 = " << in.w2 << ", b = 1.75 + ln 2 = " << in.b << "\n"
            << "(b is picked so that n = ln 2, y = tanh(ln 2) = 0.6 and dy/dn = 1 - y^2 = 0.64)\n\n";
  const Expression neuron = [&in](Graph& g) { return build_neuron(g, in); };
  Graph neuron_graph;
  const Value y = neuron(neuron_graph);
  std::cout << "forward: y = " << y.data() << "\n";
  if (opts.trace) {
    std::cout << "\nbackward, one chain-rule step per edge (--trace):\n";
    neuron_graph.backward(y, &std::cout);
  }
  const AutogradCheck neuron_check = check_expression(neuron);
  std::cout << "\nevery node after backward: grad = dy/d(node); numeric = (y(node + h) - y(node - h)) / 2h,"
            << " h = 1e-6\n";
  print_graph(std::cout, neuron_check.graph, neuron_check.numeric);
  std::cout << "max |grad - numeric| = " << neuron_check.max_abs_diff << "\n";
  // By hand, without backward: each leaf's paths up to y, each the product of the local
  // derivatives along it (the tanh edge is 1 - y^2). Read from the graph, not written out
  // for this neuron, so the lines stay right when build_neuron is edited (question 2).
  std::cout << "by hand, the chain rule as a sum over paths (leaf -> y, the product of the local"
               " derivatives along each; tanh's is 1 - y^2 = "
            << 1.0 - y.data() * y.data() << "):\n";
  for (int i = 0; i < neuron_graph.size(); ++i) {
    const Node& leaf = neuron_graph.node(i);
    if (leaf.op == "leaf") {
      std::cout << "  dy/d" << leaf.label << " = " << chain_rule_by_hand(neuron_graph, i, y.index()) << "\n";
    }
  }
  std::cout << "\n";
  if (!(neuron_check.max_abs_diff <= kTolerance)) {
    std::cerr << "error: autograd and finite differences disagree by " << neuron_check.max_abs_diff
              << " on the neuron: a local derivative in autograd.cpp is wrong\n";
    return 1;
  }

  // Demo 2: a tiny MLP's loss, built from Values, and trained by gradient descent.
  TinyXorNet net = init_xor_net(7);
  const Expression xor_loss = [&net](Graph& g) { return build_xor_loss(g, net); };
  const AutogradCheck mlp_check = check_expression(xor_loss);
  std::cout << "A 2-4-1 tanh MLP on XOR, loss = mean (out - target)^2 over 4 examples: "
            << mlp_check.graph.size() << " nodes, " << net.params.size() << " parameters.\n"
            << "gradients of all " << mlp_check.graph.size()
            << " nodes vs finite differences: max |diff| = " << mlp_check.max_abs_diff << "\n";
  if (!(mlp_check.max_abs_diff <= kTolerance)) {
    std::cerr << "error: autograd and finite differences disagree by " << mlp_check.max_abs_diff
              << " on the MLP loss\n";
    return 1;
  }

  // Gradient descent: rebuild the graph from the current numbers (define-by-run, as
  // PyTorch does), backward, then step every parameter against its gradient.
  constexpr double kLearningRate = 0.2;
  constexpr int kSteps = 100;
  std::cout << "gradient descent, lr " << kLearningRate << ": param -= lr * dloss/dparam\n";
  double loss_value = 0.0;
  for (int step = 0; step <= kSteps; ++step) {
    Graph g;
    const Value loss = build_xor_loss(g, net);
    loss_value = loss.data();
    if (step % 20 == 0) {
      std::cout << "  step " << std::setw(3) << step << "  loss " << std::fixed << std::setprecision(4)
                << loss_value << std::defaultfloat << std::setprecision(6) << "\n";
    }
    if (step == kSteps) break;
    g.backward(loss);
    // the parameter leaves are the graph's first nodes, in the order of net.params
    for (size_t i = 0; i < net.params.size(); ++i) {
      net.params[i] -= kLearningRate * g.node(static_cast<int>(i)).grad;
    }
  }
  std::cout << "predictions:";
  for (size_t e = 0; e < kXorInputs.size(); ++e) {
    Graph g;
    std::vector<Value> p;
    for (int i = 0; i < kXorParams; ++i) p.push_back(g.leaf(net.params[static_cast<size_t>(i)]));
    const Value out = xor_forward(g, p, kXorInputs[e]);
    std::cout << "  (" << kXorInputs[e][0] << "," << kXorInputs[e][1] << ") -> " << std::fixed
              << std::setprecision(2) << out.data() << std::defaultfloat << std::setprecision(6)
              << " (target " << kXorTargets[e] << ")";
  }
  std::cout << "\n";
  return 0;
}

}  // namespace lesson02
