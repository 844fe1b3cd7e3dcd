// io/bpe.h: a byte-level BPE tokenizer (GPT-2's, the one Llama 3, Qwen, Mistral-Nemo and
// SmolLM still use): train it on a text, encode, decode, special tokens, and read/write it in
// Hugging Face's tokenizer.json and GPT-2's vocab.json + merges.txt. Lesson 11.
//
// The pipeline, in the order the data flows:
//   1. special tokens ("<|endoftext|>") are cut out of the text first; they are never split;
//   2. pre-tokenisation: GPT-2's regular expression cuts the rest into words
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (PCRE2 with UTF + UCP, so \p{L} is any Unicode letter). Merges never cross a word, so
//      " the" is one unit and "the." can never become one token. Bytes that are not valid
//      UTF-8 match no branch: each run of them becomes a word of its own (Hugging Face cannot
//      see such bytes at all: a Python str is Unicode);
//   3. each word starts as its bytes (256 base tokens, so any input encodes: no <unk>), and
//      the learned merges are applied in the order they were learned (lowest rank first);
//   4. decode concatenates the bytes of each id.
// Ids: as Hugging Face's BpeTrainer numbers them, so that ours and theirs agree id for id:
// the special tokens first (0 .. S-1), then the 256 bytes in the order of GPT-2's
// byte-to-unicode characters (the printable ASCII '!'..'~' first: byte '!' is id S, byte 0
// is id S + 188), then one id per merge. A merge whose result is already a token (two merges
// can spell the same bytes: "ab"+"c" and "a"+"bc") reuses that id, as HF's trainer does.
//
// GPT-2's byte-to-unicode map exists only for the files: vocab.json, merges.txt and
// tokenizer.json store tokens as text, and a raw byte such as '\n' or 0xff would not survive
// as a JSON key or a space-separated merges line. So each byte gets a printable character
// (printable ones keep their own, the others get U+0100 and up: ' ' -> 'Ġ', '\n' -> 'Ċ').
// In memory this file works on plain bytes.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nn {

// ---- GPT-2's byte <-> unicode map ----------------------------------------------------------
// The character (as UTF-8) that stands for byte b in the files.
const std::string& bpe_byte_to_unicode(unsigned char b);
// The byte a code point stands for, or -1 if it is not one of the 256 characters.
int bpe_unicode_to_byte(uint32_t code_point);
// A token's bytes from its text in the files (the inverse of the map, character by
// character); nn::Error naming `what` if a character is not in the map or the UTF-8 is bad.
std::string bpe_token_from_text(std::string_view text, std::string_view what);
// A token's text for the files: each byte through the map.
std::string bpe_token_to_text(std::string_view bytes);

// ---- pre-tokenisation ----------------------------------------------------------------------
// Cuts `text` into GPT-2's pre-tokens (the words the merges work inside). The views point
// into `text`; together they cover it exactly, in order.
std::vector<std::string_view> bpe_pretokenize(std::string_view text);

// ---- the tokenizer -------------------------------------------------------------------------
struct BpeMerge {
  int32_t left = 0, right = 0;  // the two ids merged
  int32_t result = 0;           // the id of their concatenation
};

// How to train: v1 is the lesson's reference, the merge loop in plain code (count every pair
// of every word, take the most frequent, rewrite every word, repeat: O(merges x corpus)).
// v2 keeps the pair counts and updates them only where a merge changed a word (and a heap of
// candidate pairs), as Hugging Face's trainer does: the same merges, in seconds on Tiny
// Shakespeare. Both pick, among the pairs of highest count, the one with the smallest
// (left id, right id): HF's tie-break, so the merges agree with theirs too.
enum class BpeTrainVersion { v1_plain = 1, v2_incremental = 2 };

class BpeTokenizer {
 public:
  BpeTokenizer() = default;

  // Learns merges on `text` until the vocabulary (specials + 256 bytes + merges) has
  // `vocab_size` tokens, or no pair is left (then it is smaller). The text is training data
  // only: special-token strings inside it are ordinary text here, as in HF's trainer.
  // nn::Error on an empty text, vocab_size < 256 + specials, an empty or duplicate special.
  static BpeTokenizer train(std::string_view text, int vocab_size,
                            const std::vector<std::string>& specials = {},
                            BpeTrainVersion version = BpeTrainVersion::v2_incremental);

  // Builds one from a vocabulary (id -> bytes, every id in [0, size) exactly once), merges
  // in rank order, and which ids are special. Validates: every single byte has a token,
  // each merge's parts and result exist and the result is the parts' concatenation.
  static BpeTokenizer from_parts(std::vector<std::string> vocab, std::vector<BpeMerge> merges,
                                 std::vector<int32_t> special_ids);

  // Text -> ids. Special tokens in the text become their ids when `allow_special` (else they
  // are plain text, as a chat template's user content should be).
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  // Ids -> bytes (special tokens as their text). nn::Error on an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;

  int vocab_size() const { return static_cast<int>(vocab_.size()); }
  const std::vector<std::string>& vocab() const { return vocab_; }  // id -> bytes
  const std::vector<BpeMerge>& merges() const { return merges_; }   // in rank order
  const std::vector<int32_t>& special_ids() const { return special_ids_; }
  int32_t byte_id(unsigned char b) const { return byte_id_[b]; }
  // The id of a token's exact bytes, or -1.
  int32_t token_id(std::string_view bytes) const;

  // ---- files ----
  // Hugging Face tokenizer.json: model BPE (vocab, merges), ByteLevel pre-tokenizer (no
  // prefix space, GPT-2's regex) and decoder, the specials as added_tokens. What
  // tokenizers.Tokenizer.from_file reads, and what its save() writes for such a tokenizer.
  std::string to_hf_json() const;
  void save_hf_json(const std::string& path) const;
  // nn::Error (naming the file and what is wrong) on bad JSON, a truncated file, a model that
  // is not byte-level BPE, unknown tokens in merges, duplicate or missing ids.
  static BpeTokenizer from_hf_json(std::string_view json, const std::string& where = "<memory>");
  static BpeTokenizer load_hf_json(const std::string& path);
  // GPT-2's pair: vocab.json ({token text: id}, specials included) and merges.txt
  // ("#version: 0.2", then one "left right" per line, in rank order). Which tokens are special
  // is not in these files: `specials` names them (e.g. {"<|endoftext|>"}).
  void save_gpt2(const std::string& vocab_json_path, const std::string& merges_txt_path) const;
  static BpeTokenizer from_gpt2(std::string_view vocab_json, std::string_view merges_txt,
                                const std::vector<std::string>& specials = {},
                                const std::string& where = "<memory>");
  static BpeTokenizer load_gpt2(const std::string& vocab_json_path, const std::string& merges_txt_path,
                                const std::vector<std::string>& specials = {});

 private:
  static BpeTokenizer from_hf_json_checked(std::string_view json, const std::string& where);
  static BpeTokenizer from_gpt2_checked(std::string_view vocab_json, std::string_view merges_txt,
                                        const std::vector<std::string>& specials, const std::string& where);
  void build_tables();  // byte_id_, token_ids_, merge_rank_ from vocab_ / merges_
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> vocab_;  // id -> bytes
  std::vector<BpeMerge> merges_;    // rank -> merge
  std::vector<int32_t> special_ids_;
  std::array<int32_t, 256> byte_id_{};
  std::unordered_map<std::string, int32_t> token_ids_;  // bytes -> id
  // (left << 32 | right) -> rank: the merge table encode looks pairs up in.
  std::unordered_map<uint64_t, int32_t> merge_rank_;
};

}  // namespace nn
