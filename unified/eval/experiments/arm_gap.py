"""Recipes against each other when their controls ran on different CPU kinds.

    python -m unified.eval.experiments.arm_gap NAME=RESULT.json [NAME=RESULT.json ...] --output OUT.json
    python -m unified.eval.experiments.arm_gap n8=seed0.json+seeds12.json ...   # an arm's seeds from several runs

An arm given as `A.json+B.json` joins the seeds of results that ran against one control (the
same CPU kind and the same control outcomes, problem for problem; anything else is refused):
its figures are recomputed from the joined per-problem outcomes (`gain_stats.summary`).

bf16 greedy decoding differs between CPU kinds (an AVX512-BF16 AMD EPYC and an AMX Xeon
score different controls on the same problems), so an arm is compared with another only
through a control measured on its own CPU kind:

- same CPU kind and the same control outcomes: **paired** by seed (`gain_stats.versus`:
  per seed the problems only one arm solves, McNemar's exact p, a paired-bootstrap interval);
- otherwise: the **difference of the two gains**, each over its own CPU's control, per problem
  (mean over each arm's seeds of after - control), with a bootstrap interval over the problems
  both arms share (the problems are the same set; only the machines differ).

Every arm's own block (CPU kind, seeds, gain per seed, McNemar p per seed, generated tokens,
tokens per gained problem) is copied from its result JSON, never typed; `to_goal` adds, per seed,
the rounds and the minutes of rounds (`time/round`, the run's own clock, so only as idle as the
machine was) until the run's own greedy pass@1 first reached the control + 0.10.
"""

from __future__ import annotations

import datetime
import itertools
import json
import sys
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from unified.errors import ArgumentParser, UserError
from unified.eval.experiments.record import write_json
from unified.eval.gain_stats import _bootstrap, flipped, flips, summary, versus


def cpu_kind(result: dict) -> str:
    """The CPU kind a result ran on: its settings.cpu, else the per-seed records, else the
    settings' machine line (older results: the docs name the machine)."""
    settings = result.get("settings", {})
    if isinstance(settings.get("cpu"), dict):
        return settings["cpu"]["kind"]
    kinds = {k for seed in result.get("seeds", []) for k in seed.get("cpu_kinds", [])}
    return kinds.pop() if len(kinds) == 1 else str(result.get("cpu_kind", "unknown"))


def arm_block(result: dict) -> dict:
    """One arm's figures, from its result JSON."""
    seeds = result["seeds"]
    gained = {str(s["seed"]): flips(result["per_problem_before"], s["per_problem_after"])[0] for s in seeds}
    tokens = generated_tokens(result)
    per_gain = {s: (tokens[s] / gained[s] if tokens.get(s) and gained[s] else None) for s in gained}
    return {
        "cpu_kind": cpu_kind(result),
        "seeds": [s["seed"] for s in seeds],
        "control_pass_at_1": result["pass_at_1_before"],
        "control_repeats": result.get("control_repeats"),
        "pass_at_1_after": result["pass_at_1_after"],
        "gain": result["gain"],
        "gain_per_seed": result["gain_per_seed"],
        "mcnemar_p_per_seed": [result["per_seed"][str(s["seed"])]["mcnemar_p"] for s in seeds],
        "flips_gained": result["flips_gained"],
        "flips_lost": result["flips_lost"],
        "distinct_gained": result.get("distinct_gained"),
        "generated_tokens": tokens or None,
        "tokens_per_gained_problem": per_gain if tokens else None,
        "signal_problems_any_round": result.get("signal_problems_any_round"),
        "to_goal": {str(s["seed"]): to_goal(s, result["pass_at_1_before"]) for s in seeds},
    }


GOAL_MARGIN = 0.10  # the goal: control + 0.10 within 15 minutes of rounds on 2 cores


STEPS = ("phase_1_4", "phase_5", "consolidation")  # a round's timed steps (`time/<step>` in its metrics)


def to_goal(seed: dict, control: float, margin: float = GOAL_MARGIN) -> dict | None:
    """When one seed's run first reached `control + margin`: each round's own greedy pass@1 at its
    start (`eval/pass@1` of round k: the weights after k - 1 rounds), then the seed's evaluation
    after the last round. `after_rounds` trained rounds, `minutes` their `time/round` summed (the
    evaluation that saw it not counted), and where the rounds timed their steps, `minutes_by_step`:
    the same minutes per step (phases 1-4, phase 5, consolidation), what a lever would have to
    shorten; None: never, or the run recorded no rounds."""
    rounds = seed.get("metrics_per_round") or []
    if not rounds:
        return None
    points = [(k, r.get("eval/pass@1")) for k, r in enumerate(rounds[1:], start=1)] + [(len(rounds), seed.get("pass_at_1_after"))]
    for trained, score in points:
        if score is not None and score >= control + margin - 1e-9:
            reached = {
                "after_rounds": trained,
                "pass_at_1": score,
                "minutes": round(sum(r.get("time/round") or 0.0 for r in rounds[:trained]) / 60, 1),
            }
            steps = {
                step: round(sum(r.get(f"time/{step}") or 0.0 for r in rounds[:trained]) / 60, 1)
                for step in STEPS
                if any(f"time/{step}" in r for r in rounds[:trained])
            }
            return {**reached, "minutes_by_step": steps} if steps else reached
    return None


def generated_tokens(result: dict) -> dict:
    """seed -> generated tokens: the result's own key, else (older results) its rounds' metrics."""
    return result.get("generated_tokens") or {
        str(s["seed"]): s["metrics_per_round"][-1].get("compute/generation_tokens")
        for s in result["seeds"]
        if s.get("metrics_per_round")
    }


def gain_difference(a: dict, b: dict) -> dict:
    """Arm a's gain over its control minus arm b's over its own, per problem (each the mean over
    its seeds), with a bootstrap 95 % interval over the shared problems (noisy ones left out)."""
    noisy = set(a.get("noisy_problems", [])) | set(b.get("noisy_problems", []))
    ids = [i for i in a["per_problem_before"] if i in b["per_problem_before"] and i not in noisy]

    def per_problem(r: dict, i: str) -> float:
        return float(np.mean([s["per_problem_after"][i] for s in r["seeds"]])) - r["per_problem_before"][i]

    diffs = [per_problem(a, i) - per_problem(b, i) for i in ids]
    return {
        "kind": "difference of gains, each over its own CPU's control",
        "problems": len(ids),
        "difference": float(np.mean(diffs)) if ids else 0.0,
        "ci95": list(_bootstrap(diffs, 10_000, 0, 0.95)) if ids else None,
    }


def compare(a: dict, b: dict) -> dict:
    """Paired when both ran on one CPU kind with the same control outcomes, else the difference of gains."""
    same_control = a["per_problem_before"] == b["per_problem_before"]
    if cpu_kind(a) == cpu_kind(b) and same_control:
        arm = lambda r: {s["seed"]: s["per_problem_after"] for s in r["seeds"]}  # noqa: E731
        out = versus(arm(a), arm(b), sorted(set(a.get("noisy_problems", [])) | set(b.get("noisy_problems", []))))
        return {"kind": "paired by seed (one CPU kind, one control)", **out}
    return gain_difference(a, b)


def comparison(arms: Mapping[str, dict]) -> dict:
    """Every arm's block and every pair's comparison (`a_vs_b`: a minus b)."""
    return {
        "arms": {name: arm_block(r) for name, r in arms.items()},
        "pairs": {f"{x}_vs_{y}": compare(arms[x], arms[y]) for x, y in itertools.combinations(arms, 2)},
    }


def joined(parts: Sequence[tuple[str, dict]]) -> dict:
    """One arm from results that share a control: their seeds together, figures recomputed."""
    (first_path, first), rest = parts[0], parts[1:]
    kinds = {cpu_kind(body) for _, body in parts} - {"unknown"}  # an older result records none
    for path, body in rest:
        if len(kinds) > 1 or body["per_problem_before"] != first["per_problem_before"]:
            raise UserError(
                f"{path} and {first_path} ran against different controls (CPU kind or control outcomes): "
                "join only seeds of one control"
            )
    seeds = [s for _, body in parts for s in body["seeds"]]
    ids = [s["seed"] for s in seeds]
    if len(set(ids)) != len(ids):
        raise UserError(
            f"seed {sorted(i for i in ids if ids.count(i) > 1)[0]} appears in two of {[p for p, _ in parts]}: join distinct seeds"
        )
    noisy = sorted({i for _, body in parts for i in body.get("noisy_problems") or []})
    stats = summary(first["per_problem_before"], {s["seed"]: s["per_problem_after"] for s in seeds}, noisy)
    stats["per_seed"] = {str(k): v for k, v in stats["per_seed"].items()}
    merged = lambda key: {k: v for _, body in parts for k, v in (body.get(key) or {}).items()} or None  # noqa: E731
    gained = {i for s in seeds for i in flipped(first["per_problem_before"], s["per_problem_after"])[0] if i not in noisy}
    return {
        **first,
        **stats,
        "seeds": seeds,
        "pass_at_1_after": float(np.mean([s["pass_at_1_after"] for s in seeds])),
        "generated_tokens": {k: v for _, body in parts for k, v in generated_tokens(body).items()} or None,
        "signal_problems_any_round": merged("signal_problems_any_round"),
        "distinct_gained": len(gained),
        "joined_from": [p for p, _ in parts],
        **({"cpu_kind": kinds.pop()} if len(kinds) == 1 else {}),
    }


def _load(spec: str) -> tuple[str, dict]:
    name, sep, paths = spec.partition("=")
    if not sep or not name:
        raise UserError(f"{spec!r}: give each arm as NAME=RESULT.json, e.g. discovery=docs/results/test_time_gain_discovery.json")
    parts = [(path, _read(path)) for path in paths.split("+")]
    return name, (parts[0][1] if len(parts) == 1 else joined(parts))


def _read(path: str) -> dict:
    try:
        body = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path} ({exc.__class__.__name__}): give a result JSON of the gain experiment") from None
    if not isinstance(body, dict) or "seeds" not in body or "per_problem_before" not in body:
        raise UserError(f"{path} has no 'seeds' or 'per_problem_before': give a result JSON of the gain experiment")
    return body


def main(argv: Sequence[str] | None = None) -> int:
    p = ArgumentParser(prog="python -m unified.eval.experiments.arm_gap", description=__doc__.split("\n\n")[0])
    p.add_argument("arms", nargs="+", metavar="NAME=RESULT.json")
    p.add_argument("--output", required=True, help="where the comparison JSON goes")
    p.add_argument("--note", default=None, help="a sentence kept in the JSON")
    p.add_argument(
        "--cpu",
        action="append",
        default=[],
        metavar="NAME=KIND",
        help='the CPU kind of an arm whose result predates settings.cpu (e.g. mix="Intel Xeon (AMX)")',
    )
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    arms = dict(_load(spec) for spec in args.arms)
    for spec in args.cpu:
        name, _, kind = spec.partition("=")
        if name not in arms or not kind:
            raise UserError(f"--cpu {spec!r}: give NAME=KIND for one of the arms {sorted(arms)}")
        if isinstance(arms[name].get("settings", {}).get("cpu"), dict) and cpu_kind(arms[name]) != kind:
            raise UserError(f"--cpu {spec!r}: that result records {cpu_kind(arms[name])!r}; leave --cpu out for it")
        arms[name] = {**arms[name], "cpu_kind": kind}
    if len(arms) < 2:
        raise UserError("give at least two arms (NAME=RESULT.json NAME=RESULT.json)")
    body = {
        **comparison(arms),
        "sources": {n: s.partition("=")[2] for n, s in zip(arms, args.arms)},
        "date": datetime.date.today().isoformat(),
        "note": args.note,
    }
    write_json(args.output, body)  # stamped: settings.commit, settings.cpu
    for pair, c in body["pairs"].items():
        print(f"{pair}: {c['kind']}: difference {c['difference']:+.3f}, 95% interval {c['ci95']}")
    return 0


if __name__ == "__main__":
    from unified.cli import exit_code

    sys.exit(exit_code(main))
