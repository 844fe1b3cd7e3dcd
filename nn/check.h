// nn/check.h: errors a student can act on.
//
// NN_CHECK(cond, message) throws nn::Error when `cond` is false. The message says
// where (file:line), what was expected, and should end with a hint the reader can act
// on ("dataset not found at X: run `python3 scripts/fetch_data.py fashion-mnist`").
// Programs catch nn::Error in main, print it and exit with status 1: bad input never
// crashes and never produces silent garbage.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace nn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  std::ostringstream os;
  os << what << "  [" << file << ":" << line << "]";
  throw Error(os.str());
}

}  // namespace nn

// The message argument is streamed, so it can mix text and values:
//   NN_CHECK(n > 0, "expected a positive batch size, got " << n);
#define NN_CHECK(cond, message)                              \
  do {                                                       \
    if (!(cond)) {                                           \
      std::ostringstream nn_check_os_;                       \
      nn_check_os_ << message;                               \
      ::nn::fail(__FILE__, __LINE__, nn_check_os_.str());    \
    }                                                        \
  } while (0)
