#!/usr/bin/env bash
# scripts/setup.sh: install what nnlab needs to build, test and run its notebooks.
#
# Debian/Ubuntu: installs the missing packages with apt-get (as root, or through sudo).
# Everything already installed: does nothing, needs no network.
# macOS and other distributions: prints what to install and checks for the tools.
#
#   bash scripts/setup.sh            install what is missing
#   bash scripts/setup.sh --check    only report what is missing (exit 1 if anything is)
set -euo pipefail

check_only=0
[[ "${1:-}" == "--check" ]] && check_only=1

# Build: compiler, CMake, Ninja, OpenMP (libgomp comes with g++), Catch2 v2, CLI11, zlib;
# OpenBLAS (found with pkg-config): only the kernels bench, as the peer it compares with.
# Data: Fashion-MNIST (IDX files under /usr/share/datasets/fashion-mnist).
# Notebooks: Debian's Python 3 with nbclient, ipykernel, numpy, matplotlib; Jupyter Notebook
# (Debian's jupyter-notebook, `jupyter notebook notebooks/`) to open them, and nbconvert for
# the executed HTML copies of notebooks/run_notebook.py --html. The printable handout
# (scripts/make_handout.py): Python-Markdown.
# The GPT's PyTorch reference (scripts/gpt_torch.py, lessons 07-08): python3-torch, for
# /usr/bin/python3. Debian builds it with BLAS_INFO=generic: its matmuls call
# libblas.so.3, which the alternatives system points at OpenBLAS (priority 100) only when
# an OpenBLAS runtime is installed, and at the reference BLAS of libblas3 (plain loops,
# many times slower) otherwise. libopenblas0 (which libopenblas-dev also pulls in) is
# listed so that PyTorch's timings are never taken on the reference BLAS.
# The loaders' fuzzers (scripts/fuzz.sh, run by scripts/test.sh): clang and its libFuzzer
# and sanitizer runtimes.
# The BPE tokenizer (io/bpe.cpp, lesson 11): nlohmann-json (tokenizer.json, vocab.json) and
# PCRE2 (GPT-2's pre-tokenisation regex: \p{L} needs Unicode properties).
# python3-venv: the .venv that holds the pinned Hugging Face packages (hf_venv below).
# Open MPI (openmpi-bin, libopenmpi-dev): kernels/comm_mpi.h, the MPI engine of lesson 14's
# all-reduce (optional: without it the MPI tests skip, and fail under CI=true).
# python3-scipy: python-control's and do-mpc's (lesson 13's control cross-checks, control_venv
# below: they use Debian's numpy, scipy and matplotlib through the venv's system site packages).
DEBIAN_PACKAGES=(
  g++ cmake ninja-build
  catch2 libcli11-dev zlib1g-dev pkg-config libopenblas-dev libopenblas0
  nlohmann-json3-dev libpcre2-dev python3-venv python3-scipy
  openmpi-bin libopenmpi-dev
  dataset-fashion-mnist
  python3 python3-numpy python3-matplotlib python3-nbclient python3-nbformat python3-ipykernel
  jupyter-notebook python3-nbconvert python3-markdown
  python3-torch
  clang libclang-rt-14-dev
)

# ---- the old-GPU compile check's toolchain (scripts/check_old_gpus.py) ---------------------
# clang 19 (Debian's clang-19) and CUDA 12.5's ptxas and headers (pinned wheels from PyPI,
# unpacked into ~/.cache/nnlab/cuda-12.5.82): what compiles the CUDA kernels for compute
# capability 5.x (GTX 960, Jetson Nano), which CUDA 13 cannot target. Optional: when it cannot
# be installed (offline, not root) setup says so and goes on, and the check's ctest tests
# (label "oldgpu") report SKIP, except under CI (CI=true), where they fail. Run last, after
# the packages above (it needs python3 and pip). With --check: only says whether it is there.
old_gpu_toolchain() {
  local script
  script="$(dirname "$0")/check_old_gpus.py"
  if ! command -v python3 >/dev/null 2>&1; then
    echo "setup: no python3: the old-GPU check's toolchain is not installed (its tests will SKIP)"
  elif [[ $check_only -eq 1 ]]; then
    python3 "$script" --status || true
  elif ! python3 "$script" --install; then
    echo "setup: the old-GPU check's toolchain is not installed (see above): its tests will SKIP"
  fi
}

# ---- the Hugging Face Python packages (scripts/requirements-hf.txt) -----------------------
# tokenizers (lesson 11's BPE is checked against it: tests/python/test_bpe_hf.py) and
# transformers (the llama-style model's reference is checked against its LlamaForCausalLM:
# tests/python/test_llama_torch.py), pinned with hashes, in <repo>/.venv (--system-site-packages:
# Debian's numpy and torch stay visible; not in Debian 12, hence PyPI). The venv is made by the
# Python that imports torch (Debian's /usr/bin/python3 first, as cmake/torch_python.cmake
# looks): a pyenv python3 earlier on PATH would make a venv without torch, in which the
# transformers comparison would skip; such a venv is made again. Optional: offline, setup
# says so and goes on, and the comparison tests SKIP printing the command below. With
# --check: only says whether it is there.
hf_venv() {
  local root venv req cmd py
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.venv"
  req="$root/scripts/requirements-hf.txt"
  py=python3
  if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c "import torch" >/dev/null 2>&1; then
    py=/usr/bin/python3
  fi
  cmd="$py -m venv --system-site-packages .venv && .venv/bin/pip install --require-hashes -r scripts/requirements-hf.txt"
  if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import tokenizers, transformers" >/dev/null 2>&1; then
    if "$venv/bin/python" -c "import torch" >/dev/null 2>&1 || [[ "$py" == python3 ]]; then
      echo "setup: Hugging Face tokenizers and transformers present in .venv"
      return 0
    fi
  fi
  if [[ $check_only -eq 1 ]]; then
    echo "setup: Hugging Face tokenizers/transformers not installed in a .venv that sees torch (the BPE and"
    echo "setup:   llama comparison tests will SKIP); install: $cmd"
    return 0
  fi
  # --clear: a venv made earlier by another interpreter (one without torch) is made again
  if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -m venv --clear --system-site-packages "$venv" >/dev/null 2>&1 ||
     ! "$venv/bin/pip" install -q --require-hashes -r "$req"; then
    echo "setup: could not install Hugging Face tokenizers and transformers (offline? no python3-venv?):"
    echo "setup:   the BPE and llama comparison tests will SKIP. Later, from the repository root: $cmd"
  else
    echo "setup: installed Hugging Face tokenizers and transformers into .venv ($py)"
  fi
}

# ---- the control-engineering Python packages (scripts/requirements-control.txt) ------------
# python-control, CasADi and do-mpc (lesson 13's PI loop and MPC are checked against them:
# scripts/control_peer.py, tests/python/test_control_peer.py), pinned with hashes, in the same
# <repo>/.venv as the Hugging Face packages. Runs after hf_venv, which may make the venv again
# (--clear); here it is only made when hf_venv could not, never cleared. Optional: offline,
# setup says so and goes on, and the cross-check test SKIPs printing the command below. With
# --check: only says whether it is there.
control_venv() {
  local root venv req cmd py
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.venv"
  req="$root/scripts/requirements-control.txt"
  py=python3
  [[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
  cmd="$py -m venv --system-site-packages .venv && .venv/bin/pip install --require-hashes -r scripts/requirements-control.txt"
  if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -W ignore -c "import control, casadi, do_mpc" >/dev/null 2>&1; then
    echo "setup: python-control, CasADi and do-mpc present in .venv"
    return 0
  fi
  if [[ $check_only -eq 1 ]]; then
    echo "setup: python-control/CasADi/do-mpc not installed in .venv (lesson 13's control cross-check"
    echo "setup:   will SKIP); install: $cmd"
    return 0
  fi
  if ! { [[ -x "$venv/bin/python" ]] || "$py" -m venv --system-site-packages "$venv" >/dev/null 2>&1; } ||
     ! "$venv/bin/pip" install -q --require-hashes -r "$req"; then
    echo "setup: could not install python-control, CasADi and do-mpc (offline? no python3-venv?):"
    echo "setup:   lesson 13's control cross-check will SKIP. Later, from the repository root: $cmd"
  else
    echo "setup: installed python-control, CasADi and do-mpc into .venv ($py)"
  fi
}

# Says which library libblas.so.3 resolves to; warns unless it is an OpenBLAS (someone
# may have set the alternative by hand). Only reports: the choice is the admin's.
check_blas_alternative() {
  command -v update-alternatives >/dev/null 2>&1 || return 0
  local name value
  name=$(update-alternatives --get-selections 2>/dev/null | awk '!found && $1 ~ /^libblas[.]so[.]3/ {print $1; found = 1}')
  [[ -n "$name" ]] || return 0
  value=$(update-alternatives --query "$name" 2>/dev/null | awk '/^Value:/ {print $2}')
  if [[ "$value" != *openblas* ]]; then
    echo "setup: warning: libblas.so.3 is ${value:-unset}, not OpenBLAS: PyTorch's matmuls will be slow." >&2
    echo "setup:   fix: sudo update-alternatives --auto $name" >&2
  fi
}

if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  missing=()
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "installed" ]] || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "setup: all Debian packages present"
    check_blas_alternative
    old_gpu_toolchain
    hf_venv
    control_venv
    exit 0
  fi
  echo "setup: missing Debian packages: ${missing[*]}"
  if [[ $check_only -eq 1 ]]; then exit 1; fi
  if [[ $(id -u) -eq 0 ]]; then
    SUDO=()
  elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "setup: not root and no sudo: run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "setup: installed ${missing[*]}"
  check_blas_alternative
  old_gpu_toolchain
  hf_venv
  control_venv
  exit 0
fi

# Not Debian: say what to install, then check the essentials are on PATH.
case "$(uname -s)" in
  Darwin)
    cat <<'MSG'
setup (macOS): install the tools with Homebrew, then configure with libomp's prefix:
  brew install cmake ninja libomp cli11 catch2 openblas pkg-config python nlohmann-json pcre2 open-mpi
  python3 -m pip install -r notebooks/requirements.txt
  python3 -m pip install torch   # optional: the GPT's PyTorch reference (scripts/gpt_torch.py)
  cmake --preset release -DOpenMP_ROOT="$(brew --prefix libomp)"
Fashion-MNIST: python3 scripts/fetch_data.py fashion-mnist
MSG
    ;;
  *)
    cat <<'MSG'
setup: not a Debian system. Install with your package manager:
  Fedora: sudo dnf install gcc-c++ cmake ninja-build catch2-devel cli11-devel zlib-devel openblas-devel json-devel pcre2-devel python3-numpy python3-matplotlib python3-nbclient python3-ipykernel python3-notebook python3-nbconvert python3-torch
  Arch:   sudo pacman -S gcc cmake ninja catch2 cli11 zlib openblas nlohmann-json pcre2 python-numpy python-matplotlib python-nbclient python-ipykernel jupyter-notebook jupyter-nbconvert python-pytorch
Fashion-MNIST: python3 scripts/fetch_data.py fashion-mnist
MSG
    ;;
esac
status=0
for tool in cmake ninja c++ python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "setup: '$tool' not found on PATH" >&2
    status=1
  fi
done
old_gpu_toolchain
hf_venv
control_venv
exit $status
