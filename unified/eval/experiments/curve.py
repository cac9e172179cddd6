"""The learning curve of a run: every round's checkpoint evaluated like the bench's "after"
(greedy pass@1, and `--n` samples for sampled pass@1 and pass@n), against rounds and
against the compute the run spent to get there.

    python -m unified.eval.experiments.curve RUN_DIR --problems-from docs/results/test_time_gain_curve_2026-11-27.json
        [--n 16] [--sampled-every K] [--jobs 2] [--before DIR] [--output logs/bench/curve.json] [--png logs/bench/curve.png]

RUN_DIR is a `train_unified.py` output folder that kept every round's checkpoint
(`trainer.save_every=1 trainer.keep_checkpoints=<rounds>`). Round 0 is the base model
(`--before`: a finished evaluation folder of it with the same n, e.g. the bench's `before`).
FLOPs come from the run's own token counts (`metrics.jsonl`: `compute/generation_tokens`,
`compute/update_tokens`, cumulative) times `unified/models/flops.py`'s per-token figures for the
checkpoint's config and the run's tuning method (matrix products only: a lower bound).
Each evaluation resumes; a finished one is not rerun. The curve's points are the keys of
issue 35's `curve`: `round`, `pass_at_1`, `sampled_pass_at_1`, `pass_at_16` (pass@n), `flops`.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from unified.eval.experiments.record import REPO, write_json
from unified.eval.experiments.rescore import evaluate
from unified.models.flops import generation_flops_per_token, training_flops


def checkpoints(run: Path) -> dict[int, Path]:
    root = run / "checkpoints"
    return {int(p.name.split("_")[1]): p for p in sorted(root.glob("round_*")) if (p / "manifest.json").exists()}


def cumulative_tokens(run: Path) -> dict[int, tuple[float, float]]:
    """round -> (generated, trained) tokens so far, from metrics.jsonl (the last row of a round wins)."""
    out = {0: (0.0, 0.0)}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[int(row["round"])] = (float(row.get("compute/generation_tokens", 0)), float(row.get("compute/update_tokens", 0)))
    return out


def sampled(round_: int, last: int, every: int) -> bool:
    """Whether a round's checkpoint gets the sampled evaluation: every `every`-th round and the last."""
    if every < 1:
        raise SystemExit(f"--sampled-every {every}: must be >= 1 (1 samples every round)")
    return round_ % every == 0 or round_ == last


def curve_points(
    evals: dict[int, dict], tokens: dict[int, tuple[float, float]], per_generated: float, per_trained: float, n: int
) -> list[dict]:
    """One point per evaluated round, in order: greedy pass@1, sampled pass@1, pass@n, FLOPs."""
    points = []
    for r in sorted(evals):
        body, (generated, trained) = evals[r], tokens.get(r, (float("nan"), float("nan")))
        k = body.get("pass_at_k", {})  # {} for a greedy-only round: its sampled figures are None
        points.append(
            {
                "round": r,
                "pass_at_1": body["pass@1"],
                "sampled_pass_at_1": k.get("1"),
                f"pass_at_{n}": k.get(str(n)),
                "flops": generated * per_generated + trained * per_trained,
            }
        )
    return points


def saturation(points: list[dict]) -> dict:
    """The round of the best greedy pass@1 and what the rounds after it added (<= 0: it saturated)."""
    best = max(points, key=lambda p: (p["pass_at_1"], -p["round"]))
    later = [p["pass_at_1"] for p in points if p["round"] > best["round"]]
    return {
        "best_round": best["round"],
        "best_pass_at_1": best["pass_at_1"],
        "after_best": (max(later) - best["pass_at_1"]) if later else None,
    }


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def plot(points: list[dict], n: int, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, x, label in (
        (axes[0], [p["round"] for p in points], "round"),
        (axes[1], [p["flops"] / 1e15 for p in points], "PFLOP (matrix products)"),
    ):
        for key, name in (("pass_at_1", "greedy pass@1"), ("sampled_pass_at_1", "sampled pass@1"), (f"pass_at_{n}", f"pass@{n}")):
            kept = [(xi, p[key]) for xi, p in zip(x, points) if p[key] is not None]  # greedy-only rounds: no sample point
            ax.plot([a for a, _ in kept], [b for _, b in kept], marker="o", label=name)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path)
    p.add_argument("--problems-from", type=Path, required=True, help="a bench JSON whose `problems` were trained on")
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--before", type=Path, default=None, help="a finished evaluation of the base model (round 0)")
    p.add_argument("--output", type=Path, default=REPO / "logs" / "bench" / "curve.json")
    p.add_argument("--png", type=Path, default=None)
    p.add_argument("--jobs", type=int, default=1, help="evaluations at once (each runs one thread: 2 fills a 2-core machine)")
    p.add_argument(
        "--sampled-every",
        type=int,
        default=1,
        metavar="K",
        help="sample (--n) only every K-th round and the last; greedy alone in between (an n=16 evaluation costs ~8x a greedy one)",
    )
    return p


def _evaluate_rounds(args, ids: list[str], kept: dict, config: dict) -> dict:
    """round -> its evaluation: round 0 the base model (--before, or evaluated here), then every checkpoint."""
    evals = {
        0: _json(args.before / "eval_results.json")
        if args.before
        else evaluate("mbpp", config["model"]["path"] or "tiny", ids, args.run / "curve" / "round_0", args.n)
    }
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each evaluation is its own one-thread process
        jobs = {
            r: pool.submit(
                evaluate,
                "mbpp",
                str(folder),
                ids,
                args.run / "curve" / f"round_{r}",
                args.n if sampled(r, max(kept), args.sampled_every) else 1,  # greedy alone in between
            )
            for r, folder in kept.items()
        }
    evals.update({r: job.result() for r, job in jobs.items()})
    return evals


def main() -> int:
    args = _parser().parse_args()
    ids = json.loads(args.problems_from.read_text())["problems"]
    kept = checkpoints(args.run)
    config = yaml.safe_load((args.run / "checkpoints" / kept[max(kept)].name / "config.yaml").read_text())
    model_config = json.loads((kept[max(kept)] / "model" / "config.json").read_text())
    evals = _evaluate_rounds(args, ids, kept, config)
    per_trained = training_flops(model_config, config["tuning"]["method"])["per_token"]
    points = curve_points(evals, cumulative_tokens(args.run), generation_flops_per_token(model_config), per_trained, args.n)
    result = {
        "run": str(args.run),
        "problems": ids,
        "n": args.n,
        "curve": points,
        "saturation": saturation(points),
        "flops": "generated tokens x 2 x params + trained tokens x the tuning's training FLOPs per token (unified/models/flops.py)",
    }
    write_json(args.output, result)
    if args.png:
        plot(points, args.n, args.png)
    for point in points:
        print(point)
    return 0


if __name__ == "__main__":
    sys.exit(main())
