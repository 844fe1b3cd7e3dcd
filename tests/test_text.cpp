// io/text: the character vocabulary, the corpus and where it is found (Tiny Shakespeare,
// the licence-text fallback), stream batches for truncated BPTT, and temperature sampling.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "nn/check.h"
#include "nn/rng.h"
#include "io/text.h"

namespace fs = std::filesystem;
using namespace testing;  // TempDir, error_of, read_text (tests/test_util.h)
using Catch::Contains;

namespace {


// Changes the working directory, and changes it back at scope end.
class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedCwd() {
    std::error_code ec;
    fs::current_path(old_, ec);
  }
  ScopedCwd(const ScopedCwd&) = delete;
  ScopedCwd& operator=(const ScopedCwd&) = delete;

 private:
  fs::path old_;
};

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

// What the repository's own data/ folder holds on this machine (fetch_data.py may have put
// Tiny Shakespeare there; then load_corpus finds it before any place a test can control).
std::string repo_tinyshakespeare() { return nn::tinyshakespeare_in((fs::path(NNLAB_SOURCE_DIR) / "data").string()); }

// softmax(logits / T) in double: the distribution sample_from_logits must draw from.
std::vector<double> softmax_at(const std::vector<float>& logits, double T) {
  double m = logits[0];
  for (float l : logits) m = std::max(m, static_cast<double>(l));
  std::vector<double> p;
  double sum = 0.0;
  for (float l : logits) {
    p.push_back(std::exp((l - m) / T));
    sum += p.back();
  }
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace

// ---- the vocabulary ----------------------------------------------------------------------

TEST_CASE("text: the vocabulary is the sorted bytes of the text and encode/decode round-trip", "[text]") {
  // Non-ASCII bytes (here UTF-8 'é' = C3 A9) are characters like any other: byte-level.
  const std::string text = "hello, w\xC3\xA9rld\n";
  const nn::CharVocab v = nn::build_vocab(text);
  const std::vector<unsigned char> expect = {'\n', ' ', ',', 'd', 'e', 'h', 'l', 'o', 'r', 'w', 0xA9, 0xC3};
  REQUIRE(v.chars == expect);
  REQUIRE(v.size() == 12);
  for (int id = 0; id < v.size(); ++id) REQUIRE(v.ids[v.chars[static_cast<size_t>(id)]] == id);
  REQUIRE(v.contains('h'));
  REQUIRE(!v.contains('z'));
  REQUIRE(v.ids['z'] == -1);

  const std::vector<int32_t> ids = v.encode(text);
  REQUIRE(ids.size() == text.size());
  REQUIRE(ids[0] == v.ids['h']);
  REQUIRE(v.decode(ids) == text);
  REQUIRE(v.decode(v.encode("")).empty());

  REQUIRE_THAT(error_of([] { nn::build_vocab(""); }), Contains("empty"));
}

TEST_CASE("text: encode names the unknown character and its position, decode the bad id", "[text]") {
  const nn::CharVocab v = nn::build_vocab("abc");
  REQUIRE_THAT(error_of([&] { v.encode("abxc"); }), Contains("'x'") && Contains("position 2"));
  REQUIRE_THAT(error_of([&] { v.encode("ab\xC3"); }), Contains("byte 0xC3") && Contains("position 2"));
  REQUIRE_THAT(error_of([&] { v.encode("a\nb"); }), Contains("'\\n'") && Contains("position 1"));
  const std::vector<int32_t> bad = {0, 1, 3};
  REQUIRE_THAT(error_of([&] { v.decode(bad); }), Contains("id 3") && Contains("position 2") && Contains("[0, 3)"));
  const std::vector<int32_t> negative = {-1};
  REQUIRE_THAT(error_of([&] { v.decode(negative); }), Contains("id -1"));
}

TEST_CASE("text: corpus_from_text splits by position and validates val_fraction", "[text]") {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  const nn::TextCorpus c = nn::corpus_from_text(text, "letters", 0.1);
  REQUIRE(c.path == "<memory>");
  REQUIRE(c.description == "letters");
  REQUIRE(!c.fallback);
  REQUIRE(c.train.size() == 900);
  REQUIRE(c.val.size() == 100);
  REQUIRE(c.vocab.decode(c.train) + c.vocab.decode(c.val) == text);

  const nn::TextCorpus all = nn::corpus_from_text(text, "letters", 0.0);
  REQUIRE(all.train.size() == 1000);
  REQUIRE(all.val.empty());
  REQUIRE_THAT(error_of([&] { nn::corpus_from_text(text, "x", 0.6); }), Contains("val_fraction") && Contains("0.6"));
  REQUIRE_THAT(error_of([&] { nn::corpus_from_text(text, "x", -0.1); }), Contains("val_fraction"));
  REQUIRE_THAT(error_of([&] { nn::corpus_from_text("", "x", 0.1); }), Contains("empty"));
}

// ---- stream batches ----------------------------------------------------------------------

TEST_CASE("text: StreamBatcher cuts B streams, time-major, each continuing across chunks", "[text]") {
  // Token i has value i, so every entry says where in the text it came from.
  const int N = 103, B = 4, steps = 5;
  std::vector<int32_t> tokens(N);
  for (int i = 0; i < N; ++i) tokens[static_cast<size_t>(i)] = i;
  nn::StreamBatcher batcher(tokens, B, steps);
  // Inputs are tokens[0, 102): 4 streams of 25 inputs each, so 5 chunks of 5 steps.
  const int L = (N - 1) / B;
  REQUIRE(L == 25);
  REQUIRE(batcher.chunks_per_epoch() == L / steps);

  std::vector<int32_t> x, y, prev_x;
  int64_t k = 0;
  while (batcher.next(x, y)) {
    REQUIRE(batcher.chunk_index() == k + 1);
    REQUIRE(x.size() == static_cast<size_t>(B * steps));
    REQUIRE(y.size() == x.size());
    for (int t = 0; t < steps; ++t) {
      for (int s = 0; s < B; ++s) {
        const size_t i = static_cast<size_t>(t * B + s);
        INFO("chunk " << k << " t " << t << " stream " << s);
        REQUIRE(x[i] == s * L + k * steps + t);  // time-major, stream s starts at s * L
        REQUIRE(y[i] == x[i] + 1);               // the target is the next character
      }
    }
    if (k > 0) {
      // Row s of this chunk starts right after where row s of the previous chunk ended.
      for (int s = 0; s < B; ++s) REQUIRE(x[static_cast<size_t>(s)] == prev_x[static_cast<size_t>((steps - 1) * B + s)] + 1);
    }
    prev_x = x;
    ++k;
  }
  REQUIRE(k == 5);
  // Exhausted: returns false and leaves x alone; restart() begins the same sequence again.
  const std::vector<int32_t> last = x;
  REQUIRE(!batcher.next(x, y));
  REQUIRE(x == last);
  batcher.restart();
  REQUIRE(batcher.chunk_index() == 0);
  REQUIRE(batcher.next(x, y));
  REQUIRE(x[0] == 0);
  REQUIRE(x[1] == L);
}

TEST_CASE("text: StreamBatcher needs B * steps + 1 tokens and says so with the sizes", "[text]") {
  const int B = 4, steps = 5;
  std::vector<int32_t> tokens(static_cast<size_t>(B * steps + 1), 7);
  nn::StreamBatcher exact(tokens, B, steps);  // just enough: one chunk
  REQUIRE(exact.chunks_per_epoch() == 1);
  std::vector<int32_t> x, y;
  REQUIRE(exact.next(x, y));
  REQUIRE(!exact.next(x, y));

  tokens.pop_back();
  const std::string msg = error_of([&] { nn::StreamBatcher(tokens, B, steps); });
  REQUIRE_THAT(msg, Contains("has 20 characters") && Contains("--batch-size 4") && Contains("--seq-len 5") &&
                        Contains("21"));
  REQUIRE_THAT(error_of([&] { nn::StreamBatcher(tokens, 0, steps); }), Contains("batch size"));
  REQUIRE_THAT(error_of([&] { nn::StreamBatcher(tokens, B, 0); }), Contains("sequence length"));
}

// ---- loading a corpus --------------------------------------------------------------------

TEST_CASE("text: load_corpus with a path reads that file, and only that", "[text]") {
  TempDir tmp("text");
  const fs::path file = tmp.path / "mine.txt";
  const std::string text = "To be, or not to be: that is the question.\n";
  write_text(file, text);
  const nn::TextCorpus c = nn::load_corpus(file.string(), 0.25);
  REQUIRE(c.text == text);
  REQUIRE(c.path == file.string());
  REQUIRE(!c.fallback);
  REQUIRE_THAT(c.description, Contains(file.string()) && Contains("43 characters"));
  REQUIRE(c.train.size() + c.val.size() == text.size());
  REQUIRE(c.val.size() == 10);  // floor(0.25 * 43)

  const std::string missing = (tmp.path / "nope.txt").string();
  REQUIRE_THAT(error_of([&] { nn::load_corpus(missing); }), Contains(missing) && Contains("not found"));
  const fs::path empty = tmp.path / "empty.txt";
  write_text(empty, "");
  REQUIRE_THAT(error_of([&] { nn::load_corpus(empty.string()); }), Contains(empty.string()) && Contains("empty"));
  REQUIRE_THAT(error_of([&] { nn::load_corpus(tmp.path.string()); }), Contains("is a directory"));
  REQUIRE_THAT(error_of([&] { nn::load_corpus(file.string(), 0.9); }), Contains("val_fraction"));
}

// A corpus is held as its text and as int32 ids: five times the file. A 1 GiB text used
// several GB; now a text larger than the data cap (io/data_limit.h) is refused from its size,
// before it is read, with the cap and how to raise it.
TEST_CASE("text: a corpus larger than the data cap is refused from its size, saying how to raise it", "[text]") {
  TempDir tmp("text");
  const ScopedEnv cap("NNLAB_MAX_DATA_MB", std::string("1"));
  const fs::path big = tmp.path / "big.txt";
  write_text(big, std::string(1536 * 1024, 'a') + "\n");  // 1.5 MiB
  REQUIRE_THAT(error_of([&] { nn::load_corpus(big.string()); }),
               Contains(big.string()) && Contains("1.5 MiB") && Contains("five times its size") &&
                   Contains("at most 1 MiB per file") && Contains("NNLAB_MAX_DATA_MB=2"));

  // The fallback joins several files: the cap counts them together.
  const fs::path lic = tmp.path / "licenses";
  write_text(lic / "A", std::string(600 * 1024, 'a'));
  write_text(lic / "B", std::string(600 * 1024, 'b'));
  REQUIRE_THAT(error_of([&] { nn::find_corpus({}, lic.string(), 0.1); }),
               Contains((lic / "B").string()) && Contains("after 0.586 MiB of other texts"));

  const ScopedEnv raised("NNLAB_MAX_DATA_MB", std::string("2"));
  REQUIRE(nn::load_corpus(big.string()).text.size() == 1536 * 1024 + 1);
  REQUIRE(nn::find_corpus({}, lic.string(), 0.1).text.size() == 1200 * 1024);
}

TEST_CASE("text: $NNLAB_DATA is searched first, in both layouts", "[text]") {
  TempDir tmp("text");
  const fs::path flat = tmp.path / "flat";
  write_text(flat / "tinyshakespeare.txt", "First Citizen:\nflat layout\n");
  const fs::path fetched = tmp.path / "fetched";
  write_text(fetched / "tinyshakespeare" / "input.txt", "First Citizen:\nfetched layout\n");

  {
    ScopedEnv env("NNLAB_DATA", flat.string());
    REQUIRE(nn::corpus_search_dirs().front() == flat.string());
    const nn::TextCorpus c = nn::load_corpus();
    REQUIRE(c.text == "First Citizen:\nflat layout\n");
    REQUIRE(c.path == (flat / "tinyshakespeare.txt").string());
    REQUIRE(!c.fallback);
    REQUIRE_THAT(c.description, Contains("Tiny Shakespeare") && Contains(c.path));
  }
  {
    ScopedEnv env("NNLAB_DATA", fetched.string());
    const nn::TextCorpus c = nn::load_corpus();
    REQUIRE(c.text == "First Citizen:\nfetched layout\n");
    REQUIRE(c.path == (fetched / "tinyshakespeare" / "input.txt").string());
  }
  {
    ScopedEnv env("NNLAB_DATA", std::nullopt);
    const std::vector<std::string> dirs = nn::corpus_search_dirs();
    REQUIRE(dirs.size() == 3);  // <repo>/data, ../shared/data, ../../shared/data
    REQUIRE(dirs[0] == (fs::path(NNLAB_SOURCE_DIR) / "data").string());
    REQUIRE(dirs[1] == "../shared/data");
    REQUIRE(dirs[2] == "../../shared/data");
  }
}

TEST_CASE("text: ../shared/data and ../../shared/data are relative to the working directory", "[text]") {
  TempDir tmp("text");
  const fs::path cwd = tmp.path / "a" / "b";
  fs::create_directories(cwd);
  ScopedEnv env("NNLAB_DATA", std::nullopt);
  ScopedCwd in(cwd);
  const std::string repo = repo_tinyshakespeare();  // found first when present

  write_text(tmp.path / "shared" / "data" / "tinyshakespeare.txt", "two levels up\n");  // ../../shared/data
  nn::TextCorpus c = nn::load_corpus();
  REQUIRE(c.text == (repo.empty() ? std::string("two levels up\n") : read_text(repo)));

  write_text(tmp.path / "a" / "shared" / "data" / "tinyshakespeare.txt", "one level up\n");  // ../shared/data
  c = nn::load_corpus();
  REQUIRE(c.text == (repo.empty() ? std::string("one level up\n") : read_text(repo)));
  REQUIRE(!c.fallback);
}

TEST_CASE("text: with no Tiny Shakespeare anywhere, the licence texts are the corpus", "[text]") {
  TempDir tmp("text");
  // A stand-in for /usr/share/common-licenses: two texts, a symlink to one of them (read
  // once, under its own name), and a symlink to a text outside the folder (read).
  const fs::path lic = tmp.path / "licenses";
  write_text(lic / "B-licence", "bbbb\n");
  write_text(lic / "A-licence", "aaaa\n");
  write_text(tmp.path / "elsewhere" / "outside", "outside\n");
  std::error_code ec1, ec2, ec3;
  fs::create_symlink("A-licence", lic / "A", ec1);
  fs::create_symlink(tmp.path / "elsewhere" / "outside", lic / "Z-outside", ec2);
  fs::create_directory_symlink(tmp.path / "elsewhere", lic / "subdir", ec3);  // a folder: skipped
  const bool links = !ec1 && !ec2 && !ec3;
  if (!links) {
    WARN("cannot create symlinks here: the symlink part of this test is skipped");
    std::error_code ignore;
    for (const char* name : {"A", "Z-outside", "subdir"}) fs::remove(lic / name, ignore);
  }
  const fs::path empty = tmp.path / "no-data";
  fs::create_directories(empty);

  const nn::TextCorpus c = nn::find_corpus({empty.string(), (tmp.path / "missing").string()}, lic.string(), 0.0);
  REQUIRE(c.fallback);
  REQUIRE(c.text == (links ? std::string("aaaa\nbbbb\noutside\n") : std::string("aaaa\nbbbb\n")));
  REQUIRE(c.path == lic.string());
  REQUIRE_THAT(c.description, Contains("Tiny Shakespeare not found") && Contains(empty.string()) &&
                                  Contains((tmp.path / "missing").string()) && Contains(lic.string()) &&
                                  Contains("python3 scripts/fetch_data.py tinyshakespeare") && Contains("KB"));

  // Nothing at all: one error naming both what was missing and where.
  const std::string none = (tmp.path / "no-licences").string();
  const std::string msg = error_of([&] { nn::find_corpus({empty.string()}, none, 0.1); });
  REQUIRE_THAT(msg, Contains("Tiny Shakespeare not found") && Contains(empty.string()) && Contains(none) &&
                        Contains("fetch_data.py tinyshakespeare"));
  REQUIRE_THAT(error_of([&] { nn::find_corpus({}, none, 0.1); }), Contains(none));
}

TEST_CASE("text: load_corpus() falls back to /usr/share/common-licenses (or finds <repo>/data)", "[text]") {
  // Run from a folder whose ../shared and ../../shared are ours (and empty), with NNLAB_DATA
  // pointing at an empty folder: only <repo>/data and the licence texts remain.
  TempDir tmp("text");
  const fs::path cwd = tmp.path / "a" / "b";
  const fs::path empty = tmp.path / "empty";
  fs::create_directories(cwd);
  fs::create_directories(empty);
  ScopedEnv env("NNLAB_DATA", empty.string());
  ScopedCwd in(cwd);

  const std::string repo = repo_tinyshakespeare();
  if (!repo.empty()) {
    // This machine has fetched Tiny Shakespeare into the repository: it wins, as documented.
    WARN(repo << " exists, so load_corpus() cannot fall back here; the fallback itself is tested with "
                 "find_corpus in the case above");
    const nn::TextCorpus c = nn::load_corpus();
    REQUIRE(!c.fallback);
    REQUIRE(c.path == repo);
    return;
  }
  std::error_code ec;
  if (!fs::is_directory(nn::kLicenceDir, ec)) {
    const std::string msg = error_of([] { nn::load_corpus(); });
    REQUIRE_THAT(msg, Contains("Tiny Shakespeare not found") && Contains(nn::kLicenceDir));
    return;
  }
  const nn::TextCorpus c = nn::load_corpus();
  REQUIRE(c.fallback);
  REQUIRE(c.path == nn::kLicenceDir);
  REQUIRE_THAT(c.description, Contains("Tiny Shakespeare not found") && Contains(empty.string()) &&
                                  Contains("../shared/data") && Contains("Debian base-files") &&
                                  Contains("python3 scripts/fetch_data.py tinyshakespeare"));
  // Each licence text exactly once: GPL (a symlink to GPL-3) is not read twice.
  if (fs::is_regular_file(fs::path(nn::kLicenceDir) / "GPL-3", ec)) {
    const std::string gpl3 = read_text((fs::path(nn::kLicenceDir) / "GPL-3").string());
    const size_t first = c.text.find(gpl3);
    REQUIRE(first != std::string::npos);
    REQUIRE(c.text.find(gpl3, first + 1) == std::string::npos);
  }
  REQUIRE(c.text.size() > 50000);
  REQUIRE(c.train.size() + c.val.size() == c.text.size());
}

TEST_CASE("text: the real Tiny Shakespeare, where this machine has it", "[text]") {
  // Wherever load_corpus() finds it from here (CI keeps a copy in ../shared/data).
  const nn::TextCorpus c = nn::load_corpus();
  if (c.fallback || c.text.size() != 1115394) {
    WARN("Tiny Shakespeare not found from " << fs::current_path().string() << ": using " << c.description);
    return;
  }
  REQUIRE(c.vocab.size() == 65);
  REQUIRE(c.text.rfind("First Citizen:", 0) == 0);
  REQUIRE(c.train.size() == 1003855);  // 1115394 - floor(0.1 * 1115394)
}

// ---- sampling ----------------------------------------------------------------------------

TEST_CASE("text: sample_from_logits at temperature 0 is argmax (the first of ties)", "[text]") {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  for (float u : {0.0f, 0.3f, 0.999f}) {
    REQUIRE(nn::sample_from_logits(logits.data(), 5, 0.0f, u) == 1);
    REQUIRE(nn::sample_from_logits(logits.data(), 5, -1.0f, u) == 1);
  }
  const std::vector<float> nan = {0.0f, std::nanf("")};
  REQUIRE_THAT(error_of([&] { nn::sample_from_logits(nan.data(), 2, 1.0f, 0.5f); }), Contains("logit 1"));
  REQUIRE_THAT(error_of([&] { nn::sample_from_logits(logits.data(), 0, 1.0f, 0.5f); }), Contains("V = 0"));
  REQUIRE_THAT(error_of([&] { nn::sample_from_logits(logits.data(), 5, 1.0f, 1.5f); }), Contains("u must"));
}

TEST_CASE("text: sample_from_logits with pinned u walks the CDF", "[text]") {
  // p = (0.1, 0.2, 0.3, 0.4): the CDF steps at 0.1, 0.3, 0.6, 1.0.
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  const std::vector<std::pair<float, int>> cases = {{0.0f, 0},  {0.05f, 0}, {0.11f, 1}, {0.29f, 1},  {0.31f, 2},
                                                    {0.59f, 2}, {0.61f, 3}, {0.99f, 3}, {0.9999999f, 3}, {1.0f, 3}};
  for (const auto& [u, want] : cases) {
    INFO("u = " << u);
    REQUIRE(nn::sample_from_logits(logits.data(), 4, 1.0f, u) == want);
  }
  // u = 1 (or rounding to it) never returns a character with probability 0.
  const std::vector<float> tail = {0.0f, 0.0f, -1e30f};
  REQUIRE(nn::sample_from_logits(tail.data(), 3, 1.0f, 1.0f) == 1);
}

TEST_CASE("text: sample_from_logits draws with the softmax(logits / T) frequencies", "[text]") {
  const std::vector<float> logits = {1.2f, -0.3f, 0.0f, 2.1f, 0.7f};
  nn::Rng rng(42);
  const int draws = 200000;
  for (double T : {0.5, 1.0, 2.0}) {
    const std::vector<double> p = softmax_at(logits, T);
    std::vector<int> count(logits.size(), 0);
    for (int i = 0; i < draws; ++i) {
      ++count[static_cast<size_t>(nn::sample_from_logits(logits.data(), 5, static_cast<float>(T), rng.uniform()))];
    }
    for (size_t k = 0; k < p.size(); ++k) {
      // 5 standard deviations of a binomial frequency: fails by chance about once in 10^6.
      const double freq = count[k] / static_cast<double>(draws);
      const double tol = 5.0 * std::sqrt(p[k] * (1 - p[k]) / draws);
      INFO("T " << T << " index " << k << " frequency " << freq << " softmax " << p[k]);
      REQUIRE(std::fabs(freq - p[k]) <= tol);
    }
  }
}

TEST_CASE("text: sample_from_logits: a tiny temperature is argmax, huge logits do not overflow", "[text]") {
  const std::vector<float> close = {1.0f, 1.001f, 0.5f};
  nn::Rng rng(7);
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(nn::sample_from_logits(close.data(), 3, 1e-6f, rng.uniform()) == 1);
  }
  // exp(3e38) overflows a float and a double; exp(logit - max) does not.
  const std::vector<float> huge = {3e38f, -3e38f, 3e38f, 1e30f};
  REQUIRE(nn::sample_from_logits(huge.data(), 4, 1.0f, 0.25f) == 0);
  REQUIRE(nn::sample_from_logits(huge.data(), 4, 1.0f, 0.75f) == 2);
  REQUIRE(nn::sample_from_logits(huge.data(), 4, 1e-30f, 0.75f) == 2);
  // A huge temperature flattens any logits to nearly uniform.
  const std::vector<float> spread = {-5.0f, 0.0f, 5.0f, 10.0f};
  REQUIRE(nn::sample_from_logits(spread.data(), 4, 1e30f, 0.1f) == 0);
  REQUIRE(nn::sample_from_logits(spread.data(), 4, 1e30f, 0.6f) == 2);
}
