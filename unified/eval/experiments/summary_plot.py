"""The front page's picture, from the headline result's JSON: nothing typed.

    python -m unified.eval.experiments.summary_plot [--result docs/results/test_time_gain_mix.json]
        [--curve docs/results/test_time_gain_curve_2026-11-27.json] [--output docs/summary.png]

Left: greedy pass@1 per seed, the untrained control against the trained weights, each seed's
flips (gained / lost) and McNemar p, computed from the result's record. Right: the curve of
rounds of the result that has one (`curve`: greedy pass@1 after each round of one seed), with
its control as a line. No timings: the picture shows what was learned, not how fast.
"""

from __future__ import annotations

import argparse
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


def plot(result: Path, curve: Path, out: Path) -> Path:
    """Write the two panels as `out` (atomically)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    record, curved = Record.from_gain(result.name, load(result)), load(curve)
    if not record.figures():
        raise UserError(f"{result} has no per-seed outcomes to plot")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    try:
        _seeds_panel(left, record)
        _curve_panel(right, curved.get("curve") or [], f"{curve.name}: {len(curved.get('problems') or [])} problems")
        fig.tight_layout()
        tmp = out.with_name(f".{out.stem}.tmp{os.getpid()}.png")
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(tmp, dpi=100, format="png")
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


def _curve_panel(ax, points: list[dict], name: str) -> None:
    if not points:
        ax.text(0.5, 0.5, f"{name} has no curve", ha="center", va="center", transform=ax.transAxes, color="grey")
        return
    rounds = [p["round"] for p in points]
    ax.plot(rounds, [p["pass_at_1"] for p in points], marker="o", color="tab:green", label="greedy pass@1 after the round")
    ax.axhline(points[0]["pass_at_1"], color="tab:gray", linestyle="--", label=f"untrained control {points[0]['pass_at_1']:.2f}")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("round")
    ax.set_title(f"{name}, one seed's rounds", fontsize=9)
    ax.legend(loc="lower right", fontsize=8)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--result", type=Path, default=RESULTS / "test_time_gain_mix.json", help="the headline result (per seed)")
    p.add_argument("--curve", type=Path, default=RESULTS / "test_time_gain_curve_2026-11-27.json", help="a result with a `curve` of rounds")
    p.add_argument("--output", type=Path, default=REPO / "docs" / "summary.png")
    args = p.parse_args()
    print(f"wrote {plot(args.result, args.curve, args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(exit_code(main, "run it again"))
