"""How good are execution-agreement labels? Re-derive them from a run's saved round and
score them against the hidden tests, for the vote as it is and for the old vote.

Reads `round_<n>/` of any run (problems, programs and ipo_triples Parquet: phases 1-2 are
not re-run), rebuilds each problem's consensus with `kinds/agreement.consensus` under two
rules (`abstain`: programs with no value on any input do not vote, the default; `all_vote`:
they do, the rule before 2026-11-26) and runs each winning program on the problem's hidden
tests in the sandbox. Evaluation only: nothing here reaches a reward.

    python -m unified.eval.experiments.agreement_labels RUN/round_1 [RUN2/round_1 ...] [--min-votes 2]
        [--output logs/bench/agreement_labels.json]

Per rule and round: `labels` (problems with a consensus), `correct` (the winner passes the
hidden tests), `accuracy`, the rejection reasons, and each winner's votes and clusters.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from unified.benchmarks.hidden import hidden_calls, passes_hidden, with_expected_outputs
from unified.benchmarks.load import load_problems
from unified.eval.experiments.record import REPO, write_json
from unified.kinds.agreement import consensus, votes_per_program
from unified.sandbox.executor import Executor, ExecutorConfig
from unified.types import IOTriple, Program
from unified.values import from_literal

RULES = {"abstain": True, "all_vote": False}
OUT = REPO / "logs" / "bench" / "agreement_labels.json"


def load_round(round_dir: Path, run_batch):
    """(problems with hidden tests, candidate programs, kept programs, triples) of one round."""
    rows = pq.read_table(round_dir / "problems.parquet").to_pylist()
    by_bench: dict[str, list[str]] = {}
    for r in rows:
        by_bench.setdefault(r["benchmark"], []).append(r["problem_id"])
    problems = [p for bench, ids in by_bench.items() for p in load_problems(bench, ids=ids)]
    problems = with_expected_outputs(problems, run_batch)  # MBPP+'s hidden values come from its canonical solution
    progs = pq.read_table(round_dir / "programs.parquet").to_pylist()
    entry = {p.problem_id: p.entry_point for p in problems}
    candidates = [Program(r["problem_id"], r["program_id"], r["code"], entry[r["problem_id"]], r["source"]) for r in progs]
    # kept = what phase 2 ran: `fails_visible` is recorded but does not drop a program
    kept_ids = {r["program_id"] for r in progs if r["kept"] or r["rejection"] == "fails_visible"}
    triples = [
        IOTriple(r["problem_id"], r["program_id"], tuple(from_literal(r["input"])), from_literal(r["output"]), r["input_source"])
        for r in pq.read_table(round_dir / "ipo_triples.parquet").to_pylist()
    ]
    return problems, candidates, [p for p in candidates if p.program_id in kept_ids], triples


def score_round(round_dir: Path, executor: Executor, min_votes: int, samples: int) -> dict:
    problems, candidates, kept, triples = load_round(round_dir, executor.run_batch)
    votes = votes_per_program(candidates, kept)
    out: dict = {"round_dir": str(round_dir), "problems": len(problems)}
    found_by_rule = {
        name: _labels(problems, kept, triples, votes, samples, min_votes, abstain) for name, abstain in RULES.items()
    }
    passes = _winners_pass_hidden(found_by_rule, problems, kept, executor)
    for name, rule in found_by_rule.items():
        out[name] = _rule_summary(rule, passes)
    return out


def _labels(problems, kept, triples, votes, samples: int, min_votes: int, abstain) -> dict:
    """One rule's consensus per problem: problem id -> (the winner or None, the reason)."""
    return {
        problem.problem_id: consensus(
            problem,
            [p for p in kept if p.problem_id == problem.problem_id],
            [t for t in triples if t.problem_id == problem.problem_id],
            votes,
            samples,
            min_votes=min_votes,
            atol=problem.atol,
            abstain=abstain,
        )
        for problem in problems
    }


def _winners_pass_hidden(found_by_rule: dict, problems, kept, executor: Executor) -> dict[str, bool]:
    """Every winner of every rule on the hidden tests, in one sandbox batch: program id -> passes."""
    winners = sorted({f.program_id for rule in found_by_rule.values() for f, _ in rule.values() if f is not None})
    code = {p.program_id: p.code for p in kept}
    problem_of = {p.program_id: next(q for q in problems if q.problem_id == p.problem_id) for p in kept}
    calls, spans = [], {}
    for pid in winners:
        problem = problem_of[pid]
        batch = hidden_calls(problem, code[pid])
        spans[pid] = (problem, len(calls), len(calls) + len(batch))
        calls.extend(batch)
    results = executor.run_batch(calls) if calls else []
    return {pid: passes_hidden(problem, results[lo:hi]) for pid, (problem, lo, hi) in spans.items()}


def _rule_summary(rule: dict, passes: dict[str, bool]) -> dict:
    """One rule's labels, how many are right, why it abstained, and each winner."""
    why = Counter(reason for found, reason in rule.values() if found is None)
    won = {
        q: {
            "votes": f.votes,
            "total": f.total,
            "clusters": f.clusters,
            "runner_up": f.runner_up,
            "passes_hidden": passes[f.program_id],
        }
        for q, (f, _) in rule.items()
        if f is not None
    }
    right = sum(w["passes_hidden"] for w in won.values())
    return {
        "labels": len(won),
        "correct": right,
        "accuracy": round(right / len(won), 3) if won else None,
        "rejections": dict(why),
        "winners": won,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rounds", nargs="+", type=Path, help="round_<n> folders of finished runs")
    ap.add_argument("--min-votes", type=int, default=2)
    ap.add_argument("--samples", type=int, default=16, help="completions phase 1 sampled per problem")
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    for d in args.rounds:
        if not (d / "ipo_triples.parquet").exists():
            print(f"error: {d} has no ipo_triples.parquet; pass a run's round_<n> folder", file=sys.stderr)
            return 2
    with Executor(ExecutorConfig()) as executor:
        results = [score_round(d, executor, args.min_votes, args.samples) for d in args.rounds]
    for r in results:
        print(
            r["round_dir"],
            f"{r['problems']} problems",
            *(f"{n}: {r[n]['correct']}/{r[n]['labels']} right, rejected {r[n]['rejections']}" for n in RULES),
            sep="\n  ",
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output, {"min_votes": args.min_votes, "rounds": results})
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
