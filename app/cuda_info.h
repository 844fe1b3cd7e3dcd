// app/cuda_info.h: the one CUDA translation unit of the foundation, proving the optional
// CUDA build works end to end. Lesson 09 brings the kernels.
#pragma once

#include <string>

namespace app {
// "2 devices: NVIDIA H100 (sm_90, 80 GiB), ..." or "no CUDA device available (reason)".
std::string cuda_device_summary();
}
