// kernels/comm_mpi.h: the MPI engine of kernels/comm.h (Open MPI from Debian: openmpi-bin,
// libopenmpi-dev; found by CMake's FindMPI). Built only when MPI is found: the target
// nnlab_comm_mpi, and NNLAB_HAVE_MPI defined for what links it.
//
//   mpi_launched()       true when this process was started by mpirun / mpiexec (their
//                        environment: OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK): a program can
//                        then choose MPI, and stay a plain single process otherwise
//   mpi_abort(code)      MPI_Abort on every rank: what a failing rank calls instead of
//                        MPI_Finalize, which would wait for ranks that wait in a collective for it
//   make_mpi_comm()      MPI_Init (once), a Comm over MPI_COMM_WORLD: sendrecv is MPI_Sendrecv,
//                        allreduce_sum is MPI_Allreduce(MPI_SUM), barrier is MPI_Barrier. MPI_Finalize
//                        runs when the last such Comm is destroyed. Errors are MPI's error string.
//   mpi_library()        "Open MPI v4.1.4, ..." (MPI_Get_library_version, first line)
#pragma once

#include <memory>
#include <string>

#include "kernels/comm.h"

namespace kernels::comm {

bool mpi_launched();
std::unique_ptr<Comm> make_mpi_comm(int* argc, char*** argv);
std::string mpi_library();
[[noreturn]] void mpi_abort(int code);

}  // namespace kernels::comm
