// lessons/09-cuda/broken_kernels.h: kernels with the bugs CUDA programmers write most, for
// part `emulator` of lesson 09 (lessons/09-cuda/broken_kernels.cu, compiled for the emulator
// only). Plain C++: no CUDA types.
#pragma once

#include <string>
#include <vector>

namespace lesson09 {

struct BrokenKernel {
  std::string kernel;  // the kernel's name
  std::string bug;     // what is wrong, in one line
  std::string on_gpu;  // what a real GPU would do with it
  std::string error;   // what the emulator said ("" if it did not catch it)
};

// Launches each broken kernel on the emulator and collects what the emulator said.
std::vector<BrokenKernel> run_broken_kernels();

}  // namespace lesson09
