"""Unbiased pass@k (Chen et al. 2021, as EvalPlus reports it) against hand-computed values,
and `python -m unified.eval --n N --temperature T` writing it next to greedy pass@1."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from unified.eval.pass_at_k import ks_up_to, pass_at_k

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (4, 1, 1, 1 / 4),  # c/n
        (4, 1, 4, 1.0),  # all n drawn: solved if any sample is
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (16, 3, 4, 1 - 715 / 1820),  # 1 - C(13,4)/C(16,4)
        (16, 0, 16, 0.0),
        (16, 16, 1, 1.0),
    ],
)
def test_the_estimator_matches_hand_computed_values(n, c, k, expected):
    assert pass_at_k({"p": c}, n, [k])[k] == [pytest.approx(expected)]


def test_not_best_of_the_first_k_and_per_problem_order_kept():
    got = pass_at_k({"a": 2, "b": 0, "c": 8}, 8, [1, 4, 8])
    assert got[1] == [pytest.approx(0.25), 0.0, 1.0]
    assert got[4] == [pytest.approx(1 - 15 / 70), 0.0, 1.0]  # 1 - C(6,4)/C(8,4)
    assert got[8] == [1.0, 0.0, 1.0]
    assert 16 not in pass_at_k({"a": 1}, 8, [16])  # k > n: not estimable, left out


def test_reported_ks():
    assert ks_up_to(16) == [1, 4, 16] and ks_up_to(1) == [1] and ks_up_to(10) == [1, 4, 10]


def test_evaluate_cli_writes_sampled_pass_at_k_next_to_greedy(tmp_path):
    out = tmp_path / "eval"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "unified.eval",
            "--problems",
            "2",
            "--backend",
            "hf",
            "--n",
            "4",
            "--temperature",
            "1.0",
            "--output",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results["pass_at_k"]) == {"1", "4"} and results["sampled"] == {"n": 4, "temperature": 1.0, "problems": 2}
    assert "pass@1" in results or "pass_at_1" in results  # greedy, as before
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert all(r["n"] == 4 and 0 <= r["correct"] <= 4 for r in rows)
    assert "pass@4" in run.stdout


class _Counting:
    """A real sandbox executor that remembers how many calls it ran."""

    def __init__(self, executor):
        self.executor, self.calls = executor, 0

    def run_batch(self, calls):
        self.calls += len(calls)
        return self.executor.run_batch(calls)


def test_samples_are_run_on_the_rest_only_after_the_first_hidden_case_and_the_counts_match_running_every_case():
    from unified.benchmarks.hidden import hidden_calls, passes_hidden, with_expected_outputs
    from unified.benchmarks.load import load_problems
    from unified.eval.pass_at_k import correct_counts
    from unified.sandbox.executor import ExecutorConfig
    from unified.sandbox.executors import build_executor
    from unified.types import Program

    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as executor:
        problems = with_expected_outputs(load_problems("mbpp", ids=["Mbpp/2", "Mbpp/3"]), executor.run_batch)
        first = {p.problem_id: p.hidden[0] for p in problems}
        assert all(len(p.hidden) > 2 for p in problems)  # MBPP+: many plus inputs each

        def right_on_the_first_only(p):  # hostile to a staged runner: passes the case it is screened on
            return (
                f"{p.canonical_solution}\n_real = {p.entry_point}\n"
                f"def {p.entry_point}(*a):\n    return _real(*a) if list(a) == {list(first[p.problem_id].args)!r} else 'wrong'\n"
            )

        codes = {
            "canonical": lambda p: p.canonical_solution,
            "first_only": right_on_the_first_only,
            "raises": lambda p: f"def {p.entry_point}(*a):\n    raise ValueError('no')\n",
            "wrong": lambda p: f"def {p.entry_point}(*a):\n    return 'wrong'\n",
            "syntax": lambda p: "def (:\n",
        }
        programs = [
            Program(p.problem_id, f"{p.problem_id}#{name}", code(p), p.entry_point)
            for p in problems
            for name, code in codes.items()
        ]
        counting = _Counting(executor)
        staged = correct_counts(problems, programs, counting)
        everything = {p.problem_id: 0 for p in problems}  # the reference: every case of every program, one batch
        for prog in programs:
            problem = next(p for p in problems if p.problem_id == prog.problem_id)
            everything[prog.problem_id] += passes_hidden(problem, executor.run_batch(hidden_calls(problem, prog.code)))
    assert staged == everything == {"Mbpp/2": 1, "Mbpp/3": 1}  # the canonical alone; first_only caught on the rest
    all_calls = sum(len(p.hidden) for p in problems) * len(codes)
    # every program's first case, then the rest for the two that got it right (canonical, first_only)
    assert counting.calls == len(programs) + sum(2 * (len(p.hidden) - 1) for p in problems) < all_calls


def test_the_rounds_greedy_pass_at_1_gives_graded_verdicts_with_staged_calls():
    """`eval.greedy.pass_at_1` (each round's baseline) screens on the first hidden case:
    the verdicts of `graded` (every case), including a program right on that case alone."""
    from tests.helpers.scripted import ScriptedGenerator
    from unified.benchmarks.hidden import with_expected_outputs
    from unified.benchmarks.load import load_problems
    from unified.eval.greedy import graded, pass_at_1
    from unified.sandbox.executor import ExecutorConfig
    from unified.sandbox.executors import build_executor
    from unified.text.prompts import program_prompt

    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as executor:
        problems = with_expected_outputs(load_problems("mbpp", ids=["Mbpp/2", "Mbpp/3", "Mbpp/4", "Mbpp/6"]), executor.run_batch)
        first = problems[1].hidden[0]
        answers = [
            problems[0].canonical_solution,  # passes
            f"{problems[1].canonical_solution}\n_real = {problems[1].entry_point}\n"  # right on the first case only
            f"def {problems[1].entry_point}(*a):\n    return _real(*a) if list(a) == {list(first.args)!r} else 'wrong'\n",
            f"def {problems[2].entry_point}(*a):\n    return 'wrong'\n",  # fails the first case
            "no code at all",
        ]
        by_prompt = {program_prompt(p): f"```python\n{a}\n```" for p, a in zip(problems, answers)}
        generator = ScriptedGenerator(lambda text, _: [next(a for prompt, a in by_prompt.items() if prompt in text)])
        counting = _Counting(executor)
        staged = pass_at_1(problems, generator, counting.run_batch, 512)
        reference = {pid: score for pid, (score, _) in graded(problems, generator, executor.run_batch, 512).items()}
    assert staged == reference == {"Mbpp/2": 1.0, "Mbpp/3": 0.0, "Mbpp/4": 0.0, "Mbpp/6": 0.0}
    # three programs' first cases, then the rest for the two right there
    assert counting.calls == 3 + (len(problems[0].hidden) - 1) + (len(problems[1].hidden) - 1)


def test_a_rounds_pass_at_k_counts_every_sample_drawn_for_a_problem_not_the_group_size():
    """Discovery draws up to `pipeline.discovery_n` samples where nothing passed yet: 4 passing
    programs of 32 drawn are 4/32 at k=1, not 4 of the group size 8 (the bug: 0.5)."""
    from types import SimpleNamespace

    from unified.benchmarks.hidden import with_expected_outputs
    from unified.benchmarks.load import load_problems
    from unified.eval.pass_at_k import round_pass_at_k
    from unified.sandbox.executor import ExecutorConfig
    from unified.sandbox.executors import build_executor
    from unified.types import Completion, Program

    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as executor:
        wide, narrow = with_expected_outputs(load_problems("mbpp", ids=["Mbpp/2", "Mbpp/3"]), executor.run_batch)
        wrong = "def {}(*a):\n    return 'wrong'\n"
        programs = [
            Program(
                p.problem_id,
                f"{p.problem_id}#p{i}",
                p.canonical_solution if i < 4 else wrong.format(p.entry_point),
                p.entry_point,
            )
            for p, drawn in ((wide, 32), (narrow, 8))
            for i in range(drawn)
        ]
        completions = {p.problem_id: [Completion("", (), (), (), "stop", 0)] * drawn for p, drawn in ((wide, 32), (narrow, 8))}
        data = SimpleNamespace(problems=(wide, narrow), program_candidates=tuple(programs), program_completions=completions)
        got = round_pass_at_k(data, executor, 8, [1, 8])
    assert got[1] == [pytest.approx(4 / 32), pytest.approx(4 / 8)]
    assert got[8] == [pytest.approx(1 - math.comb(28, 8) / math.comb(32, 8)), 1.0]
