// kernels/cuda/device.cpp: which device a program gets (kernels/cuda/device.h).
#include "kernels/cuda/device.h"

#include <cstdlib>
#include <string>

namespace kernels::cuda {

namespace emu {
Device* the_device(std::string* why_not);
}
#if defined(NNLAB_HAVE_CUDA_HW)
namespace hw {
Device* the_device(std::string* why_not);
}
#endif

Device& emulator() { return *emu::the_device(nullptr); }

Device* gpu(std::string* why_not) {
#if defined(NNLAB_HAVE_CUDA_HW)
  static std::string why;
  static Device* dev = hw::the_device(&why);
  if (!dev && why_not) *why_not = why;
  return dev;
#else
  if (why_not) *why_not = "this build has no GPU code (nvcc was not found at configure time, or NNLAB_CUDA=OFF)";
  return nullptr;
#endif
}

Device& default_device() {
  const char* env = std::getenv("NNLAB_DEVICE");
  const std::string want = env ? env : "";
  if (want == "emu" || want == "emulator") return emulator();
  std::string why;
  Device* g = gpu(&why);
  if (want == "gpu") {
    if (!g) throw Error("NNLAB_DEVICE=gpu, but there is no usable GPU: " + why);
    return *g;
  }
  if (!want.empty()) throw Error("NNLAB_DEVICE='" + want + "' is not understood: use gpu or emu");
  return g ? *g : emulator();
}

}  // namespace kernels::cuda
