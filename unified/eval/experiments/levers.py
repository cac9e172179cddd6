"""What each discovery lever added, read from a gain run's own Parquet (no new run):

    python -m unified.eval.experiments.levers --result docs/results/test_time_gain_discovery.json \
        --runs-dir logs/bench/discovery/mbpp-report-0+100x3 [--n 8] [--output FILE]

Per seed and round, from phase 1's programs (`round_k/programs.parquet`, sample index `#p<i>`):
- `found`: problems with a sample passing the visible example (the training signal of solve);
- `found_in_first_n`: those with one among the first `n` samples, what a group of `n` (today's
  default) finds from the same draw; `found_beyond_n`: the rest, found only by the budget
  (`pipeline.discovery_n` samples where nothing had passed yet);
- `replay_eligible`: problems found in an earlier round with no fresh passing sample this round,
  the groups replay (`pipeline.replay`) keeps a passing answer in.
Per seed: every greedy gain over the control (`per_problem_before` -> `per_problem_after`, noisy
problems left out) classed by how its signal came: `first_n` (found among the first n samples
in some round), `budget` (found only beyond them), `none` (never found: learned through the
self-play kinds or by chance), each with whether replay was eligible for it; and the
transfer: problems found in some round that greedy never gained. Samples are counted by lever
(phase 1's samples within the first n against those beyond); tokens per sample are not
recorded per index, so the budget's token share is its sample share.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from unified.eval.experiments.record import write_json
from unified.eval.gain_stats import flipped

INDEX = re.compile(r"#p(\d+)$")


def passing_indices(rows) -> dict[str, set[int]]:
    """problem id -> indices of phase 1's samples that passed the visible example: kept programs,
    and duplicates of a kept program (a duplicate is dropped before it is run)."""
    kept = rows[rows["rejection"].isna()]
    passing_code = {(p, c) for p, c in zip(kept["problem_id"], kept["code"])}
    out: dict[str, set[int]] = {}
    for pid, prog, code, passed, why in zip(
        rows["problem_id"], rows["program_id"], rows["code"], rows["rejection"].isna(), rows["rejection"]
    ):
        match = INDEX.search(str(prog))
        if match and (passed or (why == "duplicate" and (pid, code) in passing_code)):
            out.setdefault(pid, set()).add(int(match.group(1)))
    return out


def round_levers(passing: dict[str, set[int]], found_before: set[str], n: int, samples: int, drawn: int) -> dict:
    """One round: what was found, within the first n samples or beyond them, and the samples
    each lever cost (`samples`: phase 1's; `samples_beyond_n`: what the budget added)."""
    found = {p for p, idx in passing.items() if idx}
    first_n = {p for p, idx in passing.items() if min(idx) < n}
    return {
        "found": len(found),
        "found_in_first_n": len(first_n),
        "found_beyond_n": len(found - first_n),
        "replay_eligible": sorted(found_before - found),
        "samples": samples,
        "samples_beyond_n": max(0, samples - n * drawn),
    }


def seed_levers(run: Path, n: int, control: dict, after: dict, noisy: set[str]) -> dict:
    import pandas as pd

    metrics = {r["round"]: r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())}
    rounds, found_any, first_n_any, eligible_any = [], set(), set(), set()
    for k in sorted(metrics):
        path = run / f"round_{k}" / "programs.parquet"
        if not path.exists():
            break
        passing = passing_indices(pd.read_parquet(path))
        drawn = len(pd.read_parquet(run / f"round_{k}" / "problems.parquet", columns=["problem_id"]))
        rounds.append(round_levers(passing, found_any, n, int(metrics[k].get("tasks/samples_phase_1", 0)), drawn))
        eligible_any |= set(rounds[-1]["replay_eligible"])
        found_any |= {p for p, idx in passing.items() if idx}
        first_n_any |= {p for p, idx in passing.items() if min(idx) < n}
    gained, lost = flipped({p: v for p, v in control.items() if p not in noisy}, after)
    how = {p: ("first_n" if p in first_n_any else "budget" if p in found_any else "none") for p in gained}
    samples = sum(r["samples"] for r in rounds)
    return {
        "rounds": rounds,
        "samples": samples,
        "budget_sample_share": sum(r["samples_beyond_n"] for r in rounds) / max(1, samples),
        "found_any_round": len(found_any),
        "found_first_n_any_round": len(first_n_any),
        "found_only_by_budget": sorted(found_any - first_n_any),
        "gained": how,
        "lost": lost,
        "gained_by": {c: sum(v == c for v in how.values()) for c in ("first_n", "budget", "none")},
        "gained_replay_eligible": sorted(set(gained) & eligible_any),
        "found_not_gained": len(found_any - set(gained) - {p for p, v in control.items() if v}),
    }


def levers(result: dict, runs_dir: Path, n: int) -> dict:
    control, noisy = result["per_problem_before"], set(result.get("noisy_problems") or [])
    seeds = {}
    for seed in result.get("seeds") or []:
        run = runs_dir / f"seed{seed['seed']}" / "run"
        if run.exists():
            seeds[str(seed["seed"])] = seed_levers(run, n, control, seed["per_problem_after"], noisy)
    return {"n": n, "runs_dir": str(runs_dir), "seeds": seeds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--result", required=True, help="a gain JSON (per_problem_before, seeds[].per_problem_after)")
    ap.add_argument("--runs-dir", required=True, help="the gain's runs folder (seed<k>/run/round_<r>/programs.parquet)")
    ap.add_argument("--n", type=int, default=8, help="the group size a problem with a found answer gets (rollout.n)")
    ap.add_argument("--output", default="logs/bench/levers.json")
    args = ap.parse_args(argv)
    body = levers(json.loads(Path(args.result).read_text()), Path(args.runs_dir), args.n)
    for seed, s in body["seeds"].items():
        print(
            f"seed {seed}: found {s['found_any_round']} in some round, {s['found_first_n_any_round']} among the first "
            f"{args.n} samples; gained {len(s['gained'])} {s['gained_by']}, replay eligible for "
            f"{len(s['gained_replay_eligible'])}; found but never gained {s['found_not_gained']}"
        )
    print(f"wrote {write_json(args.output, body)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
