// app/check_support.h: the parts of `nnlab check` that are plain functions of their inputs,
// so that tests/test_check_support.cpp can test them without building anything:
//   - reading a Catch2 program's console output into its failing test cases;
//   - the reports a learning-management system imports (--json, --junit) and their score;
//   - the state file that remembers the last check of each exercise (for --list);
//   - the file stamps that --watch polls;
//   - where the source and build trees are, found at run time (a copied or moved nnlab must
//     not silently check the tree it was first built from).
// Header-only (like exercises/manifest.h): app/check.cpp and the tests include it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "io/repo_paths.h"

namespace app::check {

namespace fs = std::filesystem;

// ---- the verdict on one exercise --------------------------------------------------------

enum class Status { Passed, TestsFail, DoesNotCompile, Crashed };

// The words the reports and --list use (and the state file stores).
inline const char* status_word(Status s) {
  switch (s) {
    case Status::Passed: return "passed";
    case Status::TestsFail: return "fails tests";
    case Status::DoesNotCompile: return "does not compile";
    case Status::Crashed: return "crashed";
  }
  return "?";
}

// ---- a Catch2 console report, read back -----------------------------------------------------

// One failing test case of a Catch2 program. A test case that fails several checks (or the
// same check in several sections or loop rounds) appears once, with `failures` counting them.
struct FailedTest {
  std::string name;     // the TEST_CASE's name
  std::string message;  // what its first failed check printed (the section, the assertion,
                        // the expansion and the INFO messages), trimmed
  int failures = 0;     // how many failure blocks Catch2 printed for it
};

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Catch2 prints every failure as a block (console reporter, v2 and v3):
//
//   -----------------------------        <- a dashed line after a blank one opens it
//   matmul_tiled: sizes ...               <- the test case's name
//     1 x 1 x 1                           <- the sections, if any, indented
//   -----------------------------
//   exercises/16_tiled_matmul/test.cpp:99
//   .............................
//
//   exercises/.../test.cpp:71: FAILED:
//     CHECK( problem.empty() )
//   ...
//
// and a test case with several failures prints several blocks with the same name.
struct CatchBlock {
  size_t begin = 0;  // the opening dashed line
  size_t end = 0;    // one past its last line
  std::string name;
  std::string body;  // sections (as "section: ...") and the lines after the dotted line
};

inline std::vector<CatchBlock> catch_blocks(const std::vector<std::string>& lines, size_t begin,
                                            size_t end) {
  std::vector<size_t> starts;
  for (size_t i = begin; i < end; ++i) {
    if (starts_with(lines[i], "-----") && (i == begin || lines[i - 1].empty())) starts.push_back(i);
  }
  std::vector<CatchBlock> blocks;
  for (size_t b = 0; b < starts.size(); ++b) {
    CatchBlock block;
    block.begin = starts[b];
    block.end = b + 1 < starts.size() ? starts[b + 1] : end;
    size_t i = block.begin + 1;
    if (i < block.end) block.name = lines[i++];
    std::ostringstream body;
    for (; i < block.end && !starts_with(lines[i], "-----"); ++i) {  // the sections
      body << "section:" << lines[i] << "\n";
    }
    // Past the closing dashed line, the location and the dotted line.
    while (i < block.end && !starts_with(lines[i], "....")) ++i;
    ++i;
    std::vector<std::string> rest;
    for (; i < block.end; ++i) rest.push_back(lines[i]);
    while (!rest.empty() && rest.front().empty()) rest.erase(rest.begin());
    while (!rest.empty() && rest.back().empty()) rest.pop_back();
    for (const std::string& line : rest) body << line << "\n";
    block.body = body.str();
    blocks.push_back(block);
  }
  return blocks;
}

// The failing test cases of a Catch2 program's output, in the order Catch2 ran them, each
// once. Plain output without Catch2's blocks (a crash before any test) gives no entry.
inline std::vector<FailedTest> failed_tests(const std::string& output) {
  const std::vector<std::string> lines = split_lines(output);
  size_t summary = lines.size();  // the "=====" line before "test cases: ..."
  for (size_t i = lines.size(); i > 0; --i) {
    if (starts_with(lines[i - 1], "=====")) {
      summary = i - 1;
      break;
    }
  }
  std::vector<FailedTest> tests;
  for (const CatchBlock& block : catch_blocks(lines, 0, summary)) {
    if (block.name.empty()) continue;
    FailedTest* same = nullptr;
    for (FailedTest& t : tests) {
      if (t.name == block.name) same = &t;
    }
    if (same == nullptr) {
      tests.push_back({block.name, block.body, 0});
      same = &tests.back();
    }
    ++same->failures;
  }
  return tests;
}

// ---- the reports --------------------------------------------------------------------------

struct ExerciseResult {
  std::string name, lesson, file;
  int points = 1;
  Status status = Status::Passed;
  std::vector<FailedTest> failed;  // empty unless status is TestsFail or Crashed
  std::string output;              // what the student would see: compiler or test output
  double seconds = 0.0;            // build and run
};

struct Report {
  std::vector<ExerciseResult> results;
  bool solutions = false;  // the reference solutions were checked, not the stubs
  double seconds = 0.0;
};

struct Score {
  int passed = 0, total = 0, points = 0, max_points = 0;
};

inline Score score(const Report& r) {
  Score s;
  for (const ExerciseResult& e : r.results) {
    ++s.total;
    s.max_points += e.points;
    if (e.status == Status::Passed) {
      ++s.passed;
      s.points += e.points;
    }
  }
  return s;
}

// Bytes XML 1.0 and JSON readers choke on: control characters other than tab and newline
// (a test may print anything). They become '?' in both reports.
inline bool is_bad_control(unsigned char c) { return c < 0x20 && c != '\n' && c != '\t'; }

inline std::string json_string(const std::string& s) {
  std::ostringstream os;
  os << '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (c < 0x20) {
          os << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int{c} << std::dec;
        } else {
          os << ch;
        }
    }
  }
  os << '"';
  return os.str();
}

inline std::string xml_text(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += is_bad_control(static_cast<unsigned char>(ch)) ? '?' : ch;
    }
  }
  return out;
}

inline std::string seconds_text(double s) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << s;
  return os.str();
}

// The one-line summary of a failed exercise: the JUnit failure's message attribute.
inline std::string failure_summary(const ExerciseResult& e) {
  std::string text = status_word(e.status);
  for (size_t i = 0; i < e.failed.size(); ++i) {
    text += (i == 0 ? ": " : "; ") + e.failed[i].name;
  }
  return text;
}

inline std::string to_json(const Report& r) {
  const Score s = score(r);
  std::ostringstream os;
  os << "{\n";
  os << "  \"tool\": \"nnlab check\",\n";
  os << "  \"checked\": " << json_string(r.solutions ? "reference solutions" : "exercises") << ",\n";
  os << "  \"score\": {\"passed\": " << s.passed << ", \"total\": " << s.total
     << ", \"points\": " << s.points << ", \"max_points\": " << s.max_points << "},\n";
  os << "  \"time_s\": " << seconds_text(r.seconds) << ",\n";
  os << "  \"exercises\": [";
  for (size_t i = 0; i < r.results.size(); ++i) {
    const ExerciseResult& e = r.results[i];
    os << (i == 0 ? "\n" : ",\n") << "    {\"name\": " << json_string(e.name)
       << ", \"lesson\": " << json_string(e.lesson) << ", \"file\": " << json_string(e.file)
       << ", \"points\": " << e.points << ",\n     \"status\": " << json_string(status_word(e.status))
       << ", \"passed\": " << (e.status == Status::Passed ? "true" : "false")
       << ", \"time_s\": " << seconds_text(e.seconds) << ",\n     \"failing_tests\": [";
    for (size_t t = 0; t < e.failed.size(); ++t) {
      const FailedTest& f = e.failed[t];
      os << (t == 0 ? "" : ", ") << "{\"name\": " << json_string(f.name)
         << ", \"failures\": " << f.failures << ", \"message\": " << json_string(f.message) << "}";
    }
    os << "],\n     \"output\": " << json_string(e.output) << "}";
  }
  os << "\n  ]\n}\n";
  return os.str();
}

// JUnit XML as Jenkins, GitLab, GitHub's test reporters and most learning-management
// systems read it: one <testsuite>, one <testcase> per exercise (classname "lessonNN", so
// the tools group them by lesson), a <failure> for every exercise that did not pass, with
// the failing tests' names in its message and what the student would see as its text.
inline std::string to_junit(const Report& r) {
  const Score s = score(r);
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  os << "<testsuite name=\"" << (r.solutions ? "nnlab reference solutions" : "nnlab exercises")
     << "\" tests=\"" << s.total << "\" failures=\"" << s.total - s.passed
     << "\" errors=\"0\" skipped=\"0\" time=\"" << seconds_text(r.seconds) << "\">\n";
  os << "  <properties>\n";
  os << "    <property name=\"score\" value=\"" << s.passed << "/" << s.total << "\"/>\n";
  os << "    <property name=\"points\" value=\"" << s.points << "/" << s.max_points << "\"/>\n";
  os << "  </properties>\n";
  for (const ExerciseResult& e : r.results) {
    os << "  <testcase name=\"" << xml_text(e.name) << "\" classname=\"lesson"
       << xml_text(e.lesson) << "\" file=\"" << xml_text(e.file) << "\" time=\""
       << seconds_text(e.seconds) << "\"";
    if (e.status == Status::Passed) {
      os << "/>\n";
      continue;
    }
    os << ">\n    <failure type=\"" << status_word(e.status) << "\" message=\""
       << xml_text(failure_summary(e)) << "\">" << xml_text(e.output) << "</failure>\n";
    os << "  </testcase>\n";
  }
  os << "</testsuite>\n";
  return os.str();
}

// ---- the state file: the last check of each exercise ----------------------------------------
//
// <build>/exercises/check-state.txt, one line per exercise checked:
//   name <TAB> status word <TAB> the stub's modification time when it was checked
// --list reads it; a stub whose time has changed since is shown as "edited".

struct StateEntry {
  std::string status;
  int64_t stub_time = 0;
};
using State = std::map<std::string, StateEntry>;

inline int64_t modification_time(const fs::path& p) {
  std::error_code ec;
  const fs::file_time_type t = fs::last_write_time(p, ec);
  if (ec) return 0;
  return static_cast<int64_t>(t.time_since_epoch().count());
}

inline State read_state(const fs::path& path) {
  State state;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find('\t');
    const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos) continue;  // a damaged line is forgotten, not fatal
    StateEntry e;
    e.status = line.substr(a + 1, b - a - 1);
    try {
      e.stub_time = std::stoll(line.substr(b + 1));
    } catch (const std::exception&) {
      continue;
    }
    state[line.substr(0, a)] = e;
  }
  return state;
}

inline bool write_state(const fs::path& path, const State& state) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    for (const auto& [name, e] : state) out << name << '\t' << e.status << '\t' << e.stub_time << '\n';
    if (!out) return false;
  }
  fs::rename(tmp, path, ec);  // whole or not at all: two checks at once never mix lines
  return !ec;
}

// ---- --watch: what changed between two polls ------------------------------------------------

struct Stamp {
  int64_t time = 0;
  uintmax_t size = 0;
  bool exists = false;
  bool operator==(const Stamp& o) const {
    return time == o.time && size == o.size && exists == o.exists;
  }
};
using Stamps = std::map<std::string, Stamp>;

// The stamps of the given files, and of the files directly inside the given folders.
inline Stamps take_stamps(const std::vector<fs::path>& files, const std::vector<fs::path>& folders) {
  Stamps stamps;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    Stamp s;
    s.exists = fs::is_regular_file(p, ec);
    if (s.exists) {
      s.time = modification_time(p);
      s.size = fs::file_size(p, ec);
    }
    stamps[p.string()] = s;
  };
  for (const fs::path& f : files) add(f);
  for (const fs::path& d : folders) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
      if (e.is_regular_file(ec)) add(e.path());
    }
  }
  return stamps;
}

// The files whose stamp differs (changed, created or deleted), sorted by name.
inline std::vector<std::string> changed_files(const Stamps& before, const Stamps& after) {
  std::vector<std::string> changed;
  for (const auto& [path, stamp] : after) {
    const auto it = before.find(path);
    if (it == before.end() ? stamp.exists : !(it->second == stamp)) changed.push_back(path);
  }
  for (const auto& [path, stamp] : before) {
    if (after.find(path) == after.end() && stamp.exists) changed.push_back(path);
  }
  return changed;
}

// ---- where the trees are ------------------------------------------------------------------
//
// nnlab is built inside a build folder, <build>/bin/nnlab, and app/CMakeLists.txt compiles
// that folder and the source tree's path in. A copy of the binary elsewhere, or a build
// folder that was moved, would still drive the ORIGINAL build and check the ORIGINAL
// exercises. So `nnlab check` first asks where its own executable is: when that is not
// <compiled build>/bin, it refuses with what happened instead of checking another tree.
// (CMake build folders cannot be moved, so following a moved one is not an option: its
// build.ninja and CMakeCache.txt name the old paths.)

struct Trees {
  std::string source, binary;  // absolute, as compiled in
  std::string problem;         // empty when they are the trees of this executable
};

// "KEY:TYPE=value" of a CMakeCache.txt; "" when absent.
inline std::string cmake_cache_value(const fs::path& cache, const std::string& key) {
  std::ifstream in(cache);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (starts_with(line, key + ":")) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) return line.substr(eq + 1);
    }
  }
  return "";
}

inline bool same_path(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  const bool same = fs::equivalent(a, b, ec);
  return !ec && same;
}

// `exe` is this executable's path (empty when the system cannot tell: then the compiled-in
// paths are trusted, as before).
inline Trees locate_trees(const fs::path& exe, const std::string& source,
                          const std::string& binary) {
  Trees t{source, binary, ""};
  std::ostringstream why;
  if (!exe.empty()) {
    const fs::path build = exe.parent_path().parent_path();  // <build>/bin/nnlab -> <build>
    if (!same_path(build, binary)) {
      const fs::path cache = build / "CMakeCache.txt";
      const std::string cache_dir = cmake_cache_value(cache, "CMAKE_CACHEFILE_DIR");
      why << "this nnlab runs from " << exe.string() << ", but it was built in " << binary
          << " for the source tree " << source << ".\n";
      if (!cache_dir.empty() && !same_path(cache_dir, build)) {
        why << "Its build folder was moved (its CMakeCache.txt names " << cache_dir
            << "); CMake build folders cannot be moved.\n";
      } else if (cache_dir.empty()) {
        why << "It is a copy: there is no build folder around it.\n";
      }
      why << "`nnlab check` builds and tests the exercises of the tree it was built from, so "
             "from here it would check another tree's files.\nConfigure and build the tree you "
             "are working in, then run ITS nnlab:\n"
             "    cmake --preset release && cmake --build build/release --target nnlab\n"
             "    build/release/bin/nnlab check\n";
      t.problem = why.str();
      return t;
    }
  }
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(source) / "exercises" / "manifest.txt", ec)) {
    why << "the source tree this nnlab was built from, " << source
        << ", has no exercises/manifest.txt any more (moved or deleted?).\nConfigure and build "
           "the tree you are working in, then run its nnlab.\n";
    t.problem = why.str();
  }
  return t;
}

// This executable's path, or empty where the system does not say (io/repo_paths.h: only
// Linux's /proc is read).
inline fs::path this_executable() { return fs::path(nn::this_executable()); }

}  // namespace app::check
