"""Limits bind the whole call, every process it starts together, not each process alone:
memory, and CPU time, also that of children nobody waits for (SIGCHLD ignored: POSIX
drops their usage, the cgroup counts it). (SysV shared memory, which outlived its call,
cannot be made at all: tests/sandbox/test_sandbox_fresh_world.py.)"""

import os

import pytest

from tests.helpers.sandbox_pools import assert_alive

from unified.sandbox.executor import Executor, ExecutorConfig

MEMORY_MB = 256
TIMEOUT_S = 1.0

# The processes of a call meet through files in its /tmp: a call can make no pipe (its inode
# number comes from a machine-wide counter: tests/sandbox/test_sandbox_call_alone.py).
FORK_HOLDERS = """
import os, time
def f(k, mb):
    for i in range(k):
        if os.fork() == 0:
            block = b'x' * (mb << 20)  # written, so resident
            open('/tmp/held%d' % i, 'w').close()
            time.sleep(1.0)
            os._exit(0)
    for _ in range(k):
        try:
            os.wait()
        except ChildProcessError:
            break
    return sum(os.path.exists('/tmp/held%d' % i) for i in range(k))
"""

CHILD_BURNERS = """
import os, signal, time
def f(k, seconds):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel, unseen
    for i in range(k):
        if os.fork() == 0:
            end = time.process_time() + seconds
            while time.process_time() < end:
                pass
            open('/tmp/burnt%d' % i, 'w').close()
            os._exit(0)
    while not all(os.path.exists('/tmp/burnt%d' % i) for i in range(k)):  # every child has finished
        time.sleep(0.005)
    return 'done'
"""


@pytest.fixture(scope="module")
def bare():
    cfg = ExecutorConfig(workers=1, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB, banned_modules=(), banned_calls=())
    with Executor(cfg) as ex:
        if not ex.isolation.get("pidns"):
            pytest.skip("kernel isolation needs root")
        if not (ex.limits["memory"] and ex.limits["cpu"]):
            pytest.skip(f"no writable cgroups here: {ex.limits}")
        yield ex


def test_forked_children_share_the_calls_memory_limit(bare):
    r = bare.run(FORK_HOLDERS, "f", (2, 40))  # 80 MB in all: well under the limit
    assert r.ok and r.value == 2, r
    r = bare.run(FORK_HOLDERS, "f", (4, 100))  # each under memory_mb, 400 MB together
    assert r.status == "memory", r
    assert_alive(bare)


def test_cpu_of_children_nobody_waits_for_counts_against_the_call(bare):
    r = bare.run(CHILD_BURNERS, "f", (3, 0.2))  # 0.6 CPU-s in all: under the limit, and counted
    assert r.ok and r.value == "done", r
    assert r.cpu_s >= 0.55, r
    r = bare.run(CHILD_BURNERS, "f", (3, 0.6))  # 1.8 CPU-s in all, 0.6 each
    assert r.status == "timeout" and r.timeout == "cpu", r
    assert r.cpu_s >= TIMEOUT_S, r
    assert_alive(bare)


def test_cgroup_v2_alone_counts_the_cpu_of_the_whole_tree(monkeypatch):
    # A machine with only cgroup v2 (most today): this one has a v2 mount beside its v1
    # controllers; a pool made on it alone counts CPU by cpu.stat, whatever else it lacks.
    from unified.sandbox import cgroups, executor

    mounts = cgroups._cgroup_mounts()
    own = [line.split(":", 2)[2] for line in open("/proc/self/cgroup").read().splitlines() if line.startswith("0::")]
    if "v2" not in mounts or not own or not os.access(cgroups._under(mounts["v2"], own[0]), os.W_OK):
        pytest.skip("no writable cgroup v2 directory")
    base = cgroups._under(mounts["v2"], own[0])
    monkeypatch.setattr(executor, "CgroupPool", lambda: cgroups.CgroupPool({"v2": base}))
    cfg = ExecutorConfig(workers=1, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB, banned_modules=(), banned_calls=())
    with Executor(cfg) as ex:
        if not ex.isolation.get("pidns"):
            pytest.skip("kernel isolation needs root")
        assert ex.limits["cpu"], (ex.isolation, ex.limits)
        r = ex.run(CHILD_BURNERS, "f", (3, 0.2))
        assert r.ok and r.cpu_s >= 0.55, r


def test_the_cgroups_of_a_pool_whose_process_died_are_removed_by_the_next(tmp_path):
    import subprocess
    import sys

    from unified.sandbox import cgroups

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"unified-sandbox-{int(dead.stdout)}-0"
    (stale / "w0-0").mkdir(parents=True)
    alive = tmp_path / f"unified-sandbox-{os.getpid()}-99"
    alive.mkdir()
    pool = cgroups.CgroupPool({"v1:pids": str(tmp_path)})  # a plain directory stands in for a hierarchy
    assert not stale.exists() and alive.exists()
    pool.close()
