"""The executor's normal behaviour: values by value, statuses, batches, determinism check,
config, CLI and the Ray backend. Hostile programs are in test_sandbox_hostile.py."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.need_ray import real_ray
from unified.sandbox.executor import (
    ExecCall,
    Executor,
    ExecutorConfig,
)
from unified.sandbox.executors import build_executor
from unified.sandbox.rules import BANNED_CALLS, BANNED_MODULES

REPO = Path(__file__).resolve().parents[2]
INC = "def f(x):\n    return x + 1\n"


@pytest.fixture(scope="module")
def pool():
    with Executor(ExecutorConfig(workers=2, timeout_s=1.0)) as ex:
        yield ex


def test_values_come_back_by_value(pool):
    code = (
        "def f(x):\n"
        "    return (x, [x], {x, 2}, frozenset({3}), {'k': (1.5, None)}, float('nan'), -0.0,"
        " float('-inf'), 2 + 3j, b'\\x00', True, 10**30)\n"
    )
    r = pool.run(code, "f", (1,))
    assert r.ok, r.error
    v = r.value
    assert type(v) is tuple and type(v[1]) is list and type(v[2]) is set and type(v[3]) is frozenset
    assert v[0] == 1 and v[2] == {1, 2} and v[4] == {"k": (1.5, None)}
    assert math.isnan(v[5]) and math.copysign(1.0, v[6]) == -1.0 and v[7] == -math.inf
    assert v[8] == 2 + 3j and v[9] == b"\x00" and v[10] is True and v[11] == 10**30


def test_arguments_arrive_as_values(pool):
    r = pool.run("def f(a, b, c):\n    return (type(a).__name__, type(b).__name__, c)", "f", ((1, 2), {3}, [None]))
    assert r.value == ("tuple", "set", [None])


def test_errors_carry_the_exception_type(pool):
    assert pool.run("def f():\n    raise ValueError('bad')", "f").error == "ValueError: bad"
    r = pool.run("def f():\n    return 1 / 0", "f")
    assert r.status == "error" and r.error.startswith("ZeroDivisionError")
    r = pool.run("def f(:\n", "f")
    assert r.status == "error" and r.error.startswith("SyntaxError")
    r = pool.run("def g():\n    return 1", "f")
    assert r.status == "error" and r.error.startswith("NameError")
    r = pool.run(INC, "f", (object(),))
    assert r.status == "error" and "not literal" in r.error


def test_timeouts_are_timeouts(pool):
    r = pool.run("def f():\n    while True:\n        pass", "f")
    assert r.status == "timeout" and not r.ok and r.timeout == "cpu"
    assert r.cpu_s > 0.5  # decided by the CPU time it used, whatever the wall clock said
    assert pool.stats()["timeout_cpu"] >= 1


def test_stdout_is_captured(pool):
    r = pool.run("import sys\ndef f():\n    print('hello')\n    print('oops', file=sys.stderr)\n    return 0", "f")
    assert r.ok and r.stdout == "hello\noops\n"


def test_stdlib_helpers_work_in_the_child(pool):
    code = (
        "from collections import namedtuple, Counter, deque\n"
        "from dataclasses import dataclass\n"
        "import math, re, heapq, itertools, functools, bisect\n"
        "P = namedtuple('P', 'a b')\n"
        "@dataclass\n"
        "class C:\n"
        "    a: int\n"
        "def f(s):\n"
        "    return (P(C(len(s)).a, 2), dict(Counter(s)), re.findall(r'\\d', s), heapq.nsmallest(1, [3, 1]))\n"
    )
    r = pool.run(code, "f", ("a1b2",))
    assert r.ok, r.error
    assert r.value == ((4, 2), {"a": 1, "1": 1, "b": 1, "2": 1}, ["1", "2"], [1])


def test_batch_preserves_order_with_mixed_outcomes(pool):
    calls = []
    for i in range(60):
        if i % 15 == 7:
            calls.append(ExecCall("def f(x):\n    raise KeyError(x)", "f", (i,)))
        elif i % 15 == 11:
            calls.append(ExecCall("import subprocess\ndef f(x):\n    return x", "f", (i,)))
        else:  # uneven run times, so workers finish out of order
            calls.append(ExecCall("def f(x):\n    s = 0\n    for k in range(x * 3000):\n        s += k\n    return x", "f", (i,)))
    results = pool.run_batch(calls)
    assert len(results) == 60
    for i, r in enumerate(results):
        expected = {7: "error", 11: "banned"}.get(i % 15, "ok")
        assert r.status == expected, (i, r)
        if expected == "ok":
            assert r.value == i
    assert pool.run_batch([]) == []


def test_run_twice_flags_nondeterministic_programs(pool):
    calls = [
        ExecCall("def f():\n    return id(object())", "f"),
        ExecCall("def f():\n    return hash(object())", "f"),
        ExecCall("def f():\n    return str(object())", "f"),
        ExecCall(INC, "f", (41,)),
        ExecCall("def f():\n    return sorted({'b', 'a'})", "f"),
    ]
    pairs = pool.run_twice(calls)
    same = [a.ok and b.ok and a.value == b.value for a, b in pairs]
    assert same == [False, False, False, True, True]


def test_isolation_layers_are_on_when_root(pool):
    iso = pool.isolation
    if not iso.get("root_user"):
        pytest.skip("kernel isolation needs root")
    for layer in ("netns", "mountns", "pivot", "pidns", "no_new_privs"):
        assert iso[layer], layer
    assert iso["uid"] >= 200_000


def test_closed_executor_refuses_calls():
    ex = Executor(ExecutorConfig(workers=1))
    assert ex.run(INC, "f", (1,)).value == 2
    ex.close()
    with pytest.raises(RuntimeError):
        ex.run(INC, "f", (1,))


# ------------------------------------------------------------------ config


def test_config_from_overrides():
    from unified.config import compose_config, typed
    from unified.errors import UserError

    overrides = ["executor.workers=3", "executor.timeout_s=1.5", "executor.banned_modules=[os]", "executor.banned_calls=null"]
    cfg = typed(compose_config(overrides)).executor
    assert cfg.workers == 3 and cfg.cpu_s == 2.0 and cfg.wall_s == 16.0
    assert cfg.banned_modules == ("os",) and cfg.banned_calls == BANNED_CALLS
    with pytest.raises(UserError, match="unknown config key 'executor.timeot_s'"):
        compose_config(["executor.timeot_s=1"])
    with pytest.raises(ValueError, match="backend must be one of local, ray"):
        build_executor(ExecutorConfig(backend="k8s"))
    with pytest.raises(ValueError, match="timeout_s"):
        ExecutorConfig(timeout_s=0)
    assert ExecutorConfig(workers=0).workers >= 1


@pytest.mark.parametrize("name", ["local", "ray"])
def test_yaml_configs_have_exactly_the_config_keys(name):
    from unified.config import compose_config, typed

    cfg = typed(compose_config([f"executor={name}"])).executor
    assert cfg.backend == name
    assert cfg.banned_modules == BANNED_MODULES and cfg.banned_calls == BANNED_CALLS


def test_build_executor_picks_the_local_pool():
    with build_executor(ExecutorConfig(workers=1)) as ex:
        assert isinstance(ex, Executor)
        assert ex.run(INC, "f", (1,)).value == 2


# ------------------------------------------------------------------ command line


def _cli(*args, timeout=60):
    cmd = [sys.executable, "-m", "unified.sandbox", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def test_cli_prints_one_json_object(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("def add(a, b):\n    print('side')\n    return (a + b, [a])\n")
    out = _cli(str(program), "--entry", "add", "--args", "[1, 2]")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "ok" and result["value"] == "(3, [1])" and result["error"] == ""
    assert result["stdout"] == "side\n" and result["duration_s"] >= 0


def test_cli_exits_0_when_the_program_fails(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("def f():\n    while True:\n        pass\n")
    out = _cli(str(program), "--entry", "f", "--timeout", "0.5", "--memory-mb", "256")
    assert out.returncode == 0
    assert json.loads(out.stdout)["status"] == "timeout"


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.py", "--entry", "f"], "cannot read"),
        (["PROG", "--entry", "f", "--args", "[1,"], "--args"),
        (["PROG", "--entry", "f", "--args", "{1: 2}"], "list"),
        (["PROG"], "--entry"),
        (["PROG", "--entry", "f", "--timeout", "-1"], "timeout_s"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path, args, message):
    program = tmp_path / "prog.py"
    program.write_text(INC)
    out = _cli(*[str(program) if a == "PROG" else str(tmp_path / a) if a == "missing.py" else a for a in args])
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in out.stderr


# ------------------------------------------------------------------ Ray backend


def test_ray_backend_runs_batches_in_order(monkeypatch):
    """With no `executor.ray_address` the executor starts a Ray instance of its own, on
    loopback, and shuts it down on close: a stranger's address in the environment (a stale or
    foreign session) is never joined."""
    ray = real_ray()
    if ray.is_initialized():
        pytest.skip("this process is already connected to a Ray instance")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")  # nothing listens there: joining it would fail
    # 2 workers: run_twice's second run must fork from another worker's image, or an
    # address-dependent result (id()) repeats and the determinism check cannot see it
    ex = build_executor(ExecutorConfig(backend="ray", workers=2, timeout_s=1.0))
    try:
        assert ray.is_initialized()
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}  # loopback only
        calls = [ExecCall("def f(x):\n    return (x, x * x)", "f", (i,)) for i in range(30)]
        calls.append(ExecCall("import socket\ndef f():\n    return 1", "f"))
        calls.append(ExecCall("def f():\n    while True:\n        pass", "f"))
        results = ex.run_batch(calls)
        assert [r.value for r in results[:30]] == [(i, i * i) for i in range(30)]
        assert [r.status for r in results[30:]] == ["banned", "timeout"]
        pairs = ex.run_twice([ExecCall("def f():\n    return id(object())", "f"), ExecCall(INC, "f", (1,))])
        assert [a.value == b.value for a, b in pairs] == [False, True]
        stats = ex.stats()  # one node ran every call, none was retried
        assert (stats["calls"], stats["calls_node_0"], stats["retried_calls"]) == (36, 34, 0)
        from unified.run.metrics import executor_metrics  # torch: only for this test

        logged = executor_metrics(ex)  # what the round's metrics log
        assert (logged["executor/calls_node_0"], logged["executor/retried_calls"]) == (34, 0)
    finally:
        ex.close()
    assert not ray.is_initialized()


# ------------------------------------------------------------------ deterministic timeouts, --calls

LOOP = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return n\n"


def test_cpu_bound_call_within_its_limit_is_ok_on_a_busy_machine():
    """The timeout is decided by CPU time: a call that needs half its budget stays `ok`
    while processes started here keep every core busy (a wall-clock limit would fire). The
    backstop is set far away: this test is about the CPU-time decision, and on a machine
    already loaded by others (load 20 here once) the default 11 s backstop fired."""
    with Executor(ExecutorConfig(workers=1, timeout_s=1.0, wall_s=300.0)) as ex:
        probe = ex.run(LOOP, "f", (1_000_000,))
        assert probe.ok and probe.cpu_s > 0
        n = int(1_000_000 * 0.5 / probe.cpu_s)  # about 0.5 s of CPU on this machine
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * (os.cpu_count() or 1))]
        try:
            results = [ex.run(LOOP, "f", (n,)) for _ in range(2)]
        finally:
            for proc in busy:
                proc.kill()
                proc.wait()
        assert [r.status for r in results] == ["ok", "ok"], results
        assert ex.stats()["timeout"] == 0 and ex.stats()["calls"] == 3


def test_stats_count_timeouts_by_kind():
    with Executor(ExecutorConfig(workers=1, timeout_s=0.5, wall_s=2.0, banned_modules=(), banned_calls=())) as ex:
        r = ex.run("def f():\n    s = 0\n    while s < 10**8:\n        s += 1", "f")  # > 0.5 s CPU
        assert r.status == "timeout" and r.timeout in ("cpu", "wall")  # wall: only on a machine < 1/4 free
        kind = r.timeout
        r = ex.run("import time\ndef f():\n    time.sleep(30)", "f")  # asleep: only the backstop ends it
        assert r.status == "timeout" and r.timeout == "wall"
        stats = ex.stats()
    assert (stats["calls"], stats["timeout"], stats["timeout_" + kind]) == (2, 2, 1 + (kind == "wall"))


def test_cli_calls_file_runs_each_line_in_order(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("def f(a, b=0):\n    if a == 3:\n        raise ValueError('three')\n    return [a, b]\n")
    calls = tmp_path / "calls.jsonl"
    calls.write_text("\n".join(json.dumps(args) for args in ([1], [2, 5], [3], [4, [1]])) + "\n")
    out = _cli(str(program), "--entry", "f", "--calls", str(calls), "--workers", "2")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok", "error", "ok"]
    assert [r["value"] for r in rows] == ["[1, 0]", "[2, 5]", None, "[4, [1]]"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('[1]\n{"a": 1}\n')
    out = _cli(str(program), "--entry", "f", "--calls", str(bad))
    assert out.returncode == 2 and "JSON list" in out.stderr and out.stdout == ""


def test_cli_survives_a_forged_enormous_reply(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(
        "import io\n"
        "def f():\n"
        "    for fd in range(3, 40):\n"
        "        try:\n"
        "            io.FileIO(fd, 'w', closefd=False).write(b'ok 20000 0 0\\n' + b'9' * 20000)\n"
        "        except (OSError, ValueError):\n"
        "            pass\n"
        "    return 1\n"
    )
    out = _cli(str(program), "--entry", "f")
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert json.loads(out.stdout)["status"] in ("crashed", "ok")
