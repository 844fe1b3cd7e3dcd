// kernels/cuda/ops.h: inside one build (kernels::cuda::hw or ::emu, see cuda.h), each op's
// .cu file adds its versions to the build's table (kernels/cuda/device.h: Kernels), and
// device_impl.cu makes the build's Device. Include after kernels/cuda/cuda.h.
#pragma once

#include <string>

#include "kernels/cuda/device.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

void add_matmul(Kernels& k);              // matmul.cu: matmul (every form), bias_backward
void add_elementwise(Kernels& k);         // elementwise.cu: cos2, gelu, bias_gelu
void add_softmax(Kernels& k);             // softmax.cu
void add_layernorm(Kernels& k);           // layernorm.cu: forward, backward, residual + layernorm
void add_crossentropy(Kernels& k);        // crossentropy.cu
void add_adamw(Kernels& k);               // adamw.cu
void add_attention(Kernels& k);           // attention.cu: forward and backward
void add_flash_attention(Kernels& k);     // flash_attention.cu: grouped-query flash forward and backward
void add_gpt_ops(Kernels& k);             // gpt_ops.cu: encoder, gelu backward, dropout, add, multiply,
                                          // cross-entropy loss and backward, sum, scale
void add_llama_ops(Kernels& k);           // llama_ops.cu: rmsnorm forward and backward, rope, swiglu
void add_decode(Kernels& k);              // decode.cu: matvec over packed weights, attention over a KV cache
void add_int8(Kernels& k);                // int8.cu: the int8 GEMM (naive, dp4a, int8 tensor cores)
void add_ceilings(Kernels& k);            // ceilings.cu: the FP32 FMA peak kernel

// This build's device (device_impl.cu): the emulator always; on the GPU build, the first
// GPU, or nullptr with the reason in *why_not.
Device* the_device(std::string* why_not);

}  // namespace kernels::cuda::NNLAB_CUDA_NS
