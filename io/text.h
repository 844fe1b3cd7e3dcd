// io/text.h: character-level text data: a corpus, its vocabulary, batches of streams for
// truncated BPTT, and sampling one character from logits at a temperature.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/rng.h"

namespace nn {

// The characters of a text, sorted by byte value: id i <-> byte chars[i].
struct CharVocab {
  std::vector<unsigned char> chars;  // id -> byte
  std::array<int32_t, 256> ids{};    // byte -> id, -1 for a byte not in the vocabulary

  int size() const { return static_cast<int>(chars.size()); }
  bool contains(unsigned char c) const { return ids[c] >= 0; }
  // nn::Error naming the first character not in the vocabulary (and its position).
  std::vector<int32_t> encode(std::string_view text) const;
  // nn::Error on an id outside [0, size()).
  std::string decode(std::span<const int32_t> ids_) const;
};
CharVocab build_vocab(std::string_view text);  // nn::Error on an empty text

struct TextCorpus {
  std::string text;
  std::string path;         // the file(s) it came from
  std::string description;  // one line for the program to print: what this corpus is
  bool fallback = false;    // true when Tiny Shakespeare was not found and a Debian text was used
  CharVocab vocab;
  std::vector<int32_t> train;  // the first (1 - val_fraction) of the text, as ids
  std::vector<int32_t> val;    // the rest
};

// Finds and loads a character corpus.
//   - `path` not empty: that file and only that (nn::Error if missing, unreadable or empty).
//   - otherwise Tiny Shakespeare (tinyshakespeare.txt, or input.txt in a tinyshakespeare/
//     folder), looked for in: $NNLAB_DATA, <repo>/data (where scripts/fetch_data.py
//     tinyshakespeare puts it; for each root of nn::repo_roots(), io/repo_paths.h: the
//     tree above the executable, then the tree it was built from), ../shared/data and
//     ../../shared/data from the working directory;
//   - otherwise the fallback: the licence texts in /usr/share/common-licenses (package
//     base-files, on every Debian machine; ~230 KB of English), with fallback = true and a
//     description saying so and how to get Tiny Shakespeare.
// val_fraction in [0, 0.5]; the split is by position (no shuffling: text is a sequence).
TextCorpus load_corpus(const std::string& path = "", double val_fraction = 0.1);
// The same from a string already in memory (tests, notebooks): path = "<memory>".
TextCorpus corpus_from_text(std::string text, std::string description, double val_fraction = 0.1);

// load_corpus("") with its places spelled out, so a program can print them and a test can
// point them at temporary directories:
//   load_corpus("", f) == find_corpus(corpus_search_dirs(), kLicenceDir, f).
inline constexpr const char* kLicenceDir = "/usr/share/common-licenses";
// The directories searched for Tiny Shakespeare, in order: $NNLAB_DATA (when set),
// <root>/data for each of nn::repo_roots(), ../shared/data, ../../shared/data (the last two
// relative to the working directory).
std::vector<std::string> corpus_search_dirs();
// The Tiny Shakespeare file in `dir`: dir/tinyshakespeare.txt, else
// dir/tinyshakespeare/input.txt (where fetch_data.py puts it), else "".
std::string tinyshakespeare_in(const std::string& dir);
// The first Tiny Shakespeare found in `dirs`; else every regular file of `fallback_dir`
// (sorted by name, each file once however many symlinks point at it) as one text, with
// fallback = true; else nn::Error naming both.
TextCorpus find_corpus(const std::vector<std::string>& dirs, const std::string& fallback_dir,
                       double val_fraction = 0.1);

// B parallel streams over a token sequence, read in chunks of `steps`: the classic
// truncated-BPTT batching (char-rnn). The tokens are cut into B equal contiguous streams;
// chunk k holds, for every stream s, tokens [k*steps, (k+1)*steps) of stream s as input and
// the same shifted by one as target. So row s of chunk k+1 continues row s of chunk k, and a
// recurrent layer can carry its state across chunks.
class StreamBatcher {
 public:
  // nn::Error if tokens cannot fill one chunk: need tokens.size() >= B * steps + 1
  // (the message says how many characters there are and how many are needed).
  StreamBatcher(std::span<const int32_t> tokens, int B, int steps);
  // Fills x and y, each (steps, B) TIME-MAJOR (x[t * B + s]), with y the next token of x.
  // Returns false (filling nothing) after the last full chunk; then call restart().
  bool next(std::vector<int32_t>& x, std::vector<int32_t>& y);
  void restart() { chunk_ = 0; }
  int64_t chunks_per_epoch() const { return chunks_; }
  int64_t chunk_index() const { return chunk_; }

 private:
  std::span<const int32_t> tokens_;
  int B_, steps_;
  int64_t stream_len_ = 0;  // tokens per stream (the last one is only ever a target)
  int64_t chunks_ = 0;
  int64_t chunk_ = 0;
};

// Draws an index from softmax(logits / temperature) (V entries), using one uniform
// number u in [0, 1) (so a test can pin the draw). temperature <= 0 means greedy
// (argmax). Lower temperature: more conservative text; higher: more surprising.
int32_t sample_from_logits(const float* logits, int V, float temperature, float u);

}  // namespace nn
