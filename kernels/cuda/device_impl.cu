// kernels/cuda/device_impl.cu: one build's Device (kernels/cuda/device.h): memory, copies,
// events and the table of every op's versions. Compiled twice like every .cu here: by nvcc
// for the GPU, by the host compiler for the emulator.
//
// Oldest GPU: compute capability 5.0 (its one kernel, the empty probe), compile-checked for
// 5.0, 5.2 and 5.3 (scripts/check_old_gpus.py).
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/ops.h"

#include <string>

namespace kernels::cuda::NNLAB_CUDA_NS {

namespace {

const Kernels& table() {
  static const Kernels k = [] {
    Kernels t;
    add_matmul(t);
    add_elementwise(t);
    add_softmax(t);
    add_layernorm(t);
    add_crossentropy(t);
    add_adamw(t);
    add_attention(t);
    add_flash_attention(t);
    add_gpt_ops(t);
    add_llama_ops(t);
    add_decode(t);
    add_int8(t);
    add_ceilings(t);
    return t;
  }();
  return k;
}

std::string mib(size_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }

#if !defined(NNLAB_EMULATED)
// An empty kernel: if the build has no code this GPU can run, asking for its attributes
// says so before any real kernel fails.
__global__ void probe_kernel() {}
#endif

class DeviceImpl final : public Device {
 public:
  DeviceImpl() {
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
    info_.name = p.name;
    info_.sm = p.major * 10 + p.minor;
    info_.multiprocessors = p.multiProcessorCount;
    info_.memory_bytes = p.totalGlobalMem;
    info_.l2_bytes = static_cast<size_t>(p.l2CacheSize);
    info_.smem_per_block_optin = p.sharedMemPerBlockOptin;
#if defined(NNLAB_EMULATED)
    info_.emulated = true;
    info_.runtime = "emulator (kernels/cuda/emu), reporting compute capability " + std::to_string(info_.sm / 10) +
                    "." + std::to_string(info_.sm % 10);
#else
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    info_.runtime = "CUDA runtime " + std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10) +
                    ", driver " + std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10);
#endif
  }
  ~DeviceImpl() override {
    if (flush_) cudaFree(flush_);
  }

  const DeviceInfo& info() const override { return info_; }
  const Kernels& kernels() const override { return table(); }

  void* allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear it: the device is still usable
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error("out of device memory on " + info_.name + ": asked for " + mib(bytes) + ", " + mib(free_b) +
                  " free of " + mib(total_b) + " (" + cudaGetErrorString(err) + ")");
    }
    return p;
  }
  void release(void* p) override { check(cudaFree(p), "cudaFree"); }
  void from_host(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
  }
  void to_host(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy device to device");
  }
  void fill(void* dst, int byte, size_t bytes) override { check(cudaMemset(dst, byte, bytes), "cudaMemset"); }
  void synchronize() override { check(cudaDeviceSynchronize(), "waiting for the device (a kernel failed)"); }

  double time_ms(const std::function<void()>& work) override {
    cudaEvent_t start = nullptr, stop = nullptr;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    check(cudaEventRecord(start), "cudaEventRecord");
    work();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "waiting for a timed run (a kernel failed)");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms;
  }

  void flush_l2() override {
    if (!flush_) {
      flush_bytes_ = std::max<size_t>(2 * info_.l2_bytes, 1u << 20);
      flush_ = allocate(flush_bytes_);
    }
    check(cudaMemset(flush_, 0, flush_bytes_), "flushing L2 (cudaMemset)");
  }

  size_t memory_in_use() const override {
#if defined(NNLAB_EMULATED)
    return cudaemu::bytes_allocated();
#else
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return total_b - free_b;
#endif
  }

 private:
  DeviceInfo info_;
  void* flush_ = nullptr;
  size_t flush_bytes_ = 0;
};

}  // namespace

Device* the_device(std::string* why_not) {
#if defined(NNLAB_EMULATED)
  (void)why_not;
  static DeviceImpl dev;
  return &dev;
#else
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    if (why_not) {
      *why_not = err != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(err) : "no CUDA device found";
    }
    return nullptr;
  }
  cudaFuncAttributes attr{};
  const cudaError_t img = cudaFuncGetAttributes(&attr, probe_kernel);
  if (img != cudaSuccess) {
    cudaGetLastError();
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, 0);
    if (why_not) {
      *why_not = std::string(p.name) + " is compute capability " + std::to_string(p.major) + "." +
                 std::to_string(p.minor) + ", and this build has no code for it (" + cudaGetErrorString(img) +
                 "): reconfigure with -DCMAKE_CUDA_ARCHITECTURES=native (or " + std::to_string(p.major) +
                 std::to_string(p.minor) + ")";
    }
    return nullptr;
  }
  static DeviceImpl dev;
  return &dev;
#endif
}

}  // namespace kernels::cuda::NNLAB_CUDA_NS
