// io/repo_paths.h: where the repository's own files (data/, scripts/) are at run time.
//
// A program of this project sits in its build folder, <repo>/build/<preset>/bin/<program>.
// The build used to compile the source tree's path in and look only there, so a tree that
// was moved or copied after the build read the OLD tree's files (or none). Now the place
// the program runs from comes first: the folders above the executable are walked up to the
// first one that looks like the repository (it holds CMakePresets.json and scripts/). The
// compiled-in source tree follows as a fallback (for a program copied out of any tree,
// e.g. into ~/bin), and only while it still exists. Every search that needs <repo>/...
// (nn::find_dataset_dir, nn::corpus_search_dirs, gpt::torch_script) goes through here.
#pragma once

#include <string>
#include <vector>

namespace nn {

// This executable's absolute path; "" where the system does not say (only Linux's
// /proc/self/exe is read).
std::string this_executable();

// True when `dir` looks like the repository's root: it holds CMakePresets.json and a
// scripts/ folder (a student copy has both too).
bool looks_like_repo(const std::string& dir);

// The repository roots for a program at `exe` built from `compiled_source`, most specific
// first: the nearest folder above `exe` (at most 4 levels up: bin, <preset>, build, <repo>)
// that looks like the repository, then `compiled_source` when it looks like one and is not
// the same folder. Either may be "" (unknown): it is then skipped. Pure apart from reading
// the file system, so tests can point it at temporary trees.
std::vector<std::string> repo_roots_for(const std::string& exe, const std::string& compiled_source);

// repo_roots_for(this_executable(), the source tree this build was compiled from).
std::vector<std::string> repo_roots();

// The first <root>/<relative> of repo_roots() that exists (file or folder), e.g.
// find_in_repo("scripts/gpt_torch.py"); "" when none has it.
std::string find_in_repo(const std::string& relative);

}  // namespace nn
