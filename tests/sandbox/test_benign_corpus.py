"""Honest introspection answers as on a normal machine: every program of the benign corpus
(tests/sandbox/benign_corpus.py) returns inside a sandbox call what it returns in a plain
interpreter (same environment as a worker's), through the kernel layer alone (nothing banned)
and, for the programs that import no module banned for safety, under the default policy."""

import ast
import json
import subprocess
import sys

import pytest

from tests.sandbox.benign_corpus import PROGRAMS, SAFE
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig

PLAIN = """
import json, sys
out = {}
for name, source in json.loads(sys.stdin.read()).items():
    space = {'__name__': '__sandbox__'}
    try:
        exec(compile(source, '<corpus>', 'exec'), space)
        out[name] = repr(space['f']())
    except BaseException as e:
        out[name] = repr(('raised', type(e).__name__))
print(json.dumps(out))
"""
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}  # a worker's


def _plain() -> dict:
    # In a session of its own, as every call is: a session inherited from a container's init can
    # lie outside the PID namespace, and os.getsid(0) then answers 0 (seen in CI).
    done = subprocess.run(
        [sys.executable, "-I", "-c", PLAIN],
        input=json.dumps(PROGRAMS),
        capture_output=True,
        text=True,
        env=ENV,
        cwd="/tmp",
        timeout=120,
        check=True,
        start_new_session=True,
    )
    return {name: ast.literal_eval(text) for name, text in json.loads(done.stdout).items()}


def _inside(ex: Executor, names) -> dict:
    results = ex.run_batch([ExecCall(PROGRAMS[name], "f") for name in names])
    return {name: r.value if r.ok else ("raised", r.error.split(":")[0]) for name, r in zip(names, results)}


@pytest.fixture(scope="module")
def plain():
    return _plain()


def _differ(plain: dict, inside: dict) -> dict:
    return {name: (plain[name], value) for name, value in inside.items() if value != plain[name]}


def test_the_corpus_runs_in_a_plain_interpreter(plain):
    assert not [name for name, value in plain.items() if isinstance(value, tuple) and value[:1] == ("raised",)], plain


def test_the_corpus_answers_inside_a_call_as_in_a_plain_interpreter(plain):
    with Executor(ExecutorConfig(workers=2, timeout_s=5.0, banned_modules=(), banned_calls=())) as ex:
        if not ex.isolation.get("seccomp"):
            pytest.skip("no libseccomp: the kernel layer is not the allowlist here")
        inside = _inside(ex, list(PROGRAMS))
    assert not _differ(plain, inside), _differ(plain, inside)


def test_the_safe_part_answers_the_same_under_the_default_policy(plain):
    with Executor(ExecutorConfig(workers=2, timeout_s=5.0)) as ex:
        inside = _inside(ex, list(SAFE))
    assert not _differ(plain, inside), _differ(plain, inside)
