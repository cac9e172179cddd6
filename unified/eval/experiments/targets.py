"""Are consolidation's targets right? One finished run's targets, round by round, judged on
the hidden tests, against the other picks the round offered.

    python -m unified.eval.experiments.targets RUN [--output docs/results/targets_X.json]

Consolidation makes each target the greedy answer (`consolidation/reproduced`), so a run's
greedy pass@1 after training is bounded by how many targets are right, not only by how many
problems were found. For each round's checkpoint (`state.pt` `targets`) this counts:
- `right`: targets whose program passes EvalPlus's cases (the visible example and the hidden
  tests), by where it came from (`greedy`: the greedy answer passed its visible example;
  `found`: chosen among the round's passing samples);
- `agreement_right`: had the target been the answer most of the round's visible-passing
  samples agree with on the round's proposed inputs (the greedy answer one more sample; ties
  keep the target), how many would be right;
- `any_right`: problems where some visible-passing answer of the round is right (the best
  any choice among them could do).
A target that passes its visible example and fails the hidden tests is a wrong answer made
greedy: the visible example accepted it.
"""

from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

from unified.cli import exit_code
from unified.errors import ArgumentParser, UserError
from unified.eval.experiments.record import repo_relative, write_json


def _programs(run: Path, rnd: int):
    """The round's sampled programs and proposed inputs (its Parquet files)."""
    import pyarrow.parquet as pq

    programs = pq.read_table(run / f"round_{rnd}" / "programs.parquet").to_pandas()
    triples = pq.read_table(run / f"round_{rnd}" / "ipo_triples.parquet").to_pandas()
    return programs, triples[triples.input_source == "proposed"]


def _targets(run: Path, rnd: int) -> dict:
    import torch

    from unified.pipeline.consolidation import from_state

    state = torch.load(run / "checkpoints" / f"round_{rnd:06d}" / "state.pt", weights_only=False)
    return from_state(state.get("targets") or {})


class Judge:
    """Runs programs in the sandbox: the visible example, proposed inputs, EvalPlus's cases."""

    def __init__(self, executor):
        self.ex, self.known = executor, {}

    def right(self, problem, code: str) -> bool:
        from unified.benchmarks.hidden import evalplus_cases, hidden_calls, passes_hidden
        from unified.text.extract import code_key

        key = (problem.problem_id, code_key(code))
        if key not in self.known:
            cases = evalplus_cases(problem)
            self.known[key] = passes_hidden(problem, self.ex.run_batch(hidden_calls(problem, code, cases)), cases)
        return self.known[key]

    def visible(self, problem, code: str) -> bool:
        from unified.benchmarks.hidden import hidden_calls, passes_hidden

        cases = tuple(c for c in problem.visible if c.expected is not None)[:1]
        return bool(cases) and passes_hidden(problem, self.ex.run_batch(hidden_calls(problem, code, cases)), cases)

    def signature(self, problem, code: str, inputs: list[tuple]) -> tuple:
        from unified.sandbox.executor import ExecCall
        from unified.values import to_literal

        results = self.ex.run_batch([ExecCall(code, problem.entry_point, args) for args in inputs]) if inputs else []
        return tuple(to_literal(r.value) if r.ok else None for r in results)


def _candidates(judge: Judge, problem, codes, target) -> dict:
    """code key -> (program, samples that wrote it) of the visible-passing answers, the target among them."""
    from unified.text.extract import code_key

    counts, first = collections.Counter(), {}
    for code in codes:
        if isinstance(code, str) and code.strip():
            counts[code_key(code)] += 1
            first.setdefault(code_key(code), code)
    out = {k: (first[k], n) for k, n in counts.items() if judge.visible(problem, first[k])}
    key = code_key(target.code)
    out[key] = (target.code, out[key][1] + (target.source == "greedy") if key in out else 1)
    return out


def agreement_pick(candidates: dict, signatures: dict, keep: str) -> str:
    """The candidate most samples agree with (same outputs on every input); ties keep `keep`."""
    votes = {k: sum(n for j, (_, n) in candidates.items() if signatures[j] == signatures[k]) for k in candidates}
    best = max(votes.values())
    return keep if votes.get(keep) == best else next(k for k in candidates if votes[k] == best)


def judge_round(judge: Judge, problems: dict, targets: dict, programs, proposed) -> dict:
    from unified.text.extract import code_key

    rows = collections.Counter()
    for pid, target in targets.items():
        problem = problems[pid]
        inputs = [ast.literal_eval(i) for i in sorted(set(proposed[proposed.problem_id == pid].input))]
        inputs = [a if isinstance(a, tuple) else (a,) for a in inputs]
        candidates = _candidates(judge, problem, programs[programs.problem_id == pid].code, target)
        sigs = {k: judge.signature(problem, code, inputs) for k, (code, _) in candidates.items()}
        pick = agreement_pick(candidates, sigs, code_key(target.code))
        right = judge.right(problem, target.code)
        rows[f"{target.source}_right" if right else f"{target.source}_wrong"] += 1
        rows["agreement_right"] += judge.right(problem, candidates[pick][0])
        rows["any_right"] += any(judge.right(problem, code) for code, _ in candidates.values())
    return {"targets": len(targets), "right": rows["greedy_right"] + rows["found_right"], **dict(sorted(rows.items()))}


def judge_run(run: Path) -> list[dict]:
    from unified.benchmarks.hidden import with_expected_outputs
    from unified.benchmarks.load import load_problems
    from unified.sandbox.executor import Executor, ExecutorConfig

    rounds = sorted(
        int(p.name.split("_")[1])
        for p in run.glob("round_*")
        if (run / "checkpoints" / f"round_{int(p.name.split('_')[1]):06d}").is_dir()
    )
    if not rounds:
        raise UserError(
            f"{run} has no round with a checkpoint; pass a run folder of train_unified.py with algorithm.consolidate_passes > 0"
        )
    out = []
    with Executor(ExecutorConfig(workers=2, timeout_s=5.0)) as ex:
        judge = Judge(ex)
        for rnd in rounds:
            targets = _targets(run, rnd)
            problems = {p.problem_id: p for p in with_expected_outputs(load_problems("mbpp", ids=list(targets)), ex.run_batch)}
            out.append({"round": rnd, **judge_round(judge, problems, targets, *_programs(run, rnd))})
    return out


def _name(run: Path) -> str:
    """The run's path inside the repo, else its last three folders (no machine path in a result)."""
    inside = repo_relative(run)
    return inside if not Path(inside).is_absolute() else "/".join(run.resolve().parts[-3:])


def main() -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a train_unified.py output folder (consolidation on, MBPP+)")
    p.add_argument("--output", type=Path, default=None, help="write the JSON here (default: print it)")
    args = p.parse_args()
    if not (args.run / "checkpoints").is_dir():
        raise UserError(f"{args.run} has no checkpoints/; pass a run folder of train_unified.py")
    body = {
        "what": "consolidation targets judged on EvalPlus's cases, per round",
        "run": _name(args.run),
        "rounds": judge_run(args.run),
    }
    for row in body["rounds"]:
        print(row)
    if args.output:
        write_json(args.output, body)
    return 0


if __name__ == "__main__":
    sys.exit(exit_code(main))
