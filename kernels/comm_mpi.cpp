// kernels/comm_mpi.cpp: kernels/comm.h's Comm over MPI (see kernels/comm_mpi.h).
#include "kernels/comm_mpi.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>

namespace kernels::comm {

namespace {

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw std::runtime_error(std::string("MPI: ") + what + " failed: " + std::string(text, static_cast<size_t>(len)));
}

int count_of(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX) throw std::invalid_argument(std::string("MPI: ") + what + " of " + std::to_string(n) +
                                                        " floats: MPI counts are ints (at most 2^31 - 1)");
  return static_cast<int>(n);
}

int live_comms = 0;

class MpiComm : public Comm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    ++live_comms;
  }
  ~MpiComm() override {
    if (--live_comms == 0) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi (" + mpi_library() + ")"; }
  void sendrecv(const float* send, int64_t n_send, int dest, float* recv, int64_t n_recv, int source) override {
    check(MPI_Sendrecv(send, count_of(n_send, "sendrecv"), MPI_FLOAT, dest, 0, recv, count_of(n_recv, "sendrecv"),
                       MPI_FLOAT, source, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
  }
  void allreduce_sum(float* data, int64_t n) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, count_of(n, "allreduce"), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool mpi_launched() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

std::unique_ptr<Comm> make_mpi_comm(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    check(MPI_Init(argc, argv), "MPI_Init");
    // errors come back as codes (turned into exceptions above), not as an abort of every rank
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  return std::make_unique<MpiComm>();
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; if it did, stop this rank anyway
}

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<size_t>(len));
  const size_t cut = s.find_first_of(",\n");
  return cut == std::string::npos ? s : s.substr(0, cut);
}

}  // namespace kernels::comm
