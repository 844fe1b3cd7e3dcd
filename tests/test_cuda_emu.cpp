// The CUDA emulator's self-tests (kernels/cuda/emu/emu.h): barriers, shared memory, warp
// shuffles and votes, atomics, vector types, the runtime API, and every misuse it promises
// to catch, each with the message naming the kernel, block and thread.
//
// This file is compiled by the host compiler, so kernels/cuda/cuda.h gives it the emulator:
// the kernels below run on the CPU.
#include <catch2/catch.hpp>

#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/cuda.h"

using kernels::Array;
using kernels::cuda::Error;
using kernels::cuda::launch;
using Catch::Matchers::Contains;

namespace {

kernels::cuda::Device& dev() { return kernels::cuda::emulator(); }

// Error message of running f, or "" when it does not throw.
template <class F>
std::string launch_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- kernels that work ---------------------------------------------------------------------

// Reverses each block's slice through static shared memory: wrong without the barrier.
__global__ void reverse_block(float* out, const float* in) {
  __shared__ float tile[64];
  const unsigned t = threadIdx.x;
  const unsigned base = blockIdx.x * blockDim.x;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[blockDim.x - 1 - t];
}

// The same without the barrier: thread 0 runs first and reads slots nobody wrote yet.
__global__ void reverse_block_no_sync(float* out, const float* in) {
  __shared__ float tile[64];
  const unsigned t = threadIdx.x;
  const unsigned base = blockIdx.x * blockDim.x;
  tile[t] = in[base + t];
  out[base + t] = tile[blockDim.x - 1 - t];
}

// Dynamic shared memory, 2-D blocks and a block-wide sum by halving.
__global__ void block_sum(float* out, const float* in) {
  float* s = kernels::cuda::dynamic_shared<float>();
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned n = blockDim.x * blockDim.y;
  s[t] = in[blockIdx.x * n + t];
  __syncthreads();
  for (unsigned stride = n / 2; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

// Warp shuffles: a butterfly sum (xor), a broadcast from lane 3, a shift down and up.
__global__ void shuffles(float* sum, float* bcast, float* down, float* up, const float* in) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const float x = in[i];
  float v = x;
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  sum[i] = v;
  bcast[i] = __shfl_sync(0xffffffffu, x, 3);
  down[i] = __shfl_down_sync(0xffffffffu, x, 1);
  up[i] = __shfl_up_sync(0xffffffffu, x, 2);
}

// Votes and the sm_80 integer reduction.
__global__ void votes(unsigned* ballot, int* any, int* all, int* reduced) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned b = __ballot_sync(0xffffffffu, lane % 2 == 0);
  const int a = __any_sync(0xffffffffu, lane == 7);
  const int l = __all_sync(0xffffffffu, lane < 32);
  const int r = __reduce_add_sync(0xffffffffu, static_cast<int>(lane));
  if (threadIdx.x == 0) {
    *ballot = b;
    *any = a;
    *all = l;
    *reduced = r;
  }
}

// Atomics from every thread of every block into one counter and one float sum.
__global__ void atomics(int* counter, float* total, int* maximum) {
  atomicAdd(counter, 1);
  atomicAdd(total, 0.5f);
  atomicMax(maximum, static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x));
}

// float4 loads and stores.
__global__ void scale4(float* out, const float* in, int n4) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n4) {
    float4 v = reinterpret_cast<const float4*>(in)[i];
    v.x *= 2.0f; v.y *= 2.0f; v.z *= 2.0f; v.w *= 2.0f;
    reinterpret_cast<float4*>(out)[i] = v;
  }
}

// __syncthreads_count.
__global__ void count_odd(int* out) {
  const int c = __syncthreads_count(threadIdx.x % 2);
  if (threadIdx.x == 0) *out = c;
}

// ---- kernels that misuse ---------------------------------------------------------------------

// Touches the first and last float of its dynamic shared memory.
__global__ void big_smem(float* out, int n) {
  float* s = kernels::cuda::dynamic_shared<float>();
  s[threadIdx.x] = 1.0f;
  s[n - 1 - static_cast<int>(threadIdx.x)] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x] + s[n - 1 - static_cast<int>(threadIdx.x)];
}

// The classic: an early return before a barrier.
__global__ void early_return(float* out, int n) {
  __shared__ float tile[64];
  const int i = static_cast<int>(threadIdx.x);
  if (i >= n) return;
  tile[i] = 1.0f;
  __syncthreads();
  out[i] = tile[(i + 1) % n];
}

// One element too far.
__global__ void off_by_one(float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i <= n) out[i] = 1.0f;  // should be i < n
}

// A write just before the start of the buffer.
__global__ void before_start(float* out) {
  if (threadIdx.x == 0) out[-1] = 1.0f;
}

// Reads dynamic shared memory nobody wrote.
__global__ void uninitialised_smem(float* out) {
  float* s = kernels::cuda::dynamic_shared<float>();
  if (threadIdx.x > 0) s[threadIdx.x] = 1.0f;  // slot 0 never written
  __syncthreads();
  out[threadIdx.x] = s[0] * 2.0f;
}

// A shuffle whose mask names lanes that returned.
__global__ void shuffle_after_return(float* out) {
  const unsigned lane = threadIdx.x % 32;
  if (lane >= 16) return;
  out[lane] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

// Half a warp waits at __syncthreads, the other half at a shuffle that needs the first half.
__global__ void mixed_barriers(float* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  }
}

// A full mask in a block of 48 threads: lanes 16-31 of warp 1 do not exist.
__global__ void mask_too_wide(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

std::vector<float> iota(size_t n, float start = 0.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST_CASE("emulator: static shared memory and __syncthreads", "[cuda][emu]") {
  const std::vector<float> host = iota(128);
  Array<float> in(dev(), host, kernels::uninitialized), out(dev(), 128, kernels::uninitialized);
  launch("reverse_block", reverse_block, dim3(2), dim3(64), 0, out.data(), in.data());
  const std::vector<float> got = out.to_vector();
  for (size_t i = 0; i < 128; ++i) {
    const size_t base = i / 64 * 64;
    REQUIRE(got[i] == host[base + 63 - (i - base)]);
  }
}

TEST_CASE("emulator: a missing __syncthreads gives a wrong answer every time", "[cuda][emu]") {
  const std::vector<float> host = iota(64, 1.0f);
  Array<float> in(dev(), host, kernels::uninitialized), out(dev(), 64, kernels::uninitialized);
  launch("reverse_block_no_sync", reverse_block_no_sync, dim3(1), dim3(64), 0, out.data(), in.data());
  const std::vector<float> got = out.to_vector();
  // Thread 0 ran to the end before thread 63 wrote its slot, so out[0] is not in[63].
  CHECK(got[0] != host[63]);
  CHECK(got[63] == host[0]);  // the last thread saw everything written
}

TEST_CASE("emulator: dynamic shared memory, 2-D blocks and a tree reduction", "[cuda][emu]") {
  const std::vector<float> host = iota(3 * 256);
  Array<float> in(dev(), host, kernels::uninitialized), out(dev(), 3, kernels::uninitialized);
  launch("block_sum", block_sum, dim3(3), dim3(16, 16), 256 * sizeof(float), out.data(), in.data());
  const std::vector<float> got = out.to_vector();
  for (int b = 0; b < 3; ++b) {
    double want = 0;
    for (int i = 0; i < 256; ++i) want += host[static_cast<size_t>(b * 256 + i)];
    CHECK(got[static_cast<size_t>(b)] == Approx(want));
  }
}

TEST_CASE("emulator: warp shuffles", "[cuda][emu]") {
  const std::vector<float> host = iota(64, 1.0f);
  Array<float> in(dev(), host, kernels::uninitialized), sum(dev(), 64, kernels::uninitialized),
      bcast(dev(), 64, kernels::uninitialized), down(dev(), 64, kernels::uninitialized),
      up(dev(), 64);
  launch("shuffles", shuffles, dim3(1), dim3(64), 0, sum.data(), bcast.data(), down.data(), up.data(), in.data());
  const auto s = sum.to_vector(), b = bcast.to_vector(), d = down.to_vector(), u = up.to_vector();
  for (size_t i = 0; i < 64; ++i) {
    const size_t warp = i / 32, lane = i % 32;
    double want = 0;
    for (size_t l = 0; l < 32; ++l) want += host[warp * 32 + l];
    CHECK(s[i] == Approx(want));
    CHECK(b[i] == host[warp * 32 + 3]);
    CHECK(d[i] == host[lane == 31 ? i : i + 1]);  // lane 31 has nobody below: keeps its own
    CHECK(u[i] == host[lane < 2 ? i : i - 2]);
  }
}

TEST_CASE("emulator: ballot, any, all and __reduce_add_sync", "[cuda][emu]") {
  Array<unsigned> ballot(dev(), 1, kernels::uninitialized);
  Array<int> any(dev(), 1, kernels::uninitialized), all(dev(), 1, kernels::uninitialized),
      reduced(dev(), 1, kernels::uninitialized);
  launch("votes", votes, dim3(1), dim3(32), 0, ballot.data(), any.data(), all.data(), reduced.data());
  CHECK(ballot.to_vector()[0] == 0x55555555u);
  CHECK(any.to_vector()[0] == 1);
  CHECK(all.to_vector()[0] == 1);
  CHECK(reduced.to_vector()[0] == 31 * 32 / 2);
}

TEST_CASE("emulator: atomics", "[cuda][emu]") {
  Array<int> counter(dev(), 1, kernels::uninitialized), maximum(dev(), 1, kernels::uninitialized);
  Array<float> total(dev(), 1, kernels::uninitialized);
  counter.fill_bytes(0);
  maximum.fill_bytes(0);
  total.fill_bytes(0);
  launch("atomics", atomics, dim3(5), dim3(96), 0, counter.data(), total.data(), maximum.data());
  CHECK(counter.to_vector()[0] == 480);
  CHECK(total.to_vector()[0] == 240.0f);
  CHECK(maximum.to_vector()[0] == 479);
}

TEST_CASE("emulator: float4 and __syncthreads_count", "[cuda][emu]") {
  const std::vector<float> host = iota(40, -3.0f);
  Array<float> in(dev(), host, kernels::uninitialized), out(dev(), 40, kernels::uninitialized);
  launch("scale4", scale4, dim3(1), dim3(32), 0, out.data(), in.data(), 10);
  const auto got = out.to_vector();
  for (size_t i = 0; i < 40; ++i) CHECK(got[i] == 2.0f * host[i]);
  Array<int> c(dev(), 1, kernels::uninitialized);
  launch("count_odd", count_odd, dim3(1), dim3(100), 0, c.data());
  CHECK(c.to_vector()[0] == 50);
}

TEST_CASE("emulator: the runtime API checks copies and frees", "[cuda][emu]") {
  Array<float> a(dev(), 16, kernels::uninitialized);
  std::vector<float> host(16, 1.0f);
  float* d = a.data();
  // A copy longer than the device buffer, and a host pointer where a device one is due.
  CHECK(cudaMemcpy(d, host.data(), 17 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(host.data(), host.data() + 8, 4, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaFree(host.data()) == cudaErrorInvalidDevicePointer);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevicePointer);
  CHECK(cudaGetLastError() == cudaSuccess);
  // Fresh device memory is NaN (as if garbage), so an output never written is noticed.
  Array<float> fresh(dev(), 4, kernels::uninitialized);
  CHECK(std::isnan(fresh.to_vector()[0]));
  // Out of memory: a clear message with the request.
  const std::string oom = launch_error([] { dev().allocate(size_t{1} << 60); });
  CHECK_THAT(oom, Contains("out of device memory") && Contains("asked for"));
}

TEST_CASE("emulator: an invalid launch configuration is refused", "[cuda][emu]") {
  Array<float> out(dev(), 64, kernels::uninitialized);
  const std::string e = launch_error([&] {
    launch("off_by_one", off_by_one, dim3(1), dim3(2048), 0, out.data(), 64);
  });
  CHECK_THAT(e, Contains("off_by_one") && Contains("2048 threads per block"));
}

TEST_CASE("emulator: more than 48 KiB of dynamic shared memory needs cudaFuncSetAttribute", "[cuda][emu]") {
  Array<float> out(dev(), 32, kernels::uninitialized);
  const int n = 16 * 1024;  // 64 KiB
  const size_t bytes = n * sizeof(float);
  const std::string e = launch_error([&] { launch("big_smem", big_smem, dim3(1), dim3(32), bytes, out.data(), n); });
  CHECK_THAT(e, Contains("kernel 'big_smem'") && Contains("65536 bytes of dynamic shared memory") &&
                    Contains("cudaFuncSetAttribute"));
  kernels::cuda::check(cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, n * 4),
                       "cudaFuncSetAttribute");
  launch("big_smem", big_smem, dim3(1), dim3(32), bytes, out.data(), n);
  CHECK(out.to_vector()[0] == 3.0f);
}

TEST_CASE("emulator: misuse - __syncthreads not reached by every thread", "[cuda][emu]") {
  Array<float> out(dev(), 64, kernels::uninitialized);
  const std::string e = launch_error([&] {
    launch("early_return", early_return, dim3(1), dim3(64), 0, out.data(), 40);
  });
  CHECK_THAT(e, Contains("kernel 'early_return'") && Contains("block (0,0,0)") && Contains("thread (0,0,0)") &&
                    Contains("thread (40,0,0) has already returned") && Contains("__syncthreads"));
}

TEST_CASE("emulator: misuse - a write past the end of a device buffer", "[cuda][emu]") {
  Array<float> out(dev(), 1000, kernels::uninitialized);
  const std::string e = launch_error([&] {
    launch("off_by_one", off_by_one, dim3(4), dim3(256), 0, out.data(), 1000);
  });
  CHECK_THAT(e, Contains("kernel 'off_by_one'") && Contains("block (3,0,0)") && Contains("thread (232,0,0)") &&
                    Contains("wrote past the end of a 4000-byte device buffer") && Contains("element 1000"));
  // The emulator is still usable afterwards.
  launch("off_by_one", off_by_one, dim3(4), dim3(256), 0, out.data(), 999);
}

TEST_CASE("emulator: misuse - a write before the start of a device buffer", "[cuda][emu]") {
  Array<float> out(dev(), 64, kernels::uninitialized);
  const std::string e = launch_error([&] { launch("before_start", before_start, dim3(1), dim3(32), 0, out.data()); });
  CHECK_THAT(e, Contains("kernel 'before_start'") && Contains("block (0,0,0)") &&
                    Contains("before the start of a 256-byte device buffer"));
}

TEST_CASE("emulator: misuse - arithmetic on uninitialised shared memory", "[cuda][emu]") {
  Array<float> out(dev(), 32, kernels::uninitialized);
  const std::string e = launch_error([&] {
    launch("uninitialised_smem", uninitialised_smem, dim3(1), dim3(32), 32 * sizeof(float), out.data());
  });
  CHECK_THAT(e, Contains("kernel 'uninitialised_smem'") && Contains("thread (0,0,0)") &&
                    Contains("uninitialised dynamic shared memory"));
}

TEST_CASE("emulator: misuse - warp shuffles with lanes that returned or do not exist", "[cuda][emu]") {
  Array<float> out(dev(), 64, kernels::uninitialized);
  const std::string returned = launch_error([&] {
    launch("shuffle_after_return", shuffle_after_return, dim3(1), dim3(32), 0, out.data());
  });
  CHECK_THAT(returned, Contains("kernel 'shuffle_after_return'") && Contains("__shfl_xor_sync") &&
                           Contains("lane 16") && Contains("already returned"));
  const std::string too_wide = launch_error([&] {
    launch("mask_too_wide", mask_too_wide, dim3(1), dim3(48), 0, out.data());
  });
  CHECK_THAT(too_wide, Contains("kernel 'mask_too_wide'") && Contains("thread (32,0,0)") &&
                           Contains("names lane 16 of warp 1") && Contains("only 48 threads"));
  const std::string mixed = launch_error([&] { launch("mixed_barriers", mixed_barriers, dim3(1), dim3(32), 0, out.data()); });
  CHECK_THAT(mixed, Contains("kernel 'mixed_barriers'") && Contains("deadlock"));
}
