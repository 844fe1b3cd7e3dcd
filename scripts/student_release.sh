#!/usr/bin/env bash
# scripts/student_release.sh OUT_DIR: writes the copy of the course a student gets.
#
#   bash scripts/student_release.sh ../nnlab-student
#
# The copy is the repository's committed tree (HEAD: a stub you solved in your working tree
# while preparing the class cannot leak) without what is for the teacher:
#   exercises/solutions/    the reference solutions
#   teacher/                the answer keys and the teacher's notes
#   any answers/ folder, any *answer-key* / *answer_key* file
#   this script and its test (they need the solutions)
# In the copy the exercises build without their solutions (exercises/CMakeLists.txt), the
# stubs still fail their tests and `nnlab check` works as usual; `nnlab check --solutions`
# says there are none. The script checks that before it says it is done: no solution's
# text is in the copy (whatever its name), and every stub still holds its TODO marker.
# The copy is plain files (no .git): hand it out as a folder, an archive or a new repository.
set -euo pipefail

usage() {
  echo "usage: bash scripts/student_release.sh OUT_DIR   (OUT_DIR must not exist, or be empty)" >&2
  exit 2
}
[[ $# -eq 1 && -n "$1" ]] || usage
out="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! git -C "$root" rev-parse --verify -q HEAD > /dev/null; then
  echo "error: $root is not a git checkout with a commit: the release is made from HEAD" >&2
  exit 2
fi
if [[ -e "$out" && -n "$(ls -A "$out" 2> /dev/null)" ]]; then
  echo "error: $out exists and is not empty: give a new folder" >&2
  exit 2
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
case "$out/" in
  "$root"/*) ;;  # inside the tree (e.g. under build/): fine, git archive reads HEAD, not $out
esac

commit="$(git -C "$root" rev-parse --short HEAD)"
if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then
  echo "note: the working tree has uncommitted changes; the release is made from HEAD ($commit)" >&2
fi

# Everything of HEAD, then the teacher's files removed.
git -C "$root" archive --format=tar HEAD | tar -x -C "$out"
rm -rf "$out/exercises/solutions" "$out/teacher"
find "$out" -depth \( -type d -name answers -o -iname '*answer-key*' -o -iname '*answer_key*' \) \
  -exec rm -rf {} +
rm -f "$out/scripts/student_release.sh" "$out/scripts/test_student_release.sh"

cat > "$out/STUDENT_RELEASE.txt" << EOF
This is the student copy of nnlab, made from commit $commit by scripts/student_release.sh.
It has no reference solutions and no answer keys. Start with README.md, then:
    cmake --preset cpu-only && cmake --build build/cpu-only --target nnlab
    build/cpu-only/bin/nnlab check
EOF

# ---- the checks: nothing of the teacher's is left, the stubs are stubs ---------------------
fail() {
  echo "error: $*" >&2
  echo "the release in $out is NOT fit to hand out" >&2
  exit 1
}
[[ ! -e "$out/exercises/solutions" ]] || fail "exercises/solutions/ is still there"
[[ ! -e "$out/teacher" ]] || fail "teacher/ is still there"
[[ -f "$out/exercises/manifest.txt" ]] || fail "exercises/manifest.txt is missing"

# No file of the copy has the text of a solution, under any name.
declare -A solution_sums=()
while IFS= read -r -d '' f; do
  solution_sums["$(sha256sum < "$f" | cut -d' ' -f1)"]="${f#"$root"/}"
done < <(find "$root/exercises/solutions" -type f -print0 2> /dev/null)
while IFS= read -r -d '' f; do
  sum="$(sha256sum < "$f" | cut -d' ' -f1)"
  if [[ -n "${solution_sums[$sum]:-}" ]]; then
    fail "${f#"$out"/} has the text of ${solution_sums[$sum]}"
  fi
done < <(find "$out" -type f -print0)

# Every stub the manifest names is there and still holds its TODO marker.
stubs=0
while IFS= read -r stub; do
  [[ -f "$out/$stub" ]] || fail "the stub $stub is missing"
  grep -q TODO "$out/$stub" || fail "the stub $stub holds no TODO: is a solved stub committed?"
  stubs=$((stubs + 1))
done < <(sed -n 's/^file[[:space:]]*=[[:space:]]*\([^[:space:]]*\).*/\1/p' "$out/exercises/manifest.txt")
[[ $stubs -gt 0 ]] || fail "the manifest names no stub"

echo "Student release written to $out (from $commit): $stubs exercise stubs, no solutions, no answer keys."
