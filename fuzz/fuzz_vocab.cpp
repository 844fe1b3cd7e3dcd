// fuzz/fuzz_vocab.cpp: gpt::vocab_from_hex, the tokenizer a GPT checkpoint carries
// (metadata "vocab_hex": the vocabulary's bytes in hex, sorted, each once).
//
// Odd lengths, non-hex digits, duplicates and unsorted bytes must be nn::Error; what it
// accepts must round-trip through gpt::vocab_to_hex.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_util.h"
#include "gpt/train.h"
#include "nn/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string hex(fuzz::as_text(data, size));
  try {
    const nn::CharVocab vocab = gpt::vocab_from_hex(hex);
    for (int i = 0; i < vocab.size(); ++i) {
      if (vocab.ids[vocab.chars[static_cast<size_t>(i)]] != i) {
        std::fprintf(stderr, "fuzz_vocab: id %d -> byte %d -> id %d\n", i, vocab.chars[static_cast<size_t>(i)],
                     vocab.ids[vocab.chars[static_cast<size_t>(i)]]);
        std::abort();
      }
    }
    // Ids are positions in the file's order: a reader that re-sorts an unsorted list would
    // silently give every character another id than the one the model was trained with.
    if (gpt::vocab_to_hex(vocab) != hex) {
      std::fprintf(stderr, "fuzz_vocab: accepted '%s' but it reads back as '%s' (ids remapped)\n", hex.c_str(),
                   gpt::vocab_to_hex(vocab).c_str());
      std::abort();
    }
  } catch (const nn::Error&) {
  }
  return 0;
}
