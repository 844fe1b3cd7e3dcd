#!/usr/bin/env bash
# scripts/gpu_bench.sh: the one command to run the moment a GPU is available. It
#   1. refuses at once, saying why, when there is no NVIDIA GPU or no nvcc;
#   2. configures build/gpu (Release, Ninja if installed, -DNNLAB_CUDA=ON, CUDA architectures "native":
#      code for exactly the GPU that is there) and builds nnlab, the lessons and the tests;
#   3. records nvidia-smi;
#   4. runs the device tests (ctest -L device: every version of every CUDA op validated ON
#      THE GPU against its CPU reference) and the emulator's tests;
#   5. runs `nnlab cuda bench --device gpu` over every op at its default (GPU-filling) sizes:
#      validated first, then timed with CUDA events against the copy bandwidth and FMA peak
#      measured in the same run; writes docs/benchmarks/cuda-<gpu>.json and .md (device,
#      driver and date inside, nvidia-smi and the goals appended to the .md);
#   6. judges the issue's goals from that JSON (`nnlab cuda goals`).
# Exit status: non-zero when there is no GPU, the build fails, or any version fails
# validation (device tests or bench). Goals that are not met are reported, loudly, but do
# not fail the script: they are results, not errors.
#
# Works offline from the repository root (e.g. on a lent GPU machine). Knobs:
#   OPS="matmul softmax"   only these ops (default: all)
#   QUICK=1                the ops' test sizes, one timed run: checks the pipeline in seconds
#   SKIP_BUILD=1           reuse build/gpu as it is
#   SKIP_TESTS=1           skip step 4
#   BUILD_DIR=build/gpu    where to build;  JOBS=N  build parallelism (default: all cores)
#   CUDA_ARCH=90           instead of "native" (for CMake < 3.24, or to cross-build)
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD_DIR:-build/gpu}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
logs=out/gpu-bench
mkdir -p "$logs"
say() { printf '\n== %s\n' "$*"; }
refuse() { printf 'gpu_bench: %s\n' "$*" >&2; exit 2; }

# ---- 1. is there a GPU, and a compiler for it? -------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>&1) || refuse "nvidia-smi finds no usable GPU: $gpus"
  grep -q '^GPU ' <<<"$gpus" || refuse "nvidia-smi lists no GPU: $gpus"
elif ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  refuse "no NVIDIA GPU here (no nvidia-smi, no /dev/nvidia*). The kernels still run on the CPU emulator: nnlab cuda bench --device emu --quick"
fi
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [[ -x "$d/nvcc" ]] && export PATH="$d:$PATH" && break
  done
fi
command -v nvcc >/dev/null 2>&1 || refuse "no nvcc (CUDA Toolkit) on PATH or in /usr/local/cuda*/bin: install it first"

arch=${CUDA_ARCH:-native}
cmake_minor=$(cmake --version | sed -n 's/^cmake version 3\.\([0-9]*\).*/\1/p')
if [[ "$arch" == native && -n "$cmake_minor" && "$cmake_minor" -lt 24 ]]; then
  # CMake < 3.24 knows no "native": ask the driver (e.g. "9.0" -> 90).
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ -n "$arch" ]] || refuse "CMake $(cmake --version | head -1) cannot use CUDA architecture 'native': set CUDA_ARCH=90 (your GPU's compute capability)"
fi

# ---- 2. build ---------------------------------------------------------------------------------
if [[ -z "${SKIP_BUILD:-}" ]]; then
  say "configure $build (CUDA architectures: $arch)"
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)  # else CMake's default (make)
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DNNLAB_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$logs/configure.log" 2>&1 ||
    { tail -30 "$logs/configure.log"; refuse "configure failed (full log: $logs/configure.log)"; }
  say "build (-j$jobs)"
  cmake --build "$build" -j "$jobs" --target nnlab nnlab_tests > "$logs/build.log" 2>&1 ||
    { tail -40 "$logs/build.log"; refuse "build failed (full log: $logs/build.log)"; }
fi
nnlab="$build/bin/nnlab"
[[ -x "$nnlab" ]] || refuse "$nnlab is not built (run without SKIP_BUILD=1)"
"$nnlab" cuda info | tee "$logs/cuda-info.txt"
grep -q '^GPU found' "$logs/cuda-info.txt" ||
  refuse "nnlab sees no usable GPU (see above): the driver, the CUDA runtime and the build must agree"

# ---- 3. nvidia-smi ------------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi > "$logs/nvidia-smi.txt" 2>&1 || true
else
  echo "(nvidia-smi not installed)" > "$logs/nvidia-smi.txt"
fi

# ---- 4. tests: every version validated on the GPU, and the emulator's own ------------------------
failed=0
if [[ -z "${SKIP_TESTS:-}" ]]; then
  say "device tests (every version of every op, validated on the GPU)"
  if ! ctest --test-dir "$build" -L device --output-on-failure 2>&1 | tee "$logs/ctest-device.log"; then
    echo "gpu_bench: DEVICE TESTS FAILED (log: $logs/ctest-device.log)" >&2
    failed=1
  fi
  grep -q 'Skipped' "$logs/ctest-device.log" && { echo "gpu_bench: device tests were SKIPPED (the tests found no GPU)" >&2; failed=1; }
  say "emulator tests"
  if ! ctest --test-dir "$build" -L unit -R 'cuda|emulator' --output-on-failure 2>&1 | tee "$logs/ctest-emulator.log"; then
    echo "gpu_bench: EMULATOR TESTS FAILED (log: $logs/ctest-emulator.log)" >&2
    failed=1
  fi
fi

# ---- 5. the benchmark ---------------------------------------------------------------------------
say "nnlab cuda bench --device gpu ${OPS:-(all ops)}${QUICK:+ --quick}"
raw_json="$logs/cuda.json"
raw_md="$logs/cuda.md"
bench_args=(cuda bench --device gpu --json "$raw_json" --md "$raw_md")
[[ -n "${QUICK:-}" ]] && bench_args+=(--quick)
# shellcheck disable=SC2206
[[ -n "${OPS:-}" ]] && bench_args+=(${OPS})
bench_status=0
"$nnlab" "${bench_args[@]}" 2>&1 | tee "$logs/bench.txt" || bench_status=$?
[[ -f "$raw_json" ]] || refuse "the bench wrote no record (log: $logs/bench.txt)"
[[ $bench_status -eq 0 ]] || { echo "gpu_bench: the bench reports versions that FAILED validation" >&2; failed=1; }

# docs/benchmarks/cuda-<gpu>.{json,md}, named after the device the record names.
name=$(sed -n 's/.*"device": {"name": "\([^"]*\)".*/\1/p' "$raw_json" | head -1)
slug=$(tr '[:upper:]' '[:lower:]' <<<"${name:-unknown-device}" | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
suffix=${QUICK:+-quick}
json="docs/benchmarks/cuda-$slug$suffix.json"
md="docs/benchmarks/cuda-$slug$suffix.md"
mkdir -p docs/benchmarks
cp "$raw_json" "$json"

# ---- 6. the goals -------------------------------------------------------------------------------
say "nnlab cuda goals --json $json"
goals_status=0
"$nnlab" cuda goals --json "$json" 2>&1 | tee "$logs/goals.txt" || goals_status=$?

{
  cat "$raw_md"
  echo
  echo "Produced by \`bash scripts/gpu_bench.sh\`${OPS:+ (OPS=\"$OPS\")}${QUICK:+ (QUICK=1: test sizes, not a benchmark)} on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)."
  echo
  echo "## Goals (\`nnlab cuda goals\`)"
  echo
  echo '```'
  cat "$logs/goals.txt"
  echo '```'
  echo
  echo "## nvidia-smi"
  echo
  echo '```'
  cat "$logs/nvidia-smi.txt"
  echo '```'
} > "$md"

say "where everything went"
echo "  record:       $json"
echo "                $md"
echo "  logs:         $logs/ (configure, build, cuda-info, nvidia-smi, ctest-device, ctest-emulator, bench, goals)"
echo "  build:        $build (nnlab: $nnlab)"
if [[ $goals_status -eq 0 ]]; then
  echo "  goals:        all met"
else
  echo "  goals:        NOT ALL MET (see $logs/goals.txt): recorded, not an error"
fi
if [[ $failed -ne 0 ]]; then
  echo "gpu_bench: VALIDATION FAILED on the GPU (see the logs above): the record marks the failing versions" >&2
  exit 1
fi
echo "  validation:   every version passed on the GPU"
