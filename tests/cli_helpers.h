// tests/cli_helpers.h: run a built program and capture what it printed and its exit status.
#pragma once

#include <array>
#include <cstdio>
#include <string>

#if defined(_WIN32)
#define NNLAB_POPEN _popen
#define NNLAB_PCLOSE _pclose
#else
#include <sys/wait.h>
#define NNLAB_POPEN popen
#define NNLAB_PCLOSE pclose
#endif

namespace testing {

struct RunResult {
  int status = -1;     // the program's exit status
  std::string output;  // stdout and stderr, interleaved
};

// Runs `<bin dir>/<program> <args>` through the shell, stderr folded into stdout.
inline RunResult run_program(const std::string& program, const std::string& args) {
  const std::string cmd = std::string("\"") + NNLAB_BIN_DIR + "/" + program + "\" " + args + " 2>&1";
  RunResult r;
  FILE* pipe = NNLAB_POPEN(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int raw = NNLAB_PCLOSE(pipe);
#if defined(_WIN32)
  r.status = raw;
#else
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
#endif
  return r;
}

}  // namespace testing
