// kernels/cuda/bench/ops.h: every CUDA op described for the GPU harness: its versions (from
// a device's Kernels table, plus peers such as cuBLAS), its sizes, and how to make a
// Problem at one size on one device: inputs made and uploaded, the reference computed on
// the CPU (plain loops, in double), ready to validate any version and then time it.
//
// The same descriptions serve three users:
//   - tests/test_cuda_kernels.cpp validates every version at the test sizes on the emulator
//     (and on the GPU when there is one, label "device");
//   - the GPU bench (kernels/cuda/bench/run.h, `nnlab cuda bench`) validates, then times
//     with CUDA events at sizes that fill the GPU, against measured ceilings;
//   - lesson 09 walks the ladders with them.
// One file per op here (kernels/cuda/bench/<op>.cpp), beside the op's .cu file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"
#include "kernels/harness.h"

namespace kernels::cuda::bench {

// A version of the op, or a peer it is measured against (cuBLAS), which is validated the
// same way: the one harness's Variant (id, name, summary, peer, needs.min_sm).
using harness::Variant;
using harness::variants_of;

// One op at one size on one device: the one harness's Problem (kernels/harness.h): shape,
// flops, bytes(v), run(v) (a launch: asynchronous on a GPU; the timed call), validate(v)
// (fills the outputs with NaN, runs v, downloads and compares with the reference), and the
// two a GPU op uses: workspace_bytes(v) (device scratch: attention's T x T scores) and
// unsupported(v) (matmul's lesson rungs at a transposed, biased or accumulating form).
using harness::Problem;

struct Op {
  std::string name;     // "matmul"
  std::string summary;  // one line
  std::vector<std::string> sizes;       // the GPU bench's default: big enough to fill an H100
  std::vector<std::string> test_sizes;  // small, odd where it matters: what the emulator runs
  // The variants on this device: every version of the op in the device's table, then peers.
  std::function<std::vector<Variant>(Device&)> variants;
  // Makes the inputs and reference at one size; std::invalid_argument on a bad size.
  std::function<std::unique_ptr<Problem>(Device&, const std::string& size, uint64_t seed)> make;
};

// Every op, in lesson order (kernels/cuda/bench/registry.cpp).
const std::vector<Op>& ops();
// By name; throws std::invalid_argument naming the ops it knows.
const Op& op(const std::string& name);

// One per op (kernels/cuda/bench/<op>.cpp).
Op matmul_op();                  // bench/matmul.cpp: every form, the GPT's linear layers included
Op bias_backward_op();           // bench/matmul.cpp: the linear layer's dbias
Op cos2_op();
Op softmax_op();
Op layernorm_forward_op();
Op layernorm_backward_op();
Op residual_layernorm_op();
Op gelu_op();
Op bias_gelu_op();
Op crossentropy_op();
Op adamw_op();
Op attention_op();
// the GPT's ops (issue 7)
Op attention_backward_op();      // bench/attention.cpp
Op encoder_forward_op();         // bench/gpt_ops.cpp, and the rest
Op encoder_backward_op();
Op gelu_backward_op();
Op dropout_forward_op();
Op crossentropy_loss_op();
Op crossentropy_backward_op();
Op sum_op();
Op multiply_op();                // bench/gpt_ops.cpp: single-version ops, validated all the same
Op add_op();
Op scale_op();
// the modern (Llama) block (issue 21): bench/llama_ops.cpp
Op rmsnorm_forward_op();
Op rmsnorm_backward_op();
Op rope_forward_op();            // single-version ops, validated all the same
Op rope_backward_op();
Op swiglu_forward_op();
Op swiglu_backward_op();
// inference (issue 8)
Op matvec_op();                  // bench/decode.cpp
Op attention_decode_op();
// integer inference (lesson 15, issue 25)
Op int8_gemm_op();               // bench/int8.cpp

// ---- helpers the op descriptions share (kernels/cuda/bench/registry.cpp) -------------------


// Random floats in [lo, hi) (never all zero), uploaded to a new device buffer.
Array<float> random_buffer(Device& dev, size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f,
                            std::vector<float>* host_copy = nullptr);
// Downloads a device buffer and compares it with the reference (harness::compare).
harness::Check compare_device(const std::string& name, const Array<float>& got, const std::vector<double>& want,
                              harness::Tolerance tol);

// out[at .. at + n) of a buffer of n + 1 floats (at = 0 or 1) against want, and the one float
// outside that window must still hold validate's 0xFF fill: a write past the end (at = 0) or
// before the start (at = 1) changes it. (How the ops check their misaligned-pointer paths:
// run once on the aligned buffers, once one float into them.)
harness::Check compare_window(const std::string& name, const Array<float>& out, size_t at, size_t n,
                              const std::vector<double>& want, harness::Tolerance tol);
// Both runs at once: fills `out` with NaN, calls run_at(0) (aligned buffers), compares the
// window; then the same with run_at(1) (every pointer one float in). Merged report.
harness::Check validate_aligned_and_shifted(Device& dev, Array<float>& out, size_t n, const std::vector<double>& want,
                                            harness::Tolerance tol, const std::function<void(size_t at)>& run_at);

}  // namespace kernels::cuda::bench
