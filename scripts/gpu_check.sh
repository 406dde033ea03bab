#!/usr/bin/env bash
# Proves capture on a real GPU: run on the GPU machine from the repository root, with the nsys kit
# (see README, "Verifying on a GPU"). Writes logs and artefacts to $OUT (default ./gpu-out).
#   scripts/gpu_check.sh          everything below
#   scripts/gpu_check.sh ddp      only the torchrun / DDP captures (one rank per visible GPU)
set -u
SECTION=${1:-all}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT/r"
source .device-kit/nsys-env.sh || exit 1
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 CENSUS_CACHE_DIR=/tmp/census-cache
census() { python3 -m census "$@"; }
P=/tmp/prof
step() { echo; echo "=== $*"; }
ddp() {
  local n; n=$(python3 -c "import torch; print(torch.cuda.device_count())")
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  step "capture ddp-eager on $n GPU(s) through torchrun"
  census capture ddp-eager --demo ddp-eager --nproc "$n" --warmup 5 --steps 10 -o $P; echo "exit $?"
  step "capture ddp-compiled on $n GPU(s) through torchrun"
  census capture ddp-compiled --demo ddp-compiled --nproc "$n" --warmup 5 --steps 10 -o $P; echo "exit $?"
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
if [ "$SECTION" = ddp ]; then
  { ddp; } 2>&1 | tee "$OUT/log.txt"
  tar -cJf "$OUT/captures.tar.xz" -C $P ddp-eager ddp-compiled 2>/dev/null
  tar -cJf "$OUT/stats.tar.xz" -C "$OUT" r && rm -rf "$OUT/r"
  exit 0
fi
{
step "census doctor"; census doctor -o $P; echo "exit $?"
step "capture sample-eager (demo, eager)"
census capture sample-eager --demo eager --warmup 5 --steps 20 -o $P; echo "exit $?"
step "capture sample-compiled (demo, compiled)"
census capture sample-compiled --demo compiled --warmup 5 --steps 20 -o $P; echo "exit $?"
step "capture of a user script"
census capture user --warmup 3 --steps 5 -o $P -- python3 examples/user_train.py; echo "exit $?"
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
