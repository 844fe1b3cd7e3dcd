// Lesson 02 question 2: the neuron with x1 used twice, tanh(x1*w1 + x1*w2 + b), through the
// lesson's autograd (the Graph of autograd.h), with its finite-difference check of every node.
#include "lessons/02-backprop/autograd.h"
#include <cmath>
#include <iostream>
using namespace lesson02;
int main() {
  const Expression neuron = [](Graph& g) {
    const Value x1 = g.leaf(2.0, "x1"), w1 = g.leaf(-0.5, "w1"), w2 = g.leaf(0.75, "w2");
    const Value b = g.leaf(1.75 + std::log(2.0), "b");
    const Value a = (x1 * w1).named("x1*w1");
    const Value c = (x1 * w2).named("x1*w2");
    const Value n = ((a + c).named("sum") + b).named("n");
    return tanh(n).named("y");
  };
  Graph g;
  const Value y = neuron(g);
  g.backward(y, &std::cout);
  const AutogradCheck check = check_expression(neuron);
  print_graph(std::cout, check.graph, check.numeric);
  std::cout << "max |grad - numeric| = " << check.max_abs_diff << "\n";
}
