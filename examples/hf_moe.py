"""A third-party model in plain PyTorch: HuggingFace transformers' Qwen3-MoE, eager or regionally compiled.

    census capture moe-eager --warmup 5 --active 10 -- python examples/hf_moe.py
    census capture moe-compiled --warmup 5 --active 10 -- python examples/hf_moe.py --compile

A small Qwen3-MoE (transformers' Qwen3MoeForCausalLM, random weights, random token ids: nothing is
downloaded) trained on one GPU with torch.optim.AdamW under bf16 autocast. `--compile` is
regional compilation, as transformers and torchtitan recommend for decoder stacks: each decoder
layer is compiled on its own (`layer.compile()`, inductor), so the one compiled region is reused
for every layer; the embedding, the final norm, the LM head, the loss and the optimizer stay
eager. `--experts-impl` picks transformers' experts implementation (`grouped_mm`, transformers
5's default, two grouped GEMMs a layer without host syncs; `eager`, a Python loop over the
experts that synchronises).

Steps: census.steps with CENSUS_WARMUP (default 5) warm-up and CENSUS_ACTIVE (default 10)
measured steps, each with `forward`, `backward` and `optimizer` phases. `--device cpu` runs the
same loop on the CPU to check the script without a GPU. The last line gives the mean wall time
of the measured steps.
"""

from __future__ import annotations

import argparse
import os
import time

import census


def add_model_arguments(parser: argparse.ArgumentParser, layers: int, experts_impl: str) -> None:
    """The model's sizes and its experts implementation as options (examples/deepspeed_moe.py
    takes the same ones)."""
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    for flag, default, what in (("--layers", layers, None), ("--hidden", 512, None),
                                ("--experts", 16, None), ("--top-k", 2, None),
                                ("--expert-hidden", 256, "moe_intermediate_size"),
                                ("--heads", 8, None), ("--kv-heads", 4, None),
                                ("--vocab", 8192, None), ("--seq", 512, None),
                                ("--batch", 4, None)):  # fmt: skip
        parser.add_argument(flag, type=int, default=default, help=what)
    parser.add_argument(
        "--experts-impl",
        choices=("eager", "grouped_mm"),
        default=experts_impl,
        help="transformers' experts_implementation: eager (a Python loop over the experts) or "
        "grouped_mm (two grouped GEMMs, transformers 5's default)",
    )


def parse() -> argparse.Namespace:
    """The model's sizes and the side (eager or regionally compiled)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile", action="store_true", help="compile each decoder layer")
    add_model_arguments(parser, layers=6, experts_impl="grouped_mm")
    return parser.parse_args()


def qwen3_moe_config(args: argparse.Namespace):
    """transformers' Qwen3MoeConfig of these sizes: every layer an MoE layer, SDPA attention,
    no KV cache, the experts implementation asked for (examples/deepspeed_moe.py uses it too)."""
    from transformers import Qwen3MoeConfig

    return Qwen3MoeConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=4 * args.hidden,  # unused: every layer is an MoE layer
        moe_intermediate_size=args.expert_hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.hidden // args.heads,
        num_experts=args.experts,
        num_experts_per_tok=args.top_k,
        decoder_sparse_step=1,
        max_position_embeddings=max(args.seq, 512),
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="sdpa",
        experts_implementation=args.experts_impl,
    )


def build(args: argparse.Namespace):
    """The model on its device, random weights (seed 0), each decoder layer compiled with
    --compile."""
    import torch
    from transformers import Qwen3MoeForCausalLM

    torch.manual_seed(0)
    model = Qwen3MoeForCausalLM(qwen3_moe_config(args)).to(args.device)
    if args.compile:
        for layer in model.model.layers:
            layer.compile()
    return model


def main() -> None:
    """Train for the warm-up and measured steps; print the measured steps' mean wall time."""
    import torch

    args = parse()
    warmup = int(os.environ.get("CENSUS_WARMUP") or 5)
    active = int(os.environ.get("CENSUS_ACTIVE") or 10)
    model = build(args)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    total = warmup + active
    g = torch.Generator().manual_seed(1234)
    batches = torch.randint(0, args.vocab, (total, args.batch, args.seq), generator=g)
    batches = batches.to(args.device)
    cuda = args.device == "cuda"
    start = time.perf_counter()
    for i in census.steps(range(total), warmup=warmup, active=active):
        if i == warmup:  # census.steps synchronised as the window opened
            start = time.perf_counter()
        ids = batches[i]
        with census.phase("forward"):
            with torch.autocast(args.device, dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            census.record("loss", loss)
        with census.phase("backward"):
            loss.backward()
        with census.phase("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
    mean_ms = (time.perf_counter() - start) / max(active, 1) * 1e3
    n_params = sum(p.numel() for p in model.parameters())
    side = "compiled (regional)" if args.compile else "eager"
    print(
        f"hf_moe {side}: {mean_ms:.2f} ms/step mean over {active} steps (after {warmup} "
        f"warm-up), loss {loss.item():.4f}, {n_params / 1e6:.1f}M params, {args.layers} layers x "
        f"{args.experts} experts top-{args.top_k} ({args.experts_impl}), "
        f"{args.batch}x{args.seq} tokens, {args.device}",
        flush=True,
    )


if __name__ == "__main__":
    main()
