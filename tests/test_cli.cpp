// The front door and the lesson programs: --help works, and every kind of bad input ends
// in a clear message and a non-zero exit status, never a crash (status >= 128).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "tests/cli_helpers.h"

using testing::run_program;

TEST_CASE("nnlab --help lists every subcommand", "[cli]") {
  const auto r = run_program("nnlab", "--help");
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (const char* sub : {"lesson01", "lesson02", "lesson03", "lesson04", "lesson05", "lesson06", "lesson07", "lesson08", "lesson09", "lesson10", "lesson11", "generate", "perplexity", "export-hf", "check", "bench", "cuda", "info"}) {
    REQUIRE_THAT(r.output, Catch::Contains(sub));
  }
}

TEST_CASE("every subcommand and lesson program answers --help", "[cli]") {
  for (const char* sub : {"lesson01", "lesson02", "lesson03", "lesson04", "lesson05", "lesson06", "lesson07", "lesson08", "lesson09", "lesson10", "lesson11", "generate", "perplexity", "export-hf", "check", "bench", "cuda", "info"}) {
    const auto r = run_program("nnlab", std::string(sub) + " --help");
    INFO(sub << ": " << r.output);
    REQUIRE(r.status == 0);
    REQUIRE_THAT(r.output, Catch::Contains("--help"));
  }
  for (const char* prog : {"lesson01", "lesson02", "lesson03", "lesson04", "lesson05", "lesson06", "lesson07", "lesson08", "lesson09", "lesson10", "lesson11"}) {
    const auto r = run_program(prog, "--help");
    INFO(prog << ": " << r.output);
    REQUIRE(r.status == 0);
    REQUIRE_THAT(r.output, Catch::Contains("--part"));
  }
}

TEST_CASE("bad flags and bad values exit non-zero with a message", "[cli]") {
  struct Case {
    const char* program;
    const char* args;
    const char* expect;  // part of the message
  };
  const Case cases[] = {
      {"nnlab", "", "subcommand"},
      {"nnlab", "lesson99", "lesson99"},
      {"nnlab", "lesson02 --no-such-flag", "--no-such-flag"},
      {"nnlab", "lesson02 --epochs 0", "--epochs"},
      {"nnlab", "lesson02 --epochs many", "--epochs"},
      {"nnlab", "lesson02 --lr -1", "--lr"},
      {"nnlab", "lesson02 --part everything", "--part"},
      {"nnlab", "lesson02 --optimizer rmsprop", "--optimizer"},
      {"nnlab", "lesson02 --hidden 0", "--hidden"},
      {"lesson02", "--batch-size -3", "--batch-size"},
      {"nnlab", "lesson01 --part bogus", "--part"},
      {"nnlab", "lesson03 --part bogus", "--part"},
      {"nnlab", "lesson03 --size 3", "--size"},
      {"lesson03", "--threads 0", "--threads"},
      {"nnlab", "lesson04 --part bogus", "--part"},
      {"nnlab", "lesson04 --channels 0", "--channels"},
      {"nnlab", "lesson04 --dropout 1.5", "--dropout"},
      {"lesson04", "--epochs 0", "--epochs"},
      {"lesson04", "--shift 99", "--shift"},
      {"nnlab", "lesson05 --part bogus", "--part"},
      {"nnlab", "lesson05 --temperature -1", "--temperature"},
      {"lesson05", "--iters many", "--iters"},
      {"nnlab", "lesson06 --part bogus", "--part"},
      {"lesson06", "--dead-times -5", "--dead-times"},
      {"nnlab", "lesson07 --part bogus", "--part"},
      {"lesson07", "--part everything", "--part"},
      {"nnlab", "lesson07 --keys 1", "--keys"},
      {"lesson07", "--queries many", "--queries"},
      {"nnlab", "lesson08 --part bogus", "--part"},
      {"nnlab", "lesson08 --n-head 0", "--n-head"},
      {"lesson08", "--flops-iters 0", "--flops-iters"},
      {"nnlab", "lesson09 --part bogus", "--part"},
      {"lesson09", "--device tpu", "--device"},
      {"nnlab", "lesson10 --part bogus", "--part"},
      {"lesson10", "--backend tpu", "--backend"},
      {"nnlab", "cuda bench no_such_op --device emu", "no_such_op"},
  };
  for (const Case& c : cases) {
    const auto r = run_program(c.program, c.args);
    INFO(c.program << " " << c.args << " -> status " << r.status << ":\n" << r.output);
    REQUIRE(r.status != 0);
    REQUIRE(r.status < 128);  // an error exit, not a crash
    REQUIRE_THAT(r.output, Catch::Contains(c.expect));
  }
}

TEST_CASE("a missing dataset is a clear error with a hint, not a crash", "[cli]") {
  const auto r = run_program("nnlab", "lesson02 --part train --data-dir /nonexistent/nnlab-data --epochs 1");
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Catch::StartsWith("error: ") || Catch::Contains("\nerror: "));
  REQUIRE_THAT(r.output, Catch::Contains("/nonexistent/nnlab-data"));
  REQUIRE_THAT(r.output, Catch::Contains("fetch_data.py"));
}

TEST_CASE("lesson08: sampling without a checkpoint says to train first and does not crash", "[cli][lesson08]") {
  for (const char* prog : {"nnlab", "lesson08"}) {
    const std::string args = std::string(prog) == "nnlab" ? "lesson08 --part sample --checkpoint /nonexistent/nnlab/best.safetensors"
                                                          : "--part sample --out-dir /nonexistent/nnlab-out";
    const auto r = run_program(prog, args);
    INFO(prog << " " << args << " -> status " << r.status << ":\n" << r.output);
    REQUIRE(r.status == 1);
    REQUIRE_THAT(r.output, Catch::StartsWith("error: ") || Catch::Contains("\nerror: "));
    REQUIRE_THAT(r.output, Catch::Contains("/nonexistent/nnlab"));
    REQUIRE_THAT(r.output, Catch::Contains("run `nnlab lesson08 --part train` first"));
  }
}

TEST_CASE("a corrupt dataset file is a clear error, not a crash", "[cli]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "nnlab-test-cli-corrupt";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    std::ofstream(dir / name, std::ios::binary) << "this is not an IDX file";
  }
  const auto r = run_program("nnlab", "lesson02 --part train --epochs 1 --data-dir " + dir.string());
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Catch::Contains("error: "));
  REQUIRE_THAT(r.output, Catch::Contains("train-images-idx3-ubyte"));
  fs::remove_all(dir);
}

TEST_CASE("nnlab info describes the build", "[cli]") {
  const auto r = run_program("nnlab", "info");
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Catch::Contains("OpenMP threads"));
  REQUIRE_THAT(r.output, Catch::Contains("CUDA"));
  // Without a GPU (no CUDA build, or a build on a machine without one) it says the CUDA
  // kernels still run on the emulator and how, instead of only the runtime's error.
  REQUIRE_THAT(r.output, Catch::Contains("CUDA emulator   always built"));
  const bool no_gpu = r.output.find("CUDA            not built") != std::string::npos ||
                      r.output.find("no GPU usable here") != std::string::npos;
  if (no_gpu) REQUIRE_THAT(r.output, Catch::Contains("nnlab cuda bench matmul --device emu --quick"));
  // The compiler, what the configure-time canary found, the workaround, and the SIMD level
  // (cmake/NnlabCompilerCanary.cmake, app/info.cpp).
  for (const char* line : {"compiler ", "CPU flags ", "compiler check ", "workaround ", "SIMD level ", "this CPU has "})
    REQUIRE_THAT(r.output, Catch::Contains(line));
  // The SIMD level follows from the flags: a native build on a CPU with AVX-512F uses it
  // unless the workaround gave it up; a portable build uses the portable path.
  const auto field = [&](const std::string& name) {
    const auto at = r.output.find("  " + name);
    REQUIRE(at != std::string::npos);
    const auto end = r.output.find('\n', at);
    return r.output.substr(at, end - at);
  };
  const std::string flags = field("CPU flags"), level = field("SIMD level"), cpu = field("this CPU has"),
                    workaround = field("workaround");
  REQUIRE_THAT(field("compiler "), !Catch::Contains("unknown"));  // app/CMakeLists.txt passed the facts
  if (flags.find("-march=native") != std::string::npos && cpu.find("AVX-512F") != std::string::npos &&
      workaround.find("-mno-avx512f") == std::string::npos)
    REQUIRE_THAT(level, Catch::Contains("AVX-512F"));
  if (flags.find("portable") != std::string::npos) REQUIRE_THAT(level, Catch::Contains("portable"));
}

TEST_CASE("lesson 08 reads --config like nnlab gpt train, and refuses a bad one", "[cli]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nnlab-test-lesson08-config-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "wide.toml") << "n-embd = 96\nn-head = 3\n";
    std::ofstream(dir / "nan.toml") << "eps = nan\n";
  }
  auto r = run_program("nnlab", "lesson08 --part shapes --config " + (dir / "wide.toml").string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Catch::Contains("C=96"));
  // a flag on the command line wins over the file
  r = run_program("nnlab", "lesson08 --part shapes --n-embd 64 --n-head 4 --config " + (dir / "wide.toml").string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE_THAT(r.output, Catch::Contains("C=64"));
  r = run_program("lesson08", "--part shapes --config " + (dir / "nan.toml").string());
  INFO(r.output);
  REQUIRE(r.status != 0);
  REQUIRE_THAT(r.output, Catch::Contains("nan.toml:1") && Catch::Contains("finite"));
  fs::remove_all(dir);
}
