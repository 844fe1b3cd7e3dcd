// kernels/comm.h: collective communication between ranks (processes or GPUs that train one model
// together), the ground of lesson 14's data parallelism. A rank sees a Comm: its own rank, the
// number of ranks, and two primitives every engine has:
//
//   sendrecv(send -> dest, recv <- source)   one point-to-point exchange (both at once, so a ring
//                                            of ranks that all send right and receive from the
//                                            left cannot deadlock)
//   allreduce_sum(data)                      the engine's own all-reduce: data = the sum over ranks
//
// Engines (make_* below): LocalComm (one rank: nothing to exchange), ThreadComms (N ranks as
// threads of one process, exchanging through shared memory: how the tests run the algorithms on
// a machine without MPI), and MpiComm (kernels/comm_mpi.h: Open MPI's MPI_Sendrecv and
// MPI_Allreduce, one rank per process under mpirun).
//
// The all-reduce, as versions (the course's ladder):
//   v1 ring     written here over sendrecv alone, the algorithm NCCL and Horovod made standard:
//               the buffer is cut into N chunks; N - 1 steps of REDUCE-SCATTER (each rank sends one
//               chunk right and adds the one that arrives from the left into its own copy; after
//               them rank r holds the full sum of chunk (r + 1) mod N), then N - 1 steps of
//               ALL-GATHER (the summed chunks travel round the ring, copied, not added). Each rank
//               sends 2 (N - 1) / N of the buffer in all, whatever N: the bandwidth term no longer
//               grows with the number of ranks.
//   v2 library  Comm::allreduce_sum: the engine's (MPI_Allreduce under MPI).
// The ring's sums are taken in ring order (chunk c's starts at rank c + 1 and goes round), a
// different order per chunk: the result differs from a sum in rank order by rounding, but is
// the SAME bits on every rank (the all-gather copies one rank's sum to all), which is what keeps
// data-parallel replicas identical.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/versions.h"

namespace kernels::comm {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "local", "threads", "mpi (Open MPI v4.1.4)", ...
  // Sends n_send floats to `dest` and receives n_recv floats from `source`, both before returning.
  virtual void sendrecv(const float* send, int64_t n_send, int dest, float* recv, int64_t n_recv, int source) = 0;
  // data (n floats, the same n on every rank) = its sum over the ranks.
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void barrier() = 0;
};

// One rank: rank 0 of 1.
std::unique_ptr<Comm> make_local_comm();

// The number of ranks mpirun / mpiexec started this process among (their environment:
// OMPI_COMM_WORLD_SIZE, PMI_SIZE), 0 when it was not started by one. Needs no MPI: a build
// without MPI uses it to refuse to run N unconnected copies of a training run.
int launched_ranks();

// N ranks as threads of this process: comms[r] is rank r's Comm, to be used by one thread each
// (run_ranks below). allreduce_sum sums in rank order (0, 1, ..., N-1): the plain reference.
std::vector<std::unique_ptr<Comm>> make_thread_comms(int ranks);
// Runs fn(comm) for every rank of make_thread_comms(ranks), one thread each, and waits; an
// exception on any rank is rethrown here (the lowest rank's). A rank that throws leaves the
// others waiting for it only if they exchange with it afterwards: fn should fail on all ranks
// alike (as MPI programs must).
template <class Fn>
void run_ranks(int ranks, Fn fn);

// The all-reduce versions, each: data (n floats on every rank) = the sum over ranks.
using AllreduceFn = void (*)(Comm& comm, float* data, int64_t n);
void allreduce_ring(Comm& comm, float* data, int64_t n);     // v1
void allreduce_library(Comm& comm, float* data, int64_t n);  // v2
const std::vector<OpVersion<AllreduceFn>>& allreduce_versions();
const OpVersion<AllreduceFn>& allreduce_version(const std::string& number_or_name);

// The chunk of rank-chunk c when n floats are cut into `ranks` chunks: [begin, end). The first
// n % ranks chunks hold one float more (every chunk is used, even when n < ranks: some are empty).
struct Chunk {
  int64_t begin = 0, end = 0;
};
Chunk ring_chunk(int64_t n, int ranks, int c);

// The ring's two halves, each a collective of its own (ZeRO shards the optimizer with them):
//   reduce_scatter_ring: afterwards rank r's owned_chunk holds the sum over the ranks (the rest
//                        of its buffer holds partial sums: scratch);
//   all_gather_ring:     every rank's owned_chunk is copied to every rank (the rest is overwritten).
// allreduce_ring is the one, then the other.
Chunk owned_chunk(int64_t n, int ranks, int rank);  // ring_chunk(n, ranks, (rank + 1) % ranks)
void reduce_scatter_ring(Comm& comm, float* data, int64_t n);
void all_gather_ring(Comm& comm, float* data, int64_t n);

template <class Fn>
void run_ranks(int ranks, Fn fn) {
  std::vector<std::unique_ptr<Comm>> comms = make_thread_comms(ranks);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*comms[static_cast<size_t>(r)]);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace kernels::comm
