// kernels/memory.h: the one owning buffer (kernels::Array in a kernels::Memory), in host
// memory and in a device's (the CUDA emulator: a kernels::cuda::Device is a Memory), and
// what is built on it: nn::Tensor's storage and kernels::PackedWeights.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "kernels/cuda/device.h"
#include "kernels/decode.h"
#include "kernels/memory.h"
#include "nn/tensor.h"

using Catch::Matchers::Contains;

namespace {

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// The same checks in any memory: what every Array promises whichever Memory holds it.
void check_array_in(kernels::Memory& mem) {
  kernels::Array<float> a(mem, 10);
  REQUIRE(a.size() == 10);
  CHECK(a.bytes() == 40);
  CHECK(&a.memory() == &mem);
  CHECK(a.to_vector() == std::vector<float>(10, 0.0f));  // zero-filled
  const std::vector<float> three = {1.0f, 2.0f, 3.0f};
  a.upload(three.data(), 3, 4);  // elements 4, 5, 6
  std::vector<float> back(3);
  a.download(back.data(), 3, 4);
  CHECK(back == three);
  CHECK(a.to_vector() == std::vector<float>{0, 0, 0, 0, 1, 2, 3, 0, 0, 0});
  // past the end: refused, nothing written
  CHECK_THROWS_AS(a.upload(three.data(), 3, 8), std::out_of_range);
  CHECK_THROWS_WITH(a.download(back.data(), 11),
                    Contains("elements [0, 11) of an array of 10") && Contains(mem.where()));
  // a copy is deep, in the same memory
  kernels::Array<float> b = a;
  CHECK(&b.memory() == &mem);
  CHECK(b.data() != a.data());
  CHECK(b == a);
  b.zero();
  CHECK(b.to_vector() == std::vector<float>(10, 0.0f));
  CHECK(a.to_vector()[5] == 2.0f);
  // a move keeps the allocation
  const float* p = a.data();
  kernels::Array<float> c = std::move(a);
  CHECK(c.data() == p);
  CHECK(a.empty());
  // 0xFF bytes are a NaN in every float
  c.fill_bytes(0xFF);
  for (float v : c.to_vector()) CHECK(std::isnan(v));
  c.reset();
  CHECK(c.empty());
  CHECK(c.data() == nullptr);
}

}  // namespace

TEST_CASE("kernels::Array in host memory: zeroed, offsets, range checks, deep copies, 64-byte aligned",
          "[memory][kernels]") {
  kernels::Memory& host = kernels::host_memory();
  CHECK(host.is_host());
  CHECK(host.where() == "host memory");
  check_array_in(host);
  for (size_t n : {1u, 3u, 17u, 1000u}) {
    const kernels::Array<float> a(host, n);
    CHECK(aligned64(a.data()));
  }
  // the default array is an empty one in host memory
  const kernels::Array<int> empty;
  CHECK(empty.empty());
  CHECK(&empty.memory() == &host);
  CHECK(empty.to_vector().empty());
}

TEST_CASE("kernels::host_memory refuses more than the machine has, naming the request", "[memory][kernels]") {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) {
    WARN("this system does not report its memory size: not tested");
    return;
  }
  const auto too_much = static_cast<size_t>(pages) * static_cast<size_t>(page) * 64;
  CHECK_THROWS_AS(kernels::host_memory().allocate(too_much), kernels::OutOfMemory);
  CHECK_THROWS_WITH(kernels::Array<float>(kernels::host_memory(), too_much / sizeof(float)),
                    Contains("MiB of host memory, more than this machine's"));
}

TEST_CASE("a CUDA device is a kernels::Memory: the same Array on the emulator", "[memory][cuda][emu]") {
  kernels::cuda::Device& dev = kernels::cuda::emulator();
  kernels::Memory& mem = dev;
  CHECK_FALSE(mem.is_host());
  CHECK_THAT(mem.where(), Contains(dev.info().name));
  check_array_in(mem);
  // uninitialized keeps what the device gives: the emulator's NaN bytes
  const kernels::Array<float> fresh(dev, 4, kernels::uninitialized);
  for (float v : fresh.to_vector()) CHECK(std::isnan(v));
  // between memories: through the host
  const std::vector<float> host = {1.5f, -2.0f, 3.25f};
  const kernels::Array<float> on_dev(dev, host);
  CHECK(on_dev.to_vector() == host);
  // out of device memory: the device's Error, naming the request
  CHECK_THROWS_WITH(kernels::Array<float>(dev, size_t{1} << 58),
                    Contains("out of device memory") && Contains("asked for"));
}

TEST_CASE("kernels::PackedWeights: packed on the host, moved into a device and back unchanged",
          "[memory][decode][emu]") {
  const int rows = 3, cols = 64;
  std::vector<float> w(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i));
  for (kernels::WeightFormat f : {kernels::WeightFormat::f32, kernels::WeightFormat::int8, kernels::WeightFormat::int4,
                                  kernels::WeightFormat::sparse24, kernels::WeightFormat::w8a8}) {
    INFO(kernels::format_name(f));
    const kernels::PackedWeights p = kernels::pack_weights(w.data(), rows, cols, f);
    CHECK(&p.memory() == &kernels::host_memory());
    CHECK(p.bytes() == kernels::format_bytes(f, rows, cols));
    const kernels::PackedWeights d = p.to(kernels::cuda::emulator());
    CHECK(&d.memory() == static_cast<kernels::Memory*>(&kernels::cuda::emulator()));
    CHECK(d.bytes() == p.bytes());
    CHECK(d.view().data == d.data.data());
    CHECK((d.view().scales == nullptr) == p.scales.empty());
    CHECK((d.view().index == nullptr) == p.index.empty());
    const kernels::PackedWeights back = d.to(kernels::host_memory());
    CHECK(back.data == p.data);
    CHECK(back.scales == p.scales);
    CHECK(back.index == p.index);
    std::vector<float> a(w.size()), b(w.size());
    kernels::unpack_weights(p.view(), a.data());
    kernels::unpack_weights(back.view(), b.data());
    CHECK(a == b);
  }
}

TEST_CASE("nn::Tensor owns its floats in a host kernels::Array: copies, aligned, checked sizes",
          "[memory][tensor][nn]") {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  nn::Tensor t({2, 3}, v);
  v[0] = 100.0f;  // the tensor holds a copy
  CHECK(t[0] == 1.0f);
  CHECK(t.at(1, 2) == 6.0f);
  CHECK(aligned64(t.data()));
  nn::Tensor u = t;  // deep
  u[0] = -1.0f;
  CHECK(t[0] == 1.0f);
  const nn::Tensor filled({4, 5}, 0.5f);
  for (float x : filled.span()) CHECK(x == 0.5f);
  CHECK_THROWS_WITH(nn::Tensor({2, 2}, v), Contains("a tensor of shape (2, 2) needs 4 floats, got 6"));
  CHECK(nn::numel_of({2, 3, 4}) == 24);
  CHECK_THROWS_WITH(nn::numel_of({2, -1}), Contains("non-negative, got (2, -1)"));
}
