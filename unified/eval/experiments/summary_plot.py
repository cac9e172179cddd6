"""The front page's picture, from the headline result's JSON alone: nothing typed.

    python -m unified.eval.experiments.summary_plot [--result docs/results/test_time_gain.json]
        [--output docs/summary.png]

Left: greedy pass@1 per seed, the untrained control against the trained weights, each seed's
flips (gained / lost) and McNemar p, computed from the result's record. Right: the same
result's rounds, per seed: its run's own greedy pass@1 at each round's start (`eval/pass@1`
in `metrics_per_round`: the weights after the rounds before it) and the evaluation after the
last, with the control as a line; a result that recorded none says so there. Both panels
name the file. No timings: the picture shows what was learned, not how fast.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from unified.cli import exit_code
from unified.errors import UserError
from unified.eval.experiments.record import REPO, Record

RESULTS = REPO / "docs" / "results"


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {path} as a result JSON ({e}); give one written by unified.eval.experiments.gain") from None


def source(result: Path) -> str:
    """What a picture was drawn from, stored in the PNG (`Source`): the result's name and the
    digest of its bytes, so a picture left behind by a changed result is found (the tests)."""
    return f"{result.name} sha256:{hashlib.sha256(result.read_bytes()).hexdigest()}"


def drawn_from(png: Path) -> str | None:
    """The `Source` a picture was drawn from (`source`), None for one drawn without it."""
    from PIL import Image

    with Image.open(png) as image:
        return image.info.get("Source")


def plot(result: Path, out: Path) -> Path:
    """Write the two panels as `out` (atomically)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    body = load(result)
    record = Record.from_gain(result.name, body)
    if not record.figures():
        raise UserError(f"{result} has no per-seed outcomes to plot")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    try:
        _seeds_panel(left, record)
        split = body.get("split") or (body.get("settings") or {}).get("split")
        label = f"{result.name}: {len(record.aligned()[0])} {split + ' ' if split else ''}problems"
        _curve_panel(right, curves(body), record.control_pass_at_1(), label)
        fig.tight_layout()
        tmp = out.with_name(f".{out.stem}.tmp{os.getpid()}.png")
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(tmp, dpi=100, format="png", metadata={"Source": source(result)})
        os.replace(tmp, out)
    finally:
        plt.close(fig)
    return out


def _seeds_panel(ax, record: Record) -> None:
    figures, control = record.figures(), record.control_pass_at_1()
    xs = list(range(len(figures)))
    ax.bar([x - 0.2 for x in xs], [control] * len(xs), width=0.4, color="tab:gray", label=f"untrained control {control:.2f}")
    ax.bar([x + 0.2 for x in xs], [f.pass_at_1 for f in figures], width=0.4, color="tab:green", label="after training")
    for x, f in zip(xs, figures):
        label = f"+{f.gained} / -{f.lost}\np {f.mcnemar_p:.2g}"
        ax.text(x + 0.2, f.pass_at_1 + 0.005, label, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, [f"seed {f.seed}" for f in figures])
    ax.set_ylim(0, max([control, *(f.pass_at_1 for f in figures)]) * 1.4)
    ax.set_ylabel("greedy pass@1 (hidden tests)")
    ax.set_title(f"{record.name}: {record.benchmark} {len(record.aligned()[0])} problems, {record.rounds} rounds", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)


def curves(body: dict) -> dict[int, list[tuple[int, float]]]:
    """seed -> (rounds trained, greedy pass@1) from its run's own round-start evaluations and
    the evaluation after its last round; seeds that recorded no round-start evaluation are left out."""
    out = {}
    for seed in body.get("seeds", []):
        rounds = seed.get("metrics_per_round") or []
        points = [(k, r["eval/pass@1"]) for k, r in enumerate(rounds) if r.get("eval/pass@1") is not None]
        if points and seed.get("pass_at_1_after") is not None:
            out[seed["seed"]] = points + [(len(rounds), seed["pass_at_1_after"])]
    return out


def _curve_panel(ax, seeds: dict[int, list[tuple[int, float]]], control: float, name: str) -> None:
    if not seeds:
        ax.text(
            0.5,
            0.5,
            f"{name}: no round-start evaluations recorded",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="grey",
        )
        return
    for seed, points in sorted(seeds.items()):
        ax.plot([k for k, _ in points], [v for _, v in points], marker="o", label=f"seed {seed}")
    ax.axhline(control, color="tab:gray", linestyle="--", label=f"untrained control {control:.2f}")
    ax.set_ylim(bottom=0)
    ax.set_xticks(sorted({k for points in seeds.values() for k, _ in points}))
    ax.set_xlabel("rounds trained")
    ax.set_ylabel("greedy pass@1 (hidden tests)")
    ax.set_title(f"{name}:\neach seed's run after each round", fontsize=9)
    ax.legend(loc="lower right", fontsize=8)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--result", type=Path, default=RESULTS / "test_time_gain.json", help="the headline result (per seed)")
    p.add_argument("--output", type=Path, default=REPO / "docs" / "summary.png")
    return p


def main() -> int:
    args = parser().parse_args()
    print(f"wrote {plot(args.result, args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(exit_code(main, "run it again"))
