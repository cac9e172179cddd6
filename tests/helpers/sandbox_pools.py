"""The sandbox pools the hostile-code tests share (imported as pytest fixtures), and the
check that a pool survived: it still answers, and none of its sandbox users' processes is
left.

- `pool`: the default policy (static check + run-time guards + kernel isolation);
- `guards`: banned modules but no banned calls, so only the run-time import guards stand
  between `__import__("subprocess")` and the program;
- `bare`: nothing banned at all, so only the kernel layer (namespaces, read-only mounts,
  unprivileged uid, rlimits) contains the program. Needs root; skips cleanly without it.
"""

import os
from pathlib import Path

import pytest

from unified.sandbox.executor import Executor, ExecutorConfig

SECRET = "UNIFIED_TEST_FAKE_SECRET"
SECRET_VALUE = "hunter2-do-not-leak"
TIMEOUT = 1.0


def _make_pool(**overrides):
    os.environ[SECRET] = SECRET_VALUE  # set in the parent BEFORE the pool exists
    return Executor(ExecutorConfig(workers=2, timeout_s=TIMEOUT, memory_mb=256, max_output_bytes=4096, **overrides))


@pytest.fixture(scope="module")
def pool():
    with _make_pool() as ex:
        yield ex


@pytest.fixture(scope="module")
def guards():
    with _make_pool(banned_calls=()) as ex:
        yield ex


@pytest.fixture(scope="module")
def bare():
    with _make_pool(banned_modules=(), banned_calls=()) as ex:
        if not ex.isolation.get("pidns"):
            pytest.skip("kernel isolation (PID/mount/network namespaces) needs root")
        yield ex


def assert_alive(ex):
    """The pool still answers a normal call, and no process of its sandbox users is left."""
    r = ex.run("def f(x):\n    return x + 1", "f", (41,))
    assert r.ok and r.value == 42, r
    uids = {w.info["isolation"]["uid"] for w in ex._workers} - {None}
    assert not _processes_of(uids), "a sandboxed process outlived its call"


def _processes_of(uids: set) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            uid = int(status.split("Uid:")[1].split()[0])
            if uid in uids:
                found.append(int(entry.name))
    return found


def isolated_pool(workers: int, **config) -> Executor:
    """A pool of `workers` with kernel isolation, or the test skipped in one line where the
    kernel gives none (namespaces need root)."""
    ex = Executor(ExecutorConfig(workers=workers, memory_mb=256, **config))
    if not ex.isolation.get("pidns"):
        ex.close()
        pytest.skip("kernel isolation needs root")
    return ex
