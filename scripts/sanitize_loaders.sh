#!/usr/bin/env bash
# scripts/sanitize_loaders.sh: the loaders' tests under AddressSanitizer + UndefinedBehaviorSanitizer.
#
#   bash scripts/sanitize_loaders.sh                  build (preset sanitize) and run them
#   bash scripts/sanitize_loaders.sh "[idx]"          only these Catch2 tags
#
# Builds nnlab_loader_tests (tests/CMakeLists.txt: the IDX, dataset, text and checkpoint tests,
# the GPT checkpoint and bad-input tests and what the fuzzers found) in build/sanitize, the preset with
# NNLAB_SANITIZE=ON, and runs it: any sanitizer report fails the run (halt_on_error), as does
# any failing test. Building only this executable, not nnlab_tests, skips the lessons, the app
# and the other tests: docs/reliability.md has the times measured on a 2-core machine.
#
# ASAN_OPTIONS also caps one allocation at 256 MB (max_allocation_size_mb): a loader that
# allocates that much because a small file said so is reported ("allocator is out of memory
# trying to allocate ...", with the stack) and the run fails, as its test fails under the
# RLIMIT_AS cap of tests/test_fuzz_regressions.cpp in the normal build. No loader test needs
# more: the files they read are a few kilobytes.
set -euo pipefail
cd "$(dirname "$0")/.."

TAGS="${1:-[idx],[dataset],[text],[checkpoint],[bad-input],[fuzz-regression]}"
# SANITIZE_BUILD: the build folder. build/sanitize (the default) is configured here with the
# sanitize preset (GCC); scripts/test_reliability.sh passes build/fuzz instead, which
# scripts/fuzz.sh configured with clang, ASan and UBSan for the loaders: one build, not two.
BUILD="${SANITIZE_BUILD:-build/sanitize}"
if command -v ccache > /dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
fi

t0=$(date +%s)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  if [ "$BUILD" != build/sanitize ]; then
    echo "error: $BUILD is not configured (SANITIZE_BUILD names a build folder that must exist)" >&2
    exit 2
  fi
  cmake --preset sanitize > /dev/null
fi
cmake --build "$BUILD" --target nnlab_loader_tests
t1=$(date +%s)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:max_allocation_size_mb=256}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# One OpenMP thread: the loaders are single-threaded, and the sanitizers slow every barrier.
export OMP_NUM_THREADS=1
# Catch2: ',' is OR, adjacent terms are AND: "[idx]~[slow]~[cli],[text]~[slow]~[cli]". ([cli] tests
# run the programs, which this build does not make.)
spec=$(echo "$TAGS" | sed 's/,/~[slow]~[cli],/g; s/$/~[slow]~[cli]/')
# One process per test case: a sanitizer report stops its process, and must not hide the
# test cases after it. (A name is escaped for Catch2's test spec: , [ ] \ ~ * ")
mapfile -t names < <("$BUILD/bin/nnlab_loader_tests" --list-test-names-only "$spec" | sed '/^$/d')
failed=()
skipped=()
for name in "${names[@]}"; do
  escaped=$(printf '%s' "$name" | sed -e 's/[][\\,~*"]/\\&/g')
  if ! "$BUILD/bin/nnlab_loader_tests" "$escaped" > "$BUILD/sanitize_loaders.last.log" 2>&1; then
    # A test that runs a program (untagged [cli]) finds none here: said, not counted as passed.
    if grep -q "$BUILD/bin/[a-z0-9]*: not found" "$BUILD/sanitize_loaders.last.log"; then
      skipped+=("$name")
      echo "SKIPPED (runs a program this build does not make): $name"
      continue
    fi
    failed+=("$name")
    echo "FAILED: $name"
    grep -E "ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:|SUMMARY:|FAILED:|REQUIRE|with expansion|  [A-Za-z<\"]" \
      "$BUILD/sanitize_loaders.last.log" | head -12 | sed "s/^/    /" || true
  fi
done
t2=$(date +%s)
echo "sanitize_loaders: built in $((t1 - t0)) s; ran ${#names[@]} test cases in $((t2 - t1)) s ($TAGS);" \
  "${#skipped[@]} skipped"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "${#failed[@]} of ${#names[@]} test cases failed or were stopped by a sanitizer (listed above)"
  exit 1
fi
echo "no sanitizer report; every test case that ran passed"
