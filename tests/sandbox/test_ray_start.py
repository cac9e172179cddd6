"""The executor's own Ray instance (`executor.ray_address: null`) starts on a loaded machine.

A busy machine delays Ray's agents; a raylet that waits for their port files gives up after
~15 s (fixed in Ray) and the run's `ray.init` fails before any sandbox call. Here every agent
process of the starting instance (the dashboard/metrics agent and the runtime-env agent) is
stopped (SIGSTOP) as soon as it appears and let go `DELAY_S` later, far past that wait: the
executor must still start and run a batch (`ray_session.patient_start`: agents on ports chosen
here, Ray's start-up waits raised to a hang guard). No timing is asserted.

Broken code fails here: with `patient_start()` taken out of `ray_session.connect`, the same
delay ends the start with Ray's error (checked by hand, docs/multinode.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import psutil
import pytest

from tests.helpers.need_ray import real_ray
from unified.sandbox.executor import ExecCall, ExecutorConfig
from unified.sandbox.executors import build_executor

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DELAY_S = 40.0  # how long each agent is held: well past the raylet's ~15 s wait for its files
# in the agents' command lines (the dashboard agent renames itself once started)
AGENTS = ("dashboard/agent.py", "ray::DashboardAgent", "runtime_env/agent/main.py")


def _agents() -> list[psutil.Process]:
    """This process's descendants that are Ray agents."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            # the raylet's own command line names the agents' scripts too: not the raylet
            if proc.name() != "raylet" and any(a in " ".join(proc.cmdline()) for a in AGENTS):
                found.append(proc)
    return found


@contextlib.contextmanager
def agents_held(seconds: float):
    """Each agent that appears while the block runs is stopped at once and let go `seconds`
    after the first stop, however early the block ends (leaving it waits for that); -> the
    list of held pids (filled as they are seen)."""
    held, done = [], threading.Event()

    def hold():
        first = None
        while (first is None and not done.is_set()) or (first is not None and time.monotonic() < first + seconds):
            for proc in _agents():
                if proc.pid not in held:
                    proc.send_signal(signal.SIGSTOP)
                    held.append(proc.pid)
                    print(f"held agent {proc.pid}: {' '.join(proc.cmdline())[:120]}", flush=True)
                    first = first or time.monotonic()
            time.sleep(0.02)
        for pid in held:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield held
    finally:
        done.set()
        thread.join()


def test_the_executors_own_ray_starts_while_its_agents_are_held():
    ray = real_ray()
    if ray.is_initialized():
        pytest.skip("this process is already connected to a Ray instance")
    with agents_held(DELAY_S) as held:
        ex = build_executor(ExecutorConfig(backend="ray", workers=1, timeout_s=5.0))
    try:
        assert held, "no agent was seen starting"  # the delay really happened
        results = ex.run_batch([ExecCall("def f(x):\n    return x + 1", "f", (i,)) for i in range(4)])
        assert [r.value for r in results] == [1, 2, 3, 4]
    finally:
        ex.close()
    assert not ray.is_initialized()
