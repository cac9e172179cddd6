"""The bans that exist for self-play determinism (`rules.DETERMINISM_MODULES`: hashlib, random,
time, datetime, calendar, logging, ...) hold where a program's outputs become a task's
expected values, the determinism check's two runs (`run_twice`), and nowhere else: a `solve`
answer or an evaluated program that imports them is judged by its values, as under EvalPlus's
own harness."""

import pytest

from unified.benchmarks.hidden import hidden_calls, passes_hidden
from unified.benchmarks.load import load_problems
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig
from unified.sandbox.reuse import ReusingExecutor

DATED = "import datetime, hashlib\ndef f(y):\n    return [datetime.date(y, 3, 1).weekday(), hashlib.md5(str(y).encode()).hexdigest()[:6]]\n"
EXPECTED = [4, "07811d"]  # what a plain interpreter answers for f(2024)


@pytest.fixture(scope="module")
def pool():
    with Executor(ExecutorConfig(workers=2, timeout_s=2.0, memory_mb=256)) as ex:
        yield ex


def test_an_answer_that_imports_datetime_and_hashlib_is_judged_by_its_value(pool):
    r = pool.run(DATED, "f", (2024,))
    assert r.ok and r.value == EXPECTED, r


def test_the_determinism_check_still_refuses_them(pool):
    ((a, b),) = pool.run_twice([ExecCall(DATED, "f", (2024,))])
    assert a.status == b.status == "banned" and "datetime" in a.error and "determinism" in a.error, (a, b)
    reusing = ReusingExecutor(pool)
    assert reusing.run_batch([ExecCall(DATED, "f", (2024,))])[0].value == EXPECTED
    ((a, b),) = reusing.run_twice([ExecCall(DATED, "f", (2024,)), ExecCall("def f(y):\n    return y", "f", (1,))])[:1]
    assert a.status == b.status == "banned", (a, b)  # remembered from run_batch, refused here all the same


def test_humaneval_162s_canonical_answer_passes_under_the_default_policy(pool):
    (problem,) = load_problems("humaneval", ids=["HumanEval/162"])
    assert "hashlib" in problem.canonical_solution
    results = pool.run_batch(hidden_calls(problem, problem.canonical_solution))
    assert results and passes_hidden(problem, results), results[:2]
