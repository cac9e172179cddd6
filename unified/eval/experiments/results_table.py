"""Every committed test-time result at a glance, recomputed from its per-problem outcomes.

    python -m unified.eval.experiments.results_table [--dir docs/results] [--check FILE.md | --write FILE.md]

For each `test_time_gain*.json` (learning_gain's result) and `transfer*.json` (transfer's) in
`--dir`: the greedy control, each seed's pass@1, flips and McNemar's exact p, recomputed here
from the per-problem 0/1 outcomes the JSON holds (the control's noisy problems left out, as
the bench does), next to the paired interval the JSON stored. A figure the JSON states that
the per-problem outcomes do not give (its gain per seed, its flips) is an error: the table is
only printed from results that agree with themselves.

`--check FILE` compares the table with the block between `<!-- results-table -->` and
`<!-- /results-table -->` in FILE (and the headline rows, `<!-- headline -->`, and the
confirm result's goals, `<!-- goals -->`, where FILE has those blocks) and exits 1, with one line, when they differ (the test
suite runs it on docs/results/README.md and on the front-page README.md, which shows the same
table, so neither can drift from the JSONs); without it the table is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from unified.eval.experiments.goals import goals as read_goals
from unified.eval.experiments.goals import table as goals_markdown
from unified.eval.experiments.record import REPO, Inconsistent, Record, stated
from unified.eval.gain_stats import flips, mcnemar_exact_p

BEGIN, END = "<!-- results-table -->", "<!-- /results-table -->"
HEADER = (
    "| result | problems | recipe | rounds | control | after, per seed | flips, per seed | "
    "McNemar p, per seed | 95 % interval of the gain |\n|---|---|---|---|---|---|---|---|---|"
)


def _recipe(body: dict) -> str:
    """What trained, from the run's resolved config: the kinds (with their shares under a mix)
    and where solve's labels came from when not from the visible examples."""
    settings = body.get("settings") or {}
    pipeline = (settings.get("train_config") or {}).get("pipeline") or {}
    if not pipeline:
        return "`" + " ".join(settings.get("overrides") or []) + "`"
    kinds = " + ".join(m.replace(":", " ") for m in pipeline.get("mix") or []) or " + ".join(pipeline.get("kinds") or [])
    source = pipeline.get("solve_source") or "visible"
    discovery = f", discovery {pipeline['discovery_n']}" if pipeline.get("discovery_n") else ""
    rounds = pipeline.get("discovery_rounds") or 0  # 0 or absent: the budget every round
    discovery += f" in round{'s 1-' if rounds > 1 else ' '}{rounds}" if discovery and rounds else ""
    replay = " + replay" if pipeline.get("replay") else ""
    algorithm = (settings.get("train_config") or {}).get("algorithm") or {}
    supervised = f" + supervised term {algorithm['sft_coef']:g}" if algorithm.get("sft_coef") else ""
    passes = algorithm.get("consolidate_passes")
    consolidation = f" + consolidation ({passes} passes)" if passes else ""
    return kinds + ("" if source == "visible" else f", {source} labels") + discovery + replay + supervised + consolidation


def _cells(record: Record, body: dict) -> str:
    """The row's control, per-seed pass@1, flips, McNemar p and interval cells, computed from the
    record; what `body` states (its flips, gains per seed: `record.stated`) must agree (`Record.check`)."""
    record.check(stated(body))
    figures = record.figures()
    ci = stated(body).get("ci95")
    interval = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "-"
    return (
        f"{record.control_pass_at_1():.3f} | {', '.join(f'{f.pass_at_1:.3f}' for f in figures)} | "
        f"{', '.join(f'+{f.gained} / -{f.lost}' for f in figures)} | {', '.join(_p(f.mcnemar_p) for f in figures)} | {interval}"
    )


def gain_row(name: str, body: dict) -> str | None:
    """One gain result as a table row (None: not a per-seed result)."""
    record = Record.from_gain(name, body)
    control, seeds = record.aligned()
    if not control or not seeds:
        return None
    return f"| `{name}` | {record.benchmark} {len(control)} | {_recipe(body)} | {body.get('rounds')} | {_cells(record, body)} |"


def transfer_row(name: str, body: dict) -> str | None:
    """A transfer result (trained weights on problems never trained on) as a table row, per
    seed, computed like `gain_row` against the first control evaluation."""
    record = Record.from_transfer(name, body)
    if record is None or not all(record.aligned()):
        return None
    return (
        f"| `{name}` (untrained problems) | {body.get('source', '?').split('/')[-1]}'s weights on "
        f"{len(record.aligned()[0])} others | as trained | - | {_cells(record, body)} |"
    )


def select_row(name: str, body: dict) -> str | None:
    """A gain result's `select_visible` block (`--select visible`: per problem the first of n
    samples passing the visible examples, else the greedy answer) as a row: the control and seed
    0's weights filtered alike, flips and McNemar p recomputed from its per-problem outcomes."""
    block = body.get("select_visible") or {}
    before, after = block.get("per_problem_control") or {}, block.get("per_problem_after") or {}
    if not before or set(before) != set(after):
        return None
    gained, lost = flips(before, after)
    if (block.get("flips_gained"), block.get("flips_lost")) != (gained, lost):
        raise Inconsistent(
            f"{name}: select_visible states +{block.get('flips_gained')}/-{block.get('flips_lost')}, "
            f"per problem +{gained}/-{lost}"
        )
    scored = [i for i in before if before[i] is not None and after[i] is not None]  # as pass@1 counts
    rate = lambda d: sum(1 for i in scored if d[i]) / len(scored)  # noqa: E731
    return (
        f"| `{name}` (filtered by the visible examples, n={block.get('n')}, seed {block.get('seed', 0)}) | "
        f"{body.get('benchmark', 'mbpp')} {len(scored)} | as trained | {body.get('rounds')} | {rate(before):.3f} | "
        f"{rate(after):.3f} | +{gained} / -{lost} | {_p(mcnemar_exact_p(gained, lost))} | - |"
    )


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}".rstrip("0").rstrip(".")


def table(folder: Path) -> str:
    rows = []
    for path in sorted(folder.glob("test_time_gain*.json")):
        if row := gain_row(path.name, json.loads(path.read_text())):
            rows.append(row)
    for path in sorted(folder.glob("test_time_gain*.json")):
        if row := select_row(path.name, json.loads(path.read_text())):
            rows.append(row)
    for path in sorted(folder.glob("transfer*.json")):
        if row := transfer_row(path.name, json.loads(path.read_text())):
            rows.append(row)
    return "\n".join([HEADER, *rows])


# The front page's headline rows: (what it is, its JSON). README.md shows them between
# HEADLINE_BEGIN and HEADLINE_END, written by `--write README.md`.
HEADLINE = (
    (
        "**the confirm split**, 94 problems no decision saw: the default since 2026-11-29 (the self-play mix, groups of 8, "
        "32 samples in round 1 where none passed yet, the supervised term, consolidation; 5 seeds, Intel Xeon)",
        "test_time_gain.json",
    ),
    (
        "exploratory, on the 100 problems that chose it: the default of 2026-11-28 (the self-play mix, groups of 8, "
        "32 samples where none passed yet, replay, the supervised term; 3 seeds, AMD EPYC)",
        "test_time_gain_report_2026-11-28.json",
    ),
    (
        "the self-play mix, groups of 8 alone: the default until 2026-11-28 (3 seeds, AMD EPYC)",
        "test_time_gain_n8_2026-11-28.json",
    ),
    ("the self-play mix with groups of 16 (3 seeds, AMX Xeon)", "test_time_gain_mix.json"),
    ("solve alone (3 seeds)", "test_time_gain_solo.json"),
    ("label-free: solve on agreement labels (3 seeds)", "test_time_gain_labelfree.json"),
    ("transfer: the mix's weights on 100 untrained problems", "transfer_mbpp_mix.json"),
)
HEADLINE_BEGIN, HEADLINE_END = "<!-- headline -->", "<!-- /headline -->"
HEADLINE_HEADER = (
    "| result | problems | greedy pass@1: control -> after, per seed | flips (McNemar p), per seed | "
    "95 % interval of the gain (problems resampled; and seeds, where planned) | JSON |\n|---|---|---|---|---|---|"
)


def headline(folder: Path) -> str:
    """The headline rows, computed from each JSON's record like the full table."""
    rows = []
    for label, name in HEADLINE:
        body = json.loads((folder / name).read_text())
        record = Record.read(name, body)
        _cells(record, body)  # the JSON agrees with itself, or Inconsistent
        # the planned interval (problems and seeds resampled, `planned.py`) where the result has it, else
        # the problems-only bootstrap every earlier result states (the header says which)
        figures, ci = record.figures(), body.get("ci95_problems_seeds") or stated(body)["ci95"]
        rows.append(
            f"| {label} | {record.benchmark} {len(record.aligned()[0])} | {record.control_pass_at_1():.2f} -> "
            f"{', '.join(f'{f.pass_at_1:.2f}' for f in figures)} | "
            f"{', '.join(f'+{f.gained} / -{f.lost} ({_p(f.mcnemar_p)})' for f in figures)} | "
            f"{f'[{ci[0]:+.3f}, {ci[1]:+.3f}]' if ci else '-'} | [{name}](docs/results/{name}) |"
        )
    return "\n".join([HEADLINE_HEADER, *rows])


GOALS_BEGIN, GOALS_END = "<!-- goals -->", "<!-- /goals -->"


def goals_table(folder: Path) -> str:
    """The headline result's goals (issue 58's targets, `goals.py`), read off `test_time_gain.json`."""
    return goals_markdown(read_goals(json.loads((folder / "test_time_gain.json").read_text())))


BLOCKS = ((BEGIN, END, table), (HEADLINE_BEGIN, HEADLINE_END, headline), (GOALS_BEGIN, GOALS_END, goals_table))


def check(readme: Path, expected: str, begin: str = BEGIN, end: str = END) -> str:
    """ "" when the README's block is the table, else one line saying what to do."""
    text = readme.read_text()
    if begin not in text or end not in text:
        return f"{readme}: no {begin} ... {end} block; add one where the table belongs"
    block = text.split(begin, 1)[1].split(end, 1)[0].strip()
    if block != expected.strip():
        return (
            f"{readme}: a generated block is out of date with the JSONs; run "
            f"`python -m unified.eval.experiments.results_table --write {readme.name}`"
        )
    return ""


def write(readme: Path, folder: Path) -> int:
    """Rewrite every generated block `readme` has; -> how many."""
    text, done = readme.read_text(), 0
    for begin, end, make in BLOCKS:
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text, done = f"{head}{begin}\n{make(folder)}\n{end}{rest.split(end, 1)[1]}", done + 1
    readme.write_text(text)
    return done


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", type=Path, default=REPO / "docs" / "results")
    p.add_argument("--check", type=Path, default=None, help="a markdown file whose generated blocks must be up to date")
    p.add_argument("--write", type=Path, default=None, help="rewrite the generated blocks of this markdown file")
    args = p.parse_args()
    try:
        if args.write is not None:
            print(f"{write(args.write, args.dir)} block(s) written in {args.write}")
            return 0
        if args.check is None:
            print(table(args.dir))
            return 0
        text = args.check.read_text()
        problems = [check(args.check, make(args.dir), b, e) for b, e, make in BLOCKS if b in text]
        problems = [x for x in problems if x] or ([] if any(b in text for b, _, _ in BLOCKS) else [check(args.check, "")])
    except Inconsistent as exc:
        print(f"results_table: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"results_table: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
