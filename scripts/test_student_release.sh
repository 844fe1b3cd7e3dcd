#!/usr/bin/env bash
# scripts/test_student_release.sh WORK_DIR: proves the student release end to end (ctest's
# "slow: the student release ..." test, exercises/CMakeLists.txt). It
#   1. writes a release (scripts/student_release.sh) into WORK_DIR/release;
#   2. checks that no solution and no teacher file is in it;
#   3. configures it (the cpu-only preset, without the test suite) and builds nnlab there;
#   4. runs the release's own `nnlab check`: the first stub fails, with its hint;
#      `--only` builds one exercise and fails with a hint; `--solutions` says there are none.
# Minutes: it builds nnlab a second time (ccache helps when it is set up).
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: bash scripts/test_student_release.sh WORK_DIR" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$1"
rm -rf "$work"
mkdir -p "$work"
rel="$work/release"

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

bash "$root/scripts/student_release.sh" "$rel"

[[ ! -e "$rel/exercises/solutions" ]] || fail "the release has exercises/solutions/"
[[ ! -e "$rel/teacher" ]] || fail "the release has teacher/"
if find "$rel" -path '*/solutions/*' -o -type d -name answers | grep -q .; then
  fail "the release has a solutions/ or answers/ folder"
fi

# The release, configured and built as a student would (cpu-only: no nvcc needed).
(cd "$rel" && cmake --preset cpu-only -DNNLAB_BUILD_TESTS=OFF > "$work/configure.log" 2>&1) ||
  { tail -30 "$work/configure.log"; fail "the release does not configure"; }
cmake --build "$rel/build/cpu-only" --target nnlab -j2 > "$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; fail "the release's nnlab does not build"; }
nnlab="$rel/build/cpu-only/bin/nnlab"

set +e
"$nnlab" check > "$work/check.log" 2>&1
rc=$?
"$nnlab" check --only 02_relu_backward > "$work/check_only.log" 2>&1
rc_only=$?
"$nnlab" check --solutions > "$work/solutions.log" 2>&1
rc_solutions=$?
set -e

cat "$work/check.log"
[[ $rc -eq 1 ]] || fail "nnlab check exited $rc, expected 1 (the stubs fail)"
grep -q "✗ exercise 01_neuron_forward fails its tests" "$work/check.log" ||
  fail "nnlab check did not report the first stub failing its tests"
grep -q "^Hint: " "$work/check.log" || fail "nnlab check showed no hint"
grep -q "$rel" "$work/check.log" || fail "nnlab check did not build in the release"

[[ $rc_only -eq 1 ]] || { cat "$work/check_only.log"; fail "--only 02_relu_backward exited $rc_only"; }
grep -q "^Hint: " "$work/check_only.log" || fail "--only 02_relu_backward showed no hint"
[[ -x "$rel/build/cpu-only/exercises/ex_02_relu_backward" ]] || fail "ex_02 was not built"
[[ ! -e "$rel/build/cpu-only/exercises/ex_02_relu_backward_solution" ]] ||
  fail "a solution program was built in the release"

[[ $rc_solutions -eq 2 ]] || { cat "$work/solutions.log"; fail "--solutions exited $rc_solutions"; }
grep -q "no reference solutions" "$work/solutions.log" || fail "--solutions did not say why"

echo "ok: the student release builds, its stubs fail with a hint, and it holds no solution"
