// tests/test_bpe.cpp: the byte-level BPE tokenizer (io/bpe.h): GPT-2's byte map and
// pre-tokenisation, a merge order worked by hand, the fast trainer against the plain one,
// round trips of arbitrary bytes, special tokens, both file formats, and bad input.
// (Hugging Face's tokenizers is compared in tests/python/test_bpe_hf.py.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/bpe.h"
#include "nn/check.h"
#include "tests/cli_helpers.h"
#include "test_util.h"

using Catch::Matchers::Contains;
using testing::error_of;

namespace {

// The merges as text pairs ("a" "b"), easier to read in a failure than ids.
std::vector<std::pair<std::string, std::string>> merge_texts(const nn::BpeTokenizer& t) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& m : t.merges()) out.emplace_back(t.vocab()[m.left], t.vocab()[m.right]);
  return out;
}

// English-like text with repeats and punctuation, numbers, contractions and newlines: enough
// structure that hundreds of merges exist, small enough for the plain trainer.
std::string sample_text() {
  std::mt19937 rng(1234);
  const std::vector<std::string> words = {"the", "The", "cat", "sat", "on", "mat", "and", "then", "there", "they're",
                                          "I'll", "we've", "it's", "don't", "42", "1999", "hello", "world", "naïve",
                                          "café", "über", "то", "слово", "日本語", "!", "?!", "...", "--", "(a)"};
  const std::vector<std::string> syllables = {"ka", "to", "ri", "men", "str", "ou", "ing", "ed", "lo", "qu", "é", "ß"};
  std::string text;
  for (int i = 0; i < 4000; ++i) {
    // Zipf-like: lower indices far more often; one word in four made of random syllables.
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    if (rng() % 4 == 0) {
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < n; ++k) text += syllables[rng() % syllables.size()];
    } else {
      const size_t k = static_cast<size_t>(u * u * u * static_cast<double>(words.size()));
      text += words[std::min(k, words.size() - 1)];
    }
    const int sep = static_cast<int>(rng() % 20);
    text += sep == 0 ? "\n" : sep == 1 ? "  " : sep == 2 ? ",\n\n" : " ";
  }
  return text;
}

std::string random_bytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

}  // namespace

TEST_CASE("bpe: GPT-2's byte-to-unicode map gives printable bytes themselves and the rest U+0100 up", "[bpe]") {
  REQUIRE(nn::bpe_byte_to_unicode('a') == "a");
  REQUIRE(nn::bpe_byte_to_unicode('!') == "!");
  REQUIRE(nn::bpe_byte_to_unicode(' ') == "\xC4\xA0");   // U+0120 'Ġ'
  REQUIRE(nn::bpe_byte_to_unicode('\n') == "\xC4\x8A");  // U+010A 'Ċ'
  REQUIRE(nn::bpe_byte_to_unicode(0) == "\xC4\x80");     // U+0100 'Ā'
  REQUIRE(nn::bpe_byte_to_unicode(0xAD) == "\xC5\x83");  // the soft hyphen, the last of the 68: U+0143
  REQUIRE(nn::bpe_byte_to_unicode(0xFF) == "\xC3\xBF");  // 'ÿ' is printable: itself
  for (int b = 0; b < 256; ++b) {
    const std::string bytes(1, static_cast<char>(b));
    REQUIRE(nn::bpe_token_from_text(nn::bpe_token_to_text(bytes), "test") == bytes);
  }
  REQUIRE(nn::bpe_unicode_to_byte(0x120) == ' ');
  REQUIRE(nn::bpe_unicode_to_byte(0x20) == -1);  // a plain space is not one of the characters
  REQUIRE_THAT(error_of([] { nn::bpe_token_from_text("a b", "vocab.json"); }),
               Contains("vocab.json") && Contains("U+20") && Contains("byte-level"));
  REQUIRE_THAT(error_of([] { nn::bpe_token_from_text("a\xC4", "f"); }), Contains("malformed UTF-8"));
}

TEST_CASE("bpe: pre-tokenisation cuts as GPT-2's regex does and covers the text exactly", "[bpe]") {
  using V = std::vector<std::string_view>;
  REQUIRE(nn::bpe_pretokenize("Hello world's 123  \n  x") == V{"Hello", " world", "'s", " 123", "  \n ", " x"});
  REQUIRE(nn::bpe_pretokenize("I'll   go.\n") == V{"I", "'ll", "  ", " go", ".", "\n"});
  REQUIRE(nn::bpe_pretokenize("naïve café") == V{"naïve", " café"});  // \p{L} is Unicode's
  REQUIRE(nn::bpe_pretokenize("x²3") == V{"x", "²3"});                 // '²' is \p{N}
  REQUIRE(nn::bpe_pretokenize("").empty());
  // Invalid UTF-8 matches no branch: each run of it is a word of its own.
  REQUIRE(nn::bpe_pretokenize("ab\xFF\xFE cd") == V{"ab", "\xFF\xFE", " cd"});
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const std::string s = random_bytes(rng, rng() % 64);
    std::string joined;
    for (auto w : nn::bpe_pretokenize(s)) {
      REQUIRE(!w.empty());
      joined += w;
    }
    REQUIRE(joined == s);
  }
}

// "aaabdaaabac" (one word), worked by hand:
//   pairs aa:4 ab:2 bd da ba ac:1       -> merge 1 (a, a)  = "aa":   aa a b d aa a b a c
//   pairs (aa,a):2 (a,b):2 ...          -> merge 2 (a, b)  (a tie: id a < id aa, the smaller pair wins)
//                                          aa ab d aa ab a c
//   pairs (aa,ab):2, the rest 1         -> merge 3 (aa, ab) = "aaab":  aaab d aaab a c
//   pairs (aaab,d) (d,aaab) (aaab,a) (a,c): all 1 -> merge 4 (a, c): the smallest left id is a's
TEST_CASE("bpe: the merge order on a hand-worked corpus, ties to the smallest pair, both trainers", "[bpe]") {
  for (auto version : {nn::BpeTrainVersion::v1_plain, nn::BpeTrainVersion::v2_incremental}) {
    CAPTURE(static_cast<int>(version));
    const auto t = nn::BpeTokenizer::train("aaabdaaabac", 260, {}, version);
    using P = std::vector<std::pair<std::string, std::string>>;
    REQUIRE(merge_texts(t) == P{{"a", "a"}, {"a", "b"}, {"aa", "ab"}, {"a", "c"}});
    REQUIRE(t.vocab_size() == 260);
    // Ids: the bytes in the order of their GPT-2 characters: '!' (33) is id 0, 'a' id 64.
    REQUIRE(t.byte_id('!') == 0);
    REQUIRE(t.byte_id('a') == 'a' - 33);
    REQUIRE(t.byte_id(0) == 188);  // the first of the 68 remapped bytes, after the 188 printable ones
    REQUIRE(t.vocab()[256] == "aa");
    REQUIRE(t.vocab()[258] == "aaab");
    const std::vector<int32_t> want = {258, t.byte_id('d'), 258, 259};
    REQUIRE(t.encode("aaabdaaabac") == want);
    // With a special token: it takes id 0 and everything shifts by one.
    const auto s = nn::BpeTokenizer::train("aaabdaaabac", 261, {"<|endoftext|>"}, version);
    REQUIRE(merge_texts(s) == P{{"a", "a"}, {"a", "b"}, {"aa", "ab"}, {"a", "c"}});
    REQUIRE(s.vocab()[0] == "<|endoftext|>");
    REQUIRE(s.byte_id('!') == 1);
  }
  // Vocabulary larger than what the text can give: training stops when no pair is left.
  const auto all = nn::BpeTokenizer::train("abab", 1000);
  REQUIRE(all.vocab_size() == 258);  // "ab", then "abab"
  REQUIRE(all.encode("abab") == std::vector<int32_t>{257});
}

TEST_CASE("bpe: words that spell the same bytes two ways train alike in v1 and v2", "[bpe]") {
  // "abc" can be built as (ab, c) or (a, bc): words "abc" "xbc" "abx" make both orders occur.
  const std::string text = "abc abc abc xbc xbc xbc abx abx abx abd abd bcd bcd";
  for (auto version : {nn::BpeTrainVersion::v1_plain, nn::BpeTrainVersion::v2_incremental}) {
    const auto t = nn::BpeTokenizer::train(text, 300, {}, version);
    const auto t1 = nn::BpeTokenizer::train(text, 300, {}, nn::BpeTrainVersion::v1_plain);
    REQUIRE(merge_texts(t) == merge_texts(t1));
    for (const auto& m : t.merges()) REQUIRE(t.vocab()[m.result] == t.vocab()[m.left] + t.vocab()[m.right]);
  }
}

TEST_CASE("bpe: v1 == v2 on random small-alphabet corpora (many ties, merges that reuse an id)", "[bpe]") {
  // Words over {a, b, c}: counts tie all the time. Half the rounds have the special token
  // "ab": the merge (a, b) then produces the special's bytes and reuses its id (as HF's
  // trainer does), the case where the vocabulary does not grow. (Reuse between two merges,
  // "ab"+"c" vs "a"+"bc", needs both orders to occur, which greedy left-to-right merging
  // makes very rare: none in these corpora, none in Tiny Shakespeare up to 5000 tokens.)
  std::mt19937 rng(5);
  int reused = 0;
  for (int round = 0; round < 150; ++round) {
    std::string text;
    const int words = 5 + static_cast<int>(rng() % 40);
    for (int w = 0; w < words; ++w) {
      const int len = 1 + static_cast<int>(rng() % 7);
      for (int k = 0; k < len; ++k) text += static_cast<char>('a' + rng() % 3);
      text += ' ';
    }
    const std::vector<std::string> specials = round % 2 ? std::vector<std::string>{"ab"} : std::vector<std::string>{};
    const int vocab = 256 + 1 + static_cast<int>(specials.size()) + static_cast<int>(rng() % 40);
    const auto a = nn::BpeTokenizer::train(text, vocab, specials, nn::BpeTrainVersion::v1_plain);
    const auto b = nn::BpeTokenizer::train(text, vocab, specials, nn::BpeTrainVersion::v2_incremental);
    CAPTURE(round, text, vocab);
    REQUIRE(merge_texts(a) == merge_texts(b));
    REQUIRE(a.encode(text) == b.encode(text));
    REQUIRE(b.decode(b.encode(text)) == text);
    const auto learned = static_cast<size_t>(b.vocab_size() - 256) - specials.size();
    if (b.merges().size() > learned) ++reused;
  }
  REQUIRE(reused > 0);  // the reuse case did occur
}

TEST_CASE("bpe: the incremental trainer gives the plain trainer's merges, id for id", "[bpe]") {
  const std::string text = sample_text();
  for (int vocab : {257, 258, 300, 400, 600}) {
    CAPTURE(vocab);
    const auto a = nn::BpeTokenizer::train(text, vocab, {"<|endoftext|>"}, nn::BpeTrainVersion::v1_plain);
    const auto b = nn::BpeTokenizer::train(text, vocab, {"<|endoftext|>"}, nn::BpeTrainVersion::v2_incremental);
    REQUIRE(a.vocab_size() == vocab);  // the text has enough pairs for every size here
    REQUIRE(a.vocab() == b.vocab());
    REQUIRE(merge_texts(a) == merge_texts(b));
    for (size_t i = 0; i < b.merges().size(); ++i) {
      REQUIRE(a.merges()[i].left == b.merges()[i].left);
      REQUIRE(a.merges()[i].right == b.merges()[i].right);
      REQUIRE(a.merges()[i].result == b.merges()[i].result);
    }
    REQUIRE(a.encode(text) == b.encode(text));
  }
  // A larger vocabulary continues the same merge sequence (training is greedy).
  const auto small = nn::BpeTokenizer::train(text, 300, {}, nn::BpeTrainVersion::v2_incremental);
  const auto large = nn::BpeTokenizer::train(text, 500, {}, nn::BpeTrainVersion::v2_incremental);
  auto ms = merge_texts(small), ml = merge_texts(large);
  REQUIRE(std::equal(ms.begin(), ms.end(), ml.begin()));
  // Random bytes as the corpus (many distinct pairs, invalid UTF-8): the same again.
  std::mt19937 rng(99);
  std::string noise;
  for (int i = 0; i < 300; ++i) noise += random_bytes(rng, 1 + rng() % 6) + (i % 3 ? " " : "ab ");
  const auto a = nn::BpeTokenizer::train(noise, 420, {}, nn::BpeTrainVersion::v1_plain);
  const auto b = nn::BpeTokenizer::train(noise, 420, {}, nn::BpeTrainVersion::v2_incremental);
  REQUIRE(merge_texts(a) == merge_texts(b));
}

TEST_CASE("bpe: decode(encode(x)) == x for arbitrary bytes, invalid UTF-8 included", "[bpe]") {
  const std::string text = sample_text();
  const auto t = nn::BpeTokenizer::train(text, 500, {"<|endoftext|>", "<|pad|>"});
  REQUIRE(t.decode(t.encode(text)) == text);
  REQUIRE(t.encode(text).size() < text.size() / 2);  // it compresses (measured: ~3-4 bytes a token)
  std::mt19937 rng(2024);
  for (int round = 0; round < 300; ++round) {
    CAPTURE(round);
    std::string s;
    switch (round % 3) {
      case 0: s = random_bytes(rng, rng() % 200); break;                   // anything at all
      case 1: s = text.substr(rng() % text.size(), rng() % 300); break;   // real text, cut anywhere (mid-UTF-8)
      default: s = text.substr(rng() % 1000, 50) + random_bytes(rng, 5) + "<|endoftext|>" + text.substr(0, 20);
    }
    const auto ids = t.encode(s);
    for (int32_t id : ids) REQUIRE((id >= 0 && id < t.vocab_size()));
    REQUIRE(t.decode(ids) == s);
    REQUIRE(t.decode(t.encode(s, false)) == s);
  }
  REQUIRE(t.encode("").empty());
  REQUIRE(t.decode(std::vector<int32_t>{}).empty());
}

TEST_CASE("bpe: special tokens are cut out before the regex, and only when allowed", "[bpe]") {
  const auto t = nn::BpeTokenizer::train(sample_text(), 400, {"<|endoftext|>", "<|end|>"});
  const auto ids = t.encode("the cat<|endoftext|><|end|>the");
  REQUIRE(std::count(ids.begin(), ids.end(), 0) == 1);
  REQUIRE(std::count(ids.begin(), ids.end(), 1) == 1);
  REQUIRE(ids.back() != 0);
  REQUIRE(t.decode(ids) == "the cat<|endoftext|><|end|>the");
  const auto plain = t.encode("the cat<|endoftext|>", false);
  REQUIRE(std::count(plain.begin(), plain.end(), 0) == 0);
  REQUIRE(t.decode(plain) == "the cat<|endoftext|>");
  // The text around a special encodes as it would alone.
  auto a = t.encode("the cat"), b = t.encode(" sat");
  a.push_back(0);
  a.insert(a.end(), b.begin(), b.end());
  REQUIRE(t.encode("the cat<|endoftext|> sat") == a);
}

TEST_CASE("bpe: tokenizer.json and vocab.json + merges.txt round-trip", "[bpe]") {
  const std::string text = sample_text();
  const auto t = nn::BpeTokenizer::train(text, 450, {"<|endoftext|>"});
  testing::TempDir dir("bpe");
  t.save_hf_json(dir.file("tokenizer.json"));
  t.save_gpt2(dir.file("vocab.json"), dir.file("merges.txt"));
  const auto h = nn::BpeTokenizer::load_hf_json(dir.file("tokenizer.json"));
  const auto g = nn::BpeTokenizer::load_gpt2(dir.file("vocab.json"), dir.file("merges.txt"), {"<|endoftext|>"});
  for (const auto* u : {&h, &g}) {
    REQUIRE(u->vocab() == t.vocab());
    REQUIRE(merge_texts(*u) == merge_texts(t));
    REQUIRE(u->special_ids() == t.special_ids());
    REQUIRE(u->encode(text) == t.encode(text));
  }
  const std::string json = testing::read_text(dir.file("tokenizer.json"));
  REQUIRE_THAT(json, Contains("\"type\": \"BPE\"") && Contains("\"type\": \"ByteLevel\"") &&
                         Contains("\"add_prefix_space\": false"));
  REQUIRE_THAT(json, Contains("\"Ġ"));  // spaces are stored as 'Ġ'
  REQUIRE(testing::read_text(dir.file("merges.txt")).rfind("#version: 0.2\n", 0) == 0);
  // Merges spelled "a b" (older tokenizer.json files, GPT-2's copy on the Hub) load the same:
  // the merges array is the file's last, so cut there and close the model and the document.
  std::string spelled;
  for (const auto& [l, r] : merge_texts(t))
    spelled += (spelled.empty() ? "\"" : ", \"") + nn::bpe_token_to_text(l) + " " + nn::bpe_token_to_text(r) + "\"";
  const size_t at = json.find("\"merges\": [");
  REQUIRE(at != std::string::npos);
  const std::string edited = json.substr(0, at) + "\"merges\": [" + spelled + "]\n  }\n}\n";
  const auto e = nn::BpeTokenizer::from_hf_json(edited);
  REQUIRE(merge_texts(e) == merge_texts(t));
}

TEST_CASE("bpe: bad input ends in clear errors", "[bpe]") {
  // Training.
  REQUIRE_THAT(error_of([] { nn::BpeTokenizer::train("", 300); }), Contains("empty"));
  REQUIRE_THAT(error_of([] { nn::BpeTokenizer::train("abc", 255); }), Contains("255") && Contains("at least 256"));
  REQUIRE_THAT(error_of([] { nn::BpeTokenizer::train("abc", 257, {"<a>", "<b>"}); }),
               Contains("257") && Contains("2 special") && Contains("at least 258"));
  REQUIRE_THAT(error_of([] { nn::BpeTokenizer::train("abc", 300, {"<a>", "<a>"}); }), Contains("twice"));
  // Decoding an unknown id.
  const auto t = nn::BpeTokenizer::train(sample_text(), 270, {"<|endoftext|>"});
  REQUIRE(t.vocab_size() == 270);
  const std::vector<int32_t> bad = {1, 2, 270};
  REQUIRE_THAT(error_of([&] { t.decode(bad); }), Contains("id 270") && Contains("position 2") && Contains("0..269"));
  const std::vector<int32_t> neg = {-1};
  REQUIRE_THAT(error_of([&] { t.decode(neg); }), Contains("id -1"));

  const std::string good = t.to_hf_json();
  auto load = [](const std::string& s) { return error_of([&] { nn::BpeTokenizer::from_hf_json(s, "tok.json"); }); };
  REQUIRE(load(good) == "<no nn::Error was thrown>");
  // Truncated anywhere, or corrupt: a JSON error naming the file.
  for (size_t cut : {size_t{0}, size_t{1}, good.size() / 3, good.size() / 2, good.size() - 2})
    REQUIRE_THAT(load(good.substr(0, cut)), Contains("tok.json") && Contains("not valid JSON"));
  std::string corrupt = good;
  corrupt[good.size() / 2] = '\x01';
  REQUIRE_THAT(load(corrupt), Contains("tok.json"));
  REQUIRE_THAT(load("[1, 2]"), Contains("no \"model\""));
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  REQUIRE_THAT(load(edit("\"type\": \"BPE\"", "\"type\": \"WordPiece\"")), Contains("WordPiece") && Contains("expected BPE"));
  REQUIRE_THAT(load(edit("\"add_prefix_space\": false", "\"add_prefix_space\": true")), Contains("add_prefix_space"));
  REQUIRE_THAT(load(edit("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}")), Contains("normalizer"));
  // A merge naming a token that is not in the vocabulary, and one whose result is not.
  const std::string m0 = "[\n        \"" + nn::bpe_token_to_text(t.vocab()[t.merges()[0].left]) + "\"";
  REQUIRE_THAT(load(edit(m0, "[\n        \"zzz\"")), Contains("merge 0") && Contains("'zzz' is not in the vocabulary"));
  // Ids: a duplicate, a hole, a non-integer.
  REQUIRE_THAT(load(edit("\"!\": 1", "\"!\": 2")), Contains("id 2 is given to two tokens"));
  REQUIRE_THAT(load(edit("\"!\": 1", "\"!\": 5000")), Contains("has no token"));
  REQUIRE_THAT(load(edit("\"!\": 1", "\"!\": 2147483647")), Contains("has no token"));  // no 2^31-token allocation
  REQUIRE_THAT(load(edit("\"add_prefix_space\": false", "\"add_prefix_space\": \"no\"")), Contains("wrong type"));
  REQUIRE_THAT(load(edit("\"type\": \"BPE\"", "\"type\": 7")), Contains("tok.json"));
  REQUIRE_THAT(load(edit("\"!\": 1", "\"!\": \"one\"")), Contains("not an integer id"));
  // A vocabulary without some byte cannot encode everything.
  REQUIRE_THAT(load(edit("\"!\": 1", "\"!!!\": 1")), Contains("no token for byte 33"));

  // GPT-2's files.
  testing::TempDir dir("bpe-bad");
  t.save_gpt2(dir.file("vocab.json"), dir.file("merges.txt"));
  const std::string vocab = testing::read_text(dir.file("vocab.json"));
  const std::string merges = testing::read_text(dir.file("merges.txt"));
  auto load2 = [](const std::string& v, const std::string& m, std::vector<std::string> sp = {"<|endoftext|>"}) {
    return error_of([&] { nn::BpeTokenizer::from_gpt2(v, m, sp, "gpt2"); });
  };
  REQUIRE(load2(vocab, merges) == "<no nn::Error was thrown>");
  REQUIRE_THAT(load2(vocab.substr(0, vocab.size() / 2), merges), Contains("not valid JSON"));
  REQUIRE_THAT(load2(vocab, merges + "a b c\n"), Contains("line") && Contains("'a b c'"));
  REQUIRE_THAT(load2(vocab, merges + "Ġq Ġz\n"), Contains("'Ġq' is not in the vocabulary"));
  REQUIRE_THAT(load2(vocab, merges, {"<|nope|>"}), Contains("'<|nope|>' is not in vocab.json"));
  REQUIRE_THAT(error_of([&] { nn::BpeTokenizer::load_hf_json(dir.file("missing.json")); }),
               Contains("missing.json") && Contains("not found"));
  // Merges listed twice load (the last rank counts, as in HF): all of them repeated at the
  // end keeps their order, so the encoding is the same.
  const auto twice = nn::BpeTokenizer::from_gpt2(vocab, merges + merges.substr(merges.find('\n') + 1), {"<|endoftext|>"});
  REQUIRE(twice.merges().size() == 2 * t.merges().size());
  REQUIRE(twice.encode(sample_text()) == t.encode(sample_text()));
}

TEST_CASE("bpe: lesson11 --part bpe trains, saves, reloads the same ids, and fails clearly on bad input", "[bpe][cli]") {
  testing::TempDir dir("bpe-cli");
  {
    std::ofstream f(dir.file("corpus.txt"), std::ios::binary);
    f << sample_text();
  }
  std::ofstream(dir.file("empty.txt")).close();
  const std::string corpus = dir.file("corpus.txt");
  auto r = testing::run_program("lesson11", "--part bpe --data " + corpus + " --vocab-size 400 --repeats 1 --save-tokenizer " +
                                                dir.file("tok.json") + " --write-ids " + dir.file("ids1.json"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Contains("400 tokens (1 special + 256 bytes + 143 merges)") &&
                             Contains("decode(encode(corpus)) == corpus: yes"));
  r = testing::run_program("lesson11", "--part bpe --data " + corpus + " --repeats 1 --load-tokenizer " + dir.file("tok.json") +
                                           " --write-ids " + dir.file("ids2.json"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE(testing::read_text(dir.file("ids1.json")) == testing::read_text(dir.file("ids2.json")));
  // The ids are what the library gives.
  const auto t = nn::BpeTokenizer::load_hf_json(dir.file("tok.json"));
  std::string want = "[";
  for (int32_t id : t.encode(sample_text())) {
    if (want.size() > 1) want += ',';
    want += std::to_string(id);
  }
  REQUIRE(testing::read_text(dir.file("ids1.json")) == want + "]\n");

  r = testing::run_program("lesson11", "--part bpe --data " + dir.file("empty.txt"));
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Contains("error:") && Contains("empty"));
  {
    std::ofstream f(dir.file("cut.json"), std::ios::binary);
    f << t.to_hf_json().substr(0, 300);
  }
  r = testing::run_program("lesson11", "--part bpe --data " + corpus + " --load-tokenizer " + dir.file("cut.json"));
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Contains("error:") && Contains("cut.json") && Contains("not valid JSON"));
  r = testing::run_program("lesson11", "--part bpe --data " + corpus + " --vocab-size 100");
  REQUIRE(r.status != 0);
  REQUIRE_THAT(r.output, Contains("--vocab-size"));
}
