// kernels/comm.h: the ring all-reduce (v1, written over sendrecv) against the plain sum in rank
// order (the thread engine's library all-reduce, v2), on 1 to 5 ranks as threads and buffer
// sizes that do and do not divide into the ranks (smaller than the ranks too): every rank ends
// with the same bits, within rounding of the rank-order sum; chunks cover the buffer once.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

#include "kernels/comm.h"

namespace {

// rank r's contribution: different on every rank and element, exact in float
float value(int r, int64_t i) { return static_cast<float>((r + 1) * 0.25 + static_cast<double>(i % 97) * 0.5 - 3.0); }

}  // namespace

TEST_CASE("comm: ring chunks cover the buffer once, in order, sizes differing by at most one", "[comm]") {
  for (int ranks : {1, 2, 3, 5, 8}) {
    for (int64_t n : {0, 1, 2, 7, 8, 1000, 1001}) {
      int64_t next = 0, lo = n, hi = 0;
      for (int c = 0; c < ranks; ++c) {
        const kernels::comm::Chunk ch = kernels::comm::ring_chunk(n, ranks, c);
        REQUIRE(ch.begin == next);
        next = ch.end;
        lo = std::min(lo, ch.end - ch.begin);
        hi = std::max(hi, ch.end - ch.begin);
      }
      REQUIRE(next == n);
      REQUIRE(hi - lo <= 1);
    }
  }
}

TEST_CASE("comm: the ring all-reduce sums over the ranks, the same bits on every rank", "[comm]") {
  for (int ranks : {1, 2, 3, 4, 5}) {
    for (int64_t n : {1, 2, 3, 64, 1001, 4099}) {
      std::vector<std::vector<float>> ring(static_cast<size_t>(ranks)), lib(static_cast<size_t>(ranks));
      std::vector<int> sizes(static_cast<size_t>(ranks));
      // (Catch2's assertions are not thread-safe: the ranks record, the test checks after)
      kernels::comm::run_ranks(ranks, [&](kernels::comm::Comm& c) {
        sizes[static_cast<size_t>(c.rank())] = c.size();
        std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] = value(c.rank(), i);
        kernels::comm::allreduce_version("ring").fn(c, a.data(), n);
        kernels::comm::allreduce_version("library").fn(c, b.data(), n);
        ring[static_cast<size_t>(c.rank())] = a;
        lib[static_cast<size_t>(c.rank())] = b;
      });
      INFO(ranks << " ranks, " << n << " floats");
      REQUIRE(sizes == std::vector<int>(static_cast<size_t>(ranks), ranks));
      for (int r = 1; r < ranks; ++r) {
        REQUIRE(ring[static_cast<size_t>(r)] == ring[0]);  // bit for bit: the all-gather copies
        REQUIRE(lib[static_cast<size_t>(r)] == lib[0]);
      }
      double worst = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        double exact = 0.0;
        for (int r = 0; r < ranks; ++r) exact += value(r, i);
        // these values are multiples of 0.25 well inside float's exact range: any order is exact
        worst = std::max(worst, std::fabs(ring[0][static_cast<size_t>(i)] - exact));
        REQUIRE(lib[0][static_cast<size_t>(i)] == static_cast<float>(exact));
      }
      REQUIRE(worst == 0.0);
    }
  }
}

TEST_CASE("comm: on values that round, the ring differs from the rank-order sum by rounding only", "[comm]") {
  const int ranks = 4;
  const int64_t n = 5000;
  std::vector<float> ring, lib;
  std::mutex mu;
  kernels::comm::run_ranks(ranks, [&](kernels::comm::Comm& c) {
    std::vector<float> a(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(c.rank())) / 3.0f;
    std::vector<float> b = a;
    kernels::comm::allreduce_ring(c, a.data(), n);
    kernels::comm::allreduce_library(c, b.data(), n);
    std::lock_guard<std::mutex> g(mu);
    if (c.rank() == 0) {
      ring = a;
      lib = b;
    }
  });
  int differ = 0;
  double worst = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(ring[static_cast<size_t>(i)]) - lib[static_cast<size_t>(i)]);
    differ += d > 0.0;
    worst = std::max(worst, d);
  }
  INFO(differ << " of " << n << " sums differ, by at most " << worst);
  // 4 terms of magnitude <= 1/3: a different order moves a sum by a few float steps at most
  CHECK(worst <= 4 * 4 * 6e-8);
  CHECK(differ > 0);  // the orders really differ: the ring is not the library call in disguise
}

TEST_CASE("comm: the local engine is one rank, and the thread engine refuses a bad peer", "[comm]") {
  auto local = kernels::comm::make_local_comm();
  CHECK(local->size() == 1);
  std::vector<float> v = {1.0f, 2.0f};
  kernels::comm::allreduce_ring(*local, v.data(), 2);
  CHECK(v == std::vector<float>{1.0f, 2.0f});
  CHECK_THROWS_WITH(kernels::comm::make_thread_comms(0), Catch::Contains("at least one rank"));
  CHECK_THROWS_WITH(kernels::comm::run_ranks(2, [](kernels::comm::Comm& c) {
                      float x = 0;
                      c.sendrecv(&x, 1, 5, &x, 1, 5);
                    }),
                    Catch::Contains("dest rank 5 of 2"));
  CHECK_THROWS_WITH(kernels::comm::allreduce_version("v9"), Catch::Contains("allreduce"));
}

TEST_CASE("comm: reduce-scatter leaves each rank its owned chunk summed, all-gather spreads the chunks", "[comm]") {
  for (int ranks : {1, 2, 3, 5}) {
    for (int64_t n : {1, 4, 1001}) {
      std::vector<std::vector<float>> scattered(static_cast<size_t>(ranks)), gathered(static_cast<size_t>(ranks));
      kernels::comm::run_ranks(ranks, [&](kernels::comm::Comm& c) {
        std::vector<float> a(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] = value(c.rank(), i);
        kernels::comm::reduce_scatter_ring(c, a.data(), n);
        scattered[static_cast<size_t>(c.rank())] = a;
        // all-gather of values only the owner knows: rank r writes 1000 r into its chunk first
        std::vector<float> b(static_cast<size_t>(n), -1.0f);
        const kernels::comm::Chunk own = kernels::comm::owned_chunk(n, ranks, c.rank());
        for (int64_t i = own.begin; i < own.end; ++i) b[static_cast<size_t>(i)] = 1000.0f * static_cast<float>(c.rank()) + static_cast<float>(i);
        kernels::comm::all_gather_ring(c, b.data(), n);
        gathered[static_cast<size_t>(c.rank())] = b;
      });
      INFO(ranks << " ranks, " << n << " floats");
      std::vector<int> owner(static_cast<size_t>(n), -1);
      for (int r = 0; r < ranks; ++r) {
        const kernels::comm::Chunk own = kernels::comm::owned_chunk(n, ranks, r);
        for (int64_t i = own.begin; i < own.end; ++i) {
          REQUIRE(owner[static_cast<size_t>(i)] == -1);  // each element owned once
          owner[static_cast<size_t>(i)] = r;
          double exact = 0.0;
          for (int q = 0; q < ranks; ++q) exact += value(q, i);
          REQUIRE(scattered[static_cast<size_t>(r)][static_cast<size_t>(i)] == static_cast<float>(exact));
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        REQUIRE(owner[static_cast<size_t>(i)] >= 0);
        for (int r = 0; r < ranks; ++r)
          REQUIRE(gathered[static_cast<size_t>(r)][static_cast<size_t>(i)] ==
                  1000.0f * static_cast<float>(owner[static_cast<size_t>(i)]) + static_cast<float>(i));
      }
    }
  }
}
