#!/usr/bin/env bash
# scripts/fuzz.sh: build the loaders' libFuzzer targets (fuzz/) with clang, ASan and UBSan,
# and run each for a bounded time. docs/reliability.md says what each one covers.
#
#   bash scripts/fuzz.sh                      every fuzzer, 30 s each
#   bash scripts/fuzz.sh fuzz_idx fuzz_text   only these
#   FUZZ_SECONDS=300 bash scripts/fuzz.sh     longer runs (a nightly job, a release)
#
# Settings (environment): FUZZ_SECONDS (30) per fuzzer, FUZZ_BUILD (build/fuzz), FUZZ_MALLOC_MB
# (512: one allocation above this is a finding, the memory amplification of a small file),
# FUZZ_RSS_MB (2048), FUZZ_TIMEOUT_S (10: one input slower than this is a finding, a hang),
# FUZZ_KEEP_GOING=1 (go on after a finding, in libFuzzer's fork mode, to collect several: triage).
#
# Every fuzzer starts from its committed seeds (fuzz/corpus/<name>/) plus what earlier runs
# found (<build>/corpus/<name>/, kept between runs), with its dictionary of the format's tokens
# (fuzz/dict/<name>.dict) where there is one. A finding (crash, sanitizer report, stray
# exception, huge allocation, slow input) is saved as <build>/findings/<name>/<kind>-<sha1>;
# replay it with <build>/fuzz/<name> <file>. Exit status: 0 when no fuzzer found anything,
# 1 when one did (each listed), 2 when the fuzzers could not be built.
# Needs clang and its libFuzzer: Debian 12 `apt-get install clang libclang-rt-14-dev`
# (scripts/setup.sh installs them). The build is configured with the tests on, so that
# scripts/sanitize_loaders.sh can build the loaders' tests in it (SANITIZE_BUILD=build/fuzz),
# but only the targets named are built.
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH="${FUZZ_SECONDS:-30}"
BUILD="${FUZZ_BUILD:-build/fuzz}"
MALLOC_MB="${FUZZ_MALLOC_MB:-512}"
RSS_MB="${FUZZ_RSS_MB:-2048}"
TIMEOUT_S="${FUZZ_TIMEOUT_S:-10}"
keep_going=()
if [ "${FUZZ_KEEP_GOING:-0}" = 1 ]; then keep_going=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1); fi
ALL=(fuzz_safetensors fuzz_gpt_checkpoint fuzz_idx fuzz_idx_gz fuzz_idx_dataset fuzz_text fuzz_config fuzz_vocab fuzz_bpe_json)
if [ "$#" -gt 0 ]; then NAMES=("$@"); else NAMES=("${ALL[@]}"); fi
for n in "${NAMES[@]}"; do
  if [[ ! " ${ALL[*]} " =~ " $n " ]]; then
    echo "error: no fuzzer '$n' (there are: ${ALL[*]})" >&2
    exit 2
  fi
done

CXX_FOR_FUZZ="${FUZZ_CXX:-clang++}"
CC_FOR_FUZZ="${FUZZ_CC:-clang}"
if ! command -v "$CXX_FOR_FUZZ" > /dev/null; then
  echo "error: $CXX_FOR_FUZZ not found: the fuzzers need clang and libFuzzer (Debian 12: apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
probe_dir="$(mktemp -d)"
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$probe_dir/p.cpp"
if ! "$CXX_FOR_FUZZ" -fsanitize=fuzzer,address,undefined "$probe_dir/p.cpp" -o "$probe_dir/p" 2> "$probe_dir/err"; then
  echo "error: $CXX_FOR_FUZZ cannot link a libFuzzer target (Debian 12: apt-get install libclang-rt-14-dev):" >&2
  head -5 "$probe_dir/err" >&2
  rm -rf "$probe_dir"
  exit 2
fi
rm -rf "$probe_dir"

launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  mkdir -p "$BUILD"
  CC="$CC_FOR_FUZZ" CXX="$CXX_FOR_FUZZ" cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DNNLAB_FUZZ=ON -DNNLAB_CUDA=OFF -DNNLAB_NATIVE=OFF -DNNLAB_BUILD_TESTS=ON "${launcher[@]}" > "$BUILD/configure.log" 2>&1 \
    || { echo "error: configuring $BUILD failed (see $BUILD/configure.log)" >&2; tail -20 "$BUILD/configure.log" >&2; exit 2; }
fi
t0=$(date +%s)
if ! cmake --build "$BUILD" --target "${NAMES[@]}" > "$BUILD/build.log" 2>&1; then
  echo "error: building the fuzzers failed (see $BUILD/build.log)" >&2
  grep -E "error|FAILED" "$BUILD/build.log" | head -20 >&2
  exit 2
fi
echo "built ${#NAMES[@]} fuzzers in $(( $(date +%s) - t0 )) s ($BUILD/fuzz)"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
found=()
printf '%-20s %8s %10s %8s %8s  %s\n' fuzzer seconds runs exec/s corpus result
for n in "${NAMES[@]}"; do
  work="$BUILD/corpus/$n"
  findings="$BUILD/findings/$n"
  mkdir -p "$work" "$findings"
  scratch="$(mktemp -d)"
  log="$BUILD/findings/$n.log"
  dict=()
  if [ -f "fuzz/dict/$n.dict" ]; then dict=(-dict="fuzz/dict/$n.dict"); fi
  before=$(ls "$findings" | sort)
  start=$(date +%s)
  # The first corpus folder receives what the run finds; the committed seeds stay as they are.
  TMPDIR="$scratch" "$BUILD/fuzz/$n" "$work" "fuzz/corpus/$n" -max_total_time="$SECONDS_EACH" \
    -malloc_limit_mb="$MALLOC_MB" -rss_limit_mb="$RSS_MB" -timeout="$TIMEOUT_S" -print_final_stats=1 \
    -artifact_prefix="$findings/" "${dict[@]}" "${keep_going[@]}" > "$log" 2>&1
  rc=$?
  rm -rf "$scratch"
  took=$(( $(date +%s) - start ))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  corpus=$(find "$work" -type f | wc -l)
  # What this run saved: the files in findings/ that were not there before it.
  artifacts=$(comm -13 <(echo "$before") <(ls "$findings" | sort) | sed "s|^|$findings/|" | tr '\n' ' ')
  if [ "$rc" -eq 0 ] && [ -z "$artifacts" ]; then
    result="ok"
  else
    kind=$(grep -m1 -oE "ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer): [a-z -]*[a-z]|runtime error: .{0,80}|terminate called.{0,80}|malloc\([0-9]+\) exceeds limit|out-of-memory|timeout after [0-9]+ seconds" "$log" | head -1)
    count=$(echo "$artifacts" | wc -w)
    [ "$count" -gt 3 ] && artifacts="$(echo "$artifacts" | cut -d' ' -f1-3) (and $((count - 3)) more)"
    result="FOUND ${kind:-exit $rc}: ${artifacts:-no input saved} (log $log)"
    found+=("$n")
  fi
  printf '%-20s %8s %10s %8s %8s  %s\n' "$n" "$took" "${runs:-?}" "${speed:-?}" "$corpus" "$result"
done
if [ "${#found[@]}" -gt 0 ]; then
  echo "fuzzers with findings: ${found[*]}. Replay one: $BUILD/fuzz/<fuzzer> <file>; a fixed one becomes a test in"
  echo "tests/test_fuzz_regressions.cpp reading its input from tests/fixtures/fuzz/ (docs/reliability.md)."
  exit 1
fi
echo "no findings (${#NAMES[@]} fuzzers, ${SECONDS_EACH} s each)"
