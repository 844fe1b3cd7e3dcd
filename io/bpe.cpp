// io/bpe.cpp: the byte-level BPE tokenizer of io/bpe.h. Sections in the order the data
// flows: the byte <-> unicode map, pre-tokenisation, training (v1 the plain merge loop, v2
// incremental pair counts), encode and decode, then the two file formats.
#include "io/bpe.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <queue>
#include <utility>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "nn/check.h"

namespace nn {

// ============================================================================================
// GPT-2's byte <-> unicode map
// ============================================================================================
// GPT-2 (openai/gpt-2 src/encoder.py, bytes_to_unicode): the bytes that are printable Latin-1
// characters ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 (the controls,
// space, DEL, NBSP, the soft hyphen) get U+0100, U+0101, ... in byte order. So ' ' is U+0120
// 'Ġ' and '\n' is U+010A 'Ċ', the characters one sees in GPT-2's vocab.json.
namespace {

struct ByteMap {
  std::array<uint32_t, 256> code{};       // byte -> code point
  std::array<std::string, 256> utf8{};    // byte -> its character as UTF-8
  std::array<int16_t, 512> byte_of{};     // code point (< 512) -> byte, -1 if none
};

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

const ByteMap& byte_map() {
  static const ByteMap map = [] {
    ByteMap m;
    m.byte_of.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      m.code[b] = printable ? static_cast<uint32_t>(b) : next++;
      m.utf8[b] = utf8_of(m.code[b]);
      m.byte_of[m.code[b]] = static_cast<int16_t>(b);
    }
    return m;
  }();
  return map;
}

// The next code point of `s` from `i` (advancing i); -1 on malformed UTF-8.
int64_t next_code_point(std::string_view s, size_t& i) {
  const auto c0 = static_cast<unsigned char>(s[i]);
  int len = 0;
  uint32_t cp = 0;
  if (c0 < 0x80) { len = 1; cp = c0; }
  else if ((c0 & 0xE0) == 0xC0) { len = 2; cp = c0 & 0x1F; }
  else if ((c0 & 0xF0) == 0xE0) { len = 3; cp = c0 & 0x0F; }
  else if ((c0 & 0xF8) == 0xF0) { len = 4; cp = c0 & 0x07; }
  else return -1;
  if (i + len > s.size()) return -1;
  for (int k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (c & 0x3F);
  }
  i += len;
  return cp;
}

}  // namespace

const std::string& bpe_byte_to_unicode(unsigned char b) { return byte_map().utf8[b]; }

int bpe_unicode_to_byte(uint32_t code_point) {
  return code_point < 512 ? byte_map().byte_of[code_point] : -1;
}

std::string bpe_token_from_text(std::string_view text, std::string_view what) {
  std::string bytes;
  size_t i = 0;
  while (i < text.size()) {
    const size_t at = i;
    const int64_t cp = next_code_point(text, i);
    NN_CHECK(cp >= 0, what << ": malformed UTF-8 at byte " << at << " of token '" << text << "'");
    const int b = bpe_unicode_to_byte(static_cast<uint32_t>(cp));
    NN_CHECK(b >= 0, what << ": token '" << text << "' has the character U+" << std::hex << cp << std::dec
                          << ", which is not one of GPT-2's 256 byte characters: is this a byte-level BPE vocabulary?");
    bytes += static_cast<char>(b);
  }
  return bytes;
}

std::string bpe_token_to_text(std::string_view bytes) {
  std::string text;
  for (char c : bytes) text += bpe_byte_to_unicode(static_cast<unsigned char>(c));
  return text;
}

// ============================================================================================
// pre-tokenisation: GPT-2's regular expression, through PCRE2
// ============================================================================================
// UTF + UCP: \p{L}, \p{N} and \s are Unicode's. MATCH_INVALID_UTF: invalid UTF-8 is allowed in
// the subject and simply matches nothing (instead of failing the whole match), so we see it
// as a gap between two matches. JIT-compiled: a few times faster than the interpreter.
namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Gpt2Regex {
  pcre2_code* code = nullptr;
  Gpt2Regex() {
    int err = 0;
    PCRE2_SIZE err_at = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_at, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      NN_CHECK(false, "PCRE2 cannot compile GPT-2's pattern at " << err_at << ": " << reinterpret_cast<char*>(msg)
                                                                 << " (needs PCRE2 >= 10.34 with Unicode support)");
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT (some platforms) it still matches
  }
  ~Gpt2Regex() { pcre2_code_free(code); }
  Gpt2Regex(const Gpt2Regex&) = delete;
  Gpt2Regex& operator=(const Gpt2Regex&) = delete;
};

const Gpt2Regex& gpt2_regex() {
  static const Gpt2Regex regex;
  return regex;
}

// One pre-tokenisation pass, calling `emit(word)` for each word in order.
template <typename Emit>
void for_each_pretoken(std::string_view text, Emit&& emit) {
  if (text.empty()) return;
  const pcre2_code* code = gpt2_regex().code;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  NN_CHECK(md != nullptr, "out of memory for PCRE2's match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), pos, 0, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {  // only invalid UTF-8 is left
      emit(text.substr(pos));
      break;
    }
    if (rc < 0) {
      pcre2_match_data_free(md);
      NN_CHECK(false, "PCRE2 match failed with code " << rc << " at byte " << pos);
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (start > pos) emit(text.substr(pos, start - pos));  // a run of invalid UTF-8: a word of its own
    emit(text.substr(start, end - start));
    pos = end;
  }
  pcre2_match_data_free(md);
}

}  // namespace

std::vector<std::string_view> bpe_pretokenize(std::string_view text) {
  std::vector<std::string_view> words;
  for_each_pretoken(text, [&](std::string_view w) { words.push_back(w); });
  return words;
}

// ============================================================================================
// training
// ============================================================================================
namespace {

constexpr uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
constexpr int32_t key_left(uint64_t k) { return static_cast<int32_t>(k >> 32); }
constexpr int32_t key_right(uint64_t k) { return static_cast<int32_t>(k & 0xFFFFFFFFu); }

// The training state both versions share: the vocabulary so far and the corpus as distinct
// words (each a list of token ids) with how often each occurs.
struct TrainState {
  std::vector<std::string> vocab;
  std::unordered_map<std::string, int32_t> ids;  // bytes -> id
  std::vector<BpeMerge> merges;
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;

  // Records the merge (a, b) and returns the id of a + b: an existing token's if those bytes
  // are already one (HF's trainer does the same: the vocabulary then does not grow).
  int32_t add_merge(int32_t a, int32_t b) {
    std::string bytes = vocab[a] + vocab[b];
    auto it = ids.find(bytes);
    int32_t id;
    if (it != ids.end()) {
      id = it->second;
    } else {
      id = static_cast<int32_t>(vocab.size());
      ids.emplace(bytes, id);
      vocab.push_back(std::move(bytes));
    }
    merges.push_back({a, b, id});
    return id;
  }
};

// Rewrites `w` with every (a, b) replaced by `id`, left to right: "aaa" with (a, a) -> "Xa".
void merge_word(std::vector<int32_t>& w, int32_t a, int32_t b, int32_t id) {
  size_t out = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
      w[out++] = id;
      ++i;
    } else {
      w[out++] = w[i];
    }
  }
  w.resize(out);
}

// v1, the lesson's reference: count every adjacent pair of every word (times the word's
// count), take the most frequent (ties: the smallest (left, right) ids), rewrite every word.
void train_v1(TrainState& st, size_t vocab_size) {
  while (st.vocab.size() < vocab_size) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pair_counts;  // ordered: ties go to the smallest pair
    for (size_t w = 0; w < st.words.size(); ++w) {
      const auto& word = st.words[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) pair_counts[{word[i], word[i + 1]}] += st.counts[w];
    }
    if (pair_counts.empty()) break;  // every word is one token: nothing left to merge
    auto best = pair_counts.begin();
    for (auto it = pair_counts.begin(); it != pair_counts.end(); ++it)
      if (it->second > best->second) best = it;  // strictly greater: the first (smallest) pair wins ties
    const auto [a, b] = best->first;
    const int32_t id = st.add_merge(a, b);
    for (auto& word : st.words) merge_word(word, a, b, id);
  }
}

// v2: the same merges, without recounting. pair_counts holds every pair's count; where[p]
// lists the words p occurs in (maybe with stale entries: a word that no longer has p is
// rewritten as a no-op). A merge touches only the words in where[p]: their pairs are
// subtracted, the word rewritten, its pairs added back. Counts of old pairs can only drop;
// the new pairs (with the new id) are pushed on a max-heap. Heap entries can be stale (too
// high): a popped entry whose count is not the current one is pushed back with the current
// count, so the first up-to-date entry popped is the true maximum.
struct HeapEntry {
  int64_t count;
  uint64_t pair;
  bool operator<(const HeapEntry& o) const {  // std::priority_queue pops the largest
    if (count != o.count) return count < o.count;
    return pair > o.pair;  // equal counts: the smaller pair is "larger", popped first
  }
};

void train_v2(TrainState& st, size_t vocab_size) {
  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t w = 0; w < st.words.size(); ++w) {
    const auto& word = st.words[w];
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const uint64_t k = pair_key(word[i], word[i + 1]);
      pair_counts[k] += st.counts[w];
      auto& list = where[k];
      if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
    }
  }
  std::priority_queue<HeapEntry> heap;
  for (const auto& [k, c] : pair_counts) heap.push({c, k});

  std::vector<uint64_t> new_pairs;
  while (st.vocab.size() < vocab_size && !heap.empty()) {
    HeapEntry top = heap.top();
    heap.pop();
    const int64_t now = pair_counts[top.pair];
    if (now != top.count) {  // stale: requeue with its current count
      if (now > 0) heap.push({now, top.pair});
      continue;
    }
    if (now <= 0) break;
    const int32_t a = key_left(top.pair), b = key_right(top.pair);
    const int32_t id = st.add_merge(a, b);

    std::vector<int32_t> touched = std::move(where[top.pair]);
    where.erase(top.pair);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    new_pairs.clear();
    for (int32_t w : touched) {
      auto& word = st.words[w];
      const int64_t c = st.counts[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) pair_counts[pair_key(word[i], word[i + 1])] -= c;
      merge_word(word, a, b, id);
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        const uint64_t k = pair_key(word[i], word[i + 1]);
        pair_counts[k] += c;
        if (word[i] == id || word[i + 1] == id) {  // a pair this merge created (or added to)
          auto& list = where[k];
          if (list.empty() || list.back() != w) list.push_back(w);
          new_pairs.push_back(k);
        }
      }
    }
    // Pairs with the new id gained count: push them with their count now. Usually they are
    // new, but when the merge reused an existing token's id (see add_merge) a pair may have
    // existed with a lower count, and a heap entry below the true count would break the
    // "entries are never too low" rule the lazy heap relies on. Duplicates are harmless:
    // the extra ones are stale when popped.
    std::sort(new_pairs.begin(), new_pairs.end());
    new_pairs.erase(std::unique(new_pairs.begin(), new_pairs.end()), new_pairs.end());
    for (uint64_t k : new_pairs) heap.push({pair_counts[k], k});
  }
}

}  // namespace

BpeTokenizer BpeTokenizer::train(std::string_view text, int vocab_size, const std::vector<std::string>& specials,
                                 BpeTrainVersion version) {
  NN_CHECK(!text.empty(), "BPE training needs a non-empty text (the corpus is empty)");
  const size_t min_size = 256 + specials.size();
  NN_CHECK(vocab_size >= 0 && static_cast<size_t>(vocab_size) >= min_size,
           "BPE vocab size " << vocab_size << " is smaller than 256 bytes + " << specials.size()
                             << " special tokens = " << min_size << ": ask for at least " << min_size);
  TrainState st;
  // Ids as HF's BpeTrainer gives them: specials, then the bytes in the order of their
  // GPT-2 characters (the code points), then the merges.
  for (const auto& s : specials) {
    NN_CHECK(!s.empty(), "a special token cannot be empty");
    NN_CHECK(!st.ids.count(s), "special token '" << s << "' is listed twice");
    st.ids.emplace(s, static_cast<int32_t>(st.vocab.size()));
    st.vocab.push_back(s);
  }
  std::array<int, 256> by_code{};
  for (int b = 0; b < 256; ++b) by_code[b] = b;
  std::sort(by_code.begin(), by_code.end(), [](int x, int y) { return byte_map().code[x] < byte_map().code[y]; });
  std::array<int32_t, 256> byte_id{};
  for (int b : by_code) {
    const std::string bytes(1, static_cast<char>(b));
    auto it = st.ids.find(bytes);  // a one-byte special would already own it
    if (it != st.ids.end()) {
      byte_id[b] = it->second;
      continue;
    }
    byte_id[b] = static_cast<int32_t>(st.vocab.size());
    st.ids.emplace(bytes, byte_id[b]);
    st.vocab.push_back(bytes);
  }
  // The corpus as distinct words, sorted (the order changes nothing, but makes runs and
  // debugging sessions reproducible).
  std::unordered_map<std::string_view, int64_t> word_counts;
  for_each_pretoken(text, [&](std::string_view w) { ++word_counts[w]; });
  std::vector<std::pair<std::string_view, int64_t>> sorted(word_counts.begin(), word_counts.end());
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [w, c] : sorted) {
    std::vector<int32_t> ids(w.size());
    for (size_t i = 0; i < w.size(); ++i) ids[i] = byte_id[static_cast<unsigned char>(w[i])];
    st.words.push_back(std::move(ids));
    st.counts.push_back(c);
  }
  if (version == BpeTrainVersion::v1_plain)
    train_v1(st, static_cast<size_t>(vocab_size));
  else
    train_v2(st, static_cast<size_t>(vocab_size));

  std::vector<int32_t> special_ids;
  for (size_t i = 0; i < specials.size(); ++i) special_ids.push_back(static_cast<int32_t>(i));
  return from_parts(std::move(st.vocab), std::move(st.merges), std::move(special_ids));
}

// ============================================================================================
// the tables, encode, decode
// ============================================================================================
BpeTokenizer BpeTokenizer::from_parts(std::vector<std::string> vocab, std::vector<BpeMerge> merges,
                                      std::vector<int32_t> special_ids) {
  BpeTokenizer t;
  t.vocab_ = std::move(vocab);
  t.merges_ = std::move(merges);
  t.special_ids_ = std::move(special_ids);
  t.build_tables();
  return t;
}

void BpeTokenizer::build_tables() {
  const auto n = static_cast<int64_t>(vocab_.size());
  token_ids_.clear();
  merge_rank_.clear();
  byte_id_.fill(-1);
  std::vector<char> is_special(vocab_.size(), 0);
  for (int32_t s : special_ids_) {
    NN_CHECK(s >= 0 && s < n, "special token id " << s << " is outside the vocabulary [0, " << n << ")");
    NN_CHECK(!vocab_[s].empty(), "special token id " << s << " is empty");
    is_special[s] = 1;
  }
  for (int64_t id = 0; id < n; ++id) {
    NN_CHECK(!vocab_[id].empty(), "token id " << id << " has no bytes (an id missing from the vocabulary?)");
    auto [it, fresh] = token_ids_.emplace(vocab_[id], static_cast<int32_t>(id));
    NN_CHECK(fresh, "tokens " << it->second << " and " << id << " are the same bytes '"
                              << bpe_token_to_text(vocab_[id]) << "': a vocabulary lists each token once");
    if (vocab_[id].size() == 1 && !is_special[id]) byte_id_[static_cast<unsigned char>(vocab_[id][0])] = static_cast<int32_t>(id);
  }
  for (int b = 0; b < 256; ++b)
    NN_CHECK(byte_id_[b] >= 0, "the vocabulary has no token for byte " << b << " ('" << bpe_byte_to_unicode(static_cast<unsigned char>(b))
                                                                        << "'): a byte-level BPE needs all 256");
  for (size_t r = 0; r < merges_.size(); ++r) {
    const BpeMerge& m = merges_[r];
    NN_CHECK(m.left >= 0 && m.left < n && m.right >= 0 && m.right < n && m.result >= 0 && m.result < n,
             "merge " << r << " (" << m.left << ", " << m.right << ") -> " << m.result << " uses an id outside [0, " << n << ")");
    NN_CHECK(vocab_[m.result] == vocab_[m.left] + vocab_[m.right],
             "merge " << r << ": token " << m.result << " is not the concatenation of tokens " << m.left << " and " << m.right);
    // A pair listed twice keeps its LAST rank, as Hugging Face's BPE does (its merge map is
    // built in file order, later entries overwriting). A trainer can learn a pair twice: after
    // a merge that reuses an existing token's id, the pair can occur again.
    merge_rank_[pair_key(m.left, m.right)] = static_cast<int32_t>(r);
  }
}

int32_t BpeTokenizer::token_id(std::string_view bytes) const {
  auto it = token_ids_.find(std::string(bytes));
  return it == token_ids_.end() ? -1 : it->second;
}

// One word: start from its bytes; repeatedly take the adjacent pair with the lowest merge
// rank (the earliest learned) and merge every occurrence of it, left to right, until no
// pair has a merge. (GPT-2's encoder.py bpe(); HF's Word::merge_all gives the same result
// for merges learned by a trainer, where a merge only uses tokens of earlier merges.)
void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<int32_t> sym(word.size());
  for (size_t i = 0; i < word.size(); ++i) sym[i] = byte_id_[static_cast<unsigned char>(word[i])];
  while (sym.size() > 1) {
    int32_t best_rank = -1;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      auto it = merge_rank_.find(pair_key(sym[i], sym[i + 1]));
      if (it != merge_rank_.end() && (best_rank < 0 || it->second < best_rank)) best_rank = it->second;
    }
    if (best_rank < 0) break;
    const BpeMerge& m = merges_[best_rank];
    merge_word(sym, m.left, m.right, m.result);
  }
  out.insert(out.end(), sym.begin(), sym.end());
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  // Words repeat (Zipf): a cache of this call's words (keys point into `text`) does the
  // merge loop once per distinct word. It is local, so encode stays const and thread-safe.
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;  // word -> [start, len) in `flat`
  std::vector<int32_t> flat;
  auto encode_plain = [&](std::string_view part) {
    for_each_pretoken(part, [&](std::string_view w) {
      auto it = cache.find(w);
      if (it == cache.end()) {
        const auto start = static_cast<uint32_t>(flat.size());
        encode_word(w, flat);
        it = cache.emplace(w, std::make_pair(start, static_cast<uint32_t>(flat.size()) - start)).first;
      }
      out.insert(out.end(), flat.begin() + it->second.first, flat.begin() + it->second.first + it->second.second);
    });
  };
  if (!allow_special || special_ids_.empty()) {
    encode_plain(text);
    return out;
  }
  // Cut the specials out first: the earliest occurrence of any, the longest at a tie.
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best_at = std::string_view::npos;
    int32_t best_id = -1;
    for (int32_t s : special_ids_) {
      const size_t at = text.find(vocab_[s], pos);
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && vocab_[s].size() > vocab_[best_id].size())) {
        best_at = at;
        best_id = s;
      }
    }
    if (best_id < 0) {
      encode_plain(text.substr(pos));
      break;
    }
    encode_plain(text.substr(pos, best_at - pos));
    out.push_back(best_id);
    pos = best_at + vocab_[best_id].size();
  }
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    NN_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), "cannot decode id " << ids[i] << " at position " << i
                                                                      << ": the vocabulary has ids 0.." << vocab_size() - 1);
    text += vocab_[ids[i]];
  }
  return text;
}

// ============================================================================================
// files: Hugging Face tokenizer.json, GPT-2 vocab.json + merges.txt
// ============================================================================================
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

std::string read_text(const std::string& path, const std::string& what) {
  const std::vector<uint8_t> bytes = read_file(path, what, "check the path");
  return std::string(bytes.begin(), bytes.end());
}

void write_text(const std::string& path, const std::string& text, const std::string& what) {
  std::ofstream f(path, std::ios::binary);
  NN_CHECK(f, "cannot write " << what << " " << path << ": check that its folder exists and is writable");
  f << text;
  f.close();
  NN_CHECK(f, "writing " << what << " " << path << " failed (disk full?)");
}

json parse_json(std::string_view text, const std::string& where) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    NN_CHECK(false, where << ": not valid JSON (truncated or corrupt file?): " << e.what());
  }
  return {};
}

// Builds the tokenizer from token texts (byte-level characters) -> id, merges as text
// pairs, and the special tokens (raw content -> id). Shared by both formats.
BpeTokenizer from_texts(const std::vector<std::pair<std::string, int64_t>>& vocab_texts,
                        const std::vector<std::pair<std::string, std::string>>& merge_texts,
                        const std::vector<std::pair<std::string, int64_t>>& specials, const std::string& where) {
  int64_t max_id = -1;
  for (const auto& [t, id] : vocab_texts) max_id = std::max(max_id, id);
  for (const auto& [t, id] : specials) max_id = std::max(max_id, id);
  NN_CHECK(max_id >= 0, where << ": the vocabulary is empty");
  // Ids run 0..N-1 without holes, so the largest is below the number of entries. Checked
  // before allocating: a small file naming id 2^31 must not make us allocate 2^31 tokens.
  const auto entries = static_cast<int64_t>(vocab_texts.size() + specials.size());
  NN_CHECK(max_id < entries, where << ": id " << max_id << " is listed but there are only " << entries
                                   << " tokens, so some id below it has no token (ids must run 0..N-1 without holes)");
  std::vector<std::string> vocab(static_cast<size_t>(max_id + 1));
  std::vector<char> filled(vocab.size(), 0);
  std::vector<int32_t> special_ids;
  std::unordered_map<std::string, int32_t> text_ids;  // token text as in the file -> id
  for (const auto& [content, id] : specials) {
    NN_CHECK(id >= 0, where << ": special token '" << content << "' has a negative id " << id);
    NN_CHECK(!filled[id], where << ": id " << id << " is given to two special tokens");
    NN_CHECK(!content.empty(), where << ": special token " << id << " is empty");
    vocab[id] = content;
    filled[id] = 1;
    special_ids.push_back(static_cast<int32_t>(id));
    text_ids.emplace(content, static_cast<int32_t>(id));
  }
  for (const auto& [text, id] : vocab_texts) {
    NN_CHECK(id >= 0, where << ": token '" << text << "' has a negative id " << id);
    auto sp = text_ids.find(text);
    if (sp != text_ids.end() && sp->second == id) continue;  // the special, listed in the vocabulary too
    NN_CHECK(!filled[id], where << ": id " << id << " is given to two tokens (the second is '" << text << "')");
    vocab[id] = bpe_token_from_text(text, where);
    filled[id] = 1;
    text_ids.emplace(text, static_cast<int32_t>(id));
  }
  for (size_t id = 0; id < vocab.size(); ++id)
    NN_CHECK(filled[id], where << ": id " << id << " has no token (ids must run 0.." << max_id << " without holes)");
  std::vector<BpeMerge> merges;
  merges.reserve(merge_texts.size());
  for (size_t r = 0; r < merge_texts.size(); ++r) {
    const auto& [l, rt] = merge_texts[r];
    auto li = text_ids.find(l), ri = text_ids.find(rt), res = text_ids.find(l + rt);
    NN_CHECK(li != text_ids.end(), where << ": merge " << r << " ('" << l << "' '" << rt << "'): '" << l << "' is not in the vocabulary");
    NN_CHECK(ri != text_ids.end(), where << ": merge " << r << " ('" << l << "' '" << rt << "'): '" << rt << "' is not in the vocabulary");
    NN_CHECK(res != text_ids.end(), where << ": merge " << r << " ('" << l << "' '" << rt << "'): its result '" << l + rt
                                          << "' is not in the vocabulary");
    merges.push_back({li->second, ri->second, res->second});
  }
  try {
    return BpeTokenizer::from_parts(std::move(vocab), std::move(merges), std::move(special_ids));
  } catch (const Error& e) {
    NN_CHECK(false, where << ": " << e.what());
  }
  return {};
}

// A JSON field that must be null or absent, or equal `ok`.
bool null_or(const json& obj, const char* key, const json& ok) {
  if (!obj.contains(key) || obj[key].is_null()) return true;
  return obj[key] == ok;
}

void check_byte_level(const json& pt, const char* what, const std::string& where) {
  NN_CHECK(pt.is_object() && pt.value("type", "") == "ByteLevel",
           where << ": " << what << " is " << pt.dump().substr(0, 200)
                 << "; only GPT-2's ByteLevel " << what << " (a single one, not a Sequence) is supported");
}

}  // namespace

std::string BpeTokenizer::to_hf_json() const {
  ordered_json added = ordered_json::array();
  std::vector<char> is_special(vocab_.size(), 0);
  for (int32_t s : special_ids_) {
    is_special[s] = 1;
    added.push_back({{"id", s}, {"content", vocab_[s]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < vocab_.size(); ++id)
    vocab[is_special[id] ? vocab_[id] : bpe_token_to_text(vocab_[id])] = id;
  ordered_json merges = ordered_json::array();
  for (const auto& m : merges_) merges.push_back({bpe_token_to_text(vocab_[m.left]), bpe_token_to_text(vocab_[m.right])});
  const ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  ordered_json doc = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", nullptr},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}},
  };
  // Bytes that are not valid UTF-8 exist only inside specials here (tokens are mapped text);
  // `replace` keeps dump() from throwing on them.
  return doc.dump(2, ' ', false, ordered_json::error_handler_t::replace);
}

void BpeTokenizer::save_hf_json(const std::string& path) const { write_text(path, to_hf_json(), "tokenizer.json"); }

BpeTokenizer BpeTokenizer::from_hf_json(std::string_view text, const std::string& where) {
  // A field of the wrong JSON type (a number where a string belongs) throws the library's
  // type_error from deep inside; it becomes an nn::Error naming the file like the rest.
  try {
    return from_hf_json_checked(text, where);
  } catch (const json::exception& e) {
    NN_CHECK(false, where << ": a field has the wrong type: " << e.what());
  }
  return {};
}

BpeTokenizer BpeTokenizer::from_hf_json_checked(std::string_view text, const std::string& where) {
  const json doc = parse_json(text, where);
  NN_CHECK(doc.is_object() && doc.contains("model") && doc["model"].is_object(),
           where << ": no \"model\" object: not a Hugging Face tokenizer.json");
  const json& model = doc["model"];
  NN_CHECK(model.value("type", "") == "BPE", where << ": model.type is " << model.value("type", std::string("missing"))
                                                   << ", expected BPE");
  NN_CHECK(null_or(model, "continuing_subword_prefix", "") && null_or(model, "end_of_word_suffix", "") &&
               null_or(model, "dropout", 0.0) && null_or(model, "byte_fallback", false) && null_or(model, "ignore_merges", false),
           where << ": this BPE uses dropout, byte_fallback, ignore_merges or subword prefixes/suffixes: not supported");
  NN_CHECK(!doc.contains("normalizer") || doc["normalizer"].is_null(),
           where << ": it has a normalizer (" << doc["normalizer"].dump().substr(0, 100) << "): not supported");
  NN_CHECK(doc.contains("pre_tokenizer") && !doc["pre_tokenizer"].is_null(), where << ": no pre_tokenizer: expected ByteLevel");
  const json& pt = doc["pre_tokenizer"];
  check_byte_level(pt, "pre_tokenizer", where);
  NN_CHECK(pt.value("add_prefix_space", false) == false && pt.value("use_regex", true) == true,
           where << ": the ByteLevel pre_tokenizer must have add_prefix_space false and use_regex true (GPT-2's)");
  if (doc.contains("decoder") && !doc["decoder"].is_null()) check_byte_level(doc["decoder"], "decoder", where);

  NN_CHECK(model.contains("vocab") && model["vocab"].is_object(), where << ": model.vocab is missing or not an object");
  NN_CHECK(model.contains("merges") && model["merges"].is_array(), where << ": model.merges is missing or not an array");
  std::vector<std::pair<std::string, int64_t>> vocab_texts, specials;
  for (const auto& [tok, id] : model["vocab"].items()) {
    NN_CHECK(id.is_number_integer(), where << ": model.vocab['" << tok << "'] is " << id.dump() << ", not an integer id");
    vocab_texts.emplace_back(tok, id.get<int64_t>());
  }
  std::vector<std::pair<std::string, std::string>> merge_texts;
  size_t r = 0;
  for (const auto& m : model["merges"]) {
    // Two spellings: ["a", "b"] (tokenizers >= 0.20) and "a b" (older files, GPT-2's hub copy).
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merge_texts.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      NN_CHECK(m.is_string(), where << ": merge " << r << " is " << m.dump().substr(0, 100) << ", expected [\"a\", \"b\"] or \"a b\"");
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      NN_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < s.size() && s.find(' ', sp + 1) == std::string::npos,
               where << ": merge " << r << " '" << s << "' is not two tokens separated by one space");
      merge_texts.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
    ++r;
  }
  if (doc.contains("added_tokens") && !doc["added_tokens"].is_null()) {
    NN_CHECK(doc["added_tokens"].is_array(), where << ": added_tokens is not an array");
    for (const auto& a : doc["added_tokens"]) {
      NN_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_integer() && a.contains("content") && a["content"].is_string(),
               where << ": an added token without an integer id and a string content: " << a.dump().substr(0, 100));
      specials.emplace_back(a["content"].get<std::string>(), a["id"].get<int64_t>());
    }
  }
  return from_texts(vocab_texts, merge_texts, specials, where);
}

BpeTokenizer BpeTokenizer::load_hf_json(const std::string& path) {
  return from_hf_json(read_text(path, "tokenizer.json"), path);
}

void BpeTokenizer::save_gpt2(const std::string& vocab_json_path, const std::string& merges_txt_path) const {
  std::vector<char> is_special(vocab_.size(), 0);
  for (int32_t s : special_ids_) is_special[s] = 1;
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < vocab_.size(); ++id) vocab[is_special[id] ? vocab_[id] : bpe_token_to_text(vocab_[id])] = id;
  write_text(vocab_json_path, vocab.dump(-1, ' ', false, ordered_json::error_handler_t::replace), "vocab.json");
  std::string merges = "#version: 0.2\n";
  for (const auto& m : merges_) merges += bpe_token_to_text(vocab_[m.left]) + " " + bpe_token_to_text(vocab_[m.right]) + "\n";
  write_text(merges_txt_path, merges, "merges.txt");
}

BpeTokenizer BpeTokenizer::from_gpt2(std::string_view vocab_json, std::string_view merges_txt,
                                     const std::vector<std::string>& specials, const std::string& where) {
  try {
    return from_gpt2_checked(vocab_json, merges_txt, specials, where);
  } catch (const json::exception& e) {
    NN_CHECK(false, where << ": a field has the wrong type: " << e.what());
  }
  return {};
}

BpeTokenizer BpeTokenizer::from_gpt2_checked(std::string_view vocab_json, std::string_view merges_txt,
                                             const std::vector<std::string>& specials, const std::string& where) {
  const json doc = parse_json(vocab_json, where + " (vocab.json)");
  NN_CHECK(doc.is_object(), where << ": vocab.json is not a JSON object {token: id}");
  std::vector<std::pair<std::string, int64_t>> vocab_texts, special_ids;
  for (const auto& [tok, id] : doc.items()) {
    NN_CHECK(id.is_number_integer(), where << ": vocab.json['" << tok << "'] is " << id.dump() << ", not an integer id");
    if (std::find(specials.begin(), specials.end(), tok) != specials.end())
      special_ids.emplace_back(tok, id.get<int64_t>());
    else
      vocab_texts.emplace_back(tok, id.get<int64_t>());
  }
  for (const auto& s : specials)
    NN_CHECK(std::any_of(special_ids.begin(), special_ids.end(), [&](const auto& p) { return p.first == s; }),
             where << ": special token '" << s << "' is not in vocab.json");
  std::vector<std::pair<std::string, std::string>> merge_texts;
  size_t line_no = 0, pos = 0;
  while (pos < merges_txt.size()) {
    size_t end = merges_txt.find('\n', pos);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    NN_CHECK(sp != std::string_view::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string_view::npos,
             where << ": merges.txt line " << line_no << " '" << line << "' is not two tokens separated by one space");
    merge_texts.emplace_back(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
  }
  return from_texts(vocab_texts, merge_texts, special_ids, where);
}

BpeTokenizer BpeTokenizer::load_gpt2(const std::string& vocab_json_path, const std::string& merges_txt_path,
                                     const std::vector<std::string>& specials) {
  return from_gpt2(read_text(vocab_json_path, "vocab.json"), read_text(merges_txt_path, "merges.txt"), specials,
                   vocab_json_path + " + " + merges_txt_path);
}

}  // namespace nn
