// kernels/comm.cpp: the local and thread engines, and the all-reduce versions (kernels/comm.h).
#include "kernels/comm.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>

namespace kernels::comm {

// ---- one rank ----------------------------------------------------------------------------------
namespace {

class LocalComm : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local"; }
  void sendrecv(const float* send, int64_t n_send, int dest, float* recv, int64_t n_recv, int source) override {
    if (dest != 0 || source != 0 || n_send != n_recv)
      throw std::invalid_argument("comm local: one rank can only exchange with itself, the same count");
    if (n_send > 0 && send != recv) std::memmove(recv, send, static_cast<size_t>(n_send) * sizeof(float));
  }
  void allreduce_sum(float*, int64_t) override {}
  void barrier() override {}
};

// ---- ranks as threads ------------------------------------------------------------------------------
// What the N ranks share: a mailbox per (from, to) pair (messages in order, as MPI keeps them
// between two ranks), a barrier, and the all-reduce's accumulator.
struct Shared {
  explicit Shared(int n) : ranks(n), boxes(static_cast<size_t>(n) * static_cast<size_t>(n)) {}
  int ranks;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::deque<std::vector<float>>> boxes;  // boxes[from * ranks + to]
  int arrived = 0;
  int64_t generation = 0;
  std::vector<float> sum;  // the all-reduce's accumulator
  int summed = 0;          // ranks that have added into it, in rank order
};

class ThreadComm : public Comm {
 public:
  ThreadComm(std::shared_ptr<Shared> s, int rank) : s_(std::move(s)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_->ranks; }
  std::string name() const override { return "threads"; }

  void sendrecv(const float* send, int64_t n_send, int dest, float* recv, int64_t n_recv, int source) override {
    check_peer(dest, "dest");
    check_peer(source, "source");
    std::unique_lock<std::mutex> lock(s_->mu);
    s_->boxes[box(rank_, dest)].emplace_back(send, send + n_send);
    s_->cv.notify_all();
    auto& in = s_->boxes[box(source, rank_)];
    s_->cv.wait(lock, [&] { return !in.empty(); });
    std::vector<float> msg = std::move(in.front());
    in.pop_front();
    lock.unlock();
    if (static_cast<int64_t>(msg.size()) != n_recv)
      throw std::runtime_error("comm threads: rank " + std::to_string(rank_) + " expected " + std::to_string(n_recv) +
                               " floats from rank " + std::to_string(source) + ", got " + std::to_string(msg.size()));
    std::copy(msg.begin(), msg.end(), recv);
  }

  // The reference all-reduce: every rank adds its buffer into the accumulator in rank order
  // (rank r waits for ranks 0..r-1), then every rank copies the total.
  void allreduce_sum(float* data, int64_t n) override {
    std::unique_lock<std::mutex> lock(s_->mu);
    s_->cv.wait(lock, [&] { return s_->summed == rank_; });
    if (rank_ == 0) s_->sum.assign(data, data + n);
    else {
      if (static_cast<int64_t>(s_->sum.size()) != n)
        throw std::runtime_error("comm threads: allreduce of " + std::to_string(n) + " floats on rank " +
                                 std::to_string(rank_) + ", " + std::to_string(s_->sum.size()) + " on rank 0");
      for (int64_t i = 0; i < n; ++i) s_->sum[static_cast<size_t>(i)] += data[i];
    }
    ++s_->summed;
    s_->cv.notify_all();
    s_->cv.wait(lock, [&] { return s_->summed >= s_->ranks; });
    std::copy(s_->sum.begin(), s_->sum.end(), data);
    lock.unlock();
    barrier();  // all have copied before the next all-reduce resets the accumulator
    if (rank_ == 0) {
      std::lock_guard<std::mutex> g(s_->mu);
      s_->summed = 0;
    }
    barrier();
  }

  void barrier() override {
    std::unique_lock<std::mutex> lock(s_->mu);
    const int64_t gen = s_->generation;
    if (++s_->arrived == s_->ranks) {
      s_->arrived = 0;
      ++s_->generation;
      s_->cv.notify_all();
    } else {
      s_->cv.wait(lock, [&] { return s_->generation != gen; });
    }
  }

 private:
  size_t box(int from, int to) const { return static_cast<size_t>(from) * static_cast<size_t>(s_->ranks) + static_cast<size_t>(to); }
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= s_->ranks)
      throw std::invalid_argument(std::string("comm threads: ") + what + " rank " + std::to_string(peer) + " of " +
                                  std::to_string(s_->ranks));
  }
  std::shared_ptr<Shared> s_;
  int rank_;
};

}  // namespace

std::unique_ptr<Comm> make_local_comm() { return std::make_unique<LocalComm>(); }

int launched_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return std::max(1, std::atoi(v));
  }
  return 0;
}

std::vector<std::unique_ptr<Comm>> make_thread_comms(int ranks) {
  if (ranks < 1) throw std::invalid_argument("comm threads: need at least one rank, got " + std::to_string(ranks));
  auto shared = std::make_shared<Shared>(ranks);
  std::vector<std::unique_ptr<Comm>> comms;
  for (int r = 0; r < ranks; ++r) comms.push_back(std::make_unique<ThreadComm>(shared, r));
  return comms;
}

// ---- the all-reduce versions ---------------------------------------------------------------------
Chunk ring_chunk(int64_t n, int ranks, int c) {
  const int64_t base = n / ranks, extra = n % ranks;
  const int64_t begin = c * base + std::min<int64_t>(c, extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

Chunk owned_chunk(int64_t n, int ranks, int rank) { return ring_chunk(n, ranks, (rank + 1) % ranks); }

void reduce_scatter_ring(Comm& comm, float* data, int64_t n) {
  const int N = comm.size(), r = comm.rank();
  if (N == 1 || n == 0) return;
  const int right = (r + 1) % N, left = (r - 1 + N) % N;
  std::vector<float> incoming(static_cast<size_t>(ring_chunk(n, N, 0).end));  // the largest chunk
  // Step s: send chunk (r - s) mod N right, receive chunk (r - s - 1) mod N from the left and add
  // it into ours. After N - 1 steps rank r holds chunk (r + 1) mod N summed over all ranks: it
  // started at rank r + 2 and picked up every rank on its way round.
  for (int s = 0; s < N - 1; ++s) {
    const Chunk out = ring_chunk(n, N, ((r - s) % N + N) % N);
    const Chunk in = ring_chunk(n, N, ((r - s - 1) % N + N) % N);
    comm.sendrecv(data + out.begin, out.end - out.begin, right, incoming.data(), in.end - in.begin, left);
    for (int64_t i = in.begin; i < in.end; ++i) data[i] += incoming[static_cast<size_t>(i - in.begin)];
  }
}

void all_gather_ring(Comm& comm, float* data, int64_t n) {
  const int N = comm.size(), r = comm.rank();
  if (N == 1 || n == 0) return;
  const int right = (r + 1) % N, left = (r - 1 + N) % N;
  // Step s: send the finished chunk (r + 1 - s) mod N right, receive the finished chunk (r - s)
  // mod N from the left and store it: copies, so every rank ends with the same bits.
  for (int s = 0; s < N - 1; ++s) {
    const Chunk out = ring_chunk(n, N, ((r + 1 - s) % N + N) % N);
    const Chunk in = ring_chunk(n, N, ((r - s) % N + N) % N);
    comm.sendrecv(data + out.begin, out.end - out.begin, right, data + in.begin, in.end - in.begin, left);
  }
}

void allreduce_ring(Comm& comm, float* data, int64_t n) {
  reduce_scatter_ring(comm, data, n);
  all_gather_ring(comm, data, n);
}

void allreduce_library(Comm& comm, float* data, int64_t n) { comm.allreduce_sum(data, n); }

const std::vector<OpVersion<AllreduceFn>>& allreduce_versions() {
  static const std::vector<OpVersion<AllreduceFn>> versions = {
      {1, "ring", "reduce-scatter then all-gather round a ring, over point-to-point messages", &allreduce_ring},
      {2, "library", "the engine's own all-reduce (MPI_Allreduce under MPI)", &allreduce_library},
  };
  return versions;
}

const OpVersion<AllreduceFn>& allreduce_version(const std::string& number_or_name) {
  return find_version(allreduce_versions(), number_or_name, "allreduce");
}

}  // namespace kernels::comm
