#include "io/file_io.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "nn/check.h"

namespace nn {

std::vector<uint8_t> read_file(const std::string& path, const std::string& what,
                               const std::string& not_found_hint, uint64_t max_bytes) {
  std::error_code ec;
  NN_CHECK(std::filesystem::exists(path, ec), what << " " << path << " not found: " << not_found_hint);
  NN_CHECK(!std::filesystem::is_directory(path, ec),
           what << " " << path << " is a directory, not a file: pass the file inside it");
  const uintmax_t size = std::filesystem::file_size(path, ec);
  NN_CHECK(!ec, "cannot get the size of " << what << " " << path << ": " << ec.message());
  NN_CHECK(size <= max_bytes, what << " " << path << " is " << size << " bytes, more than the "
                                   << max_bytes << " this reader accepts: is it the right file?");
  std::ifstream in(path, std::ios::binary);
  NN_CHECK(in.is_open(), "cannot open " << what << " " << path << " for reading: check its permissions");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (!bytes.empty()) {
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  NN_CHECK(in.gcount() == static_cast<std::streamsize>(bytes.size()),
           "read only " << in.gcount() << " of " << bytes.size() << " bytes of " << what << " " << path
                        << ": was it changed while reading?");
  return bytes;
}

}  // namespace nn
