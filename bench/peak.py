"""This machine's matrix-product peak in GFLOP/s, for one dtype and one thread count.

The benches divide what they achieve by this, measured in the same run, the same dtype
and the same thread count (`fraction` in their JSON). The product is shaped like the
model's: `batch` independent (hidden x intermediate) @ (intermediate x hidden) products,
one `torch.bmm` per call (SmolLM2-135M: 8 x 576x1536 @ 1536x576, 2 x 8 x 576 x 1536 x 576 =
8.15 GFLOP per call), `warmup` untimed calls, then the median of `repeats` timed calls.

Threads: torch runs `threads` intra-op threads for the measurement (`torch.set_num_threads`,
restored after). Once vLLM's CPU worker has started it replaces `torch.set_num_threads`
with a no-op, so where this process cannot run that count the product is measured in a
child process of this script instead (`how` in the result says which).

    python -m bench.peak [--dtype bfloat16] [--threads 2] [--hidden 576] [--intermediate 1536] [--batch 8] [--repeats 20]

prints the result as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SMOLLM2 = {"hidden": 576, "intermediate": 1536}


def shape_of(config: dict) -> dict:
    """The product's shape from a Hugging Face config.json (its MLP's)."""
    return {"hidden": int(config["hidden_size"]), "intermediate": int(config["intermediate_size"])}


def matmul_gflops(dtype: str, hidden: int, intermediate: int, batch: int = 8, repeats: int = 20, warmup: int = 3) -> dict:
    """GFLOP/s of the batched product in this process, at torch's current thread count."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(batch, hidden, intermediate, generator=gen).to(getattr(torch, dtype))
    b = torch.randn(batch, intermediate, hidden, generator=gen).to(getattr(torch, dtype))
    flop = 2 * batch * hidden * intermediate * hidden
    out = torch.empty(batch, hidden, hidden, dtype=a.dtype)
    for _ in range(max(1, warmup)):
        torch.bmm(a, b, out=out)
    runs = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        torch.bmm(a, b, out=out)
        runs.append(flop / (time.perf_counter() - start) / 1e9)
    return {
        "peak_gflops": round(statistics.median(runs), 1),
        "runs": [round(x, 1) for x in runs],
        "dtype": dtype,
        "threads": torch.get_num_threads(),
        "shape": f"{batch} x {hidden}x{intermediate} @ {intermediate}x{hidden}",
        "gflop_per_call": round(flop / 1e9, 3),
    }


def measure(dtype: str, threads: int, hidden: int, intermediate: int, batch: int = 8, repeats: int = 20) -> dict:
    """The peak at `threads` threads: here when torch can run that many, else in a child."""
    import torch

    before = torch.get_num_threads()
    if before != threads:
        torch.set_num_threads(threads)  # a no-op once vLLM's CPU worker has started
    try:
        if torch.get_num_threads() == threads:
            return {**matmul_gflops(dtype, hidden, intermediate, batch, repeats), "how": "in this process"}
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
    return in_child(dtype, threads, hidden, intermediate, batch, repeats)


def in_child(dtype: str, threads: int, hidden: int, intermediate: int, batch: int = 8, repeats: int = 20) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--dtype",
        dtype,
        "--threads",
        str(threads),
        "--hidden",
        str(hidden),
        "--intermediate",
        str(intermediate),
        "--batch",
        str(batch),
        "--repeats",
        str(repeats),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"peak measurement in a child failed: {proc.stderr.strip()[-500:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**result, "how": "in a child process"}


def combined(peaks: list[dict]) -> dict:
    """Several measurements of one run (before and after the work) as one: the median of
    all their products; `before_after` keeps each one's median."""
    runs = [x for p in peaks for x in p["runs"]]
    return {
        **peaks[0],
        "peak_gflops": round(statistics.median(runs), 1),
        "runs": runs,
        "before_after": [p["peak_gflops"] for p in peaks],
    }


def fraction_fields(achieved_gflops: float, peak: dict, **extra) -> dict:
    """The top-level fields every bench writes: achieved over the peak of the same run."""
    return {
        "dtype": peak["dtype"],
        "threads": peak["threads"],
        "peak_gflops": peak["peak_gflops"],
        "achieved_gflops": round(achieved_gflops, 1),
        "fraction": round(achieved_gflops / peak["peak_gflops"], 3),
        "peak": peak,
        **extra,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--threads", type=int, default=None, help="default: torch's current count")
    parser.add_argument("--hidden", type=int, default=SMOLLM2["hidden"])
    parser.add_argument("--intermediate", type=int, default=SMOLLM2["intermediate"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(json.dumps(matmul_gflops(args.dtype, args.hidden, args.intermediate, args.batch, args.repeats)))


if __name__ == "__main__":
    main()
