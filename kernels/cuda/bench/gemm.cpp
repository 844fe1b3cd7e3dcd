// kernels/cuda/bench/gemm.cpp: placeholder (issue 7).
#include "kernels/cuda/bench/ops.h"
