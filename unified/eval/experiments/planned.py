"""The planned analysis of a gain result (`gain.py`), computed from its per-problem outcomes
and its runs' metrics, never typed:

- `permutation_p`: the primary test, a paired sign-flip permutation over problems of the
  mean-over-seeds gain; `ci95_problems_seeds`: its interval, problems and seeds resampled.
- `consolidation`: per seed, per round {round, targets, reproduced, lost, passes, seconds}.
- `to_goal`: per seed, when the run's own greedy pass@1 first reached control + 0.10 (minutes
  of rounds), and the median seed's minutes; `generated_tokens_per_gained_problem`.
- `sample_filter_baseline`: the untrained model's `--select visible` pass@1 at the samples per
  problem the recipe generated over its rounds plus 8 (`baseline_samples`), against
  `select_visible`'s trained figure at n = 8 (mean over seeds).
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

from unified.eval.experiments.arm_gap import to_goal
from unified.eval.gain_stats import permutation_p, problems_seeds_ci

CONSOLIDATION_KEYS = ("targets", "reproduced", "lost", "passes", "held_before", "held_after", "steps")


def baseline_samples(rounds: Sequence[dict], problems: int, extra: int = 8) -> int | None:
    """Samples per problem a recipe drew in phase 1 over its rounds (`tasks/samples_phase_1`),
    rounded up, plus `extra` (the n of the trained model's own `--select visible`)."""
    drawn = [r.get("tasks/samples_phase_1") for r in rounds]
    if not rounds or any(d is None for d in drawn) or not problems:
        return None
    return math.ceil(sum(drawn) / problems) + extra


def consolidation(seeds: Sequence[dict]) -> dict:
    """seed -> one row per round that consolidated."""
    out = {}
    for seed in seeds:
        rows = [
            {
                "round": r.get("round"),
                **{k: r.get(f"consolidation/{k}") for k in CONSOLIDATION_KEYS},
                "seconds": r.get("time/consolidation"),
            }
            for r in seed.get("metrics_per_round", [])
            if r.get("consolidation/targets") is not None
        ]
        out[str(seed["seed"])] = rows
    return out


def goal(seeds: Sequence[dict], control: float) -> dict:
    """Per seed `to_goal` (arm_gap's rule), and the median seed's minutes (a seed that never
    reached it counts as infinitely late)."""
    per_seed = {str(s["seed"]): to_goal(s, control) for s in seeds}
    minutes = [v["minutes"] if v else math.inf for v in per_seed.values()]
    median = statistics.median(minutes) if minutes else None
    return {"per_seed": per_seed, "median_minutes": None if median is None or math.isinf(median) else median}


def tokens_per_gained(result: dict) -> dict:
    """seed -> generated tokens per problem it gained over the control (None: none gained)."""
    gained = {s: len(g) for s, g in (result.get("gained_problems") or {}).items()}
    tokens = result.get("generated_tokens") or {}
    return {s: (tokens[s] / gained[s] if tokens.get(s) and gained.get(s) else None) for s in gained}


def planned(result: dict, baseline: dict | None, select_after: dict[int, dict]) -> dict:
    """The planned keys for `result` (gain.py's JSON so far); `baseline`: the untrained model's
    `--select visible` eval JSON at `baseline_samples`; `select_after`: seed -> its trained
    model's `--select visible` eval JSON at n = 8."""
    noisy = result.get("noisy_problems", [])
    control = result["per_problem_before"]
    afters = [s["per_problem_after"] for s in result["seeds"]]
    rounds = result["seeds"][0].get("metrics_per_round", []) if result["seeds"] else []
    trained = [v.get("pass@1_select_visible") for v in select_after.values() if v.get("complete")]
    return {
        "permutation_p": permutation_p(control, afters, noisy) if afters else None,
        "ci95_problems_seeds": list(problems_seeds_ci(control, afters, noisy)) if afters else None,
        "consolidation": consolidation(result["seeds"]),
        "to_goal": goal(result["seeds"], result["pass_at_1_before"]),
        "generated_tokens_per_gained_problem": tokens_per_gained(result),
        "sample_filter_baseline": {
            "samples_per_problem": baseline_samples(rounds, len(result["problems"])),
            "pass_at_1": (baseline or {}).get("pass@1_select_visible"),
            "trained_select_visible_n8": sum(trained) / len(trained) if trained else None,
            "trained_seeds": sorted(select_after),
        },
    }
