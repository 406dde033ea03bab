#!/usr/bin/env bash
# On the GPU machine with the nsys kit (#55, #56): the demo captured by both tracers, eager and
# compiled, with op ranges; summaries compared per step; the diffs' Operations tables; `census ab
# --profiler torch`; and a third-party model (transformers Qwen3-MoE, examples/hf_moe.py) eager
# vs regionally compiled with op ranges.
#   scripts/gpu_proof.sh demo   captures + summaries + diffs of the demo (both tracers)
#   scripts/gpu_proof.sh ab     census ab --profiler torch of the demo
#   scripts/gpu_proof.sh moe    the MoE pair with --ops, its diff
# Writes to $OUT: log-SECTION.txt and the JSON documents.
set -u
SECTION=${1:-demo}
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
source .device-kit/nsys-env.sh || exit 1
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
P=/tmp/proof; mkdir -p $P
C="python3 -m census"
W="--warmup 5 --active 5"
say() { echo; echo "=== $*"; }
case $SECTION in
demo)
  # ordered so that a run cut short still leaves whole pairs: eager by both tracers first
  for mode in eager compiled; do
    cal=$([ $mode = eager ] && echo --calibrate || echo --no-calibrate)
    say "capture $mode nsys --ops $cal"
    $C capture d-$mode-nsys -o $P --demo $mode $W --ops $cal --force 2>&1 | tail -40
    say "capture $mode --profiler torch"
    $C capture d-$mode-torch -o $P --demo $mode $W --profiler torch --no-calibrate --force 2>&1 | tail -40
    for t in nsys torch; do $C summary $P/d-$mode-$t --json > $OUT/summary-d-$mode-$t.json 2>$OUT/summary-d-$mode-$t.err; done
    cp $P/d-$mode-nsys/run.json $OUT/run-d-$mode-nsys.json 2>/dev/null
    say "per step ($mode), nsys against torch.profiler"
    python3 scripts/tracer_pair.py $OUT/summary-d-$mode-{nsys,torch}.json
    $C summary $P/d-$mode-nsys --ops 2>&1 | tail -25
  done
  for t in nsys torch; do
    say "diff eager compiled ($t)"
    COLUMNS=100 $C diff $P/d-eager-$t $P/d-compiled-$t 2>&1 | head -120
    $C diff $P/d-eager-$t $P/d-compiled-$t --json > $OUT/diff-d-$t.json 2>/dev/null
  done
  say "Operations: nsys against torch.profiler"
  python3 scripts/tracer_pair.py --ops $OUT/diff-d-nsys.json $OUT/diff-d-torch.json
  say "diff nsys eager vs torch eager (tracers differ)"
  $C diff $P/d-eager-nsys $P/d-eager-torch 2>&1 | head -12
  ls -la $P/d-compiled-nsys $P/d-compiled-torch
  for f in $P/d-*/*.sqlite; do xz -T4 -6 -c $f > $OUT/$(basename $(dirname $f)).sqlite.xz; done
  for d in $P/d-*-torch; do cp $d/capture.pt.trace.json.gz $OUT/$(basename $d).pt.trace.json.gz 2>/dev/null; done
  cp $P/d-compiled-nsys/inductor_map.json $OUT/ 2>/dev/null
  ;;
ab)
  say "census ab --profiler torch"
  $C ab ab-torch -o $P --demo eager,compiled --profiler torch --arms 4 $W --force 2>&1 | tail -60
  ;;
moe)
  for side in eager compiled; do
    flag=$([ $side = compiled ] && echo --compile)
    say "moe $side --ops"
    $C capture moe-$side -o $P $W --ops --force -- python3 examples/hf_moe.py $flag 2>&1 | tail -20
  done
  say "diff moe"
  $C diff $P/moe-eager $P/moe-compiled 2>&1 | head -120
  $C diff $P/moe-eager $P/moe-compiled --json > $OUT/diff-moe.json 2>/dev/null
  $C summary $P/moe-compiled --json > $OUT/summary-moe-compiled.json 2>/dev/null
  ls $P/moe-compiled
  ;;
esac
