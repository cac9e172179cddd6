"""`agreement/*`: how many problems got a label, how often it is right on the hidden tests,
and how often it contradicts a visible example; merged over ranks."""

from __future__ import annotations

from unified.run.metrics import agreement_counts, agreement_metrics
from unified.types import Problem, Task, TestCase


def _problem(pid: str, visible=((1,), 2)) -> Problem:
    return Problem(pid, "mbpp", "p", "f", (TestCase(*visible),) if visible else ())


def _task(pid: str, cases) -> Task:
    return Task(
        f"{pid}#solve:solve:0", "solve", pid, f"{pid}#solve", "p", "", "f", "code", tuple(TestCase(a, e) for a, e in cases)
    )


def test_counts_and_shares():
    problems = [_problem("A"), _problem("B"), _problem("C"), _problem("D", visible=None)]
    tasks = [
        _task("A", [((1,), 2), ((5,), 10)]),  # agrees with its example
        _task("B", [((1,), 3)]),  # contradicts it
        _task("D", [((0,), 0)]),
    ]  # no example to compare with
    part = agreement_counts(problems, tasks, {"A": True, "B": False, "D": True})
    assert part == dict(problems=4, labelled=3, scored=3, accurate=2, comparable=2, contradicts=1)
    merged = agreement_metrics([part, dict(problems=2, labelled=1, scored=1, accurate=1, comparable=0, contradicts=0)])
    assert merged["agreement/labelled_share"] == 4 / 6
    assert merged["agreement/label_accuracy"] == 3 / 4
    assert merged["agreement/disagrees_visible"] == 1 / 2


def test_no_labels_gives_counts_but_no_shares_over_nothing():
    merged = agreement_metrics([agreement_counts([_problem("A")], [], {})])
    assert merged["agreement/labelled"] == 0 and "agreement/label_accuracy" not in merged
