"""Every rejection reason of phases 1-4 is reached by a real case and counted."""

import pytest

from tests.helpers.rounds import round_data as phases_1_4
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from tests.helpers.scripted import ScriptedGenerator
from tests.helpers.pipeline_config import pipeline_config
from unified.pipeline.validate import REASONS
from unified.types import Problem, TestCase

TOY = Problem(
    problem_id="Toy/1",
    benchmark="toy",
    prompt="Compute something from the number x.",
    entry_point="f",
    visible=(TestCase((1,), None), TestCase((2,), None), TestCase((3,), None), TestCase((range(2),), None)),
)
TOY2 = Problem(problem_id="Toy/2", benchmark="toy", prompt="Multiply x by ten.", entry_point="g", visible=(TestCase((5,), 50),))

F_PROGRAMS = {
    "good": "def f(x):\n    return x * 10",
    "duplicate": "def f( x ):\n    return (x*10)  # the same program",
    "no_code": "I cannot do this.",
    "syntax": "def f(x:\n    return",
    "no_entry_point": "def h(x):\n    return x",
    "runtime_error": "def f(x):\n    if x == 2:\n        raise ValueError('two')\n    return x + 100",
    "timeout": "def f(x):\n    while x == 3:\n        pass\n    return x + 200",
    "memory": "def f(x):\n    if x == 4:\n        return len([0] * (10 ** 9))\n    return x + 300",
    "banned": "import subprocess\ndef f(x):\n    return x",
    "crashed": "import sys\nclass A:\n    def __repr__(self):\n        return repr(A())\n"
    "def f(x):\n    if x == 1:\n        sys.setrecursionlimit(10 ** 7)\n        return repr(A())\n    return x + 400",
    "nondeterministic": "def f(x):\n    return id(object()) % 100003 + x",
    "output_too_large": "def f(x):\n    return 'y' * 2000",
    "unserialisable": "def f(x):\n    return range(x)",
    "constant": "def f(x):\n    return 7",
    "returns_none": "def f(x):\n    y = x",
    "gold_mismatch": "def f(x):\n    return '<answer>' * x",
    "same_behaviour": "def f(x):\n    return sum([x] * 10)",
}
F_INPUTS = "```python\nf(4)\nf(1)\nf(1, 2)\nf(x)\nf(4\n```"  # ok, duplicate, wrong_arity, not_a_literal, syntax
G_PROGRAMS = ["```python\ndef g(x):\n    return x * 10\n```", "```python\ndef g(x):\n    return x\n```"]


def _respond(text, sampling):
    if "`g`" in text:
        return G_PROGRAMS if "new, varied test inputs" not in text else ["none"]
    if "new, varied test inputs" in text:
        return [F_INPUTS]
    return [f"```python\n{code}\n```" if name != "no_code" else code for name, code in F_PROGRAMS.items()]


@pytest.fixture(scope="module")
def data():
    cfg = pipeline_config(
        max_tasks=None,
        keep_passing_visible=True,
        num_programs=len(F_PROGRAMS),
        num_proposed_inputs=5,
        evaluate_baseline=False,
        max_output_chars=1000,
        max_tasks_per_kind_per_problem=2,
        balance_kinds=True,
    )
    with build_executor(ExecutorConfig(workers=2, timeout_s=0.5, memory_mb=256)) as executor:
        return phases_1_4([TOY, TOY2], ScriptedGenerator(_respond), executor, cfg, round_index=1, seed=0)


def test_every_reason_is_exercised(data):
    seen = {(r.stage, r.reason) for r in data.rejections}
    expected = {(stage, reason) for stage, reasons in REASONS.items() for reason in reasons}
    assert seen == expected


def test_reasons_point_at_the_right_programs(data):
    index = {name: i for i, name in enumerate(F_PROGRAMS)}

    def subjects(stage, reason):
        return {
            r.subject.split(":")[0]
            for r in data.rejections
            if r.stage == stage and r.reason == reason and r.problem_id == "Toy/1"
        }

    for reason in ("no_code", "syntax", "no_entry_point", "duplicate"):
        assert subjects("program", reason) == {f"Toy/1#p{index[reason]}"}
    for reason in (
        "runtime_error",
        "timeout",
        "memory",
        "banned",
        "crashed",
        "nondeterministic",
        "output_too_large",
        "unserialisable",
    ):
        assert subjects("triple", reason) == {f"Toy/1#p{index[reason]}"}, reason
    assert subjects("task", "gold_mismatch") == {f"Toy/1#p{index['gold_mismatch']}"}
    trivial = {(r.subject.split(":")[0], r.kind) for r in data.rejections if r.reason == "trivial"}
    p_const, p_none = f"Toy/1#p{index['constant']}", f"Toy/1#p{index['returns_none']}"
    assert trivial == {
        (p_const, "abduction"),
        (p_const, "induction"),
        (p_none, "deduction"),
        (p_none, "abduction"),
        (p_none, "induction"),
    }
    dup = [r for r in data.rejections if r.stage == "task" and r.reason == "duplicate"]
    assert [(r.subject, r.kind) for r in dup] == [(f"Toy/1#p{index['same_behaviour']}:induction:0", "induction")]
    # the failing input only removes that one triple: the other inputs of the program remain
    assert {t.args for t in data.triples if t.program_id == f"Toy/1#p{index['timeout']}"} == {(1,), (2,), (4,)}


def test_input_and_visible_check_reasons(data):
    inputs = sorted((r.reason, r.subject) for r in data.rejections if r.stage == "input")
    assert inputs == [
        ("duplicate", "(1,)"),
        ("no_inputs", ""),
        ("not_a_literal", "f(x)"),
        ("syntax", "f(4"),
        ("unserialisable", "(range(0, 2),)"),
        ("wrong_arity", "f(1, 2)"),
    ]
    assert [r.problem_id for r in data.rejections if r.reason == "no_inputs"] == ["Toy/2"]
    assert [r.subject for r in data.rejections if r.reason == "fails_visible"] == ["Toy/2#p1"]
    assert [r.kind for r in data.rejections if r.reason == "too_few_pairs"] == ["induction"]


def test_caps_and_balance(data):
    per = {}
    for t in data.tasks:
        per[(t.problem_id, t.kind)] = per.get((t.problem_id, t.kind), 0) + 1
    assert max(per.values()) <= 2
    kept = {k: v for k, v in data.kept_per_kind().items() if v or k not in ("solve", "repair")}  # not configured here
    assert len(set(kept.values())) == 1 and kept["induction"] == 2
    counts = data.rejection_counts()
    assert sum(n for (stage, reason, _), n in counts.items() if reason == "balance") == (2 + 1) * 2 - 2 * 2
    assert len(data.tasks) + sum(1 for r in data.rejections if r.stage == "task" and r.reason != "too_few_pairs") == len(
        data.candidate_tasks
    )
