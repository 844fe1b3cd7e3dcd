#!/usr/bin/env bash
# scripts/gpu_lease.sh: the GPU records (scripts/gpu_bench.sh, scripts/gpu_gpt.sh) inside a short
# lease of a GPU machine that cannot build the project (no Catch2, CLI11 or nlohmann-json there)
# and is lent for minutes. Two halves:
#
#   bash scripts/gpu_lease.sh pack        HERE, on the build machine (no GPU needed): builds
#                                         build/gpu for CUDA_ARCH (default 90: H100/H200) and packs
#                                         nnlab, nnlab_tests, their ctest files, the shared
#                                         libraries a bare CUDA image may lack (OpenBLAS, gfortran,
#                                         libgomp, cudart) and Tiny Shakespeare into .lease/
#                                         (git-ignored; ~17 MB). cuBLAS is found there, not carried.
#   bash scripts/gpu_lease.sh run [STEPS] THERE, in the repository root (with .lease/ carried):
#                                         unpacks, runs STEPS (default: tests kernels gpt train
#                                         lesson10) each under a time limit, within DEADLINE seconds
#                                         (default 540), sizing the bf16 training run to the time
#                                         left (at most 5000 steps), and bundles every record and
#                                         log (not the checkpoints) into $OUT/results.tgz as it goes.
#
# The records land in docs/benchmarks/ THERE; copy them from results.tgz into the checkout
# here. A lent machine's copy of the tree may not carry git: the records' "commit" then names
# whatever git there says, so state the commit the binaries were built from when committing.
# ctest's files hold absolute paths: `run` links this checkout's path there (the build dir's
# CMAKE_SOURCE_DIR) to the working directory when that path is free.
set -uo pipefail
cd "$(dirname "$0")/.."
lease=.lease

pack() {
  set -e
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-$(command -v ccache || true)}
  export CMAKE_CUDA_COMPILER_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER:-$CMAKE_CXX_COMPILER_LAUNCHER}
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNNLAB_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" > /dev/null
  cmake --build build/gpu -j "${JOBS:-$(nproc)}" --target nnlab nnlab_tests
  rm -rf "$lease" && mkdir -p "$lease/stage/build/gpu/bin" "$lease/stage/lib"
  cp build/gpu/bin/nnlab build/gpu/bin/nnlab_tests "$lease/stage/build/gpu/bin/"
  strip "$lease"/stage/build/gpu/bin/*
  (cd build/gpu && find . -path '*/CMakeFiles' -prune -o \( -name CTestTestfile.cmake -o -name 'nnlab_tests_*.cmake' \) \
     -print | xargs -I{} cp --parents {} "../../$lease/stage/build/gpu/")
  for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libpcre2-8.so.0 libgomp.so.1 libcudart.so.13; do
    path=$(ldd build/gpu/bin/nnlab | awk -v l="$lib" '$1 == l {print $3}')
    [[ -n "$path" ]] && cp -L "$path" "$lease/stage/lib/"
  done
  (cd "$lease/stage" && tar cf - . | xz -6 -T0 > ../pack.tar.xz)
  rm -rf "$lease/stage"
  grep -q . build/gpu/CMakeCache.txt && sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build/gpu/CMakeCache.txt > "$lease/source_dir"
  git rev-parse --short HEAD > "$lease/commit" 2>/dev/null || true
  for f in ../shared/data/tinyshakespeare.txt data/tinyshakespeare.txt; do [[ -f $f ]] && cp "$f" "$lease/" && break; done
  du -sh "$lease"
  echo "carry $lease, run: bash scripts/gpu_lease.sh run"
}

run() {
  local t0 deadline=${DEADLINE:-540} steps=${*:-tests kernels gpt train lesson10}
  t0=$(date +%s)
  left() { echo $(( deadline - ($(date +%s) - t0) )); }
  [[ -f $lease/pack.tar.xz ]] || { echo "gpu_lease: no $lease/pack.tar.xz: run 'pack' first and carry $lease" >&2; exit 2; }
  [[ -x build/gpu/bin/nnlab ]] || { tar xJf "$lease/pack.tar.xz" && rm -rf "$lease/lib" && mv lib "$lease/lib"; }
  local src; src=$(cat "$lease/source_dir" 2>/dev/null || true)
  if [[ -n "$src" && ! -e "$src" ]]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
  local cublas
  cublas=$(find /usr/local /opt /usr/lib -name 'libcublas.so.13*' 2>/dev/null | xargs -r -n1 dirname | sort -u | tr '\n' ':')
  export LD_LIBRARY_PATH="${cublas}$PWD/$lease/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$PATH:/usr/local/cuda/bin" SKIP_BUILD=1 SKIP_TESTS=1
  local out=${OUT:-out/lease}
  mkdir -p "$out" out/lease
  bundle() {
    find out/lease out/gpu-bench out/gpu-gpt docs/benchmarks -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' \
      -o -name '*.txt' -o -name '*.log' \) -size -4M 2>/dev/null | tar czf "$out/results.tgz" -T - || true
  }
  step() {  # step SECONDS NAME COMMAND...: the command's output in out/lease/NAME.log, its tail printed
    local limit=$1 name=$2 l rc s; shift 2
    l=$(left); (( l < 20 )) && { echo "SKIPPED $name: ${l}s left"; return 0; }
    (( limit > l )) && limit=$l
    echo "=== $name (limit ${limit}s)"; s=$(date +%s)
    timeout -k 5 "$limit" "$@" > "out/lease/$name.log" 2>&1; rc=$?
    echo "=== $name: exit $rc after $(( $(date +%s) - s ))s"; tail -n 12 "out/lease/$name.log"; bundle
  }
  local data=()
  [[ -f $lease/tinyshakespeare.txt ]] && data=(DATA="$lease/tinyshakespeare.txt")
  nvidia-smi -L
  for s in $steps; do
    case $s in
      tests) step 60 tests ctest --test-dir build/gpu -L device --output-on-failure ;;
      kernels) step 150 kernels bash scripts/gpu_bench.sh ;;
      gpt) step 240 gpt env SKIP_KERNEL_BENCH=1 SKIP_LESSON10=1 TRAIN_PRECISIONS=" " bash scripts/gpu_gpt.sh ;;
      train)
        local ms iters
        ms=$(python3 -c 'import glob, json
for f in glob.glob("docs/benchmarks/gpt-cuda-*.json"):
    if "llama" in f or "train" in f: continue
    for r in json.load(open(f))["rows"]:
        if r["precision"] == "bf16" and r["name"].startswith("nnlab"): print(r["ms_per_step"]); raise SystemExit' 2>/dev/null)
        # 1.6x the bench step: the evaluations (200 batches twice every 250 steps) and the log
        iters=$(python3 -c "ms = float('${ms:-0}' or 0); n = int(($(left) - 40) / (ms * 1.6e-3)) if ms > 0 else 0; print(min(5000, n // 250 * 250))")
        echo "bf16 step ${ms:-unknown} ms, $(left)s left: $iters steps"
        (( iters >= 250 )) && step $(( $(left) - 10 )) train env SKIP_KERNEL_BENCH=1 SKIP_GPT_BENCH=1 SKIP_LESSON10=1 \
          TRAIN_PRECISIONS=bf16 MAX_ITERS="$iters" "${data[@]}" bash scripts/gpu_gpt.sh ;;
      lesson10)
        for part in kv law quant; do
          step 90 "lesson10-$part" build/gpu/bin/nnlab lesson10 --part "$part" --backend cuda --out-dir out/gpu-gpt/lesson10 \
            --json-dir docs/benchmarks ${data:+--data "$lease/tinyshakespeare.txt"}
        done ;;
      *) echo "gpu_lease: unknown step '$s' (tests kernels gpt train lesson10)" >&2 ;;
    esac
  done
  bundle
  echo "gpu_lease: $(( $(date +%s) - t0 ))s; records and logs in $out/results.tgz"
}

case ${1:-} in
  pack) pack ;;
  run) shift; run "$@" ;;
  *) sed -n '2,24p' "$0"; exit 2 ;;
esac
