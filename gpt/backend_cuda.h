// gpt/backend_cuda.h: `--backend cuda`, the GPT on the lesson-09 kernels.
//
// Parameters, gradients, AdamW state, activations and token ids live in device memory
// (Backend::memory: the model is moved there with gpt_move_to). Every op is a call into the
// device's kernel table (kernels/cuda/device.h: Kernels), the very functions `nnlab cuda
// bench` validates and times and lesson 09 teaches; the rungs used are listed by
// kernel_plan(). Kernels are
// launched on the default stream and the host does not wait for them, except where a number
// must come back: the mean loss (crossentropy_forward) and the gradient norm (sum_squares),
// which the trainer logs every step.
//
// Precision (--precision):
//   fp32  the reference: every matmul in fp32 on the CUDA cores (matmul v9); any GPU the
//         build targets (compute capability 7.5 and up with CUDA 13)
//   tf32  matmuls on the tensor cores with TF32 inputs (10-bit mantissa), fp32 accumulate
//         (matmul v10); compute capability 8.0+
//   bf16  matmuls on the tensor cores with bf16 inputs (8-bit mantissa), fp32 accumulate
//         (matmul v11); compute capability 8.0+. Weights (the fp32 master copy), activations
//         and gradients stay in fp32 memory: the operands are rounded to bf16 as the tiles
//         are loaded. (bf16 STORAGE of activations, which halves their traffic, is not done.)
//   auto  bf16 where the device has it, else fp32
// Everything that is not a matmul (layernorm, softmax, attention, GELU, AdamW) is fp32 at
// every precision.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpt/backend.h"
#include "gpt/model.h"

namespace kernels::cuda {
class Device;
}

namespace gpt {

enum class Precision { fp32, tf32, bf16 };
std::string precision_name(Precision p);
// "auto" picks for compute capability `sm`; nn::Error for an unknown name or a precision
// the device cannot run (naming its compute capability and what to use instead).
Precision choose_precision(const std::string& name, int sm, const std::string& device_name);

// The GPU (kernels::cuda::gpu()); with NNLAB_DEVICE=emu, the CUDA emulator (slow: for tests
// and for stepping through a kernel). nn::Error when there is no usable GPU, saying why
// (no device, a driver problem, or a GPU whose architecture this build has no code for).
std::unique_ptr<Backend> make_cuda_backend(const std::string& precision = "auto");
std::unique_ptr<Backend> make_cuda_backend(kernels::cuda::Device& device, const std::string& precision);
// The table itself (gpt/backend.h): its callables share the device's chosen rungs and the
// backend's scratch, kept alive by every copy of the table.
Backend cuda_backend(kernels::cuda::Device& device, const std::string& precision);

// The tensor-core peak the MFU of tf32 and bf16 is measured against. By default the trainer's
// own matmul rung at 4096^3 (what our kernels do at their best); a program that links a faster
// library's GEMM (app/nnlab.cpp links cuBLAS through kernels/cuda/bench/cublas.h, which the
// trainer itself must not depend on) installs it here, and the larger of the two is used, so
// an MFU is against the best this GPU was measured to do, and a peer using cuBLAS (PyTorch)
// cannot land above 100%. fn(device, "tf32" | "bf16", &what) returns FLOP/s, 0 when it cannot
// measure (what says why).
using TensorCorePeakFn = double (*)(kernels::cuda::Device& device, const std::string& precision, std::string* what);
void set_tensor_core_peak(TensorCorePeakFn fn);

// Which version of which kernel the backend calls for each of its ops, for the lesson and
// the logs: {"matmul (forward, dinp, dweight)", "matmul v11 any layout (BF16)"}, ...
// (Backend::rungs; nn::Error for a table that has none, i.e. not the cuda backend.)
std::vector<std::pair<std::string, std::string>> kernel_plan(const Backend& cuda_backend);

// The device bytes a training run at (B, T) needs (memory_breakdown plus the backend's own
// scratch), and nn::Error when that exceeds `free_bytes`: the message lists parameters,
// gradients, AdamW state, activations and scratch, the total and what is free.
void check_device_memory(const GPTConfig& c, int B, int T, size_t free_bytes, const std::string& device_name);

}  // namespace gpt
