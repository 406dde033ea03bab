#!/usr/bin/env bash
# Issue #57 step 1, on the GPU machine, from the repository root with the nsys kit: the capture
# pipeline of a >= 10^6-kernel demo capture timed stage by stage, several runs.
#   scripts/gpu_pipeline.sh stages  per run (RUNS, default 3, interleaved so that a run cut short
#                                   by the DEADLINE still leaves whole earlier runs): the program
#                                   uncaptured; captured by nsys profile (census's flags, no
#                                   --export; nsys's post-processing = its exit - the program's);
#                                   nsys export to sqlite, arrowdir, parquetdir (wall, CPU, size);
#                                   census summary --json of the SQLite (cold cache); pyarrow's
#                                   read of the kernel table from the columnar exports
#   scripts/gpu_pipeline.sh e2e     census capture end to end (program exit -> printed verdict),
#                                   RUNS times; the columnar exports of the shared fixtures'
#                                   .nsys-rep files, copied into the tree for the run only:
#                                   mkdir -p tests/data/columnar/src && cp ../shared/fixtures/nsys/
#                                   h200_{eager,compiled}_3steps.nsys-rep tests/data/columnar/src/
#   scripts/gpu_pipeline.sh after   step 3 (#57): `census ab` of the demo against itself, B's capture
#                                   program's exit to the printed verdict, per run (RUNS) once
#                                   overlapped (A exported beside B's program, A read beside B's
#                                   export: census.capture.overlap) and once serial
#                                   (CENSUS_AB_OVERLAP=0, each side exported by nsys profile as it
#                                   ends, as before), interleaved; the arms run 20 steps (only
#                                   their protocol is needed), the captures STEPS (default 4400:
#                                   about 1.0 million kernels at 231 a step,
#                                   >= 10^6); each side's captured mean step time (A's export
#                                   beside B's program must not slow it); the export options
#                                   census would pin (EXPORT_PINNED) against a plain export of
#                                   the same report (the same tables and rows, and the time).
#                                   One run is about 3 min a mode: RUNS=1 per call, three calls,
#                                   to stay inside 10 minutes a call.
# Writes to $OUT: log-SECTION.txt, times-SECTION.tsv, and for e2e columnar-fixtures.tar.xz.
set -u
SECTION=${1:-stages}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
source .device-kit/nsys-env.sh || exit 1
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
RUNS=${RUNS:-3}
DEADLINE=${DEADLINE:-500}  # seconds: no new stage starts after this
AFTER_STEPS=${STEPS:-4400}  # the after mode's captures: >= 10^6 kernels
STEPS=${STEPS:-3600}
SIZES="--d-model 256 --layers 4 --batch 4 --seq 256"
PROG=${PROG:-"python3 -m census.capture.demo.train --mode eager --warmup 5 --steps $STEPS $SIZES"}
NSYS_FLAGS="--trace=cuda,nvtx --cuda-graph-trace=node --capture-range=cudaProfilerApi --capture-range-end=stop --sample=none --cpuctxsw=none --force-overwrite=true"
P=/tmp/pipe
T="$OUT/times-$SECTION.tsv"
mkdir -p $P
step() { echo; echo "=== $*"; }
now() { date +%s.%N; }
late() { [ $SECONDS -gt "$DEADLINE" ] && { echo "skipped (past ${DEADLINE} s): $*"; return 0; }; return 1; }
# timed STAGE RUN SIZE_PATH CMD...: wall, user, sys (the command and its children), max RSS
timed() {
  local stage=$1 run=$2 sized=$3 rc size; shift 3
  /usr/bin/time -f "%e %U %S %M" -o $P/time.txt "$@" > $P/$stage-$run.log 2> $P/$stage-$run.err; rc=$?
  size=$( [ -e "$sized" ] && du -sb "$sized" | cut -f1 || echo 0)
  read -r wall user sys rss < $P/time.txt
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$stage" "$run" "$wall" "$user" "$sys" "$rss" "$size" "$rc" >> "$T"
  echo "$stage run $run: exit $rc, wall $wall s, user $user s, sys $sys s, max RSS $rss KiB, size $size B"
  [ $rc -ne 0 ] && tail -n 5 $P/$stage-$run.log $P/$stage-$run.err
  return $rc
}
record() { printf '%s\t%s\t%s\t\t\t\t\t0\n' "$1" "$2" "$3" >> "$T"; echo "$1 run $2: $3 s"; }

kernel_table_read() {  # RUN: pyarrow's read of the kernel table's columns from the columnar exports
  python3 - $P/rep$1 <<'PY'
import sys, time
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq, pyarrow.ipc as ipc
base = sys.argv[1]
for kind, ext in (("arrowdir", "arrow"), ("parquetdir", "parquet")):
    d = Path(f"{base}-{kind}")
    files = sorted(d.glob(f"*KERNEL*.{ext}")) or sorted(d.glob(f"*KERNEL*"))
    if not files:
        print(f"{kind}: no kernel table among {sorted(p.name for p in d.iterdir())[:8]}")
        continue
    t0 = time.perf_counter()
    if ext == "parquet":
        table = pq.read_table(files[0])
    else:
        try:
            table = ipc.open_file(files[0]).read_all()
        except pa.ArrowInvalid:
            table = ipc.open_stream(files[0]).read_all()
    dt = time.perf_counter() - t0
    print(f"{kind}: {files[0].name}: {table.num_rows} rows, {table.num_columns} columns, "
          f"read whole in {dt:.3f} s")
    print(f"pyarrow-read-{kind}\t{dt:.3f}")
PY
}

stages() {
  step "nsys export --help (which types this nsys writes)"
  nsys export --help 2>&1 | tee $P/export-help.txt | head -n 80
  python3 -c "import pyarrow; print('pyarrow', pyarrow.__version__)"
  local r prog_end nsys_end
  for r in $(seq 1 "$RUNS"); do
    step "run $r of $RUNS"
    late "uncaptured $r" || timed uncaptured $r - $PROG --window-out $P/win-u$r.json
    [ -f $P/win-u$r.json ] && record uncaptured-window $r "$(python3 -c "import json; w = json.load(open('$P/win-u$r.json')); print(w['window_ns'] / 1e9)")"
    if ! late "captured $r"; then
      rm -f $P/end$r
      timed nsys-profile $r $P/rep$r.nsys-rep nsys profile $NSYS_FLAGS -o $P/rep$r \
        sh -c "date +%s.%N > $P/start$r; $PROG --window-out $P/win-c$r.json; date +%s.%N > $P/end$r"
      nsys_end=$(now)
      if [ -f $P/end$r ]; then
        record program-captured $r "$(python3 -c "print(round($(cat $P/end$r) - $(cat $P/start$r), 3))")"
        record captured-window $r "$(python3 -c "import json; w = json.load(open('$P/win-c$r.json')); print(w['window_ns'] / 1e9)")"
        record nsys-postprocess $r "$(python3 -c "print(round($nsys_end - $(cat $P/end$r), 3))")"
      fi
    fi
    [ -f $P/rep$r.nsys-rep ] || continue
    late "export sqlite $r" || timed export-sqlite $r $P/rep$r.sqlite nsys export --type sqlite \
      --force-overwrite=true -o $P/rep$r.sqlite $P/rep$r.nsys-rep
    late "export arrowdir $r" || timed export-arrowdir $r $P/rep$r-arrowdir nsys export --type arrowdir \
      --force-overwrite=true -o $P/rep$r-arrowdir $P/rep$r.nsys-rep
    late "export parquetdir $r" || timed export-parquetdir $r $P/rep$r-parquetdir nsys export \
      --type parquetdir --force-overwrite=true -o $P/rep$r-parquetdir $P/rep$r.nsys-rep
    if [ -f $P/rep$r.sqlite ] && ! late "census read $r"; then
      rm -rf $P/cache$r
      CENSUS_CACHE_DIR=$P/cache$r timed census-read-sqlite $r - python3 -m census summary \
        $P/rep$r.sqlite --json
      cp $P/census-read-sqlite-$r.log $P/summary$r.json
      python3 -c "import json; t = json.load(open('$P/summary$r.json'))['totals']; print('  census:', t['kernel_count'], 'kernels,', t['launch_api_count'], 'launches,', t['d2d_count'], 'd2d')"
      python3 -c "import sqlite3; c = sqlite3.connect('file:$P/rep$r.sqlite?mode=ro', uri=True); print('  SELECT COUNT(*) kernel table:', c.execute('SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0])"
    fi
    late "pyarrow read $r" || kernel_table_read $r | tee $P/pa$r.txt
    grep '^pyarrow-read' $P/pa$r.txt 2>/dev/null | while IFS=$'\t' read -r k v; do record "$k" $r "$v"; done
    if [ "$r" = 1 ]; then
      step "the columnar exports' files and the kernel table's schema"
      ls -la $P/rep1-arrowdir $P/rep1-parquetdir 2>&1 | head -n 120
      python3 - $P/rep1 <<'PY'
import sys
from pathlib import Path
import pyarrow.parquet as pq, pyarrow.ipc as ipc
base = sys.argv[1]
for f in sorted(Path(f"{base}-parquetdir").glob("*KERNEL*")):
    print(f"--- {f.name} (parquet)"); print(pq.read_schema(f))
    print(pq.ParquetFile(f).metadata)
for f in sorted(Path(f"{base}-arrowdir").glob("*KERNEL*")):
    print(f"--- {f.name} (arrow)")
    try:
        print(ipc.open_file(f).schema)
    except Exception as exc:
        print(ipc.open_stream(f).schema, f"(stream; file: {exc})")
PY
      du -sb $P/rep1* 2>/dev/null
    fi
    rm -rf $P/rep$((r - 1))-arrowdir $P/rep$((r - 1))-parquetdir  # disk: keep the newest run's
  done
}

e2e() {
  local r end done_at
  for r in $(seq 1 "$RUNS"); do
    late "census capture $r" && break
    step "census capture, run $r: from the program's exit to the printed verdict"
    rm -rf $P/cc $P/cend$r $P/ccache$r
    CENSUS_CACHE_DIR=$P/ccache$r timed census-capture $r - python3 -m census capture e2e -o $P/cc \
      --force --warmup 5 --active "$STEPS" -- \
      sh -c "date +%s.%N > $P/cstart$r; $PROG; date +%s.%N > $P/cend$r"
    done_at=$(now)
    tail -n 3 $P/census-capture-$r.log
    if [ -f $P/cend$r ]; then
      record census-capture-program $r "$(python3 -c "print(round($(cat $P/cend$r) - $(cat $P/cstart$r), 3))")"
      record census-capture-exit-to-verdict $r "$(python3 -c "print(round($done_at - $(cat $P/cend$r), 3))")"
    fi
    [ -f $P/cc/e2e/capture.sqlite ] && du -sb $P/cc/e2e/*
  done
  step "the shared fixtures' reports exported to sqlite, arrowdir and parquetdir"
  local C=$P/columnar f b t
  rm -rf $C && mkdir -p $C
  for f in tests/data/columnar/src/*.nsys-rep; do
    b=$(basename "$f" .nsys-rep); cp "$f" $C/
    for t in sqlite arrowdir parquetdir; do
      o=$C/$b.$t; [ $t = sqlite ] || o=$C/$b-$t
      nsys export --type $t --force-overwrite=true -o $o $C/$b.nsys-rep > $C/$b-$t.log 2>&1
      echo "$b $t: exit $?"
    done
    rm $C/$b.nsys-rep
    python3 - $C/$b.sqlite /work/shared/fixtures/nsys/$b.sqlite <<'PY'
import sqlite3, sys
a = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print("  kernels in the new export:", a.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
PY
  done
  ls -laR $C | head -n 150
  python3 - $C <<'PY'
import sys
from pathlib import Path
import pyarrow.parquet as pq, pyarrow.ipc as ipc
for d in sorted(Path(sys.argv[1]).glob("*-parquetdir")):
    for f in sorted(d.iterdir()):
        print(f"{d.name}/{f.name}: {pq.ParquetFile(f).metadata.num_rows} rows")
for d in sorted(Path(sys.argv[1]).glob("*-arrowdir")):
    for f in sorted(d.iterdir()):
        try:
            n = ipc.open_file(f).read_all().num_rows; how = "file"
        except Exception:
            n = ipc.open_stream(f).read_all().num_rows; how = "stream"
        print(f"{d.name}/{f.name}: {n} rows (IPC {how})")
PY
  tar -cf - -C $P columnar | xz -T0 -9 > "$OUT/columnar-fixtures.tar.xz"
}

after() {
  local r mode t0 done_at x
  step "nsys export --help and nsys profile --help, whole (which options this nsys has)"
  nsys export --help 2>&1; nsys profile --help 2>&1 | grep -n -A 12 -E -- '--(cuda-event-trace|cuda-graph-trace|trace-fork-before-exec|export)[= ]'
  # each side: the demo; 20 steps in an arm, STEPS in the capture; B's capture stamps its end
  side() {
    echo "sh -c 'if [ \"\$CENSUS_RUN\" = capture ]; then n=$AFTER_STEPS; else n=20; fi; python3 -m census.capture.demo.train --mode eager --warmup 5 --steps \$n $SIZES && { [ \"\$CENSUS_RUN\" != capture ] || date +%s.%N > $P/end-$1; }'"
  }
  for r in $(seq 1 "$RUNS"); do
    for mode in overlap serial; do
      late "census ab $mode $r" && break 2
      step "census ab ($mode), run $r: from B's captured program's exit to the printed verdict"
      rm -rf $P/ab $P/end-a $P/end-b $P/abcache-$mode$r
      x=1; [ $mode = serial ] && x=0
      CENSUS_AB_OVERLAP=$x CENSUS_CACHE_DIR=$P/abcache-$mode$r timed ab-$mode $r - \
        python3 -m census ab e2e -o $P/ab --arms 4 --json --a "$(side a)" --b "$(side b)"
      done_at=$(now)
      grep 'census ab:' $P/ab-$mode-$r.err | tail -n 6
      if [ -f $P/end-b ]; then
        record ab-$mode-exit-to-verdict $r "$(python3 -c "print(round($done_at - $(cat $P/end-b), 3))")"
      fi
      for x in a b; do
        [ -d $P/ab/e2e/$x ] || continue
        CENSUS_CACHE_DIR=$P/abcache-$mode$r python3 -m census summary $P/ab/e2e/$x --json > $P/sum.json
        record ab-$mode-step-ms-$x $r "$(python3 -c "import json; d = json.load(open('$P/sum.json')); print(round(d['timing']['per_step']['step_time_ns'] / 1e6, 4), d['totals']['kernel_count'])")"
      done
      if [ $mode = overlap ] && [ "$r" = 1 ] && [ -f $P/ab/e2e/a/capture.nsys-rep ]; then
        step "the export options census would pin (census.capture.nsys.EXPORT_PINNED) against a plain export of A's report"
        t0=$(now)
        nsys export --type sqlite --force-overwrite true -o $P/plain.sqlite $P/ab/e2e/a/capture.nsys-rep > /dev/null
        record export-plain $r "$(python3 -c "print(round($(now) - $t0, 3))")"
        t0=$(now)
        nsys export --type sqlite --force-overwrite true $(python3 -c "from census.capture.nsys import EXPORT_PINNED; print(' '.join(EXPORT_PINNED))") \
          -o $P/pinned.sqlite $P/ab/e2e/a/capture.nsys-rep; echo "pinned export: exit $?"
        record export-pinned $r "$(python3 -c "print(round($(now) - $t0, 3))")"
        python3 - $P/plain.sqlite $P/pinned.sqlite <<'PY'
import sqlite3, sys
def tables(path):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = [n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return {n: c.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
plain, pinned = tables(sys.argv[1]), tables(sys.argv[2])
print("tables: plain", len(plain), "pinned", len(pinned), "same names and rows:", plain == pinned)
for n in sorted(set(plain) | set(pinned)):
    if plain.get(n) != pinned.get(n):
        print("  differs:", n, plain.get(n), pinned.get(n))
PY
        python3 -c "import json; d = json.load(open('$P/ab/e2e/a/run.json')); print('profile:', ' '.join(d['nsys_command'][:12])); print('export:', ' '.join(d.get('nsys_export_command') or []))"
      fi
    done
  done
}

summary() {
  step "medians by stage (times-$SECTION.tsv: stage, run, wall s, user s, sys s, max RSS KiB, size B, exit)"
  python3 - "$T" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = {}
for stage, run, wall, user, sys_, rss, size, rc in rows:
    by.setdefault(stage, []).append((float(wall), user, sys_, rss, size, rc))
print("stage | runs | wall s (each run) | median wall s | median CPU s (user+sys) | median size MB | exits")
for stage, v in by.items():
    walls = [w for w, *_ in v]
    cpu = [float(u) + float(s) for _, u, s, *_ in v if u and s]
    size = [int(z) for *_, z, _ in v if z and z != "0"]
    print(" | ".join([stage, str(len(v)), ", ".join(f"{w:g}" for w in walls),
                      f"{st.median(walls):.2f}", f"{st.median(cpu):.2f}" if cpu else "-",
                      f"{st.median(size) / 1e6:.1f}" if size else "-",
                      ",".join(sorted({rc for *_, rc in v}))]))
PY
}

: > "$T"
{ echo "nsys: $(nsys --version)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  $SECTION; summary; } 2>&1 | tee "$OUT/log-$SECTION.txt"
