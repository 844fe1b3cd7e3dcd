// Lesson 02, part 1: a tiny scalar autograd. See lessons/02-backprop/README.md.
//
// Every number computed through a Value becomes a node of a Graph (a "tape"): the node
// keeps its value, the op that made it, its parents, and the local derivative of itself
// with respect to each parent, worked out during the forward pass. backward() then walks
// the tape from the output to the inputs and applies the chain rule once per edge:
//
//     parent.grad += local_derivative * node.grad
//
// That one line is all of backpropagation. `+=` and not `=` because a value used twice
// (x * x, or a weight shared by several examples) receives a gradient along each use.
//
// Everything is double: this part is about understanding, and double keeps the
// finite-difference checks tight (see nn/gradcheck.h for why).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace lesson02 {

class Graph;

// ---- Node: one computed number ---------------------------------------------------------
struct Node {
  double data = 0.0;  // the value from the forward pass
  double grad = 0.0;  // d(output)/d(this node), filled in by Graph::backward
  std::string op;     // "leaf", "const", "add", "sub", "mul", "div", "neg", "tanh", "relu", ...
  std::string label;  // a name for printing ("w1", "x1*w1"); may be empty
  int num_parents = 0;
  std::array<int, 2> parents = {-1, -1};              // indices into the graph's nodes
  std::array<double, 2> local_grads = {0.0, 0.0};     // d(this)/d(parent_i) at the forward values
};

// ---- Value: a handle to a node -----------------------------------------------------------
// A Value is a graph pointer and an index, not a pointer to the Node: the graph keeps its
// nodes in a std::vector, which moves them when it grows, and an index survives that.
class Value {
 public:
  Value() = default;
  Value(Graph* graph, int index) : graph_(graph), index_(index) {}

  double data() const;
  double grad() const;
  int index() const { return index_; }
  Graph* graph() const { return graph_; }
  // Gives the node a name for printing and returns the same Value: `(x1 * w1).named("x1*w1")`.
  Value named(const std::string& label) const;

 private:
  Graph* graph_ = nullptr;
  int index_ = -1;
};

// ---- Graph: the tape ---------------------------------------------------------------------
class Graph {
 public:
  // An input or a parameter: a node without parents, the place gradients flow to.
  Value leaf(double data, const std::string& label = "");
  // A fixed number that enters an expression (the 2 in 2 * x). It gets a gradient too,
  // but nobody reads it.
  Value constant(double data);

  // Appends a node computed from one or two parents, with d(node)/d(parent) for each.
  // The ops below (operator*, tanh, ...) are written with these two.
  Value push_unary(double data, const char* op, Value parent, double local_grad);
  Value push_binary(double data, const char* op, Value parent0, double local_grad0, Value parent1,
                    double local_grad1);

  // Sets every node's grad to 0, output's to 1 (d output / d output), then applies the
  // chain rule from the output back to the leaves. With `trace`, prints each step.
  void backward(Value output, std::ostream* trace = nullptr);

  int size() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int index) const;
  Node& node(int index);
  const std::vector<Node>& nodes() const { return nodes_; }

  // For finite differences (numeric_gradients): the node created with this index gets
  // `amount` added to its value, as if something had nudged it. Everything computed from
  // it afterwards sees the nudged value. -1 switches it off.
  void set_nudge(int node_index, double amount);

 private:
  Value push(Node node);
  std::vector<Node> nodes_;
  int nudge_index_ = -1;
  double nudge_amount_ = 0.0;
};

// ---- the ops -------------------------------------------------------------------------------
// Each one computes its value and the local derivatives; autograd.cpp has the math.
Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator-(Value a);
// Mixed with plain numbers: the number becomes a constant node.
Value operator+(Value a, double b);
Value operator+(double a, Value b);
Value operator-(Value a, double b);
Value operator-(double a, Value b);
Value operator*(Value a, double b);
Value operator*(double a, Value b);
Value operator/(Value a, double b);
Value operator/(double a, Value b);

Value tanh(Value x);
Value relu(Value x);
Value exp(Value x);
Value log(Value x);
Value pow(Value x, double exponent);  // x^k for a constant k

// ---- checking gradients by finite differences ----------------------------------------------
// An Expression builds a scalar expression into an empty graph and returns its output.
// It must build the same nodes in the same order every time it is called.
using Expression = std::function<Value(Graph&)>;

// d(output)/d(node) for EVERY node of the expression, leaves and intermediates, by
// central differences: rebuild the graph with that node nudged by +h and by -h,
//     grad_numeric = (output(+h) - output(-h)) / (2 h)
std::vector<double> numeric_gradients(const Expression& build, double h = 1e-6);

struct AutogradCheck {
  Graph graph;                   // the expression after backward: data and analytic grads
  std::vector<double> numeric;   // numeric_gradients(), one per node
  double max_abs_diff = 0.0;     // max over nodes of |analytic - numeric|
};
// Builds the expression, runs backward, and compares every node's gradient with its
// finite difference.
AutogradCheck check_expression(const Expression& build, double h = 1e-6);

// One line per node: index, label, op, parents, value, grad, and, when `numeric` is given,
// the finite difference and the difference between the two.
void print_graph(std::ostream& os, const Graph& graph, const std::vector<double>& numeric = {});

// The chain rule read the other way: d(to)/d(from) is the sum, over every path of edges from
// node `from` up to node `to`, of the product of the local derivatives along that path. One
// vector of local derivatives per path (in order, from `from` upwards); none when `to` does
// not depend on `from`. Exponential in general, fine for the neuron: part 1 prints it as the
// gradient "by hand", found without Graph::backward, so it stays right when the neuron is
// edited (question 2) and shows a leaf used twice as two paths.
std::vector<std::vector<double>> chain_rule_paths(const Graph& graph, int from, int to);
// "w1 * 1 * 1 * 0.64 = ..." for each path, joined with " + ", then " = " and the sum.
std::string chain_rule_by_hand(const Graph& graph, int from, int to);

// ---- the demos of part 1 ---------------------------------------------------------------------
// The single neuron y = tanh(w1*x1 + w2*x2 + b), with numbers chosen so that
// n = w1*x1 + w2*x2 + b = ln 2, hence y = tanh(ln 2) = 0.6 exactly and dy/dn = 1 - y^2 = 0.64.
struct NeuronInputs {
  double x1 = 2.0;
  double x2 = -1.0;
  double w1 = -0.5;
  double w2 = 0.75;
  double b = 1.75 + 0.69314718055994530942;  // 1.75 + ln 2
};
// Builds the neuron into `graph` (labelled nodes x1, w1, x1*w1, ..., n, y) and returns y.
Value build_neuron(Graph& graph, const NeuronInputs& in);

// A 2-4-1 tanh MLP built from Values, fitted to XOR with inputs and targets in {-1, 1}.
// Parameters are a flat list (w1 (4,2), b1 (4), w2 (1,4), b2 (1)) so gradient descent is
// one loop over them.
struct TinyXorNet {
  static constexpr int kInputs = 2;
  static constexpr int kHidden = 4;
  std::vector<double> params;  // 4*2 + 4 + 4 + 1 = 17 numbers
};
TinyXorNet init_xor_net(uint64_t seed);
// Builds the mean squared error over the 4 XOR examples; the parameter leaves are the
// first params.size() nodes of the graph, in order.
Value build_xor_loss(Graph& graph, const TinyXorNet& net);

}  // namespace lesson02
