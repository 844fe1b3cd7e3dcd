// nn/checkpoint: safetensors files round trip bit-exactly, have the layout other readers
// expect, and every kind of damage (truncation, a flipped bit, a garbage header, a wrong
// dtype, bad offsets, a different model) ends in an nn::Error naming the file.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>

#include "tests/test_util.h"
#include "nn/check.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "nn/rng.h"
#include "nn/tensor.h"

namespace fs = std::filesystem;
using namespace testing;  // TempDir, error_of, read_bytes, write_bytes (tests/test_util.h)
using Catch::Contains;

namespace {





uint32_t bits_of(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

// Little-endian float32 bytes, built from the bit pattern so the test does not depend on
// the machine's byte order.
std::vector<uint8_t> le_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out;
  for (float v : values) {
    const uint32_t u = bits_of(v);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  return out;
}

// The test's own 64-bit FNV-1a, checked against published vectors below.
uint64_t fnv1a64(const std::vector<uint8_t>& data) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint8_t b : data) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hex64(uint64_t v) {
  std::ostringstream os;
  os << std::hex;
  os.width(16);
  os.fill('0');
  os << v;
  return os.str();
}

// A safetensors file by hand: 8-byte little-endian length, the header text as given, data.
std::vector<uint8_t> raw_file(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

bool bit_equal(const nn::Tensor& t, const std::vector<float>& values) {
  if (t.numel() != static_cast<int64_t>(values.size())) return false;
  return values.empty() || std::memcmp(t.data(), values.data(), values.size() * 4) == 0;
}

// Runs a shell command; true when it exits 0.
bool run_ok(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

}  // namespace

// ---- round trip and layout -------------------------------------------------------------

TEST_CASE("checkpoint: the test's FNV-1a matches the published vectors", "[checkpoint]") {
  REQUIRE(fnv1a64({}) == 0xcbf29ce484222325ULL);
  REQUIRE(fnv1a64({'a'}) == 0xaf63dc4c8601ec8cULL);
  REQUIRE(fnv1a64({'f', 'o', 'o', 'b', 'a', 'r'}) == 0x85944171f73967e8ULL);
}

TEST_CASE("checkpoint: save then load is bit-exact and keeps the metadata", "[checkpoint]") {
  // NonFinite::Allow on both sides: the bit patterns of infinities and a NaN's payload
  // survive too (debug dumps hold them); checkpoints refuse them (tests further below).
  TempDir tmp("ckpt");
  const std::string path = tmp.file("model.safetensors");
  nn::Rng rng(5);
  std::vector<float> a(2 * 3), b = {-0.0f, std::numeric_limits<float>::denorm_min(),
                                    std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::max(), float_of(0x7FC12345u)};  // a NaN with a payload
  for (float& v : a) v = rng.normal();
  const std::vector<float> scalar = {3.25f};
  const std::map<std::string, std::string> meta = {
      {"step", "100"}, {"note", "quote \" backslash \\ newline \n tab \t \x01 \xC3\xA9 \xF0\x9F\x98\x80"}};

  nn::save_safetensors(path,
                       {{"layer.b", {6}, b.data()}, {"layer.a", {2, 3}, a.data()}, {"scalar", {}, scalar.data()},
                        {"empty", {0, 4}, nullptr}},
                       meta, nn::NonFinite::Allow);
  REQUIRE(!fs::exists(path + ".tmp"));

  nn::LoadOptions allow;
  allow.non_finite = nn::NonFinite::Allow;
  const nn::Checkpoint ck = nn::load_safetensors(path, allow);
  REQUIRE(ck.tensors.size() == 4);
  REQUIRE(ck.tensors.at("layer.a").shape() == nn::Shape{2, 3});
  REQUIRE(ck.tensors.at("layer.b").shape() == nn::Shape{6});
  REQUIRE(ck.tensors.at("scalar").shape() == nn::Shape{});
  REQUIRE(ck.tensors.at("empty").shape() == nn::Shape{0, 4});
  REQUIRE(bit_equal(ck.tensors.at("layer.a"), a));
  REQUIRE(bit_equal(ck.tensors.at("layer.b"), b));
  REQUIRE(bit_equal(ck.tensors.at("scalar"), scalar));
  REQUIRE(ck.tensors.at("empty").numel() == 0);
  REQUIRE(ck.metadata.at("step") == "100");
  REQUIRE(ck.metadata.at("note") == meta.at("note"));
  REQUIRE(ck.metadata.size() == 4);
  REQUIRE(ck.metadata.at("nnlab.checksum").size() == 16);
  REQUIRE(ck.metadata.at("nnlab.header_checksum").size() == 16);
}

TEST_CASE("checkpoint: the file is an 8-byte length, a padded JSON header, then the data", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("w.safetensors");
  const std::vector<float> w = {1.5f, -2.0f};
  const std::vector<float> c = {7.0f};
  const std::vector<float> bb = {0.25f, 0.5f, 0.75f};
  nn::save_safetensors(path, {{"w", {2}, w.data()}, {"c", {1, 1}, c.data()}, {"bb", {3}, bb.data()}}, {{"k", "v"}});

  const std::vector<uint8_t> file = read_bytes(path);
  REQUIRE(file.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[static_cast<size_t>(i)];
  REQUIRE(n % 8 == 0);
  REQUIRE(file.size() == 8 + n + 4 * 6);

  // Data: sorted by name (bb, c, w), little-endian float32. 1.5f = 0x3FC00000, -2 = 0xC0000000.
  const std::vector<uint8_t> data(file.begin() + 8 + static_cast<std::ptrdiff_t>(n), file.end());
  std::vector<float> expect_values = bb;
  expect_values.insert(expect_values.end(), c.begin(), c.end());
  expect_values.insert(expect_values.end(), w.begin(), w.end());
  REQUIRE(data == le_bytes(expect_values));
  REQUIRE(std::vector<uint8_t>(data.end() - 8, data.end()) == std::vector<uint8_t>{0, 0, 0xC0, 0x3F, 0, 0, 0, 0xC0});

  const std::string header(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  REQUIRE(header.front() == '{');
  const size_t last = header.find_last_not_of(' ');
  REQUIRE(header[last] == '}');
  REQUIRE(n - (last + 1) < 8);  // no more padding than needed
  // nnlab.header_checksum, as nn/checkpoint.h specifies it: FNV-1a over length-prefixed
  // fields: each metadata key and value but the checksums, "__tensors__", then per tensor
  // in name order its name, "F32", its dims each followed by ',', and "begin,end".
  std::vector<uint8_t> fields;
  for (const std::string f : {"k", "v", "__tensors__", "bb", "F32", "3,", "0,12", "c", "F32", "1,1,", "12,16", "w", "F32",
                              "2,", "16,24"}) {
    for (int i = 0; i < 8; ++i) fields.push_back(static_cast<uint8_t>(static_cast<uint64_t>(f.size()) >> (8 * i)));
    fields.insert(fields.end(), f.begin(), f.end());
  }
  const std::string expect = "{\"__metadata__\":{\"k\":\"v\",\"nnlab.checksum\":\"" + hex64(fnv1a64(data)) +
                             "\",\"nnlab.header_checksum\":\"" + hex64(fnv1a64(fields)) +
                             "\"},\"bb\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                             "\"c\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[12,16]},"
                             "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}";
  REQUIRE(header.substr(0, last + 1) == expect);
}

TEST_CASE("checkpoint: python3's json and struct (and numpy, if there) read our file", "[checkpoint]") {
  TempDir tmp("ckpt");
  if (!run_ok("python3 --version > \"" + tmp.file("version.txt") + "\" 2>&1")) {
    WARN("python3 not found: skipping the cross-reader check");
    return;
  }
  const std::string path = tmp.file("py.safetensors");
  const std::vector<float> a = {1.0f, -2.5f, 3.125f, 1e-3f, 6.0f, 65504.0f};
  const std::vector<float> b = {0.1f};
  nn::save_safetensors(path, {{"a", {2, 3}, a.data()}, {"b", {1}, b.data()}}, {{"epoch", "3"}});

  // Independent reader: header JSON through Python's json module, values through numpy
  // when it is installed, else struct. Prints "name|shape|repr(v0),repr(v1),..." lines.
  const std::string script = tmp.file("read.py");
  std::ofstream(script) << R"(import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header = json.loads(raw[8:8 + n].decode('utf-8'))
data = raw[8 + n:]
meta = header.pop('__metadata__')
print('meta|' + meta['epoch'])
try:
    import numpy as np
except ImportError:
    np = None
for name, info in sorted(header.items()):
    assert info['dtype'] == 'F32'
    b, e = info['data_offsets']
    if np is not None:
        values = np.frombuffer(data[b:e], dtype='<f4').reshape(info['shape']).ravel().tolist()
    else:
        values = list(struct.unpack('<%df' % ((e - b) // 4), data[b:e]))
    print(name + '|' + ','.join(str(d) for d in info['shape']) + '|' + ','.join(repr(v) for v in values))
)";
  const std::string out = tmp.file("out.txt");
  REQUIRE(run_ok("python3 \"" + script + "\" \"" + path + "\" > \"" + out + "\" 2>&1"));
  std::ifstream in(out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  INFO("python printed:\n" << [&] {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }());
  REQUIRE(lines.size() == 3);
  REQUIRE(lines[0] == "meta|3");
  // Python's repr of a float32 widened to double is exact, so parsing it back is too.
  auto values_of = [](const std::string& line, size_t skip) {
    std::vector<float> v;
    std::stringstream ss(line.substr(skip));
    for (std::string tok; std::getline(ss, tok, ',');) v.push_back(static_cast<float>(std::strtod(tok.c_str(), nullptr)));
    return v;
  };
  REQUIRE(lines[1].rfind("a|2,3|", 0) == 0);
  REQUIRE(values_of(lines[1], 6) == a);
  REQUIRE(lines[2].rfind("b|1|", 0) == 0);
  REQUIRE(values_of(lines[2], 4) == b);
}

// ---- damage ----------------------------------------------------------------------------

TEST_CASE("checkpoint: truncated files are refused", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("t.safetensors");
  const std::vector<float> w(100, 0.5f);
  nn::save_safetensors(path, {{"w", {10, 10}, w.data()}});
  const std::vector<uint8_t> good = read_bytes(path);

  SECTION("cut in the data") {
    write_bytes(path, std::vector<uint8_t>(good.begin(), good.end() - 4));
    REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }),
                 Contains(path) && Contains("past the end of the 396-byte data section") && Contains("truncated"));
  }
  SECTION("cut in the header") {
    write_bytes(path, std::vector<uint8_t>(good.begin(), good.begin() + 20));
    REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }),
                 Contains(path) && Contains("larger than the file (20 bytes)"));
  }
  SECTION("cut in the length") {
    write_bytes(path, std::vector<uint8_t>(good.begin(), good.begin() + 5));
    REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }), Contains(path) && Contains("too short"));
  }
  SECTION("empty") {
    write_bytes(path, {});
    REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }), Contains(path) && Contains("too short"));
  }
  SECTION("missing") {
    const std::string none = tmp.file("none.safetensors");
    REQUIRE_THAT(error_of([&] { nn::load_safetensors(none); }), Contains(none) && Contains("not found"));
  }
}

TEST_CASE("checkpoint: one flipped data bit fails the checksum", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("c.safetensors");
  const std::vector<float> w = {1.0f, 2.0f, 3.0f, 4.0f};
  nn::save_safetensors(path, {{"w", {4}, w.data()}});
  std::vector<uint8_t> bytes = read_bytes(path);
  bytes[bytes.size() - 6] ^= 0x10;
  write_bytes(path, bytes);
  REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }),
               Contains("checkpoint " + path + " is corrupt: checksum mismatch") &&
                   Contains("re-create it or restore a copy"));

  // A malformed checksum is a mismatch too, never ignored.
  const std::vector<uint8_t> data = le_bytes(w);
  write_bytes(path, raw_file(R"({"__metadata__":{"nnlab.checksum":"xyz"},"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data));
  REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }), Contains("checksum mismatch"));
}

TEST_CASE("checkpoint: files from other writers load (whitespace, any order, escapes, no checksum)",
          "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("other.safetensors");
  const std::vector<float> x = {1.0f, 2.0f}, y = {-1.0f};
  std::vector<uint8_t> data = le_bytes(y);
  const std::vector<uint8_t> xb = le_bytes(x);
  data.insert(data.end(), xb.begin(), xb.end());
  const std::string header =
      "{\n  \"x\": {\"shape\": [2], \"data_offsets\": [4, 12], \"dtype\": \"F32\"},\n"
      "  \"y\\u0041\": {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\n"
      "  \"__metadata__\": {\"format\": \"pt\", \"s\": \"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\/ \\n\"}\n}   ";
  write_bytes(path, raw_file(header, data));
  const nn::Checkpoint ck = nn::load_safetensors(path);
  REQUIRE(bit_equal(ck.tensors.at("x"), x));
  REQUIRE(bit_equal(ck.tensors.at("yA"), y));
  REQUIRE(ck.metadata.at("format") == "pt");
  REQUIRE(ck.metadata.at("s") == "caf\xC3\xA9 \xF0\x9F\x98\x80 \"q\" / \n");
  REQUIRE(ck.metadata.count("nnlab.checksum") == 0);
}

TEST_CASE("checkpoint: garbage and malformed JSON headers are refused", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("bad.safetensors");
  const std::vector<uint8_t> data = le_bytes({1.0f, 2.0f});
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  auto error_with_header = [&](const std::string& header) {
    write_bytes(path, raw_file(header, data));
    return error_of([&] { nn::load_safetensors(path); });
  };

  // Each header, and a phrase its error must contain.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json at all", "does not start with '{'"},
      {"[1,2]", "does not start with '{'"},
      {"{", "unexpected end"},
      {"{\"w\":", "unexpected end, expected a value"},
      {"{" + ok_entry + ",}", "expected a string key"},
      {"{" + ok_entry + "} x", "unexpected text after the JSON value"},
      {"{" + ok_entry + "," + ok_entry + "}", "duplicate key \"w\""},
      {"{\"w\" {}}", "expected ':'"},
      {R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", "not an integer"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,1e3]}})", "not an integer"},
      {R"({"w":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}})", "leading zero"},
      {R"({"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}})", "too large for 64 bits"},
      {R"({"w":{"dtype":true,"shape":[2],"data_offsets":[0,8]}})", "unexpected 't'"},
      {R"({"w":{"dtype":"F3\q","shape":[2],"data_offsets":[0,8]}})", "unknown escape"},
      {R"({"w\u12":{}})", "non-hex digit"},
      {R"({"w\ud800":{}})", "high surrogate without its low surrogate"},
      {R"({"w\udc00":{}})", "lone \\u low surrogate"},
      {"{\"w\x01\":{}}", "raw control character"},
      {"{\"w\xC3\x28\":{}}", "not UTF-8"},
      {"{\"w\xED\xA0\x80\":{}}", "not UTF-8"},  // an encoded surrogate
      {std::string(200, '[') + std::string(200, ']'), "does not start with '{'"},
      {"{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", "nesting deeper than 64"},
      {"{\"w\":[1,2]}", "tensor 'w' is an array"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", "lacks one of dtype, shape, data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", "unknown field \"extra\""},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "non-negative integer"},
      {R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", "shape is an integer"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", "two non-negative integers"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", "two non-negative integers"},
      {R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", "more elements than"},
      {R"({"__metadata__":{"k":1},)" + ok_entry + "}", "__metadata__ entry 'k' is an integer"},
      {R"({"__metadata__":"x",)" + ok_entry + "}", "__metadata__ is a string"},
      {"{}", "the data section is 8 bytes but the tensors cover 0"},
      {" ", "does not start with '{'"},
  };
  for (const auto& [header, phrase] : cases) {
    INFO("header: " << header.substr(0, 120));
    REQUIRE_THAT(error_with_header(header), Contains(path) && Contains(phrase));
  }
}

TEST_CASE("checkpoint: header lengths beyond the file or the 100 MB limit", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("len.safetensors");
  std::vector<uint8_t> bytes = raw_file("{}", {});
  bytes[0] = 0xE8;  // 1000
  bytes[1] = 0x03;
  write_bytes(path, bytes);
  REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }),
               Contains(path) && Contains("declares a 1000-byte header, larger than the file (10 bytes)"));
  bytes[7] = 0x80;  // 2^63 + 1000
  write_bytes(path, bytes);
  REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }), Contains(path) && Contains("100 MB"));
  write_bytes(path, raw_file("", {1, 2, 3}));
  REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }), Contains(path) && Contains("empty header"));
}

TEST_CASE("checkpoint: a dtype other than F32 is named in the error", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("f16.safetensors");
  // an nnlab checkpoint is F32 only: F16 and BF16 too are refused by name (a file someone
  // else changed; the bad-input campaign's checkpoint-structure/dtype-F16 case)
  for (const std::string dtype : {"F16", "BF16", "I64", "F64", "I8", "F8_E4M3"}) {
    write_bytes(path, raw_file("{\"w\":{\"dtype\":\"" + dtype + "\",\"shape\":[2],\"data_offsets\":[0,4]}}", {0, 0, 0, 0}));
    REQUIRE_THAT(error_of([&] { nn::load_safetensors(path); }),
                 Contains(path) && Contains("tensor 'w' has dtype " + dtype) && Contains("only F32"));
  }
  // with half_precision (Hugging Face weights, gpt/hf.h) F16 and BF16 load, converted to float
  // (tests/test_hf.cpp checks the values); their size is 2 bytes an element, so 2 elements in
  // 8 bytes is refused as an F32 one in 4 would be; the other dtypes stay refused
  nn::LoadOptions half;
  half.half_precision = true;
  for (const std::string dtype : {"F16", "BF16"}) {
    write_bytes(path, raw_file("{\"w\":{\"dtype\":\"" + dtype + "\",\"shape\":[2],\"data_offsets\":[0,4]}}", {0, 0, 0, 0}));
    const nn::SafetensorsFile f = nn::read_safetensors(path, half);
    REQUIRE(f.tensors.at("w").dtype == dtype);
    REQUIRE(f.tensors.at("w").data == std::vector<float>{0.0f, 0.0f});
    write_bytes(path, raw_file("{\"w\":{\"dtype\":\"" + dtype + "\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                               std::vector<uint8_t>(8, 0)));
    REQUIRE_THAT(error_of([&] { nn::read_safetensors(path, half); }),
                 Contains(path) && Contains("= 4 bytes of " + dtype) && Contains("span 8 bytes"));
  }
  write_bytes(path, raw_file("{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,4]}}", {0, 0, 0, 0}));
  REQUIRE_THAT(error_of([&] { nn::read_safetensors(path, half); }), Contains("has dtype F64") && Contains("only F32"));
}

TEST_CASE("checkpoint: offsets must tile the data section exactly", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("off.safetensors");
  auto error_with = [&](const std::string& header, size_t data_bytes) {
    write_bytes(path, raw_file(header, std::vector<uint8_t>(data_bytes, 0)));
    return error_of([&] { nn::load_safetensors(path); });
  };
  REQUIRE_THAT(error_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          12),
               Contains(path) && Contains("tensors 'a' [0, 8] and 'b' [4, 12] overlap"));
  REQUIRE_THAT(error_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                          8),
               Contains("overlap"));
  REQUIRE_THAT(error_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
               Contains(path) && Contains("[0, 8] past the end of the 4-byte data section"));
  REQUIRE_THAT(error_with(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
               Contains(path) && Contains("shape (3) = 12 bytes of F32, but its data_offsets [0, 8] span 8 bytes"));
  REQUIRE_THAT(error_with(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
               Contains("end before they begin"));
  REQUIRE_THAT(error_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
               Contains("a gap of 4 bytes before tensor 'a'"));
  REQUIRE_THAT(error_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 9),
               Contains("the data section is 9 bytes but the tensors cover 4"));
}

TEST_CASE("checkpoint: random damage never crashes, it loads or throws nn::Error", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("fuzz.safetensors");
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  nn::save_safetensors(path, {{"a", {2, 3}, a.data()}, {"b", {2}, b.data()}}, {{"k", "v"}});
  const std::vector<uint8_t> good = read_bytes(path);
  nn::Rng rng(2024);
  int loaded = 0, refused = 0;
  // (Each iteration writes and reads a file: kept to a few hundred, as file I/O dominates.)
  const int iterations = 400;
  for (int it = 0; it < iterations; ++it) {
    std::vector<uint8_t> bytes = good;
    const uint32_t flips = 1 + rng.below(3);
    for (uint32_t f = 0; f < flips; ++f) {
      bytes[rng.below(static_cast<uint32_t>(bytes.size()))] = static_cast<uint8_t>(rng.next_u32());
    }
    if (rng.below(4) == 0) bytes.resize(rng.below(static_cast<uint32_t>(bytes.size())));
    write_bytes(path, bytes);
    try {
      const nn::Checkpoint ck = nn::load_safetensors(path);
      ++loaded;
    } catch (const nn::Error&) {
      ++refused;
    }
  }
  CAPTURE(loaded, refused);
  REQUIRE(loaded + refused == iterations);
  REQUIRE(refused > iterations * 8 / 10);  // only flips that keep the JSON's meaning (a name, a value) load

  // Pure garbage with a plausible length prefix.
  for (int it = 0; it < 100; ++it) {
    std::vector<uint8_t> bytes(8 + rng.below(300));
    for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng.next_u32());
    const uint64_t n = rng.below(static_cast<uint32_t>(bytes.size()));
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
    write_bytes(path, bytes);
    REQUIRE_THROWS_AS(nn::load_safetensors(path), nn::Error);
  }
}

TEST_CASE("checkpoint: save refuses bad tensor lists", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("s.safetensors");
  const std::vector<float> v = {1, 2};
  REQUIRE_THAT(error_of([&] { nn::save_safetensors(path, {{"w", {2}, v.data()}, {"w", {2}, v.data()}}); }),
               Contains(path) && Contains("two tensors are named 'w'"));
  REQUIRE_THAT(error_of([&] { nn::save_safetensors(path, {{"", {2}, v.data()}}); }), Contains("empty name"));
  REQUIRE_THAT(error_of([&] { nn::save_safetensors(path, {{"__metadata__", {2}, v.data()}}); }),
               Contains("reserved"));
  REQUIRE_THAT(error_of([&] { nn::save_safetensors(path, {{"w", {2}, nullptr}}); }), Contains("no data pointer"));
  REQUIRE(!fs::exists(path));
  REQUIRE(!fs::exists(path + ".tmp"));
}

// ---- params ----------------------------------------------------------------------------

TEST_CASE("checkpoint: save_params / load_params, and a different model is named", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = tmp.file("model.safetensors");
  nn::Rng rng(11);
  std::vector<float> w1(4 * 3), b1(4), w2(2 * 4);
  for (float& v : w1) v = rng.normal();
  for (float& v : b1) v = rng.normal();
  for (float& v : w2) v = rng.normal();
  const std::vector<nn::Param> saved = {
      {"fc1.weight", {4, 3}, w1.data(), nullptr}, {"fc1.bias", {4}, b1.data(), nullptr},
      {"fc2.weight", {2, 4}, w2.data(), nullptr}};
  nn::save_params(path, saved, {{"epoch", "5"}});

  std::vector<float> lw1(12, 0.0f), lb1(4, 0.0f), lw2(8, 0.0f);
  const std::vector<nn::Param> model = {
      {"fc2.weight", {2, 4}, lw2.data(), nullptr}, {"fc1.weight", {4, 3}, lw1.data(), nullptr},
      {"fc1.bias", {4}, lb1.data(), nullptr}};
  const auto meta = nn::load_params(path, model);
  REQUIRE(meta.at("epoch") == "5");
  REQUIRE(lw1 == w1);
  REQUIRE(lb1 == b1);
  REQUIRE(lw2 == w2);

  const std::string different = "checkpoint is from a different model: " + path;
  std::vector<float> untouched(12, -9.0f), extra(3, -9.0f);
  SECTION("a param the file does not have") {
    const std::vector<nn::Param> bigger = {model[0], model[1], model[2], {"fc3.weight", {3}, extra.data(), nullptr}};
    REQUIRE_THAT(error_of([&] { nn::load_params(path, bigger); }),
                 Contains(different + " has no tensor 'fc3.weight' (the model's (3))"));
  }
  SECTION("a tensor the model does not have") {
    const std::vector<nn::Param> smaller = {{"fc1.weight", {4, 3}, untouched.data(), nullptr},
                                            {"fc1.bias", {4}, lb1.data(), nullptr}};
    REQUIRE_THAT(error_of([&] { nn::load_params(path, smaller); }),
                 Contains(different + " holds tensor 'fc2.weight' (2, 4) that the model does not have"));
    REQUIRE(untouched == std::vector<float>(12, -9.0f));  // nothing was copied
  }
  SECTION("a shape mismatch") {
    const std::vector<nn::Param> other = {{"fc1.weight", {3, 4}, untouched.data(), nullptr}, model[0], model[2]};
    REQUIRE_THAT(error_of([&] { nn::load_params(path, other); }),
                 Contains(different + " has tensor 'fc1.weight' of shape (4, 3), the model's is (3, 4)"));
    REQUIRE(untouched == std::vector<float>(12, -9.0f));
  }
}

// ---- atomic saving ---------------------------------------------------------------------

TEST_CASE("checkpoint: saving is atomic: no .tmp left, a failed save keeps the old file", "[checkpoint]") {
  TempDir tmp("ckpt");
  const std::string path = (tmp.path / "runs" / "a" / "ck.safetensors").string();  // parents are created
  const std::vector<float> v1 = {1, 2, 3}, v2 = {4, 5, 6};
  nn::save_safetensors(path, {{"w", {3}, v1.data()}});
  REQUIRE(!fs::exists(path + ".tmp"));
  nn::save_safetensors(path, {{"w", {3}, v2.data()}});  // over an existing file
  REQUIRE(!fs::exists(path + ".tmp"));
  REQUIRE(bit_equal(nn::load_safetensors(path).tensors.at("w"), v2));

  SECTION("the temporary file cannot be written") {
    fs::create_directory(path + ".tmp");  // a directory where the .tmp file would go
    REQUIRE_THAT(error_of([&] { nn::save_safetensors(path, {{"w", {3}, v1.data()}}); }),
                 Contains(path + ".tmp") && Contains("cannot open"));
    REQUIRE(bit_equal(nn::load_safetensors(path).tensors.at("w"), v2));  // the old checkpoint, intact
  }
  SECTION("the parent is a regular file") {
    const std::string blocked = (tmp.path / "runs" / "a" / "ck.safetensors" / "inner.safetensors").string();
    REQUIRE_THAT(error_of([&] { nn::save_safetensors(blocked, {{"w", {3}, v1.data()}}); }),
                 Contains(blocked) && Contains("cannot create directory"));
    REQUIRE(bit_equal(nn::load_safetensors(path).tensors.at("w"), v2));
    REQUIRE(!fs::exists(blocked + ".tmp"));
  }
  SECTION("the target is a directory: refused before anything is written") {
    const std::string dir_target = (tmp.path / "runs" / "a").string();
    REQUIRE_THAT(error_of([&] { nn::save_safetensors(dir_target, {{"w", {3}, v1.data()}}); }),
                 Contains(dir_target) && Contains("not a regular file"));
    REQUIRE(!fs::exists(dir_target + ".tmp"));
    REQUIRE(bit_equal(nn::load_safetensors(path).tensors.at("w"), v2));
  }
  SECTION("the target is a pipe (as /dev/full is a device): never replaced by a file") {
    const std::string fifo = (tmp.path / "runs" / "a" / "pipe").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    REQUIRE_THAT(error_of([&] { nn::save_safetensors(fifo, {{"w", {3}, v1.data()}}); }),
                 Contains(fifo) && Contains("not a regular file"));
    REQUIRE(fs::is_fifo(fifo));
    REQUIRE(!fs::exists(fifo + ".tmp"));
  }
  // Only the checkpoint itself is left (plus, in the first section, the blocking directory).
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(tmp.path)) files += e.is_regular_file() ? 1 : 0;
  REQUIRE(files == 1);
}

// ---- finite values, the header checksum, size caps, write errors, orphans ---------------

namespace {

// `bytes` with the first occurrence of `from` replaced by `to` (same length), so the file
// stays well-formed and only the checksums can tell.
std::vector<uint8_t> replaced(std::vector<uint8_t> bytes, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  const std::string text(bytes.begin(), bytes.end());
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  std::copy(to.begin(), to.end(), bytes.begin() + static_cast<long>(at));
  return bytes;
}

}  // namespace

TEST_CASE("checkpoint: NaN or infinity is never written, the old file stays, and reading one names the tensor",
          "[checkpoint]") {
  TempDir tmp("ckpt-nan");
  const std::string path = tmp.file("ck.safetensors");
  const std::vector<float> good = {1, 2, 3, 4};
  nn::save_safetensors(path, {{"a", {4}, good.data()}, {"w", {4}, good.data()}}, {{"step", "1"}});
  const auto before = read_bytes(path);
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    std::vector<float> poisoned = good;
    poisoned[2] = bad;
    poisoned[3] = bad;
    const std::string err = error_of([&] {
      nn::save_safetensors(path, {{"a", {4}, good.data()}, {"w", {4}, poisoned.data()}}, {{"step", "2"}});
    });
    INFO(err);
    CHECK_THAT(err, Contains("refusing to write checkpoint " + path) && Contains("tensor 'w'") &&
                        Contains("at index 2") && Contains("2 of its 4 values are not finite") &&
                        Contains("left as it was"));
    CHECK(read_bytes(path) == before);  // byte for byte the previous checkpoint
    CHECK_FALSE(fs::exists(path + ".tmp"));
  }
  // A debug dump may hold one (NonFinite::Allow); reading it as a checkpoint is refused,
  // naming the file and the tensor, unless the reader allows it too.
  std::vector<float> poisoned = good;
  poisoned[1] = std::nanf("");
  const std::string dump = tmp.file("dump.safetensors");
  nn::save_safetensors(dump, {{"adam.v.wte", {4}, poisoned.data()}}, {}, nn::NonFinite::Allow);
  CHECK_THAT(error_of([&] { nn::load_safetensors(dump); }),
             Contains("checkpoint " + dump) && Contains("tensor 'adam.v.wte' holds nan at index 1"));
  nn::LoadOptions allow;
  allow.non_finite = nn::NonFinite::Allow;
  CHECK(std::isnan(nn::load_safetensors(dump, allow).tensors.at("adam.v.wte").data()[1]));
  // load_params (lessons 02, 04, 05) reads through the same check
  std::vector<float> w(4, 0.0f);
  std::vector<nn::Param> params = {{"adam.v.wte", {4}, w.data(), nullptr}};
  CHECK_THAT(error_of([&] { nn::load_params(dump, params); }), Contains("holds nan"));
  CHECK(w == std::vector<float>(4, 0.0f));
}

TEST_CASE("checkpoint: the header checksum catches an edited metadata value, tensor name or shape", "[checkpoint]") {
  TempDir tmp("ckpt-header");
  const std::string path = tmp.file("ck.safetensors");
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  nn::save_safetensors(path, {{"wte", {2, 3}, v.data()}}, {{"vocab_hex", "0a2061"}, {"step", "250"}});
  const auto bytes = read_bytes(path);
  REQUIRE(nn::load_safetensors(path).metadata.at("vocab_hex") == "0a2061");
  const std::string text(bytes.begin(), bytes.end());
  REQUIRE(text.find("nnlab.header_checksum") != std::string::npos);

  // Each edit keeps the JSON valid and the data untouched: only the header checksum can tell.
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"0a2061", "0a2062"},            // one digit of a vocabulary
      {"\"250\"", "\"-25\""},          // a step count
      {"\"wte\"", "\"wpe\""},          // a tensor's name
      {"\"shape\":[2,3]", "\"shape\":[3,2]"},  // a shape with the same element count
  };
  for (const auto& [from, to] : edits) {
    INFO(from << " -> " << to);
    const std::string edited = tmp.file("edited.safetensors");
    write_bytes(edited, replaced(bytes, from, to));
    CHECK_THAT(error_of([&] { nn::load_safetensors(edited); }),
               Contains("checkpoint " + edited + " is corrupt") && Contains("nnlab.header_checksum"));
  }
  // A damaged key name must not switch the check off.
  const std::string renamed = tmp.file("renamed.safetensors");
  write_bytes(renamed, replaced(bytes, "nnlab.header_checksum", "nnlab.header_checksun"));
  CHECK_THAT(error_of([&] { nn::load_safetensors(renamed); }), Contains("unknown metadata key 'nnlab.header_checksun'"));
  // nnlab.* keys are the writer's own
  CHECK_THAT(error_of([&] { nn::save_safetensors(tmp.file("x.safetensors"), {{"w", {1}, v.data()}}, {{"nnlab.checksum", "0"}}); }),
             Contains("'nnlab.checksum' is reserved"));
}

TEST_CASE("checkpoint: a file larger than the reader's cap is refused before it is read", "[checkpoint]") {
  TempDir tmp("ckpt-cap");
  const std::string path = tmp.file("ck.safetensors");
  const std::vector<float> v(1000, 0.5f);
  nn::save_safetensors(path, {{"w", {1000}, v.data()}});
  nn::LoadOptions small;
  small.max_bytes = 1000;
  CHECK_THAT(error_of([&] { nn::load_safetensors(path, small); }),
             Contains("checkpoint " + path) && Contains("more than the 1000 this reader accepts"));
  CHECK(nn::load_safetensors(path).tensors.at("w").numel() == 1000);
  CHECK(nn::kMaxCheckpointBytes == 8ULL << 30);
}

TEST_CASE("checkpoint: a write that fails midway (a full disk) removes the .tmp and keeps the old file",
          "[checkpoint]") {
  TempDir tmp("ckpt-full");
  const std::string path = tmp.file("ck.safetensors");
  const std::vector<float> small(16, 1.0f), big(1 << 16, 2.0f);  // 64 B and 256 KiB of data
  nn::save_safetensors(path, {{"w", {16}, small.data()}});
  const auto before = read_bytes(path);
  // RLIMIT_FSIZE makes write() fail with EFBIG past 64 KiB, as a full disk fails with ENOSPC
  // (SIGXFSZ, which would kill the process, is ignored for the duration).
  struct rlimit old_limit {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 64 * 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &limit) == 0);
  const std::string err = error_of([&] { nn::save_safetensors(path, {{"w", {1 << 16}, big.data()}}); });
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  INFO(err);
  CHECK_THAT(err, Contains("writing checkpoint " + path + ".tmp failed") && Contains("left as it was"));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK(read_bytes(path) == before);
}

TEST_CASE("checkpoint: remove_unfinished_writes removes the .tmp files of our naming only", "[checkpoint]") {
  TempDir tmp("ckpt-orphans");
  for (const char* name : {"best.safetensors.tmp", "last.safetensors.tmp", "notes.txt.tmp", "best.safetensors"}) {
    std::ofstream(tmp.file(name)) << "x";
  }
  fs::create_directory(tmp.file("dir.safetensors.tmp"));  // not a file: left alone
  const std::vector<std::string> removed = nn::remove_unfinished_writes(tmp.path.string());
  CHECK(removed == std::vector<std::string>{tmp.file("best.safetensors.tmp"), tmp.file("last.safetensors.tmp")});
  CHECK_FALSE(fs::exists(tmp.file("best.safetensors.tmp")));
  CHECK(fs::exists(tmp.file("notes.txt.tmp")));
  CHECK(fs::exists(tmp.file("best.safetensors")));
  CHECK(fs::is_directory(tmp.file("dir.safetensors.tmp")));
  CHECK(nn::remove_unfinished_writes(tmp.file("missing")).empty());
}

TEST_CASE("checkpoint: a header of millions of tiny values is refused, not parsed into gigabytes", "[checkpoint]") {
  TempDir tmp("ckpt-values");
  // 3 M zeros in one shape: 6 MB of header, well under the 100 MB limit, ~300 MB parsed
  std::string header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[";
  for (int i = 0; i < 3'000'000; ++i) header += i ? ",0" : "0";
  header += "],\"data_offsets\":[0,0]}}";
  const std::string path = tmp.file("values.safetensors");
  write_bytes(path, raw_file(header, {}));
  CHECK_THAT(error_of([&] { nn::load_safetensors(path); }), Contains(path) && Contains("more than 2000000 values"));
}
