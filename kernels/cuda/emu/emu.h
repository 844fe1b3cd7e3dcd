// kernels/cuda/emu/emu.h: a CUDA emulator on the CPU, so the same .cu kernel source runs
// without a GPU: compiled by nvcc it runs on the GPU, compiled by the host C++ compiler with
// this header (kernels/cuda/cuda.h picks) it runs here, in a debugger if you like.
//
// The design, and why:
//   - a launch runs its blocks one after another; the threads of a block are fibers
//     (ucontext), scheduled cooperatively: a thread runs until it reaches a barrier
//     (__syncthreads, a warp shuffle, __syncwarp) or returns, then the next one runs.
//     Real threads would be slower (a barrier costs a futex round trip) and would make
//     a run depend on the OS scheduler; fibers make every run the same, and "thread 0
//     runs to its first barrier before thread 1 starts" turns a missing __syncthreads
//     into a wrong answer every time instead of once in a thousand runs on a GPU.
//   - warp shuffles are barriers over the lanes of the mask: every lane deposits its value,
//     and when all have arrived each reads the one it asked for.
//   - static __shared__ arrays are function-local statics (blocks run one after another,
//     so one copy serves every block); dynamic shared memory (dynamic_shared<T>() in
//     kernels/cuda/cuda.h) is a buffer the emulator owns, refilled with signalling NaNs
//     before every block and followed by an inaccessible page.
//   - device memory from cudaMalloc ends at an inaccessible page and is surrounded by
//     sentinels: a write past the end faults at once, inside the thread that did it.
//
// What it catches, each as a kernels::cuda::Error (via cudaemu::LaunchError) naming the
// kernel, the block and the thread:
//   - a __syncthreads() that some threads of the block never reach (they returned, or
//     they wait at a different barrier): on a GPU, undefined behaviour (a hang or garbage);
//   - a warp shuffle or __syncwarp whose mask names a lane that returned or does not exist;
//   - a read or write past either end of a cudaMalloc'd buffer or of dynamic shared memory;
//   - arithmetic on uninitialised dynamic shared memory (signalling NaN + the FPU's
//     invalid-operation trap, which also stops inf - inf, 0 * inf and sqrt(-1));
//   - a launch configuration a GPU would refuse (more than 1024 threads, too much shared
//     memory, more than 48 KiB of dynamic shared memory without cudaFuncSetAttribute).
// What it does not model: timing (an emulated launch says nothing about GPU speed), memory
// coalescing and bank conflicts, warp divergence costs, misaligned float4 accesses (caught
// only when the compiler happens to emit an aligned SSE/AVX move: then the error says
// "misaligned"), data races between blocks (blocks
// never overlap here), and reads of uninitialised *static* __shared__ arrays (zero at the
// first launch, then whatever the previous block left).
//
// Stepping through one thread in gdb (lesson 09 shows it):
//   (gdb) break cudaemu_thread_start if block_x == 1 && thread_x == 5
//   (gdb) run, then `finish` and `step` into the kernel: every later stop at a breakpoint
//   inside the kernel can be filtered with `if cudaemu::current_thread_x() == 5`.
// Or NNLAB_EMU_BREAK="block=1,0,0 thread=5,0,0" raises SIGTRAP as that thread starts.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#define NNLAB_EMULATED 1

// ---- the CUDA keywords ------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __constant__
// Shared by every thread of the block: a function-local static (see above).
#define __shared__ static

// ---- vector types -----------------------------------------------------------------------
struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};
struct alignas(8) float2 { float x, y; };
struct float3 { float x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) double2 { double x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }

// ---- the emulator's state, read by the built-in variables --------------------------------
namespace cudaemu {

struct Fiber;  // one emulated thread (emu.cpp)
extern Fiber* g_current;
extern uint3 g_block_idx;
extern dim3 g_block_dim;
extern dim3 g_grid_dim;
const uint3& current_thread_idx();
unsigned current_thread_x();  // for gdb conditions

// Thrown by a launch that went wrong; the message names the kernel, block and thread.
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The barriers and collectives (emu.cpp). Every one may switch to another fiber.
void syncthreads();
int syncthreads_count(int predicate);
void syncwarp(unsigned mask, const char* what);
// Deposits `bytes` of `value` for this lane, waits for the lanes of `mask`, and copies
// what lane `src` deposited into `out`. src outside the mask is an error.
void warp_exchange(unsigned mask, const void* value, void* out, size_t bytes, int src,
                   const char* what);
unsigned lane_id();
unsigned warp_ballot(unsigned mask, bool predicate, const char* what);

// Dynamic shared memory of the running launch (poisoned with signalling NaNs per block).
void* dynamic_shared_memory();

// Runs one launch to completion (blocks one after another). Throws LaunchError.
using KernelBody = void (*)(void* closure);
void run_launch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem,
                KernelBody body, void* closure);
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n) records n:
// as on a GPU, a launch asking for more than 48 KiB of dynamic shared memory needs it.
void set_max_dynamic_smem(const void* kernel, int bytes);

// The launch helper: kernels/cuda/cuda.h's launch() calls this in the emulated build.
// Arguments are converted to the kernel's parameter types once, as a real launch copies
// them into constant memory; every thread then calls the kernel with its own copy.
template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
            A&&... args) {
  struct Closure {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> args;
  } closure{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)};
  run_launch(
      name, reinterpret_cast<const void*>(kernel), grid, block, smem,
      [](void* c) {
        auto* cl = static_cast<Closure*>(c);
        std::apply(cl->kernel, cl->args);
      },
      &closure);
}

}  // namespace cudaemu

#define threadIdx (::cudaemu::current_thread_idx())
#define blockIdx (static_cast<const uint3&>(::cudaemu::g_block_idx))
#define blockDim (static_cast<const dim3&>(::cudaemu::g_block_dim))
#define gridDim (static_cast<const dim3&>(::cudaemu::g_grid_dim))
constexpr int warpSize = 32;

// ---- synchronisation ---------------------------------------------------------------------
inline void __syncthreads() { cudaemu::syncthreads(); }
inline int __syncthreads_count(int p) { return cudaemu::syncthreads_count(p); }
inline int __syncthreads_or(int p) { return cudaemu::syncthreads_count(p) > 0; }
inline int __syncthreads_and(int p) {
  return cudaemu::syncthreads_count(p) ==
         static_cast<int>(cudaemu::g_block_dim.x * cudaemu::g_block_dim.y * cudaemu::g_block_dim.z);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { cudaemu::syncwarp(mask, "__syncwarp"); }
inline void __threadfence() {}
inline void __threadfence_block() {}

// ---- warp shuffles and votes ---------------------------------------------------------------
// Lanes are numbered within `width` (a power of two <= 32) as CUDA does: __shfl_sync reads
// lane (srcLane mod width) of this lane's segment; _up/_down/_xor outside the segment
// return the caller's own value.
namespace cudaemu {
template <class T>
T shfl(unsigned mask, T var, int src, const char* what) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of an 8-byte or smaller value");
  T out;
  warp_exchange(mask, &var, &out, sizeof(T), src, what);
  return out;
}
inline int segment_base(int width) { return static_cast<int>(lane_id()) & ~(width - 1); }
}  // namespace cudaemu

template <class T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
  return cudaemu::shfl(mask, var, cudaemu::segment_base(width) + (srcLane & (width - 1)), "__shfl_sync");
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  const int lane = static_cast<int>(cudaemu::lane_id());
  const int base = cudaemu::segment_base(width);
  const int src = lane - static_cast<int>(delta);
  return cudaemu::shfl(mask, var, src < base ? lane : src, "__shfl_up_sync");
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  const int lane = static_cast<int>(cudaemu::lane_id());
  const int base = cudaemu::segment_base(width);
  const int src = lane + static_cast<int>(delta);
  return cudaemu::shfl(mask, var, src >= base + width ? lane : src, "__shfl_down_sync");
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
  const int lane = static_cast<int>(cudaemu::lane_id());
  const int base = cudaemu::segment_base(width);
  const int src = lane ^ laneMask;
  return cudaemu::shfl(mask, var, (src < base || src >= base + width) ? lane : src, "__shfl_xor_sync");
}
inline unsigned __ballot_sync(unsigned mask, int p) { return cudaemu::warp_ballot(mask, p != 0, "__ballot_sync"); }
inline int __all_sync(unsigned mask, int p) {
  const unsigned yes = cudaemu::warp_ballot(mask, p != 0, "__all_sync");
  return yes == cudaemu::warp_ballot(mask, true, "__all_sync");
}
inline int __any_sync(unsigned mask, int p) { return cudaemu::warp_ballot(mask, p != 0, "__any_sync") != 0; }
// The warp-level reductions of compute capability 8.0 (integers only, as in CUDA).
inline unsigned __reduce_add_sync(unsigned mask, unsigned v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(mask, v, o);
  return v;
}
inline int __reduce_add_sync(unsigned mask, int v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(mask, v, o);
  return v;
}
inline int __reduce_max_sync(unsigned mask, int v) {
  for (int o = 16; o > 0; o /= 2) { const int w = __shfl_xor_sync(mask, v, o); v = w > v ? w : v; }
  return v;
}
inline int __reduce_min_sync(unsigned mask, int v) {
  for (int o = 16; o > 0; o /= 2) { const int w = __shfl_xor_sync(mask, v, o); v = w < v ? w : v; }
  return v;
}

// ---- atomics (fibers of one launch never run at the same time, so plain code is atomic) ----
template <class T>
T atomicAdd(T* address, T val) {
  const T old = *address;
  *address = static_cast<T>(old + val);
  return old;
}
template <class T>
T atomicSub(T* address, T val) {
  const T old = *address;
  *address = static_cast<T>(old - val);
  return old;
}
template <class T>
T atomicExch(T* address, T val) {
  const T old = *address;
  *address = val;
  return old;
}
template <class T>
T atomicMax(T* address, T val) {
  const T old = *address;
  if (val > old) *address = val;
  return old;
}
template <class T>
T atomicMin(T* address, T val) {
  const T old = *address;
  if (val < old) *address = val;
  return old;
}
template <class T>
T atomicCAS(T* address, T compare, T val) {
  const T old = *address;
  if (old == compare) *address = val;
  return old;
}

// ---- math intrinsics ---------------------------------------------------------------------
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned i) { float x; std::memcpy(&x, &i, 4); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
// The 4-way byte dot product of compute capability 6.1 (PTX dp4a.s32.s32): each int holds
// four signed 8-bit lanes (lane i in bits 8i..8i+7); c + the sum of the four lane products,
// in int32 (wrapping, as the hardware's add; |sum| <= 4 * 128 * 128 leaves c the only way
// to overflow).
inline int __dp4a(int a, int b, int c) {
  uint32_t sum = static_cast<uint32_t>(c);
  for (int i = 0; i < 4; ++i) {
    const int x = static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i) & 0xFFu);
    const int y = static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i) & 0xFFu);
    sum += static_cast<uint32_t>(x * y);
  }
  return static_cast<int>(sum);
}
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
template <class T>
T __ldg(const T* p) { return *p; }
// CUDA's device-side min/max overloads.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline long long clock64() { return 0; }

// ---- the runtime API subset the host code uses -------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
using cudaStream_t = struct CUstream_st*;
using cudaEvent_t = struct CUevent_st*;
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  int memoryClockRate;
  int memoryBusWidth;
};

const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMalloc(void** ptr, size_t bytes);
template <class T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
template <class T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    cudaemu::set_max_dynamic_smem(reinterpret_cast<const void*>(kernel), value);
  }
  return cudaSuccess;
}

namespace cudaemu {
// Bytes of device memory the emulator has handed out and not yet freed (tests use it to
// check that a kernel's workspace grows as they expect).
size_t bytes_allocated();
// The compute capability the emulator reports (NNLAB_EMU_SM, default 80: every rung of
// the ladders runs, the tensor-core one included).
int emulated_sm();
}  // namespace cudaemu
