// kernels/cuda/ceilings.cpp: the host side of the ceilings (kernels/cuda/ceilings.h): a copy
// timed with the device's events, and the FMA kernel of kernels/cuda/ceilings.cu.
#include "kernels/cuda/ceilings.h"

#include <algorithm>
#include <limits>

namespace kernels::cuda {

namespace {
constexpr size_t kMiB = size_t{1} << 20;
}  // namespace

// ---- the ceilings ---------------------------------------------------------------------------

Ceilings measure_ceilings(Device& dev, const CeilingOptions& opts) {
  const DeviceInfo& info = dev.info();
  Ceilings c;
  c.emulated = info.emulated;
  const int repeats = std::max(1, opts.quick ? 2 : opts.repeats);

  // Copy: a buffer 8x the L2, so nothing of it is still cached when it is read again; on a
  // GPU at least 256 MiB (an H100's L2 is 50 MiB), and at most a quarter of its memory.
  size_t bytes = 8 * std::max<size_t>(info.l2_bytes, kMiB);
  if (!info.emulated) {
    bytes = std::max(bytes, 256 * kMiB);
    if (info.memory_bytes > 0) bytes = std::min(bytes, info.memory_bytes / 4);
  }
  bytes = bytes / 256 * 256;
  {
    Array<float> src(dev, bytes / sizeof(float), kernels::uninitialized),
        dst(dev, bytes / sizeof(float), kernels::uninitialized);
    src.fill_bytes(0x3C);
    dst.fill_bytes(0);
    dev.copy(dst.data(), src.data(), bytes);  // warm-up
    dev.synchronize();
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < repeats; ++r) {
      best = std::min(best, dev.time_ms([&] { dev.copy(dst.data(), src.data(), bytes); }));
    }
    // Every byte is read once and written once: 2 x bytes of traffic.
    if (best > 0) c.copy_gbs = 2.0 * static_cast<double>(bytes) / (best * 1e-3) / 1e9;
    c.copy_bytes = bytes;
  }

  // FP32 FMA: 8 blocks of 256 threads per SM fill every SM (2048 threads each); the
  // emulator runs one small block (its figure is a CPU's, and meaningless).
  if (dev.kernels().fma_peak) {
    const int blocks = info.emulated ? 1 : std::max(1, info.multiprocessors) * 8;
    const int threads = info.emulated ? 32 : 256;
    const int iters = info.emulated ? 64 : opts.quick ? 4096 : 16384;
    Array<float> out(dev, static_cast<size_t>(blocks) * static_cast<size_t>(threads), kernels::uninitialized);
    double flops = dev.kernels().fma_peak(out.data(), blocks, threads, iters);  // warm-up
    dev.synchronize();
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < repeats; ++r) {
      best = std::min(best, dev.time_ms([&] { flops = dev.kernels().fma_peak(out.data(), blocks, threads, iters); }));
    }
    if (best > 0) c.fma_gflops = flops / (best * 1e-3) / 1e9;
  }
  return c;
}

std::string emulator_warning() {
  return "EMULATED: no GPU ran these kernels. The times are CPU times of the CUDA emulator "
         "(kernels/cuda/emu), which runs every thread of every block one after another on the CPU: "
         "they say nothing about the speed of any GPU. Only the validation and the bytes moved mean "
         "anything here.";
}

}  // namespace kernels::cuda
