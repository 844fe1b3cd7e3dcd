// The CUDA int8 GEMM ladder (kernels/cuda/int8.cu: v1 naive, v2 dp4a, v3 int8 tensor cores)
// against the CPU reference kernels::int8_gemm_v1, EXACTLY (integers: bit for bit, no
// tolerance): through the emulator here, on a GPU when there is one (tag [device], skipped
// without). And the two emulator pieces the ladder stands on (kernels/cuda/emu): __dp4a and
// the int8 wmma fragments, against plain loops.
//
// Compiled by the host compiler, so kernels/cuda/cuda.h gives the emulator and the small
// kernels below run on the CPU.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/cuda/bench/ops.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/emu/wmma.h"
#include "kernels/harness.h"
#include "kernels/int8_gemm.h"

using kernels::Array;
namespace cb = kernels::cuda::bench;
namespace wmma = nvcuda::wmma;

namespace {

std::vector<int8_t> random_int8(size_t n, uint64_t seed) {
  kernels::harness::Random rng(seed);
  std::vector<int8_t> out(n);
  for (int8_t& x : out) x = static_cast<int8_t>(static_cast<int>(rng.next_u64() >> 56) - 128);
  return out;
}

// Runs every version of the device's int8_gemm ladder on A (M,K), B (N,K) and checks each C
// equals kernels::int8_gemm_v1's, entry for entry. Versions needing a newer GPU are skipped.
void check_every_version(kernels::cuda::Device& dev, int M, int N, int K, const std::vector<int8_t>& a,
                         const std::vector<int8_t>& b) {
  std::vector<int32_t> want(static_cast<size_t>(M) * N);
  kernels::int8_gemm_v1(want.data(), a.data(), b.data(), M, N, K);
  Array<int8_t> da(dev, a), db(dev, b);
  Array<int32_t> dc(dev, want.size(), kernels::uninitialized);
  const auto& table = dev.kernels().int8_gemm;
  REQUIRE(table.size() == 3);
  for (const auto& v : table) {
    if (v.needs.min_sm > dev.info().sm) {
      WARN("int8_gemm " << v.id() << " needs compute capability " << v.needs.min_sm << ": not run");
      continue;
    }
    INFO("int8_gemm " << v.id() << " (" << v.name << ") at M=" << M << " N=" << N << " K=" << K);
    dc.fill_bytes(0x7F);
    v.fn(dc.data(), da.data(), db.data(), M, N, K);
    dev.synchronize();
    const std::vector<int32_t> got = dc.to_vector();
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i] && wrong++ == 0) first = i;
    }
    INFO(wrong << " entries differ; the first C[" << first / N << "][" << first % N << "] = " << got[first]
               << ", v1 says " << want[first]);
    CHECK(wrong == 0);
  }
}

// The shapes: ragged against every tile (v2's 64x64, v3's 128x128), K against 4, 16 and the
// tiles' 64 and 32 bytes, and K a multiple of 16 (the 16-byte loads).
struct Shape {
  int M, N, K;
};
const Shape kShapes[] = {{17, 33, 64}, {32, 48, 80}, {67, 45, 33}, {5, 3, 7}, {1, 1, 1}, {130, 140, 96}, {3, 129, 19}};

void check_shapes(kernels::cuda::Device& dev) {
  uint64_t seed = 11;
  for (const Shape& s : kShapes) {
    const auto a = random_int8(static_cast<size_t>(s.M) * s.K, seed++);
    const auto b = random_int8(static_cast<size_t>(s.N) * s.K, seed++);
    check_every_version(dev, s.M, s.N, s.K, a, b);
  }
}

// The extremes: every product at its largest, +-127 * +-127 and -128 * -128 (the one a
// missing sign extension or an unsigned lane gets most wrong), summed over a long K.
void check_extremes(kernels::cuda::Device& dev) {
  const int M = 3, N = 5, K = 1040;
  struct Case {
    const char* what;
    std::function<int8_t(int, int)> a, b;  // (row, k) -> value
  };
  const Case cases[] = {
      {"all +127", [](int, int) { return int8_t{127}; }, [](int, int) { return int8_t{127}; }},
      {"all -128", [](int, int) { return int8_t{-128}; }, [](int, int) { return int8_t{-128}; }},
      {"+127 times -127", [](int, int) { return int8_t{127}; }, [](int, int) { return int8_t{-127}; }},
      {"-128 times +127", [](int, int) { return int8_t{-128}; }, [](int, int) { return int8_t{127}; }},
      {"alternating signs by row and k", [](int r, int k) { return static_cast<int8_t>((r + k) % 2 ? 127 : -127); },
       [](int r, int k) { return static_cast<int8_t>((r * 3 + k) % 3 ? -128 : 127); }},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    std::vector<int8_t> a(static_cast<size_t>(M) * K), b(static_cast<size_t>(N) * K);
    for (int r = 0; r < M; ++r) {
      for (int k = 0; k < K; ++k) a[static_cast<size_t>(r) * K + k] = c.a(r, k);
    }
    for (int r = 0; r < N; ++r) {
      for (int k = 0; k < K; ++k) b[static_cast<size_t>(r) * K + k] = c.b(r, k);
    }
    check_every_version(dev, M, N, K, a, b);
  }
}

// ---- the emulator's pieces --------------------------------------------------------------------

__global__ void dp4a_kernel(int* out, const int* a, const int* b, const int* c, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = __dp4a(a[i], b[i], c[i]);
}

// D (16,16) = A (16,16) . B (16,16) + c0 with int8 fragments, by one warp: A row-major (lda
// 16), B row-major (ldb 16, B[k][n] at k*16+n) or column-major (B[k][n] at n*16+k); D stored
// row-major.
template <class LayoutB>
__global__ void int8_mma(int* D, const int8_t* A, const int8_t* B, int c0) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, LayoutB> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc;
  wmma::fill_fragment(acc, c0);
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::mma_sync(acc, a, b, acc);
  wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
}

}  // namespace

TEST_CASE("emulator: __dp4a adds the four signed byte products to c", "[cuda][emu][int8]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  const int n = 1000;
  kernels::harness::Random rng(5);
  std::vector<int> a(n), b(n), c(n), want(n);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<int>(static_cast<uint32_t>(rng.next_u64()));
    b[i] = static_cast<int>(static_cast<uint32_t>(rng.next_u64()));
    c[i] = static_cast<int>(rng.next_u64() % 2000001) - 1000000;
  }
  a[0] = b[0] = static_cast<int>(0x80808080u);  // four lanes of -128 * -128 = 65536
  c[0] = 0;
  a[1] = static_cast<int>(0x7F80017Fu), b[1] = static_cast<int>(0x80FFFF01u);  // lanes 127,1,-128,127 and 1,-1,-1,-128
  c[1] = 7;
  for (int i = 0; i < n; ++i) {
    int sum = c[i];
    for (int l = 0; l < 4; ++l) {
      int8_t x, y;
      const uint32_t ua = static_cast<uint32_t>(a[i]) >> (8 * l), ub = static_cast<uint32_t>(b[i]) >> (8 * l);
      std::memcpy(&x, &ua, 1);  // little-endian: the low byte
      std::memcpy(&y, &ub, 1);
      sum += int{x} * int{y};
    }
    want[i] = sum;
  }
  CHECK(want[0] == 4 * 16384);
  CHECK(want[1] == 7 + 127 * 1 + 1 * -1 + -128 * -1 + 127 * -128);
  Array<int> da(dev, a), db(dev, b), dc(dev, c), out(dev, static_cast<size_t>(n), kernels::uninitialized);
  kernels::cuda::launch("dp4a", dp4a_kernel, dim3(4), dim3(256), 0, out.data(), da.data(), db.data(), dc.data(), n);
  dev.synchronize();
  CHECK(out.to_vector() == want);
}

TEST_CASE("emulator: int8 wmma fragments multiply exactly in int32, both layouts of B", "[cuda][emu][int8]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  auto a = random_int8(256, 21), b = random_int8(256, 22);
  a[0] = b[0] = -128;  // the corner product at its largest
  std::vector<int8_t> bt(256);  // B column-major: bt[n * 16 + k] = B[k][n]
  for (int k = 0; k < 16; ++k) {
    for (int j = 0; j < 16; ++j) bt[static_cast<size_t>(j * 16 + k)] = b[static_cast<size_t>(k * 16 + j)];
  }
  const int c0 = -1000003;
  std::vector<int> want(256);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      int sum = c0;
      for (int k = 0; k < 16; ++k) sum += int{a[static_cast<size_t>(i * 16 + k)]} * int{b[static_cast<size_t>(k * 16 + j)]};
      want[static_cast<size_t>(i * 16 + j)] = sum;
    }
  }
  Array<int8_t> da(dev, a), db(dev, b), dbt(dev, bt);
  Array<int> d(dev, 256, kernels::uninitialized);
  kernels::cuda::launch("int8_mma (B row-major)", int8_mma<wmma::row_major>, dim3(1), dim3(32), 0, d.data(), da.data(),
                        db.data(), c0);
  dev.synchronize();
  CHECK(d.to_vector() == want);
  d.fill_bytes(0);
  kernels::cuda::launch("int8_mma (B col-major)", int8_mma<wmma::col_major>, dim3(1), dim3(32), 0, d.data(), da.data(),
                        dbt.data(), c0);
  dev.synchronize();
  CHECK(d.to_vector() == want);
}

TEST_CASE("cuda emu: int8_gemm, every version equals the CPU v1 exactly on odd shapes", "[cuda][int8]") {
  check_shapes(kernels::cuda::emulator());
}

TEST_CASE("cuda emu: int8_gemm, every version equals the CPU v1 exactly at the extremes", "[cuda][int8]") {
  check_extremes(kernels::cuda::emulator());
}

// The bench's description (kernels/cuda/bench/int8.cpp): what `nnlab cuda bench int8_gemm`
// validates before it times, at its test sizes, aligned and one byte off (the byte loads).
TEST_CASE("cuda emu: int8_gemm's bench problem validates every version", "[cuda][int8]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  const cb::Op& op = cb::op("int8_gemm");
  const std::vector<cb::Variant> variants = op.variants(dev);
  REQUIRE(variants.size() == 3);  // no cuBLAS on the emulator
  uint64_t seed = 1;
  for (const std::string& size : op.test_sizes) {
    const auto problem = op.make(dev, size, seed++);
    for (size_t v = 0; v < variants.size(); ++v) {
      INFO("int8_gemm " << variants[v].id << " at " << problem->shape());
      const kernels::harness::Check c = problem->validate(v);
      INFO(c.report);
      CHECK(c.ok());
    }
  }
  CHECK_THROWS_AS(op.make(dev, "4x4x65537", 1), std::invalid_argument);
  CHECK_THROWS_AS(op.make(dev, "4x4", 1), std::invalid_argument);
}

TEST_CASE("cuda emu: int8_gemm refuses sizes it cannot compute exactly", "[cuda][int8]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  Array<int8_t> a(dev, 16), b(dev, 16);
  Array<int32_t> c(dev, 16);
  for (const auto& v : dev.kernels().int8_gemm) {
    INFO("int8_gemm " << v.id());
    CHECK_THROWS_AS(v.fn(c.data(), a.data(), b.data(), 0, 4, 4), kernels::cuda::Error);
    CHECK_THROWS_AS(v.fn(c.data(), a.data(), b.data(), 4, 4, 65537), kernels::cuda::Error);  // could overflow int32
    v.fn(c.data(), a.data(), b.data(), 4, 4, 1);  // a small one runs
  }
}

TEST_CASE("cuda gpu: int8_gemm, every version equals the CPU v1 exactly", "[cuda][int8][device]") {
  std::string why;
  kernels::cuda::Device* gpu = kernels::cuda::gpu(&why);
  if (!gpu) {
    std::cout << "SKIPPED: no GPU (" << why << ")\n";
    return;
  }
  check_shapes(*gpu);
  check_extremes(*gpu);
  // A big one with every tile full and K a multiple of 16 (the 16-byte loads, many k-steps).
  const int M = 512, N = 384, K = 4096;
  check_every_version(*gpu, M, N, K, random_int8(static_cast<size_t>(M) * K, 99), random_int8(static_cast<size_t>(N) * K, 98));
}
