"""Task kinds are plug-ins: a new kind is one module plus one registry entry, and phase 3
(build), phase 4 (validate), phase 5 (rewards) and the console pick it up without edits."""

import sys
import types

import pytest

import unified.kinds as kinds
from unified.run import metrics
from unified.kinds import KINDS, TASK_KINDS, BuildOptions, TaskKind
from unified.kinds.base import cases_passed, from_each_program, no_floor
from unified.sandbox.exec_types import ExecCall, ExecResult
from unified.text.extract import read_literal
from unified.pipeline.config import TTRLVR_KINDS
from unified.pipeline.rewards import score_batch
from unified.pipeline.tasks import build_tasks
from unified.pipeline.validate import validate_tasks
from unified.types import IOTriple, Problem, Program, Task, TestCase

PROBLEM = Problem("Toy/0", "toy", "Double a number.", "double", (TestCase((2,), 4),))
PROGRAM = Program("Toy/0", "Toy/0#p0", "def double(x):\n    return 2 * x\n", "double")
TRIPLES = [IOTriple("Toy/0", "Toy/0#p0", (x,), 2 * x, "visible") for x in (1, 2, 3)]


def _negation_kind() -> types.ModuleType:
    """`negation`: given the program and an output, answer an input whose output is -output.
    Written as a kind module would be: every name of `TaskKind`, nothing more."""
    m = types.ModuleType("negation")
    m.NAME, m.LETTER, m.PER_PROBLEM, m.RAW_ANSWER = "negation", "N", False, False

    def build(problem, program, triples, opts):
        return [
            Task(
                f"{program.program_id}:negation:{i}",
                "negation",
                problem.problem_id,
                program.program_id,
                f"Which x gives {-t.output}?",
                f"<answer>{-t.args[0]}</answer>",
                program.entry_point,
                program.code,
                (TestCase((-t.args[0],), -t.output),),
            )
            for i, t in enumerate(triples)
        ], []

    m.build_problem = from_each_program(build)
    m.readable_floor = no_floor
    m.answer_shape = lambda task: None
    m.parse = lambda task, answer: (lambda ok_v: ((ok_v[1],), None) if ok_v[0] else (None, "not_a_literal"))(read_literal(answer))
    m.calls = lambda task, parsed: [ExecCall(task.program, task.entry_point, parsed)]
    m.reward = lambda task, parsed, results, opts: float(all(cases_passed(task, results)) and bool(results))
    m.is_trivial = lambda task, outputs: False
    m.gold_is_own = lambda task, parsed: True
    return m


@pytest.fixture
def with_negation(monkeypatch):
    kind = _negation_kind()
    monkeypatch.setitem(sys.modules, "negation", kind)
    monkeypatch.setattr(kinds, "KINDS", {**KINDS, "negation": kind})
    return kind


def test_the_registry_is_the_one_list_of_kinds():
    assert TASK_KINDS == tuple(KINDS) == ("induction", "deduction", "abduction", "solve", "repair")
    declared = [n for n in vars(TaskKind) if not n.startswith("_")] + list(TaskKind.__annotations__)
    assert {"build_problem", "readable_floor", "PER_PROBLEM", "RAW_ANSWER", "answer_shape"} <= set(declared)
    for name, kind in [*KINDS.items(), ("negation", _negation_kind())]:
        assert kind.NAME == name and len(kind.LETTER) == 1
        missing = [n for n in declared if not hasattr(kind, n)]
        assert not missing, f"kind {name} does not declare {missing}"
        assert isinstance(kind.PER_PROBLEM, bool) and isinstance(kind.RAW_ANSWER, bool)
    assert not hasattr(kinds.KINDS["solve"], "build")  # no stub: the solve kind builds per problem only
    with pytest.raises(ValueError, match="unknown task kind 'negation'"):
        kinds.kind_of("negation")


def test_kinds_take_turns_per_program():
    tasks, rejections = build_tasks([PROBLEM], [PROGRAM], TRIPLES, TTRLVR_KINDS, BuildOptions(shown_pairs=2))
    assert [t.task_id.split(":", 1)[1] for t in tasks] == [
        "induction:0",
        "deduction:0",
        "abduction:0",
        "deduction:1",
        "abduction:1",
        "deduction:2",
        "abduction:2",
    ]
    assert not rejections
    only, _ = build_tasks([PROBLEM], [PROGRAM], TRIPLES, ("induction",), BuildOptions(visible_passing=frozenset()))
    assert only == []  # induction from a program that fails the visible examples: none


def test_a_new_kind_is_built_validated_and_rewarded_without_touching_the_pipeline(with_negation):
    tasks, _ = build_tasks([PROBLEM], [PROGRAM], TRIPLES, ("negation", "deduction"), BuildOptions())
    assert [t.kind for t in tasks] == ["negation", "deduction"] * 3
    kept, rejected = validate_tasks(tasks, TRIPLES, None, balance_kinds=False)
    assert len(kept) == 6 and not rejected  # the gold answers earn 1 through the kind's own reward
    run_batch = lambda calls: [ExecResult("ok", 2 * c.args[0]) for c in calls]  # noqa: E731 - `double` itself
    negation = tasks[0]  # Which x gives -2? -> -1
    got = score_batch(
        [(negation, "<answer>-1</answer>"), (negation, "<answer>1</answer>"), (negation, "no")], run_batch, format_penalty=-0.5
    )
    assert got == [(1.0, None), (0.0, None), (-0.5, "no_answer")]


def test_the_console_names_every_registered_kind(with_negation):
    assert "tasks I/D/A/S/R/N = induction/deduction/abduction/solve/repair/negation" in metrics.legend_line()
    line = metrics.summary_line(1, 2, {"tasks/kept_negation": 5, "tasks/kept_deduction": 2})
    assert "tasks I/D/A/S/R/N 0/2/0/0/0/5 |" in line
