"""The `solve` kind: the problem's own prompt, rewarded on its visible examples in the real
sandbox (right, wrong, erroring, missing code; binary / fraction / graded), one task per
problem built without IPO triples, and its gold checked like every kind's."""

import pytest

from unified.kinds import BuildOptions, solve
from unified.pipeline.config import PipelineConfig
from unified.text.prompts import program_prompt
from unified.pipeline.rewards import score_batch
from unified.pipeline.tasks import build_tasks
from unified.pipeline.validate import validate_tasks
from unified.sandbox.config import ExecutorConfig
from unified.sandbox.executor import Executor
from unified.types import Problem, Program, TestCase

PROBLEM = Problem(
    "Toy/1",
    "toy",
    "Write a function that adds one to a number.",
    "inc",
    (TestCase((1,), 2), TestCase((5,), 6), TestCase((-1,), 0)),
    hidden=(TestCase((100,), 101),),
)
RIGHT = "```python\ndef inc(x):\n    return x + 1\n```"
HALF = "```python\ndef inc(x):\n    return x + 1 if x > 0 else 7\n```"  # 2 of 3 visible pass
WRONG = "```python\ndef inc(x):\n    return x\n```"
ERROR = "```python\ndef inc(x):\n    raise ValueError(x)\n```"
MISSING = "I think you should add one."


@pytest.fixture(scope="module")
def executor():
    ex = Executor(ExecutorConfig(workers=1))
    yield ex
    ex.close()


def _task(programs=(), passing=None):
    tasks, rejections = build_tasks([PROBLEM], list(programs), [], ("solve",), BuildOptions(visible_passing=passing))
    assert not rejections and len(tasks) == 1
    return tasks[0]


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("binary", [1.0, 0.0, 0.0, 0.0, -0.5]),
        ("fraction", [1.0, 2 / 3, 0.0, 0.0, -0.5]),
        ("graded", [1.0, -0.3, -0.3, -0.6, -0.5]),
    ],
)
def test_reward_on_right_wrong_erroring_and_missing_code(executor, mode, expected):
    task = _task()
    got = score_batch(
        [(task, text) for text in (RIGHT, HALF, WRONG, ERROR, MISSING)],
        executor.run_batch,
        format_penalty=-0.5,
        solve_reward=mode,
    )
    assert [round(r, 6) for r, _ in got] == [round(e, 6) for e in expected]
    assert [why for _, why in got] == [None, None, None, None, "no_code"]


def test_the_prompt_is_phase_1s_and_the_cases_are_the_visible_examples_only():
    task = _task()
    assert task.prompt == program_prompt(PROBLEM)
    assert task.cases == PROBLEM.visible  # the hidden (100,) -> 101 is nowhere in the task
    assert "100" not in task.prompt and all(c.args != (100,) for c in task.cases)


def test_one_task_per_problem_with_a_passing_program_as_gold(executor):
    passing = Program("Toy/1", "Toy/1#p1", "def inc(x):\n    return x + 1\n", "inc")
    failing = Program("Toy/1", "Toy/1#p0", "def inc(x):\n    return x\n", "inc")
    task = _task([failing, passing], passing=frozenset({"Toy/1#p1"}))
    assert task.program == passing.code and "return x + 1" in task.gold
    kept, rejected = validate_tasks([task], [], None, balance_kinds=False)
    assert kept == [task] and not rejected  # the gold earns 1 through the kind's own reward
    assert score_batch([(task, task.gold)], executor.run_batch)[0] == (1.0, None)


def test_without_a_passing_program_the_task_has_no_gold_and_still_trains():
    task = _task([Program("Toy/1", "Toy/1#p0", "def inc(x):\n    return x\n", "inc")], passing=frozenset())
    assert task.gold == "" and task.program == ""
    kept, rejected = validate_tasks([task], [], None, balance_kinds=False)
    assert kept == [task] and not rejected


def test_a_problem_without_visible_values_gets_no_task():
    blind = Problem("Toy/2", "toy", "Do something.", "f", (TestCase((1,), None),))
    tasks, rejections = build_tasks([blind], [], [], ("solve",), BuildOptions())
    assert tasks == [] and [r.reason for r in rejections] == ["too_few_pairs"]


def test_code_prompt_imports_are_added_as_phase_1_adds_them(executor):
    he = Problem(
        "HE/0",
        "toy",
        'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum."""\n',
        "total",
        (TestCase(([1, 2],), 3),),
    )
    task = build_tasks([he], [], [], ("solve",), BuildOptions())[0][0]
    answer = "```python\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```"  # no import: List undefined
    assert score_batch([(task, answer)], executor.run_batch)[0] == (1.0, None)


def test_solve_only_runs_no_phase_2_and_a_bad_mode_is_one_clear_error():
    assert not PipelineConfig(kinds=("solve",)).needs_triples
    assert PipelineConfig(kinds=("solve", "induction")).needs_triples
    with pytest.raises(ValueError, match="solve_reward must be one of"):
        PipelineConfig(solve_reward="partial")
