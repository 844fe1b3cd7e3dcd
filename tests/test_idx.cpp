// io/idx: IDX files read back exactly, gzip (when the build has zlib), and every kind of
// bad file ends in an nn::Error that names the file and says what is wrong.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "nn/check.h"
#include "io/idx.h"
#include "nn/rng.h"

namespace fs = std::filesystem;
using namespace testing;  // TempDir, error_of, read_bytes, write_bytes (tests/test_util.h)
using Catch::Contains;

namespace {





std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  nn::Rng rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng.next_u32() >> 24);
  return v;
}

// An IDX image built by hand: magic, big-endian dims, then `data` as given (which may
// deliberately disagree with the dims).
std::vector<uint8_t> idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    b.push_back(static_cast<uint8_t>(d >> 24));
    b.push_back(static_cast<uint8_t>(d >> 16));
    b.push_back(static_cast<uint8_t>(d >> 8));
    b.push_back(static_cast<uint8_t>(d));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), bit by bit: what gzip's trailer holds.
uint32_t crc32_ieee(const std::vector<uint8_t>& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put_le32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A gzip member (RFC 1952) holding `data` in "stored" deflate blocks (RFC 1951 3.2.4): no
// compression, so the test needs no zlib, yet any gzip reader must accept it.
std::vector<uint8_t> gzip_stored(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF};  // magic, deflate, no flags, mtime 0, OS unknown
  size_t pos = 0;
  do {
    const size_t len = std::min<size_t>(65535, data.size() - pos);
    const bool last = pos + len == data.size();
    out.push_back(last ? 1 : 0);  // BFINAL bit, BTYPE = 00 (stored), then padding to the byte
    out.push_back(static_cast<uint8_t>(len));
    out.push_back(static_cast<uint8_t>(len >> 8));
    out.push_back(static_cast<uint8_t>(~len));  // NLEN = one's complement of LEN
    out.push_back(static_cast<uint8_t>(~len >> 8));
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(pos),
               data.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  } while (pos < data.size());
  put_le32(out, crc32_ieee(data));
  put_le32(out, static_cast<uint32_t>(data.size()));
  return out;
}

}  // namespace

// ---- good files ------------------------------------------------------------------------

TEST_CASE("IDX: write_idx writes big-endian dims and read_idx reads them back", "[idx]") {
  TempDir tmp("idx");
  const std::string path = tmp.file("images-idx3-ubyte");
  const std::vector<uint8_t> data = random_bytes(3 * 5 * 7, 1);
  nn::write_idx(path, {3, 5, 7}, data);

  const std::vector<uint8_t> file = read_bytes(path);
  REQUIRE(file.size() == 4 + 3 * 4 + 105);
  const std::vector<uint8_t> header(file.begin(), file.begin() + 16);
  REQUIRE(header == std::vector<uint8_t>{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 7});

  const nn::IdxArray arr = nn::read_idx(path);
  REQUIRE(arr.dims == std::vector<int64_t>{3, 5, 7});
  REQUIRE(arr.data == data);
}

TEST_CASE("IDX: 1-D and 4-D files and sizes above 255 round trip", "[idx]") {
  TempDir tmp("idx");
  const std::string labels = tmp.file("labels-idx1-ubyte");
  const std::vector<uint8_t> lab = random_bytes(70001, 2);  // 70001 = 0x00011171: three non-zero bytes
  nn::write_idx(labels, {70001}, lab);
  const nn::IdxArray a = nn::read_idx(labels);
  REQUIRE(a.dims == std::vector<int64_t>{70001});
  REQUIRE(a.data == lab);

  const std::string four = tmp.file("four-idx4-ubyte");
  const std::vector<uint8_t> d4 = random_bytes(2 * 3 * 4 * 5, 3);
  nn::write_idx(four, {2, 3, 4, 5}, d4);
  const nn::IdxArray b = nn::read_idx(four);
  REQUIRE(b.dims == std::vector<int64_t>{2, 3, 4, 5});
  REQUIRE(b.data == d4);
}

TEST_CASE("IDX: parse_idx reads an in-memory image and names its source in errors", "[idx]") {
  const nn::IdxArray arr = nn::parse_idx(idx_bytes(8, {2, 3}, {1, 2, 3, 4, 5, 250}), "memory");
  REQUIRE(arr.dims == std::vector<int64_t>{2, 3});
  REQUIRE(arr.data == std::vector<uint8_t>{1, 2, 3, 4, 5, 250});
  REQUIRE_THAT(error_of([] { nn::parse_idx(idx_bytes(8, {2, 3}, {1, 2}), "<my buffer>"); }),
               Contains("<my buffer>") && Contains("truncated: header promises 6 bytes of data, file has 2"));
}

TEST_CASE("IDX: write_idx refuses dims that disagree with the data", "[idx]") {
  TempDir tmp("idx");
  const std::string path = tmp.file("x");
  REQUIRE_THAT(error_of([&] { nn::write_idx(path, {2, 3}, {1, 2, 3}); }),
               Contains(path) && Contains("promise 6 bytes but 3 were given"));
  REQUIRE_THAT(error_of([&] { nn::write_idx(path, {}, {}); }), Contains("1 to 4 dimensions"));
  REQUIRE_THAT(error_of([&] { nn::write_idx(path, {1, 1, 1, 1, 1}, {7}); }), Contains("1 to 4 dimensions"));
  REQUIRE_THAT(error_of([&] { nn::write_idx(path, {0}, {}); }), Contains("[1, 2^32)"));
}

// ---- gzip ------------------------------------------------------------------------------

TEST_CASE("IDX: the test's gzip writer is right (CRC-32 check value)", "[idx]") {
  const std::string s = "123456789";
  REQUIRE(crc32_ieee(std::vector<uint8_t>(s.begin(), s.end())) == 0xCBF43926u);  // the standard check value
}

TEST_CASE("IDX: .gz files are decompressed, also multi-block and multi-member", "[idx]") {
  TempDir tmp("idx");
  // 3 x 181 x 187 = 101541 bytes: two stored blocks, not a multiple of anything.
  const std::vector<uint8_t> data = random_bytes(3 * 181 * 187, 4);
  const std::vector<uint8_t> plain = idx_bytes(8, {3, 181, 187}, data);
  const std::string gz = tmp.file("train-images-idx3-ubyte.gz");
  write_bytes(gz, gzip_stored(plain));

  // Two gzip members back to back (what `cat a.gz b.gz` makes) decompress to a + b.
  const std::string multi = tmp.file("multi-idx3-ubyte.gz");
  const std::vector<uint8_t> first(plain.begin(), plain.begin() + 1000);
  const std::vector<uint8_t> second(plain.begin() + 1000, plain.end());
  std::vector<uint8_t> both = gzip_stored(first);
  const std::vector<uint8_t> tail = gzip_stored(second);
  both.insert(both.end(), tail.begin(), tail.end());
  write_bytes(multi, both);

  if (!nn::idx_gzip_supported()) {
    WARN("this build has no zlib: checking only that .gz files are refused with a hint");
    REQUIRE_THAT(error_of([&] { nn::read_idx(gz); }), Contains(gz) && Contains("no zlib") && Contains("gunzip"));
    return;
  }
  const nn::IdxArray arr = nn::read_idx(gz);
  REQUIRE(arr.dims == std::vector<int64_t>{3, 181, 187});
  REQUIRE(arr.data == data);

  const nn::IdxArray arr2 = nn::read_idx(multi);
  REQUIRE(arr2.dims == std::vector<int64_t>{3, 181, 187});
  REQUIRE(arr2.data == data);
}

TEST_CASE("IDX: corrupt, truncated and fake .gz files are refused", "[idx]") {
  if (!nn::idx_gzip_supported()) {
    WARN("this build has no zlib: skipping the corrupt-gzip tests");
    return;
  }
  TempDir tmp("idx");
  const std::vector<uint8_t> plain = idx_bytes(8, {4, 100}, random_bytes(400, 5));
  const std::vector<uint8_t> good = gzip_stored(plain);

  SECTION("CRC-32 in the trailer does not match the data") {
    std::vector<uint8_t> bad = good;
    bad[bad.size() - 8] ^= 0x01;
    const std::string path = tmp.file("crc.gz");
    write_bytes(path, bad);
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }), Contains(path) && Contains("corrupt gzip stream"));
  }
  SECTION("a data byte flipped (the CRC catches it)") {
    std::vector<uint8_t> bad = good;
    bad[200] ^= 0x40;
    const std::string path = tmp.file("flip.gz");
    write_bytes(path, bad);
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }), Contains(path) && Contains("corrupt gzip stream"));
  }
  SECTION("a stored block whose length and its complement disagree") {
    std::vector<uint8_t> bad = good;
    bad[13] ^= 0xFF;  // NLEN's low byte
    const std::string path = tmp.file("nlen.gz");
    write_bytes(path, bad);
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }), Contains(path) && Contains("corrupt gzip stream"));
  }
  SECTION("cut in the middle") {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + 150);
    const std::string path = tmp.file("cut.gz");
    write_bytes(path, cut);
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }), Contains(path) && Contains("truncated"));
  }
  SECTION("trailing garbage after the stream") {
    std::vector<uint8_t> bad = good;
    bad.push_back(0x42);
    bad.push_back(0x43);
    const std::string path = tmp.file("trail.gz");
    write_bytes(path, bad);
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }), Contains(path) && Contains("2 trailing bytes"));
  }
  SECTION("named .gz but not gzip") {
    const std::string path = tmp.file("plain.gz");
    write_bytes(path, plain);
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }), Contains(path) && Contains("not gzip-compressed"));
  }
  SECTION("a valid gzip around a truncated IDX image") {
    const std::vector<uint8_t> short_idx(plain.begin(), plain.end() - 10);
    const std::string path = tmp.file("short-idx.gz");
    write_bytes(path, gzip_stored(short_idx));
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }),
                 Contains(path) && Contains("truncated: header promises 400 bytes of data, file has 390"));
  }
}

// ---- the data cap (io/data_limit.h) ---------------------------------------------------

// A small .gz can decompress to a lot: before the cap was checked from the header, a 1 MB
// file of 1 GiB of zero pixels was inflated whole (1 GiB), copied (another), then turned into
// floats (4 GiB). Now the header is read from the first chunk inflated, and a promise above
// the cap stops the reader there; a promise within it bounds the rest.
TEST_CASE("IDX: a header promising more than the cap is refused from its header, saying how to raise it", "[idx]") {
  TempDir tmp("idx");
  const ScopedEnv cap("NNLAB_MAX_DATA_MB", std::string("1"));
  // 3 MiB of data promised; only the first 200 KiB present, then the stream just stops:
  // a reader that inflated everything before looking would report "truncated".
  const std::vector<uint8_t> head = idx_bytes(8, {3, 1024, 1024}, random_bytes(200 * 1024, 7));
  std::vector<uint8_t> gz = gzip_stored(head);
  gz.resize(gz.size() - 100);
  const std::string packed = tmp.file("big-idx3-ubyte.gz");
  write_bytes(packed, gz);
  const std::string plain = tmp.file("big-idx3-ubyte");
  write_bytes(plain, head);
  for (const std::string& path : {plain, packed}) {
    if (path == packed && !nn::idx_gzip_supported()) continue;
    const std::string error = error_of([&] { nn::read_idx(path); });
    REQUIRE_THAT(error, Contains(path) && Contains("3 x 1024 x 1024 = 3 MiB") && Contains("more than a loader accepts") &&
                            Contains("at most 1 MiB per file") && Contains("NNLAB_MAX_DATA_MB=4"));
    REQUIRE(error.find("idx.cpp:") == error.rfind("idx.cpp:"));  // one location, not the message wrapped twice
  }

  // The same data, complete: refused under a cap of 1 MiB, read under a cap of 4 MiB.
  const std::vector<uint8_t> data = random_bytes(3 * 1024 * 1024, 8);
  const std::string full = tmp.file("full-idx3-ubyte");
  write_bytes(full, idx_bytes(8, {3, 1024, 1024}, data));
  REQUIRE_THAT(error_of([&] { nn::read_idx(full); }), Contains("more than a loader accepts"));
  const ScopedEnv raised("NNLAB_MAX_DATA_MB", std::string("4"));
  REQUIRE(nn::read_idx(full).data == data);
}

TEST_CASE("IDX: a .gz holding more than its header promises stops inflating soon after the promise", "[idx]") {
  if (!nn::idx_gzip_supported()) {
    WARN("this build has no zlib: skipping");
    return;
  }
  TempDir tmp("idx");
  // The header promises 10 bytes; the stream holds 2 MiB after them.
  std::vector<uint8_t> b = idx_bytes(8, {10}, random_bytes(10 + 2 * 1024 * 1024, 9));
  const std::string path = tmp.file("liar-idx1-ubyte.gz");
  write_bytes(path, gzip_stored(b));
  REQUIRE_THAT(error_of([&] { nn::read_idx(path); }),
               Contains(path) && Contains("more than the 10 bytes of data its header promises") &&
                   Contains("trailing bytes"));
}

TEST_CASE("IDX: NNLAB_MAX_DATA_MB must be a whole number of MiB", "[idx]") {
  TempDir tmp("idx");
  const std::string path = tmp.file("labels-idx1-ubyte");
  write_bytes(path, idx_bytes(8, {4}, {1, 2, 3, 4}));
  for (const char* bad : {"abc", "0", "-5", "1.5", "nan", "9999999999"}) {
    const ScopedEnv cap("NNLAB_MAX_DATA_MB", std::string(bad));
    INFO(bad);
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }), Contains("NNLAB_MAX_DATA_MB"));
  }
  const ScopedEnv unset("NNLAB_MAX_DATA_MB", std::nullopt);
  REQUIRE(nn::read_idx(path).data == std::vector<uint8_t>{1, 2, 3, 4});
}

// ---- bad files -------------------------------------------------------------------------

TEST_CASE("IDX: every malformed file is an nn::Error naming the file and the problem", "[idx]") {
  TempDir tmp("idx");
  // Writes `bytes` to a file called `name` and returns the message read_idx throws.
  auto error_reading = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = tmp.file(name);
    write_bytes(path, bytes);
    return error_of([&] { nn::read_idx(path); });
  };
  const std::vector<uint8_t> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

  SECTION("missing") {
    const std::string path = tmp.file("no-such-file-idx1-ubyte");
    REQUIRE_THAT(error_of([&] { nn::read_idx(path); }), Contains(path) && Contains("not found") &&
                                                            Contains("fetch_data.py"));
  }
  SECTION("a directory") {
    REQUIRE_THAT(error_of([&] { nn::read_idx(tmp.path.string()); }),
                 Contains(tmp.path.string()) && Contains("is a directory"));
  }
  SECTION("empty or shorter than the magic") {
    REQUIRE_THAT(error_reading("empty", {}), Contains(tmp.file("empty")) && Contains("too short: 0 bytes"));
    REQUIRE_THAT(error_reading("three", {0, 0, 8}), Contains(tmp.file("three")) && Contains("too short: 3 bytes"));
  }
  SECTION("bad magic") {
    std::vector<uint8_t> b = idx_bytes(8, {10}, ten);
    b[1] = 0x07;
    REQUIRE_THAT(error_reading("magic", b), Contains(tmp.file("magic")) &&
                                                Contains("the first two bytes must be zero, got 0x00 0x07"));
  }
  SECTION("gzip data under a plain name") {
    REQUIRE_THAT(error_reading("zipped", gzip_stored(idx_bytes(8, {10}, ten))),
                 Contains(tmp.file("zipped")) && Contains("looks gzip-compressed"));
  }
  SECTION("wrong element type, named") {
    REQUIRE_THAT(error_reading("f32", idx_bytes(0x0D, {10}, ten)),
                 Contains(tmp.file("f32")) && Contains("element type 0x0D (float32)") && Contains("0x08"));
    REQUIRE_THAT(error_reading("i32", idx_bytes(0x0C, {10}, ten)), Contains("0x0C (int32)"));
    REQUIRE_THAT(error_reading("junk", idx_bytes(0x42, {10}, ten)), Contains("0x42 (not an IDX type)"));
  }
  SECTION("zero dimensions") {
    REQUIRE_THAT(error_reading("nodims", idx_bytes(8, {}, ten)),
                 Contains(tmp.file("nodims")) && Contains("has 0 dimensions") && Contains("expected 1 to 4"));
  }
  SECTION("too many dimensions") {
    REQUIRE_THAT(error_reading("fivedims", idx_bytes(8, {1, 1, 1, 1, 10}, ten)),
                 Contains(tmp.file("fivedims")) && Contains("has 5 dimensions"));
  }
  SECTION("a size of zero") {
    REQUIRE_THAT(error_reading("zerosize", idx_bytes(8, {10, 0}, {})),
                 Contains(tmp.file("zerosize")) && Contains("dimension 1 of 2 is zero"));
  }
  SECTION("header cut inside the sizes") {
    std::vector<uint8_t> b = idx_bytes(8, {2, 5}, {});
    b.resize(10);
    REQUIRE_THAT(error_reading("cuthead", b),
                 Contains(tmp.file("cuthead")) && Contains("truncated header") && Contains("file has 10"));
  }
  SECTION("sizes that multiply past the cap, or past 64 bits") {
    REQUIRE_THAT(error_reading("huge", idx_bytes(8, {65536, 65536, 2}, ten)),
                 Contains(tmp.file("huge")) && Contains("65536 x 65536 x 2 = 8192 MiB") &&
                     Contains("more than a loader accepts") && Contains("NNLAB_MAX_DATA_MB=8193"));
    REQUIRE_THAT(error_reading("overflow", idx_bytes(8, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, ten)),
                 Contains(tmp.file("overflow")) && Contains("more than a loader accepts") &&
                     Contains("the most it takes"));
  }
  SECTION("truncated data") {
    REQUIRE_THAT(error_reading("trunc", idx_bytes(8, {2, 5}, {1, 2, 3, 4, 5, 6, 7})),
                 Contains(tmp.file("trunc")) && Contains("truncated: header promises 10 bytes of data, file has 7"));
  }
  SECTION("trailing bytes") {
    std::vector<uint8_t> data = ten;
    data.insert(data.end(), {11, 12, 13});
    REQUIRE_THAT(error_reading("trail", idx_bytes(8, {2, 5}, data)),
                 Contains(tmp.file("trail")) && Contains("3 trailing bytes after the 10 bytes"));
  }
}

TEST_CASE("IDX: random damage never crashes, it reads or throws nn::Error", "[idx]") {
  // Mutate a valid image: flip bytes, cut it, extend it. Every outcome must be either a
  // consistent array (data size = product of dims) or an nn::Error.
  const std::vector<uint8_t> good = idx_bytes(8, {3, 4, 5}, random_bytes(60, 6));
  nn::Rng rng(99);
  int parsed = 0, refused = 0, inconsistent = 0;
  for (int it = 0; it < 5000; ++it) {
    std::vector<uint8_t> b = good;
    const uint32_t flips = 1 + rng.below(4);
    for (uint32_t f = 0; f < flips; ++f) {
      b[rng.below(static_cast<uint32_t>(b.size()))] = static_cast<uint8_t>(rng.next_u32());
    }
    if (rng.below(3) == 0) b.resize(rng.below(static_cast<uint32_t>(b.size()) + 8));
    try {
      const nn::IdxArray a = nn::parse_idx(b, "fuzz");
      int64_t n = 1;
      for (int64_t d : a.dims) n *= d;
      if (a.dims.empty() || static_cast<int64_t>(a.data.size()) != n) ++inconsistent;
      ++parsed;
    } catch (const nn::Error&) {
      ++refused;
    }
  }
  REQUIRE(inconsistent == 0);
  REQUIRE(refused > 1000);  // most damage must be caught
  REQUIRE(parsed + refused == 5000);

  if (nn::idx_gzip_supported()) {
    // The same through the gzip path, on files.
    TempDir tmp("idx");
    const std::vector<uint8_t> gz = gzip_stored(good);
    const std::string path = tmp.file("fuzz.gz");
    int gz_refused = 0;
    for (int it = 0; it < 150; ++it) {
      std::vector<uint8_t> b = gz;
      b[rng.below(static_cast<uint32_t>(b.size()))] ^= static_cast<uint8_t>(1 + rng.below(255));
      if (rng.below(4) == 0) b.resize(rng.below(static_cast<uint32_t>(b.size())));
      write_bytes(path, b);
      try {
        const nn::IdxArray a = nn::read_idx(path);
        REQUIRE(a.data.size() == 60);
      } catch (const nn::Error&) {
        ++gz_refused;
      }
    }
    // A changed byte in the header's mtime/OS fields is harmless; nearly everything else is caught.
    CAPTURE(gz_refused);
    REQUIRE(gz_refused > 120);
  }
}
