// io/repo_paths.cpp: the repository's folders at run time (see io/repo_paths.h).
#include "io/repo_paths.h"

#include <filesystem>
#include <system_error>

// The source tree this build came from (io/CMakeLists.txt): only a fallback, after the
// folders above the executable.
#ifndef NNLAB_SOURCE_DIR
#define NNLAB_SOURCE_DIR ""
#endif

namespace nn {

namespace fs = std::filesystem;

std::string this_executable() {
#ifdef __linux__
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    return exe.string();
  }
#endif
  return "";
}

bool looks_like_repo(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && fs::is_regular_file(fs::path(dir) / "CMakePresets.json", ec) &&
         fs::is_directory(fs::path(dir) / "scripts", ec);
}

std::vector<std::string> repo_roots_for(const std::string& exe, const std::string& compiled_source) {
  std::vector<std::string> roots;
  if (!exe.empty()) {
    // <repo>/build/<preset>/bin/<program>: bin, <preset>, build, <repo>. Four levels also
    // cover a preset folder one deeper; more would reach folders that are not ours.
    fs::path up = fs::path(exe).parent_path();
    for (int level = 0; level < 4 && up.has_relative_path(); ++level, up = up.parent_path()) {
      if (looks_like_repo(up.string())) {
        roots.push_back(up.string());
        break;  // the nearest: a build inside a checkout inside another checkout is its own
      }
    }
  }
  if (looks_like_repo(compiled_source)) {
    std::error_code ec;
    const bool same = !roots.empty() && fs::equivalent(roots.front(), compiled_source, ec) && !ec;
    if (!same) {
      roots.push_back(compiled_source);
    }
  }
  return roots;
}

std::vector<std::string> repo_roots() { return repo_roots_for(this_executable(), NNLAB_SOURCE_DIR); }

std::string find_in_repo(const std::string& relative) {
  for (const std::string& root : repo_roots()) {
    std::error_code ec;
    const fs::path p = fs::path(root) / relative;
    if (fs::exists(p, ec)) {
      return p.string();
    }
  }
  return "";
}

}  // namespace nn
