"""The `repair` kind: a program of the model's that failed the visible example, with what the
sandbox said, -> a fixed program, rewarded on the visible examples in the real sandbox
(right, wrong and unreadable fixes); built only where a program failed; a whole round with
phase 1's own failure text."""

from dataclasses import replace

import pytest

from tests.helpers.rounds import round_data as phases_1_4
from unified.kinds import BuildOptions
from tests.helpers.scripted import ScriptedGenerator
from tests.helpers.pipeline_config import pipeline_config
from unified.pipeline.rewards import score_batch
from unified.pipeline.tasks import build_tasks
from unified.pipeline.validate import validate_tasks
from unified.sandbox.config import ExecutorConfig
from unified.sandbox.executor import Executor
from unified.text.prompts import program_prompt
from unified.types import Problem, Program, TestCase

PROBLEM = Problem(
    "Toy/1",
    "toy",
    "Write a function that adds one to a number.",
    "inc",
    (TestCase((1,), 2), TestCase((5,), 6)),
    hidden=(TestCase((100,), 101),),
)
BROKEN = Program("Toy/1", "Toy/1#p0", "def inc(x):\n    return x\n", "inc")
GOOD = Program("Toy/1", "Toy/1#p1", "def inc(x):\n    return x + 1\n", "inc")
RIGHT = "```python\ndef inc(x):\n    return x + 1\n```"
WRONG = "```python\ndef inc(x):\n    return x - 1\n```"
UNREADABLE = "The fix is to add one."


@pytest.fixture(scope="module")
def executor():
    ex = Executor(ExecutorConfig(workers=1))
    yield ex
    ex.close()


def _task(programs=(BROKEN, GOOD), failures=None, passing=frozenset({"Toy/1#p1"})):
    failures = {"Toy/1#p0": "(1,) -> 1"} if failures is None else failures
    return build_tasks(
        [PROBLEM], list(programs), [], ("repair",), BuildOptions(visible_passing=passing, visible_failures=failures)
    )


def test_the_prompt_shows_the_failing_program_and_the_sandboxs_words():
    [task], rejections = _task()
    assert not rejections and task.kind == "repair" and task.task_id == "Toy/1#repair:repair:0"
    assert task.prompt.startswith(program_prompt(PROBLEM)) and "return x\n```" in task.prompt
    assert "Running it on the example gave: (1,) -> 1" in task.prompt
    assert [c.args for c in task.cases] == [(1,), (5,)]  # the visible examples only: no hidden test
    assert "100" not in task.prompt and "101" not in task.prompt


def test_nothing_to_repair_or_no_example_value_builds_no_task():
    tasks, rejections = _task(failures={})
    assert not tasks and [r.reason for r in rejections] == ["no_failing_program"]
    no_value = replace(PROBLEM, visible=(TestCase((1,), None),))
    tasks, rejections = build_tasks([no_value], [BROKEN], [], ("repair",), BuildOptions(visible_failures={"Toy/1#p0": "x"}))
    assert not tasks and [r.reason for r in rejections] == ["too_few_pairs"]


@pytest.mark.parametrize("mode, expected", [("binary", [1.0, 0.0, -0.5]), ("graded", [1.0, -0.3, -0.5])])
def test_reward_on_right_wrong_and_unreadable_fixes(executor, mode, expected):
    [task], _ = _task()
    got = score_batch(
        [(task, text) for text in (RIGHT, WRONG, UNREADABLE)], executor.run_batch, format_penalty=-0.5, solve_reward=mode
    )
    assert [r for r, _ in got] == expected and [why for _, why in got] == [None, None, "no_code"]


def test_the_gold_is_a_passing_program_and_validation_keeps_it(executor):
    [task], _ = _task()
    assert "return x + 1" in task.gold
    kept, rejected = validate_tasks([task], [], None, balance_kinds=False)
    assert kept == [task] and not rejected


def test_a_round_repairs_phase_1s_failing_program_with_its_own_error(executor):
    problem = replace(PROBLEM, problem_id="Toy/2")
    answers = ["```python\ndef inc(x):\n    return x + undefined_name\n```", RIGHT]
    generator = ScriptedGenerator(lambda text, sampling: answers if sampling.temperature > 0 else ["no"])
    cfg = pipeline_config(kinds=("solve", "repair"), num_programs=2, evaluate_baseline=False, max_tasks=None)
    data = phases_1_4([problem], generator, executor, cfg, round_index=1)
    [task] = [t for t in data.tasks if t.kind == "repair"]
    assert "NameError" in task.prompt and "undefined_name" in task.prompt
    got = score_batch([(task, RIGHT), (task, WRONG)], executor.run_batch, format_penalty=-0.5)
    assert [r for r, _ in got] == [1.0, 0.0]
