"""Execution agreement on hand-made runs: clusters by behaviour, votes counted by sample,
ties, lone programs, errors and None-returners give no label, and the solve kind's task and
reward follow the chosen source."""

from __future__ import annotations

import pytest

from unified.kinds import BuildOptions, solve
from unified.kinds.agreement import consensus, votes_per_program
from unified.pipeline.rewards import reward_from_results
from unified.sandbox.exec_types import ExecResult
from unified.types import IOTriple, Problem, Program, TestCase

PROBLEM = Problem("P/1", "mbpp", "Write f that doubles x.", "f", (TestCase((1,), 2),))
INPUTS = [(1,), (5,), (-3,)]


def _program(name: str, code: str = "") -> Program:
    return Program("P/1", f"P/1#{name}", code or f"def f(x):\n    return x  # {name}\n", "f")


def _runs(behaviour: dict[str, dict]) -> tuple[list[Program], list[IOTriple]]:
    """program name -> {input: output}; an input left out is a run that failed there."""
    programs = [_program(name) for name in behaviour]
    triples = [
        IOTriple("P/1", f"P/1#{name}", args, out, "visible" if args == (1,) else "proposed")
        for name, outs in behaviour.items()
        for args, out in outs.items()
    ]
    return programs, triples


DOUBLE = {a: 2 * a[0] for a in INPUTS}
SQUARE = {a: a[0] ** 2 for a in INPUTS}  # fails the visible example (1, not 2)
PLUS1 = {(1,): 2, (5,): 6, (-3,): -2}  # matches the visible example, differs elsewhere


def test_the_largest_cluster_labels_every_input_and_votes_count_duplicates():
    programs, triples = _runs({"a": DOUBLE, "b": SQUARE, "c": SQUARE, "d": PLUS1})
    found, why = consensus(PROBLEM, programs, triples, {"P/1#a": 4}, total=8)  # a was written 4 times
    assert why is None
    assert found.program_id == "P/1#a" and found.votes == 4 and found.runner_up == 2 and found.clusters == 3
    assert [(c.args, c.expected) for c in found.cases] == [((1,), 2), ((5,), 10), ((-3,), -6)]
    assert found.total == 8


def test_a_tie_and_a_lone_program_give_no_label():
    programs, triples = _runs({"a": DOUBLE, "b": SQUARE})
    assert consensus(PROBLEM, programs, triples, {}, total=2) == (None, "tied")
    programs, triples = _runs({"a": DOUBLE})
    assert consensus(PROBLEM, programs, triples, {}, total=1) == (None, "too_few_votes")
    assert consensus(PROBLEM, programs, triples, {}, total=1, min_votes=1)[0].votes == 1


def test_errors_are_behaviour_and_only_returned_values_become_cases():
    failing = {(1,): 2, (5,): 10}  # raised on (-3,)
    programs, triples = _runs({"a": failing, "b": failing, "c": DOUBLE})
    found, _ = consensus(PROBLEM, programs, triples, {}, total=3)
    assert found.votes == 2 and found.program_id == "P/1#a"  # the two that fail alike beat the one that does not
    assert [c.args for c in found.cases] == [(1,), (5,)]  # no label where the winners raised


def test_programs_that_raise_on_every_input_abstain():
    programs, triples = _runs({"a": {}, "b": {}, "c": {}, "d": DOUBLE, "e": DOUBLE})  # a-c raise everywhere
    found, why = consensus(PROBLEM, programs, triples, {}, total=5)
    assert why is None and found.program_id == "P/1#d" and found.votes == 2 and found.clusters == 1
    assert found.total == 5  # the abstainers still count in the total
    assert consensus(PROBLEM, programs, triples, {}, total=5, abstain=False) == (None, "all_errors")  # the old vote
    programs, triples = _runs({"a": {}, "b": {}, "c": DOUBLE})
    assert consensus(PROBLEM, programs, triples, {}, total=3) == (None, "too_few_votes")  # one runnable program
    programs, _ = _runs({"a": {}, "b": {}})
    assert consensus(PROBLEM, programs, triples, {}, total=2) == (None, "all_errors")  # nobody returned a value


def test_winners_with_no_value_or_only_none_give_no_label():
    programs, triples = _runs({"a": {a: None for a in INPUTS}, "b": {a: None for a in INPUTS}, "c": DOUBLE})
    assert consensus(PROBLEM, programs, triples, {}, total=3) == (None, "returns_none")
    assert consensus(PROBLEM, [_program("a")], [], {}, total=1) == (None, "no_inputs")


def test_both_ranks_clusters_by_the_visible_examples_first():
    programs, triples = _runs({"a": SQUARE, "b": SQUARE, "c": SQUARE, "d": PLUS1})
    plain, _ = consensus(PROBLEM, programs, triples, {}, total=4)
    assert plain.program_id == "P/1#a"  # three votes win on agreement alone
    ranked, _ = consensus(PROBLEM, programs, triples, {}, total=4, visible=True, min_votes=1)
    assert ranked.program_id == "P/1#d" and ranked.visible_matched == 1  # the one that matches the example


def test_votes_per_program_counts_ast_duplicates():
    a1, a2 = _program("p0", "def f(x):\n    return 2*x\n"), _program("p1", "def f(x):\n    return 2 * x  # same\n")
    b = _program("p2", "def f(x):\n    return x * x\n")
    assert votes_per_program([a1, a2, b], [a1, b]) == {"P/1#p0": 2, "P/1#p2": 1}


def _solve_task(source: str, behaviour: dict, visible_passing=None):
    programs, triples = _runs(behaviour)
    opts = BuildOptions(
        solve_source=source, samples_per_problem=len(programs), visible_passing=visible_passing, agreement_min_votes=2
    )
    return solve.build_problem(PROBLEM, programs, triples, opts)


def test_solve_under_agreement_reads_no_expected_value_of_the_examples():
    tasks, rejected = _solve_task("agreement", {"a": SQUARE, "b": SQUARE, "c": DOUBLE})
    assert not rejected
    (task,) = tasks
    assert [(c.args, c.expected) for c in task.cases] == [((1,), 1), ((5,), 25), ((-3,), 9)]  # the label, not the example's 2
    assert "return x" in task.program and task.gold.startswith("```python")
    tasks, rejected = _solve_task("agreement", {"a": SQUARE, "b": DOUBLE})
    assert not tasks and rejected[0].reason == "tied" and rejected[0].kind == "solve"


def test_solve_under_both_adds_labels_only_from_a_cluster_that_passes_the_examples():
    tasks, _ = _solve_task("both", {"a": SQUARE, "b": SQUARE, "c": DOUBLE, "d": DOUBLE})
    assert [(c.args, c.expected) for c in tasks[0].cases] == [((1,), 2), ((5,), 10), ((-3,), -6)]
    tasks, _ = _solve_task("both", {"a": SQUARE, "b": SQUARE})  # nobody passes the example: the example alone
    assert [(c.args, c.expected) for c in tasks[0].cases] == [((1,), 2)]
    tasks, _ = _solve_task("visible", {"a": SQUARE, "b": SQUARE, "c": DOUBLE})
    assert [(c.args, c.expected) for c in tasks[0].cases] == [((1,), 2)]


@pytest.mark.parametrize("outputs, reward", [((1, 25, 9), 1.0), ((1, 25, 8), 0.0), ((2, 10, -6), 0.0)])
def test_a_solve_answer_is_rewarded_for_matching_the_label(outputs, reward):
    (task,), _ = _solve_task("agreement", {"a": SQUARE, "b": SQUARE, "c": DOUBLE})
    results = [ExecResult("ok", value=v) for v in outputs]
    assert reward_from_results(task, "def f(x): ...", results) == reward


def test_an_answer_that_raises_earns_nothing_under_agreement():
    (task,), _ = _solve_task("agreement", {"a": SQUARE, "b": SQUARE, "c": DOUBLE})
    results = [ExecResult("ok", value=1), ExecResult("error", error="ZeroDivisionError"), ExecResult("ok", value=9)]
    assert reward_from_results(task, "def f(x): ...", results) == 0.0
    assert reward_from_results(task, "def f(x): ...", results, solve_reward="graded") == solve.GRADED["error"]
