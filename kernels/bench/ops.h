// kernels/bench/ops.h: every op the bench knows, each described for the harness
// (kernels/harness.h): its variants, its sizes, and how to make a Problem of one size.
//
// One file per op here too (kernels/bench/<op>.cpp), beside the op's own file in kernels/.
// Peers that are only compared against (OpenBLAS) are linked into this library alone:
// nn/ and the lessons never depend on them.
#pragma once

#include <string>
#include <vector>

#include "kernels/harness.h"

namespace kernels::bench {

// Every op, in lesson order (kernels/bench/registry.cpp).
const std::vector<harness::OpBench>& ops();
// By name; throws std::invalid_argument naming the ops it knows.
const harness::OpBench& op(const std::string& name);

// One per op (kernels/bench/<op>.cpp).
harness::OpBench matmul_bench();

// Whether the OpenBLAS peer was built in, and its configuration string ("" when not).
bool have_openblas();
std::string openblas_config();

}  // namespace kernels::bench
