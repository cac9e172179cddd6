"""Nothing of the kernel's is shared between a call and the pool or another call: not an open
file description (fds 0-2), not a futex key on a page every worker maps, not a process group
or session, not a machine-wide inode counter a call can move. Each probe runs as a model's
program would, through the project's own executor."""

import os
import platform
import signal
import time

import pytest

from tests.helpers.sandbox_pools import isolated_pool
from unified.sandbox.executor import ExecCall, Executor

x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="system call numbers of x86_64")


def _pool(workers: int, **overrides) -> Executor:
    return isolated_pool(workers, timeout_s=5.0, **overrides)


@pytest.fixture(scope="module")
def one():
    with _pool(1) as ex:  # the default policy: os.set_blocking is plain Python
        yield ex


@pytest.fixture(scope="module")
def bare_two():
    with _pool(2, banned_modules=(), banned_calls=()) as ex:
        if not ex.isolation.get("seccomp"):
            pytest.skip("no libseccomp")
        yield ex


SET_NONBLOCKING = "import os\ndef f():\n    for fd in (0, 1, 2):\n        os.set_blocking(fd, False)\n    return [os.get_blocking(fd) for fd in (0, 1, 2)]\n"
GET_BLOCKING = "import os\ndef f():\n    return [os.get_blocking(fd) for fd in (0, 1, 2)]\n"


def test_dev_null_flags_set_by_a_call_do_not_reach_the_next_one(one):
    assert one.run(SET_NONBLOCKING, "f").value == [False, False, False]
    for _ in range(3):
        assert one.run(GET_BLOCKING, "f").value == [True, True, True]


FUTEX = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
FUTEX, WAIT, WAKE, PRIVATE = 202, 0, 1, 128
ADDR = ctypes.cast(libc.getpid, ctypes.c_void_p).value & ~3  # libc's text: a page every worker maps

class Timespec(ctypes.Structure):
    _fields_ = [('sec', ctypes.c_long), ('nsec', ctypes.c_long)]

def wait(seconds):
    value = ctypes.c_int.from_address(ADDR).value
    start = time.monotonic()
    got = libc.syscall(FUTEX, ctypes.c_void_p(ADDR), WAIT, value, ctypes.byref(Timespec(seconds, 0)), None, 0)
    return got, ctypes.get_errno(), round(time.monotonic() - start, 2)

def wake(seconds, op=WAKE):
    end, woken, errors = time.monotonic() + seconds, 0, set()
    while time.monotonic() < end:
        got = libc.syscall(FUTEX, ctypes.c_void_p(ADDR), op, 0x7FFFFFFF, None, None, 0)
        if got < 0:
            errors.add(ctypes.get_errno())
        else:
            woken += got
        time.sleep(0.001)
    return woken, sorted(errors)
"""
ETIMEDOUT, EPERM = 110, 1


@x86_64
def test_a_shared_futex_wake_does_not_cross_workers(bare_two):
    waiter, waker = bare_two.run_batch([ExecCall(FUTEX, "wait", (3,)), ExecCall(FUTEX, "wake", (2.0,))])
    assert waiter.ok and waker.ok, (waiter, waker)
    got, errno, _ = waiter.value
    assert got == -1 and errno in (EPERM, ETIMEDOUT), waiter.value  # never woken by the other worker
    assert waker.value[0] == 0, waker.value
    woken, errors = bare_two.run(FUTEX, "wake", (0.01, 1 | 128)).value  # a private one works
    assert errors == [] and woken == 0


KILL_GROUP = """
import os, signal
def f():
    os.kill(0, signal.SIGCONT)
    try:
        return [os.getpgrp() == os.getpid(), os.getsid(0) == os.getpid()]
    except OSError as e:
        return e.errno
"""


def _state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def test_a_signal_to_the_calls_own_group_reaches_nothing_of_the_pool(bare_two):
    handles = [w.proc.pid for w in bare_two._workers]  # the jail processes, outside the calls' namespaces
    for pid in handles:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(0.2)
        assert all(_state(pid) == "T" for pid in handles)
        results = bare_two.run_batch([ExecCall(KILL_GROUP, "f")] * 4)
        time.sleep(0.2)
        assert all(_state(pid) == "T" for pid in handles), "a call's kill(0, SIGCONT) resumed the pool's jail process"
        assert [r.value for r in results] == [[True, True]] * 4, results  # a session and group of its own
    finally:
        for pid in handles:
            os.kill(pid, signal.SIGCONT)


MAKERS = """
import os, socket
def f():
    out = []
    for make in (os.pipe, socket.socketpair, lambda: os.pidfd_open(os.getpid())):
        try:
            make()
            out.append('made')
        except OSError as e:
            out.append(e.errno)
    return out
"""


def test_a_call_can_make_no_object_numbered_by_a_machine_wide_counter(bare_two):
    """Pipes and sockets take their inode numbers from one kernel counter, pidfds from the count of
    every process the machine made: a call that made many moved what the next call read."""
    assert bare_two.run(MAKERS, "f").value == [EPERM, EPERM, EPERM]
