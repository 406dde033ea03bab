#!/usr/bin/env bash
# Issue #58's capture matrix, on the GPU machine, from the repository root with the nsys kit:
#   scripts/gpu_matrix.sh                 every mode, the most telling first, until DEADLINE (s)
#   ONLY="osrt backtrace" scripts/gpu_matrix.sh   those modes alone (plain and graph-node are
#                                         the references: name them too)
# One small training loop (the demo, eager, small sizes; examples/graph_loop.py, whose steps replay
# CUDA graphs; examples/loader_loop.py, fed by DataLoader workers) captured with each way nsys is
# commonly run; `census summary --json` of each export beside its plain capture's (the table
# printed last). Writes to $OUT: log-matrix.txt, matrix-exports.tar.xz (the .sqlite exports and
# the one .nsys-rep exported later), matrix-results.tar.xz (manifest.tsv: mode, then the nsys
# command line; each mode's census JSON, table, stderr and nsys log; nsys stats CSVs).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
source .device-kit/nsys-env.sh || exit 1
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 CENSUS_CACHE_DIR=/tmp/census-cache-matrix
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
M=/tmp/matrix
rm -rf $M && mkdir -p $M/x $M/r
DEADLINE=${DEADLINE:-420}  # seconds: modes not started by then are skipped (the packing follows)
SIZES="--d-model 256 --layers 2 --batch 4 --seq 128"
DEMO="python3 -m census.capture.demo.train --mode eager --warmup 3 --steps 5 $SIZES"
DDP="python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m census.capture.demo.train --ddp --backend gloo --mode eager --warmup 3 --steps 5 $SIZES"
GRAPH="python3 examples/graph_loop.py --warmup 3 --steps 5 --d 512 --layers 4 --batch 256"
LOADER="python3 examples/loader_loop.py --warmup 3 --steps 5 --workers 2"
QUIET="--sample=none --cpuctxsw=none"
census() { python3 -m census "$@"; }
step() { echo; echo "=== $*"; }

summarize() {  # NAME PROFILE: census summary --json and the table, exit codes, stderr
  local name=$1 profile=$2 rc
  census summary "$profile" --json > $M/r/$name.json 2> $M/r/$name.err; rc=$?
  echo "$rc" > $M/r/$name.census-rc
  echo "census summary --json exit $rc"
  [ -s $M/r/$name.err ] && head -c 1500 $M/r/$name.err
  COLUMNS=100 census summary "$profile" > $M/r/$name.txt 2>&1; echo "census summary (table) exit $?"
}

stats() {  # NAME: nsys stats (kernels, API, memory sizes) of its export, CSV and the log's view
  [ -f $M/x/$1.sqlite ] || return
  nsys stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_size_sum -f csv --force-export=false \
    -o $M/r/stats-$1 $M/x/$1.sqlite > /dev/null 2>&1; echo "nsys stats $1 exit $?"
  python3 - $M/r/stats-$1 <<'PY'
import csv, sys
base = sys.argv[1]
def rows(report):
    try:
        return list(csv.DictReader(open(f"{base}_{report}.csv")))
    except OSError:
        return []
kern, api, mem = rows("cuda_gpu_kern_sum"), rows("cuda_api_sum"), rows("cuda_gpu_mem_size_sum")
launch = [r for r in api if "Launch" in r["Name"]]
print(f"  kernels {sum(int(r['Instances']) for r in kern)} in {len(kern)} names; "
      f"launch-like API calls: " + ", ".join(f"{r['Name']} {r['Num Calls']}" for r in launch))
print("  memory: " + ", ".join(f"{r['Operation']} {r['Count']} x {r['Total (MB)']} MB" for r in mem))
PY
}

only() {  # whether mode $1 runs: all of them, or those named in $ONLY (a later call's rerun)
  [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]
}

cap() {  # NAME REF WORKLOAD "NSYS FLAGS": nsys profile ... --export=sqlite, then census
  local name=$1 ref=$2 work=$3 flags=$4 cmd rc t0
  only "$name" || return 0
  if [ $SECONDS -gt "$DEADLINE" ]; then step "$name: skipped (past ${DEADLINE} s)"; return; fi
  cmd="nsys profile $flags --force-overwrite=true --export=sqlite -o $M/x/$name $work"
  printf '%s\t%s\t%s\n' "$name" "$ref" "$cmd" >> $M/r/manifest.tsv
  step "$name: $cmd"
  t0=$SECONDS
  eval "timeout 150 $cmd" > $M/r/$name.nsys.log 2>&1; rc=$?
  echo "$rc" > $M/r/$name.nsys-rc
  echo "nsys exit $rc ($((SECONDS - t0)) s)"; grep -v "^$" $M/r/$name.nsys.log | tail -n 6
  if [ -f $M/x/$name.sqlite ]; then summarize "$name" $M/x/$name.sqlite; else echo "no export"; fi
}

census_ref() {  # census capture of the demo: census's own nsys command
  only census || return 0
  step "census capture of the demo (census's own nsys command), for reference"
  printf '%s\t%s\t%s\n' census plain "census capture census --warmup 3 --active 5 -- $DEMO" >> $M/r/manifest.tsv
  census capture census -o $M/cc --force --warmup 3 --active 5 -- $DEMO > $M/r/census.capture.log 2>&1
  echo "$?" > $M/r/census.nsys-rc; echo "census capture exit $(cat $M/r/census.nsys-rc)"
  tail -n 4 $M/r/census.capture.log
  [ -f $M/cc/census/run.json ] && python3 -c "import json, sys; print('nsys command:', ' '.join(json.load(open(sys.argv[1]))['nsys_command']))" $M/cc/census/run.json
  [ -f $M/cc/census/capture.sqlite ] && cp $M/cc/census/capture.sqlite $M/x/census.sqlite && summarize census $M/x/census.sqlite
}

later() {  # exported later, apart from the capture: no --export, then nsys export; and the .nsys-rep given to census
  only later || return 0
  if [ $SECONDS -gt "$DEADLINE" ]; then step "later: skipped (past ${DEADLINE} s)"; return; fi
  local cmd="nsys profile -t cuda,nvtx $QUIET --force-overwrite=true -o $M/x/later $DEMO"
  printf '%s\t%s\t%s\n' later plain "$cmd; nsys export --type sqlite -o $M/x/later.sqlite $M/x/later.nsys-rep" >> $M/r/manifest.tsv
  step "later: $cmd"
  timeout 150 $cmd > $M/r/later.nsys.log 2>&1; echo "nsys profile exit $?"; ls $M/x/later*
  nsys export --type sqlite --force-overwrite=true -o $M/x/later.sqlite $M/x/later.nsys-rep \
    >> $M/r/later.nsys.log 2>&1; echo "$?" > $M/r/later.nsys-rc; echo "nsys export exit $(cat $M/r/later.nsys-rc)"
  summarize later $M/x/later.sqlite
  printf '%s\t%s\t%s\n' later-rep plain "census summary $M/x/later.nsys-rep (census runs nsys export)" >> $M/r/manifest.tsv
  step "later-rep: census summary of the .nsys-rep itself"
  cp $M/x/later.nsys-rep $M/x/later2.nsys-rep && echo 0 > $M/r/later-rep.nsys-rc
  summarize later-rep $M/x/later2.nsys-rep; ls $M/x/later2*
}

modes() {  # the most telling first: a DEADLINE cut leaves the rest for a later call (ONLY=...)
  census_ref
  cap plain plain "$DEMO" "-t cuda,nvtx $QUIET"
  cap graph-node graph-node "$GRAPH" "-t cuda,nvtx $QUIET --cuda-graph-trace=node"
  cap graph-graph graph-node "$GRAPH" "-t cuda,nvtx $QUIET --cuda-graph-trace=graph"
  cap graph-defaults graph-node "$GRAPH" ""
  cap cuda-only plain "$DEMO" "-t cuda $QUIET"
  cap defaults plain "$DEMO" ""
  cap range-api plain "$DEMO" "-t cuda,nvtx $QUIET --capture-range=cudaProfilerApi"
  NSYS_NVTX_PROFILER_REGISTER_ONLY=0 cap range-nvtx plain "$DEMO" \
    "-t cuda,nvtx $QUIET --capture-range=nvtx --nvtx-capture='step 3@census'"
  NSYS_NVTX_PROFILER_REGISTER_ONLY=0 cap range-nvtx-on plain "$DEMO" \
    "-t cuda,nvtx $QUIET --capture-range=nvtx --nvtx-capture='step 3@census' --capture-range-end=none"
  later
  cap ddp-gloo plain "$DDP" "-t cuda,nvtx $QUIET"
  cap loader loader "$LOADER" "-t cuda,nvtx $QUIET"
  cap loader-fork loader "$LOADER" "-t cuda,nvtx $QUIET --trace-fork-before-exec=true"
  cap osrt plain "$DEMO" "-t cuda,nvtx,osrt $QUIET"
  cap backtrace plain "$DEMO" "-t cuda,nvtx --cudabacktrace=all"
  cap memusage plain "$DEMO" "-t cuda,nvtx $QUIET --cuda-memory-usage=true"
  cap sample-cpu plain "$DEMO" "-t cuda,nvtx --sample=cpu --cpuctxsw=none"
}

compare() {
  step "the table: each mode against its plain capture (per step: means over the steps found)"
  python3 scripts/matrix_table.py $M/r
}

{
  echo "nsys: $(nsys --version)"; python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
  modes
  step "nsys stats of the plain and the graph-traced captures"
  for n in plain census graph-node graph-graph graph-defaults; do stats $n; done
  step "the tables census printed, per mode (first 14 lines each)"
  for f in $M/r/*.txt; do echo "--- $(basename $f .txt)"; head -n 14 $f; done
  step "sizes"; du -b $M/x/* | sort -k2
  step "headlines"
  for f in $M/r/*.txt; do echo "$(basename $f .txt): $(head -n 1 $f)"; done
  compare
} 2>&1 | tee "$OUT/log-matrix.txt"
tar -cJf "$OUT/matrix-results.tar.xz" -C $M r
rm -f $M/x/later2.*  # the copy census summarized: the same report as later.nsys-rep
# the reports of the other modes stay behind: their .sqlite exports hold what census reads
find $M/x -name '*.nsys-rep' ! -name 'later.nsys-rep' ! -name 'graph-*.nsys-rep' -delete
tar -cf - -C $M x | xz -T0 -6 > "$OUT/matrix-exports.tar.xz"
ls -la "$OUT"
