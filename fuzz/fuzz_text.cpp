// fuzz/fuzz_text.cpp: a character corpus from arbitrary bytes, then what the trainers do
// with it: the vocabulary, the train/val split, truncated-BPTT batches, encoding a prompt.
//
// Input layout: byte 0 picks the validation fraction (0 to 0.5), bytes 1-2 the streams B
// and steps of the batcher (1 to 64 each), byte 3 the length of a prompt taken from the
// end; the rest is the text. A text file goes through nn::load_corpus (the reading path),
// the prompt through CharVocab::encode/decode (a character outside the text must be an
// nn::Error, never an out-of-range id).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "nn/check.h"
#include "io/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const double val_fraction = 0.5 * data[0] / 255.0;
  const int B = 1 + data[1] % 64;
  const int steps = 1 + data[2] % 64;
  std::string_view text = fuzz::as_text(data + 4, size - 4);
  const size_t prompt_len = std::min<size_t>(data[3], text.size());
  const std::string_view prompt = text.substr(text.size() - prompt_len);
  const std::string path = fuzz::write_scratch("corpus.txt", text);
  try {
    const nn::TextCorpus c = nn::load_corpus(path, val_fraction);
    for (int32_t id : c.train) {
      if (id < 0 || id >= c.vocab.size()) std::abort();
    }
    nn::StreamBatcher batcher(c.train, B, steps);
    std::vector<int32_t> x, y;
    for (int k = 0; k < 4 && batcher.next(x, y); ++k) {
      if (x.size() != static_cast<size_t>(B) * steps || y.size() != x.size()) std::abort();
    }
  } catch (const nn::Error&) {
  }
  try {
    const nn::CharVocab vocab = nn::build_vocab(text.substr(0, text.size() / 2));
    const std::vector<int32_t> ids = vocab.encode(prompt);
    if (vocab.decode(ids) != prompt) {
      std::fprintf(stderr, "fuzz_text: decode(encode(prompt)) differs from the prompt\n");
      std::abort();
    }
  } catch (const nn::Error&) {
  }
  return 0;
}
