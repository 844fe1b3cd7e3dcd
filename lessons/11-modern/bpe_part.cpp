// Lesson 11, part bpe: train the byte-level BPE on the corpus, encode it, decode it, and
// say where the time goes. The tokenizer itself is io/bpe.{h,cpp}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <iostream>
#include <string>
#include <unordered_set>
#include <vector>

#include "io/bpe.h"
#include "kernels/harness.h"
#include "io/text.h"
#include "lessons/11-modern/modern_lesson.h"
#include "nn/check.h"

namespace lesson11 {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int run_bpe_part(const Options& opts) {
  const nn::TextCorpus corpus = nn::load_corpus(opts.data, 0.1);
  const std::string& text = corpus.text;
  std::printf("== part bpe: byte-level BPE on %s\n", corpus.description.c_str());
  std::printf("corpus: %zu bytes\n", text.size());

  // Pre-tokenisation alone (median of `repeats`, like encode below): the regex's share of
  // encode's time.
  std::vector<std::string_view> words;
  std::vector<double> pretok_times;
  for (int r = 0; r < opts.repeats; ++r) {
    const double p0 = now_s();
    words = nn::bpe_pretokenize(text);
    pretok_times.push_back(now_s() - p0);
  }
  const double pretok_s = median(pretok_times);
  std::unordered_set<std::string_view> distinct(words.begin(), words.end());
  std::printf("pre-tokens: %zu (%zu distinct words), regex pass %.4f s\n", words.size(), distinct.size(), pretok_s);

  nn::BpeTokenizer tok;
  if (!opts.load_tokenizer.empty()) {
    tok = nn::BpeTokenizer::load_hf_json(opts.load_tokenizer);
    std::printf("loaded %s: %d tokens, %zu merges\n", opts.load_tokenizer.c_str(), tok.vocab_size(), tok.merges().size());
  } else {
    const auto version = opts.trainer == "v1" ? nn::BpeTrainVersion::v1_plain : nn::BpeTrainVersion::v2_incremental;
    const double t0 = now_s();
    tok = nn::BpeTokenizer::train(text, opts.vocab_size, {"<|endoftext|>"}, version);
    const double train_s = now_s() - t0;
    std::printf("trained (%s): %d tokens (1 special + 256 bytes + %zu merges) in %.3f s\n",
                opts.trainer == "v1" ? "v1, the plain merge loop" : "v2, incremental pair counts", tok.vocab_size(),
                tok.merges().size(), train_s);
    const int first = std::min<int>(10, static_cast<int>(tok.merges().size()));
    std::printf("first merges:");
    for (int i = 0; i < first; ++i) {
      const auto& m = tok.merges()[i];
      std::printf(" '%s'+'%s'", nn::bpe_token_to_text(tok.vocab()[m.left]).c_str(),
                  nn::bpe_token_to_text(tok.vocab()[m.right]).c_str());
    }
    std::printf("\n");
  }
  if (!opts.save_tokenizer.empty()) {
    tok.save_hf_json(opts.save_tokenizer);
    std::printf("wrote %s\n", opts.save_tokenizer.c_str());
  }

  // Encode the whole corpus `repeats` times (one thread); the median is the figure.
  std::vector<double> times;
  std::vector<int32_t> ids;
  for (int r = 0; r < opts.repeats; ++r) {
    const double t0 = now_s();
    ids = tok.encode(text);
    times.push_back(now_s() - t0);
  }
  const double enc_s = median(times);
  std::printf("encoded: %zu tokens, %.2f bytes per token\n", ids.size(), static_cast<double>(text.size()) / static_cast<double>(ids.size()));
  std::printf("encode: %.4f s median of %d (%.2f MB/s, one thread); of which the regex pass ~%.4f s (%.0f%%)\n", enc_s,
              opts.repeats, static_cast<double>(text.size()) / 1e6 / enc_s, pretok_s, 100.0 * pretok_s / enc_s);
  const double d0 = now_s();
  const std::string back = tok.decode(ids);
  const double dec_s = now_s() - d0;
  NN_CHECK(back == text, "decode(encode(corpus)) differs from the corpus: a tokenizer bug");
  std::printf("decode: %.4f s; decode(encode(corpus)) == corpus: yes\n", dec_s);
  std::printf("BPE_ENCODE_SECONDS %.6f\n", enc_s);  // for scripts/bench_bpe.py
  std::printf("BPE_REGEX_SECONDS %.6f\n", pretok_s);

  // Bytes per token with only the first k merges: BPE training is greedy, so the first k
  // merges of this training are what a training to 257 + k tokens would learn; the vocabulary's
  // first 1 + 256 + k ids (specials, bytes, then merges in order) with those merges.
  std::ostringstream sweep;
  NN_CHECK(opts.bpe_sweep.empty() || opts.load_tokenizer.empty(),
           "--bpe-sweep needs a trained tokenizer (its ids in training order), not --load-tokenizer");
  for (int k : opts.bpe_sweep) {
    const int merges = std::min<int>(k, static_cast<int>(tok.merges().size()));
    const size_t keep = static_cast<size_t>(tok.vocab_size()) - tok.merges().size() + merges;
    std::vector<std::string> vocab(tok.vocab().begin(), tok.vocab().begin() + static_cast<std::ptrdiff_t>(keep));
    std::vector<nn::BpeMerge> ms(tok.merges().begin(), tok.merges().begin() + merges);
    const auto t = nn::BpeTokenizer::from_parts(std::move(vocab), std::move(ms), {0});
    const size_t n = t.encode(text).size();
    const double bpt = static_cast<double>(text.size()) / static_cast<double>(n);
    std::printf("  with the first %5d merges (%5zu tokens): %9zu tokens, %.3f bytes per token\n", merges, keep, n, bpt);
    if (sweep.tellp() > 0) sweep << ", ";
    sweep << "{\"merges\": " << merges << ", \"vocab_size\": " << keep << ", \"tokens\": " << n
          << ", \"bytes_per_token\": " << jnum(bpt) << "}";
  }
  std::ostringstream js;
  js << "{\"corpus\": " << kernels::harness::json_string(corpus.description) << ", \"corpus_bytes\": " << text.size()
     << ", \"vocab_size\": " << tok.vocab_size() << ", \"merges\": " << tok.merges().size()
     << ", \"tokens\": " << ids.size()
     << ", \"bytes_per_token\": " << jnum(static_cast<double>(text.size()) / static_cast<double>(ids.size()))
     << ", \"encode_seconds\": " << jnum(enc_s) << ", \"regex_seconds\": " << jnum(pretok_s)
     << ", \"sweep\": [" << sweep.str() << "]}";
  record_part("bpe", js.str());

  if (!opts.write_ids.empty()) {
    std::ofstream f(opts.write_ids);
    NN_CHECK(f, "cannot write " << opts.write_ids);
    f << "[";
    for (size_t i = 0; i < ids.size(); ++i) f << (i ? "," : "") << ids[i];
    f << "]\n";
    NN_CHECK(f, "writing " << opts.write_ids << " failed");
    std::printf("wrote %s\n", opts.write_ids.c_str());
  }
  return 0;
}

}  // namespace lesson11
