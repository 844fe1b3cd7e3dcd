#!/usr/bin/env bash
# scripts/bench_llama_ops.sh: the modern block's CPU ladders (kernels/rmsnorm.h, rope.h, swiglu.h;
# issue 21) timed by the one harness, v1 and v2 at 1 and 2 threads, alternating rounds with a
# PyTorch peer of the same formulas (HF Llama's), as docs/benchmarks/i21-h3-llama-ops.md records.
#   bash scripts/bench_llama_ops.sh [rounds]      (default 2; the release build in build/release)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-2}"
nnlab=build/release/bin/nnlab
peer=$(cat <<'PY'
import time, statistics, torch
def t(f, reps=5):
    f(); s = []
    for _ in range(reps):
        a = time.perf_counter(); f(); s.append((time.perf_counter() - a) * 1e3)
    return statistics.median(s)
for th in (1, 2):
    torch.set_num_threads(th)
    x = torch.rand(8192, 768) * 4 - 2; w = torch.rand(768) + 0.5
    rms = t(lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w)
    B, T, NH, HS = 8, 1024, 12, 64
    q = torch.rand(B, T, NH, HS) * 2 - 1
    inv = 1.0 / (10000 ** (torch.arange(0, HS, 2).float() / HS)); fr = torch.outer(torch.arange(T).float(), inv)
    emb = torch.cat((fr, fr), -1); cos = emb.cos()[None, :, None, :]; sin = emb.sin()[None, :, None, :]
    rot = lambda v: torch.cat((-v[..., HS // 2:], v[..., :HS // 2]), -1)
    rope = t(lambda: q * cos + rot(q) * sin)
    p = torch.rand(8192, 4096) * 16 - 8; g, u = p[:, :2048], p[:, 2048:]
    sw = t(lambda: torch.nn.functional.silu(g) * u)
    print(f"torch {torch.__version__} threads {th}: rms_norm 8192x768 {rms:.2f} ms, "
          f"rope q 8x1024x12x64 {rope:.2f} ms, silu(g)*u 8192x2048 {sw:.2f} ms", flush=True)
PY
)
for r in $(seq 1 "$rounds"); do
  echo "== round $r, load $(cat /proc/loadavg)"
  # OpenBLAS settings this workplace exports slow torch down: unset for the peer
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 -c "$peer" || echo "(no PyTorch peer)"
  for spec in "rmsnorm 8192x768" "rmsnorm_backward 8192x768" "rope 8x1024x12x64" "rope_backward 8x1024x12x64" \
              "swiglu 8192x2048" "swiglu_backward 8192x2048"; do
    set -- $spec
    OMP_WAIT_POLICY=passive "$nnlab" bench "$1" -s "$2" -t 1 2 --repeats 5 2>&1 | grep -E "threads? \(|^  v[0-9]|FAILED" |
      sed "s/^/$1 /"
  done
done
