// io/text.cpp: character-level text data (see io/text.h).
//
// Data flows: load_corpus -> find_corpus (Tiny Shakespeare, or the Debian licence texts)
// -> corpus_from_text (vocabulary, train/val split as ids) -> StreamBatcher (B streams,
// chunks of `steps`, time-major) -> a recurrent model -> logits -> sample_from_logits.
#include "io/text.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "nn/check.h"
#include "io/data_limit.h"
#include "io/file_io.h"
#include "io/repo_paths.h"

namespace nn {

namespace fs = std::filesystem;

// ---- the vocabulary ----------------------------------------------------------------------

namespace {

// 'a' for a printable ASCII byte, "byte 0xC3" (or "'\n'") for the rest: a message must
// show the character even when printing it would not.
std::string show_byte(unsigned char c) {
  std::ostringstream os;
  if (c == '\n') {
    os << "'\\n'";
  } else if (c == '\t') {
    os << "'\\t'";
  } else if (c >= 32 && c < 127) {
    os << "'" << static_cast<char>(c) << "'";
  } else {
    const char* hex = "0123456789ABCDEF";
    os << "byte 0x" << hex[c >> 4] << hex[c & 15];
  }
  return os.str();
}

}  // namespace

CharVocab build_vocab(std::string_view text) {
  NN_CHECK(!text.empty(), "cannot build a vocabulary from an empty text: is the corpus file empty?");
  std::array<bool, 256> seen{};
  for (const char ch : text) {
    seen[static_cast<unsigned char>(ch)] = true;
  }
  CharVocab vocab;
  vocab.ids.fill(-1);
  // Sorted by byte value, so the same set of characters always gets the same ids.
  for (int b = 0; b < 256; ++b) {
    if (seen[static_cast<size_t>(b)]) {
      vocab.ids[static_cast<size_t>(b)] = static_cast<int32_t>(vocab.chars.size());
      vocab.chars.push_back(static_cast<unsigned char>(b));
    }
  }
  return vocab;
}

std::vector<int32_t> CharVocab::encode(std::string_view text) const {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    NN_CHECK(ids[c] >= 0, "character " << show_byte(c) << " at position " << i
                                       << " is not in the vocabulary (" << size()
                                       << " characters): was the vocabulary built from another text?");
    out[i] = ids[c];
  }
  return out;
}

std::string CharVocab::decode(std::span<const int32_t> ids_) const {
  std::string out(ids_.size(), '\0');
  for (size_t i = 0; i < ids_.size(); ++i) {
    const int32_t id = ids_[i];
    NN_CHECK(id >= 0 && id < size(), "id " << id << " at position " << i << " is outside the vocabulary [0, "
                                           << size() << "): does the model's output size match the vocabulary?");
    out[i] = static_cast<char>(chars[static_cast<size_t>(id)]);
  }
  return out;
}

// ---- the corpus --------------------------------------------------------------------------

TextCorpus corpus_from_text(std::string text, std::string description, double val_fraction) {
  NN_CHECK(val_fraction >= 0.0 && val_fraction <= 0.5,
           "val_fraction must be in [0, 0.5] (the share of the text kept for validation), got " << val_fraction);
  NN_CHECK(!text.empty(), "the corpus text is empty: nothing to learn from");
  TextCorpus c;
  c.text = std::move(text);
  c.path = "<memory>";
  c.description = std::move(description);
  c.vocab = build_vocab(c.text);  // from the whole text, so validation never meets an unknown character
  // Split by position: the last val_fraction of the text is validation. (Shuffling would
  // put neighbouring sentences on both sides and flatter the validation loss.)
  const size_t n = c.text.size();
  const auto n_val = static_cast<size_t>(static_cast<double>(n) * val_fraction);
  const std::string_view all(c.text);
  c.train = c.vocab.encode(all.substr(0, n - n_val));
  c.val = c.vocab.encode(all.substr(n - n_val));
  return c;
}

namespace {

// A corpus is held as its text (1 byte a character) and as int32 ids (4 bytes a character):
// five times the file. So a text larger than the data cap (io/data_limit.h, 256 MiB unless
// NNLAB_MAX_DATA_MB says otherwise) is refused from its size, before a byte is read;
// `already` counts what was read before it (the fallback joins several files).
std::string read_text_file(const std::string& path, const std::string& not_found_hint, uint64_t already = 0) {
  const uint64_t cap = max_data_bytes();
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    const uint64_t size = fs::file_size(path, ec);
    NN_CHECK(ec || already + size <= cap,
             "text file " << path << " is " << mib_text(static_cast<double>(size))
                          << (already > 0 ? " (after " + mib_text(static_cast<double>(already)) + " of other texts)" : "")
                          << ": a corpus is held as text and as int32 ids, five times its size; "
                          << max_data_hint(static_cast<double>(already + size)));
  }
  const std::vector<uint8_t> bytes = read_file(path, "text file", not_found_hint, cap - std::min(cap, already));
  return std::string(bytes.begin(), bytes.end());
}

const char* kFetchHint = "python3 scripts/fetch_data.py tinyshakespeare";

// "a, b, c"
std::string joined(const std::vector<std::string>& items) {
  std::ostringstream os;
  for (size_t i = 0; i < items.size(); ++i) {
    os << (i ? ", " : "") << items[i];
  }
  return os.str();
}

// The regular files of `dir` sorted by name, each target once: a symlink to a file
// that is also in the folder under its own name (GPL -> GPL-3) is left out, so the
// same text is not read twice.
std::vector<fs::path> distinct_files(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (fs::is_regular_file(it->path(), ec)) {  // follows symlinks: a link to a file counts
      entries.push_back(it->path());
    }
  }
  std::sort(entries.begin(), entries.end());
  std::set<fs::path> read;  // canonical paths already taken
  for (const fs::path& p : entries) {
    if (!fs::is_symlink(p, ec)) {
      read.insert(fs::weakly_canonical(p, ec));
    }
  }
  std::vector<fs::path> files;
  for (const fs::path& p : entries) {
    if (!fs::is_symlink(p, ec)) {
      files.push_back(p);
      continue;
    }
    const fs::path target = fs::weakly_canonical(p, ec);
    if (read.insert(target).second) {  // a link to a file outside the folder: read it once
      files.push_back(p);
    }
  }
  return files;
}

}  // namespace

TextCorpus load_corpus(const std::string& path, double val_fraction) {
  if (path.empty()) {
    return find_corpus(corpus_search_dirs(), kLicenceDir, val_fraction);
  }
  // An explicit file is the only place looked at: falling back to another text would
  // silently train on something the user did not ask for.
  std::string text = read_text_file(path, "check the path (or leave it out to use Tiny Shakespeare)");
  NN_CHECK(!text.empty(), "text file " << path << " is empty: nothing to learn from");
  const size_t n = text.size();
  std::ostringstream what;
  what << path << " (" << n << " characters)";
  TextCorpus c = corpus_from_text(std::move(text), what.str(), val_fraction);
  c.path = path;
  return c;
}

std::vector<std::string> corpus_search_dirs() {
  std::vector<std::string> dirs;
  // std::getenv is standard C++; MSVC merely prefers its own _dupenv_s.
  if (const char* env = std::getenv("NNLAB_DATA"); env != nullptr && env[0] != '\0') {
    dirs.emplace_back(env);
  }
  // <repo>/data: the tree this program runs from, then the one it was built from
  // (io/repo_paths.h), so a moved or copied tree reads its own data.
  for (const std::string& root : repo_roots()) {
    dirs.push_back((fs::path(root) / "data").string());
  }
  // Relative to the working directory: a data folder beside the checkout.
  dirs.emplace_back("../shared/data");
  dirs.emplace_back("../../shared/data");
  return dirs;
}

std::string tinyshakespeare_in(const std::string& dir) {
  std::error_code ec;
  const fs::path flat = fs::path(dir) / "tinyshakespeare.txt";
  if (fs::is_regular_file(flat, ec)) {
    return flat.string();
  }
  const fs::path fetched = fs::path(dir) / "tinyshakespeare" / "input.txt";  // fetch_data.py's layout
  if (fs::is_regular_file(fetched, ec)) {
    return fetched.string();
  }
  return "";
}

TextCorpus find_corpus(const std::vector<std::string>& dirs, const std::string& fallback_dir,
                       double val_fraction) {
  NN_CHECK(val_fraction >= 0.0 && val_fraction <= 0.5,
           "val_fraction must be in [0, 0.5] (the share of the text kept for validation), got " << val_fraction);
  // 1. Tiny Shakespeare, in the first place that has it.
  for (const std::string& dir : dirs) {
    const std::string file = tinyshakespeare_in(dir);
    if (file.empty()) {
      continue;
    }
    std::string text = read_text_file(file, "it vanished while being read");
    NN_CHECK(!text.empty(), "text file " << file << " is empty: fetch it again with " << kFetchHint);
    std::ostringstream what;
    what << "Tiny Shakespeare, " << file << " (" << text.size() << " characters)";
    TextCorpus c = corpus_from_text(std::move(text), what.str(), val_fraction);
    c.path = file;
    return c;
  }
  std::ostringstream not_found;
  not_found << "Tiny Shakespeare not found (no tinyshakespeare.txt or tinyshakespeare/input.txt in "
            << (dirs.empty() ? std::string("any directory: none given") : joined(dirs)) << ")";

  // 2. The fallback: every licence text of the folder, one after the other.
  std::string text;
  int files = 0;
  for (const fs::path& p : distinct_files(fs::path(fallback_dir))) {
    text += read_text_file(p.string(), "it vanished while being read", text.size());
    ++files;
  }
  NN_CHECK(!text.empty(), "no text to train on: " << not_found.str() << ", and no fallback texts in "
                                                  << fallback_dir
                                                  << " (on Debian it holds the licence texts of package "
                                                     "base-files). Get Tiny Shakespeare with: "
                                                  << kFetchHint << ", or pass a text file of your own");
  std::ostringstream what;
  what << not_found.str() << "; training on the licence texts in " << fallback_dir << " (Debian base-files, "
       << files << " files, " << (text.size() + 512) / 1024 << " KB) instead. Get Tiny Shakespeare with: "
       << kFetchHint;
  TextCorpus c = corpus_from_text(std::move(text), what.str(), val_fraction);
  c.path = fallback_dir;
  c.fallback = true;
  return c;
}

// ---- stream batches for truncated BPTT ---------------------------------------------------

StreamBatcher::StreamBatcher(std::span<const int32_t> tokens, int B, int steps)
    : tokens_(tokens), B_(B), steps_(steps) {
  NN_CHECK(B > 0, "the batch size (number of streams) must be positive, got " << B);
  NN_CHECK(steps > 0, "the sequence length (steps per chunk) must be positive, got " << steps);
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t need = static_cast<int64_t>(B) * steps + 1;
  NN_CHECK(n >= need, "the text has " << n << " characters; --batch-size " << B << " x --seq-len " << steps
                                      << " needs at least " << B << "*" << steps << "+1 = " << need
                                      << ": use a smaller batch size or sequence length, or a longer text");
  // Inputs are tokens[0, n-1), targets tokens[1, n): each cut into B rows of
  // inputs_per_stream. Stream s holds tokens [s*L, s*L + L] with L = inputs_per_stream;
  // its last token is only a target (and is the first input of stream s+1).
  const int64_t inputs_per_stream = (n - 1) / B;
  stream_len_ = inputs_per_stream + 1;
  chunks_ = inputs_per_stream / steps;  // the tail shorter than a chunk is left out
}

bool StreamBatcher::next(std::vector<int32_t>& x, std::vector<int32_t>& y) {
  if (chunk_ >= chunks_) {
    return false;
  }
  const size_t count = static_cast<size_t>(B_) * static_cast<size_t>(steps_);
  x.resize(count);
  y.resize(count);
  const int64_t stride = stream_len_ - 1;  // where stream s starts: s * stride
  // x (steps, B) time-major: x[t*B + s] = stream s at position k*steps + t; y one further.
  for (int t = 0; t < steps_; ++t) {
    for (int s = 0; s < B_; ++s) {
      const int64_t pos = s * stride + chunk_ * steps_ + t;
      const size_t i = static_cast<size_t>(t) * static_cast<size_t>(B_) + static_cast<size_t>(s);
      x[i] = tokens_[static_cast<size_t>(pos)];
      y[i] = tokens_[static_cast<size_t>(pos + 1)];
    }
  }
  ++chunk_;
  return true;
}

// ---- sampling ----------------------------------------------------------------------------

int32_t sample_from_logits(const float* logits, int V, float temperature, float u) {
  NN_CHECK(logits != nullptr && V > 0, "sample_from_logits: expected at least one logit, got V = " << V);
  for (int i = 0; i < V; ++i) {
    NN_CHECK(std::isfinite(logits[i]), "logit " << i << " is " << logits[i]
                                                << ": the model diverged (lower the learning rate, clip gradients)");
  }
  int32_t best = 0;  // the first of the largest
  for (int i = 1; i < V; ++i) {
    if (logits[i] > logits[best]) {
      best = i;
    }
  }
  if (!(temperature > 0.0f)) {
    return best;  // greedy
  }
  NN_CHECK(u >= 0.0f && u <= 1.0f, "sample_from_logits: u must be a uniform number in [0, 1), got " << u);

  // p_i = exp((l_i - max) / T) / sum_j exp((l_j - max) / T), in double: subtracting the
  // max keeps every exponent <= 0 (no overflow however large the logits), and double keeps
  // a tiny temperature from turning every weight but the max into 0 too early.
  const double T = temperature;
  const double lmax = logits[best];
  std::vector<double> w(static_cast<size_t>(V));
  double sum = 0.0;
  for (int i = 0; i < V; ++i) {
    w[static_cast<size_t>(i)] = std::exp((static_cast<double>(logits[i]) - lmax) / T);
    sum += w[static_cast<size_t>(i)];
  }
  // Inverse CDF: the first i whose cumulative weight passes u * sum.
  const double target = static_cast<double>(u) * sum;
  double cum = 0.0;
  int32_t last_nonzero = best;
  for (int i = 0; i < V; ++i) {
    const double wi = w[static_cast<size_t>(i)];
    if (wi <= 0.0) {
      continue;
    }
    cum += wi;
    last_nonzero = i;
    if (target < cum) {
      return i;
    }
  }
  // Only reached when u is (or rounds to) 1: the cumulative sum ended a hair below
  // u * sum. Return the last character that can be drawn at all, never one with p = 0.
  return last_nonzero;
}

}  // namespace nn
