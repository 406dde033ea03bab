"""Write large PyTorch profiler (Kineto) traces with a realistic structure, and their exact totals.

Each rank's trace is one gzipped chrome-trace file shaped as torch.profiler writes one (top-level
metadata, `traceEvents`, `traceName` after the events; `distributedInfo` with the rank and world
size; GPU events under pid = the device index, tid = the stream). Inside: `ProfilerStep#N` host
ranges; forward ops on the main thread and backward ops on the autograd thread, each an outer
`aten::` cpu_op enclosing an inner one enclosing the launch call (`cudaLaunchKernel`, or
`cuLaunchKernel` for Triton kernels) whose `args.correlation` the kernel repeats; python_function
events; `cudaStreamIsCapturing` calls that launch nothing; memcpys (DtoD, HtoD, DtoH) and memsets
with `args.bytes`; with several ranks, one NCCL AllReduce kernel per step on a stream of its own
(`cudaLaunchKernelExC`, `args.Collective name`); `ac2g` flow events; `gpu_user_annotation` ranges.
Times are integer nanoseconds written as microseconds with three decimals, as Kineto writes them.

The totals written beside each trace (`<trace>.totals`, JSON, also printed; not `.json`, which
HTA would take for a trace) are counted while writing: kernels, their summed duration, NCCL
kernels, launch calls and their time, copies and bytes by kind, memsets, steps and the kernels
launched in each step, events.

    python bench/kineto_generate.py --kernels 1000000 --ranks 1 -o bench/out/kineto-1e6
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from pathlib import Path

BASE_NS = 5_348_803_108_271_579  # a CLOCK_MONOTONIC-like origin, as in the H200 traces
OPS = (  # kernel names as long as real ones (the H200 trace's average 740 bytes per kernel event)
    ("aten::linear", "aten::addmm",
     "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)"),
    ("aten::layer_norm", "aten::native_layer_norm",
     "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>"
     "(int, float, float const*, float const*, float const*, float*, float*, float*)"),
    ("aten::gelu", "aten::gelu",
     "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
     "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()"
     "#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::"
     "GeluCUDAKernelImpl, std::array<char*, 2ul>)"),
    ("aten::add", "aten::add",
     "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"),
    ("aten::_to_copy", "aten::copy_", "triton_poi_fused__to_copy_clone_native_layer_norm_0"),
)  # fmt: skip
# A real kernel event's args beyond device, stream and correlation (as torch 2.x writes them)
KERNEL_ARGS = (', "queued": 0, "registers per thread": 32, "shared memory": 24, '
               '"blocks per SM": 31.030304, "warps per SM": 124.121216, "grid": [4096, 1, 1], '
               '"block": [32, 4, 1], "est. achieved occupancy %": 75')  # fmt: skip
COPIES = (("Memcpy DtoD (Device -> Device)", "d2d"), ("Memcpy HtoD (Pinned -> Device)", "h2d"),
          ("Memcpy DtoH (Device -> Pinned)", "d2h"))  # fmt: skip
OPS_PER_STEP = 400


def us(ns: int) -> str:
    """Integer nanoseconds as Kineto writes microseconds: three decimals, exact."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def x_event(cat: str, name: str, pid: int, tid: int, start_ns: int, dur_ns: int, args: str) -> str:
    """One complete ('X') event as a line of JSON."""
    name = json.dumps(name)
    return (
        f'  {{"ph": "X", "cat": "{cat}", "name": {name}, "pid": {pid}, "tid": {tid}, '
        f'"ts": {us(start_ns)}, "dur": {us(dur_ns)}, "args": {{{args}}}}}'
    )


class Writer:
    """One rank's trace: events written as they are made, totals counted beside."""

    def __init__(self, fh, rank: int, world: int, rng: random.Random) -> None:
        self.fh, self.rank, self.world, self.rng = fh, rank, world, rng
        self.pid, self.device = 1000 + rank, rank
        self.t_ns = BASE_NS + rank * 1_777  # the host clock
        self.gpu_free_ns = self.t_ns
        self.corr = 1
        self.ext = 1
        self.buf: list[str] = []
        self.totals = {
            "kernel_count": 0, "kernel_time_ns": 0, "nccl_count": 0, "nccl_time_ns": 0,
            "launch_count": 0, "launch_time_ns": 0, "runtime_count": 0, "memset_count": 0,
            "memset_bytes": 0, "step_count": 0, "events": 0, "step_kernels": [],
            "copies": {kind: {"count": 0, "bytes": 0} for _, kind in COPIES},
        }  # fmt: skip

    def emit(self, line: str) -> None:
        self.buf.append(line)
        self.totals["events"] += 1
        if len(self.buf) >= 20_000:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.fh.write((",\n".join(self.buf) + ",\n").encode())
            self.buf.clear()

    def gpu(
        self, cat: str, name: str, launch_ns: int, dur_ns: int, stream: int, extra: str
    ) -> None:
        start = max(self.gpu_free_ns, launch_ns + 2_000 + self.rng.randrange(3_000))
        self.gpu_free_ns = start + dur_ns + self.rng.randrange(500)
        args = (
            f'"External id": {self.ext}, "device": {self.device}, "context": 1, '
            f'"stream": {stream}, "correlation": {self.corr}{extra}'
        )
        self.emit(x_event(cat, name, self.device, stream, start, dur_ns, args))
        self.emit(f'  {{"ph": "f", "id": {self.corr}, "pid": {self.device}, "tid": {stream}, '
                  f'"ts": {us(start)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}')  # fmt: skip

    def call(self, cat: str, name: str, tid: int, work: bool = True, launch: bool = False) -> int:
        """An API call at the host clock (`work`: it issues GPU work, with a flow event;
        `launch`: a kernel launch); returns its start."""
        start, dur = self.t_ns, 3_000 + self.rng.randrange(20_000)
        self.emit(x_event(cat, name, self.pid, tid, start, dur,
                          f'"External id": {self.ext}, "cbid": 211, "correlation": {self.corr}'))  # fmt: skip
        self.totals["runtime_count"] += 1
        if launch:
            self.totals["launch_count"] += 1
            self.totals["launch_time_ns"] += dur
        if work:
            self.emit(f'  {{"ph": "s", "id": {self.corr}, "pid": {self.pid}, "tid": {tid}, '
                      f'"ts": {us(start)}, "cat": "ac2g", "name": "ac2g"}}')  # fmt: skip
        self.t_ns += dur + 500
        return start

    def kernel(
        self, name: str, api: tuple[str, str], tid: int, stream: int, extra: str = ""
    ) -> None:
        """A launch call and its kernel."""
        launch_ns = self.call(*api, tid, launch=True)
        dur = 1_000 + self.rng.randrange(60_000)
        self.gpu("kernel", name, launch_ns, dur, stream, KERNEL_ARGS + extra)
        self.corr += 1
        self.totals["kernel_count"] += 1
        self.totals["kernel_time_ns"] += dur
        if name.startswith("ncclDevKernel"):
            self.totals["nccl_count"] += 1
            self.totals["nccl_time_ns"] += dur

    def op(self, tid: int, index: int) -> None:
        """An outer aten op enclosing an inner one enclosing the launch (and at times a call
        that launches nothing), inside a python_function."""
        outer, inner, kernel = OPS[index % len(OPS)]
        outer_ns = self.t_ns
        self.t_ns += 2_000
        inner_ns = self.t_ns
        self.t_ns += 1_500
        if index % 3 == 0:
            self.call("cuda_runtime", "cudaStreamIsCapturing", tid, work=False)
            self.corr += 1
        triton = kernel.startswith("triton_")
        api = ("cuda_driver", "cuLaunchKernel") if triton else ("cuda_runtime", "cudaLaunchKernel")
        self.kernel(kernel, api, tid, 7)
        self.t_ns += 1_000
        inner_end, outer_end = self.t_ns, self.t_ns + 800
        self.t_ns = outer_end + 1_200
        for name, start, end in ((inner, inner_ns, inner_end), (outer, outer_ns, outer_end)):
            self.emit(x_event("cpu_op", name, self.pid, tid, start, end - start,
                              f'"External id": {self.ext}, "Record function id": 0, '
                              f'"Sequence number": {self.ext}, "Fwd thread id": 0, "Ev Idx": {self.ext}'))  # fmt: skip
        self.emit(x_event("python_function", "torch/nn/modules/module.py(1750): _call_impl",
                          self.pid, tid, outer_ns - 300, outer_end - outer_ns + 500,
                          f'"Python id": {self.ext}, "Python parent id": 1'))  # fmt: skip
        self.ext += 1

    def copy(self, tid: int, index: int) -> None:
        """A memcpy of one of three kinds, or a memset."""
        size = 4096 << (index % 12)
        if index % 4 == 3:
            start = self.call("cuda_runtime", "cudaMemsetAsync", tid)
            self.gpu("gpu_memset", "Memset (Device)", start, 700 + size // 4096, 7,
                     f', "bytes": {size}')  # fmt: skip
            self.totals["memset_count"] += 1
            self.totals["memset_bytes"] += size
        else:
            name, kind = COPIES[index % 3]
            start = self.call("cuda_runtime", "cudaMemcpyAsync", tid)
            self.gpu("gpu_memcpy", name, start, 900 + size // 2048, 7, f', "bytes": {size}')
            self.totals["copies"][kind]["count"] += 1
            self.totals["copies"][kind]["bytes"] += size
        self.corr += 1

    def step(self, number: int, ops: int) -> None:
        """A ProfilerStep#N range: forward ops on the main thread, backward ops on the autograd
        thread, copies, and with several ranks one NCCL AllReduce."""
        before = self.totals["kernel_count"]
        start_ns = self.t_ns
        self.t_ns += 5_000
        gpu_start = max(self.gpu_free_ns, start_ns)
        for i in range(ops):
            self.op(self.pid if i < ops // 2 else self.pid + 7, i)
            if i % 50 == 49:
                self.copy(self.pid, i // 50)
        if self.world > 1:
            collective = f', "Collective name": "allreduce", "Group size": {self.world}'
            self.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                        ("cuda_runtime", "cudaLaunchKernelExC"), self.pid + 7, 20, collective)  # fmt: skip
        self.t_ns += 5_000
        name = f"ProfilerStep#{number}"
        self.emit(x_event("user_annotation", name, self.pid, self.pid, start_ns,
                          self.t_ns - start_ns, f'"External id": {self.ext}'))  # fmt: skip
        self.emit(x_event("gpu_user_annotation", name, self.device, 7, gpu_start,
                          self.gpu_free_ns - gpu_start, f'"External id": {self.ext}'))  # fmt: skip
        self.ext += 1
        self.t_ns += 20_000
        self.totals["step_count"] += 1
        self.totals["step_kernels"].append(self.totals["kernel_count"] - before)


def write_rank(path: Path, rank: int, world: int, kernels: int, seed: int) -> dict:
    """One rank's trace of about `kernels` kernels (whole steps); returns its totals."""
    head = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": rank, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1_790_857_026_000_000_000,
    }
    tmp = path.with_name(path.name + ".part")
    with gzip.open(tmp, "wb", compresslevel=1) as fh:
        fh.write((json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n').encode())
        w = Writer(fh, rank, world, random.Random(seed * 1000 + rank))
        number = 1
        while w.totals["kernel_count"] < kernels:
            w.step(number, min(OPS_PER_STEP, kernels - w.totals["kernel_count"]))
            number += 1
        w.flush()
        fh.write((f'  {{"name": "process_name", "ph": "M", "ts": {us(BASE_NS)}, "pid": {w.pid}, '
                  f'"tid": 0, "args": {{"name": "python3"}}}}\n  ],\n'
                  f'  "traceName": "rank{rank}.pt.trace.json"\n}}\n').encode())  # fmt: skip
    w.totals["events"] += 1
    tmp.replace(path)
    return w.totals


def main(argv: list[str] | None = None) -> int:
    """Write the traces and print their totals."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", type=int, default=100_000, help="kernels per rank (about)")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--out", type=Path, required=True, help="folder for the traces")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for rank in range(args.ranks):
        path = args.out / f"rank{rank}.pt.trace.json.gz"
        t0 = time.perf_counter()
        totals = write_rank(path, rank, args.ranks, args.kernels, args.seed)
        totals["seconds"] = round(time.perf_counter() - t0, 1)
        totals["gzip_bytes"] = path.stat().st_size
        Path(str(path) + ".totals").write_text(json.dumps(totals) + "\n")
        shown = {k: v for k, v in totals.items() if k != "step_kernels"}
        print(path, json.dumps(shown), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
