// Tests of exercise 31_ring_allreduce_step. The chunk indices by hand (N = 4) and against the
// rule for many (r, s, N), with the usual mistakes named (a negative index from C++'s %, the
// send and receive swapped); one step against a simulation of the exchange with every rank's
// buffer copied first (exact: the same float additions); the whole reduce-scatter (N - 1
// steps) leaves rank r the sum of chunk (r + 1) mod N, for n not a multiple of N and n < N.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "exercises/31_ring_allreduce_step/ring_allreduce_step.h"
#include "exercises/test_util.h"
#include "nn/rng.h"

namespace {

int mod(int a, int N) { return ((a % N) + N) % N; }

using Buffers = std::vector<std::vector<float>>;

Buffers random_buffers(nn::Rng& rng, int N, int64_t n) {
  Buffers b;
  for (int r = 0; r < N; ++r) b.push_back(ex_test::random_normal(rng, static_cast<size_t>(n)));
  return b;
}

// Step s as the network does it: every rank's buffer as it was before the step, then each rank
// adds what arrived from its left into chunk (r - s - 1) mod N.
Buffers reference_step(const Buffers& before, int64_t n, int s) {
  const int N = static_cast<int>(before.size());
  Buffers after = before;
  for (int r = 0; r < N; ++r) {
    const int left = mod(r - 1, N);
    const ex::Chunk c = ex::chunk_of(n, N, mod(r - s - 1, N));
    for (int64_t i = c.begin; i < c.end; ++i) {
      after[static_cast<size_t>(r)][static_cast<size_t>(i)] =
          before[static_cast<size_t>(r)][static_cast<size_t>(i)] + before[static_cast<size_t>(left)][static_cast<size_t>(i)];
    }
  }
  return after;
}

// The first element where two sets of buffers differ, "" when none.
std::string first_difference(const Buffers& got, const Buffers& want, int64_t n) {
  const int N = static_cast<int>(want.size());
  for (int r = 0; r < N; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const float g = got[static_cast<size_t>(r)][static_cast<size_t>(i)];
      const float w = want[static_cast<size_t>(r)][static_cast<size_t>(i)];
      if (!(g == w)) {
        int c = 0;
        while (ex::chunk_of(n, N, c).end <= i) ++c;
        return "rank " + std::to_string(r) + ", element " + std::to_string(i) + " (chunk " + std::to_string(c) +
               "): got " + std::to_string(g) + ", want " + std::to_string(w);
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("send_chunk and recv_chunk: which chunk each rank sends and adds at step s", "[ex31]") {
  // N = 4. Step 0: rank r sends chunk r, adds chunk r - 1; step 1: sends r - 1, adds r - 2.
  const int send0[4] = {0, 1, 2, 3}, recv0[4] = {3, 0, 1, 2};
  const int send2[4] = {2, 3, 0, 1}, recv2[4] = {1, 2, 3, 0};
  if (ex::recv_chunk(0, 0, 4) == -1) FAIL("Likely cause: C++'s -1 % 4 is -1: add N before taking % N");
  bool adds_what_it_sends = true;
  for (int r = 0; r < 4; ++r) adds_what_it_sends = adds_what_it_sends && ex::recv_chunk(r, 0, 4) == send0[r];
  if (adds_what_it_sends) FAIL("Likely cause: each rank adds the chunk it sends; it adds the one BEFORE it, (r - s - 1) mod N");
  for (int r = 0; r < 4; ++r) {
    INFO("N = 4, rank " << r);
    const int got_recv = ex::recv_chunk(r, 0, 4);
    CHECK(ex::send_chunk(r, 0, 4) == send0[r]);
    CHECK(got_recv == recv0[r]);
    CHECK(ex::send_chunk(r, 2, 4) == send2[r]);
    CHECK(ex::recv_chunk(r, 2, 4) == recv2[r]);
  }
  // the chunk rank r receives is the one its left neighbour sends, for every N, r, s
  for (int N : {2, 3, 5, 8}) {
    for (int s = 0; s < N - 1; ++s) {
      for (int r = 0; r < N; ++r) {
        INFO("N = " << N << ", step " << s << ", rank " << r);
        CHECK(ex::send_chunk(r, s, N) == mod(r - s, N));
        CHECK(ex::recv_chunk(r, s, N) == ex::send_chunk(mod(r - 1, N), s, N));
      }
    }
  }
}

TEST_CASE("reduce_scatter_step: one step equals the exchange done with copies", "[ex31]") {
  nn::Rng rng(31);
  for (int N : {2, 3, 4, 7}) {
    for (int64_t n : {int64_t{13}, int64_t{3}, int64_t{1000}}) {
      Buffers data = random_buffers(rng, N, n);
      for (int s = 0; s < N - 1; ++s) {
        const Buffers want = reference_step(data, n, s);
        ex::reduce_scatter_step(data, n, s);
        const std::string diff = first_difference(data, want, n);
        INFO("N = " << N << " ranks, n = " << n << " floats, step " << s << ": " << diff);
        CHECK(diff.empty());
        data = want;  // the next step starts right whatever happened
      }
    }
  }
}

TEST_CASE("reduce_scatter_step: after N - 1 steps rank r holds the sum of chunk (r + 1) mod N", "[ex31]") {
  nn::Rng rng(310);
  for (int N : {2, 4, 5}) {
    const int64_t n = 4 * N + 3;  // not a multiple of N: the first 3 chunks are one longer
    Buffers data = random_buffers(rng, N, n);
    std::vector<double> sum(static_cast<size_t>(n), 0.0);
    for (const auto& b : data)
      for (int64_t i = 0; i < n; ++i) sum[static_cast<size_t>(i)] += b[static_cast<size_t>(i)];
    for (int s = 0; s < N - 1; ++s) ex::reduce_scatter_step(data, n, s);
    for (int r = 0; r < N; ++r) {
      const ex::Chunk c = ex::chunk_of(n, N, (r + 1) % N);
      for (int64_t i = c.begin; i < c.end; ++i) {
        const float got = data[static_cast<size_t>(r)][static_cast<size_t>(i)];
        INFO("N = " << N << ", rank " << r << " owns chunk " << (r + 1) % N << ", element " << i << ": got " << got
                    << ", the sum over ranks is " << sum[static_cast<size_t>(i)]);
        CHECK(ex_test::close(got, sum[static_cast<size_t>(i)], 1e-5, 1e-5));
      }
    }
  }
}
