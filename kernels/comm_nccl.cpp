// kernels/comm_nccl.cpp: kernels/comm.h's Comm over NCCL, one rank per GPU (see kernels/comm_nccl.h).
// Host C++ against NCCL's and the CUDA runtime's C APIs: no kernel of ours runs here.
#include "kernels/comm_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace kernels::comm {

namespace {

// ---- errors: the call, the rank, NCCL's or CUDA's own words ------------------------------------

std::string on_rank(int rank, int size) { return " on rank " + std::to_string(rank) + " of " + std::to_string(size); }

void check_nccl(ncclResult_t code, const char* what, int rank, int size, ncclComm_t comm = nullptr) {
  if (code == ncclSuccess) return;
  std::string text = std::string("NCCL: ") + what + " failed" + on_rank(rank, size) + ": " + ncclGetErrorString(code);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') text += std::string(" (") + detail + ")";
  text += ". NCCL_DEBUG=WARN (or INFO) in the environment prints NCCL's own account";
  throw std::runtime_error(text);
}

void check_cuda(cudaError_t code, const char* what, int rank, int size) {
  if (code == cudaSuccess) return;
  cudaGetLastError();  // clear it
  throw std::runtime_error(std::string("NCCL engine: ") + what + " failed" + on_rank(rank, size) + ": " +
                           cudaGetErrorString(code));
}

// ---- the Comm ------------------------------------------------------------------------------------

class NcclComm : public Comm {
 public:
  NcclComm(int rank, int size, int device, const ncclUniqueId& id) : rank_(rank), size_(size), device_(device) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", rank_, size_);
    // every rank calls it with the same id: it returns once all N have joined
    check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank", rank_, size_);
    // a blocking stream (not cudaStreamNonBlocking): what it runs waits for the kernels the cuda
    // backend launched on the default stream, so the gradients are complete before they are summed
    check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate", rank_, size_);
  }
  ~NcclComm() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (scratch_ != nullptr) cudaFree(scratch_);
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl (" + nccl_library() + ", GPU " + std::to_string(device_) + ")"; }

  // data (n floats) = its sum over the ranks, in place: on the GPU where it lives, or, for host
  // memory, copied to a device scratch buffer and back
  void allreduce_sum(float* data, int64_t n) override {
    check_count(n, "allreduce");
    if (n == 0) return;
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", rank_, size_);
    const bool device = on_this_device(data, "allreduce");
    float* buf = device ? data : scratch(n);
    if (!device) to_device(buf, data, n);
    check_nccl(ncclAllReduce(buf, buf, static_cast<size_t>(n), ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce",
               rank_, size_, comm_);
    if (!device) to_host(data, buf, n);
    wait("ncclAllReduce");
  }

  // n_send floats to dest and n_recv floats from source, as one group of NCCL calls (a rank that
  // sends right and receives from the left does both at once)
  void sendrecv(const float* send, int64_t n_send, int dest, float* recv, int64_t n_recv, int source) override {
    check_count(n_send, "sendrecv");
    check_count(n_recv, "sendrecv");
    check_peer(dest, "sends to");
    check_peer(source, "receives from");
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", rank_, size_);
    const bool send_on_device = n_send == 0 || on_this_device(send, "sendrecv");
    const bool recv_on_device = n_recv == 0 || on_this_device(recv, "sendrecv");
    // host buffers through the scratch: [0, n_send) what goes, [n_send, n_send + n_recv) what comes
    float* staged = (send_on_device && recv_on_device) ? nullptr : scratch(n_send + n_recv);
    const float* send_buf = send_on_device ? send : staged;
    float* recv_buf = recv_on_device ? recv : staged + n_send;
    if (!send_on_device) to_device(staged, send, n_send);
    check_nccl(ncclGroupStart(), "ncclGroupStart", rank_, size_, comm_);
    if (n_send > 0) {
      check_nccl(ncclSend(send_buf, static_cast<size_t>(n_send), ncclFloat, dest, comm_, stream_), "ncclSend", rank_,
                 size_, comm_);
    }
    if (n_recv > 0) {
      check_nccl(ncclRecv(recv_buf, static_cast<size_t>(n_recv), ncclFloat, source, comm_, stream_), "ncclRecv", rank_,
                 size_, comm_);
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd (the send and the receive)", rank_, size_, comm_);
    if (!recv_on_device) to_host(recv, recv_buf, n_recv);
    wait("ncclSend/ncclRecv");
  }

  // NCCL has no barrier: an all-reduce of one float returns on no rank before every rank called it
  void barrier() override {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", rank_, size_);
    float* one = scratch(1);
    check_nccl(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce (barrier)", rank_, size_,
               comm_);
    wait("the barrier");
  }

 private:
  void check_count(int64_t n, const char* what) const {
    if (n < 0) throw std::invalid_argument("NCCL: " + std::string(what) + " of " + std::to_string(n) + " floats" +
                                           on_rank(rank_, size_));
  }
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) {
      throw std::invalid_argument("NCCL: rank " + std::to_string(rank_) + " " + what + " rank " + std::to_string(peer) +
                                  ", but the ranks are 0 to " + std::to_string(size_ - 1));
    }
  }

  // Device memory (cudaMalloc, managed) is handed to NCCL as it is; anything else is host memory.
  // Device memory of another GPU is refused: the communicator is this rank's GPU's.
  bool on_this_device(const void* p, const char* what) const {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // an unknown pointer is host memory to CUDA
      return false;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return false;
    if (a.type == cudaMemoryTypeDevice && a.device != device_) {
      throw std::invalid_argument("NCCL: " + std::string(what) + on_rank(rank_, size_) + " was given memory of GPU " +
                                  std::to_string(a.device) + ", but this rank's communicator is on GPU " +
                                  std::to_string(device_) + " (allocate on the device make_nccl_comm made current)");
    }
    return true;
  }

  // a device buffer of at least n floats, kept and grown (the host-memory path allocates once)
  float* scratch(int64_t n) {
    const size_t want = static_cast<size_t>(n > 1 ? n : 1);
    if (want > scratch_floats_) {
      if (scratch_ != nullptr) check_cuda(cudaFree(scratch_), "cudaFree (the NCCL scratch)", rank_, size_);
      scratch_ = nullptr;
      scratch_floats_ = 0;
      void* p = nullptr;
      check_cuda(cudaMalloc(&p, want * sizeof(float)), "cudaMalloc (the NCCL scratch for host buffers)", rank_, size_);
      scratch_ = static_cast<float*>(p);
      scratch_floats_ = want;
    }
    return scratch_;
  }
  void to_device(float* dst, const float* src, int64_t n) {
    check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync host to device", rank_, size_);
  }
  void to_host(float* dst, const float* src, int64_t n) {
    check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync device to host", rank_, size_);
  }
  // NCCL's calls only queue the work on the stream: the Comm's promise is that it is done on return
  void wait(const char* what) {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error(std::string("NCCL: waiting for ") + what + on_rank(rank_, size_) +
                               " failed: " + cudaGetErrorString(e));
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    check_nccl(async, what, rank_, size_, comm_);
  }

  int rank_ = 0, size_ = 1, device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;
  size_t scratch_floats_ = 0;
};

// ---- starting: the unique id over the bootstrap, every rank's GPU checked together -------------

// What each rank reports before NCCL starts (one float each, in its own slots of the table).
enum class Start : int { ok = 0, no_gpu = 1, no_such_gpu = 2, set_device_failed = 3, no_unique_id = 4 };

constexpr int kIdBytes = static_cast<int>(sizeof(ncclUniqueId));
static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId is NCCL_UNIQUE_ID_BYTES (128) bytes");
constexpr int kSlots = 3;                                          // per rank: Start, device, GPUs on its node

std::string start_problem(Start s, int r, int device, int gpus) {
  const std::string who = "rank " + std::to_string(r);
  switch (s) {
    case Start::no_gpu:
      return who + " found no CUDA GPU (no device or no driver)";
    case Start::no_such_gpu:
      if (device < 0) {
        return who + " was given no GPU: mpirun's environment did not say its rank on the node "
                     "(OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID)";
      }
      return who + " wants GPU " + std::to_string(device) + ", but its node has " + std::to_string(gpus) +
             (gpus == 1 ? " GPU" : " GPUs") + " (0 to " + std::to_string(gpus - 1) +
             "): start at most one rank per GPU (mpirun -np " + std::to_string(gpus) +
             " on one node), or use --comm mpi";
    case Start::set_device_failed:
      return who + " could not use GPU " + std::to_string(device) + " (cudaSetDevice failed: another process may "
                   "hold it in exclusive mode)";
    case Start::no_unique_id:
      return who + " could not create NCCL's unique id (ncclGetUniqueId failed: NCCL found no network interface "
                   "to listen on; NCCL_SOCKET_IFNAME chooses one)";
    case Start::ok:
      break;
  }
  return "";
}

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(Comm& bootstrap, int device) {
  const int N = bootstrap.size(), r = bootstrap.rank();
  // this rank's GPU, checked before anything waits on it
  Start mine = Start::ok;
  std::string local_detail;
  int gpus = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&gpus);
  if (count_err != cudaSuccess || gpus == 0) {
    cudaGetLastError();
    gpus = 0;
    mine = Start::no_gpu;
    if (count_err != cudaSuccess) local_detail = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(count_err);
  } else if (device < 0 || device >= gpus) {
    mine = Start::no_such_gpu;
  } else if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    cudaGetLastError();
    mine = Start::set_device_failed;
    local_detail = std::string("cudaSetDevice: ") + cudaGetErrorString(e);
  }
  ncclUniqueId id{};
  if (r == 0 && mine == Start::ok) {
    const ncclResult_t e = ncclGetUniqueId(&id);
    if (e != ncclSuccess) {
      mine = Start::no_unique_id;
      local_detail = std::string("ncclGetUniqueId: ") + ncclGetErrorString(e);
    }
  }

  // one all-reduce over the bootstrap carries both: rank 0's id, a byte per float (0..255, exact;
  // the other ranks add zeros), and every rank's report in its own slots
  std::vector<float> table(static_cast<size_t>(kIdBytes + kSlots * N), 0.0f);
  if (r == 0) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&id);
    for (int i = 0; i < kIdBytes; ++i) table[static_cast<size_t>(i)] = static_cast<float>(bytes[i]);
  }
  float* slots = table.data() + kIdBytes + kSlots * r;
  slots[0] = static_cast<float>(static_cast<int>(mine));
  slots[1] = static_cast<float>(device);
  slots[2] = static_cast<float>(gpus);
  bootstrap.allreduce_sum(table.data(), static_cast<int64_t>(table.size()));

  // every rank reads the same table, so every rank throws the same message, or none does
  std::string problems;
  for (int q = 0; q < N; ++q) {
    const float* s = table.data() + kIdBytes + kSlots * q;
    const Start st = static_cast<Start>(static_cast<int>(s[0]));
    if (st == Start::ok) continue;
    problems += (problems.empty() ? "" : "; ") + start_problem(st, q, static_cast<int>(s[1]), static_cast<int>(s[2]));
  }
  if (!problems.empty()) {
    std::string text = "NCCL: cannot start one rank per GPU: " + problems;
    if (!local_detail.empty()) text += " (rank " + std::to_string(r) + ": " + local_detail + ")";
    throw std::runtime_error(text);
  }
  auto* bytes = reinterpret_cast<unsigned char*>(&id);
  for (int i = 0; i < kIdBytes; ++i) bytes[i] = static_cast<unsigned char>(table[static_cast<size_t>(i)]);
  return std::make_unique<NcclComm>(r, N, device, id);
}

bool takes_device_memory(const Comm& comm) { return dynamic_cast<const NcclComm*>(&comm) != nullptr; }

int launched_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || v[0] == '\0') continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end == '\0' && x >= 0 && x < 1000000) return static_cast<int>(x);
  }
  return -1;
}

std::string nccl_library() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace kernels::comm
