// exercises/manifest.h: reads exercises/manifest.txt, the ordered list of exercises.
//
// The format is described at the top of manifest.txt:
//   [01_neuron_forward]
//   lesson = 01
//   file = exercises/01_neuron_forward/neuron_forward.cpp
//   hint1 = the concept (level 1: what is computed and why; never the code)
//   hint2 = the approach (level 2: the steps, the loops, the traps; still no code)
//   hint3 = the code (level 3: the lines themselves, for a student who is truly stuck)
//   points = 2        (optional, default 1: its weight in the score of a --json/--junit report)
//     an indented line continues the previous value
// `nnlab check` (app/check.cpp) and the tests (tests/test_check_cli.cpp) read it through
// this header; exercises/CMakeLists.txt parses the same file with CMake regexes.
// A malformed manifest throws nn::Error naming the line: never a silent partial list.
#pragma once

#include <cctype>
#include <fstream>
#include <istream>
#include <string>
#include <vector>

#include "nn/check.h"

namespace exercises {

struct Exercise {
  std::string name;    // "01_neuron_forward": its folder under exercises/, its targets' suffix
  std::string lesson;  // "01": the lesson whose README explains it
  std::string file;    // the stub the student edits, relative to the repository root
  // The tiered hints, hints[0] = level 1 (the concept), [1] = level 2 (the approach),
  // [2] = level 3 (the code). A failing check shows level 1; `nnlab check --hint N` more.
  std::string hints[3];
  int points = 1;      // its weight in a report's score (`points = N`, optional)
  int line = 0;        // where its block starts in manifest.txt

  // Everything else follows from the name (exercises/CMakeLists.txt uses the same rules).
  // The solution has the stub's extension: NN_name.cpp, or NN_name.cu for a CUDA exercise.
  std::string solution_file() const { return "exercises/solutions/" + name + extension(); }
  // ".cu" when the stub is a CUDA kernel file, else ".cpp".
  std::string extension() const {
    const bool is_cu = file.size() > 3 && file.compare(file.size() - 3, 3, ".cu") == 0;
    return is_cu ? ".cu" : ".cpp";
  }
  std::string test_file() const { return "exercises/" + name + "/test.cpp"; }
  // The build targets: the stub with its tests, the reference solution with the same tests.
  std::string target(bool solution) const {
    return solution ? "ex_" + name + "_solution" : "ex_" + name;
  }
};

namespace detail {

inline std::string trim(const std::string& s) {
  size_t begin = 0;
  size_t end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin])) != 0) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1])) != 0) --end;
  return s.substr(begin, end - begin);
}

inline bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  return true;
}

}  // namespace detail

// Parses the manifest text; `where` names it in error messages.
inline std::vector<Exercise> parse_manifest(std::istream& in, const std::string& where) {
  std::vector<Exercise> list;
  std::string* last_value = nullptr;  // the value an indented line continues
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();  // a Windows checkout
    const std::string line = detail::trim(raw);
    if (line.empty() || line[0] == '#') {
      last_value = nullptr;
      continue;
    }
    const std::string at = where + ":" + std::to_string(line_no) + ": ";

    // "[name]" opens a block.
    if (line.front() == '[') {
      NN_CHECK(line.back() == ']', at << "expected [name], got '" << line << "'");
      Exercise ex;
      ex.name = line.substr(1, line.size() - 2);
      ex.line = line_no;
      NN_CHECK(detail::valid_name(ex.name),
               at << "exercise name '" << ex.name << "' may hold only letters, digits and '_'");
      for (const Exercise& other : list) {
        NN_CHECK(other.name != ex.name, at << "exercise '" << ex.name << "' is listed twice");
      }
      list.push_back(ex);
      last_value = nullptr;
      continue;
    }

    // An indented line continues the previous value: long hints stay readable.
    const bool indented = raw[0] == ' ' || raw[0] == '\t';
    if (indented && last_value != nullptr) {
      *last_value += " " + line;
      continue;
    }

    // "key = value" inside a block.
    const size_t eq = line.find('=');
    NN_CHECK(eq != std::string::npos,
             at << "expected 'key = value' or [name], got '" << line << "'");
    NN_CHECK(!list.empty(), at << "'" << line << "' comes before the first [name] block");
    const std::string key = detail::trim(line.substr(0, eq));
    const std::string value = detail::trim(line.substr(eq + 1));
    Exercise& ex = list.back();
    if (key == "points") {  // a number, not text: no continuation lines
      const bool digits = !value.empty() && value.size() <= 3 &&
                          value.find_first_not_of("0123456789") == std::string::npos;
      NN_CHECK(digits && std::stoi(value) > 0,
               at << "points must be a whole number from 1 to 999, got '" << value << "'");
      ex.points = std::stoi(value);
      last_value = nullptr;
      continue;
    }
    if (key == "lesson") {
      last_value = &ex.lesson;
    } else if (key == "file") {
      last_value = &ex.file;
    } else if (key == "hint1" || key == "hint2" || key == "hint3") {
      last_value = &ex.hints[key[4] - '1'];
    } else if (key == "hint") {
      NN_CHECK(false, at << "'hint' is now three levels: hint1 (the concept), hint2 (the "
                            "approach) and hint3 (the code)");
    } else {
      NN_CHECK(false,
               at << "unknown key '" << key << "' (known: lesson, file, hint1, hint2, hint3, points)");
    }
    NN_CHECK(last_value->empty(), at << "'" << key << "' is given twice for " << ex.name);
    *last_value = value;
  }

  NN_CHECK(!list.empty(), where << ": no exercises listed");
  for (const Exercise& ex : list) {
    const std::string at = where + ":" + std::to_string(ex.line) + ": [" + ex.name + "] ";
    NN_CHECK(!ex.lesson.empty(), at << "has no 'lesson = NN'");
    NN_CHECK(!ex.file.empty(), at << "has no 'file = exercises/" << ex.name << "/<file>.cpp'");
    for (int level = 1; level <= 3; ++level) {
      NN_CHECK(!ex.hints[level - 1].empty(),
               at << "has no 'hint" << level << " = ...': a student stuck here needs all three "
                     "levels (1 the concept, 2 the approach, 3 the code)");
    }
  }
  return list;
}

inline std::vector<Exercise> read_manifest(const std::string& path) {
  std::ifstream in(path);
  NN_CHECK(in.good(), "cannot read the exercises manifest "
                          << path << ": is NNLAB_SOURCE_DIR the repository this build came from?");
  return parse_manifest(in, path);
}

// nullptr when no exercise has that name.
inline const Exercise* find_exercise(const std::vector<Exercise>& list, const std::string& name) {
  for (const Exercise& ex : list) {
    if (ex.name == name) return &ex;
  }
  return nullptr;
}

}  // namespace exercises
