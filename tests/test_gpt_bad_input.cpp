// tests/test_gpt_bad_input.cpp: the GPT trainer, its flags, config files, checkpoints and
// logs given bad input. Each case ends in a clear nn::Error (or CLI11 error) naming the
// flag, key, file or tensor, and loses nothing: no NaN reaches a checkpoint, an earlier
// checkpoint stays byte for byte, a resumed log keeps its history.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "gpt/bench.h"
#include "gpt/cli.h"
#include "gpt/train.h"
#include "nn/checkpoint.h"
#include "nn/cli_checks.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using Catch::Contains;
using testing::error_of;

namespace {

std::string write_corpus(const testing::TempDir& dir, const std::string& name = "corpus.txt",
                         const std::string& line = "First Citizen:\nBefore we proceed any further, hear me speak.\n") {
  std::string text;
  for (int i = 0; i < 60; ++i) text += line;
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

gpt::TrainOptions tiny_options(const testing::TempDir& dir, const std::string& corpus, const std::string& out = "out") {
  gpt::TrainOptions o;
  o.n_layer = 1;
  o.n_head = 2;
  o.n_embd = 16;
  o.block_size = 16;
  o.batch_size = 4;
  o.max_iters = 8;
  o.warmup_iters = 2;
  o.eval_interval = 4;
  o.eval_iters = 2;
  o.data = corpus;
  o.out_dir = dir.file(out);
  o.log = "none";
  o.quiet = true;
  return o;
}

std::string in_out(const gpt::TrainOptions& o, const std::string& name) { return (fs::path(o.out_dir) / name).string(); }

// Parses a `nnlab gpt ...` command line in-process; the CLI11 error message, or "" when
// it parsed.
std::string parse_error(const std::string& command_line) {
  CLI::App app;
  gpt::CliOptions opts;
  gpt::add_gpt_subcommands(*app.add_subcommand("gpt"), opts);
  try {
    app.parse(command_line, false);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

// A checkpoint of a tiny model at step 3 (AdamW state included), for the metadata tests.
std::string tiny_checkpoint(const testing::TempDir& dir) {
  gpt::GPTConfig c;
  c.vocab_size = 5;
  c.block_size = 4;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_embd = 4;
  gpt::GPT m = gpt::gpt_create(c);
  gpt::gpt_init_weights(m, 3);
  for (size_t i = 0; i < m.m_memory.size(); ++i) {
    m.m_memory[i] = 0.01f * static_cast<float>(i % 7);
    m.v_memory[i] = 0.001f * static_cast<float>(i % 5);
  }
  m.adam_t = 3;
  const std::string path = dir.file("tiny.safetensors");
  gpt::save_checkpoint(path, m, nn::build_vocab("\nabcd"), {3, 1.5f, "corpus.txt"});
  return path;
}

// Re-saves a checkpoint with `edit` applied, WITH valid checksums: what a buggy writer
// (rather than a damaged disk, which the checksums catch) would produce. What the loader
// must catch from the values themselves.
std::string rewritten(const testing::TempDir& dir, const std::string& from, const std::string& name,
                      const std::function<void(nn::Checkpoint&)>& edit) {
  nn::LoadOptions any;
  any.non_finite = nn::NonFinite::Allow;
  nn::Checkpoint ck = nn::load_safetensors(from, any);
  for (auto it = ck.metadata.begin(); it != ck.metadata.end();) {
    it = it->first.rfind("nnlab.", 0) == 0 ? ck.metadata.erase(it) : std::next(it);
  }
  edit(ck);
  std::vector<nn::TensorRef> refs;
  for (const auto& [key, t] : ck.tensors) refs.push_back({key, t.shape(), t.data()});
  const std::string path = dir.file(name);
  nn::save_safetensors(path, refs, ck.metadata, nn::NonFinite::Allow);
  return path;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

// ---- flags and config files ----------------------------------------------------------------

TEST_CASE("gpt bad input: no float flag takes NaN or infinity, --eps takes no 0", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-bad-flags");
  const std::string a = dir.file("a.safetensors"), b = dir.file("b.safetensors");
  std::ofstream(a) << "x";
  std::ofstream(b) << "x";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gpt train --grad-clip nan", "--grad-clip"},     {"gpt train --temperature nan", "--temperature"},
      {"gpt train --time-budget nan", "--time-budget"}, {"gpt train --eps nan", "--eps"},
      {"gpt train --eps 0", "--eps"},                   {"gpt train --lr inf", "--lr"},
      {"gpt train --min-lr nan", "--min-lr"},           {"gpt train --beta1 nan", "--beta1"},
      {"gpt train --beta2 nan", "--beta2"},             {"gpt train --weight-decay -inf", "--weight-decay"},
      {"gpt train --dropout nan", "--dropout"},         {"gpt train --val-fraction nan", "--val-fraction"},
      {"gpt bench --grad-clip nan", "--grad-clip"},     {"gpt sample --checkpoint c --temperature nan", "--temperature"},
      {"gpt eval --checkpoint c --val-fraction nan", "--val-fraction"},
      {"gpt diff " + a + " " + b + " --tolerance nan", "--tolerance"},
  };
  for (const auto& [line, flag] : cases) {
    INFO(line);
    const std::string err = parse_error(line);
    const bool zero = line.find("--eps 0") != std::string::npos;
    CHECK_THAT(err, Contains(flag) && Contains(zero ? "'0' is outside [1e-30, 1]" : "expected a finite number"));
  }
  CHECK(parse_error("gpt train --eps 1e-8 --grad-clip 0 --temperature 0") == "");
}

TEST_CASE("gpt bad input: --threads far above the cores is refused at once, not run for minutes", "[gpt][bad-input]") {
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THAT(parse_error("gpt train --threads 4096"), Contains("--threads") && Contains("4096 threads is far above"));
  CHECK_THAT(parse_error("gpt bench --threads 4096"), Contains("--threads"));
  CHECK(parse_error("gpt train --threads " + std::to_string(nn::max_threads_allowed())) == "");
  // every other caller of the trainer goes through use_threads
  CHECK_THAT(error_of([] { gpt::use_threads(4096); }), Contains("--threads 4096 is outside"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
}

TEST_CASE("gpt bad input: --rounds needs a peer to alternate with, and at least one round", "[gpt][bad-input]") {
  CHECK_THAT(parse_error("gpt bench --rounds 0"), Contains("--rounds"));
  CHECK(parse_error("gpt bench --rounds 5") == "");
  gpt::TrainOptions o;
  gpt::BenchOptions b;
  b.rounds = 3;
  b.torch = false;
  CHECK_THAT(error_of([&] { gpt::run_bench(o, b); }), Contains("--rounds 3 alternates") && Contains("--no-torch"));
  b.torch = true;
  o.arch = "llama";
  CHECK_THAT(error_of([&] { gpt::run_bench(o, b); }), Contains("--arch llama has no timed peer"));
  b.rounds = 2;
  b.backends = {"cuda"};
  o.arch = "gpt2";
  {
    testing::CaptureCout capture;
    CHECK_THAT(error_of([&] { gpt::run_bench(o, b); }), Contains("alternating rounds are for the CPU peer"));
    CHECK(capture.text().empty());  // refused before the header, the peak or any step
  }
}

// A peer that fails after some rounds: the complete rounds are reported, the failed one is
// named, and no ratio pairs ours with a round the peer did not finish. A stand-in Python
// answers the first call with a valid report and fails (exit 3) from the second on.
TEST_CASE("gpt bad input: a PyTorch peer failing in round 2 of 3 leaves round 1, and says so", "[gpt][bad-input]") {
  testing::TempDir dir("rounds-peer");
  const std::string fake = dir.file("python"), calls = dir.file("calls");
  {
    std::ofstream sh(fake);
    sh << "#!/bin/sh\n"
          "n=$(cat '" << calls << "' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '" << calls << "'\n"
          "[ $n -ge 2 ] && exit 3\n"
          "for last; do :; done\n"  // the report's path: the last argument
          "printf '{\"torch_version\": \"stand-in\", \"blas\": \"none\", \"best\": "
          "{\"intra\": 1, \"blas_threads\": 2, \"ms_per_iter\": 50.0}}' > \"$last\"\n";
  }
  REQUIRE(::chmod(fake.c_str(), 0755) == 0);
  testing::ScopedEnv py("NNLAB_TORCH_PYTHON", fake);
  gpt::TrainOptions o;
  o.n_layer = 1, o.n_head = 2, o.n_embd = 16, o.block_size = 8, o.batch_size = 2;
  gpt::BenchOptions b;
  b.rounds = 3, b.iters = 1, b.warmup = 0;
  b.json = dir.file("bench.json");
  std::string out;
  {
    testing::CaptureCout capture;
    gpt::run_bench(o, b);
    out = capture.text();
  }
  CHECK(testing::read_text(calls) == "2\n");  // round 3 was not started
  CHECK_THAT(out, Contains("failed in round 2 of 3") && Contains("exited with status 3") &&
                      Contains("only the 1 complete rounds before it are reported"));
  CHECK_THAT(out, Contains("in 1 (of 3 asked: the peer failed in the next) alternating rounds"));
  CHECK_THAT(out, Contains("median of 1 rounds (of 3 asked: it failed in the next)"));
  const std::string js = testing::read_text(b.json);
  CHECK_THAT(js, Contains("\"round\": 1,") && Contains("\"peer_best_ms_per_step\": 50"));
  CHECK_THAT(js, !Contains("\"round\": 2"));
}

TEST_CASE("gpt bad input: --dump-step needs --dump-path, and a step of the run", "[gpt][bad-input]") {
  CHECK_THAT(parse_error("gpt train --dump-step 3"), Contains("--dump-step") && Contains("--dump-path"));
  CHECK_THAT(parse_error("gpt train --dump-path d.safetensors"), Contains("--dump-path") && Contains("--dump-step"));
  gpt::TrainOptions o;
  o.dump_step = 3;
  CHECK_THAT(error_of([&] { gpt::check_options(o); }), Contains("--dump-step 3 needs --dump-path"));
  testing::TempDir dir("gpt-dump-step");
  gpt::TrainOptions t = tiny_options(dir, write_corpus(dir));
  t.dump_step = 9;  // max_iters is 8
  t.dump_path = dir.file("d.safetensors");
  std::ostringstream sink;
  CHECK_THAT(error_of([&] { gpt::train(t, sink); }), Contains("--dump-step 9 is not a step of this run"));
}

TEST_CASE("gpt bad input: config files: NaN, a key set twice, # inside quotes, unterminated quotes", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-bad-config");
  auto apply = [&](const std::string& text, gpt::TrainOptions& o) {
    const std::string path = dir.file("run.toml");
    std::ofstream(path, std::ios::trunc) << text;
    CLI::App app("test", "train");
    gpt::add_train_flags(app, o);
    app.parse("--config " + path, false);
    gpt::apply_config_file(app, o.config);
  };
  const std::string cfg = dir.file("run.toml");
  {
    gpt::TrainOptions o;
    CHECK_THAT(error_of([&] { apply("max-iters = 3\neps = nan\n", o); }),
               Contains(cfg + ":2: eps = nan") && Contains("finite"));
  }
  {
    gpt::TrainOptions o;
    CHECK_THAT(error_of([&] { apply("grad_clip = inf\n", o); }), Contains(cfg + ":1") && Contains("finite"));
  }
  {
    gpt::TrainOptions o;
    CHECK_THAT(error_of([&] { apply("max-iters = 3\n# comment\nmax_iters = 5\n", o); }),
               Contains(cfg + ":3: 'max-iters' is set again (first on line 1)"));
  }
  {
    gpt::TrainOptions o;
    apply("prompt = \"ROMEO: # not a comment\"  # a comment\nlog = 'a#b.jsonl'\nmax-iters = 7 # steps\n", o);
    CHECK(o.prompt == "ROMEO: # not a comment");
    CHECK(o.log == "a#b.jsonl");
    CHECK(o.max_iters == 7);
    CHECK(o.given.count("prompt") == 1);
  }
  {
    gpt::TrainOptions o;
    apply("prompt = \"\\n\"\n", o);  // the default prompt, written as TOML writes it
    CHECK(o.prompt == "\n");
  }
  {
    gpt::TrainOptions o;
    CHECK_THAT(error_of([&] { apply("prompt = \"ROMEO # \n", o); }), Contains(cfg + ":1") && Contains("no closing"));
  }
  {
    gpt::TrainOptions o;
    CHECK_THAT(error_of([&] { apply("prompt = \"a\" b\n", o); }), Contains(cfg + ":1: unexpected text after"));
  }
}

// ---- checkpoints: nothing non-finite, metadata validated, sizes before allocation -------------

TEST_CASE("gpt bad input: save_checkpoint refuses a NaN weight and keeps the previous file", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-save-nan");
  const std::string path = tiny_checkpoint(dir);
  const auto before = testing::read_bytes(path);
  gpt::LoadedCheckpoint ck = gpt::load_checkpoint(path);
  ck.model.params_memory[5] = std::nanf("");
  CHECK_THAT(error_of([&] { gpt::save_checkpoint(path, ck.model, ck.vocab, ck.state); }),
             Contains("refusing to write checkpoint " + path) && Contains("holds nan"));
  CHECK(testing::read_bytes(path) == before);
  ck.model.params_memory[5] = 0.0f;
  ck.model.v_memory[7] = std::numeric_limits<float>::infinity();  // AdamW state too
  CHECK_THAT(error_of([&] { gpt::save_checkpoint(path, ck.model, ck.vocab, ck.state); }),
             Contains("tensor 'adam.v."));
  CHECK(testing::read_bytes(path) == before);
}

TEST_CASE("gpt bad input: every metadata value is checked, naming its key", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-meta");
  const std::string good = tiny_checkpoint(dir);
  REQUIRE(gpt::load_checkpoint(good).state.step == 3);

  // damage on disk: a one-digit change in the vocabulary fails the header checksum
  auto bytes = testing::read_bytes(good);
  const std::string text(bytes.begin(), bytes.end());
  const size_t at = text.find("0a61626364");  // "\nabcd"
  REQUIRE(at != std::string::npos);
  bytes[at + 9] = '5';  // 'd' -> 'e'
  testing::write_bytes(dir.file("vocab.safetensors"), bytes);
  CHECK_THAT(error_of([&] { gpt::load_checkpoint(dir.file("vocab.safetensors")); }),
             Contains("vocab.safetensors is corrupt") && Contains("nnlab.header_checksum"));

  // values a buggy writer could store (valid checksums): each one named
  struct Case {
    std::string key, value, expect;
  };
  const std::vector<Case> cases = {
      {"step", "-5", "metadata 'step': -5 is outside"},
      {"step", "abc", "metadata 'step': expected a whole number, got 'abc'"},
      {"best_val_loss", "nan", "metadata 'best_val_loss'"},
      {"best_val_loss", "1.5x", "metadata 'best_val_loss'"},
      {"adam_t", "0", "metadata 'adam_t' is 0 but 'step' is 3"},
      {"n_layer", "two", "metadata 'n_layer': expected a whole number, got 'two'"},
      {"n_embd", "1e3", "metadata 'n_embd': expected a whole number"},
      {"dropout", "nan", "metadata 'dropout'"},
      {"bias", "yes", "metadata 'bias' must be 0 or 1"},
      {"vocab_hex", "610a626364", "metadata 'vocab_hex'"},            // not in byte order: ids would remap
      {"vocab_hex", "0a6162636", "metadata 'vocab_hex'"},
      {"vocab_size", "6", "metadata 'vocab_hex' lists 5 characters but 'vocab_size' is 6"},
      {"format", "nnlab-gpt-2", "format 'nnlab-gpt-2'"},
  };
  for (const Case& c : cases) {
    INFO(c.key << " = " << c.value);
    const std::string path = rewritten(dir, good, "edited.safetensors", [&](nn::Checkpoint& ck) { ck.metadata[c.key] = c.value; });
    const std::string err = error_of([&] { gpt::load_checkpoint(path); });
    CHECK_THAT(err, Contains("checkpoint " + path) && Contains(c.expect));
    CHECK_THAT(err, !Contains("stof") && !Contains("stoi"));
  }
  // bias "0" over a file with bias tensors: the tensors are not silently dropped
  const std::string nobias = rewritten(dir, good, "nobias.safetensors", [](nn::Checkpoint& ck) { ck.metadata["bias"] = "0"; });
  CHECK_THAT(error_of([&] { gpt::load_checkpoint(nobias); }),
             Contains("holds tensor '") && Contains(".bias' that its metadata's model") && Contains("bias=0"));
}

TEST_CASE("gpt bad input: tensors must be exactly the config's: missing, extra, NaN or negative v", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-tensors");
  const std::string good = tiny_checkpoint(dir);
  const std::string missing = rewritten(dir, good, "missing.safetensors", [](nn::Checkpoint& ck) { ck.tensors.erase("adam.v.wpe"); });
  CHECK_THAT(error_of([&] { gpt::load_checkpoint(missing); }), Contains("lacks tensor 'adam.v.wpe'"));
  const std::string extra = rewritten(dir, good, "extra.safetensors", [](nn::Checkpoint& ck) { ck.tensors.emplace("h.9.extra", nn::Tensor({2})); });
  CHECK_THAT(error_of([&] { gpt::load_checkpoint(extra); }), Contains("holds tensor 'h.9.extra'"));
  const std::string nan_v = rewritten(dir, good, "nanv.safetensors", [](nn::Checkpoint& ck) { ck.tensors.at("adam.v.wte").data()[3] = std::nanf(""); });
  CHECK_THAT(error_of([&] { gpt::load_checkpoint(nan_v); }),
             Contains("checkpoint " + nan_v) && Contains("tensor 'adam.v.wte' holds nan at index 3"));
  const std::string nan_w = rewritten(dir, good, "nanw.safetensors", [](nn::Checkpoint& ck) { ck.tensors.at("h.0.ln_1.weight").data()[1] = -std::numeric_limits<float>::infinity(); });
  CHECK_THAT(error_of([&] { gpt::load_checkpoint(nan_w); }),
             Contains("checkpoint " + nan_w) && Contains("tensor 'h.0.ln_1.weight' holds -inf at index 1"));
  const std::string neg_v = rewritten(dir, good, "negv.safetensors", [](nn::Checkpoint& ck) { ck.tensors.at("adam.v.wte").data()[2] = -1.0f; });
  CHECK_THAT(error_of([&] { gpt::load_checkpoint(neg_v); }), Contains("'adam.v.wte' holds -1 at index 2"));
}

TEST_CASE("gpt bad input: a small file claiming a huge model is refused before anything is allocated", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-huge");
  const std::string good = tiny_checkpoint(dir);
  // 1024 layers 65536 wide: 5e13 parameters, 800 TB with AdamW, in a file of a few KB
  const std::string huge = rewritten(dir, good, "huge.safetensors", [](nn::Checkpoint& ck) {
    ck.metadata["n_layer"] = "1024";
    ck.metadata["n_embd"] = "65536";
  });
  REQUIRE(fs::file_size(huge) < 20000);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = error_of([&] { gpt::load_checkpoint(huge); });
  INFO(err);
  // the shape check speaks, not the allocator ("MiB of host memory", "out of host memory")
  CHECK_THAT(err, Contains("checkpoint " + huge) && Contains("has shape") && Contains("n_embd=65536"));
  CHECK_THAT(err, !Contains("MiB"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 2.0);
}

TEST_CASE("gpt bad input: resuming from a checkpoint whose adam.v holds NaN is refused, nothing written", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-resume-nan");
  gpt::TrainOptions o = tiny_options(dir, write_corpus(dir));
  o.max_iters = 4;
  std::ostringstream sink;
  gpt::train(o, sink);
  const std::string last = in_out(o, "last.safetensors"), best = in_out(o, "best.safetensors");
  const auto last_bytes = testing::read_bytes(last), best_bytes = testing::read_bytes(best);
  const std::string poisoned = rewritten(dir, last, "poisoned.safetensors", [](nn::Checkpoint& ck) {
    ck.tensors.at("adam.v.h.0.mlp.c_fc.weight").data()[0] = std::nanf("");
  });
  gpt::TrainOptions r = o;
  r.resume = poisoned;
  r.max_iters = 8;
  CHECK_THAT(error_of([&] { gpt::train(r, sink); }),
             Contains("checkpoint " + poisoned) && Contains("tensor 'adam.v.h.0.mlp.c_fc.weight' holds nan"));
  CHECK(testing::read_bytes(last) == last_bytes);
  CHECK(testing::read_bytes(best) == best_bytes);
}

// ---- runs: out-dir, logs, resume ------------------------------------------------------------

TEST_CASE("gpt bad input: a new run into an out-dir with checkpoints is refused unless --overwrite", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-outdir");
  gpt::TrainOptions o = tiny_options(dir, write_corpus(dir));
  o.max_iters = 4;
  std::ostringstream sink;
  gpt::train(o, sink);
  const std::string best = in_out(o, "best.safetensors");
  const auto before = testing::read_bytes(best);
  gpt::TrainOptions again = o;
  again.seed = 7;  // another run, which would replace best.safetensors
  CHECK_THAT(error_of([&] { gpt::train(again, sink); }),
             Contains("already holds " + best) && Contains("--resume") && Contains("--overwrite"));
  CHECK(testing::read_bytes(best) == before);
  again.overwrite = true;
  const gpt::TrainResult r = gpt::train(again, sink);
  CHECK(r.best_path == best);
  CHECK(testing::read_bytes(best) != before);
  // the flag: --overwrite and --resume contradict each other
  CHECK_THAT(parse_error("gpt train --overwrite --resume x"), Contains("--overwrite") && Contains("--resume"));
}

TEST_CASE("gpt bad input: --resume appends to the log, and a half-written last line is removed", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-log-append");
  gpt::TrainOptions o = tiny_options(dir, write_corpus(dir));
  o.max_iters = 4;
  o.log = "";  // <out-dir>/log.jsonl
  std::ostringstream sink;
  gpt::train(o, sink);
  const std::string log = in_out(o, "log.jsonl");
  const std::vector<std::string> first = lines_of(log);
  REQUIRE(first.size() == 6);  // eval 0, steps 1-4, eval 4
  std::ofstream(log, std::ios::app) << "{\"step\": 5, \"spl";  // a run killed mid-line
  gpt::TrainOptions r = o;
  r.resume = in_out(o, "last.safetensors");
  r.max_iters = 8;
  r.quiet = false;
  std::ostringstream out;
  gpt::train(r, out);
  CHECK_THAT(out.str(), Contains("removed the unfinished last line (16 bytes)"));
  const std::vector<std::string> all = lines_of(log);
  REQUIRE(all.size() == 6 + 1 + 5);  // the history, a resume record, steps 5-8, eval 8
  for (size_t i = 0; i < first.size(); ++i) CHECK(all[i] == first[i]);
  CHECK_THAT(all[6], Contains("\"split\": \"resume\"") && Contains("\"step\": 4"));
  CHECK_THAT(all.back(), Contains("\"step\": 8") && Contains("\"eval\""));
}

TEST_CASE("gpt bad input: a log that cannot be written stops the run, checkpoints intact", "[gpt][bad-input]") {
  if (!fs::exists("/dev/full")) {
    WARN("no /dev/full on this system: not tested");
    return;
  }
  testing::TempDir dir("gpt-log-full");
  gpt::TrainOptions o = tiny_options(dir, write_corpus(dir));
  o.log = "/dev/full";
  std::ostringstream sink;
  CHECK_THAT(error_of([&] { gpt::train(o, sink); }),
             Contains("cannot write to the metrics log /dev/full") && Contains("training stopped at step 0") &&
                 Contains("no checkpoint"));
  CHECK_FALSE(fs::exists(in_out(o, "best.safetensors")));

  // a run with checkpoints, resumed with a log on a full disk: its checkpoints stay
  o.log = "none";
  o.max_iters = 4;
  gpt::train(o, sink);
  const std::string last = in_out(o, "last.safetensors");
  const auto before = testing::read_bytes(last);
  gpt::TrainOptions r = o;
  r.resume = last;
  r.max_iters = 8;
  r.log = "/dev/full";
  CHECK_THAT(error_of([&] { gpt::train(r, sink); }),
             Contains("/dev/full") && Contains("The last good checkpoint is " + last + " (step 4"));
  CHECK(testing::read_bytes(last) == before);
}

TEST_CASE("gpt bad input: a log that fails mid-run: the state is saved first, then the run stops", "[gpt][bad-input]") {
  // a FIFO whose reader goes away after 7 lines: the next writes fail (EPIPE) as a full disk's would
  testing::TempDir dir("gpt-log-pipe");
  const std::string fifo = dir.file("log.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto old_handler = std::signal(SIGPIPE, SIG_IGN);
  std::thread reader([&] {
    std::ifstream in(fifo);
    std::string line;
    for (int i = 0; i < 7 && std::getline(in, line); ++i) {
    }
  });
  gpt::TrainOptions o = tiny_options(dir, write_corpus(dir));
  o.max_iters = 40;  // many lines after the reader has gone: one of them surely fails
  o.log = fifo;
  std::ostringstream sink;
  const std::string err = error_of([&] { gpt::train(o, sink); });
  reader.join();
  std::signal(SIGPIPE, old_handler);
  INFO(err);
  // lines: eval 0, steps 1-4, eval 4 (checkpoint), step 5 read; a later write fails
  CHECK_THAT(err, Contains("cannot write to the metrics log " + fifo) && Contains("was saved first"));
  const gpt::LoadedCheckpoint last = gpt::load_checkpoint(in_out(o, "last.safetensors"));
  CHECK(last.state.step > 4);
  CHECK_THAT(err, Contains("The last good checkpoint is " + in_out(o, "last.safetensors") + " (step " +
                           std::to_string(last.state.step) + ")"));
}

TEST_CASE("gpt bad input: --resume with a contradicting model flag is an error, not ignored", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-resume-conflict");
  gpt::TrainOptions o = tiny_options(dir, write_corpus(dir));
  o.max_iters = 4;
  std::ostringstream sink;
  gpt::train(o, sink);
  gpt::TrainOptions r = o;
  r.resume = in_out(o, "last.safetensors");
  r.max_iters = 8;
  r.out_dir = dir.file("resumed");
  struct Case {
    std::string flag;
    std::function<void(gpt::TrainOptions&)> set;
  };
  const std::vector<Case> cases = {
      {"n-layer", [](gpt::TrainOptions& t) { t.n_layer = 2; }},  {"n-head", [](gpt::TrainOptions& t) { t.n_head = 4; }},
      {"n-embd", [](gpt::TrainOptions& t) { t.n_embd = 32; }},   {"block-size", [](gpt::TrainOptions& t) { t.block_size = 8; }},
      {"dropout", [](gpt::TrainOptions& t) { t.dropout = 0.1f; }}, {"bias", [](gpt::TrainOptions& t) { t.bias = false; }},
  };
  for (const Case& c : cases) {
    INFO(c.flag);
    gpt::TrainOptions t = r;
    c.set(t);
    t.given = {c.flag};
    CHECK_THAT(error_of([&] { gpt::train(t, sink); }), Contains("--" + c.flag) && Contains("contradicts the checkpoint"));
    CHECK_FALSE(fs::exists(in_out(t, "last.safetensors")));
  }
  // the same values given explicitly are no contradiction
  gpt::TrainOptions same = r;
  same.given = {"n-layer", "n-embd", "block-size", "dropout", "bias", "n-head"};
  CHECK(gpt::train(same, sink).steps == 4);
}

TEST_CASE("gpt bad input: --max-iters 0 reports no best loss and no checkpoint it did not write", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-zero-iters");
  gpt::TrainOptions o = tiny_options(dir, write_corpus(dir));
  o.max_iters = 0;
  o.quiet = false;
  std::ostringstream out;
  const gpt::TrainResult r = gpt::train(o, out);
  INFO(out.str());
  CHECK_THAT(out.str(), Contains("no checkpoint written (--max-iters 0"));
  CHECK_THAT(out.str(), !Contains("1e+30") && !Contains("1000000000") && !Contains("best val loss"));
  CHECK(r.best_path.empty());
  CHECK(r.last_path.empty());
  CHECK_FALSE(fs::exists(in_out(o, "best.safetensors")));
}

TEST_CASE("gpt bad input: a text without a newline: the prompt is checked before training", "[gpt][bad-input][cli]") {
  testing::TempDir dir("gpt-no-newline");
  const std::string corpus = write_corpus(dir, "flat.txt", "to be or not to be that is the question ");
  gpt::TrainOptions o = tiny_options(dir, corpus);
  o.max_iters = 2;
  o.sample_tokens = 10;
  o.quiet = false;
  std::ostringstream out;
  gpt::train(o, out);  // the default prompt "\n": replaced, and said so
  CHECK_THAT(out.str(), Contains("has no newline (the default --prompt); samples start from its first character 't'"));
  CHECK_THAT(out.str(), Contains("---- sample"));
  // `nnlab gpt sample` on that checkpoint: the same replacement, said on stderr
  const auto r = testing::run_program("nnlab", "gpt sample --tokens 5 --checkpoint '" + in_out(o, "best.safetensors") + "'");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("without a newline (the default --prompt); starting from ' '"));
  // an explicit prompt the text cannot encode: refused before a single step
  gpt::TrainOptions bad = o;
  bad.out_dir = dir.file("bad");
  bad.prompt = "ROMEO";
  bad.given = {"prompt"};
  CHECK_THAT(error_of([&] { gpt::train(bad, out); }),
             Contains("--prompt has character 'R' (position 0)") && Contains("checked before training"));
  CHECK_FALSE(fs::exists(in_out(bad, "last.safetensors")));
  bad.prompt = "\n";  // given explicitly: not replaced
  CHECK_THAT(error_of([&] { gpt::train(bad, out); }), Contains("--prompt has character byte 10"));
}

TEST_CASE("gpt bad input: an orphan .tmp of a killed write is removed on the next run, and said", "[gpt][bad-input]") {
  testing::TempDir dir("gpt-orphan");
  gpt::TrainOptions o = tiny_options(dir, write_corpus(dir));
  o.max_iters = 2;
  o.quiet = false;
  fs::create_directories(o.out_dir);
  std::ofstream(in_out(o, "last.safetensors.tmp")) << "half a checkpoint";
  std::ostringstream out;
  gpt::train(o, out);
  CHECK_THAT(out.str(), Contains("removed " + in_out(o, "last.safetensors.tmp")));
  CHECK_FALSE(fs::exists(in_out(o, "last.safetensors.tmp")));
}

TEST_CASE("gpt bad input: the program exits non-zero with the message (threads, /dev/full log)", "[gpt][bad-input][cli]") {
  testing::TempDir dir("gpt-bad-cli");
  const std::string corpus = write_corpus(dir);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = testing::run_program("nnlab", "gpt train --threads 4096 --data '" + corpus + "' --out-dir '" + dir.file("o1") + "'");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("--threads"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 30.0);
  if (fs::exists("/dev/full")) {
    r = testing::run_program("nnlab", "gpt train --n-layer 1 --n-embd 16 --n-head 2 --block-size 16 --batch-size 4 "
                                      "--max-iters 4 --eval-iters 2 --data '" + corpus + "' --out-dir '" +
                                          dir.file("o2") + "' --log /dev/full");
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains("error: cannot write to the metrics log /dev/full"));
  }
}

TEST_CASE("gpt bad input: a host allocation larger than the machine's memory is refused with a message", "[gpt][bad-input]") {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) {
    WARN("this system does not report its memory size: not tested");
    return;
  }
  // 64x the RAM: never a real request, and no overcommit policy lets it through either
  const auto too_much = static_cast<size_t>(pages) * static_cast<size_t>(page) * 64;
  CHECK_THAT(error_of([&] { gpt::make_array<float>(gpt::host_memory(), too_much / sizeof(float)); }),
             Contains("MiB of host memory, more than this machine's") && Contains("--batch-size"));
}
