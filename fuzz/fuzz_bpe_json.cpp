// fuzz/fuzz_bpe_json.cpp: nn::BpeTokenizer::from_hf_json, the loader of Hugging Face
// tokenizer.json files (io/bpe.h), on raw bytes.
//
// It must end in a tokenizer or an nn::Error (never a crash, another exception, or a huge
// allocation from a small file). What it accepts must work: a fixed text and the input's own
// bytes round-trip through encode/decode, every id is in the vocabulary, and the tokenizer
// written back as JSON loads again with the same vocabulary and merges.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_util.h"
#include "io/bpe.h"
#include "nn/check.h"

namespace {

void check_round_trip(const nn::BpeTokenizer& t, const std::string& text) {
  const auto ids = t.encode(text);
  for (int32_t id : ids) {
    if (id < 0 || id >= t.vocab_size()) {
      std::fprintf(stderr, "fuzz_bpe_json: encode gave id %d outside [0, %d)\n", id, t.vocab_size());
      std::abort();
    }
  }
  if (t.decode(ids) != text) {
    std::fprintf(stderr, "fuzz_bpe_json: decode(encode(x)) != x for %zu bytes\n", text.size());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(fuzz::as_text(data, size));
  try {
    const nn::BpeTokenizer t = nn::BpeTokenizer::from_hf_json(json, "fuzz.json");
    check_round_trip(t, "Hello world's 123  \n  x<|endoftext|>\xFF\xFE caf\xC3\xA9");
    check_round_trip(t, json.substr(0, 256));
    const nn::BpeTokenizer back = nn::BpeTokenizer::from_hf_json(t.to_hf_json(), "written back");
    if (back.vocab() != t.vocab() || back.merges().size() != t.merges().size()) {
      std::fprintf(stderr, "fuzz_bpe_json: the tokenizer written back loads differently\n");
      std::abort();
    }
  } catch (const nn::Error&) {
  }
  return 0;
}
