"""What selective sampling (pipeline/selective.py) would have saved and cost on saved runs.

For each run folder, each problem's signal per round (a phase-5 group of it whose rewards
differ: round_N/tasks.parquet + rollouts.parquet) is replayed under the selection rule,
exactly: every pattern of draws over the rounds is enumerated with its probability (a
skipped round is no observation, as in the trainer). Per setting of (keep, floor):
- `drawn`: expected share of problem-rounds sampled (phase 1's samples scale with it);
- `signal_found`: expected share of the problem-rounds WITH signal that were drawn;
- `headroom_found`: the same for a problem's first round with signal after rounds that all
  failed (a problem starting to pass: the case skipping can cost most).
Rounds run with every problem drawn, so later rounds' signal is what the full run saw (an
approximation: a run that skipped would have trained a little less).

    python -m unified.eval.experiments.selective_cost RUN_DIR [RUN_DIR ...] --output docs/results/selective_cost.json
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import pyarrow.parquet as pq

from unified.eval.experiments.record import write_json
from unified.pipeline.selective import draw_probability

SETTINGS = [(1.0, 1.0), (0.5, 0.25), (0.5, 0.125), (0.25, 0.25), (0.7, 0.35)]


def signal_by_round(run: Path) -> tuple[list[str], list[dict[str, bool]], list[dict[str, bool]]]:
    """Problem ids, and per round: problem -> had signal; problem -> every answer failed."""
    rounds = sorted((p for p in run.glob("round_*") if (p / "rollouts.parquet").exists()), key=lambda p: int(p.name[6:]))
    problems = pq.read_table(rounds[0] / "problems.parquet", columns=["problem_id"]).column(0).to_pylist()
    signal, failed = [], []
    for folder in rounds:
        tasks = pq.read_table(folder / "tasks.parquet", columns=["task_id", "problem_id"]).to_pylist()
        rows = pq.read_table(folder / "rollouts.parquet", columns=["task_id", "reward"]).to_pylist()
        problem_of, rewards = {t["task_id"]: t["problem_id"] for t in tasks}, {}
        for row in rows:
            rewards.setdefault(problem_of.get(row["task_id"]), []).append(row["reward"])
        signal.append({p: len(set(rewards.get(p, []))) > 1 for p in problems})
        failed.append({p: max(rewards.get(p, [0.0])) <= 0 for p in problems})
    return problems, signal, failed


def replay(history: list[bool], keep: float, floor: float) -> tuple[float, list[float]]:
    """Exact expectation over draw patterns: (expected rounds drawn, P(drawn) per round)."""
    drawn_per_round = [0.0] * len(history)
    for pattern in itertools.product((True, False), repeat=len(history)):
        p, seen = 1.0, []
        for r, draw in enumerate(pattern):
            q = draw_probability(seen, keep, floor)
            p *= q if draw else 1 - q
            if draw:
                seen.append(history[r])
        for r, draw in enumerate(pattern):
            drawn_per_round[r] += p * draw
    return sum(drawn_per_round), drawn_per_round


def measure(runs: list[Path]) -> dict:
    out = {"runs": [str(r) for r in runs], "settings": []}
    data = [signal_by_round(run) for run in runs]
    for keep, floor in SETTINGS:
        total = drawn = with_signal = found = headroom = headroom_found = 0.0
        for problems, signal, failed in data:
            for pid in problems:
                history = [s[pid] for s in signal]
                _, per_round = replay(history, keep, floor)
                total += len(history)
                drawn += sum(per_round)
                for r, s in enumerate(history):
                    with_signal += s
                    found += s * per_round[r]
                    if s and r > 0 and all(failed[k][pid] for k in range(r)):
                        headroom += 1
                        headroom_found += per_round[r]
        out["settings"].append(
            {
                "keep": keep,
                "floor": floor,
                "problem_rounds": int(total),
                "drawn": round(drawn / total, 4),
                "signal_rounds": int(with_signal),
                "signal_found": round(found / max(with_signal, 1), 4),
                "headroom_rounds": int(headroom),
                "headroom_found": round(headroom_found / max(headroom, 1), 4),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    result = measure(args.runs)
    for s in result["settings"]:
        print(
            f"keep {s['keep']:.3g} floor {s['floor']:.3g}: drawn {s['drawn']:.2f} of {s['problem_rounds']} problem-rounds, "
            f"signal found {s['signal_found']:.2f} of {s['signal_rounds']}, headroom found {s['headroom_found']:.2f} "
            f"of {s['headroom_rounds']}"
        )
    if args.output:
        write_json(args.output, result)


if __name__ == "__main__":
    main()
