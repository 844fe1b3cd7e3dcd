// io/idx.h: the IDX file format of MNIST and Fashion-MNIST, read with every check.
//
// Layout (all integers big-endian):
//   bytes 0-1  zero
//   byte  2    element type: 0x08 = unsigned byte (the only type MNIST-style files use)
//   byte  3    number of dimensions, D (1 for labels, 3 for images)
//   then D x uint32 sizes, then prod(sizes) elements.
// The reader checks the magic, the type, that D is sane, that the sizes the header promises
// stay within the cap of io/data_limit.h (256 MiB, NNLAB_MAX_DATA_MB) BEFORE it allocates
// anything sized from them, and that the file holds exactly the bytes the header promises
// (a truncated download ends in an error naming the file, never in a crash or half-zero
// images). Files ending in ".gz" are decompressed on the fly when the build has zlib; the
// header's promise bounds the decompression.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nn {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;  // prod(dims) bytes, row-major
};

// Throws nn::Error with the path and what is wrong.
IdxArray read_idx(const std::string& path);
// Parses an in-memory IDX image (what read_idx does after reading and decompressing);
// `what` names the source in error messages. Pass the buffer with std::move to have its
// bytes become the array's data without a copy.
IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& what);
// Writes an uncompressed unsigned-byte IDX file (tests use it to make small datasets).
void write_idx(const std::string& path, const std::vector<int64_t>& dims,
               const std::vector<uint8_t>& data);
// True when this build can read .gz files.
bool idx_gzip_supported();

}  // namespace nn
