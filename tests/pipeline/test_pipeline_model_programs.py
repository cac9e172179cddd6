"""A weak model's programs still teach: deduction/abduction come from every runnable
program (the program defines their answers), induction only from programs that pass the
visible examples (their pairs must agree with the problem text); a round's tasks are capped
with the kinds taking turns; a forgotten </answer> is still read."""

from collections import Counter

import pytest

from tests.helpers.rounds import round_data as phases_1_4
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from unified.text.extract import answer_text
from tests.helpers.scripted import ScriptedGenerator
from tests.helpers.pipeline_config import pipeline_config
from unified.pipeline.phases import cap_tasks
from unified.types import Problem, Task, TestCase

DOUBLE = Problem(
    problem_id="Toy/9", benchmark="toy", prompt="Double x.", entry_point="f", visible=(TestCase((1,), 2), TestCase((3,), 6))
)
PROGRAMS = ["```python\ndef f(x):\n    return 2 * x\n```", "```python\ndef f(x):\n    return x + 1\n```"]  # right, wrong


def _respond(text, sampling):
    return ["```python\nf(10)\nf(-4)\n```"] if "new, varied test inputs" in text else PROGRAMS


@pytest.fixture(scope="module")
def round_data():
    cfg = pipeline_config(
        num_programs=2,
        num_proposed_inputs=2,
        evaluate_baseline=False,
        keep_passing_visible=False,
        induction_needs_visible=True,
        balance_kinds=False,
        max_tasks=None,
    )
    with build_executor(ExecutorConfig(workers=2)) as executor:
        return phases_1_4([DOUBLE], ScriptedGenerator(_respond), executor, cfg, round_index=1, seed=0)


def test_failing_program_still_gives_deduction_and_abduction_but_no_induction(round_data):
    kinds = {pid: Counter(t.kind for t in round_data.candidate_tasks if t.program_id == pid) for pid in ("Toy/9#p0", "Toy/9#p1")}
    assert kinds["Toy/9#p0"]["induction"] == 1 and kinds["Toy/9#p1"]["induction"] == 0
    assert kinds["Toy/9#p1"]["deduction"] == 4 and kinds["Toy/9#p1"]["abduction"] == 4
    assert [r.subject for r in round_data.rejections if r.reason == "fails_visible"] == ["Toy/9#p1"]
    wrong = [t for t in round_data.candidate_tasks if t.program_id == "Toy/9#p1" and t.kind == "deduction"]
    assert {(c.args, c.expected) for t in wrong for c in t.cases} == {((1,), 2), ((3,), 4), ((10,), 11), ((-4,), -3)}


def test_without_the_rule_induction_comes_from_every_program():
    cfg = pipeline_config(
        num_programs=2,
        num_proposed_inputs=2,
        evaluate_baseline=False,
        keep_passing_visible=False,
        induction_needs_visible=False,
        balance_kinds=False,
    )
    with build_executor(ExecutorConfig(workers=2)) as executor:
        data = phases_1_4([DOUBLE], ScriptedGenerator(_respond), executor, cfg, round_index=1, seed=0)
    assert sum(t.kind == "induction" for t in data.candidate_tasks) == 2


def _task(i, kind):
    return Task(f"T{i}:{kind}", kind, "P", "P#p0", "prompt", "<answer>1</answer>", "f", "def f(): pass", ())


def test_cap_keeps_the_mix_is_seeded_and_counts_what_it_drops():
    tasks = [_task(i, "deduction") for i in range(10)] + [_task(i, "abduction") for i in range(5)] + [_task(0, "induction")]
    kept, dropped = cap_tasks(tasks, 7, seed=3)
    assert Counter(t.kind for t in kept) == {"induction": 1, "deduction": 3, "abduction": 3}
    assert len(dropped) == 9 and {r.reason for r in dropped} == {"over_cap"}
    assert [t.task_id for t in cap_tasks(tasks, 7, seed=3)[0]] == [t.task_id for t in kept]
    assert [t.task_id for t in cap_tasks(tasks, 7, seed=4)[0]] != [t.task_id for t in kept]
    assert cap_tasks(tasks, None, seed=3) == (tasks, [])


@pytest.mark.parametrize(
    "text, expected",
    [
        ("it is <answer>[1, 2]\n```", "[1, 2]"),
        ("<answer>\n```python\ndef f(x):\n    return 1\n```\nmore words", "def f(x):\n    return 1"),
        ("<answer>3</answer>", "3"),
        ("<answer>   ", None),
    ],
)
def test_an_unclosed_answer_is_read_up_to_its_fence(text, expected):
    assert answer_text(text) == expected
