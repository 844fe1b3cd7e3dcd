#!/usr/bin/env python3
"""scripts/check_old_gpus.py: compile every CUDA kernel for the oldest GPUs the course promises
to run on, down to their machine code, with the last toolkit that still targets them.

A GTX 960 is compute capability 5.2, a Jetson Nano 5.3, a GTX 750 Ti 5.0. CUDA 13 (the nvcc
installed where this course is built) compiles for 7.5 and newer only; CUDA 12 is the last
toolkit that compiles for 5.x. Its compiler driver nvcc is not on PyPI, but the parts of it
that make a GPU's code are, as pinned wheels:

  nvidia-cuda-nvcc-cu12     ptxas (PTX -> SASS, the GPU's machine code), libdevice (the
                            maths library as LLVM bitcode), the crt/ headers
  nvidia-cuda-runtime-cu12  the CUDA runtime headers (cuda_runtime.h, mma.h, ...)
  nvidia-cuda-cccl-cu12,    headers those include (nv/target) or clang's CUDA mode does
  nvidia-curand-cu12        (curand_mtgp32_kernel.h); only the headers are kept

and Debian's clang 19 drives them: its CUDA mode compiles a .cu file's device code against
CUDA 12.5's headers into PTX for one GPU (__CUDA_ARCH__ = 500, 520 or 530), and CUDA 12.5's
ptxas turns that PTX into SASS for exactly that GPU, with that GPU's limits on registers and
shared memory. (So the PTX comes from clang's front end and NVPTX back end, not from nvcc's
cicc; the headers, the __CUDA_ARCH__ paths taken through them and the code generator that
makes the SASS are CUDA 12's.) Nothing here runs a kernel: "compile-checked" is all this says.

What is checked: every .cu file under kernels/, lessons/, exercises/ and app/ that defines a
kernel (__global__), for each target. Each states the oldest compute capability it runs on in
its header comment ("Oldest GPU: compute capability 5.0 ...": the oldest of its versions); a
file whose oldest is newer than a target is not compiled for it, and a file that states none
fails the check. Inside a file, a version that needs more (matmul v8: 8.0) has its kernel
guarded by the same NNLAB_SM_* name as its needs.min_sm (kernels/cuda/cuda.h:
NNLAB_CUDA_SM_AT_LEAST); compiled for an older GPU its body is needs_newer_gpu<sm>(), a trap
whose PTX names the capability. The check lists those kernels per target, and fails if one
names a capability the target already has (a guard that contradicts its version's min_sm).

  python3 scripts/check_old_gpus.py             check sm_50, sm_52, sm_53 (exit 0 passed,
                                                1 failed, 77 skipped: no toolchain)
  python3 scripts/check_old_gpus.py --install   install the toolchain (scripts/setup.sh runs it)
  python3 scripts/check_old_gpus.py --status    is it installed? (exit 0 yes, 1 no)
  python3 scripts/check_old_gpus.py --self-test  small kernels with the mistakes the check must
                                                catch, each must get its verdict (sm_52)
  python3 scripts/check_old_gpus.py kernels/cuda/matmul.cu   only these files
  NNLAB_OLD_GPU_ARCHS="50 52 53 61 70"          other targets (any CUDA 12.5's ptxas takes)

Where the toolchain lives: $NNLAB_CUDA12_DIR, else ~/.cache/nnlab/cuda-12.5.82 (XDG_CACHE_HOME
if set): outside the repository, so every clone and worktree shares one download. clang++-19
comes from Debian (apt-get install clang-19), or $NNLAB_OLD_GPU_CLANG names another clang++
(19 or newer). Without them the check says SKIP and exits 77 (ctest reports the test as
skipped), except under CI (CI=true), where scripts/setup.sh has installed them: there a
missing toolchain is a failure.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ---- the pinned toolchain ------------------------------------------------------------------
# CUDA 12.5 (Update 1): the newest CUDA clang 19 knows. Each wheel: its version and the sha256
# of its x86_64 and aarch64 builds (pip refuses anything else).
CUDA_VERSION = "12.5.82"
WHEELS = {
    # ptxas, libdevice, crt/ headers
    "nvidia-cuda-nvcc-cu12": ("12.5.82", [
        "b03e545b8e8c3ce7ebcd7fc44063180ff52ff01d064ece2127ed90a04ef12cd0",  # manylinux2014_x86_64
        "ab02fe922cee01235b7950f045042219fe83e15aceb4cd3c1d36db30b034dec7",  # manylinux2014_aarch64
    ]),
    # cuda_runtime.h, mma.h, cuda_fp16.h, cuda_bf16.h, ...
    "nvidia-cuda-runtime-cu12": ("12.5.82", [
        "3e79a060e126df40fd3a068f3f787eb000fa51b251ec6cd97d09579632687115",
        "71f015dbf9df05dd71f7480132c6ebf47a6ceb2ab53d7db8e08e4b30ebb87e14",
    ]),
    # nv/target, which cuda_fp16.h and cuda_bf16.h include
    "nvidia-cuda-cccl-cu12": ("12.5.39.post1", [
        "85b915114b3d883caf96e557017066fb83877ed13d334ea02b135f932b41cc4b",
        "5959b7f4611c9892f83aedbe475195d6b549449a7d0f804b8e8e0ea0e45c0f70",
    ]),
    # CUDA 12.5's cuRAND: clang's CUDA mode always includes curand_mtgp32_kernel.h (a full
    # toolkit has it); only its headers are kept
    "nvidia-curand-cu12": ("10.3.6.82", [
        "2823fb27de4e44dbb22394a6adf53aa6e1b013aca0f8c22867d1cfae58405536",
        "36aabeb5990297bbce3df324ea7c7c13c3aabb140c86d50ab3b23e4ec61672f1",
    ]),
}
CLANG_PACKAGE = "clang-19"  # Debian 12 (bookworm) and 13 (trixie) both have it
CLANG_MIN_MAJOR = 19
DEFAULT_ARCHS = [50, 52, 53]  # GTX 750 Ti, GTX 960/980, Jetson Nano
SKIP = 77
SOURCE_DIRS = ["kernels", "lessons", "exercises", "app"]


def toolchain_dir() -> Path:
    if os.environ.get("NNLAB_CUDA12_DIR"):
        return Path(os.environ["NNLAB_CUDA12_DIR"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "nnlab" / f"cuda-{CUDA_VERSION}"


def cuda_root() -> Path:
    """The CUDA 12 tree clang is pointed at: bin/ptxas, include/, nvvm/libdevice/."""
    return toolchain_dir() / "cuda"


def stamp() -> Path:
    return toolchain_dir() / "installed.txt"


def stamp_text() -> str:
    return "".join(f"{name}=={version}\n" for name, (version, _) in WHEELS.items())


def clang_major(clang: str) -> int | None:
    try:
        out = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"clang version (\d+)", out)
    return int(m.group(1)) if m else None


def find_clang() -> tuple[str | None, str]:
    """(clang++ to use, or None with the reason)."""
    given = os.environ.get("NNLAB_OLD_GPU_CLANG")
    candidates = [given] if given else [f"clang++-{CLANG_MIN_MAJOR}"]
    for c in candidates:
        path = shutil.which(c)
        if not path:
            continue
        major = clang_major(path)
        if major is not None and major >= CLANG_MIN_MAJOR:
            return path, ""
        return None, f"{path} is clang {major}, the check needs {CLANG_MIN_MAJOR} or newer"
    return None, f"{candidates[0]} not found (Debian: apt-get install {CLANG_PACKAGE})"


def toolchain_problem() -> str:
    """Empty when clang and the CUDA 12 pieces are installed, else what is missing."""
    clang, why = find_clang()
    problems = [] if clang else [why]
    if not stamp().is_file() or stamp().read_text() != stamp_text():
        problems.append(f"CUDA {CUDA_VERSION}'s ptxas and headers not installed in {toolchain_dir()}")
    elif not os.access(cuda_root() / "bin" / "ptxas", os.X_OK):
        problems.append(f"{cuda_root() / 'bin' / 'ptxas'} is missing or not executable")
    return "; ".join(problems)


# ---- --install -----------------------------------------------------------------------------


def say(msg: str) -> None:
    print(f"check_old_gpus: {msg}", flush=True)


def install_clang() -> bool:
    clang, why = find_clang()
    if clang:
        return True
    if os.environ.get("NNLAB_OLD_GPU_CLANG"):
        say(f"cannot use NNLAB_OLD_GPU_CLANG: {why}")
        return False
    say(why)
    if not apt_install(CLANG_PACKAGE):
        say(f"install clang {CLANG_MIN_MAJOR} or newer yourself and set NNLAB_OLD_GPU_CLANG to its clang++")
        return False
    clang, why = find_clang()
    if not clang:
        say(why)
    return clang is not None


def root_prefix() -> list[str] | None:
    """[] as root, ["sudo", "-n"] where sudo works without a password prompt, else None."""
    if os.geteuid() == 0:
        return []
    return ["sudo", "-n"] if shutil.which("sudo") else None


def apt_install(package: str) -> bool:
    sudo = root_prefix()
    if not shutil.which("apt-get") or sudo is None:
        say(f"cannot install {package}: " + ("not a Debian system" if not shutil.which("apt-get") else
                                             f"not root and no sudo (as root: apt-get install -y {package})"))
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    say(f"installing {package} with apt-get")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]):
        r = subprocess.run(sudo + cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            last = (r.stderr or r.stdout).strip().splitlines()[-3:]
            say(f"'{' '.join(cmd)}' failed:\n  " + "\n  ".join(last))
            return False
    return True


def find_pip() -> list[str] | None:
    """A Python that has pip (this one, else Debian's, after installing python3-pip)."""
    def has_pip(py: str) -> bool:
        return subprocess.run([py, "-m", "pip", "--version"], capture_output=True).returncode == 0
    for py in (sys.executable, "/usr/bin/python3"):
        if Path(py).exists() and has_pip(py):
            return [py, "-m", "pip"]
    if apt_install("python3-pip") and has_pip("/usr/bin/python3"):
        return ["/usr/bin/python3", "-m", "pip"]
    return None


def install_cuda12() -> bool:
    if stamp().is_file() and stamp().read_text() == stamp_text() and os.access(cuda_root() / "bin" / "ptxas", os.X_OK):
        return True
    target = toolchain_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".cuda-12-") as tmp:
        tmp = Path(tmp)
        requirements = tmp / "requirements.txt"
        requirements.write_text("".join(
            f"{name}=={version} " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n"
            for name, (version, hashes) in WHEELS.items()))
        wheels = tmp / "wheels"
        say(f"downloading CUDA {CUDA_VERSION}'s ptxas and headers from PyPI (" + ", ".join(WHEELS) + ")")
        pip = find_pip()
        if pip is None:
            say("no pip to download the wheels with")
            return False
        r = subprocess.run(pip + ["download", "--no-deps", "--only-binary=:all:", "--require-hashes", "--retries", "2",
                                  "--timeout", "30", "--disable-pip-version-check", "-q", "-r", str(requirements),
                                  "-d", str(wheels)], capture_output=True, text=True)
        if r.returncode != 0:
            last = (r.stderr or r.stdout).strip().splitlines()[-3:]
            say("pip download failed:\n  " + "\n  ".join(last))
            return False
        # The CUDA tree clang expects (--cuda-path): bin/ptxas, include/ (the runtime's headers
        # and nvcc's crt/), nvvm/libdevice/libdevice.10.bc.
        tree = tmp / "cuda"
        layout = {  # prefix in a wheel -> place in the tree
            "nvidia/cuda_runtime/include/": "include/",
            "nvidia/cuda_nvcc/include/": "include/",
            "nvidia/cuda_nvcc/bin/ptxas": "bin/ptxas",
            "nvidia/cuda_nvcc/nvvm/libdevice/": "nvvm/libdevice/",
            "nvidia/cuda_cccl/include/nv/": "include/nv/",
            "nvidia/curand/include/": "include/",
        }
        for whl in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(whl) as z:
                for name in z.namelist():
                    for prefix, place in layout.items():
                        if name.startswith(prefix) and not name.endswith("/") and not name.endswith("__init__.py"):
                            dest = tree / (place + name[len(prefix):])
                            dest.parent.mkdir(parents=True, exist_ok=True)
                            with z.open(name) as src, open(dest, "wb") as out:
                                shutil.copyfileobj(src, out)
        ptxas = tree / "bin" / "ptxas"
        if not ptxas.is_file() or not (tree / "include" / "cuda_runtime.h").is_file():
            say("the wheels did not hold bin/ptxas and include/cuda_runtime.h where expected")
            return False
        ptxas.chmod(0o755)
        (tree / "version.txt").write_text(f"CUDA Version {CUDA_VERSION}\n")  # how clang reads the version
        if (target / "cuda").exists():
            shutil.rmtree(target / "cuda")
        target.mkdir(exist_ok=True)
        tree.rename(target / "cuda")
        stamp().write_text(stamp_text())
    say(f"installed CUDA {CUDA_VERSION}'s ptxas and headers in {cuda_root()}")
    return True


def install() -> int:
    ok_clang = install_clang()
    ok_cuda = install_cuda12()
    if ok_clang and ok_cuda:
        say("toolchain ready: " + find_clang()[0] + f", CUDA {CUDA_VERSION} in {cuda_root()}")
        return 0
    say("toolchain NOT installed: the old-GPU check will SKIP (see above for why)")
    return 1


# ---- the check -----------------------------------------------------------------------------


@dataclass
class Job:
    source: Path
    arch: int


@dataclass
class Result:
    job: Job
    ok: bool = False
    log: str = ""            # compiler and ptxas messages when something failed, else warnings
    kernels: int = 0         # entry points in the SASS
    compiled_out: list[tuple[str, int]] = field(default_factory=list)  # (kernel, capability it needs)
    max_registers: int = 0
    spilled: list[tuple[str, int]] = field(default_factory=list)  # (kernel, bytes of spill stores)
    seconds: float = 0.0


OLDEST = re.compile(r"Oldest GPU: compute capability (\d+)\.(\d)")
MARKER = re.compile(r"nnlab: compiled out, needs compute capability (\d+)")


def kernel_sources() -> list[Path]:
    files = []
    for d in SOURCE_DIRS:
        for p in sorted((ROOT / d).rglob("*.cu")):
            if "__global__" in p.read_text(errors="replace"):
                files.append(p)
    return files


def oldest_sm(source: Path) -> int | None:
    """The "Oldest GPU: compute capability X.Y" of the file's header comment, as 10X + Y."""
    header = []
    for line in source.read_text(errors="replace").splitlines():
        if line.startswith("#include"):
            break
        header.append(line)
    m = OLDEST.search(" ".join(l.lstrip("/ ") for l in header))
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None


def demangle(names: list[str]) -> dict[str, str]:
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt or not names:
        return {n: n for n in names}
    out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short(name: str) -> str:
    """void kernels::cuda::hw::(anonymous namespace)::foo<true>(float*, int) -> foo<true>"""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    name = re.sub(r"\bkernels::cuda::(hw::)?", "", name)
    depth = 0
    for i, c in enumerate(name):  # cut the parameter list: the first '(' outside template arguments
        depth += (c == "<") - (c == ">")
        if c == "(" and depth == 0:
            return name[:i]
    return name


def collapsed(kernels: list[str]) -> str:
    """["f<true>", "f<false>", "g"] -> "f (2 instantiations), g": one entry per template."""
    counts: dict[str, int] = {}
    for k in kernels:
        base = k.split("<", 1)[0]
        counts[base] = counts.get(base, 0) + 1
    return ", ".join(b if n == 1 and b in kernels else f"{b} ({n} instantiation{'s' if n > 1 else ''})"
                     for b, n in counts.items())


def compile_one(job: Job, clang: str, cuda: Path, work: Path, allowed: list[Path]) -> Result:
    res = Result(job)
    t0 = time.monotonic()
    stem = display(job.source).replace("/", "__")
    ptx, cubin, dep = (work / f"{stem}.sm_{job.arch}{ext}" for ext in (".ptx", ".cubin", ".d"))
    # As the project's CUDA build: C++17, -O3 (nvcc's default for device code), the repository
    # root on the include path. -isystem puts CUDA 12's headers ahead of any other CUDA's
    # copies in /usr/local/include (CUDA 13 installs symlinks there). clang 19 calls its
    # support of CUDA 12.5 partial (new 12.x features it does not implement; none used here)
    # and says so in a warning on every file: silenced.
    cmd = [clang, "-x", "cuda", "-std=c++17", "-O3", "-Wno-unknown-cuda-version", f"--cuda-path={cuda}",
           "-isystem", str(cuda / "include"),
           f"--cuda-gpu-arch=sm_{job.arch}", "--cuda-device-only", "-S", "-I", str(ROOT),
           "-MD", "-MF", str(dep), str(job.source), "-o", str(ptx)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    log = r.stdout + r.stderr
    if r.returncode == 0:
        # ptxas: PTX -> SASS for exactly this GPU; -v reports each kernel's registers and spills.
        p = subprocess.run([str(cuda / "bin" / "ptxas"), f"-arch=sm_{job.arch}", "-v", str(ptx), "-o", str(cubin)],
                           capture_output=True, text=True)
        ptxas_log = p.stdout + p.stderr
        if p.returncode != 0:
            log += ptxas_log
        else:
            res.ok = True
            parse_ptxas(res, ptxas_log)
            parse_ptx(res, ptx.read_text())
            stray = stray_headers(dep, allowed)
            if stray:
                res.ok = False
                log += ("headers from outside CUDA " + CUDA_VERSION + ", the compiler and the repository "
                        "(another CUDA's would make this check meaningless):\n  " + "\n  ".join(stray) + "\n")
    res.log = log.strip()
    res.seconds = time.monotonic() - t0
    return res


def parse_ptxas(res: Result, log: str) -> None:
    kernel = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            kernel = m.group(1)
            res.kernels += 1
            continue
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and kernel and int(m.group(1)) > 0:
            res.spilled.append((kernel, int(m.group(1))))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            res.max_registers = max(res.max_registers, int(m.group(1)))


def parse_ptx(res: Result, ptx: str) -> None:
    """The kernels whose body is needs_newer_gpu<sm>() (kernels/cuda/cuda.h), with that sm."""
    for chunk in re.split(r"\n(?=\s*// \.globl\s)", ptx):
        entry = re.search(r"\.entry\s+([\w$.]+)", chunk)
        marker = MARKER.search(chunk)
        if entry and marker:
            res.compiled_out.append((entry.group(1), int(marker.group(1))))


def stray_headers(dep: Path, allowed: list[Path]) -> list[str]:
    text = dep.read_text().replace("\\\n", " ")
    paths = text.split(":", 1)[1].split() if ":" in text else []
    stray = []
    for p in paths[1:]:  # the first is the source itself
        resolved = Path(p) if Path(p).is_absolute() else ROOT / p
        resolved = Path(os.path.normpath(resolved))
        if not any(resolved.is_relative_to(a) for a in allowed):
            stray.append(str(resolved))
    return sorted(set(stray))


def archs() -> list[int]:
    given = os.environ.get("NNLAB_OLD_GPU_ARCHS", "").split()
    if not given:
        return DEFAULT_ARCHS
    try:
        return [int(a.removeprefix("sm_")) for a in given]
    except ValueError:
        raise SystemExit(f"check_old_gpus: NNLAB_OLD_GPU_ARCHS={os.environ['NNLAB_OLD_GPU_ARCHS']!r}: "
                         "want numbers like '50 52 53'")


def toolchain_gate() -> int | None:
    """None when the toolchain is there; else prints SKIP (or, under CI, FAIL) and returns the exit code."""
    problem = toolchain_problem()
    if not problem:
        return None
    if os.environ.get("CI", "").lower() == "true":
        print(f"FAIL: the old-GPU check cannot run: {problem}. Under CI, scripts/setup.sh installs the "
              "toolchain (python3 scripts/check_old_gpus.py --install): see its output.")
        return 1
    print(f"SKIP: old-GPU compile check (sm_50/52/53, CUDA {CUDA_VERSION}): {problem}. "
          "Install it with: python3 scripts/check_old_gpus.py --install (needs apt and PyPI)")
    return SKIP


def display(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def sm_str(sm: int) -> str:
    return f"{sm // 10}.{sm % 10}"


@dataclass
class Verdict:
    source: Path
    arch: int
    status: str              # "ok", "fail" or "excluded"
    lines: list[str]         # what to print under it
    compiled_out: list[str] = field(default_factory=list)  # kernels that are a trap on this GPU


def run_check(sources: list[Path], targets: list[int], jobs_wanted: int) -> list[Verdict]:
    """Compiles each source for each target (unless its oldest GPU is newer) and judges it."""
    clang, _ = find_clang()
    cuda = cuda_root()
    resource_dir = Path(subprocess.run([clang, "-print-resource-dir"], capture_output=True, text=True).stdout.strip())
    # Where a header may come from: the repository, CUDA 12.5, clang's own (its CUDA wrappers),
    # and the C and C++ standard libraries.
    allowed = [ROOT, cuda.resolve(), cuda, resource_dir.resolve(), resource_dir, Path("/usr/include"),
               Path("/usr/lib/gcc"), Path(f"/usr/lib/llvm-{clang_major(clang)}")]
    verdicts: list[Verdict] = []
    jobs: list[Job] = []
    for arch in targets:
        for src in sources:
            oldest = oldest_sm(src)
            if oldest is None:
                verdicts.append(Verdict(src, arch, "fail", [
                    "defines kernels, but its header does not say \"Oldest GPU: compute capability X.Y\""]))
            elif oldest > arch:
                verdicts.append(Verdict(src, arch, "excluded", [f"not compiled: its oldest GPU is {sm_str(oldest)}"]))
            else:
                jobs.append(Job(src, arch))
    with tempfile.TemporaryDirectory(prefix="nnlab-oldgpu-") as work:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs_wanted) as pool:
            results = list(pool.map(lambda j: compile_one(j, clang, cuda, Path(work), allowed), jobs))
    for res in results:
        src, arch = res.job.source, res.job.arch
        if not res.ok:
            verdicts.append(Verdict(src, arch, "fail", res.log.splitlines()))
            continue
        names = demangle([k for k, _ in res.compiled_out])
        plural = "" if res.kernels == 1 else "s"
        head = f"{res.kernels} kernel{plural} to SASS, up to {res.max_registers} registers"
        if res.spilled:
            head += f", {len(res.spilled)} spilling (up to {max(b for _, b in res.spilled)} bytes)"
        v = Verdict(src, arch, "ok", [head + f"  [{res.seconds:.1f} s]"])
        for sm in sorted({sm for _, sm in res.compiled_out}):
            out = [short(names[k]) for k, s in res.compiled_out if s == sm]
            v.compiled_out += out
            v.lines.append(f"compiled out, a trap here (needs {sm_str(sm)}): " + collapsed(out))
            if sm <= arch:
                # needs_newer_gpu<sm> compiled for a GPU that has sm: the guard around it and the
                # capability it names disagree.
                v.status = "fail"
                v.lines.append(f"a guard compiled these out for sm_{arch}, yet they name {sm_str(sm)}, which "
                               f"sm_{arch} has: the guard and the version's min_sm disagree")
        v.lines += res.log.splitlines()
        verdicts.append(v)
    return verdicts


def print_verdicts(verdicts: list[Verdict], targets: list[int]) -> None:
    for arch in targets:
        print(f"\n== sm_{arch} (compute capability {sm_str(arch)})")
        for v in (v for v in verdicts if v.arch == arch):
            tag = {"ok": "ok  ", "fail": "FAIL", "excluded": "--  "}[v.status]
            print(f"  {tag} {display(v.source)}: " + (v.lines[0] if v.lines else ""))
            for line in v.lines[1:]:
                print("         " + line)


def check(jobs_wanted: int, sources: list[Path]) -> int:
    gate = toolchain_gate()
    if gate is not None:
        return gate
    targets = archs()
    print(f"old-GPU compile check: {len(sources)} .cu files with kernels, for "
          + ", ".join(f"sm_{a}" for a in targets) + f"; {find_clang()[0]} -> PTX, CUDA {CUDA_VERSION}'s ptxas -> "
          f"SASS ({cuda_root()})", flush=True)
    t0 = time.monotonic()
    verdicts = run_check(sources, targets, jobs_wanted)
    print_verdicts(verdicts, targets)
    passed = sum(v.status == "ok" for v in verdicts)
    failed = sum(v.status == "fail" for v in verdicts)
    print(f"\n{passed} passed, {failed} failed")
    print(f"({len(verdicts)} file x target pairs, {sum(v.status == 'excluded' for v in verdicts)} excluded by their "
          f"stated oldest GPU; {time.monotonic() - t0:.0f} s with {jobs_wanted} jobs)")
    return 1 if failed else 0


# ---- --self-test: the check must catch what it is for ---------------------------------------
# Small .cu files, each with the mistake the check exists to catch (or the right way to do it),
# compiled for sm_52; each must get its expected verdict. A check that passed everything would
# fail here.
SELF_TESTS = {
    # A tensor-core kernel that claims to run on 5.0 and has no guard: clang finds no wmma
    # for sm_52 (mma.h declares it from 7.0 on).
    "unguarded_wmma.cu": ("fail", """// Oldest GPU: compute capability 5.0 (wrong on purpose)
#include <mma.h>
__global__ void tf32_kernel(float* c) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> acc;
  nvcuda::wmma::fill_fragment(acc, 0.0f);
  nvcuda::wmma::store_matrix_sync(c, acc, 16, nvcuda::wmma::mem_row_major);
}
"""),
    # The same kernel guarded as kernels/cuda/*.cu guard theirs: compiles, listed as a trap.
    "guarded_wmma.cu": ("ok", """// Oldest GPU: compute capability 5.0 (the fp32 kernel; the TF32 one needs 8.0)
#include "kernels/cuda/cuda.h"
#include <mma.h>
__global__ void tf32_kernel(float* c) {
#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_AMPERE)
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> acc;
  nvcuda::wmma::fill_fragment(acc, 0.0f);
  nvcuda::wmma::store_matrix_sync(c, acc, 16, nvcuda::wmma::mem_row_major);
#else
  (void)c;
  kernels::cuda::needs_newer_gpu<NNLAB_SM_AMPERE>();
#endif
}
__global__ void fp32_kernel(float* c) { c[threadIdx.x] = 2.0f * c[threadIdx.x]; }
"""),
    # A guard whose fallback names a capability the GPU has: the guard and the stated minimum
    # disagree (the kernel would be a trap on a GPU its version claims to run on).
    "contradicting_guard.cu": ("fail", """// Oldest GPU: compute capability 5.0
#include "kernels/cuda/cuda.h"
__global__ void fp32_kernel(float* c) {
#if NNLAB_CUDA_SM_AT_LEAST(NNLAB_SM_AMPERE)
  c[threadIdx.x] = 1.0f;
#else
  (void)c;
  kernels::cuda::needs_newer_gpu<NNLAB_SM_MAXWELL>();
#endif
}
"""),
    # 128 KB of static shared memory: valid C++ for clang, but more than ptxas accepts for
    # sm_52 (96 KB; a block may use 48 KB at run time): the SASS stage must refuse it.
    "too_much_shared.cu": ("fail", """// Oldest GPU: compute capability 5.0
__global__ void big_tile(float* c) {
  __shared__ float tile[32768];
  tile[threadIdx.x] = c[threadIdx.x];
  __syncthreads();
  c[threadIdx.x] = tile[32767 - threadIdx.x];
}
"""),
    # No statement of its oldest GPU.
    "unstated.cu": ("fail", """// A kernel file that forgot to say which GPUs it runs on.
__global__ void k(float* c) { c[threadIdx.x] = 0.0f; }
"""),
    # States 8.0: not compiled for 5.x at all, so the unguarded wmma is fine.
    "ampere_only.cu": ("excluded", """// Oldest GPU: compute capability 8.0
#include <mma.h>
__global__ void tf32_kernel(float* c) {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> acc;
  nvcuda::wmma::fill_fragment(acc, 0.0f);
  nvcuda::wmma::store_matrix_sync(c, acc, 16, nvcuda::wmma::mem_row_major);
}
"""),
}


def self_test(jobs_wanted: int) -> int:
    gate = toolchain_gate()
    if gate is not None:
        return gate
    with tempfile.TemporaryDirectory(prefix="nnlab-oldgpu-selftest-") as tmp:
        sources = []
        for name, (_, code) in SELF_TESTS.items():
            (Path(tmp) / name).write_text(code)
            sources.append(Path(tmp) / name)
        verdicts = run_check(sources, [52], jobs_wanted)
    print_verdicts(verdicts, [52])
    passed = failed = 0
    print()
    for v in verdicts:
        want = SELF_TESTS[v.source.name][0]
        good = v.status == want
        if good and v.source.name == "guarded_wmma.cu":
            good = v.compiled_out == ["tf32_kernel"]  # the fp32 kernel is real code, the TF32 one a trap
        print(f"{'ok  ' if good else 'FAIL'} {v.source.name}: expected {want}, got {v.status}"
              + (f" (compiled out: {', '.join(v.compiled_out) or 'nothing'})" if v.status == "ok" else ""))
        passed += good
        failed += not good
    print(f"\n{passed} passed, {failed} failed")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="only these .cu files (default: every one with kernels)")
    ap.add_argument("--install", action="store_true", help="install clang and CUDA 12's pieces, then exit")
    ap.add_argument("--status", action="store_true", help="say whether the toolchain is installed")
    ap.add_argument("--self-test", action="store_true", help="check that the check catches what it should")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="compilations at once")
    args = ap.parse_args()
    if args.install:
        return install()
    if args.status:
        problem = toolchain_problem()
        say("toolchain ready" if not problem else f"toolchain missing: {problem}")
        return 0 if not problem else 1
    if args.self_test:
        return self_test(max(1, args.jobs))
    sources = [f.resolve() for f in args.files] or kernel_sources()
    return check(max(1, args.jobs), sources)


if __name__ == "__main__":
    sys.exit(main())
