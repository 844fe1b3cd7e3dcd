// kernels/comm_nccl.h: the NCCL engine of kernels/comm.h: one rank per GPU, the buffers summed
// where they live, in the GPUs' memory (NVLink or PCIe between GPUs of one node, the network
// between nodes), without the trip through host memory the MPI engine needs. NCCL (NVIDIA's
// collective library) comes with the CUDA toolkit or the pip wheel nvidia-nccl-cu13. Built only
// when CUDA, MPI and NCCL are all found: the target nnlab_comm_nccl, and NNLAB_HAVE_NCCL
// defined for what links it (kernels/CMakeLists.txt prints which NCCL it found, or why not).
//
//   make_nccl_comm(bootstrap, device)  every rank of `bootstrap` (an MPI Comm: NCCL needs another
//                        channel to start) calls it with its own GPU: rank 0 makes NCCL's
//                        ncclUniqueId (128 bytes: who to connect to), the bootstrap's all-reduce
//                        hands it to every rank (each byte one float, the others adding zeros: the
//                        sum is exact), then ncclCommInitRank joins them. The new Comm has the
//                        bootstrap's ranks. If any rank's GPU does not exist, every rank throws
//                        the same message naming it (so none waits for the others).
//   allreduce_sum(data, n)  ncclAllReduce(sum, float) in place, then waits for it. `data` in
//                        device memory (cudaMalloc: the trainer's gradients) is summed where it
//                        is; host memory (a scalar such as the step's loss) goes through a device
//                        scratch buffer, so every caller of a Comm works unchanged.
//   sendrecv             ncclSend + ncclRecv in one group (both at once: the ring cannot
//                        deadlock), host memory through the same scratch.
//   barrier              an all-reduce of one float (NCCL has no barrier of its own).
//   takes_device_memory(comm)  true when comm is an NCCL Comm: its allreduce_sum reads and writes
//                        device pointers, so gpt's allreduce_gradients skips the host copy.
//   launched_local_rank()  this process's rank among those mpirun started on its node
//                        (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID), -1 when
//                        the launcher says nothing: the GPU a rank takes, one rank per GPU.
//
// Errors throw std::runtime_error naming the call, the rank and NCCL's (or CUDA's) own message.
// A failed NCCL call may leave the other ranks waiting: a program ends them with mpi_abort.
// The CUDA device: make_nccl_comm makes `device` the calling thread's current device
// (cudaSetDevice), so the memory allocated on that thread afterwards (the cuda backend's model)
// is on the same GPU as the communicator.
#pragma once

#include <memory>
#include <string>

#include "kernels/comm.h"

namespace kernels::comm {

std::unique_ptr<Comm> make_nccl_comm(Comm& bootstrap, int device);
bool takes_device_memory(const Comm& comm);
int launched_local_rank();
// "NCCL 2.28.9" (ncclGetVersion: the library loaded at run time, not the header compiled against)
std::string nccl_library();

}  // namespace kernels::comm
