"""Policy-update throughput on SmolLM2 at phase 5's shapes: our update path against a plain
Hugging Face training step in the same dtype, and the FLOP/s it makes as a fraction of this
machine's matrix-product peak measured in the same run (same dtype, same thread count).

With no arguments: SmolLM2-135M-Instruct, the default tuning `top_layers` (the top 4 blocks
and the final norm) and LoRA (r=16 on every projection), 2 threads (the trainer's), the
dtype `model.dtype=auto` picks here (bfloat16 on CPUs whose flags show avx512_bf16 or AMX,
else float32; `--dtype` overrides, the JSON's `dtype` says which), and the default
algorithm's batching (configs: micro-batch 8, accum 2, update_steps 2: 32 samples per
optimizer step). Each step trains on two groups of 16 samples (`rollout.n`), each group
one phase-1 prompt of an MBPP+ problem (its real token ids through SmolLM2's chat template:
92-220 tokens, mean ~133) with responses of 192, 168, 144, 120 tokens in turn (mean 156
of the 192-token budget; random token ids: the cost does not depend on them).

Ours (bench/update_paths.py): `train_on_samples` -> verl advantages (GRPO) -> collate -> the policy forward under
`Policy.compute()` (torch.autocast in bf16 at world size 1, float32 master weights and
optimizer state: the trainer's real path) -> verl PPO loss -> `Aggregator.backward` ->
grad-norm clip, AdamW step, version bump (no engine: the push is bench/push_time.py's).
Raw: the same model loaded with `AutoModelForCausalLM`, no FSDP, the same tuning applied
(`apply_tuning`), float32 weights under the same autocast dtype, on the SAME collated
batches: forward with the same `logits_to_keep`, log-softmax of the response tokens, a
plain importance-weighted policy-gradient loss, backward, AdamW step.

FLOPs (unified/models/flops.py, from the model's config.json): per trained token, forward
2 x (layers x P_block + P_head), backward the input gradient (2 x P) of every block from
the lowest trainable one upward and of the head, the weight gradient (2 x P) of what
trains, LoRA's adapters 6 x P_lora. SmolLM2, top 4 blocks: 0.382 GFLOP per token when
every token gets logits (`gflop_per_token`); the head only runs on the positions that
predict response tokens, so a step counts the blocks' 0.269 GFLOP for every real token and
the head's 0.113 for the response tokens (`gflop_per_step`). `achieved_gflops` = ours'
median step FLOPs per second; `fraction` = that / `peak_gflops` (bench/peak.py, measured
before and after the steps, median of both). Target: >= 0.4 (issue 22) and ratio >= 0.9.

Runs are interleaved (ours, raw, raw, ours, ...) after `--warmup` untimed steps per path;
figures are medians. tokens/s counts real (non-padding) prompt + response tokens. Every
step is timed twice: wall clock (`*_tok_s`, `ratio`) and this process's CPU time
(`*_cpu_tok_s`, `ratio_cpu`, the one to read under load). Also, for the default tuning:
the raw step in the other dtype (`raw_float32_tok_s` / `raw_bfloat16_tok_s`: what the
dtype buys) and under `torch.compile` (`--compile`; compile time reported apart).

    python -m bench.train_throughput [--model smollm2] [--tunings top_layers,lora,full] [--threads 2]
                                     [--dtype auto|bfloat16|float32] [--steps 3] [--compile] [--quick]

Writes logs/bench/train_throughput.json: dtype, threads, peak_gflops, achieved_gflops,
fraction, gflop_per_token, gflop_per_step, flops_formula, ratio, ratio_cpu, ratio_tuning,
ours_tok_s, raw_tok_s, tunings.<method> {ours_tok_s, raw_tok_s, ratio, ratio_cpu,
achieved_gflops, fraction, runs...}, raw_<other dtype>_tok_s, settings, machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from update_paths import Ours, Raw, build_steps, model_path  # noqa: E402  (bench/ is this script's folder)

from bench.common import REPO as ROOT
from bench.common import write_json

OUT = ROOT / "logs" / "bench" / "train_throughput.json"
TARGET_RATIO = 0.9
TARGET_FRACTION = 0.4
DEFAULT_TUNING = "top_layers"  # configs/train.yaml's default tuning: the headline ratio


def timed_pairs(ours: Ours, raw: Raw, steps: list[dict], args, tuning: str) -> list[dict]:
    """Warm-up, then ours and raw interleaved on the same step's data: one record per run."""
    for w in range(args.warmup):
        ours.step(steps[w % len(steps)]["samples"])
        raw.step(steps[w % len(steps)]["batches"])
    records = []
    for rep in range(args.steps):
        data = steps[rep % len(steps)]
        for which in ("ours", "raw") if rep % 2 == 0 else ("raw", "ours"):
            start, cpu = time.perf_counter(), time.process_time()
            if which == "ours":
                ours.step(data["samples"])
            else:
                raw.step(data["batches"])
            records.append(
                {"path": which, "step": rep % len(steps), "s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu}
            )
        o, r = records[-2:] if records[-2]["path"] == "ours" else records[-2:][::-1]
        print(
            f"  {tuning} step {rep + 1}/{args.steps}: ours {data['tokens'] / o['s']:7.1f} tok/s "
            f"({data['tokens'] / o['cpu_s']:.1f} per CPU s)  raw {data['tokens'] / r['s']:7.1f} tok/s "
            f"({data['tokens'] / r['cpu_s']:.1f} per CPU s)",
            flush=True,
        )
    return records


def summarize(records: list[dict], steps: list[dict], per: dict) -> dict:
    """Medians of tokens/s (wall and CPU) and of FLOP/s per path, from the run records."""
    from unified.models import flops as model_flops

    out = {}
    for path in ("ours", "raw"):
        mine = [r for r in records if r["path"] == path]
        tok = [steps[r["step"]]["tokens"] / r["s"] for r in mine]
        flops = [
            model_flops.step_flops(per, steps[r["step"]]["tokens"], steps[r["step"]]["response_tokens"]) / r["s"] / 1e9
            for r in mine
        ]
        out[f"{path}_tok_s"] = round(statistics.median(tok), 2)
        out[f"{path}_cpu_tok_s"] = round(statistics.median(steps[r["step"]]["tokens"] / r["cpu_s"] for r in mine), 2)
        out[f"{path}_gflops"] = round(statistics.median(flops), 1)
        out[f"{path}_runs"] = [round(x, 2) for x in tok]
    pairs = [(a, b) for a, b in zip(out["ours_runs"], out["raw_runs"])]
    out.update(
        ratio=round(out["ours_tok_s"] / out["raw_tok_s"], 3),
        ratio_cpu=round(out["ours_cpu_tok_s"] / out["raw_cpu_tok_s"], 3),
        pair_ratio_median=round(statistics.median(a / b for a, b in pairs), 3),
    )
    return out


def flops_per_token(config: dict, tuning: str, args) -> dict:
    from unified.models import flops as model_flops
    from unified.trainer.tuning import TuningConfig

    t = TuningConfig(method=tuning, trainable_layers=args.top_layers)
    return model_flops.training_flops(config, tuning, t.trainable_layers, t.lora_r, t.target_modules)


def raw_variant(path: str, tuning: str, args, steps: list[dict], name: str, **kwargs) -> dict:
    """A raw variant (another dtype, torch.compile) timed alone after its own warm-up."""
    import gc

    print(f"  {tuning} raw {name} ...", flush=True)
    variant = Raw(path, tuning, args, **kwargs)
    start = time.perf_counter()
    variant.step(steps[0]["batches"])  # compiles here
    first = time.perf_counter() - start
    for w in range(1, args.warmup):
        variant.step(steps[w % len(steps)]["batches"])
    xs = []
    for rep in range(args.steps):
        start = time.perf_counter()
        variant.step(steps[rep % len(steps)]["batches"])
        xs.append(steps[rep % len(steps)]["tokens"] / (time.perf_counter() - start))
    print(f"  {tuning} raw {name}: {statistics.median(xs):.1f} tok/s (first step {first:.1f} s)", flush=True)
    del variant
    gc.collect()
    return {
        f"raw_{name}_tok_s": round(statistics.median(xs), 2),
        f"raw_{name}_runs": [round(x, 2) for x in xs],
        f"raw_{name}_first_step_s": round(first, 1),
    }


def measure_tuning(path: str, tuning: str, args, steps: list[dict], pad_id: int, config: dict, extra=()) -> dict:
    import gc

    from unified.models import flops as model_flops

    ours = Ours(path, tuning, args, pad_id)
    raw = Raw(path, tuning, args, args.dtype)
    trainable = sum(p.numel() for p in raw.model.parameters() if p.requires_grad)
    per = flops_per_token(config, tuning, args)
    step_gflop = statistics.median(model_flops.step_flops(per, s["tokens"], s["response_tokens"]) for s in steps) / 1e9
    result = {
        **summarize(timed_pairs(ours, raw, steps, args, tuning), steps, per),
        "trainable_params": trainable,
        "gflop_per_token": round(per["per_token"] / 1e9, 4),
        "gflop_per_token_blocks": round(per["block"] / 1e9, 4),
        "gflop_per_token_head": round(per["head"] / 1e9, 4),
        "gflop_per_step": round(step_gflop, 2),
    }
    del ours, raw
    gc.collect()
    for name, kwargs in extra:
        result.update(raw_variant(path, tuning, args, steps, name, **kwargs))
    return result


def parse_args() -> argparse.Namespace:
    from unified.schema import AlgorithmConfig

    a = AlgorithmConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny or an HF folder")
    parser.add_argument(
        "--tunings", default=f"{DEFAULT_TUNING},lora", help="the first gives `ratio` and the top-level fraction (full: add it)"
    )
    parser.add_argument("--top-layers", type=int, default=4, help="trainable blocks for top_layers")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (the trainer's: 2)")
    parser.add_argument(
        "--dtype", default="auto", choices=("auto", "bfloat16", "float32"), help="compute dtype (auto: as model.dtype=auto)"
    )
    parser.add_argument("--micro-batch", type=int, default=a.micro_batch_size)
    parser.add_argument("--accum", type=int, default=a.accum_steps, help="micro-batches per gradient contribution")
    parser.add_argument("--update-steps", type=int, default=a.update_steps, help="contributions per optimizer step")
    parser.add_argument("--group", type=int, default=16, help="samples per prompt (rollout.n)")
    parser.add_argument(
        "--prompt-tokens", type=int, default=0, help="0: the real phase-1 prompts; N: each cut or cycled to N tokens"
    )
    parser.add_argument(
        "--response-tokens", type=int, default=192, help="the longest response (the budget); others 7/8, 6/8, 5/8 of it"
    )
    parser.add_argument("--steps", type=int, default=3, help="timed optimizer steps per path (median)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--compile", action="store_true", help="also the raw step under torch.compile (minutes to compile)")
    parser.add_argument("--no-other-dtype", action="store_true", help="skip the raw step in the other dtype")
    parser.add_argument("--peak-repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 samples per step, 48+32 tokens, 2 steps")
    args = parser.parse_args()
    if args.quick:
        args.micro_batch, args.accum, args.update_steps, args.group = 2, 1, 1, 2
        args.prompt_tokens, args.response_tokens, args.steps, args.peak_repeats = 48, 32, 2, 5
    args.warmup = max(1, args.warmup)
    return args


def measure_all(args, path: str, config: dict, steps: list[dict], pad_id: int) -> tuple[dict, list[dict]]:
    """Every tuning (the first with its raw variants), between two peak measurements."""
    from bench import peak

    tunings = [t.strip() for t in args.tunings.split(",") if t.strip()]
    other = "float32" if args.dtype != "float32" else "bfloat16"
    extra = [] if args.no_other_dtype else [(other, {"dtype": other})]
    extra += [("compile", {"dtype": args.dtype, "compile_": True})] if args.compile else []
    peaks = [peak.measure(args.dtype, args.threads, **peak.shape_of(config), repeats=args.peak_repeats)]
    results = {}
    for tuning in tunings:
        print(
            f"{tuning}: measuring ({steps[0]['tokens']} tokens in the first step, {args.dtype}, {args.threads} thread(s)) ...",
            flush=True,
        )
        results[tuning] = measure_tuning(path, tuning, args, steps, pad_id, config, extra if tuning == tunings[0] else ())
    peaks.append(peak.measure(args.dtype, args.threads, **peak.shape_of(config), repeats=args.peak_repeats))
    combined = peak.combined(peaks)
    for r in results.values():
        r["fraction"] = round(r["ours_gflops"] / combined["peak_gflops"], 3)
    return results, combined


def build_body(args, path: str, results: dict, combined: dict, steps: list[dict], load_start: float) -> dict:
    import torch

    from bench import peak
    from unified.models import flops as model_flops

    main_key = next(iter(results))
    r = results[main_key]
    raw_dtypes = {f"raw_{args.dtype}_tok_s": r["raw_tok_s"]}
    raw_dtypes.update({k: v for k, v in r.items() if k in ("raw_float32_tok_s", "raw_bfloat16_tok_s")})
    return {
        **peak.fraction_fields(r["ours_gflops"], combined, target_fraction=TARGET_FRACTION),
        "gflop_per_token": r["gflop_per_token"],
        "gflop_per_step": r["gflop_per_step"],
        "flops_formula": model_flops.TRAINING_FORMULA,
        "ratio": r["ratio"],
        "ratio_cpu": r["ratio_cpu"],
        "ratio_tuning": main_key,
        "target_ratio": TARGET_RATIO,
        "ours_tok_s": r["ours_tok_s"],
        "raw_tok_s": r["raw_tok_s"],
        "ours_cpu_tok_s": r["ours_cpu_tok_s"],
        "raw_cpu_tok_s": r["raw_cpu_tok_s"],
        **raw_dtypes,
        "raw_compile_tok_s": r.get("raw_compile_tok_s"),
        "tunings": results,
        "settings": {
            "model": args.model,
            "model_dir": Path(path).name,
            "dtype": args.dtype,
            "micro_batch": args.micro_batch,
            "accum": args.accum,
            "update_steps": args.update_steps,
            "group": args.group,
            "prompt_tokens": args.prompt_tokens or "phase-1 prompts",
            "response_tokens": args.response_tokens,
            "tokens_per_step": [s["tokens"] for s in steps],
            "response_tokens_per_step": [s["response_tokens"] for s in steps],
            "steps": args.steps,
            "warmup": args.warmup,
            "top_layers": args.top_layers,
            "tok_s": "real (non-padding) prompt + response tokens per second of optimizer steps",
        },
        "machine": {
            "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "load_avg_1m_start": round(load_start, 2),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
    }


def print_table(body: dict) -> None:
    print()
    print(
        f"{'tuning':<11} {'trainable':>11} {'ours tok/s':>11} {'raw tok/s':>10} {'ratio':>6} {'per CPU s: ours':>16} "
        f"{'raw':>6} {'ratio':>6} {'GFLOP/tok':>9} {'GFLOP/s':>8} {'fraction':>8}"
    )
    for t, r in body["tunings"].items():
        print(
            f"{t:<11} {r['trainable_params']:>11,} {r['ours_tok_s']:>11.1f} {r['raw_tok_s']:>10.1f} {r['ratio']:>6.3f} "
            f"{r['ours_cpu_tok_s']:>16.1f} {r['raw_cpu_tok_s']:>6.1f} {r['ratio_cpu']:>6.3f} {r['gflop_per_token']:>9} "
            f"{r['ours_gflops']:>8} {r['fraction']:>8}"
        )
    main_key, m = body["ratio_tuning"], body["machine"]
    for k in ("raw_float32_tok_s", "raw_bfloat16_tok_s", "raw_compile_tok_s"):
        if body.get(k) is not None:
            print(f"raw {main_key} {k[4:-6]}: {body[k]} tok/s")
    verdict = "ok" if body["ratio"] >= TARGET_RATIO else f"BELOW TARGET {TARGET_RATIO}"
    print(
        f"ratio ({main_key}, {body['dtype']}) {body['ratio']} ({verdict}), per CPU second {body['ratio_cpu']}; "
        f"{body['threads']} thread(s), load {m['load_avg_1m_start']} -> {m['load_avg_1m']}"
    )
    print(
        f"{body['dtype']}: {body['achieved_gflops']} GFLOP/s achieved of a {body['peak_gflops']} GFLOP/s peak: "
        f"fraction {body['fraction']} (target {TARGET_FRACTION})"
    )


def main() -> None:
    args = parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    from unified.models.resolve import load_tokenizer
    from unified.trainer.distributed import init_distributed, resolve_dtype

    args.requested_dtype, args.dtype = args.dtype, resolve_dtype(args.dtype, "cpu")
    print(f"compute dtype {args.dtype} (--dtype {args.requested_dtype}), {args.threads} thread(s)", flush=True)
    init_distributed("cpu")
    path = model_path(args.model)
    tok = load_tokenizer(path)
    config = json.loads((Path(path) / "config.json").read_text())
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    steps = build_steps(args, path, tok, config["vocab_size"], pad_id)
    load_start = os.getloadavg()[0]
    results, combined = measure_all(args, path, config, steps, pad_id)
    body = build_body(args, path, results, combined, steps, load_start)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUT, body, indent=2)
    print_table(body)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
