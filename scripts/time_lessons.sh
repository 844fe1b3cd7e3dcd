#!/usr/bin/env bash
# scripts/time_lessons.sh: time every live command of docs/COURSE.md on this machine and
# write docs/benchmarks/course-timings.md (command, wall seconds, exit status, the machine
# and its load), so a teacher plans sessions with times measured on the room's machines.
#
#   bash scripts/time_lessons.sh                 # all of them (about 20 minutes on 2 cores)
#   BUILD=build/cpu-only bash scripts/time_lessons.sh
#   ONLY=lesson04 bash scripts/time_lessons.sh   # the commands whose text contains ONLY
#   BUILD_TIMES=0 bash scripts/time_lessons.sh   # skip timing the fresh builds
#
# First it times what a student waits for before the first lesson: a fresh `cpu-only` build
# (configure, then only lesson01's program, then `nnlab` with every lesson), in a scratch
# build folder with ccache off (a warm cache would hide the real wait).
#
# Outputs of the lessons go to out/course-timings/. A command that fails is recorded with
# its exit status (and the script exits non-zero at the end): a timing of a failed run is
# not a timing.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build/release}
nnlab=$build/bin/nnlab
if [[ ! -x $nnlab ]]; then
  echo "error: $nnlab not found; build first: cmake --preset release && cmake --build --preset release" >&2
  exit 1
fi
out=out/course-timings
rm -rf "$out"
mkdir -p "$out"

# The live commands of docs/COURSE.md, in course order (flags that only pick outputs added).
commands=(
  "lesson01 --part inference --trace"
  "lesson01"
  "lesson01 --part nudge --seed 16"
  "lesson02 --part autograd"
  "lesson02 --part loops"
  "lesson02 --part train --epochs 3 --out-dir $out/l02"
  "lesson02 --part train --out-dir $out/l02-full"
  "lesson03 --part ceilings --out-dir $out/l03"
  "lesson03 --part stride --out-dir $out/l03"
  "lesson03 --part ladder --out-dir $out/l03"
  "lesson03 --part fusion --out-dir $out/l03"
  "lesson04 --part conv --trace --out-dir $out/l04"
  "lesson04 --part bench --out-dir $out/l04"
  "lesson04 --part train --epochs 2 --limit-train 6000 --out-dir $out/l04q"
  "lesson05 --part cell"
  "lesson05 --part gradients --out-dir $out/l05"
  "lesson05 --part plant --out-dir $out/l05"
  "lesson05 --part chars --out-dir $out/l05"
  "lesson06 --part gates"
  "lesson06 --part gradients --out-dir $out/l06"
  "lesson06 --part compare --out-dir $out/l06c"
  "lesson07 --out-dir $out/l07"
  "lesson08 --out-dir $out/gpt0"
  "lesson08 --part train --out-dir $out/gpt"
  "lesson09 --part info"
  "lesson09 --part emulator"
  "lesson09 --part ladder"
  "lesson10 --part kv --out-dir $out/l10"
  "lesson10 --part law --out-dir $out/l10"
  "lesson10 --part quant --out-dir $out/l10"
)

rows=""
failed=0
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

timed() {  # timed <label> <command...>: run it, add a row, remember a failure
  local label=$1 log start end rc secs
  shift
  log="$out/$(echo "$label" | tr -c 'a-zA-Z0-9\n' '_' | cut -c1-60).log"
  echo "+ $label"
  start=$(date +%s.%N)
  "$@" >"$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  secs=$(python3 -c "print(f'{$end - $start:.1f}')")
  echo "  $secs s (exit $rc)"
  if [[ $rc -ne 0 ]]; then failed=1; tail -5 "$log" >&2; fi
  rows+="| $label | $secs | $rc |"$'\n'
}

if [[ "${BUILD_TIMES:-1}" != 0 && -z "${ONLY:-}" ]]; then
  scratch=$out/fresh-build
  # The cpu-only preset's settings, in a scratch folder, without ccache.
  timed "fresh \`cmake --preset cpu-only\` (configure)" env CCACHE_DISABLE=1 \
    cmake -S . -B "$scratch" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNNLAB_CUDA=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER= -DCMAKE_CUDA_COMPILER_LAUNCHER=
  timed "then \`cmake --build --preset cpu-only --target lesson01\`" env CCACHE_DISABLE=1 \
    cmake --build "$scratch" --target lesson01
  timed "then \`cmake --build --preset cpu-only --target nnlab\` (every lesson)" env CCACHE_DISABLE=1 \
    cmake --build "$scratch" --target nnlab
  rm -rf "$scratch"
fi
for cmd in "${commands[@]}"; do
  [[ -n "${ONLY:-}" && "$cmd" != *"$ONLY"* ]] && continue
  # shellcheck disable=SC2086  # the command is a list of words on purpose
  timed "\`nnlab ${cmd//$out/OUT}\`" $nnlab $cmd
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
mkdir -p docs/benchmarks
cat > docs/benchmarks/course-timings.md <<MD
# How long the course's live commands take

Produced by \`bash scripts/time_lessons.sh\` on $(date -u +%Y-%m-%d) (build: \`$build\`).
The fresh build first (configure and build in a scratch folder, ccache off), then each
command of [docs/COURSE.md](../COURSE.md) once, one after the other; the wall time includes
loading data. \`OUT\` is the script's output folder.

- machine: ${cpu:-unknown CPU}, $(nproc) cores, $(free -g 2>/dev/null | awk '/^Mem:/{print $2 " GiB"}')
- load average (1, 5, 15 min) before: ${load_before}; after: ${load_after}
  (above the number of cores, other jobs were competing and the times are longer than on an
  idle machine)

| command | seconds | exit status |
|---|---|---|
${rows}
MD
echo "wrote docs/benchmarks/course-timings.md"
exit $failed
