// kernels/cuda/gpt_ops.cu: the GPT's small ops (placeholder: the versions land with issue 7).
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/ops.h"

namespace kernels::cuda::NNLAB_CUDA_NS {

void add_gpt_ops(Kernels& k) { (void)k; }

}  // namespace kernels::cuda::NNLAB_CUDA_NS
