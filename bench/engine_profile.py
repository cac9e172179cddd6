"""Where one generate's time goes: a torch profile of the project's engine on the phase-1
shapes, its operators grouped into what a decode step is made of.

engine_throughput.py says how fast generation is and what fraction of the matrix-product
peak it reaches; this says why. One `Engine.generate` (the same prompts, n, temperature and
budget as engine_throughput.py's defaults) runs under `torch.profiler` after a warm-up;
each operator's self CPU time goes to one group (`GROUPS`, first match wins), and the
wall time no operator accounts for is "outside torch ops" (vLLM's scheduler, detokenising,
building outputs: Python). `matmul_gflops` divides the generated tokens' FLOPs
(unified/models/flops.py) by the matrix products' own seconds: what the products achieve,
against the peak the whole step is divided by in engine_throughput.json.

Measured on the AMX machine (docs/performance.md): products ~24 % of a step at ~0.38 of
the bf16 peak, attention ~24 %, sampling ~17 %, element-wise ~16 %, outside ~14 %.

    python -m bench.engine_profile [--model smollm2|tiny|DIR] [--dtype auto|bfloat16|float32] [--compile]
                                   [--prompts 16] [--n 16] [--max-tokens 192] [--quick]

Writes logs/bench/engine_profile.json: groups (seconds, share), top operators, wall_s,
tokens, matmul_gflops, settings, machine.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench.common import REPO, write_json

OUT = REPO / "logs" / "bench" / "engine_profile.json"

# group -> substrings of operator names (lower case); the first group that matches wins
GROUPS = {
    "matrix products": (
        "onednn_mm",
        "weight_packed_linear",
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::linear",
        "aten::matmul",
    ),
    "attention": ("attention", "reshape_and_cache", "kv_cache"),
    "sampling": ("gumbel", "softmax", "topk", "top_k", "top_p", "sort", "multinomial", "exponential", "argmax", "sampl"),
    "element-wise": (
        "copy_",
        "_to_copy",
        "mul",
        "add",
        "div",
        "silu",
        "gelu",
        "pow",
        "rsqrt",
        "mean",
        "sum",
        "rms",
        "rotary",
        "neg",
        "cat",
        "fill_",
        "sub",
        "::exp",
    ),
}
OTHER = "other torch ops"
OUTSIDE = "outside torch ops"


def group_of(name: str) -> str:
    """The group an operator's time counts under."""
    low = name.lower()
    for group, keys in GROUPS.items():
        if any(k in low for k in keys):
            return group
    return OTHER


def grouped(self_seconds: dict[str, float], wall_s: float) -> dict[str, dict]:
    """{group: {seconds, share}} over the wall time; what no operator accounts for (wall
    minus their self times, never below 0) is OUTSIDE."""
    groups = {g: 0.0 for g in (*GROUPS, OTHER)}
    for name, seconds in self_seconds.items():
        groups[group_of(name)] += seconds
    groups[OUTSIDE] = max(0.0, wall_s - sum(groups.values()))
    return {g: {"seconds": round(s, 3), "share": round(s / wall_s, 3) if wall_s > 0 else None} for g, s in groups.items()}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 (default), tiny or an HF model folder")
    parser.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float32"))
    parser.add_argument("--compile", action="store_true", help="rollout.compile=true (vLLM's torch.compile path)")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--backend", choices=("vllm_cpu", "vllm"), default=None, help="default: vllm on GPU, else vllm_cpu")
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--top", type=int, default=15, help="operators listed in the JSON")
    parser.add_argument("--out", default=str(OUT), help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny model, 4 prompts, n=2, 16 tokens")
    args = parser.parse_args()
    if args.quick:
        args.model, args.prompts, args.n, args.max_tokens = "tiny", 4, 2, 16
    return args


def main() -> None:
    args = parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch and vllm start OpenMP
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bench import engine_throughput
    from unified.models import flops as model_flops
    from unified.trainer.engine import SamplingConfig

    engine, backend, model_dir, dtype, _ = engine_throughput.start_engine(args)
    prompts = engine_throughput.build_prompts(args.prompts)
    sampling = SamplingConfig(n=args.n, temperature=args.temperature, top_p=1.0, max_tokens=args.max_tokens)
    engine.generate(prompts[:4], sampling)  # warm-up: vLLM's first calls set things up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        out = engine.generate(prompts, sampling)
        wall_s = time.perf_counter() - start
    tokens = sum(len(c.token_ids) for group in out for c in group)
    self_s: dict[str, float] = {}
    for event in prof.key_averages():
        self_s[event.key] = self_s.get(event.key, 0.0) + event.self_cpu_time_total / 1e6
    groups = grouped(self_s, wall_s)
    config = engine_throughput.model_config(model_dir)
    matmul_s = groups["matrix products"]["seconds"]
    flops = tokens * model_flops.generation_flops_per_token(config)
    result = {
        "wall_s": round(wall_s, 2),
        "tokens": tokens,
        "tok_s": round(tokens / wall_s, 1),
        "dtype": dtype,
        "threads": args.threads,
        "compiled": engine.compiled,
        "groups": groups,
        "matmul_gflops": round(flops / matmul_s / 1e9, 1) if matmul_s > 0 else None,
        "top_ops": [
            {"name": k, "self_s": round(v, 3), "group": group_of(k)}
            for k, v in sorted(self_s.items(), key=lambda kv: -kv[1])[: args.top]
        ],
        "settings": {
            "model": model_dir,
            "backend": backend,
            "prompts": args.prompts,
            "n": args.n,
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
        },
        "machine": {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2), "torch": torch.__version__},
    }
    engine.close()
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_json(out_path, result, indent=2)
    print(
        f"{tokens} tokens in {wall_s:.1f} s ({tokens / wall_s:.0f} tok/s, {dtype}, {args.threads} threads, "
        f"{'compiled' if engine.compiled else 'eager'}); matrix products at {result['matmul_gflops']} GFLOP/s"
    )
    for g, v in groups.items():
        print(f"  {g:<20} {v['seconds']:8.2f} s  {100 * (v['share'] or 0):5.1f} %")
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
