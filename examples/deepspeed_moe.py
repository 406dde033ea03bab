"""A third-party, host-heavy training stack: a HuggingFace Qwen3-MoE trained by DeepSpeed ZeRO-1.

    census capture ds-eager --warmup 5 --active 15 --calibrate -- python examples/deepspeed_moe.py
    census capture ds-compiled --warmup 5 --active 15 --calibrate -- \
        python examples/deepspeed_moe.py --compile

A small Qwen3-MoE (transformers' Qwen3MoeForCausalLM, random weights, random token ids: nothing is
downloaded) trained on one GPU by DeepSpeed: ZeRO stage 1, bf16, AdamW through the DeepSpeed
config (`torch_adam`: no CUDA op to build), gradient clipping 1.0. The sizes are small on purpose
(hidden 512, 8 layers, 16 experts, top-2, 4 x 512 tokens): a step is thousands of small kernels,
so on an H200 the eager step is bound by the host, not the GPU. By default the experts run as
transformers' reference implementation (`experts_implementation="eager"`, the only one before
transformers 5): a Python loop over the experts whose `nonzero`/`where` and tensor truth tests
synchronise with the GPU a few times per expert and layer. `--experts-impl grouped_mm` (the
default of transformers 5) takes two grouped GEMMs per layer instead, without syncs.

`--compile` calls DeepSpeed's own `engine.compile()` (torch.compile of the model, inductor)
before the loop. It fuses the attention, norms, router and loss and removes GPU work, but the
expert loop breaks the graph and runs as before, and DeepSpeed's host work (the per-parameter
gradient reduction of ZeRO-1, the gradient norm, the optimizer step) is not compiled at all.

DeepSpeed wraps `DeepSpeedEngine.forward`, `.backward` and `.allreduce_gradients` in NVTX ranges
(`instrument_w_nvtx`, domain `DeepSpeed` through the `nvtx` package; on by default:
`deepspeed.utils.nvtx.enable_nvtx = True`). `engine.compile()` switches them off for the whole
process; this script switches them back on after it (the wrapper already skips them while dynamo
traces), so both sides carry the same host ranges.

Single process, one GPU: RANK=0, WORLD_SIZE=1, LOCAL_RANK=0 and MASTER_ADDR/PORT are set when
absent, and `deepspeed.init_distributed("nccl")` makes a world of one. `--device cpu` runs the
same loop on the CPU (DeepSpeed's CPU accelerator, gloo) to check the script without a GPU.

Steps: CENSUS_WARMUP (default 5) warm-up steps, then CENSUS_ACTIVE (default 15) measured ones,
as `census capture --warmup/--active` sets them. Nothing in the loop synchronises except what
transformers and DeepSpeed do themselves. The last line gives the mean wall time of the measured
steps.
"""

from __future__ import annotations

import argparse
import os
import time

import census


def parse() -> argparse.Namespace:
    from hf_moe import add_model_arguments  # beside this script

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile", action="store_true", help="engine.compile() before the loop")
    add_model_arguments(parser, layers=8, experts_impl="eager")
    return parser.parse_args()


def ds_config(batch: int) -> dict:
    return {
        "train_micro_batch_size_per_gpu": batch,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 10**9,  # no progress lines inside the measured steps
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 1},
        "gradient_clipping": 1.0,
        "optimizer": {
            "type": "AdamW",
            # torch_adam: torch.optim.AdamW; DeepSpeed's FusedAdam would JIT-build a CUDA op
            "params": {
                "lr": 1e-4,
                "betas": [0.9, 0.95],
                "eps": 1e-8,
                "weight_decay": 0.1,
                "torch_adam": True,
            },
        },
    }


def main() -> None:
    args = parse()
    if args.device == "cpu":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    for key, value in (
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("LOCAL_RANK", "0"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29517"),
    ):
        os.environ.setdefault(key, value)

    # after DS_ACCELERATOR: DeepSpeed picks its accelerator when imported
    import deepspeed
    import deepspeed.utils.nvtx
    import torch
    from hf_moe import qwen3_moe_config  # beside this script: its sizes make the same model
    from transformers import Qwen3MoeForCausalLM

    warmup = int(os.environ.get("CENSUS_WARMUP") or 5)
    active = int(os.environ.get("CENSUS_ACTIVE") or 15)
    cuda = args.device == "cuda"
    deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo")

    torch.manual_seed(0)
    config = qwen3_moe_config(args)
    model = Qwen3MoeForCausalLM(config)
    engine, *_ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=ds_config(args.batch)
    )
    if args.compile:
        engine.compile()
        deepspeed.utils.nvtx.enable_nvtx = True  # compile() turned DeepSpeed's ranges off

    device = engine.device
    total = warmup + active
    g = torch.Generator().manual_seed(1234)
    batches = torch.randint(0, args.vocab, (total, args.batch, args.seq), generator=g).to(device)

    start = time.perf_counter()
    for i in census.steps(range(total), warmup=warmup, active=active):
        if i == warmup:  # census.steps synchronised as the window opened
            start = time.perf_counter()
        ids = batches[i]
        with census.phase("forward"):
            loss = engine(input_ids=ids, labels=ids).loss
            census.record("loss", loss)  # census ab: the paired loss difference
        with census.phase("backward"):
            engine.backward(loss)
        with census.phase("optimizer"):
            engine.step()
    if cuda:
        torch.cuda.synchronize()
    mean_ms = (time.perf_counter() - start) / max(active, 1) * 1e3
    n_params = sum(p.numel() for p in model.parameters())
    side = "compiled" if args.compile else "eager"
    print(
        f"deepspeed_moe {side}: {mean_ms:.2f} ms/step mean over {active} steps "
        f"(after {warmup} warm-up), loss {loss.item():.4f}, {n_params / 1e6:.1f}M params, "
        f"{args.layers} layers x {args.experts} experts top-{args.top_k} "
        f"({model.config._experts_implementation}), "
        f"{args.batch}x{args.seq} tokens, {args.device}",
        flush=True,
    )
    deepspeed.comm.destroy_process_group()


if __name__ == "__main__":
    main()
