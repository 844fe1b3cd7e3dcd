#include "app/cuda_info.h"

#include <cuda_runtime.h>

#include <sstream>

namespace app {

std::string cuda_device_summary() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return std::string("no CUDA device available (") + cudaGetErrorString(err) + ")";
  }
  std::ostringstream os;
  os << count << (count == 1 ? " device" : " devices");
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    os << (d ? ", " : ": ") << prop.name << " (sm_" << prop.major << prop.minor << ", "
       << (prop.totalGlobalMem >> 30) << " GiB)";
  }
  return os.str();
}

}  // namespace app
