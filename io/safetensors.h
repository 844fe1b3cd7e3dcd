// io/safetensors.h: the safetensors file format, written atomically and read with every check.
//
// safetensors (https://github.com/huggingface/safetensors) is: an 8-byte little-endian
// header length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}}, then the raw
// little-endian tensor bytes. numpy, PyTorch and the notebooks can read it directly.
//
// We add two metadata entries, both 64-bit FNV-1a hashes, so a file damaged after it was
// written is caught, not trained from:
//   "nnlab.checksum"         the data section (the tensors' bytes);
//   "nnlab.header_checksum"  the rest of the header: every other metadata key and value and
//                            the tensor table (names, shapes, offsets). A one-digit change in a
//                            vocabulary or a step count fails it as a flipped data bit does.
//                            Exactly: FNV-1a over a sequence of fields, each preceded by its
//                            length (8 bytes, little-endian): every metadata key and value in
//                            key order (the two checksums left out), "__tensors__", then per
//                            tensor in name order its name, "F32", its dims each followed by
//                            ',' ("2,3,"; "" for a scalar) and "begin,end" ("0,24").
// Files from other writers (PyTorch, numpy) have neither and load; an nnlab file with one
// of them has it checked.
//
// A checkpoint never holds NaN or infinity: save_safetensors refuses to write one (the
// previous file stays as it was) and read_safetensors refuses to read one, naming the
// tensor. Debug dumps that must show a NaN being hunted say so with NonFinite::Allow.
//
// Saving writes <path>.tmp, fsyncs it, renames it over <path> and fsyncs the directory:
// a crash or a power cut mid-write leaves the previous checkpoint intact, and on any error
// the .tmp is removed. A .tmp left by a process killed mid-write is removed by
// remove_unfinished_writes (the trainer calls it on the next run).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nn {

// A tensor to write: its name, its shape (an nn::Shape is the same type) and its floats.
struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// What a writer or reader does with a NaN or an infinity in a tensor.
enum class NonFinite {
  Refuse,  // nn::Error naming the file, the tensor and the first bad index (checkpoints)
  Allow,   // written and read as they are (debug dumps: the NaN may be what is hunted)
};

void save_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                      const std::map<std::string, std::string>& metadata = {},
                      NonFinite non_finite = NonFinite::Refuse);

// The largest file read_safetensors (and nn::load_safetensors) reads unless told otherwise:
// more than any model this course trains (GPT-2 small with its AdamW state is 1.5 GB), less
// than a small machine's memory. A larger file is refused before a byte of it is read.
inline constexpr uint64_t kMaxCheckpointBytes = 8ULL << 30;  // 8 GiB

struct LoadOptions {
  NonFinite non_finite = NonFinite::Refuse;
  uint64_t max_bytes = kMaxCheckpointBytes;
  // F16 and BF16 tensors, converted exactly to float: Hugging Face weights (gpt/hf.h). Off
  // for nnlab's own checkpoints, which are F32 only: a half-precision tensor there is a file
  // someone else changed, refused by name rather than trained from.
  bool half_precision = false;
};

// A file's tensors as plain arrays, in float32 whatever the file stored (nn::load_safetensors in nn/checkpoint.h turns them into
// nn::Tensor without copying the floats).
struct SafetensorsTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, prod(shape) floats
  // What the file stored: "F32", or "F16" / "BF16" converted exactly to float on load (every
  // half and every bfloat16 is a float), so a caller can say what it loaded.
  std::string dtype = "F32";
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};
struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, SafetensorsTensor> tensors;
};

// Validates everything: file size within max_bytes, header length within the file, JSON
// well-formed, dtype F32 (F16 or BF16 too with options.half_precision: converted to float), offsets in order,
// inside the data section and matching the shape, both checksums if present, finite values (unless Allow).
// Throws nn::Error naming the file and the problem.
SafetensorsFile read_safetensors(const std::string& path, const LoadOptions& options = {});

// Removes the files <name>.safetensors.tmp in `dir` (not below it): what save_safetensors
// leaves when its process is killed mid-write. Returns their paths (to say so).
std::vector<std::string> remove_unfinished_writes(const std::string& dir);

}  // namespace nn
