#!/usr/bin/env bash
# Proves capture on a real GPU: run on the GPU machine from the repository root, with the nsys kit
# (see docs/gpu.md). Writes logs and artefacts to $OUT (default ./gpu-out).
#   scripts/gpu_check.sh          everything below
#   scripts/gpu_check.sh ddp      only the torchrun / DDP captures (one rank per visible GPU)
#   scripts/gpu_check.sh engine   fresh captures read with 1 process and with many workers
#   scripts/gpu_check.sh scale    census of a 10^7-kernel export with 1..16 workers, vs nsys stats
#   scripts/gpu_check.sh ab       census ab on the demo (eager vs compiled, and eager vs eager),
#                                 and what census.steps timing costs the demo (plain vs census arms)
#   scripts/gpu_check.sh ranks    census ab under torchrun: 2 ranks sharing the one GPU (gloo), 8 arms
#   scripts/gpu_check.sh onranks  the engine section (the same census from 1 and many workers), then a
#                                 torchrun capture with --summarize-on-ranks and its rank folder read
#                                 from the ranks' caches and cold
#   scripts/gpu_check.sh pages    the engine section, then the page reader against SQLite's reading
#                                 (CENSUS_READER=sql) on the fresh captures, table by table and
#                                 summary by summary, census's totals beside nsys stats', and a
#                                 10^7-kernel export by worker count, pages and SQL, vs the floor
#   scripts/gpu_check.sh auto     census ab --arms auto on the demo, eager vs compiled, no captures,
#                                 within AUTO_BUDGET (default 7m)
#   scripts/gpu_check.sh demo-size  the demo at GPU-bound sizes, eager vs compiled (plain loops); the
#                                 size compile speeds up most, by census ab (8 arms), and its two
#                                 captures as the bundled samples (sample-{eager,compiled}.sqlite.xz)
#   scripts/gpu_check.sh honest   fresh captures shown at 80 columns: every line fits, busy vs union
#                                 per step, the idle split's law, zero-length kernels, dashboards
#   scripts/gpu_check.sh idle     fresh demo captures: the idle split from the passes against the
#                                 tables read apart and the slow oracle, its law, by worker count;
#                                 and its cost at 10^7 kernels (summary with and without)
#   scripts/gpu_check.sh runahead a GPU-bound loop with no per-step sync (examples/gpu_bound.py),
#                                 eager and compiled, calibrated: census's GPU spans beside nsys's
#                                 nvtx_gpu_proj_trace, and the diff
#   scripts/gpu_check.sh nodes    2 simulated nodes x 2 ranks on the one GPU (tests/helpers/cluster.py:
#                                 each node its own host name; gloo DDP demo): census ab under srun's
#                                 variables with a capture per side (nsys per rank), census capture
#                                 under mpirun's and torchrun --nnodes 2, nsys stats per rank export;
#                                 and examples/host_copies.py captured (its H2D/D2H copies)
#   scripts/gpu_check.sh deepspeed a third-party host-heavy loop (examples/deepspeed_moe.py: HF
#                                 Qwen3-MoE, DeepSpeed ZeRO-1, .device-kit/wheels-ds), eager and
#                                 engine.compile(), calibrated: summaries, diff, exports
#                                 (DS_ARGS="..." adds arguments to the script on both sides)
set -u
SECTION=${1:-all}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT/r"
source .device-kit/nsys-env.sh || exit 1
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 CENSUS_CACHE_DIR=/tmp/census-cache
census() { python3 -m census "$@"; }
P=/tmp/prof
step() { echo; echo "=== $*"; }
capture_demo() {  # $1-eager and $1-compiled under $P
  step "capture the demo, eager and compiled (5 warm-up + 20 steps)"
  local side
  for side in eager compiled; do
    census capture "$1-$side" --demo $side --warmup 5 --active 20 -o $P --force; echo "exit $?"
  done
}
ddp() {
  local n; n=$(python3 -c "import torch; print(torch.cuda.device_count())")
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  step "capture ddp-eager on $n GPU(s) through torchrun"
  census capture ddp-eager --demo ddp-eager --nproc "$n" --warmup 5 --active 10 -o $P; echo "exit $?"
  step "capture ddp-compiled on $n GPU(s) through torchrun"
  census capture ddp-compiled --demo ddp-compiled --nproc "$n" --warmup 5 --active 10 -o $P; echo "exit $?"
  ls -la $P/ddp-eager $P/ddp-compiled; cat $P/ddp-eager/run.json
  step "summary of the rank folder"; census summary $P/ddp-compiled; echo "exit $?"
  step "diff of the rank folders"
  census diff $P/ddp-eager $P/ddp-compiled --labels ddp-eager,ddp-compiled --format markdown; echo "exit $?"
  census summary $P/ddp-eager --json > "$OUT/r/ddp-eager.census.json"
  for f in $P/ddp-eager/rank*.sqlite; do
    nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum -f csv --force-export=false \
      -o "$OUT/r/ddp-eager-$(basename "$f" .sqlite)" "$f" > /dev/null 2>&1; echo "stats $f exit $?"
  done
}
ab() {
  local A=/tmp/prof-ab
  step "census ab: eager vs compiled, 8 arms, with captures"
  /usr/bin/time -f "wall %e s" python3 -m census ab demo --demo eager,compiled -o $A --force \
    --html "$OUT/ab-demo.html"; echo "exit $?"
  census diff $A/demo --format markdown > "$OUT/ab-demo.md"; echo "markdown exit $?"
  census diff $A/demo --format json > "$OUT/ab-demo.json"; echo "json exit $?"
  step "census ab: A/A, eager vs eager, 8 arms, with captures"
  /usr/bin/time -f "wall %e s" python3 -m census ab aa --demo eager,eager -o $A --force; echo "exit $?"
  census diff $A/aa --format json > "$OUT/ab-aa.json"; echo "json exit $?"
  step "what census.steps timing costs: plain loop vs census arms, eager, 8 arms"
  python3 scripts/overhead.py --blocks 16 --steps 20 --out "$OUT/overhead.json"; echo "exit $?"
  tar -cJf "$OUT/ab-captures.tar.xz" -C $A demo aa 2>/dev/null
}
engine() {
  capture_demo eng
  step "the same census from 1 process and from 2, 4, 16 workers with small batches"
  for n in eng-eager eng-compiled; do
    python3 - "$P/$n/capture.sqlite" <<'PY'
import sys
from pathlib import Path
from census.load.finish import compute_census
from census.load.profile import load_profile
from census.store.codec import to_record
path = Path(sys.argv[1])
def rec(workers, batch):
    stages = []
    p = load_profile(path, r"^(step\b|ProfilerStep#)", 0, lambda s, *a: stages.append(s), workers, batch)
    return to_record(compute_census(p)), stages
ref, _ = rec(1, 1 << 40)
t = ref["totals"]
print(path.parent.name, "kernels", t["kernel_count"], "union_ns", t["non_nccl_union_ns"],
      "launch", t["launch_api_count"], t["launch_api_time_ns"], "d2d", t["d2d_count"], t["d2d_bytes"])
for workers, batch in ((2, 97), (4, 1000), (16, 50)):
    got, stages = rec(workers, batch)
    fallback = any("not in start order" in s for s in stages)
    print(f"  workers={workers} batch={batch}: identical={got == ref} fallback={fallback}")
PY
    nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum -f csv --force-export=false \
      -o "$OUT/r/$n" "$P/$n/capture.sqlite" > /dev/null 2>&1; echo "stats $n exit $?"
    census summary $P/$n --json > "$OUT/r/$n.census.json"; echo "summary exit $?"
    xz -T0 -k -c "$P/$n/capture.sqlite" > "$OUT/r/$n.sqlite.xz"
  done
}
scale() {
  step "a 10^7-kernel export (the bundled eager capture, replicated)"
  python3 bench/generate.py --kernels 10000000 -o /tmp/b/eager-1e7.sqlite
  cat /tmp/b/eager-1e7.sqlite > /dev/null
  step "floor and nsys stats"
  python3 - <<'PY'
import sys, time
sys.path.insert(0, "bench")
from pathlib import Path
from run import COLUMNS, floor
print(f"floor {floor(Path('/tmp/b/eager-1e7.sqlite'), COLUMNS):.2f} s")
PY
  TIMEFORMAT="nsys stats %R s wall, %U s user, %S s sys"
  time nsys stats -q -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum \
    -f csv --force-export=false -o /tmp/b/r /tmp/b/eager-1e7.sqlite > /dev/null
  step "census summary --json, cold, by worker count"
  for w in 1 2 4 8 16; do
    TIMEFORMAT="workers=$w %R s wall, %U s user, %S s sys"
    time CENSUS_NO_CACHE=1 CENSUS_WORKERS=$w python3 -m census summary /tmp/b/eager-1e7.sqlite \
      --json > /tmp/b/w$w.json
  done
  for w in 2 4 8 16; do cmp -s /tmp/b/w1.json /tmp/b/w$w.json && echo "workers=$w output identical to 1"; done
}
honest() {
  capture_demo h
  step "summary of the eager capture at 80 columns, with the idle split"
  COLUMNS=80 census summary $P/h-eager --idle | tee "$OUT/h-summary-80.txt"; echo "exit ${PIPESTATUS[0]}"
  step "diff at 80 columns"
  COLUMNS=80 census diff $P/h-eager $P/h-compiled --labels eager,compiled --idle | tee "$OUT/h-diff-80.txt"
  echo "exit ${PIPESTATUS[0]}"
  census diff $P/h-eager $P/h-compiled --labels eager,compiled --html "$OUT/h-diff.html" > /dev/null; echo "html exit $?"
  census dashboard $P/h-eager -o "$OUT/h-eager.html"; echo "dashboard exit $?"
  step "widths, busy vs union per step, the idle law, zero-length kernels, nsys stats kernel counts"
  python3 - "$OUT" $P/h-eager $P/h-compiled <<'PY'
import sqlite3, subprocess, sys
from pathlib import Path
import census
out = Path(sys.argv[1])
for name in ("h-summary-80.txt", "h-diff-80.txt"):
    lines = (out / name).read_text().splitlines()
    print(f"{name}: {len(lines)} lines, widest {max(map(len, lines))} columns")
for folder in map(Path, sys.argv[2:]):
    c = census.summarize(folder, idle=True)
    crossing = [(s.name, s.gpu_busy_ns, s.metrics.non_nccl_union_ns) for s in c.steps
                if s.gpu_busy_ns < s.metrics.non_nccl_union_ns]
    law = all(s.idle.idle_after_sync_ns + s.idle.idle_launch_ns + s.idle.idle_other_ns
              == s.gpu_idle_ns for s in c.steps)
    phase_law = all(sum(p.idle.idle_after_sync_ns + p.idle.idle_launch_ns + p.idle.idle_other_ns
                        for p in s.phases) == s.gpu_idle_ns for s in c.steps)
    db = sqlite3.connect(f"file:{folder}/capture.sqlite?mode=ro", uri=True)
    zero = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end = start").fetchone()[0]
    total = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    print(f"{folder.name}: {len(c.steps)} steps; busy < union in {len(crossing)} "
          f"(first: {crossing[:1]}); idle law per step {law}, over phases {phase_law}; "
          f"kernels {c.totals.kernel_count} (table {total}, zero-length {zero}); "
          f"per step idle split {c.per_step_timing()}")
    r = subprocess.run(["nsys", "stats", "-q", "-r", "cuda_gpu_kern_sum", "-f", "csv", "-o", "-",
                        "--force-export=false", f"{folder}/capture.sqlite"], capture_output=True, text=True)
    rows = [l.split(",") for l in r.stdout.splitlines()[1:] if l.strip()]
    print(f"  nsys stats cuda_gpu_kern_sum instances: {sum(int(x[2].strip('\"')) for x in rows)}")
PY
}
idle() {
  capture_demo idle
  step "the idle split: from the passes (1 process; 2, 4, 16 workers) vs the tables read apart, the oracle, the law"
  for n in idle-eager idle-compiled; do
    python3 - "$P/$n/capture.sqlite" <<'PY'
import sys
from pathlib import Path
from census.load.finish import compute_census
from census.load.profile import load_profile
from census.load.idle import idle_splits, read_timelines
from census.sources import schema as sc
from census.sources.readonly import open_readonly
from tests.oracle import idle_by_range_oracle
path = Path(sys.argv[1])
STEPS, PH = r"^(step\b|ProfilerStep#)", r"^(forward|backward|optimizer)\b"
ref = load_profile(path, STEPS, 0, None, 1, 1 << 40, PH)
conn = open_readonly(path)
tl = read_timelines(conn, sc.read_schema(conn), {s.proc for s in ref.steps})
apart = idle_splits(tl, list(ref.steps), list(ref.segments))
print(path.parent.name, "steps", len(ref.steps), "segments", len(ref.segments))
print("  split equal to the one from the tables read apart:", apart == (ref.step_idle, ref.segment_idle))
oracle = {k: v for k, v in idle_by_range_oracle(path).items() if v}
mine = {k: v for k, v in ref.idle_by_range.items() if v}
print("  idle by range equal to the oracle:", mine == oracle, "largest:",
      sorted(mine.items(), key=lambda kv: -kv[1])[:3])
busy = {s.idx: c.gpu_busy_ns for s, c in zip(ref.steps, compute_census(ref).steps)}
law = all(i.idle_after_sync_ns + i.idle_launch_ns + i.idle_other_ns
          == s.end_ns - s.start_ns - busy.get(s.idx, 0) for s in ref.steps for i in [ref.step_idle[s.idx]])
print("  the law (after sync + launch + other = idle) on every step:", law,
      "; ranges' sum <= idle:", sum(mine.values()) <= sum(s.end_ns - s.start_ns - busy.get(s.idx, 0) for s in ref.steps))
for w, b in ((2, 97), (4, 1000), (16, 50)):
    p = load_profile(path, STEPS, 0, None, w, b, PH)
    same = (p.step_idle, p.segment_idle, p.idle_by_range) == (ref.step_idle, ref.segment_idle, ref.idle_by_range)
    print(f"  workers={w} batch={b}: identical {same}")
PY
    census summary $P/$n | head -12
  done
  step "what the idle split costs at 10^7 kernels here: summary --json with and without, 3 alternating"
  python3 bench/generate.py --kernels 10000000 -o /tmp/b/eager-1e7.sqlite > /dev/null
  cat /tmp/b/eager-1e7.sqlite > /dev/null
  for i in 1 2 3; do
    for f in "" --no-idle; do
      /usr/bin/time -f "summary ${f:-(idle split)}: %e s wall, %M KiB max RSS" env CENSUS_NO_CACHE=1 \
        python3 -m census summary /tmp/b/eager-1e7.sqlite --json $f > /tmp/b/idle$f.json
    done
  done
  python3 -c "import json; a, b = (json.load(open(f)) for f in ('/tmp/b/idle.json', '/tmp/b/idle--no-idle.json')); print('same totals with and without:', a['totals'] == b['totals'])"
}
runahead() {
  local R=/tmp/prof-ra
  for side in eager compiled; do
    local flag=""; [ $side = compiled ] && flag=--compile
    step "capture ra-$side: examples/gpu_bound.py $flag (5 warm-up + 12 steps, calibrated)"
    /usr/bin/time -f "wall %e s" python3 -m census capture ra-$side --warmup 5 --active 12 \
      --calibrate -o $R --force -- python3 examples/gpu_bound.py $flag; echo "exit $?"
    cat $R/ra-$side/run.json
    step "summary of ra-$side"
    COLUMNS=100 census summary $R/ra-$side --all-steps; echo "exit $?"
    census summary $R/ra-$side --json > "$OUT/ra-$side.census.json"
    step "nsys stats nvtx_gpu_proj_trace of ra-$side"
    nsys stats -q -r nvtx_gpu_proj_trace -f csv -o - --force-export=false \
      $R/ra-$side/capture.sqlite > "$OUT/ra-$side.proj.csv" 2>&1; echo "exit $?"
    step "census's GPU spans beside nsys's projection, ra-$side"
    python3 scripts/proj_compare.py $R/ra-$side/capture.sqlite "$OUT/ra-$side.proj.csv"
    xz -T0 -c $R/ra-$side/capture.sqlite > "$OUT/ra-$side.sqlite.xz"
    cp $R/ra-$side/run.json "$OUT/ra-$side.run.json"
  done
  step "diff eager vs compiled"
  COLUMNS=100 census diff $R/ra-eager $R/ra-compiled --labels eager,compiled; echo "exit $?"
  COLUMNS=100 census diff $R/ra-eager $R/ra-compiled --labels eager,compiled --format json \
    > "$OUT/ra-diff.json"
  step "Ctrl-C twice during a real capture (nsys running the loop for 400 steps)"
  python3 -m census capture intr --warmup 5 --active 400 -o $R -- python3 examples/gpu_bound.py &
  local pid=$!
  sleep 25; kill -INT $pid; sleep 0.5; kill -INT $pid; wait $pid; echo "census exit $?"
  sleep 2
  echo "left running: $(pgrep -fc 'examples/gpu_bound.py|nsys profile' || true)"
  ls -a $R
}
nodes() {
  local A=/tmp/prof-nodes B=/tmp/bin-nodes
  local DEMO="python3 -m census.capture.demo.train --ddp --backend gloo --d-model 512 --layers 2 --batch 8 --seq 512"
  python3 tests/helpers/cluster.py --check && echo "namespaces: ok"
  mkdir -p $B && python3 tests/helpers/cluster.py --launchers $B
  export CLUSTER_PRIVATE_TMP=0  # the kit's nsys lives under /tmp: every simulated node keeps it
  step "census ab: 2 nodes x 2 ranks on the one GPU under srun's variables, eager vs compiled, 4 arms, a capture per side"
  /usr/bin/time -f "wall %e s" python3 -m census ab nodes -o $A --force --arms 4 --warmup 5 \
    --active 15 --labels eager,compiled --a "$B/srun $DEMO --mode eager" --b "$B/srun $DEMO --mode compiled"
  echo "exit $?"
  census diff $A/nodes --format json > "$OUT/nodes.json"; echo "json exit $?"
  ls -la $A/nodes $A/nodes/a $A/nodes/b; cat $A/nodes/a/run.json
  cp $A/nodes/ab.json "$OUT/nodes-ab.json"
  step "census capture under mpirun's variables, nsys per rank, --summarize-on-ranks"
  census capture nodes-mpi -o $A --force --warmup 5 --active 10 --summarize-on-ranks -- \
    $B/mpirun $DEMO --mode eager; echo "exit $?"
  ls -la $A/nodes-mpi; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({k: d[k] for k in ('world_size','ranks','hosts','rank_places')}, indent=1))" $A/nodes-mpi/run.json
  step "census capture under torchrun --nnodes 2 (one agent per simulated node)"
  census capture nodes-tr -o $A --force --warmup 5 --active 10 -- $B/torchrun \
    $(python3 -c "import census.capture.demo.train as t; print(t.__file__)") --ddp --backend gloo \
    --d-model 512 --layers 2 --batch 8 --seq 512 --mode eager; echo "exit $?"
  ls -la $A/nodes-tr
  step "census summary of the rank folders (JSON kept), nsys stats per rank export"
  for n in nodes-mpi nodes-tr nodes/a; do
    census summary $A/$n --json > "$OUT/r/$(echo $n | tr / -).census.json"; echo "summary $n exit $?"
    for f in $A/$n/rank*.sqlite; do
      nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum -f csv --force-export=false \
        -o "$OUT/r/$(echo $n | tr / -)-$(basename $f .sqlite)" "$f" > /dev/null 2>&1; echo "stats $n $(basename $f) exit $?"
    done
  done
  census summary $A/nodes-mpi --format markdown; echo "exit $?"
  step "examples/host_copies.py: its H2D and D2H copies, captured"
  census capture copies -o $A --force --warmup 3 --active 10 -- python3 examples/host_copies.py; echo "exit $?"
  cp $A/copies/capture.sqlite /tmp/copies.sqlite && xz -k -9 /tmp/copies.sqlite && cp /tmp/copies.sqlite.xz $A/copies/run.json "$OUT/r/"
  nsys stats -r cuda_gpu_mem_size_sum,cuda_gpu_mem_time_sum -f csv -o "$OUT/r/copies" $A/copies/capture.sqlite > /dev/null 2>&1; echo "stats copies exit $?"
}
ranks() {
  local A=/tmp/prof-ranks
  step "census ab under torchrun: 2 ranks on one GPU (gloo), width 2048 vs 3072, 8 arms, no captures"
  /usr/bin/time -f "wall %e s" python3 -m census ab ranks -o $A --force --no-capture --warmup 5 \
    --active 20 --labels w2048,w3072 --format markdown \
    --a "python3 -m torch.distributed.run --standalone --nproc-per-node 2 examples/ranks_one_gpu.py" \
    --b "python3 -m torch.distributed.run --standalone --nproc-per-node 2 examples/ranks_one_gpu.py --width 3072"
  echo "exit $?"
  census diff $A/ranks --format json > "$OUT/ranks.json"; echo "json exit $?"
  cp $A/ranks/ab.json "$OUT/ranks-ab.json"
}
pages() {
  step "the page reader against SQLite's reading, table by table, on the fresh captures"
  for n in eng-eager eng-compiled; do
    python3 - "$P/$n/capture.sqlite" <<'PY'
import sys
from pathlib import Path
import numpy as np
from census.sqlite import columns as C
from census.sqlite.plan import page_plan
from census.sources import schema as sc
from census.sources.readonly import open_readonly
conn = open_readonly(Path(sys.argv[1]))
schema = sc.read_schema(conn)
reads = {sc.KERNEL: {**C.TIMED, "dev": "deviceId", "proc": "globalPid >> 24", "corr": "correlationId",
                     "dn": "demangledName", "sn": "shortName"},
         sc.RUNTIME: {**C.TIMED, "proc": "globalTid >> 24", "corr": "correlationId", "name": "nameId"},
         sc.MEMCPY: {**C.TIMED, "proc": "globalPid >> 24", "bytes": "bytes", "kind": "copyKind"},
         sc.MEMSET: {**C.TIMED, "proc": "globalPid >> 24", "bytes": "bytes"}}
for table, cols in reads.items():
    if not schema.has(table):
        continue
    rows = C.rowid_range(conn, table)
    plan = page_plan(conn, table, cols, "")
    got = [list(f(conn, table, cols, rows, "", 1000)) for f in (C.read_batches, C._sql_batches)]
    joined = [{k: np.concatenate([b[k] for b, _ in g]) for k in cols} for g in got]
    same = all(np.array_equal(joined[0][k], joined[1][k]) for k in cols)
    print(f"  {Path(sys.argv[1]).parent.name} {table}: {len(joined[1]['start'])} rows, "
          f"read from {'pages' if plan else 'SQL'}, identical to SQLite's: {same}")
PY
    CENSUS_NO_CACHE=1 census summary $P/$n --json > /tmp/pages.json; echo "summary exit $?"
    CENSUS_NO_CACHE=1 CENSUS_READER=sql census summary $P/$n --json > /tmp/sql.json
    cmp -s /tmp/pages.json /tmp/sql.json && echo "  $n summary --json: pages and SQL identical"
    python3 - /tmp/pages.json "$OUT/r/${n}_cuda_gpu_kern_sum.csv" "$OUT/r/${n}_cuda_api_sum.csv" <<'PY'
import csv, json, sys
t = json.load(open(sys.argv[1]))["totals"]
kern = list(csv.DictReader(open(sys.argv[2])))
api = list(csv.DictReader(open(sys.argv[3])))
launch = [r for r in api if "Launch" in r["Name"] and "Graph" not in r["Name"]]
print(f"  census kernels {t['kernel_count']} / {t['kernel_time_ns']} ns; nsys stats "
      f"{sum(int(r['Instances']) for r in kern)} / {sum(int(r['Total Time (ns)']) for r in kern)} ns")
print(f"  census launch API calls {t['launch_api_count']} / {t['launch_api_time_ns']} ns; nsys stats "
      f"{sum(int(r['Num Calls']) for r in launch)} / {sum(int(r['Total Time (ns)']) for r in launch)} ns")
PY
  done
  step "a 10^7-kernel export: census by worker count, pages and SQL, against the floor"
  python3 bench/generate.py --kernels 10000000 -o /tmp/b/eager-1e7.sqlite
  cat /tmp/b/eager-1e7.sqlite > /dev/null
  python3 - <<'PY'
import sys
sys.path.insert(0, "bench")
from pathlib import Path
from run import COLUMNS, floor
print(f"floor {floor(Path('/tmp/b/eager-1e7.sqlite'), COLUMNS):.2f} s")
PY
  for w in 1 2 8 16; do
    for r in pages sql; do
      TIMEFORMAT="workers=$w reader=$r %R s wall, %U s user, %S s sys"
      time CENSUS_NO_CACHE=1 CENSUS_WORKERS=$w CENSUS_READER=$r python3 -m census summary \
        /tmp/b/eager-1e7.sqlite --json > /tmp/b/w$w-$r.json
    done
  done
  for f in /tmp/b/w*.json; do cmp -s /tmp/b/w1-sql.json $f && echo "$(basename $f) identical to w1-sql"; done
}
onranks() {
  local R=/tmp/prof-onr
  step "capture under torchrun, --summarize-on-ranks: 2 ranks sharing the one GPU (gloo)"
  /usr/bin/time -f "wall %e s" python3 -m census capture onr --summarize-on-ranks --warmup 5 \
    --active 10 -o $R --force -- python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
    examples/ranks_one_gpu.py; echo "exit $?"
  ls -la $R/onr; ls -la $CENSUS_CACHE_DIR
  step "census summary of the rank folder: from the caches the ranks wrote"
  /usr/bin/time -f "wall %e s" python3 -m census summary $R/onr --json > "$OUT/onr.json"; echo "exit $?"
  step "the same with an empty cache"
  CENSUS_CACHE_DIR=/tmp/census-cache-empty /usr/bin/time -f "wall %e s" python3 -m census summary \
    $R/onr --json > "$OUT/onr-cold.json"; echo "exit $?"
  cmp "$OUT/onr.json" "$OUT/onr-cold.json" && echo "cached and cold: identical"
  census summary $R/onr | head -40
}
auto() {
  local A=/tmp/prof-auto
  step "census ab --arms auto: the demo, eager vs compiled, --budget ${AUTO_BUDGET:-7m}, no captures"
  /usr/bin/time -f "wall %e s" python3 -m census ab auto --demo eager,compiled -o $A --force \
    --no-capture --arms auto --budget "${AUTO_BUDGET:-7m}" --format markdown; echo "exit $?"
  census diff $A/auto --format json > "$OUT/auto.json"; echo "json exit $?"
  COLUMNS=120 census diff $A/auto; echo "terminal exit $?"
  cp $A/auto/ab.json "$OUT/auto-ab.json"
}
demo_size() {
  local D=/tmp/prof-size best="" bestgain=-1 size mode ms gain
  declare -A step
  for size in "32 1024" "16 1024"; do
    set -- $size
    for mode in eager compiled; do
      python3 -m census.capture.demo.train --plain --mode $mode --batch $1 --seq $2 --warmup 5 \
        --steps 20 --window-out /tmp/w.json > /dev/null 2>&1 || { echo "probe $mode $size failed"; continue; }
      ms=$(python3 -c "import json; w = json.load(open('/tmp/w.json')); print(w['window_ns'] / w['steps'] / 1e6)")
      step[$mode]=$ms; echo "probe batch $1 seq $2 $mode: $ms ms/step (plain loop, one process)"
    done
    gain=$(python3 -c "print(1 - ${step[compiled]} / ${step[eager]})")
    echo "probe batch $1 seq $2: compiled saves $gain of eager's step"
    if python3 -c "import sys; sys.exit(0 if $gain > $bestgain else 1)"; then best=$size; bestgain=$gain; fi
  done
  set -- $best; echo "chosen: batch $1 seq $2"
  local T="python3 -m census.capture.demo.train --batch $1 --seq $2 --warmup 5 --steps 20"
  step "census ab, 8 arms, no captures: demo batch $1 seq $2, eager vs compiled"
  /usr/bin/time -f "wall %e s" python3 -m census ab size -o $D --force --no-capture --warmup 5 \
    --active 20 --labels eager,compiled --format markdown --a "$T --mode eager" \
    --b "$T --mode compiled"; echo "exit $?"
  cp $D/size/ab.json "$OUT/size-ab.json"
  for mode in eager compiled; do
    step "capture sample-$mode (batch $1 seq $2, calibrated)"
    python3 -m census capture sample-$mode --warmup 5 --active 20 --calibrate -o $D --force -- \
      $T --mode $mode; echo "exit $?"
    xz -9 -T0 -c $D/sample-$mode/capture.sqlite > "$OUT/sample-$mode.sqlite.xz"
    cp $D/sample-$mode/run.json "$OUT/sample-$mode.run.json"
  done
  COLUMNS=100 census diff $D/sample-eager $D/sample-compiled --labels eager,compiled | head -30
}
ds_moe() {
  # DS_TAG names this variant's profiles and files (default ds); 3 files back per variant:
  # TAG-diff.json and TAG-{eager,compiled}.sqlite.xz (under 15 MiB), beside log-TAG.txt
  local tag=${DS_TAG:-ds} D=/tmp/prof-ds W=5 N=15 T0=$SECONDS T=$SECONDS side flag size
  ds_lap() { echo "[deepspeed timing] $1: $((SECONDS - T)) s (section so far $((SECONDS - T0)) s)"; T=$SECONDS; }
  rmdir "$OUT/r" 2>/dev/null
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  step "install .device-kit/wheels-ds into /tmp/site (DeepSpeed 0.19.8 and what the image lacks)"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .device-kit/wheels-ds/*.whl; echo "exit $?"
  export PYTHONPATH=/tmp/site:$PYTHONPATH
  python3 -c "from importlib.metadata import version as v
print(*(f'{n} {v(n)}' for n in ('torch', 'transformers', 'deepspeed', 'pydantic', 'pydantic-core',
  'typing-extensions', 'nvtx')), sep=', ')
import deepspeed, deepspeed.utils.nvtx as n
from deepspeed.accelerator import get_accelerator
print('accelerator', get_accelerator()._name, 'enable_nvtx', n.enable_nvtx)"; echo "exit $?"
  ds_lap "install and import check"
  for side in eager compiled; do
    flag=""; [ $side = compiled ] && flag=--compile
    step "capture $tag-$side: examples/deepspeed_moe.py $flag ${DS_ARGS:-} ($W warm-up + $N steps, calibrated)"
    python3 -m census capture $tag-$side --warmup $W --active $N --calibrate -o $D --force -- \
      python3 examples/deepspeed_moe.py $flag ${DS_ARGS:-}; echo "exit $?"
    ds_lap "capture $tag-$side (calibration run + nsys run + export)"
    cat $D/$tag-$side/run.json
  done
  for side in eager compiled; do
    step "summary of $tag-$side (the idle split is on by default)"
    COLUMNS=100 census summary $D/$tag-$side; echo "exit $?"
    step "NVTX ranges in $tag-$side (DeepSpeed's domain included)"
    python3 - $D/$tag-$side/capture.sqlite <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
import collections, re
names = {r[0]: r[1] for r in db.execute("SELECT id, value FROM StringIds")}
domains = dict(db.execute("SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75"))
rows = db.execute("SELECT text, textId, domainId, COUNT(*) FROM NVTX_EVENTS "
                  "WHERE eventType IN (59, 60, 70) GROUP BY text, textId, domainId").fetchall()
count = collections.Counter()
for text, text_id, domain, n in rows:
    text = re.sub(r"^step \d+$", "step N", text or names.get(text_id, "?"))
    count[domains.get(domain, f"domain {domain}"), text] += n
for (domain, text), n in count.most_common(20):
    print(f"  {n:6d}  {domain:>12}  {text}")
PY
  done
  ds_lap "summaries"
  step "diff eager vs compiled"
  COLUMNS=100 census diff $D/$tag-eager $D/$tag-compiled --labels eager,compiled; echo "exit $?"
  census diff $D/$tag-eager $D/$tag-compiled --labels eager,compiled --format json \
    > "$OUT/$tag-diff.json"; echo "json exit $?"
  step "nsys stats of $tag-eager (kernel, API and memory-size reports) beside census's totals"
  nsys stats -q -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum -f csv \
    --force-export=false $D/$tag-eager/capture.sqlite 2>&1 | head -40
  ds_lap "diff and nsys stats"
  step "exports, xz-compressed (returned when under 15 MiB)"
  for side in eager compiled; do
    xz -T0 -c $D/$tag-$side/capture.sqlite > "$OUT/$tag-$side.sqlite.xz"
    size=$(stat -c %s "$OUT/$tag-$side.sqlite.xz")
    echo "$tag-$side: sqlite $(stat -c %s $D/$tag-$side/capture.sqlite) bytes, xz $size bytes"
    [ "$size" -gt $((15 * 1024 * 1024)) ] && rm -f "$OUT/$tag-$side.sqlite.xz" && echo "  too large: not returned"
  done
  ds_lap "xz"
  ls -la "$OUT"
}
if [ "$SECTION" = nodes ]; then
  { nodes; } 2>&1 | tee "$OUT/log-nodes.txt"
  tar -cJf "$OUT/nodes-stats.tar.xz" -C "$OUT" r && rm -rf "$OUT/r"
  exit 0
fi
if [ "$SECTION" = idle ]; then { idle; } 2>&1 | tee "$OUT/log-idle.txt"; exit 0; fi
if [ "$SECTION" = runahead ]; then { runahead; } 2>&1 | tee "$OUT/log.txt"; exit 0; fi
if [ "$SECTION" = deepspeed ]; then { ds_moe; } 2>&1 | tee "$OUT/log-${DS_TAG:-ds}.txt"; exit 0; fi
if [ "$SECTION" = honest ]; then
  { honest; } 2>&1 | tee "$OUT/log.txt"
  tar -cJf "$OUT/h-captures.tar.xz" -C $P h-eager h-compiled 2>/dev/null
  exit 0
fi
if [ "$SECTION" = ab ]; then ab 2>&1 | tee "$OUT/ab-log.txt"; exit 0; fi
if [ "$SECTION" = demo-size ]; then { demo_size; } 2>&1 | tee "$OUT/log-size.txt"; exit 0; fi
if [ "$SECTION" = pages ]; then { engine; pages; } 2>&1 | tee "$OUT/log-pages.txt"; exit 0; fi
if [ "$SECTION" = onranks ]; then { engine; onranks; } 2>&1 | tee "$OUT/log-onranks.txt"; exit 0; fi
if [ "$SECTION" = ranks ] || [ "$SECTION" = auto ]; then
  { $SECTION; } 2>&1 | tee "$OUT/log-$SECTION.txt"; exit 0
fi
if [ "$SECTION" = engine ] || [ "$SECTION" = scale ]; then
  { $SECTION; } 2>&1 | tee "$OUT/log.txt"
  [ -d "$OUT/r" ] && tar -cf "$OUT/engine.tar" -C "$OUT" r && rm -rf "$OUT/r"
  exit 0
fi
if [ "$SECTION" = ddp ]; then
  { ddp; } 2>&1 | tee "$OUT/log.txt"
  tar -cJf "$OUT/captures.tar.xz" -C $P ddp-eager ddp-compiled 2>/dev/null
  tar -cJf "$OUT/stats.tar.xz" -C "$OUT" r && rm -rf "$OUT/r"
  exit 0
fi
{
step "census doctor"; census doctor -o $P; echo "exit $?"
step "capture sample-eager (demo, eager)"
census capture sample-eager --demo eager --warmup 5 --active 20 -o $P; echo "exit $?"
step "capture sample-compiled (demo, compiled)"
census capture sample-compiled --demo compiled --warmup 5 --active 20 -o $P; echo "exit $?"
step "capture of a user script"
census capture user --warmup 3 --active 5 -o $P -- python3 examples/user_train.py; echo "exit $?"
step "diff of the samples (markdown)"
census diff $P/sample-eager $P/sample-compiled --labels eager,compiled --format markdown; echo "exit $?"
for n in sample-eager sample-compiled user; do
  census summary $P/$n --json > "$OUT/r/$n.census.json"
  nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum -f csv --force-export=false \
    -o "$OUT/r/$n" "$P/$n/capture.sqlite" > /dev/null 2>&1; echo "stats $n exit $?"
done
step "nsys stats on the shared fixtures"
for f in .fixtures/*.sqlite; do
  b=$(basename "$f" .sqlite); cp "$f" /tmp/$b.sqlite
  nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum -f csv -o "$OUT/r/$b" /tmp/$b.sqlite > "$OUT/r/$b.log" 2>&1
  echo "stats $b exit $?"
done
step "failure: the program crashes under nsys"
census capture crash -o $P -- python3 -c "import sys; sys.exit(3)"; echo "exit $?"
ddp
step "census demo"
census demo -o /tmp/prof-demo --report /tmp/demo.html; echo "exit $?"
ls -la $P/* /tmp/prof-demo/*
} 2>&1 | tee "$OUT/log.txt"
tar -cJf "$OUT/captures.tar.xz" -C $P sample-eager sample-compiled user ddp-eager ddp-compiled -C /tmp demo.html 2>/dev/null
tar -cJf "$OUT/stats.tar.xz" -C "$OUT" r && rm -rf "$OUT/r"
