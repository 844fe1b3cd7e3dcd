// io/file_io.h: reading a whole file with every check, in one place for all of nn/
// (IDX datasets, checkpoints). Errors name the file and say what to do.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace nn {

// Reads `path` whole. `what` names the kind of file in messages ("IDX file",
// "checkpoint"); `not_found_hint` follows "<what> <path> not found: ". Throws nn::Error
// when the file is missing, a directory, unreadable, larger than `max_bytes`, or shorter
// than its size said (changed while reading).
std::vector<uint8_t> read_file(const std::string& path, const std::string& what,
                               const std::string& not_found_hint,
                               uint64_t max_bytes = std::numeric_limits<uint64_t>::max());

}  // namespace nn
