// io/idx.cpp: reading and writing IDX files (see io/idx.h for the layout).
//
// Reading, in the order the bytes flow:
//   1. parse_idx_header  magic, type, dims, and the size they promise, against the cap of
//                        io/data_limit.h: nothing is allocated from a header before this
//   2. read_plain        a plain file: its header first, the promise checked against the
//                        file's real size, then the whole file (one buffer)
//   3. gunzip            a .gz file: inflated chunk by chunk; the header is checked as soon
//                        as its bytes are out, and inflating stops within a chunk (1 MiB) of
//                        the promise (a 1 MB .gz cannot make the reader hold much more than
//                        it promised, and never more than the cap)
//   4. parse_idx         header + exactly prod(dims) bytes, moved into the array (no copy)
// Every check ends in an nn::Error naming the file: the input can be a truncated download,
// a wrong file or plain garbage, and none of those may crash or give half-zero images.
#include "io/idx.h"
#include "io/file_io.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nn/check.h"
#include "io/data_limit.h"

#ifdef NNLAB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace nn {

namespace {

constexpr int kMaxIdxDims = 4;
// Magic (4 bytes) + up to 4 big-endian uint32 sizes.
constexpr uint64_t kMaxIdxHeaderBytes = 4 + 4 * kMaxIdxDims;
const char* kFetchHint = "check the path, or fetch the dataset (python3 scripts/fetch_data.py fashion-mnist)";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string hex_byte(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned>(b));
  return buf;
}

// The element types the IDX format defines; only 0x08 occurs in MNIST-style data.
const char* idx_type_name(uint8_t type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "not an IDX type";
  }
}

// ---- 1. the header ---------------------------------------------------------------------

struct IdxHeader {
  std::vector<int64_t> dims;
  uint64_t header_bytes = 0;  // 4 + 4 * dims
  uint64_t data_bytes = 0;    // prod(dims), at most max_data_bytes()
};

// Checks the header at the start of `bytes` (`size` bytes available, the whole file or its
// first kMaxIdxHeaderBytes) and the size it promises against the cap. Allocates nothing.
IdxHeader parse_idx_header(const uint8_t* bytes, uint64_t size, const std::string& what) {
  NN_CHECK(size >= 4, "IDX file " << what << " is too short: " << size
                                  << " bytes, the header alone needs at least 4: is the file empty "
                                     "or truncated? fetch it again");
  if (bytes[0] == 0x1F && bytes[1] == 0x8B) {
    NN_CHECK(false, "IDX file " << what << " looks gzip-compressed (starts with 1F 8B) but its name "
                                "does not end in .gz: rename it to end in .gz, or gunzip it");
  }
  NN_CHECK(bytes[0] == 0 && bytes[1] == 0,
           "IDX file " << what << " is not an IDX file: the first two bytes must be zero, got "
                       << hex_byte(bytes[0]) << " " << hex_byte(bytes[1]) << ": is it the right file?");
  const uint8_t type = bytes[2];
  NN_CHECK(type == 0x08, "IDX file " << what << " has element type " << hex_byte(type) << " ("
                                     << idx_type_name(type)
                                     << "); this reader handles only 0x08 (unsigned byte), the type "
                                        "of MNIST-style datasets");
  const int ndims = bytes[3];
  NN_CHECK(ndims >= 1 && ndims <= kMaxIdxDims,
           "IDX file " << what << " has " << ndims << " dimensions in its header; expected 1 to "
                       << kMaxIdxDims << " (1 for labels, 3 for images): is it the right file?");
  IdxHeader h;
  h.header_bytes = 4 + 4 * static_cast<uint64_t>(ndims);
  NN_CHECK(size >= h.header_bytes, "IDX file " << what << " has a truncated header: " << ndims
                                               << " dimensions need " << h.header_bytes
                                               << " header bytes, the file has " << size
                                               << ": fetch it again");

  const uint64_t cap = max_data_bytes();
  uint64_t count = 1;      // prod(dims) while it stays within the cap (so it never overflows)
  double promised = 1.0;   // the same in double, for the message when it does not
  bool within = true;
  std::ostringstream sizes;
  for (int d = 0; d < ndims; ++d) {
    const size_t at = 4 + 4 * static_cast<size_t>(d);
    // Big-endian: the most significant byte comes first.
    const uint64_t dim = (static_cast<uint64_t>(bytes[at]) << 24) | (static_cast<uint64_t>(bytes[at + 1]) << 16) |
                         (static_cast<uint64_t>(bytes[at + 2]) << 8) | static_cast<uint64_t>(bytes[at + 3]);
    NN_CHECK(dim > 0, "IDX file " << what << ": dimension " << d << " of " << ndims
                                  << " is zero; every size must be positive: is the file corrupt?");
    promised *= static_cast<double>(dim);
    sizes << (d ? " x " : "") << dim;
    if (within && count <= cap / dim) {
      count *= dim;
    } else {
      within = false;
    }
    h.dims.push_back(static_cast<int64_t>(dim));
  }
  NN_CHECK(within, "IDX file " << what << ": its header promises " << sizes.str() << " = " << mib_text(promised)
                               << " of data, more than a loader accepts: is the file corrupt or not a dataset? "
                               << max_data_hint(promised));
  h.data_bytes = count;
  return h;
}

// ---- 2. a plain file -------------------------------------------------------------------

// The whole file, once its header's promise matches the file's size: a file that claims
// more than it holds (truncated) or holds more than it claims is refused before the big read.
std::vector<uint8_t> read_plain(const std::string& path) {
  std::error_code ec;
  NN_CHECK(std::filesystem::exists(path, ec), "IDX file " << path << " not found: " << kFetchHint);
  NN_CHECK(!std::filesystem::is_directory(path, ec),
           "IDX file " << path << " is a directory, not a file: pass the file inside it");
  if (std::filesystem::is_regular_file(path, ec)) {
    const uint64_t size = std::filesystem::file_size(path, ec);
    NN_CHECK(!ec, "cannot get the size of IDX file " << path << ": " << ec.message());
    std::ifstream in(path, std::ios::binary);
    NN_CHECK(in.is_open(), "cannot open IDX file " << path << " for reading: check its permissions");
    uint8_t head[kMaxIdxHeaderBytes] = {};
    const auto want = static_cast<std::streamsize>(std::min<uint64_t>(size, kMaxIdxHeaderBytes));
    in.read(reinterpret_cast<char*>(head), want);
    NN_CHECK(in.gcount() == want, "read only " << in.gcount() << " bytes of IDX file " << path
                                               << "'s header: was it changed while reading?");
    const IdxHeader h = parse_idx_header(head, static_cast<uint64_t>(want), path);
    const uint64_t have = size - h.header_bytes;
    NN_CHECK(have >= h.data_bytes, "IDX file " << path << " is truncated: header promises " << h.data_bytes
                                               << " bytes of data, file has " << have
                                               << ": an interrupted download? fetch it again");
    NN_CHECK(have == h.data_bytes, "IDX file " << path << " has " << (have - h.data_bytes)
                                               << " trailing bytes after the " << h.data_bytes
                                               << " bytes of data its header promises: is it the right or a "
                                                  "corrupt file? fetch it again");
  }
  // Not a regular file (a pipe, a device): read_file refuses what it cannot size.
  return read_file(path, "IDX file", kFetchHint, max_data_bytes() + kMaxIdxHeaderBytes);
}

// ---- 3. gzip ---------------------------------------------------------------------------

#ifdef NNLAB_HAVE_ZLIB
// Inflates a gzip file (one or more concatenated members, as `cat a.gz b.gz` makes). As soon
// as the IDX header is out, its promise bounds the output: the first chunk that would take
// it past header + data ends the inflating (the file has trailing bytes), so a small corrupt
// (or malicious) file cannot fill the memory.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& in, const std::string& path) {
  NN_CHECK(in.size() >= 2 && in[0] == 0x1F && in[1] == 0x8B,
           "IDX file " << path << " is not gzip-compressed (it does not start with 1F 8B) although its "
                       "name ends in .gz: corrupt gzip stream; rename it without .gz if it is a plain "
                       "IDX file, or fetch it again");
  // zlib counts in uInt (32 bits): feed and drain it in chunks of at most 1 MiB.
  constexpr size_t kChunk = size_t{1} << 20;

  std::vector<uint8_t> out;
  // Until the header is out, the cap bounds the output; then the header's own promise.
  uint64_t max_out = max_data_bytes() + kMaxIdxHeaderBytes;
  bool header_checked = false;
  uint64_t promised = 0;  // the data bytes the header promises, once it is out
  auto check_header = [&] {
    const IdxHeader h = parse_idx_header(out.data(), out.size(), path);
    max_out = h.header_bytes + h.data_bytes;
    promised = h.data_bytes;
    header_checked = true;
    // The gzip trailer ends with the uncompressed size mod 2^32: a good guess, never above the promise.
    if (in.size() >= 4) {
      const size_t n = in.size();
      const uint32_t isize = static_cast<uint32_t>(in[n - 4]) | (static_cast<uint32_t>(in[n - 3]) << 8) |
                             (static_cast<uint32_t>(in[n - 2]) << 16) | (static_cast<uint32_t>(in[n - 1]) << 24);
      out.reserve(static_cast<size_t>(std::min<uint64_t>(isize, max_out)));
    }
  };

  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header and trailer (CRC-32 and size), not raw zlib.
  NN_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, "zlib could not start inflating " << path);
  // Every error below ends zlib's state first: an nn::Error must not leak it.
  auto fail_inflate = [&](const std::string& message) {
    inflateEnd(&zs);
    fail(__FILE__, __LINE__, message);
  };

  size_t in_pos = 0;
  std::vector<uint8_t> chunk(kChunk);
  bool member_done = false;
  while (true) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      const size_t n = std::min(kChunk, in.size() - in_pos);
      zs.next_in = const_cast<Bytef*>(in.data() + in_pos);
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    zs.next_out = chunk.data();
    zs.avail_out = static_cast<uInt>(chunk.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = chunk.size() - zs.avail_out;
    if (out.size() + produced > max_out) {
      std::ostringstream os;
      if (header_checked) {
        os << "IDX file " << path << " decompresses to more than the " << promised
           << " bytes of data its header promises: trailing bytes after the data: is it the right or a "
              "corrupt file? fetch it again";
      } else {
        os << "IDX file " << path << " decompresses to more than " << mib_text(static_cast<double>(max_out))
           << ": " << max_data_hint(static_cast<double>(out.size() + produced));
      }
      fail_inflate(os.str());
    }
    out.insert(out.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(produced));
    if (!header_checked && out.size() >= kMaxIdxHeaderBytes) {
      try {
        check_header();
      } catch (const Error&) {
        inflateEnd(&zs);
        throw;  // the header's own message, as for a plain file
      }
    }

    if (rc == Z_STREAM_END) {
      // Another gzip member may follow; anything else after the stream is an error.
      const size_t left = zs.avail_in + (in.size() - in_pos);
      if (left == 0) {
        member_done = true;
        break;
      }
      const size_t next = in.size() - left;
      if (left >= 2 && in[next] == 0x1F && in[next + 1] == 0x8B) {
        inflateReset(&zs);
        continue;
      }
      std::ostringstream os;
      os << "IDX file " << path << " has " << left << " trailing bytes after its gzip stream: corrupt gzip stream; "
                                                      "fetch the file again";
      fail_inflate(os.str());
    }
    if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR || rc == Z_STREAM_ERROR) {
      const std::string msg = zs.msg != nullptr ? zs.msg : "error " + std::to_string(rc);
      fail_inflate("IDX file " + path + ": corrupt gzip stream (zlib: " + msg +
                   "): fetch the file again (python3 scripts/fetch_data.py ...)");
    }
    // Z_BUF_ERROR, or Z_OK without progress, with all input consumed: the stream stops
    // before its end. (With input left, Z_BUF_ERROR only means "give me room": loop.)
    if (zs.avail_in == 0 && in_pos == in.size() && produced == 0) {
      break;
    }
  }
  inflateEnd(&zs);
  NN_CHECK(member_done, "IDX file " << path << " is truncated: its gzip stream ends early, after "
                                    << out.size() << " decompressed bytes (corrupt gzip stream or "
                                                     "an interrupted download): fetch it again");
  return out;
}
#endif

}  // namespace

bool idx_gzip_supported() {
#ifdef NNLAB_HAVE_ZLIB
  return true;
#else
  return false;
#endif
}

// ---- 4. the IDX header and data --------------------------------------------------------

IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& what) {
  const IdxHeader h = parse_idx_header(bytes.data(), bytes.size(), what);
  const uint64_t have = bytes.size() - h.header_bytes;
  NN_CHECK(have >= h.data_bytes, "IDX file " << what << " is truncated: header promises " << h.data_bytes
                                             << " bytes of data, file has " << have
                                             << ": an interrupted download? fetch it again");
  NN_CHECK(have == h.data_bytes, "IDX file " << what << " has " << (have - h.data_bytes)
                                             << " trailing bytes after the " << h.data_bytes
                                             << " bytes of data its header promises: is it the right or a "
                                                "corrupt file? fetch it again");
  IdxArray arr;
  arr.dims = h.dims;
  // The data is the buffer itself, minus its header: moved, not copied (a second buffer
  // the size of the dataset would double the peak memory).
  arr.data = std::move(bytes);
  arr.data.erase(arr.data.begin(), arr.data.begin() + static_cast<std::ptrdiff_t>(h.header_bytes));
  return arr;
}

IdxArray read_idx(const std::string& path) {
  const bool gz = ends_with(path, ".gz");
  if (!gz) {
    return parse_idx(read_plain(path), path);
  }
#ifdef NNLAB_HAVE_ZLIB
  // A compressed file is never much larger than its content (stored blocks add 5 bytes per
  // 64 KiB): the cap plus 1/64 and a little bounds the read.
  const uint64_t cap = max_data_bytes();
  const uint64_t most = cap + cap / 64 + 4096;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    const uint64_t size = std::filesystem::file_size(path, ec);
    NN_CHECK(ec || size <= most, "IDX file " << path << " is " << mib_text(static_cast<double>(size))
                                             << " compressed, more than any dataset a loader accepts can be: "
                                             << max_data_hint(static_cast<double>(size)));
  }
  const std::vector<uint8_t> packed = read_file(path, "IDX file", kFetchHint, most);
  return parse_idx(gunzip(packed, path), path);
#else
  // Still check that the file exists first: "not found" is the more useful message.
  std::error_code ec;
  NN_CHECK(std::filesystem::exists(path, ec),
           "IDX file " << path << " not found: check the path, or fetch the dataset "
                                  "(python3 scripts/fetch_data.py fashion-mnist)");
  fail(__FILE__, __LINE__, "cannot read " + path + ": this build has no zlib: gunzip " + path +
                               " first (or install zlib1g-dev and re-run cmake)");
#endif
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data) {
  NN_CHECK(!dims.empty() && dims.size() <= static_cast<size_t>(kMaxIdxDims),
           "write_idx " << path << ": expected 1 to " << kMaxIdxDims << " dimensions, got " << dims.size());
  uint64_t count = 1;
  for (int64_t d : dims) {
    NN_CHECK(d > 0 && d <= 0xFFFFFFFFLL, "write_idx " << path << ": every dimension must be in [1, 2^32), got "
                                                      << d);
    NN_CHECK(count <= max_data_bytes() / static_cast<uint64_t>(d),
             "write_idx " << path << ": more data than a loader accepts (" << kMaxDataEnv << ")");
    count *= static_cast<uint64_t>(d);
  }
  NN_CHECK(count == data.size(), "write_idx " << path << ": the dimensions promise " << count
                                              << " bytes but " << data.size() << " were given");

  std::vector<uint8_t> header = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (int64_t d : dims) {
    const auto u = static_cast<uint32_t>(d);
    header.push_back(static_cast<uint8_t>(u >> 24));  // big-endian
    header.push_back(static_cast<uint8_t>(u >> 16));
    header.push_back(static_cast<uint8_t>(u >> 8));
    header.push_back(static_cast<uint8_t>(u));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  NN_CHECK(out.is_open(), "cannot open " << path << " for writing: does its directory exist?");
  out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  out.close();
  NN_CHECK(!out.fail(), "writing " << path << " failed: is the disk full?");
}

}  // namespace nn
