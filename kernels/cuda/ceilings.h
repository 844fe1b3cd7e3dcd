// kernels/cuda/ceilings.h: what a device can do at best, measured on it: the copy bandwidth
// and the FP32 FMA rate (the kernel is kernels/cuda/ceilings.cu). The GPU harness
// (kernels/cuda/bench/run.h) measures every kernel against them, and the GPT trainer's cuda
// backend measures its MFU against the FMA rate: so they live in the kernels library
// (nnlab_cuda), not in the bench. The CPU's counterpart is kernels/ceilings.h.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/cuda/device.h"

namespace kernels::cuda {

struct Ceilings {
  // Device-to-device copy (Device::copy of a buffer far larger than L2): bytes read plus
  // bytes written, per second. A memory-bound kernel moving B bytes can take no less than
  // B / copy_bytes_per_s.
  double copy_gbs = 0.0;
  size_t copy_bytes = 0;  // the size of the buffer copied
  // FP32 FMA throughput of a kernel doing nothing else (kernels/cuda/ceilings.cu): many
  // independent FMA chains per thread on every SM. 0 when not measured.
  double fma_gflops = 0.0;
  bool emulated = false;
};

struct CeilingOptions {
  bool quick = false;  // smaller buffers, fewer repeats: for tests and --quick
  int repeats = 5;     // the best run is kept (as STREAM does)
};

// The copy buffer is max(8 x L2, 256 MiB) on a GPU (at most a quarter of its memory), 8 x
// L2 on the emulator.
Ceilings measure_ceilings(Device& dev, const CeilingOptions& opts = {});

// "EMULATED: ... say nothing about a GPU": what every timing taken on the emulator carries.
std::string emulator_warning();

}  // namespace kernels::cuda
