"""The confirm result's goals (issue 58), read off a gain result: each with its target, what
the result reached and whether that meets it. Nothing is computed anew: every figure is one
`gain.py` wrote (its planned analysis, `planned.py`), so this is the checklist a reader would
otherwise tick by hand, and where a goal is not met it says what was reached.

    python -m unified.eval.experiments.goals [docs/results/test_time_gain.json] [--write]

Prints the goals as a markdown table (docs/results/README.md takes it as it is); `--write`
stores them in the result as `goals` ({goal, target, reached, met} each, and `met`/`of`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from unified.benchmarks.mbpp import REMOVED_IN_V02
from unified.eval.experiments.record import REPO

GAIN, SEED_P, PERMUTATION_P, REPRODUCED, TO_GOAL_MIN = 0.13, 0.05, 0.01, 0.8, 15.0
STEP_NAMES = {"phase_1_4": "phases 1-4", "phase_5": "phase 5", "consolidation": "consolidation"}


def _problems(r: dict):
    ids = r.get("problems") or []
    removed = sorted(set(ids) & set(REMOVED_IN_V02))
    return f"{len(ids)}, {len(removed)} removed by EvalPlus", len(ids) >= 90 and not removed


def _seed_p(r: dict):
    ps = [s.get("mcnemar_p") for s in (r.get("per_seed") or {}).values()]
    if not ps or None in ps:
        return None, False
    return f"max {max(ps):.3g} ({', '.join(f'{p:.3g}' for p in ps)})", max(ps) < SEED_P


def _filter(r: dict):
    base = r.get("sample_filter_baseline") or {}
    trained, plain = base.get("trained_select_visible_n8"), base.get("pass_at_1")
    if trained is None or plain is None:
        return None, False
    text = f"{trained:.3f} trained (n = 8) vs {plain:.3f} untrained ({base.get('samples_per_problem')} samples)"
    return text, trained > plain


def _reproduced(r: dict):
    last = [rows[-1] for rows in (r.get("consolidation") or {}).values() if rows]
    if not last:
        return None, False
    shares = [row["reproduced"] / row["targets"] if row.get("targets") else 1.0 for row in last]
    return f"min {min(shares):.2f} ({', '.join(f'{s:.2f}' for s in shares)})", min(shares) >= REPRODUCED


def _to_goal(r: dict):
    block = r.get("to_goal") or {}
    minutes = block.get("median_minutes")
    if minutes is None:
        return None, False
    # the median seed's minutes by step (`arm_gap.to_goal`): what a lever would have to shorten
    median = next((s for s in (block.get("per_seed") or {}).values() if s and s.get("minutes") == minutes), None)
    steps = (median or {}).get("minutes_by_step") or {}
    where = f" ({', '.join(f'{STEP_NAMES.get(k, k)} {v:.1f}' for k, v in steps.items())})" if steps else ""
    return f"{minutes:.1f} min{where}", minutes <= TO_GOAL_MIN


def _value(key: str, test):
    def read(r: dict):
        value = r.get(key)
        return value, value is not None and test(value)

    return read


# (goal, target, how it is read off the result: -> (reached, met))
GOALS = (
    ("split", "confirm", _value("split", lambda v: v == "confirm")),
    ("problems", ">= 90, none of EvalPlus's removed tasks", _problems),
    ("recipe_commit", "named (gain.py refuses one that is not an ancestor of its code)", _value("recipe_commit", bool)),
    ("seeds", ">= 5", lambda r: (len(r.get("seeds") or []), len(r.get("seeds") or []) >= 5)),
    ("control_repeats", ">= 3", _value("control_repeats", lambda v: v >= 3)),
    ("settings.cpu", "recorded", lambda r: ((r.get("settings") or {}).get("cpu", {}).get("kind"),) * 2),
    ("gain", f">= +{GAIN}", _value("gain", lambda v: v >= GAIN)),
    ("every seed's McNemar p", f"< {SEED_P}", _seed_p),
    ("permutation_p", f"< {PERMUTATION_P}", _value("permutation_p", lambda v: v < PERMUTATION_P)),
    ("select_visible vs sample_filter_baseline", "trained > untrained at equal samples", _filter),
    ("consolidation reproduced / targets, last round", f">= {REPRODUCED} every seed", _reproduced),
    ("to_goal, median seed", f"<= {TO_GOAL_MIN:g} min", _to_goal),
    ("generated_tokens_per_gained_problem", "reported", _value("generated_tokens_per_gained_problem", bool)),
)


def goals(result: dict) -> dict:
    rows = []
    for name, target, read in GOALS:
        reached, met = read(result)
        if isinstance(reached, float):
            reached = float(f"{reached:.4g}")  # significant digits: a p of 2e-05 must not read 0.0
        if isinstance(reached, dict):
            reached = f"{len(reached)} seeds, median {statistics.median(reached.values()):.0f}" if reached else None
        rows.append({"goal": name, "target": target, "reached": reached, "met": bool(met)})
    return {"rows": rows, "met": sum(r["met"] for r in rows), "of": len(rows)}


def table(checked: dict) -> str:
    lines = ["| goal | target | reached | met |", "|---|---|---|---|"]
    for r in checked["rows"]:
        lines.append(f"| {r['goal']} | {r['target']} | {r['reached']} | {'yes' if r['met'] else '**no**'} |")
    return "\n".join(lines + [f"\n{checked['met']} of {checked['of']} met."])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("result", nargs="?", type=Path, default=REPO / "docs" / "results" / "test_time_gain.json")
    p.add_argument("--write", action="store_true", help="store the goals in the result as `goals`")
    args = p.parse_args(argv)
    body = json.loads(args.result.read_text())
    checked = goals(body)
    print(table(checked))
    if args.write:
        body["goals"] = checked
        args.result.write_text(json.dumps(body, indent=1) + "\n")
        print(f"wrote `goals` into {args.result}")


if __name__ == "__main__":
    main()
