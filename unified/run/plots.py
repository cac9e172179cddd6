"""One PNG per run from its per-round metrics JSONL.

    python -m unified.run.plots logs/<run>/metrics.jsonl [out.png]

`plot_run(metrics_jsonl, out_png)` reads one JSON object per line (one per round):
`round`, `reward/<kind>` for each task kind, `eval/pass@1` (null when not evaluated
that round), `time/phase_1_4`, `time/phase_5`, `time/push`, ... Missing keys, nulls,
NaNs and unreadable lines are skipped; a series with no points is left out of its
panel. Panels: reward per task type (distinct markers and dashes, so equal curves stay
visible), pass@1, phase and push times (push on its own
right-hand axis: it is milliseconds next to minutes).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from unified.files import read_jsonl
from unified.kinds import TASK_KINDS

REWARD_KEYS = tuple(f"reward/{kind}" for kind in TASK_KINDS)
# Equal rewards (e.g. every answer at the format penalty) draw the lines on top of each
# other: big hollow, medium and small filled markers with different dashes keep them all
# visible where they coincide (a fourth kind starts the styles over).
_STYLES = (
    dict(marker="o", markersize=9, markerfacecolor="none", linestyle="-", linewidth=2.5),
    dict(marker="s", markersize=6, linestyle="--", linewidth=1.8),
    dict(marker="^", markersize=4, linestyle=":", linewidth=1.2),
)
REWARD_STYLE = {key: _STYLES[i % len(_STYLES)] for i, key in enumerate(REWARD_KEYS)}
PASS_KEY = "eval/pass@1"
PHASE_KEYS = ("time/phase_1_4", "time/phase_5")
PUSH_KEY = "time/push"


def read_metrics(path: str | Path) -> list[dict]:
    """The rounds in file order; lines that are blank or not JSON objects are skipped."""
    rows = read_jsonl(path)
    for i, row in enumerate(rows):
        r = row.get("round")
        if isinstance(r, bool) or not isinstance(r, (int, float)):
            row["round"] = i + 1
    return rows


def series(rows: list[dict], key: str) -> tuple[list, list]:
    """(rounds, values) where `key` holds a finite number."""
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        xs.append(row["round"])
        ys.append(float(value))
    return xs, ys


def _plot(ax, rows, key, label=None, **kw) -> bool:
    xs, ys = series(rows, key)
    if not xs:
        return False
    style = {"marker": "o", "markersize": 3, **kw}
    ax.plot(xs, ys, label=label or key.split("/", 1)[-1], **style)
    return True


def _empty(ax, text="no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")


def plot_run(
    metrics_jsonl: str | Path, out_png: str | Path, title: str | None = None, final_pass_at_1: float | None = None
) -> Path:
    """Three panels over the rounds: reward per task kind, greedy pass@1 (each round's start,
    and `final_pass_at_1`, the final weights', after the last round), phase times and the push
    (axes from zero). Written atomically (a half-written PNG is never visible)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_jsonl)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax_r, ax_p, ax_t) = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    try:
        fig.suptitle(title or Path(metrics_jsonl).parent.name or "run")
        _rewards_panel(ax_r, rows)
        _pass_panel(ax_p, rows, final_pass_at_1)
        _times_panel(ax_t, rows)
        fig.tight_layout()
        tmp = out_png.with_name(f".{out_png.stem}.tmp{os.getpid()}.png")
        fig.savefig(tmp, dpi=100, format="png")
        os.replace(tmp, out_png)
    finally:
        plt.close(fig)
    return out_png


def _rewards_panel(ax, rows: list[dict]) -> None:
    drawn = [_plot(ax, rows, k, **REWARD_STYLE[k]) for k in REWARD_KEYS]
    ax.set_ylabel("mean reward")
    ax.set_title("reward by task type")
    if any(drawn):
        ax.legend(loc="best", fontsize=8)
    else:
        _empty(ax)


def _pass_panel(ax, rows: list[dict], final: float | None = None) -> None:
    drawn = _plot(ax, rows, PASS_KEY, label="at the round's start", color="tab:green")
    if final is not None:
        last = max((r["round"] for r in rows), default=0)
        ax.plot(
            [last + 1],
            [final],
            marker="*",
            markersize=10,
            linestyle="none",
            color="tab:green",
            label=f"final weights {final:.3f}",
        )
    if drawn or final is not None:
        ax.legend(loc="best", fontsize=8)
    else:
        _empty(ax, "not evaluated")
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("pass@1")
    ax.set_title("greedy pass@1")


def _times_panel(ax, rows: list[dict]) -> None:
    """Phase seconds on the left axis, the push in ms on a twin axis; the round axis."""
    from matplotlib.ticker import MaxNLocator

    handles = [k for k in PHASE_KEYS if _plot(ax, rows, k)]
    ax.set_ylabel("seconds")
    ax.set_title("phase times and weight push")
    ax_push = ax.twinx()
    xs, ys = series(rows, PUSH_KEY)
    if xs:
        ax_push.plot(xs, [y * 1000 for y in ys], marker="x", markersize=4, linestyle="--", color="tab:red", label="push")
        ax_push.set_ylabel("push (ms)", color="tab:red")
        handles.append(PUSH_KEY)
    else:
        ax_push.set_yticks([])
    if handles:
        lines = ax.get_lines() + ax_push.get_lines()
        ax.legend(lines, [ln.get_label() for ln in lines], loc="best", fontsize=8)
    else:
        _empty(ax)
    ax.set_ylim(bottom=0)  # from zero: noise between rounds does not read as a trend
    ax_push.set_ylim(bottom=0)
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole numbers
    rounds = [r["round"] for r in rows if isinstance(r.get("round"), (int, float))]
    if len(set(rounds)) == 1:  # one round: give the axis some width around it
        ax.set_xlim(rounds[0] - 1, rounds[0] + 1)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or len(argv) > 2:
        print("usage: python -m unified.run.plots METRICS.jsonl [OUT.png]", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    src = Path(argv[0])
    if not src.is_file():
        print(f"error: no metrics file {str(src)!r}", file=sys.stderr)
        return 2
    out = Path(argv[1]) if len(argv) > 1 else src.with_suffix(".png")
    print(plot_run(src, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
