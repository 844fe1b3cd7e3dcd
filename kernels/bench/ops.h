// kernels/bench/ops.h: every op the bench knows, each described for the harness
// (kernels/harness.h): its variants, its sizes, and how to make a Problem of one size.
//
// One file per op here too (kernels/bench/<op>.cpp), beside the op's own file in kernels/.
// Peers that are only compared against (OpenBLAS) are linked into this library alone:
// nn/ and the lessons never depend on them.
#pragma once

#include <cstddef>
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
harness::OpBench cos2_bench();
harness::OpBench bias_gelu_bench();
harness::OpBench softmax_bench();
harness::OpBench layernorm_bench();
harness::OpBench matvec_bench();
// The int8 GEMM ladder with fp32 sgemm beside it (kernels/bench/int8.cpp).
harness::OpBench int8_gemm_bench();
harness::OpBench attention_decode_bench();
// The GPT training ops' ladders, each rung against v1 (kernels/bench/gpt_ops.cpp).
harness::OpBench encoder_bench();
harness::OpBench encoder_backward_bench();
harness::OpBench layernorm_backward_bench();
harness::OpBench residual_layernorm_bench();
harness::OpBench linear_bench();
harness::OpBench linear_backward_bench();
harness::OpBench linear_gelu_bench();
harness::OpBench attention_bench();
harness::OpBench attention_backward_bench();
harness::OpBench gelu_bench();
harness::OpBench gelu_backward_bench();
harness::OpBench residual_bench();
harness::OpBench dropout_bench();
harness::OpBench dropout_backward_bench();
harness::OpBench crossentropy_bench();
harness::OpBench crossentropy_backward_bench();
harness::OpBench adamw_bench();
harness::OpBench sum_squares_bench();
harness::OpBench scale_bench();
// The modern (Llama) block's ops, each rung against v1 (kernels/bench/llama_ops.cpp).
harness::OpBench rmsnorm_bench();
harness::OpBench rmsnorm_backward_bench();
harness::OpBench rope_bench();
harness::OpBench rope_backward_bench();
harness::OpBench swiglu_bench();
harness::OpBench swiglu_backward_bench();

// ---- helpers the op descriptions share (kernels/bench/registry.cpp) ----------------------
// A size as `count` numbers joined by 'x' ("64x50257"), each optionally ending in K
// (x 1024) or M (x 1024^2): "4K" = 4096, "2x16M". Each number must be >= 1 and every
// number, and their product, at most 2^30; else std::invalid_argument naming `op` and `help`.
std::vector<size_t> parse_dims(const std::string& op, const std::string& size, size_t count,
                               const std::string& help);
// n the way parse_dims reads it back: "64M" for 67108864, "4K" for 4096, "1003" for 1003.
std::string short_count(size_t n);
// Whether a working set of this many bytes stays in cache from one timed run to the next
// (at most half the last-level cache). Such problems return false from
// Problem::flush_between_runs: flushing would time memory instead of the cache they fit.
bool fits_in_cache(double bytes);

// Whether the OpenBLAS peer was built in, and its configuration string ("" when not).
bool have_openblas();
std::string openblas_config();

}  // namespace kernels::bench
