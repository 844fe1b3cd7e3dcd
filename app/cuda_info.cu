#include "app/cuda_info.h"

#include <cuda_runtime.h>

#include <sstream>

namespace app {

CudaDevices cuda_devices() {
  CudaDevices out;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    // The runtime's own words, then what they mean for a student: on a machine without an
    // NVIDIA GPU (or its driver) the answer is "driver version is insufficient" or "no
    // CUDA-capable device", which reads like something to fix when nothing is wrong.
    out.summary = std::string("no GPU usable here (the CUDA runtime says: ") +
                  (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") +
                  "; no NVIDIA GPU, or no driver new enough for this build's CUDA)";
    return out;
  }
  std::ostringstream os;
  os << count << (count == 1 ? " device" : " devices");
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    os << (d ? ", " : ": ") << prop.name << " (sm_" << prop.major << prop.minor << ", "
       << (prop.totalGlobalMem >> 30) << " GiB)";
  }
  out.count = count;
  out.summary = os.str();
  return out;
}

}  // namespace app
