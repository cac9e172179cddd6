"""A real round's update, replayed: the samples one round of a run trained on, through the
learner with and without the update's levers, on the same machine, one after the other.

    python -m bench.update_replay RUN/round_1 [--arms before,now] [--repeats 1]

A round's `tasks.parquet` (kept tasks: the prompt) and `rollouts.parquet` (each answer, its
reward and kind) give the phase-5 samples: prompts chat-templated as the engine encodes
them, answers re-tokenized (the count may differ from the engine's by a token or two),
self-play answers marked constrained (their behaviour log-probs are recomputed, as in the
round). Each arm builds SmolLM2 with the default tuning (top 4 layers) and dtype `auto`,
a fresh AdamW, and runs `train_on_samples` with no engine; the figures are its wall and
CPU seconds. Arms:
- `before`: the full forward of every row, autocast casting frozen weights in every
  forward, the (B, R, vocab) logits (`algorithm.share_prompts=false
  algorithm.logprobs_from_hidden=false`, frozen weights released);
- `levers3`: shared prompts, frozen weights held in bf16, log-probs from the hidden states,
  without `algorithm.reuse_frozen_prefix`;
- `now`: the defaults (all four: the recomputed answers train from their frozen blocks' kept
  output).
Writes logs/bench/update_replay.json with `ratio` = now / before. Read it on an idle
machine: a vLLM process beside it skews it several-fold.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from bench.common import REPO, write_json
from unified.models import smollm2  # noqa: E402
from unified.trainer.aggregator import build_aggregator  # noqa: E402
from unified.trainer.config import AlgorithmConfig  # noqa: E402
from unified.trainer.distributed import init_distributed, resolve_dtype  # noqa: E402
from unified.trainer.frozen_cast import release_frozen_weights  # noqa: E402
from unified.trainer.policy import build_policy  # noqa: E402
from unified.trainer.tuning import TuningConfig  # noqa: E402
from unified.trainer.update import train_on_samples  # noqa: E402
from unified.types import Sample  # noqa: E402

SELF_PLAY = ("induction", "deduction", "abduction")  # decoded in answer shapes by default
ARMS = {
    "before": {"share_prompts": False, "logprobs_from_hidden": False, "hold_frozen": False, "reuse_frozen_prefix": False},
    "levers3": {"share_prompts": True, "logprobs_from_hidden": True, "hold_frozen": True, "reuse_frozen_prefix": False},
    "now": {"share_prompts": True, "logprobs_from_hidden": True, "hold_frozen": True, "reuse_frozen_prefix": True},
}


def round_samples(round_dir: Path, tokenizer) -> list[Sample]:
    """The round's phase-5 samples, rebuilt from its Parquet files."""
    import pyarrow.parquet as pq

    tasks = {t["task_id"]: t for t in pq.read_table(round_dir / "tasks.parquet").to_pylist() if t["kept"]}
    rollouts = pq.read_table(round_dir / "rollouts.parquet").to_pylist()
    groups: dict[str, int] = {}
    prompts: dict[str, tuple[int, ...]] = {}
    samples = []
    for r in rollouts:
        task = tasks.get(r["task_id"])
        if task is None:
            continue
        if r["task_id"] not in prompts:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": task["prompt"]}], tokenize=False, add_generation_prompt=True
            )
            prompts[r["task_id"]] = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
            groups[r["task_id"]] = len(groups)
        ids = tuple(tokenizer(r["completion"], add_special_tokens=False)["input_ids"])
        samples.append(
            Sample(
                prompts[r["task_id"]],
                ids,
                (0.0,) * len(ids),
                float(r["reward"]),
                groups[r["task_id"]],
                0,
                r["kind"],
                constrained=r["kind"] in SELF_PLAY,
            )
        )
    return samples


def run_arm(name: str, samples: list[Sample], pad_token_id: int) -> dict:
    arm = ARMS[name]
    policy = build_policy(
        str(smollm2.model_dir()),
        device=init_distributed("cpu").device,
        dtype="auto",
        tuning=TuningConfig(method="top_layers", trainable_layers=4),
    )
    if not arm["hold_frozen"]:
        release_frozen_weights(policy.module)
    # every answer counts as fresh: in the round, phase 5 generated each chunk at the version then current,
    # and none was dropped as stale; here all carry version 0, and the default staleness bound would drop some
    cfg = replace(
        AlgorithmConfig(),
        share_prompts=arm["share_prompts"],
        logprobs_from_hidden=arm["logprobs_from_hidden"],
        reuse_frozen_prefix=arm["reuse_frozen_prefix"],
        max_staleness=1 << 30,
    )
    aggregator = build_aggregator(cfg, policy)
    wall, cpu = time.perf_counter(), time.process_time()
    stats = train_on_samples(samples, aggregator, cfg, engine=None, temperature=0.8, pad_token_id=pad_token_id)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "steps": stats.steps,
        "tokens": stats.tokens,
        "used": stats.used,
        "recomputed": stats.recomputed,
        "grad_norm": stats.grad_norm,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("round_dir", type=Path, help="a run's round_N folder (tasks.parquet, rollouts.parquet)")
    p.add_argument("--arms", default="before,now", help=f"comma-separated, of {sorted(ARMS)}")
    p.add_argument("--groups", type=int, default=None, help="only the first N groups (a quick check)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each arm, alternated; figures are medians")
    p.add_argument("--output", type=Path, default=REPO / "logs" / "bench" / "update_replay.json")
    args = p.parse_args()
    arms = args.arms.split(",")
    if unknown := [a for a in arms if a not in ARMS]:
        p.error(f"unknown arm(s) {unknown}: choose from {sorted(ARMS)}")
    if not (args.round_dir / "rollouts.parquet").is_file():
        p.error(f"{args.round_dir} has no rollouts.parquet: give a run's round_N folder")
    torch.set_num_threads(2)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2.model_dir()))
    samples = round_samples(args.round_dir, tokenizer)
    if args.groups is not None:
        samples = [s for s in samples if s.group < args.groups]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    runs: dict[str, list[dict]] = {a: [] for a in arms}
    for _ in range(args.repeats):
        for a in arms:
            runs[a].append(run_arm(a, samples, pad))
            print(f"{a}: {runs[a][-1]['wall_s']:.1f} s wall, {runs[a][-1]['cpu_s']:.1f} CPU s", flush=True)
    med = {a: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s")} for a, rs in runs.items()}
    result = {
        "round_dir": str(args.round_dir),
        "samples": len(samples),
        "answer_tokens": sum(len(s.token_ids) for s in samples),
        "median": med,
        "runs": runs,
        "settings": {
            "arms": {a: ARMS[a] for a in arms},
            "dtype": resolve_dtype("auto", "cpu"),
            "threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "repeats": args.repeats,
        },
    }
    if "before" in med and "now" in med:
        result["ratio"] = med["now"]["wall_s"] / med["before"]["wall_s"]
        result["ratio_cpu"] = med["now"]["cpu_s"] / med["before"]["cpu_s"]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output, result, indent=1)
    print(
        " | ".join(f"{a} {m['wall_s']:.1f} s" for a, m in med.items())
        + (f" | now/before {result['ratio']:.3f}" if "ratio" in result else "")
        + f" -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
