"""Failure classes (`eval.failures`): from extraction and the sandbox's own results, on real
MBPP+ problems, and the gain split into format and logic fixes."""

import pytest

from tests.helpers.scripted import ScriptedGenerator
from unified.benchmarks.load import load_problems
from unified.eval.evaluate import evaluate
from unified.eval.failures import CLASSES, counts, flip_classes, gain_split, run_class
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor

IDS = ["Mbpp/2", "Mbpp/3", "Mbpp/4", "Mbpp/6", "Mbpp/7", "Mbpp/8", "Mbpp/9"]


@pytest.fixture(scope="module")
def problems():
    return load_problems("mbpp", ids=IDS)


@pytest.fixture(scope="module")
def executor():
    with build_executor(ExecutorConfig(workers=2, timeout_s=1.0)) as ex:
        yield ex


def test_each_class_comes_from_what_the_program_did(problems, executor):
    entry = {p.problem_id: p.entry_point for p in problems}
    canonical = {p.problem_id: p.canonical_solution for p in problems}
    first_args = {p.problem_id: repr(list(p.hidden[0].args)) for p in problems}
    answers = {
        "Mbpp/2": "I cannot write code for this.",  # no code
        "Mbpp/3": "```python\ndef {e}(n:\n    return\n```",  # does not parse
        "Mbpp/4": "```python\ndef helper(a, b):\n    return a\n```",  # parses, wrong name
        "Mbpp/6": "```python\ndef {e}(*args):\n    raise ValueError('no')\n```",  # raises
        # runs out of time on its first hidden case (each looping case burns a whole CPU second:
        # one is the class, a hundred would be CI's slowest test) and returns None on the others
        "Mbpp/7": "```python\ndef {e}(*args):\n    while list(args) == {a}:\n        pass\n```",
        "Mbpp/8": "```python\ndef {e}(*args):\n    return 12345\n```",  # a value, the wrong one
        "Mbpp/9": "```python\n{c}\n```",  # the canonical solution
    }

    def respond(text, sampling):
        (pid,) = [p.problem_id for p in problems if text.startswith(p.prompt) and f"`{p.entry_point}`" in text]
        return [answers[pid].format(e=entry[pid], c=canonical[pid], a=first_args[pid])]

    result = evaluate(problems, ScriptedGenerator(respond), executor, max_tokens=64)
    assert result.classes == {
        "Mbpp/2": "no_code",
        "Mbpp/3": "syntax",
        "Mbpp/4": "entry_point",
        "Mbpp/6": "exception",
        "Mbpp/7": "timeout",
        "Mbpp/8": "wrong_answer",
        "Mbpp/9": "pass",
    }
    assert result.per_problem["Mbpp/9"] == 1.0 and sum(result.per_problem.values()) == 1.0
    assert counts(result.classes) == {c: 1 for c in CLASSES}


def test_raising_outranks_running_long_and_any_failure_outranks_a_wrong_value():
    assert run_class(["ok", "timeout", "error"], [True, False, False]) == "exception"
    assert run_class(["ok", "timeout"], [False, False]) == "timeout"
    assert run_class(["ok", "ok"], [True, False]) == "wrong_answer"
    assert run_class(["ok", "ok"], [True, True]) == "pass"
    assert run_class(["memory"], [False]) == "exception"


def test_flips_keep_their_classes_and_split_into_format_and_logic_fixes():
    control = {"a": 0.0, "b": 0.0, "c": 1.0, "d": 0.0}
    trained = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 0.0}
    before = {"a": "entry_point", "b": "wrong_answer", "c": "pass", "d": "syntax"}
    after = {"a": "pass", "b": "pass", "c": "exception", "d": "syntax"}
    out = flip_classes(before, after, control, trained)
    assert out["gained"] == [
        {"problem": "a", "before": "entry_point", "after": "pass"},
        {"problem": "b", "before": "wrong_answer", "after": "pass"},
    ]
    assert out["lost"] == [{"problem": "c", "before": "pass", "after": "exception"}]
    assert (out["gained_format_fixes"], out["gained_logic_fixes"], out["gained_unclassified"]) == (1, 1, 0)
    assert (out["net_format"], out["net_logic"]) == (1, 0)  # c was lost to an exception: a logic loss


def test_the_gain_split_is_the_mean_net_per_seed():
    seeds = [{"net_format": 1, "net_logic": 4}, {"net_format": -1, "net_logic": 3}]
    assert gain_split(seeds) == {"format": 0.0, "logic": 3.5}
    assert gain_split([]) is None


def test_the_agreement_labels_accuracy_is_scored_on_the_hidden_tests(problems, executor):
    # `run.measure._agreement`'s measurement: which problems' label programs pass their hidden tests
    from unified.benchmarks.hidden import programs_pass_hidden, with_expected_outputs

    scored = with_expected_outputs(problems[:2], executor.run_batch)
    codes = {
        scored[0].problem_id: scored[0].canonical_solution,
        scored[1].problem_id: f"def {scored[1].entry_point}(*a):\n    return 0\n",
    }
    assert programs_pass_hidden(scored, codes, executor.run_batch) == {scored[0].problem_id: True, scored[1].problem_id: False}
