"""executor.reuse_results (sandbox/reuse.py), on a real pool: a call seen this round is answered
from memory, `forget()` starts afresh, and the determinism check still compares two real runs
on different workers."""

import gc
import math
import sys

import pytest

from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig
from unified.sandbox.executors import build_executor
from unified.sandbox.reuse import ReusingExecutor

INC = "def f(x):\n    return x + 1\n"
LOOP = "def f(x):\n    while True:\n        x += 1\n"
ADDRESS = "def f():\n    return id(len)\n"  # the worker's own (ASLR): the same in every fork of one worker, not of another


@pytest.fixture(scope="module")
def pool():
    with Executor(ExecutorConfig(workers=2, timeout_s=0.5)) as ex:
        yield ex


def runs(ex) -> int:
    return ex.stats()["calls"]


def test_a_call_seen_this_round_is_not_run_again_until_forget(pool):
    ex = ReusingExecutor(pool)
    before = runs(ex)
    first = ex.run_batch([ExecCall(INC, "f", (1,)), ExecCall(INC, "f", (2,)), ExecCall(INC, "f", (1,))])
    assert [r.value for r in first] == [2, 3, 2]
    assert runs(ex) - before == 2 and ex.stats()["reused"] == 1  # the batch's duplicate ran once
    again = ex.run_batch([ExecCall(INC, "f", (2,)), ExecCall(INC, "f", (3,))])
    assert [r.value for r in again] == [3, 4] and runs(ex) - before == 3 and ex.stats()["reused"] == 2
    # 1 and 1.0 and True are different arguments
    assert [r.value for r in ex.run_batch([ExecCall(INC, "f", (1.0,)), ExecCall(INC, "f", (True,))])] == [2.0, 2]
    assert runs(ex) - before == 5
    ex.forget()
    assert ex.run(INC, "f", (2,)).value == 3 and runs(ex) - before == 6


def test_a_timeout_costs_its_cpu_limit_once_a_round(pool):
    ex = ReusingExecutor(pool)
    before = runs(ex)
    statuses = [r.status for r in ex.run_batch([ExecCall(LOOP, "f", (0,))] * 3)]
    statuses += [a.status + "/" + b.status for a, b in ex.run_twice([ExecCall(LOOP, "f", (0,))])]
    assert statuses == ["timeout"] * 3 + ["timeout/timeout"]
    assert runs(ex) - before == 1  # a failed first run is not run a second time


def test_the_determinism_check_still_runs_the_second_time_on_another_worker(pool):
    ex = ReusingExecutor(pool)
    variants = [ExecCall(ADDRESS + f"# {i}\n", "f") for i in range(6)]  # six calls, so no luck of placement passes
    remembered = ex.run_batch(variants)
    before = runs(ex)
    pairs = ex.run_twice([*variants, ExecCall(INC, "f", (5,))])
    assert [a for a, _ in pairs[:6]] == remembered  # the first runs are the remembered ones...
    assert all(b.ok and b.value != a.value for a, b in pairs[:6])  # ...the second real runs elsewhere
    assert [(a.value, b.value) for a, b in pairs[6:]] == [(6, 6)]
    assert runs(ex) - before == 8  # INC twice, each ADDRESS once more


def test_nothing_is_remembered_beyond_the_byte_budget(pool):
    ex = ReusingExecutor(pool, budget_bytes=0)
    before = runs(ex)
    ex.run_batch([ExecCall(INC, "f", (1,))])
    ex.run_batch([ExecCall(INC, "f", (1,))])
    assert runs(ex) - before == 2 and ex.stats()["reused"] == 0


def test_the_trainer_config_turns_it_on_and_a_bare_executor_stays_plain():
    assert not ExecutorConfig().reuse_results  # sandbox tests and `unified.eval` run every call
    with build_executor(ExecutorConfig(workers=1, reuse_results=True)) as ex:
        assert isinstance(ex, ReusingExecutor) and ex.isolation == ex._inner.isolation


def test_the_default_config_reuses_results():
    from unified.config import load_config

    _, cfg = load_config(["model=tiny"])
    assert cfg.executor.reuse_results
    _, ray = load_config(["model=tiny", "executor=ray"])
    assert not ray.executor.reuse_results


NAN_SIGN = "import math\ndef f(x):\n    return math.copysign(1.0, x)\n"  # deterministic, and tells nan from -nan


def test_a_call_is_known_by_the_bytes_its_child_receives_not_by_how_its_arguments_print(pool):
    ex = ReusingExecutor(pool)
    assert repr((math.nan,)) == repr((-math.nan,))  # what the key was
    assert [r.value for r in ex.run_batch([ExecCall(NAN_SIGN, "f", (math.nan,)), ExecCall(NAN_SIGN, "f", (-math.nan,))])] == [
        1.0,
        -1.0,
    ]
    ex.forget()
    assert ex.run(NAN_SIGN, "f", (math.nan,)).value == 1.0
    assert ex.run(NAN_SIGN, "f", (-math.nan,)).value == -1.0  # not the remembered answer of f(nan)
    ((first, second),) = ex.run_twice([ExecCall(NAN_SIGN, "f", (-math.nan,))])
    assert first.value == second.value == -1.0  # a deterministic program is not taken for a nondeterministic one
    assert ex.run(NAN_SIGN, "f", (-math.nan,)).value == -1.0 and ex.stats()["reused"] >= 2  # and it is remembered


def _deep_size(root) -> int:
    """Bytes of every object reachable from `root` (each once)."""
    seen, stack, total = set(), [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def test_the_memory_held_never_exceeds_the_budget(pool):
    budget = 64 << 10
    ex = ReusingExecutor(pool, budget_bytes=budget)
    calls = [ExecCall("def f(n):\n    return set(range(n))\n", "f", (n,)) for n in (500, 1000, 2000, 3000)]
    ex.run_batch(calls)
    held = _deep_size(ex._memo)
    assert held <= budget, f"{held} bytes held for a budget of {budget}"  # a parsed set holds ~32x its reply
    before = ex.stats()["reused"]
    assert [len(r.value) for r in ex.run_batch(calls)] == [500, 1000, 2000, 3000]
    assert ex.stats()["reused"] - before == 4  # all four were remembered: the bound is not met by keeping nothing
    assert held <= ex.remembered_bytes <= budget  # what is counted covers what is held


def test_each_caller_gets_objects_of_its_own(pool):
    ex = ReusingExecutor(pool)
    nested = "def f(n):\n    return [list(range(n))]\n"
    a, b = ex.run(nested, "f", (3,)), ex.run(nested, "f", (3,))
    assert ex.stats()["reused"] == 1 and a.value == b.value == [[0, 1, 2]]
    assert a.value is not b.value and a.value[0] is not b.value[0]
    a.value[0].append(99)  # one caller changes its result...
    assert ex.run(nested, "f", (3,)).value == [[0, 1, 2]]  # ...the next hit does not see it
    x, y = ex.run_batch([ExecCall(nested, "f", (4,))] * 2)  # the same call twice in one batch
    assert x.value == y.value and x.value is not y.value
