"""Hostile programs against what the sandbox returns: forged replies cannot pass hidden
tests, enormous or malformed replies become "crashed" or "bad_reply", the project, its data, the home
folder, host sockets and earlier calls' programs are out of reach; and the verdict itself,
EvalPlus's comparison rules applied in the parent."""

import os
import socket
import sys
from pathlib import Path

import pytest

from tests.helpers.sandbox_pools import TIMEOUT, assert_alive, bare, guards, pool  # noqa: F401 - fixtures

from unified.sandbox.executor import Executor, ExecutorConfig


def test_project_modules_cannot_be_imported(pool, guards, bare):
    for code in [
        "from unified.sandbox import child as _sc\ndef f():\n    return 1",
        "def f():\n    import unified.sandbox.worker\n    return 1",
        "def f():\n    return __import__('unified.sandbox.executor').__name__",
        "import sys\ndef f():\n    return sorted(m for m in sys.modules if m.startswith('unified'))",
        "import __main__\ndef f():\n    return sorted(k for k in vars(__main__) if not k.startswith('__'))",
    ]:
        for ex in (pool, guards, bare):
            r = ex.run(code, "f")
            assert r.status in ("banned", "error") or r.value == [] or r.value == ["f"], (code, r)
    assert_alive(pool)
    assert_alive(bare)


FORGER = (  # the finding: patch the harness's reply function so every check "passes"
    "from unified.sandbox import child as _sc\n"
    "_real = _sc._send\n"
    "_sc._send = lambda fd, message: _real(fd, {'status': 'ok', 'value': 'True'})\n"
)


def test_forged_replies_cannot_pass_hidden_tests(bare):
    from unified.benchmarks.load import load_problems
    from unified.benchmarks.hidden import score_samples

    problem = load_problems("humaneval", ids=["HumanEval/0"])[0]
    wrong = "def has_close_elements(numbers, threshold):\n    return None\n"
    # Writing a forged "True" message straight into every descriptor, then dying: the
    # parent compares values, and True is not the answer for every input.
    raw = (
        "import os\n"
        "def has_close_elements(numbers, threshold):\n"
        "    for fd in range(3, 40):\n"
        "        try:\n"
        "            os.write(fd, b'ok 4 0 0\\nTrue')\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    )
    scores = [score_samples([problem], {problem.problem_id: code}, bare)[problem.problem_id] for code in (FORGER + wrong, raw)]
    assert scores == [0.0, 0.0]
    right = problem.prompt + problem.canonical_solution.split(problem.prompt, 1)[-1]
    assert score_samples([problem], {problem.problem_id: right}, bare) == {problem.problem_id: 1.0}
    assert_alive(bare)


def test_enormous_or_malformed_replies_become_crashed_or_bad_replies(bare):
    from unified.sandbox.executor import ExecResult
    from unified.sandbox.reply import parse_reply

    head = b"0 0.001 0.001 -\n"
    for message in [b"ok 99999999999 0 0\nx", b"ok -1 0 0\n", b"weird 0 0 0\n", b"ok 0 0\n", b"", b"[" * 100000]:
        assert parse_reply(head + message, 4096, ExecResult).status == "crashed", message[:30]  # no message
    assert parse_reply(b"\x00garbage", 4096, ExecResult).status == "crashed"
    for message in [b"ok 20000 0 0\n" + b"1" * 20000, b"ok 3 0 0\n(((", b"ok 9 0 0\n" + b"\xff" * 9]:
        assert parse_reply(head + message, 4096, ExecResult).status == "bad_reply", message[:30]  # no value
    code = (
        "import os\n"
        "def f():\n"
        "    for fd in range(3, 40):\n"
        "        try:\n"
        "            os.write(fd, b'ok 20000 0 0\\n' + b'7' * 20000)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    )
    r = bare.run(code, "f")
    assert r.status == "bad_reply" and r.value is None, r
    assert_alive(bare)


def test_project_data_and_home_are_not_visible(bare):
    from unified.benchmarks.mbpp import BUNDLED as BUNDLED_MBPP

    repo = str(Path(__file__).resolve().parents[2])
    for code in [
        f"def f():\n    return len(open({str(BUNDLED_MBPP)!r}, 'rb').read())",
        f"import os\ndef f():\n    return os.listdir({repo!r})",
        "import os\ndef f():\n    return os.listdir('/work')",
        "import os\ndef f():\n    return os.listdir('/proc')",
    ]:
        r = bare.run(code, "f")
        assert r.status == "error", (code, r)
    # Home: at most the directories on the way to the Python runtime (pyenv lives there).
    r = bare.run("import os\ndef f(home):\n    return os.listdir(home)", "f", (str(Path.home()),))
    runtime = Path(sys.base_prefix).parts
    assert r.status == "error" or set(r.value) <= set(runtime), r
    r = bare.run("import math\ndef f():\n    return math.pi", "f")  # the runtime itself works
    assert r.ok
    assert_alive(bare)


def test_host_unix_sockets_are_unreachable(bare, tmp_path):
    os.chmod(tmp_path, 0o777)
    path = str(tmp_path / "listener.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(1)
    server.settimeout(0.3)
    try:
        code = "import socket\ndef f(p):\n    s = socket.socket(socket.AF_UNIX)\n    s.connect(p)\n    return 'connected'"
        r = bare.run(code, "f", (path,))
        assert r.status == "error", r
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
    assert_alive(bare)


def test_a_call_cannot_read_an_earlier_calls_program():
    spy = (
        "import gc\n"
        "def f():\n"
        "    marker = ''.join(['SECRET', '_PROGRAM_', '7731'])  # not a constant of this program\n"
        "    gc.unfreeze()\n"
        "    for o in gc.get_objects():\n"
        "        items = list(o.keys()) + list(o.values()) if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()\n"
        "        if any(isinstance(x, str) and marker in x for x in items):\n"
        "            return True\n"
        "    return False\n"
    )
    with Executor(ExecutorConfig(workers=1, timeout_s=TIMEOUT, banned_modules=(), banned_calls=())) as ex:
        r = ex.run("def f():\n    return 'SECRET_PROGRAM_7731 and the hidden test code'", "f")
        assert r.ok
        r = ex.run(spy, "f")
        assert r.ok and r.value is False, r


def test_evalplus_set_comparison_and_float_tolerance(pool):
    from unified.benchmarks.load import load_problems
    from unified.benchmarks.hidden import score_samples

    ids = ["Mbpp/2", "Mbpp/7", "Mbpp/111", "Mbpp/140", "Mbpp/232", "Mbpp/249", "Mbpp/579", "Mbpp/769"]
    problems = load_problems("mbpp", ids=ids)
    reversed_answers = {}
    for p in problems:  # the canonical solution, its output reversed: right as a set
        body = p.canonical_solution.replace(f"def {p.entry_point}(", "def _canonical(")
        reversed_answers[p.problem_id] = (
            f"{body}\n\ndef {p.entry_point}(*args):\n    out = _canonical(*args)\n"
            "    return out[::-1] if isinstance(out, (list, tuple)) else out\n"
        )
    assert score_samples(problems, reversed_answers, pool) == {i: 1.0 for i in ids}

    from unified.types import Problem, TestCase

    half = Problem("x/1", "mbpp", "Return one half.", "f", (), hidden=(TestCase((), 0.5),), atol=0.0)
    for answer, score in [("0.5 + 5e-7", 1.0), ("0.5 + 1e-5", 0.0), ("'0.5'", 0.0)]:
        got = score_samples([half], {"x/1": f"def f():\n    return {answer}\n"}, pool)
        assert got == {"x/1": score}, answer
    assert_alive(pool)


def test_truncated_fenced_completion_is_recovered(pool):
    from unified.benchmarks.load import load_problems
    from unified.benchmarks.hidden import score_samples

    p = load_problems("mbpp", ids=["Mbpp/2"])[0]
    body = p.canonical_solution.strip()
    text = f"Here is my answer:\n```python\n{body}\n\n\ndef helper_never_finished(x):\n    return [x for x in"
    assert score_samples([p], {p.problem_id: text}, pool) == {p.problem_id: 1.0}
