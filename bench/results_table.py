"""Every committed test-time result at a glance, recomputed from its per-problem outcomes.

    python bench/results_table.py [--dir docs/results] [--check docs/results/README.md]

For each `test_time_gain*.json` (learning_gain's result) and `transfer*.json` (transfer's) in
`--dir`: the greedy control, each seed's pass@1, flips and McNemar's exact p, recomputed here
from the per-problem 0/1 outcomes the JSON holds (the control's noisy problems left out, as
the bench does), next to the paired interval the JSON stored. A figure the JSON states that
the per-problem outcomes do not give (its gain per seed, its flips) is an error: the table is
only printed from results that agree with themselves.

`--check FILE` compares the table with the block between `<!-- results-table -->` and
`<!-- /results-table -->` in FILE and exits 1, with one line, when they differ (the test
suite runs it on docs/results/README.md and on the front-page README.md, which shows the same
table, so neither can drift from the JSONs); without it the table is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from unified.eval.gain_stats import flips, gain, mcnemar_exact_p  # noqa: E402

BEGIN, END = "<!-- results-table -->", "<!-- /results-table -->"
HEADER = ("| result | problems | recipe | rounds | control | after, per seed | flips, per seed | "
          "McNemar p, per seed | 95 % interval of the gain |\n|---|---|---|---|---|---|---|---|---|")  # fmt: skip


class Inconsistent(ValueError):
    """A JSON whose stated figures its own per-problem outcomes do not give."""


def _recipe(body: dict) -> str:
    """What trained, from the run's resolved config: the kinds (with their shares under a mix)
    and where solve's labels came from when not from the visible examples."""
    settings = body.get("settings") or {}
    pipeline = (settings.get("train_config") or {}).get("pipeline") or {}
    if not pipeline:
        return "`" + " ".join(settings.get("overrides") or []) + "`"
    kinds = " + ".join(m.replace(":", " ") for m in pipeline.get("mix") or []) or " + ".join(pipeline.get("kinds") or [])
    source = pipeline.get("solve_source") or "visible"
    return kinds + ("" if source == "visible" else f", {source} labels")


def _aligned(control: dict, seeds: list[tuple], noisy) -> tuple[dict[str, float], list[tuple]]:
    """(control, [(seed, after)]) over the problems scored in every one, noisy ones left out."""
    control = {i: v for i, v in control.items() if v is not None and i not in set(noisy or ())}
    ids = [i for i in control if all(after.get(i) is not None for _, after in seeds)]
    return {i: control[i] for i in ids}, [(s, {i: after[i] for i in ids}) for s, after in seeds]


def _cells(name: str, control: dict, seeds: list[tuple], stated: dict) -> str:
    """The row's control, per-seed pass@1, flips, McNemar p and interval cells, recomputed from
    the outcomes; `stated` (the JSON's own figures: flips, gain per seed, ci95) must agree."""
    afters, counts = [], []
    gains = stated.get("gain_per_seed") or []
    for k, (seed, after) in enumerate(seeds):
        g = gain(control, after)
        if k < len(gains) and abs(gains[k] - g) > 1e-9:
            raise Inconsistent(f"{name}: seed {seed}'s stated gain {gains[k]} is not its per-problem gain {g:.4f}")
        afters.append(f"{sum(after.values()) / len(after):.3f}")
        counts.append(flips(control, after))
    total = (sum(up for up, _ in counts), sum(down for _, down in counts))
    if (stated.get("flips_gained"), stated.get("flips_lost")) != total:
        raise Inconsistent(
            f"{name}: stated flips +{stated.get('flips_gained')}/-{stated.get('flips_lost')}, per problem +{total[0]}/-{total[1]}"
        )
    flipped = ", ".join(f"+{up} / -{down}" for up, down in counts)
    ps = ", ".join(_p(mcnemar_exact_p(up, down)) for up, down in counts)
    ci = stated.get("ci95")
    interval = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "-"
    return f"{sum(control.values()) / len(control):.3f} | {', '.join(afters)} | {flipped} | {ps} | {interval}"


def gain_row(name: str, body: dict) -> str | None:
    """One learning_gain result as a table row (None: not a per-seed result)."""
    seeds = [(int(s["seed"]), s.get("per_problem_after") or {}) for s in body.get("seeds") or []]
    control, seeds = _aligned(body.get("per_problem_before") or {}, seeds, body.get("noisy_problems"))
    if not control or not seeds:
        return None
    return (f"| `{name}` | {body.get('benchmark')} {len(control)} | {_recipe(body)} | {body.get('rounds')} | "
            f"{_cells(name, control, seeds, body)} |")  # fmt: skip


def transfer_row(name: str, body: dict) -> str | None:
    """A transfer result (trained weights on problems never trained on) as a table row, per
    seed, recomputed like `gain_row` against the first control evaluation."""
    t, outcomes = body.get("transfer"), body.get("per_problem") or {}
    if not t or not outcomes.get("control"):
        return None
    seeds = [(k, outcomes[k]) for k in sorted(outcomes, key=lambda k: (len(k), k)) if k.startswith("seed")]
    control, seeds = _aligned(outcomes["control"][0], seeds, t.get("noisy_problems"))
    if not control or not seeds:
        return None
    return (f"| `{name}` (untrained problems) | {body.get('source', '?').split('/')[-1]}'s weights on "
            f"{len(control)} others | as trained | - | {_cells(name, control, seeds, t)} |")  # fmt: skip


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}".rstrip("0").rstrip(".")


def table(folder: Path) -> str:
    rows = []
    for path in sorted(folder.glob("test_time_gain*.json")):
        if row := gain_row(path.name, json.loads(path.read_text())):
            rows.append(row)
    for path in sorted(folder.glob("transfer*.json")):
        if row := transfer_row(path.name, json.loads(path.read_text())):
            rows.append(row)
    return "\n".join([HEADER, *rows])


def check(readme: Path, expected: str) -> str:
    """ "" when the README's block is the table, else one line saying what to do."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        return f"{readme}: no {BEGIN} ... {END} block; add one where the table belongs"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    if block != expected.strip():
        return f"{readme}: the results table is out of date with the JSONs; paste the output of `python bench/results_table.py` between the markers"
    return ""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", type=Path, default=REPO / "docs" / "results")
    p.add_argument("--check", type=Path, default=None, help="a markdown file whose marked block must be the table")
    args = p.parse_args()
    try:
        text = table(args.dir)
    except Inconsistent as exc:
        print(f"results_table: {exc}", file=sys.stderr)
        return 1
    if args.check is None:
        print(text)
        return 0
    problem = check(args.check, text)
    if problem:
        print(f"results_table: {problem}", file=sys.stderr)
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
