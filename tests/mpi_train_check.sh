#!/usr/bin/env bash
# tests/mpi_train_check.sh MPIEXEC NNLAB: data-parallel training under mpirun (lesson 14), end to end.
#   1. 2 ranks (ring all-reduce) train the same steps as 1 process with --grad-accum 2: the
#      evaluations agree to 1e-4 and every step's loss to 1e-5 (rounding: the sums' order differs);
#   2. that run resumes under 3 ranks, then as one process: a checkpoint holds no rank count;
#   3. a rank that fails (a new run into an out-dir with checkpoints) stops all ranks with the
#      error and a non-zero status, instead of leaving the others waiting in an all-reduce;
#   4. ranks started with different flags (rank 1 another --lr) are refused at the start;
#   5. ZeRO-1 (--zero 1: the AdamW moments sharded) trains like the ring all-reduce run of 1.
#      (the same steps to 1e-6) and its checkpoint (moments gathered from the shards) holds the
#      same weights and moments; it resumes as one process and re-sharded under 3 ranks;
#   6. activation recomputation (--recompute) under 2 ranks trains like storing (to 1e-5: the
#      stored run's forward fuses residual and LayerNorm, which rounds differently).
# Prints "mpi train: passed" on success.
set -euo pipefail
mpiexec=$1 nnlab=$2
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
args=(--n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4 --eval-interval 10 --eval-iters 2 --threads 1)
"$nnlab" gpt train "${args[@]}" --max-iters 20 --grad-accum 2 --out-dir "$dir/one" > "$dir/one.txt"
"$mpiexec" -n 2 "$nnlab" gpt train "${args[@]}" --max-iters 20 --allreduce ring --out-dir "$dir/two" > "$dir/two.txt"
grep -q "data parallel: 2 ranks" "$dir/two.txt" || { echo "FAIL: the 2-rank run did not say it ran data parallel"; cat "$dir/two.txt"; exit 1; }
python3 - "$dir/one/log.jsonl" "$dir/two/log.jsonl" <<'PY'
import json, sys
def recs(p, split): return [json.loads(l) for l in open(p) if json.loads(l).get("split") == split]
one, two = sys.argv[1:]
a, b = recs(one, "train"), recs(two, "train")
assert len(a) == len(b) == 20, (len(a), len(b))
worst = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b))
ea, eb = recs(one, "eval"), recs(two, "eval")
ev = max(abs(x["val_loss"] - y["val_loss"]) for x, y in zip(ea, eb))
print(f"2 ranks vs 1 process with --grad-accum 2: step losses within {worst:.2g}, val losses within {ev:.2g}")
assert worst <= 1e-5 and ev <= 1e-4, "the data-parallel run does not train like one process"
PY
"$mpiexec" -n 3 "$nnlab" gpt train "${args[@]}" --max-iters 30 --resume "$dir/two/last.safetensors" --out-dir "$dir/two" > "$dir/three.txt"
grep -q "resumed .* at step 20" "$dir/three.txt" && grep -q "data parallel: 3 ranks" "$dir/three.txt" || { echo "FAIL: resume under 3 ranks"; cat "$dir/three.txt"; exit 1; }
"$nnlab" gpt train "${args[@]}" --max-iters 40 --resume "$dir/two/last.safetensors" --out-dir "$dir/two" > "$dir/back.txt"
grep -q "resumed .* at step 30" "$dir/back.txt" || { echo "FAIL: resume as one process"; cat "$dir/back.txt"; exit 1; }
set +e
timeout 60 "$mpiexec" -n 2 "$nnlab" gpt train "${args[@]}" --max-iters 5 --out-dir "$dir/two" > "$dir/fail.txt" 2>&1
status=$?
set -e
[[ $status -ne 0 && $status -ne 124 ]] && grep -q "already holds" "$dir/fail.txt" || { echo "FAIL: a failing rank (status $status)"; cat "$dir/fail.txt"; exit 1; }
echo "a failing rank stops all ranks: status $status, the error printed"
set +e
timeout 60 "$mpiexec" -n 2 bash -c 'extra=(); [[ ${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}} == 1 ]] && extra=(--lr 2e-3)
  exec "$0" gpt train "$@" "${extra[@]}"' "$nnlab" "${args[@]}" --max-iters 5 --out-dir "$dir/mismatch" > "$dir/mismatch.txt" 2>&1
status=$?
set -e
[[ $status -ne 0 && $status -ne 124 ]] && grep -q "rank 1 started with another" "$dir/mismatch.txt" &&
  [[ ! -e $dir/mismatch/last.safetensors ]] || { echo "FAIL: mismatched ranks (status $status)"; cat "$dir/mismatch.txt"; exit 1; }
echo "ranks started with different flags are refused: status $status"
"$mpiexec" -n 2 "$nnlab" gpt train "${args[@]}" --max-iters 20 --allreduce ring --out-dir "$dir/plain" > "$dir/plain.txt"
"$mpiexec" -n 2 "$nnlab" gpt train "${args[@]}" --max-iters 20 --zero 1 --out-dir "$dir/zero" > "$dir/zero.txt"
grep -q "ZeRO-1" "$dir/zero.txt" || { echo "FAIL: the --zero 1 run did not say it sharded"; cat "$dir/zero.txt"; exit 1; }
"$mpiexec" -n 2 "$nnlab" gpt train "${args[@]}" --max-iters 20 --recompute --out-dir "$dir/recompute" > "$dir/recompute.txt"
grep -q "activation recomputation" "$dir/recompute.txt" || { echo "FAIL: --recompute not reported"; cat "$dir/recompute.txt"; exit 1; }
python3 - "$dir" <<'PY'
import json, struct, sys, array
d = sys.argv[1]
def recs(p, split): return [json.loads(l) for l in open(p) if json.loads(l).get("split") == split]
def worst(a, b): return max(abs(x["loss"] - y["loss"]) for x, y in zip(recs(a, "train"), recs(b, "train")))
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__": continue
        a, b = v["data_offsets"]
        out[k] = array.array("f", raw[8 + n + a:8 + n + b])
    return out
z = worst(f"{d}/plain/log.jsonl", f"{d}/zero/log.jsonl")
r = worst(f"{d}/plain/log.jsonl", f"{d}/recompute/log.jsonl")
tp, tz = tensors(f"{d}/plain/last.safetensors"), tensors(f"{d}/zero/last.safetensors")
assert sorted(tp) == sorted(tz) and any(k.startswith("adam.v.") for k in tz), "ZeRO-1's checkpoint lacks tensors"
dw = max(max(abs(x - y) for x, y in zip(tp[k], tz[k])) for k in tp if not k.startswith("adam."))
dm = max(max(abs(x - y) for x, y in zip(tp[k], tz[k])) for k in tp if k.startswith("adam.m."))
print(f"ZeRO-1 vs ring on 2 ranks: step losses within {z:.2g}, weights within {dw:.2g}, first moments within {dm:.2g}")
print(f"recomputation vs storing on 2 ranks: step losses within {r:.2g}")
assert z <= 1e-6 and dw <= 1e-6 and dm <= 1e-6, "ZeRO-1 does not train like the ring all-reduce"
assert r <= 1e-5, "recomputation does not train like storing"
PY
"$nnlab" gpt train "${args[@]}" --max-iters 30 --resume "$dir/zero/last.safetensors" --out-dir "$dir/zero" > "$dir/zero1.txt"
grep -q "resumed .* at step 20" "$dir/zero1.txt" || { echo "FAIL: ZeRO-1's checkpoint resumed as one process"; cat "$dir/zero1.txt"; exit 1; }
"$mpiexec" -n 3 "$nnlab" gpt train "${args[@]}" --max-iters 40 --zero 1 --resume "$dir/zero/last.safetensors" --out-dir "$dir/zero" > "$dir/zero3.txt"
grep -q "resumed .* at step 30" "$dir/zero3.txt" && grep -q "ZeRO-1" "$dir/zero3.txt" || { echo "FAIL: resume re-sharded under 3 ranks"; cat "$dir/zero3.txt"; exit 1; }
echo "ZeRO-1's checkpoint resumes as one process and re-sharded under 3 ranks"
echo "mpi train: passed"
