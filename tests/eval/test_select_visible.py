"""`python -m unified.eval --n K --select visible`: the answer a user gets from K samples is the
first that passes the visible examples (else the greedy one), scored on the hidden tests."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.scripted import ScriptedGenerator
from unified.benchmarks.load import load_problems
from unified.eval.cli import run
from unified.eval.run import EvalRun, _selected
from unified.errors import UserError
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor

WRONG = "```python\ndef {0}(*args):\n    return 12345\n```"


def test_the_first_sample_passing_the_visible_examples_is_the_answer_scored_on_hidden_tests():
    problems = load_problems("mbpp", ids=["Mbpp/2", "Mbpp/3", "Mbpp/4"])
    right = {p.entry_point: f"```python\n{p.canonical_solution}\n```" for p in problems}
    samples = {
        "similar_elements": [WRONG.format("similar_elements"), right["similar_elements"]],  # sample 2 passes
        "is_not_prime": [WRONG.format("is_not_prime")] * 2,
    }  # none passes: the greedy answer stays
    samples["heap_queue_largest"] = [right["heap_queue_largest"], WRONG.format("heap_queue_largest")]  # sample 1 passes

    def respond(text, sampling):
        entry = next(e for e in samples if f"`{e}`" in text or f"def {e}(" in text)
        return samples[entry]

    args = SimpleNamespace(n=2, temperature=1.0, seed=0, select="visible")
    ev = EvalRun.__new__(EvalRun)
    ev.args, ev.budget = args, {"max_tokens": 64}
    rows = [
        {"task_id": p.problem_id, "passed": pid_greedy, "completion": ""} for p, pid_greedy in zip(problems, [False, True, False])
    ]
    with build_executor(ExecutorConfig(workers=1)) as ex:
        out = ev._with_sampled(rows, problems, ScriptedGenerator(respond), ex)
    by_id = {r["task_id"]: r for r in out}
    assert by_id["Mbpp/2"]["selected_from"] == "Mbpp/2#p1" and by_id["Mbpp/2"]["selected_visible"] is True
    assert by_id["Mbpp/3"]["selected_from"] == "greedy" and by_id["Mbpp/3"]["selected_visible"] is True  # the greedy's pass
    assert by_id["Mbpp/4"]["selected_from"] == "Mbpp/4#p0" and by_id["Mbpp/4"]["selected_visible"] is True
    assert [by_id[i]["correct"] for i in ("Mbpp/2", "Mbpp/3", "Mbpp/4")] == [1, 0, 1]
    summary = _selected(out)
    assert summary["pass@1_select_visible"] == 1.0 and summary["select_visible"]["filter_passed"] == 2


def test_select_needs_samples(tmp_path: Path):
    with pytest.raises(UserError, match="--n K"):
        run(["--model", "tiny", "--select", "visible", "--problems", "1", "--output", str(tmp_path / "x")])
