// tests/test_gpt_cli.cpp: `nnlab gpt ...` as a user runs it: a tiny training run from a
// config file with a flag overriding it, sampling, eval, dump/diff, and the clear errors
// (bad flags and config keys, missing and corrupt checkpoints), and the config file read by
// CLI11 in-process.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "gpt/cli.h"
#include "tests/cli_helpers.h"
#include "tests/test_util.h"

namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string write_text(const testing::TempDir& dir) {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n";
  const std::string path = dir.file("text.txt");
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("gpt cli: train from a config file (flags win), then sample, eval, dump and diff", "[gpt][cli]") {
  testing::TempDir dir("gpt-cli");
  const std::string text = write_text(dir);
  const std::string cfg = dir.file("run.toml");
  std::ofstream(cfg) << "# tiny run\n[train]\nmax-iters = 4\nn_layer = 1\nn-head = 2\nn-embd = 32\n"
                        "block-size = 16\nbatch-size = 4\neval-iters = 2\neval-interval = 2\n";
  const std::string out = dir.file("out");
  auto r = testing::run_program("nnlab", "gpt train --config " + q(cfg) + " --n-embd 16 --data " + q(text) +
                                             " --out-dir " + q(out) + " --sample-tokens 20 --prompt To");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("1 layers, 2 heads, 16 wide, context 16"));  // file + flag
  CHECK_THAT(r.output, Catch::Contains("4 steps"));
  CHECK_THAT(r.output, Catch::Contains("---- sample"));
  const std::string best = (std::filesystem::path(out) / "best.safetensors").string();
  REQUIRE(std::filesystem::exists(best));
  const std::string log = testing::read_text((std::filesystem::path(out) / "log.jsonl").string());
  CHECK_THAT(log, Catch::Contains("\"split\": \"eval\"") && Catch::Contains("\"tok_s\""));

  r = testing::run_program("nnlab", "gpt sample --checkpoint " + q(best) + " --prompt To --tokens 30 --top-k 3");
  CHECK(r.status == 0);
  r = testing::run_program("nnlab", "gpt eval --checkpoint " + q(best) + " --data " + q(text) + " --eval-iters 3");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("val loss"));
  const std::string d1 = dir.file("d1.safetensors"), d2 = dir.file("d2.safetensors");
  r = testing::run_program("nnlab", "gpt dump --checkpoint " + q(best) + " --text 'To be, or not' --out " + q(d1));
  REQUIRE(r.status == 0);
  r = testing::run_program("nnlab", "gpt dump --checkpoint " + q(best) + " --text 'To be, or not' --out " + q(d2) +
                                        " --backend naive");
  REQUIRE(r.status == 0);
  r = testing::run_program("nnlab", "gpt diff " + q(d1) + " " + q(d2) + " --tolerance 1e-4");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("h.0.att"));
}

TEST_CASE("gpt cli: bad input ends in a clear message and a non-zero exit", "[gpt][cli]") {
  testing::TempDir dir("gpt-cli-bad");
  const std::string cfg = dir.file("bad.toml");
  std::ofstream(cfg) << "max-iterz = 3\n";
  auto r = testing::run_program("nnlab", "gpt train --config " + q(cfg));
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains("bad.toml:1: unknown option 'max-iterz'"));
  for (const char* key : {"help", "config"}) {  // command-line only: never silently ignored
    std::ofstream(cfg) << key << " = true\n";
    r = testing::run_program("nnlab", "gpt train --config " + q(cfg));
    CHECK(r.status != 0);
    CHECK_THAT(r.output, Catch::Contains(std::string("bad.toml:1: '") + key + "' cannot be set in a config file"));
  }
  r = testing::run_program("nnlab", "gpt train --n-head 0");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains("--n-head"));
  r = testing::run_program("nnlab", "gpt train --backend tpu");
  CHECK(r.status != 0);
  r = testing::run_program("nnlab", "gpt sample --checkpoint " + q(dir.file("missing.safetensors")));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("error:") && Catch::Contains("missing.safetensors"));
  const std::string junk = dir.file("junk.safetensors");
  std::ofstream(junk) << "not a checkpoint at all";
  r = testing::run_program("nnlab", "gpt sample --checkpoint " + q(junk));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("error:") && Catch::Contains("junk.safetensors"));
  r = testing::run_program("nnlab", "gpt");
  CHECK(r.status != 0);
}

// CLI11 applies the file (gpt::apply_config_file): a flag reads as a flag (the inverted
// --no-torch included: before CLI11 applied files, `no-torch = true` ran PyTorch anyway), a
// list splits at its delimiter as on the command line, the command line wins, and the
// flags' requirements hold with the file's values.
TEST_CASE("gpt cli: config files through CLI11: flags, lists, the command line wins, requirements", "[gpt][cli]") {
  testing::TempDir dir("gpt-cli-config");
  const std::string cfg = dir.file("bench.toml");
  // `nnlab gpt <sub> <flags> --config bench.toml` holding `text`
  auto parse = [&](const std::string& text, const std::string& sub, const std::string& flags, gpt::CliOptions& opts) {
    std::ofstream(cfg, std::ios::trunc) << text;
    CLI::App app("test", "nnlab");
    CLI::App* gpt_cmd = app.add_subcommand("gpt");
    gpt::add_gpt_subcommands(*gpt_cmd, opts);
    app.parse("gpt " + sub + " " + flags + " --config " + cfg, false);
    gpt::apply_config_file(*gpt_cmd->get_subcommand(sub), opts.train.config);
  };
  {
    gpt::CliOptions opts;
    parse("no-torch = true\nbackends = cpu,naive\nn_layer = 2\nn-head = 2\n", "bench", "--n-layer 3", opts);
    CHECK_FALSE(opts.bench.torch);
    CHECK(opts.bench.backends == std::vector<std::string>{"cpu", "naive"});
    CHECK(opts.train.n_layer == 3);  // the command line
    CHECK(opts.train.n_head == 2);   // the file
  }
  {
    gpt::CliOptions opts;
    parse("naive = true\n", "bench", "--no-torch", opts);
    CHECK(opts.bench.naive);
    CHECK_FALSE(opts.bench.torch);
  }
  {
    gpt::CliOptions opts;  // --overwrite would replace the checkpoints --resume continues from
    CHECK_THAT(testing::error_of([&] { parse("overwrite = true\n", "train", "--resume " + cfg, opts); }),
               Catch::Contains(cfg) && Catch::Contains("--overwrite") && Catch::Contains("--resume"));
  }
  {
    gpt::CliOptions opts;
    CHECK_THAT(testing::error_of([&] { parse("dump-step = 2\n", "train", "", opts); }),
               Catch::Contains(cfg + ":1: dump-step = 2") && Catch::Contains("--dump-path"));
  }
  {
    gpt::CliOptions opts;
    CHECK_THAT(testing::error_of([&] { parse("# a run\n\nbias = maybe\n", "train", "", opts); }),
               Catch::Contains(cfg + ":3: bias = maybe") && Catch::Contains("--bias"));
  }
  {
    gpt::CliOptions opts;
    CHECK_THAT(testing::error_of([&] { parse("lr = 0.01\nlearning_rate = 0.01\n", "train", "", opts); }),
               Catch::Contains(cfg + ":2: unknown option 'learning-rate' (see `nnlab gpt train --help`)"));
    // a name CLI11 gives a meaning of its own (a section's start) is no key either
    CHECK_THAT(testing::error_of([&] { parse("++ = 5\n", "train", "", opts); }),
               Catch::Contains(cfg + ":1: unknown option '++'"));
  }
}
