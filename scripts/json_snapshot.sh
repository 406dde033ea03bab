#!/usr/bin/env bash
# Writes `census summary --json` and `census diff --format json` of every shared fixture and
# bundled sample into DIR (and the markdown and terminal renderings beside them), uncached, so that two versions of census can be compared byte for byte:
#   scripts/json_snapshot.sh /tmp/before   (old code)
#   scripts/json_snapshot.sh /tmp/after    (new code)
#   diff -r /tmp/before /tmp/after
set -euo pipefail
out=${1:?usage: scripts/json_snapshot.sh DIR}
fixtures=${FIXTURES:-$(dirname "$0")/../../shared/fixtures/nsys}
mkdir -p "$out"
export CENSUS_NO_CACHE=1
inputs=(sample:eager sample:compiled "$fixtures"/*.sqlite)
for x in "${inputs[@]}"; do
  name=$(basename "${x#sample:}" .sqlite)
  if [[ $x == sample:* ]]; then
    census summary --sample "${x#sample:}" --json >"$out/summary-$name.json" 2>/dev/null
    COLUMNS=120 census summary --sample "${x#sample:}" >"$out/summary-$name.txt" 2>/dev/null
  else
    census summary "$x" --json >"$out/summary-$name.json" 2>/dev/null || echo "exit $?" >>"$out/summary-$name.json"
  fi
done
pairs=("sample:eager sample:compiled"
       "$fixtures/h200_eager_3steps.sqlite $fixtures/h200_compiled_3steps.sqlite"
       "$fixtures/nsysai_mfu_2gpu_before.sqlite $fixtures/nsysai_mfu_2gpu_after.sqlite"
       "$fixtures/pipit_saxpy-mpi-cuda_nsys_perlmutter0.sqlite $fixtures/flameox_nsight-2025.5.2_cudagraph.sqlite"
       "$fixtures/nsysai_mock.sqlite $fixtures/h200_eager_3steps.sqlite")
i=0
for p in "${pairs[@]}"; do
  read -r a b <<<"$p"
  # shellcheck disable=SC2086
  census diff $a $b --format json >"$out/diff-$i.json" 2>/dev/null || echo "exit $?" >>"$out/diff-$i.json"
  census diff $a $b --format json --labels eager,compiled --top 5 >"$out/diff-$i-labels.json" 2>/dev/null || true
  census diff $a $b --format markdown >"$out/diff-$i.md" 2>/dev/null || true
  COLUMNS=120 census diff $a $b >"$out/diff-$i.txt" 2>/dev/null || true
  i=$((i + 1))
done
echo "wrote $(ls "$out" | wc -l) documents to $out" >&2
