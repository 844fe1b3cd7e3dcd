// tests/test_fuzz_regressions.cpp: every input the fuzzers (fuzz/, scripts/fuzz.sh) found,
// replayed through the loader it broke.
//
// Each test reads the fuzzer's saved input from tests/fixtures/fuzz/ and asks for what bad
// input must get: an nn::Error that names the file (no other exception type, no crash, no
// allocation of gigabytes, no NaN accepted). docs/reliability.md says how a new finding
// becomes a test here. A test whose fix lives in another file says where, in its first line.
#include "tests/test_util.h"

#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/gpt_checkpoint_text.h"
#include "gpt/train.h"
#include "nn/check.h"
#include "io/idx.h"

#ifndef NNLAB_SOURCE_DIR
#define NNLAB_SOURCE_DIR "."
#endif

#if defined(__SANITIZE_ADDRESS__)
#define NNLAB_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NNLAB_TEST_ASAN 1
#endif
#endif

namespace {

using Catch::Contains;

std::string fixture(const std::string& name) { return std::string(NNLAB_SOURCE_DIR) + "/tests/fixtures/fuzz/" + name; }

// The bytes of the virtual memory this process has mapped now (VmSize), or 0.
[[maybe_unused]] uint64_t vm_size_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      uint64_t kb = 0;
      status >> kb;
      return kb * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

// While alive, the process may map at most `extra_mb` more than it has now. A loader that
// asks for gigabytes because a small file said so then gets std::bad_alloc, and the test
// fails, where without the cap the allocation would succeed (its pages are never touched)
// and the test pass for the wrong reason. Under ASan, RLIMIT_AS would break the sanitizer's
// shadow memory; there the cap is ASAN_OPTIONS=max_allocation_size_mb=256, which
// scripts/sanitize_loaders.sh sets (ASan then reports the allocation and stops the run).
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(uint64_t extra_mb) {
#ifdef NNLAB_TEST_ASAN
    const char* opts = std::getenv("ASAN_OPTIONS");
    if (opts == nullptr || std::string(opts).find("max_allocation_size_mb") == std::string::npos) {
      WARN("ASan build without ASAN_OPTIONS=max_allocation_size_mb: this test cannot see a huge allocation here");
    }
    (void)extra_mb;
#else
    const uint64_t now = vm_size_bytes();
    if (now == 0 || getrlimit(RLIMIT_AS, &old_) != 0) {
      WARN("cannot read this process's address space: the allocation cap is off");
      return;
    }
    rlimit capped = old_;
    capped.rlim_cur = static_cast<rlim_t>(now + (extra_mb << 20));
    if (old_.rlim_cur != RLIM_INFINITY && old_.rlim_cur < capped.rlim_cur) return;
    active_ = setrlimit(RLIMIT_AS, &capped) == 0;
#endif
  }
  ~AddressSpaceCap() {
    if (active_) setrlimit(RLIMIT_AS, &old_);
  }
  AddressSpaceCap(const AddressSpaceCap&) = delete;
  AddressSpaceCap& operator=(const AddressSpaceCap&) = delete;

 private:
  rlimit old_{};
  bool active_ = false;
};

// The fuzzer's described checkpoint (fuzz/gpt_checkpoint_text.h), written as a file in `dir`.
std::string described_checkpoint(const testing::TempDir& dir, const std::string& fixture_name) {
  const std::string path = (dir.path / "ck.safetensors").string();
  fuzz::write_described_checkpoint(path, testing::read_text(fixture(fixture_name)));
  return path;
}

}  // namespace

// ---- io/idx.cpp (data loaders: h-a) -----------------------------------------------------------

TEST_CASE("fuzz regression: a 4-byte .gz whose trailer claims 841 MB is refused without allocating them",
          "[fuzz-regression][idx]") {
  // FIX IN io/idx.cpp (gunzip reserves the trailer's ISIZE before inflating anything; a gzip
  // stream cannot inflate more than ~1032x its size, so the reservation needs a bound from the
  // input's size). Found by fuzz_idx_gz: libFuzzer's malloc limit saw malloc(841 MB).
  testing::TempDir dir("fuzz-idx-gz");
  const std::string path = (dir.path / "train-images-idx3-ubyte.gz").string();
  std::filesystem::copy_file(fixture("idx_gz-trailer-claims-841MB.gz"), path);
  std::string message;
  {
    AddressSpaceCap cap(256);
    message = testing::error_of([&] { nn::read_idx(path); });
  }
  REQUIRE_THAT(message, Contains(path));
}

// ---- gpt/train.cpp: load_checkpoint, vocab_from_hex (GPT trainer and checkpoints: h-b) ---------

TEST_CASE("fuzz regression: a GPT checkpoint with NaN weights is refused, naming the file",
          "[fuzz-regression][checkpoint]") {
  // FIX IN gpt/train.cpp (load_checkpoint): it loads NaN weights, and sampling then prints
  // text from them. Found by fuzz_gpt_checkpoint (its check that a loaded model is finite).
  testing::TempDir dir("fuzz-gpt-nan");
  const std::string path = described_checkpoint(dir, "gpt_checkpoint-nan-weights.txt");
  REQUIRE_THAT(testing::error_of([&] { gpt::load_checkpoint(path); }), Contains(path));
}

TEST_CASE("fuzz regression: a GPT checkpoint whose adam_t is not a number is an nn::Error naming the key",
          "[fuzz-regression][checkpoint]") {
  // FIX IN gpt/train.cpp (load_checkpoint uses std::stoll: its std::invalid_argument says
  // only "stoll"). Found by fuzz_gpt_checkpoint (an exception that is not nn::Error).
  testing::TempDir dir("fuzz-gpt-adam-t");
  const std::string path = described_checkpoint(dir, "gpt_checkpoint-adam_t-not-a-number.txt");
  REQUIRE_THAT(testing::error_of([&] { gpt::load_checkpoint(path); }), Contains(path) && Contains("adam_t"));
}

TEST_CASE("fuzz regression: a GPT checkpoint whose dropout is not a number is an nn::Error naming the key",
          "[fuzz-regression][checkpoint]") {
  // FIX IN gpt/train.cpp (load_checkpoint uses std::stof: "stof"). Found by fuzz_gpt_checkpoint.
  testing::TempDir dir("fuzz-gpt-dropout");
  const std::string path = described_checkpoint(dir, "gpt_checkpoint-dropout-not-a-number.txt");
  REQUIRE_THAT(testing::error_of([&] { gpt::load_checkpoint(path); }), Contains(path) && Contains("dropout"));
}

TEST_CASE("fuzz regression: a GPT checkpoint whose vocab_size claims 33 million is refused before allocating",
          "[fuzz-regression][checkpoint]") {
  // FIX IN gpt/train.cpp (load_checkpoint builds the model from the metadata, gpt_create, and
  // only then compares the tensors' shapes: here ~1 GB for a 500-byte description; the
  // value is also "33261626val...", which std::stoi reads as a number). Found by
  // fuzz_gpt_checkpoint: libFuzzer's malloc limit saw malloc(1064 MB).
  testing::TempDir dir("fuzz-gpt-vocab-size");
  const std::string path = described_checkpoint(dir, "gpt_checkpoint-vocab_size-33M.txt");
  std::string message;
  {
    AddressSpaceCap cap(256);
    message = testing::error_of([&] { gpt::load_checkpoint(path); });
  }
  REQUIRE_THAT(message, Contains(path));
}

TEST_CASE("fuzz regression: a vocabulary whose bytes are not in order is refused, not re-sorted",
          "[fuzz-regression][checkpoint]") {
  // FIX IN gpt/train.cpp (vocab_from_hex builds the vocabulary with build_vocab, which sorts:
  // "0f00" becomes ids {0x00: 0, 0x0f: 1}, the reverse of the file's, and every id the model
  // was trained with maps to another character). Found by fuzz_vocab (its round-trip check).
  const std::string hex = testing::read_text(fixture("vocab-unsorted.txt"));
  REQUIRE(hex == "0f00");
  REQUIRE_THAT(testing::error_of([&] { gpt::vocab_from_hex(hex); }), Contains("0f00") || Contains("order") ||
                                                                        Contains("sorted"));
}
