// kernels/cuda/bench/gpt_ops.cpp: placeholder (issue 7).
#include "kernels/cuda/bench/ops.h"
