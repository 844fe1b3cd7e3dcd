// gpt/memory.h: where a GPT's tensors live: kernels::Memory and kernels::Array
// (kernels/memory.h). The naive and cpu backends keep them in host memory; the cuda backend
// in its kernels::cuda::Device, which is a Memory. The model code (gpt/model.cpp) only does
// pointer arithmetic on them and hands the pointers to its backend, so it never needs to know
// which; the few places that must READ a tensor on the CPU (checkpoints, sampling, dumps)
// copy it out with Memory::to_host, which is a plain copy on the host.
//
//   Memory& mem = backend.memory();
//   Array<float> x = make_array<float>(mem, n);   // zero-filled, in that memory
//   std::vector<float> h = x.to_vector();
#pragma once

#include <cstddef>
#include <stdexcept>

#include "kernels/memory.h"
#include "nn/check.h"

namespace gpt {

using kernels::Array;
using kernels::host_memory;
using kernels::Memory;

// Array<T>(mem, n), n zero-filled T's, where a failed allocation is an nn::Error that tells
// the user of `nnlab gpt` the way out. kernels/ throws std exceptions naming the request
// (kernels::OutOfMemory on the host, kernels::cuda::Error on a device): both are runtime
// errors, and an Array's constructor throws nothing else of that kind.
template <class T>
Array<T> make_array(Memory& mem, size_t n) {
  try {
    return Array<T>(mem, n);
  } catch (const std::runtime_error& e) {
    NN_CHECK(false, e.what() << (mem.is_host() ? ": use a smaller model, batch or context (--n-embd, --batch-size, "
                                                 "--block-size)"
                                               : " (see `nnlab gpt train`'s memory line: lower --batch-size or the "
                                                 "model's size)"));
  }
  return {};
}

}  // namespace gpt
