#!/usr/bin/env bash
# scripts/time_lessons.sh: time every live command of docs/COURSE.md on this machine and
# write docs/benchmarks/course-timings.md (command, wall seconds, exit status, the machine
# and its load), so a teacher plans sessions with times measured on the room's machines.
#
#   bash scripts/time_lessons.sh                 # all of them (about 20 minutes on 2 cores)
#   BUILD=build/cpu-only bash scripts/time_lessons.sh
#   ONLY=lesson04 bash scripts/time_lessons.sh   # the commands whose text contains ONLY
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
for cmd in "${commands[@]}"; do
  [[ -n "${ONLY:-}" && "$cmd" != *"$ONLY"* ]] && continue
  echo "+ nnlab $cmd"
  log="$out/$(echo "$cmd" | tr -c 'a-zA-Z0-9\n' '_' | cut -c1-60).log"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # the command is a list of words on purpose
  $nnlab $cmd >"$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  secs=$(python3 -c "print(f'{$end - $start:.1f}')")
  echo "  $secs s (exit $rc)"
  [[ $rc -ne 0 ]] && failed=1 && tail -5 "$log" >&2
  rows+="| \`nnlab ${cmd//$out/OUT}\` | $secs | $rc |"$'\n'
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
mkdir -p docs/benchmarks
cat > docs/benchmarks/course-timings.md <<MD
# How long the course's live commands take

Produced by \`bash scripts/time_lessons.sh\` on $(date -u +%Y-%m-%d) (build: \`$build\`).
Each command of [docs/COURSE.md](../COURSE.md) ran once, one after the other; the wall time
includes loading data. \`OUT\` is the script's output folder.

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
