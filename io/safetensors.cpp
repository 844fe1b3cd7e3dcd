// io/safetensors.cpp: the safetensors format (see io/safetensors.h), written atomically and
// read with every check. nn/checkpoint.cpp builds nn::Tensor checkpoints and save_params /
// load_params on top of it.
//
// Sections, in the order the bytes flow:
//   bytes       little-endian helpers and the FNV-1a checksum
//   writing     header JSON, padding, data section, write, fsync, rename, fsync the directory
//   JSON        a small, defensive parser for the header (the file can be garbage)
//   reading     header length, schema, offsets, both checksums, finite values, tensors
#include "io/safetensors.h"
#include "io/file_io.h"
#include "io/shape.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "nn/check.h"

namespace nn {

namespace fs = std::filesystem;

namespace {

// ---- bytes -----------------------------------------------------------------------------

// A header longer than this is refused before it is read: real headers are a few KB
// (the reference implementation uses the same 100 MB limit).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kChecksumKey = "nnlab.checksum";
constexpr const char* kHeaderChecksumKey = "nnlab.header_checksum";

// The float bytes in the file are little-endian. On a little-endian machine (x86, ARM as
// usually run) that is just memcpy; a big-endian machine swaps every 4 bytes.
void floats_to_le(const float* src, int64_t n, uint8_t* dst) {
  std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  if constexpr (std::endian::native == std::endian::big) {
    for (int64_t i = 0; i < n; ++i) {
      std::swap(dst[4 * i], dst[4 * i + 3]);
      std::swap(dst[4 * i + 1], dst[4 * i + 2]);
    }
  }
}

void le_to_floats(const uint8_t* src, int64_t n, float* dst) {
  std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  if constexpr (std::endian::native == std::endian::big) {
    auto* b = reinterpret_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) {
      std::swap(b[4 * i], b[4 * i + 3]);
      std::swap(b[4 * i + 1], b[4 * i + 2]);
    }
  }
}

// Bytes per element of the dtypes read_safetensors accepts.
uint64_t dtype_bytes(const std::string& dtype) { return dtype == "F32" ? 4 : 2; }

// IEEE half (1 sign, 5 exponent, 10 mantissa bits) to float, exactly: every half is a float.
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits = 0;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf or NaN (the payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);  // normal: rebias the exponent
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // subnormal half (mant * 2^-24): normalise it, a float has the range to hold it exactly
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// bfloat16 is a float's top 16 bits: the conversion is a shift.
float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// n little-endian 2-byte values of `dtype` (F16 or BF16) to floats.
void le16_to_floats(const uint8_t* src, int64_t n, const std::string& dtype, float* dst) {
  const bool bf16 = dtype == "BF16";
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
    dst[i] = bf16 ? bf16_to_float(v) : half_to_float(v);
  }
}

// 64-bit FNV-1a (Fowler, Noll, Vo): h = (h XOR byte) * prime, byte by byte. Not
// cryptographic; it catches flipped bits and truncation, which is all we ask of it.
constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
uint64_t fnv1a64(const uint8_t* data, size_t n, uint64_t h = kFnvOffsetBasis) {
  for (size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ULL;  // FNV prime
  }
  return h;
}

// FNV-1a over a sequence of fields, each preceded by its length (8 bytes, little-endian)
// so that ("ab", "c") and ("a", "bc") hash differently.
class FieldHash {
 public:
  void add(const std::string& field) {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(field.size()) >> (8 * i));
    h_ = fnv1a64(len, 8, h_);
    h_ = fnv1a64(reinterpret_cast<const uint8_t*>(field.data()), field.size(), h_);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = kFnvOffsetBasis;
};

// The first index of a non-finite value in `data`, and how many there are (0: none).
struct NonFiniteCount {
  int64_t first = -1;
  int64_t count = 0;
  float value = 0.0f;
};
NonFiniteCount count_non_finite(const float* data, int64_t n) {
  NonFiniteCount c;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(data[i])) {
      if (c.count == 0) {
        c.first = i;
        c.value = data[i];
      }
      ++c.count;
    }
  }
  return c;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// ---- writing ---------------------------------------------------------------------------

// JSON string literal: quotes, backslashes and control characters escaped; other bytes
// (UTF-8 included) pass through.
void json_string(std::ostringstream& os, const std::string& s) {
  os << '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') {
      os << "\\\"";
    } else if (c == '\\') {
      os << "\\\\";
    } else if (c == '\n') {
      os << "\\n";
    } else if (c == '\t') {
      os << "\\t";
    } else if (c == '\r') {
      os << "\\r";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      os << buf;
    } else {
      os << ch;
    }
  }
  os << '"';
}

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
}

// ---- JSON ------------------------------------------------------------------------------
//
// The subset safetensors headers use: objects, arrays, strings (all escapes, \uXXXX with
// surrogate pairs), integers. Floats, true/false/null are refused: no valid header has
// them. Every read is bounds-checked; nesting is limited so "[[[[..." cannot overflow
// the stack; duplicate keys are refused (which one would win is ambiguous).

struct Json {
  enum class Kind { Object, Array, String, Integer };
  Kind kind = Kind::Integer;
  int64_t integer = 0;
  std::string str;
  std::vector<std::string> keys;  // Object: keys[i] -> values[i], in file order
  std::vector<Json> values;       // Object values, or Array items
};

const char* kind_name(Json::Kind k) {
  switch (k) {
    case Json::Kind::Object: return "an object";
    case Json::Kind::Array: return "an array";
    case Json::Kind::String: return "a string";
    case Json::Kind::Integer: return "an integer";
  }
  return "?";
}

class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  Json parse_document() {
    skip_space();
    Json v = parse_value(0);
    skip_space();
    if (pos_ != s_.size()) {
      fail_at("unexpected text after the JSON value");
    }
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;
  // Each parsed value costs ~100 bytes, so a 100 MB header of "[0,0,0,..." would cost 5 GB:
  // a budget of values bounds that. A real header needs ~10 values a tensor (a GPT of 1024
  // layers with AdamW state: 0.5 M).
  static constexpr int64_t kMaxValues = 2'000'000;
  int64_t values_ = 0;

  [[noreturn]] void fail_at(const std::string& what) const {
    std::ostringstream os;
    os << "checkpoint " << path_ << " has a malformed JSON header: " << what << " at byte " << pos_
       << " of the header: the file is corrupt or not a safetensors file; re-create it or restore a copy";
    ::nn::fail(__FILE__, __LINE__, os.str());
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_space() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  void expect(char c, const char* context) {
    if (at_end()) {
      fail_at(std::string("unexpected end, expected '") + c + "' " + context);
    }
    if (s_[pos_] != c) {
      fail_at(std::string("expected '") + c + "' " + context + ", found '" + printable(s_[pos_]) + "'");
    }
    ++pos_;
  }

  static std::string printable(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      return std::string(1, c);
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(u));
    return buf;
  }

  Json parse_value(int depth) {
    if (depth > kMaxDepth) {
      fail_at("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    if (++values_ > kMaxValues) {
      fail_at("more than " + std::to_string(kMaxValues) + " values (no checkpoint header needs that many; reading "
              "them would take gigabytes)");
    }
    skip_space();
    if (at_end()) {
      fail_at("unexpected end, expected a value");
    }
    const char c = s_[pos_];
    if (c == '{') {
      return parse_object(depth);
    }
    if (c == '[') {
      return parse_array(depth);
    }
    if (c == '"') {
      Json v;
      v.kind = Json::Kind::String;
      v.str = parse_string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      return parse_integer();
    }
    fail_at("unexpected '" + printable(c) + "' (expected an object, array, string or integer)");
  }

  Json parse_object(int depth) {
    Json v;
    v.kind = Json::Kind::Object;
    std::set<std::string> seen;  // a set, so a huge header cannot make this quadratic
    expect('{', "to open an object");
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return v;
    }
    while (true) {
      skip_space();
      if (at_end()) {
        fail_at("unexpected end, expected a string key in an object");
      }
      if (peek() != '"') {
        fail_at("expected a string key in an object");
      }
      std::string key = parse_string();
      if (!seen.insert(key).second) {
        fail_at("duplicate key \"" + key + "\"");
      }
      skip_space();
      expect(':', "after an object key");
      v.values.push_back(parse_value(depth + 1));
      v.keys.push_back(std::move(key));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}', "or ',' in an object");
      return v;
    }
  }

  Json parse_array(int depth) {
    Json v;
    v.kind = Json::Kind::Array;
    expect('[', "to open an array");
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return v;
    }
    while (true) {
      v.values.push_back(parse_value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']', "or ',' in an array");
      return v;
    }
  }

  // -?(0|[1-9][0-9]*), fitting an int64; a fraction or exponent is refused.
  Json parse_integer() {
    const bool negative = peek() == '-';
    if (negative) {
      ++pos_;
    }
    if (at_end() || s_[pos_] < '0' || s_[pos_] > '9') {
      fail_at("expected a digit");
    }
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') {
      fail_at("a number with a leading zero");
    }
    uint64_t magnitude = 0;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const auto digit = static_cast<uint64_t>(s_[pos_] - '0');
      if (magnitude > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
        fail_at("an integer too large for 64 bits");
      }
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (!at_end() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) {
      fail_at("a number that is not an integer (shapes and offsets are integers)");
    }
    Json v;
    v.kind = Json::Kind::Integer;
    v.integer = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    return v;
  }

  unsigned parse_hex4() {
    if (s_.size() - pos_ < 4) {
      fail_at("a \\u escape with fewer than 4 hex digits");
    }
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      unsigned digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<unsigned>(c - 'A' + 10);
      } else {
        fail_at("a \\u escape with a non-hex digit");
      }
      v = v * 16 + digit;
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    expect('"', "to open a string");
    std::string out;
    while (true) {
      if (at_end()) {
        fail_at("unexpected end inside a string");
      }
      const char c = s_[pos_++];
      if (c == '"') {
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        --pos_;
        fail_at("a raw control character inside a string (it must be escaped)");
      }
      if (c != '\\') {
        out += c;  // UTF-8 validity of the whole header was checked before parsing
        continue;
      }
      if (at_end()) {
        fail_at("unexpected end after '\\' in a string");
      }
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // A high surrogate must be followed by \u and a low surrogate: together they
            // encode one code point above U+FFFF.
            if (s_.size() - pos_ < 2 || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') {
              fail_at("a \\u high surrogate without its low surrogate");
            }
            pos_ += 2;
            const unsigned low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) {
              fail_at("a \\u high surrogate followed by a non-low-surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail_at("a lone \\u low surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          fail_at("an unknown escape '\\" + printable(e) + "' in a string");
      }
    }
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

// Returns the offset of the first byte that is not valid UTF-8, or npos. JSON text must
// be UTF-8, and a header that is not is corrupt.
size_t first_invalid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    unsigned cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return i;
    }
    if (s.size() - i < len) {
      return i;
    }
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) {
        return i;
      }
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Overlong forms, surrogates and code points above U+10FFFF are not UTF-8.
    const unsigned min_cp = len == 2 ? 0x80u : len == 3 ? 0x800u : 0x10000u;
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return std::string::npos;
}

// ---- reading ---------------------------------------------------------------------------

struct Entry {
  std::string name;
  std::string dtype = "F32";  // F32, F16 or BF16 (what the bytes are; converted to float on load)
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// "nnlab.header_checksum": every metadata entry except the two checksums, then every
// tensor's name, shape and offsets, in name order (the order the writer lays them out).
std::string header_digest(const std::map<std::string, std::string>& metadata, std::vector<Entry> entries) {
  FieldHash h;
  for (const auto& [key, value] : metadata) {
    if (key == kChecksumKey || key == kHeaderChecksumKey) continue;
    h.add(key);
    h.add(value);
  }
  h.add("__tensors__");
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  for (const Entry& e : entries) {
    h.add(e.name);
    h.add(e.dtype);  // "F32" for every file nnlab writes
    std::string dims;
    for (int64_t d : e.shape) dims += std::to_string(d) + ",";
    h.add(dims);
    h.add(std::to_string(e.begin) + "," + std::to_string(e.end));
  }
  return hex64(h.value());
}

const Json* member(const Json& obj, const std::string& key) {
  for (size_t i = 0; i < obj.keys.size(); ++i) {
    if (obj.keys[i] == key) {
      return &obj.values[i];
    }
  }
  return nullptr;
}

std::string offsets_str(const Entry& e) {
  std::ostringstream os;
  os << "[" << e.begin << ", " << e.end << "]";
  return os.str();
}

// One tensor's header entry: {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}.
Entry parse_entry(const std::string& path, const std::string& name, const Json& v, bool half_precision) {
  const std::string where = "checkpoint " + path + ": tensor '" + name + "'";
  const std::string hint = ": the file is corrupt or was not written by a safetensors writer";
  NN_CHECK(v.kind == Json::Kind::Object,
           where << " is " << kind_name(v.kind) << " in the header, expected an object" << hint);
  for (const std::string& k : v.keys) {
    NN_CHECK(k == "dtype" || k == "shape" || k == "data_offsets",
             where << " has an unknown field \"" << k << "\" (expected dtype, shape, data_offsets)" << hint);
  }
  const Json* dtype = member(v, "dtype");
  const Json* shape = member(v, "shape");
  const Json* offsets = member(v, "data_offsets");
  NN_CHECK(dtype != nullptr && shape != nullptr && offsets != nullptr,
           where << " lacks one of dtype, shape, data_offsets" << hint);
  NN_CHECK(dtype->kind == Json::Kind::String, where << ": dtype is " << kind_name(dtype->kind)
                                                    << ", expected a string" << hint);
  const bool half = dtype->str == "F16" || dtype->str == "BF16";
  NN_CHECK(dtype->str == "F32" || (half && half_precision),
           where << " has dtype " << dtype->str
                 << (half_precision
                         ? "; nnlab reads only F32 (float32), F16 and BF16 tensors (converted to float32 on load): "
                           "convert the checkpoint to float32 first (in PyTorch: t.float())"
                         : "; an nnlab checkpoint holds only F32 (float32) tensors (F16 and BF16 are read from "
                           "Hugging Face model directories: gpt/hf.h): convert it to float32 first (in PyTorch: "
                           "t.float())"));

  Entry e;
  e.name = name;
  e.dtype = dtype->str;
  const uint64_t elem = dtype_bytes(e.dtype);
  NN_CHECK(shape->kind == Json::Kind::Array, where << ": shape is " << kind_name(shape->kind)
                                                   << ", expected an array of integers" << hint);
  // numel, checked so that numel * 4 cannot overflow
  uint64_t numel = 1;
  for (const Json& d : shape->values) {
    NN_CHECK(d.kind == Json::Kind::Integer && d.integer >= 0,
             where << ": shape holds something other than a non-negative integer" << hint);
    const auto du = static_cast<uint64_t>(d.integer);
    NN_CHECK(du == 0 || numel <= (std::numeric_limits<uint64_t>::max() / 4) / du,
             where << ": shape has more elements than any file can hold" << hint);
    numel *= du;
    e.shape.push_back(d.integer);
  }
  NN_CHECK(offsets->kind == Json::Kind::Array && offsets->values.size() == 2 &&
               offsets->values[0].kind == Json::Kind::Integer && offsets->values[1].kind == Json::Kind::Integer &&
               offsets->values[0].integer >= 0 && offsets->values[1].integer >= 0,
           where << ": data_offsets must be two non-negative integers [begin, end]" << hint);
  e.begin = static_cast<uint64_t>(offsets->values[0].integer);
  e.end = static_cast<uint64_t>(offsets->values[1].integer);
  NN_CHECK(e.begin <= e.end, where << ": data_offsets " << offsets_str(e) << " end before they begin" << hint);
  NN_CHECK(e.end - e.begin == numel * elem,
           where << " has shape " << shape_str(e.shape) << " = " << numel * elem << " bytes of " << e.dtype
                 << ", but its "
                 << "data_offsets " << offsets_str(e) << " span " << (e.end - e.begin) << " bytes" << hint);
  return e;
}

std::vector<uint8_t> read_whole_file(const std::string& path, uint64_t max_bytes) {
  return read_file(path, "checkpoint", "check the path, or train first to create it", max_bytes);
}

// Writes all of `bytes` to `fd`; false (errno set) on an error such as a full disk.
bool write_all(int fd, const uint8_t* bytes, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, bytes, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// fsync of a directory: makes a rename inside it survive a power cut (the rename changes
// the directory, not the file). Some file systems refuse to open a directory this way;
// that is not an error of ours, so only a failing fsync is reported.
bool sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return true;
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL;  // EINVAL: this file system cannot sync directories
  ::close(fd);
  return ok;
}

}  // namespace

// ---- writing ---------------------------------------------------------------------------

void save_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                      const std::map<std::string, std::string>& metadata, NonFinite non_finite) {
  // Sort by name: the header lists tensors in name order, and the data follows that order.
  std::vector<const TensorRef*> sorted;
  for (const TensorRef& t : tensors) {
    NN_CHECK(!t.name.empty(), "save_safetensors " << path << ": a tensor has an empty name");
    NN_CHECK(t.name != "__metadata__", "save_safetensors " << path
                                                           << ": '__metadata__' is reserved, not a tensor name");
    const int64_t n = numel_of(t.shape);
    NN_CHECK(n == 0 || t.data != nullptr, "save_safetensors " << path << ": tensor '" << t.name
                                                              << "' has no data pointer");
    // Checked before anything is opened: a checkpoint with a NaN is worse than none (it
    // would replace the last good one and be resumed from), so the old file stays.
    if (non_finite == NonFinite::Refuse && n > 0) {
      const NonFiniteCount bad = count_non_finite(t.data, n);
      NN_CHECK(bad.count == 0, "refusing to write checkpoint " << path << ": tensor '" << t.name << "' holds "
                                                               << bad.value << " at index " << bad.first << " ("
                                                               << bad.count << " of its " << n
                                                               << " values are not finite); a checkpoint holds "
                                                                  "finite numbers only, so "
                                                               << path << " was left as it was");
    }
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(), [](const TensorRef* a, const TensorRef* b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    NN_CHECK(sorted[i - 1]->name != sorted[i]->name,
             "save_safetensors " << path << ": two tensors are named '" << sorted[i]->name
                                 << "': names are the keys, they must be unique");
  }

  // The data section: every tensor's float32 bytes, little-endian, back to back.
  std::vector<uint8_t> data;
  std::vector<std::pair<uint64_t, uint64_t>> offsets;
  for (const TensorRef* t : sorted) {
    const int64_t n = numel_of(t->shape);
    const uint64_t begin = data.size();
    data.resize(data.size() + static_cast<size_t>(n) * 4);
    if (n > 0) {
      floats_to_le(t->data, n, data.data() + begin);
    }
    offsets.emplace_back(begin, data.size());
  }

  for (const auto& [key, value] : metadata) {
    NN_CHECK(key.rfind("nnlab.", 0) != 0, "save_safetensors " << path << ": metadata key '" << key
                                                              << "' is reserved (nnlab.* keys are the file's checksums)");
  }
  std::map<std::string, std::string> meta = metadata;
  std::vector<Entry> table;
  for (size_t i = 0; i < sorted.size(); ++i) {
    table.push_back({sorted[i]->name, "F32", sorted[i]->shape, offsets[i].first, offsets[i].second});
  }
  meta[kChecksumKey] = hex64(fnv1a64(data.data(), data.size()));
  meta[kHeaderChecksumKey] = header_digest(meta, table);

  // {"__metadata__":{...},"name":{"dtype":"F32","shape":[..],"data_offsets":[b,e]},...}
  std::ostringstream js;
  js << "{\"__metadata__\":{";
  bool first = true;
  for (const auto& [key, value] : meta) {
    js << (first ? "" : ",");
    json_string(js, key);
    js << ':';
    json_string(js, value);
    first = false;
  }
  js << '}';
  for (size_t i = 0; i < sorted.size(); ++i) {
    js << ',';
    json_string(js, sorted[i]->name);
    js << ":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t d = 0; d < sorted[i]->shape.size(); ++d) {
      js << (d ? "," : "") << sorted[i]->shape[d];
    }
    js << "],\"data_offsets\":[" << offsets[i].first << ',' << offsets[i].second << "]}";
  }
  js << '}';
  std::string header = js.str();
  // Pad with spaces to a multiple of 8 so the data section starts 8-byte aligned (as
  // the reference implementation does; JSON ignores trailing whitespace).
  header.append((8 - header.size() % 8) % 8, ' ');

  uint8_t len_le[8];
  for (int i = 0; i < 8; ++i) {
    len_le[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));  // little-endian
  }

  // Write <path>.tmp completely, fsync it, rename it over <path>, fsync the directory. A
  // crash, a full disk or a power cut at any point leaves either the old checkpoint or the
  // new one, never a mix: the rename is the commit point, and the two fsyncs make sure
  // the bytes are on the disk before it and the rename itself after it.
  const fs::path target(path);
  const fs::path tmp(path + ".tmp");
  std::error_code ec;
  // The rename would replace whatever is at `path`: a device such as /dev/full or a pipe
  // must not be swapped for a regular file (as root it could be), so only files (or links
  // to files) are replaced.
  const fs::file_status status = fs::status(target, ec);
  NN_CHECK(!fs::exists(status) || fs::is_regular_file(status),
           "cannot write checkpoint " << path << ": it exists and is not a regular file (a directory, a device "
                                      << "or a pipe): choose another path");
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    NN_CHECK(!ec, "cannot create directory " << target.parent_path().string() << " for checkpoint " << path
                                             << ": " << ec.message() << ": choose another path");
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  NN_CHECK(fd >= 0, "cannot open " << tmp.string() << " for writing (checkpoint " << path
                                   << "): " << std::strerror(errno) << ": check the directory exists and is writable");
  const bool written = write_all(fd, len_le, 8) &&
                       write_all(fd, reinterpret_cast<const uint8_t*>(header.data()), header.size()) &&
                       write_all(fd, data.data(), data.size()) && ::fsync(fd) == 0;
  const int write_errno = errno;
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) {
    remove_quietly(tmp);
    NN_CHECK(false, "writing checkpoint " << tmp.string() << " failed: "
                                          << std::strerror(written ? errno : write_errno)
                                          << " (is the disk full?); " << path << " was left as it was");
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    remove_quietly(tmp);
    NN_CHECK(false, "cannot rename " << tmp.string() << " to " << path << ": " << ec.message()
                                     << ": is " << path << " a directory? choose another path");
  }
  NN_CHECK(sync_directory(target.parent_path()),
           "checkpoint " << path << " was written, but syncing its directory failed: " << std::strerror(errno)
                         << ": the file may not survive a power cut; check the disk");
}

std::vector<std::string> remove_unfinished_writes(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  const std::string suffix = ".safetensors.tmp";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (!entry.is_regular_file(ec)) continue;
    if (fs::remove(entry.path(), ec)) removed.push_back(entry.path().string());
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

// ---- reading ---------------------------------------------------------------------------

SafetensorsFile read_safetensors(const std::string& path, const LoadOptions& options) {
  const std::vector<uint8_t> file = read_whole_file(path, options.max_bytes);
  const uint64_t size = file.size();
  NN_CHECK(size >= 8, "checkpoint " << path << " is too short to be a safetensors file: " << size
                                    << " bytes, the header length alone takes 8: it is truncated or "
                                       "empty; re-create it or restore a copy");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) {
    header_len = (header_len << 8) | file[static_cast<size_t>(i)];  // little-endian u64
  }
  NN_CHECK(header_len <= kMaxHeaderBytes,
           "checkpoint " << path << " declares a " << header_len << "-byte header, more than the "
                         << kMaxHeaderBytes << " (100 MB) limit: it is corrupt or not a safetensors file");
  NN_CHECK(header_len <= size - 8, "checkpoint " << path << " declares a " << header_len
                                                 << "-byte header, larger than the file (" << size
                                                 << " bytes): it is truncated or not a safetensors file; "
                                                    "re-create it or restore a copy");
  NN_CHECK(header_len > 0, "checkpoint " << path << " has an empty header (0 bytes): it is corrupt; "
                                                     "re-create it or restore a copy");

  const std::string header(reinterpret_cast<const char*>(file.data()) + 8, static_cast<size_t>(header_len));
  const size_t bad = first_invalid_utf8(header);
  NN_CHECK(bad == std::string::npos, "checkpoint " << path << " has a header that is not UTF-8 text (byte "
                                                   << bad << "): the file is corrupt or not a safetensors "
                                                             "file; re-create it or restore a copy");
  NN_CHECK(header[0] == '{', "checkpoint " << path << ": the header does not start with '{': the file is "
                                                      "corrupt or not a safetensors file");
  const Json root = JsonParser(header, path).parse_document();

  // The header: one entry per tensor, and the optional "__metadata__" string map.
  SafetensorsFile ck;
  std::vector<Entry> entries;
  for (size_t i = 0; i < root.keys.size(); ++i) {
    const Json& v = root.values[i];
    if (root.keys[i] == "__metadata__") {
      NN_CHECK(v.kind == Json::Kind::Object, "checkpoint " << path << ": __metadata__ is " << kind_name(v.kind)
                                                           << ", expected an object of strings: the file "
                                                              "is corrupt");
      for (size_t k = 0; k < v.keys.size(); ++k) {
        NN_CHECK(v.values[k].kind == Json::Kind::String,
                 "checkpoint " << path << ": __metadata__ entry '" << v.keys[k] << "' is "
                               << kind_name(v.values[k].kind) << ", expected a string: the file is corrupt");
        ck.metadata[v.keys[k]] = v.values[k].str;
      }
      continue;
    }
    entries.push_back(parse_entry(path, root.keys[i], v, options.half_precision));
  }

  // The data section must be covered exactly: in bounds, no overlap, no gap, nothing after.
  const uint64_t data_size = size - 8 - header_len;
  for (const Entry& e : entries) {
    NN_CHECK(e.end <= data_size, "checkpoint " << path << ": tensor '" << e.name << "' has data_offsets "
                                               << offsets_str(e) << " past the end of the " << data_size
                                               << "-byte data section: the file is truncated; re-create it "
                                                  "or restore a copy");
  }
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) {
    by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;  // the end of the data seen so far
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const Entry& e = *by_offset[i];
    if (e.begin < covered) {
      const Entry& prev = *by_offset[i - 1];
      NN_CHECK(false, "checkpoint " << path << ": tensors '" << prev.name << "' " << offsets_str(prev) << " and '"
                                    << e.name << "' " << offsets_str(e)
                                    << " overlap in the data section: the file is corrupt");
    }
    NN_CHECK(e.begin == covered, "checkpoint " << path << ": a gap of " << (e.begin - covered)
                                               << " bytes before tensor '" << e.name << "' "
                                               << offsets_str(e) << " in the data section: the file is corrupt");
    covered = e.end;
  }
  NN_CHECK(covered == data_size, "checkpoint " << path << ": the data section is " << data_size
                                               << " bytes but the tensors cover " << covered
                                               << ": the file is corrupt; re-create it or restore a copy");

  const uint8_t* data = file.data() + 8 + header_len;
  if (const auto it = ck.metadata.find(kChecksumKey); it != ck.metadata.end()) {
    const std::string got = hex64(fnv1a64(data, static_cast<size_t>(data_size)));
    NN_CHECK(it->second == got, "checkpoint " << path << " is corrupt: checksum mismatch (the header says "
                                              << it->second << ", the data hashes to " << got
                                              << "): re-create it or restore a copy");
  }
  if (const auto it = ck.metadata.find(kHeaderChecksumKey); it != ck.metadata.end()) {
    const std::string got = header_digest(ck.metadata, entries);
    NN_CHECK(it->second == got, "checkpoint " << path << " is corrupt: its header (metadata or tensor table) "
                                              << "does not match nnlab.header_checksum (the file says " << it->second
                                              << ", the header hashes to " << got
                                              << "): it was damaged or edited after it was written; re-create it "
                                                 "or restore a copy");
  }
  // A damaged key name must not switch a check off: nnlab.* holds our two checksums only.
  for (const auto& [key, value] : ck.metadata) {
    NN_CHECK(key.rfind("nnlab.", 0) != 0 || key == kChecksumKey || key == kHeaderChecksumKey,
             "checkpoint " << path << " has an unknown metadata key '" << key
                           << "' (nnlab writes only nnlab.checksum and nnlab.header_checksum): the header is "
                              "damaged; re-create it or restore a copy");
  }

  for (const Entry& e : entries) {
    SafetensorsTensor t{e.shape, std::vector<float>(static_cast<size_t>(numel_of(e.shape))), e.dtype};
    if (t.numel() > 0) {
      if (e.dtype == "F32") {
        le_to_floats(data + e.begin, t.numel(), t.data.data());
      } else {
        le16_to_floats(data + e.begin, t.numel(), e.dtype, t.data.data());
      }
    }
    if (options.non_finite == NonFinite::Refuse) {
      const NonFiniteCount nonfinite = count_non_finite(t.data.data(), t.numel());
      NN_CHECK(nonfinite.count == 0, "checkpoint " << path << ": tensor '" << e.name << "' holds " << nonfinite.value
                                             << " at index " << nonfinite.first << " (" << nonfinite.count << " of its "
                                             << t.numel() << " values are not finite); a checkpoint holds finite "
                                                "numbers only (nnlab never writes one that does not): it was "
                                                "damaged or made by a run that diverged; use an earlier checkpoint");
    }
    ck.tensors.emplace(e.name, std::move(t));
  }
  return ck;
}

}  // namespace nn
