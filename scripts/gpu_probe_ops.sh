#!/usr/bin/env bash
# On the GPU machine with the nsys kit: real nsys exports WITH op ranges (#56) and the first
# capture of a third-party model (transformers Qwen3-MoE, examples/hf_moe.py), eager and
# regionally compiled. Writes to $OUT: log.txt, the exports (xz), census's summaries and diffs.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
source .device-kit/nsys-env.sh || exit 1
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
P=/tmp/probe; mkdir -p $P
NSYS="nsys profile --trace=cuda,nvtx --cuda-graph-trace=node --capture-range=cudaProfilerApi --capture-range-end=stop --sample=none --cpuctxsw=none --force-overwrite=true --export=sqlite"
echo "=== versions"; nsys --version; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
echo "=== nsys profile --help (pytorch)"; nsys profile --help | grep -i -B2 -A14 -- "--pytorch" | head -40
nsys export --help > $OUT/nsys-export-help.txt 2>&1
for side in eager compiled; do
  flag=$([ $side = compiled ] && echo --compile)
  echo "=== moe $side, emit_nvtx under nsys"
  CENSUS_WARMUP=5 CENSUS_ACTIVE=3 timeout 200 $NSYS -o $P/moe-$side-emit python3 scripts/emit_nvtx_run.py examples/hf_moe.py $flag 2>&1 | tail -3
  echo "=== moe $side, census capture (no op ranges)"
  timeout 250 python3 -m census capture moe-$side -o $P/caps --warmup 5 --active 3 --force -- python3 examples/hf_moe.py $flag 2>&1 | tail -25
done
echo "=== census diff moe"
python3 -m census diff $P/caps/moe-eager $P/caps/moe-compiled 2>&1 | head -80
python3 -m census diff $P/caps/moe-eager $P/caps/moe-compiled --json > $OUT/moe-diff.json 2>/dev/null
DEMO="--d-model 512 --layers 2 --batch 4 --seq 256"
for mode in eager compiled; do
  [ $SECONDS -gt 380 ] && { echo "skip demo $mode (time)"; continue; }
  echo "=== demo $mode, emit_nvtx"
  CENSUS_WARMUP=5 CENSUS_ACTIVE=3 timeout 150 $NSYS -o $P/demo-$mode-emit python3 scripts/emit_nvtx_run.py -m census.capture.demo.train --mode $mode --warmup 5 --steps 3 $DEMO 2>&1 | tail -3
  [ $mode = compiled ] && continue
  echo "=== demo $mode, nsys --pytorch=autograd-nvtx"
  CENSUS_WARMUP=5 CENSUS_ACTIVE=3 timeout 150 $NSYS --pytorch=autograd-nvtx -o $P/demo-$mode-pt python3 -m census.capture.demo.train --mode $mode --warmup 5 --steps 3 $DEMO 2>&1 | tail -3
done
for f in $P/*.sqlite; do
  n=$(basename $f .sqlite)
  echo "=== $n: $(python3 - $f <<'PY'
import sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
k = c.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
try:
    n = c.execute("select count(*) from NVTX_EVENTS").fetchone()[0]
    ex = c.execute("select coalesce(e.text, s.value) from NVTX_EVENTS e left join StringIds s on e.textId = s.id where coalesce(e.text, s.value) like 'aten::%' limit 3").fetchall()
    bw = c.execute("select coalesce(e.text, s.value) from NVTX_EVENTS e left join StringIds s on e.textId = s.id where coalesce(e.text, s.value) like '%Backward%' limit 3").fetchall()
except Exception as e:
    n, ex, bw = str(e), [], []
print(f"kernels {k}, nvtx {n}, aten e.g. {ex}, backward e.g. {bw}")
PY
)"
  xz -T2 -6 -c $f > $OUT/$n.sqlite.xz
done
ls -la $OUT
