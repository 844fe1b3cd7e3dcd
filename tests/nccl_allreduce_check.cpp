// tests/nccl_allreduce_check.cpp: the NCCL engine (kernels/comm_nccl.h) on the ranks mpirun
// started, one GPU each: ncclAllReduce on device buffers against a host sum, against the ring over
// MPI (kernels/comm.h v1) and MPI_Allreduce (v2), then all three timed the way the trainer uses
// them (the MPI engine through host copies of the device buffer, NCCL where the buffer lives).
//
//   mpirun -np <GPUs> build/release/bin/nnlab_nccl_check [--quick]
//
// Checks, on every rank, for buffers of 1 float to 16M floats (--quick: 256K):
//   - values whose sums are exact in any order: NCCL's sum is exact, bit for bit;
//   - values that round: NCCL is within tolerance of the double host sum and of the MPI ring, and
//     every rank holds the same bits (what keeps data-parallel replicas identical);
//   - the engine's host-memory path (a buffer on the CPU, staged through the GPU) and its
//     sendrecv (the ring written over ncclSend/ncclRecv, empty chunks included), device to device.
// Then times (median of 9 after 2 warm-ups, a barrier before each) and prints on rank 0 the time
// and the bus bandwidth 2 (N - 1) / N x bytes / time (what each rank sends: NCCL's tests' number).
// Exit status 1 if any check fails on any rank. Without a GPU for every rank (or with fewer than 2
// ranks) rank 0 prints "SKIPPED: ..." and every rank exits 0: ctest shows the test skipped.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "kernels/comm.h"
#include "kernels/comm_mpi.h"
#include "kernels/comm_nccl.h"
#include "kernels/cuda/device.h"
#include "kernels/harness.h"
#include "kernels/memory.h"

namespace {

namespace kc = kernels::comm;
namespace kh = kernels::harness;

float exact_value(int r, int64_t i) { return static_cast<float>((r + 1) * 0.25 + static_cast<double>(i % 97) * 0.5 - 3.0); }
float round_value(int r, int64_t i) { return std::sin(0.37f * static_cast<float>(i % 10007) + 1.3f * static_cast<float>(r)) / 3.0f; }

std::vector<float> values(float (*f)(int, int64_t), int r, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f(r, i);
  return v;
}
// the sum over the N ranks in double, on the host: the reference
std::vector<double> host_sum(float (*f)(int, int64_t), int N, int64_t n) {
  std::vector<double> s(static_cast<size_t>(n), 0.0);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] += f(q, i);
  return s;
}

uint64_t fnv(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ULL;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// The ranks whose hash differs from rank 0's: each rank's hash in four exact 16-bit pieces in its
// own slots of a table the (MPI) all-reduce fills.
std::string ranks_differing(kc::Comm& c, uint64_t h) {
  const int N = c.size();
  std::vector<float> table(static_cast<size_t>(4 * N), 0.0f);
  for (int k = 0; k < 4; ++k) table[static_cast<size_t>(4 * c.rank() + k)] = static_cast<float>((h >> (16 * k)) & 0xFFFF);
  c.allreduce_sum(table.data(), static_cast<int64_t>(table.size()));
  std::string differ;
  for (int q = 1; q < N; ++q)
    if (!std::equal(table.begin() + 4 * q, table.begin() + 4 * q + 4, table.begin())) {
      differ += ' ';
      differ += std::to_string(q);
    }
  return differ;
}

int report(const kh::Check& check, int r, const char* what, int64_t n) {
  if (check.ok()) return 0;
  std::printf("FAIL rank %d: %s, n = %lld: %s\n", r, what, static_cast<long long>(n), check.report.c_str());
  return 1;
}

// The median of 9 timed runs after 2 warm-ups, in ms, each started together (an MPI barrier).
double median_ms(kc::Comm& mpi, const std::function<void()>& run) {
  std::vector<double> t;
  for (int rep = 0; rep < 11; ++rep) {
    mpi.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rep >= 2) t.push_back(dt);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) quick = quick || std::string(argv[i]) == "--quick";
  if (!kc::mpi_launched()) {
    std::printf("SKIPPED: start it under mpirun, one rank per GPU: mpirun -np <GPUs> %s\n", argv[0]);
    return 0;
  }
  std::unique_ptr<kc::Comm> mpi = kc::make_mpi_comm(&argc, &argv);
  const int N = mpi->size(), r = mpi->rank();

  // ---- one GPU per rank, or skip (on every rank alike) ----
  int gpus = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&gpus);
  if (count_err != cudaSuccess) {
    cudaGetLastError();
    gpus = 0;
  }
  const int device = kc::launched_local_rank();
  float missing[2] = {gpus == 0 ? 1.0f : 0.0f, (device < 0 || device >= gpus) ? 1.0f : 0.0f};
  mpi->allreduce_sum(missing, 2);
  if (N < 2 || missing[0] > 0 || missing[1] > 0) {
    if (r == 0) {
      if (N < 2) {
        std::printf("SKIPPED: one rank, nothing to all-reduce: mpirun -np <GPUs, at least 2>\n");
      } else if (missing[0] > 0) {
        std::printf("SKIPPED: no GPU on %d of the %d ranks (rank 0: %s)\n", static_cast<int>(missing[0]), N,
                    count_err != cudaSuccess ? cudaGetErrorString(count_err) : (gpus == 0 ? "no device" : "has one"));
      } else {
        std::printf("SKIPPED: %d ranks need a GPU each; rank 0's node has %d (local rank from mpirun: %d)\n", N, gpus,
                    device);
      }
    }
    return 0;
  }
  std::unique_ptr<kc::Comm> nccl;
  try {
    nccl = kc::make_nccl_comm(*mpi, device);
  } catch (const std::exception& e) {
    std::printf("FAIL rank %d: %s\n", r, e.what());
    kc::mpi_abort(1);
  }
  kernels::Memory* dev = kernels::cuda::gpu();  // allocates on the GPU make_nccl_comm made current
  if (dev == nullptr) {
    std::printf("FAIL rank %d: make_nccl_comm found GPU %d, kernels::cuda::gpu() none\n", r, device);
    kc::mpi_abort(1);
  }
  if (r == 0) std::printf("%d ranks, engine %s, bootstrap %s\n", N, nccl->name().c_str(), mpi->name().c_str());
  if (!kc::takes_device_memory(*nccl) || kc::takes_device_memory(*mpi)) {
    std::printf("FAIL rank %d: takes_device_memory is wrong\n", r);
    kc::mpi_abort(1);
  }

  // ---- checks ----
  const kh::Tolerance tol{1e-6, 1e-5};
  const int64_t largest = quick ? (int64_t{1} << 18) : (int64_t{1} << 24);
  int failures = 0;
  for (int64_t n = 1; n <= largest; n = n < 1024 ? n * 3 + 1 : n * 4) {
    // exact values: NCCL on the device equals the exact sum
    kernels::Array<float> d(*dev, values(exact_value, r, n));
    nccl->allreduce_sum(d.data(), n);
    const std::vector<double> exact = host_sum(exact_value, N, n);
    failures += report(kh::compare("NCCL, exact sums", d.to_vector(), exact, {0.0, 0.0}), r, "NCCL exact", n);

    // rounding values: NCCL (device) vs the host sum, vs the ring over MPI, the same bits everywhere
    const std::vector<double> want = host_sum(round_value, N, n);
    kernels::Array<float> g(*dev, values(round_value, r, n));
    nccl->allreduce_sum(g.data(), n);
    const std::vector<float> got = g.to_vector();
    failures += report(kh::compare("NCCL vs host sum", got, want, tol), r, "NCCL vs the host sum", n);
    std::vector<float> ring = values(round_value, r, n);
    kc::allreduce_ring(*mpi, ring.data(), n);
    const std::vector<double> ring_d(ring.begin(), ring.end());
    failures += report(kh::compare("NCCL vs MPI ring", got, ring_d, tol), r, "NCCL vs the MPI ring", n);
    const std::string differ = ranks_differing(*mpi, fnv(got));
    if (!differ.empty()) {
      if (r == 0) std::printf("FAIL: n = %lld: NCCL's sum on rank(s)%s differs from rank 0's\n", static_cast<long long>(n), differ.c_str());
      ++failures;
    }

    // the engine's host path (staged through its scratch) and the ring over ncclSend/ncclRecv
    std::vector<float> host = values(round_value, r, n);
    nccl->allreduce_sum(host.data(), n);
    failures += report(kh::compare("NCCL host path", host, want, tol), r, "NCCL on a host buffer", n);
    std::vector<float> nring = values(round_value, r, n);
    kc::allreduce_ring(*nccl, nring.data(), n);
    failures += report(kh::compare("ring over NCCL", nring, ring_d, {0.0, 0.0}), r,
                       "the ring over ncclSend/ncclRecv vs over MPI (the same order of sums)", n);

    // sendrecv device to device: my values right, my left neighbour's in
    const int left = (r - 1 + N) % N;
    kernels::Array<float> mine(*dev, values(exact_value, r, n)), theirs(*dev, static_cast<size_t>(n));
    nccl->sendrecv(mine.data(), n, (r + 1) % N, theirs.data(), n, left);
    const std::vector<float> lv = values(exact_value, left, n);
    failures += report(kh::compare("sendrecv", theirs.to_vector(), std::vector<double>(lv.begin(), lv.end()), {0.0, 0.0}),
                       r, "ncclSend/ncclRecv device to device", n);
  }
  nccl->barrier();
  float f = static_cast<float>(failures);
  mpi->allreduce_sum(&f, 1);
  if (r == 0) std::printf("checks: %s (%d failures over all ranks)\n", f == 0 ? "passed" : "FAILED", static_cast<int>(f));

  // ---- timing: a device buffer of gradients, summed three ways ----
  if (r == 0) {
    std::printf("\n%12s %10s | %12s %12s %12s | bus GB/s: %8s %8s %8s\n", "floats", "MiB", "NCCL ms", "MPI+copy ms",
                "ring+copy ms", "NCCL", "MPI", "ring");
  }
  for (int64_t n = 1024; n <= largest; n *= 16) {
    kernels::Array<float> grads(*dev, std::vector<float>(static_cast<size_t>(n), 1.0f / static_cast<float>(N)));
    std::vector<float> host(static_cast<size_t>(n));
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    // the trainer with the MPI engine: device -> host, all-reduce, host -> device (gpt/model.cpp)
    auto through_host = [&](kc::AllreduceFn fn) {
      dev->to_host(host.data(), grads.data(), bytes);
      fn(*mpi, host.data(), n);
      dev->from_host(grads.data(), host.data(), bytes);
    };
    const double nccl_ms = median_ms(*mpi, [&] { nccl->allreduce_sum(grads.data(), n); });
    const double mpi_ms = median_ms(*mpi, [&] { through_host(kc::allreduce_library); });
    const double ring_ms = median_ms(*mpi, [&] { through_host(kc::allreduce_ring); });
    const double bus = 2.0 * (N - 1) / N * static_cast<double>(bytes);
    if (r == 0) {
      std::printf("%12lld %10.2f | %12.4f %12.4f %12.4f | %18.2f %8.2f %8.2f\n", static_cast<long long>(n),
                  static_cast<double>(bytes) / (1 << 20), nccl_ms, mpi_ms, ring_ms, bus / nccl_ms / 1e6,
                  bus / mpi_ms / 1e6, bus / ring_ms / 1e6);
    }
  }
  nccl.reset();  // NCCL's communicator goes before MPI_Finalize (mpi's destructor)
  return f == 0 ? 0 : 1;
}
