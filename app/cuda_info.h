// app/cuda_info.h: what `nnlab info` says about the GPUs a CUDA build can see.
#pragma once

#include <string>

namespace app {

struct CudaDevices {
  int count = 0;        // usable devices: 0 when the runtime reports none or an error
  std::string summary;  // "2 devices: NVIDIA H100 (sm_90, 80 GiB), ..." or why there is none
};

CudaDevices cuda_devices();

}  // namespace app
