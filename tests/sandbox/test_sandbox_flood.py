"""No work outside a call's bounds: a call that floods its reply pipe is killed the moment its
reply passes the limit, and the zygote (which reads the pipe at a raised priority, outside the
call's CPU accounting) spends milliseconds on it, not the seconds it spent draining the flood
on the call's behalf (1.1-3.0 s of CPU per call limited to 0.5 s, before this change)."""

import os
from pathlib import Path

import pytest

from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig

FLOOD = """
import os
def f():
    data = b'x' * (1 << 16)
    fds = []
    for fd in range(3, 64):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            pass
    while True:
        for fd in fds:
            try:
                os.write(fd, data)
            except OSError:
                pass
"""


def _zygote_cpu_s(ex: Executor) -> float:
    """CPU seconds the zygotes of the pool used themselves (not their calls): utime + stime."""
    total = 0.0
    for w in ex._workers:
        handle = w.proc.pid  # the jail's handle; its child is the zygote (PID 1 of the worker's namespace)
        children = Path(f"/proc/{handle}/task/{handle}/children").read_text().split()
        for pid in children or [str(handle)]:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


def test_a_flooding_call_is_killed_at_the_reply_limit_and_costs_the_zygote_milliseconds():
    config = ExecutorConfig(workers=1, timeout_s=0.5, memory_mb=128, max_output_bytes=4096, banned_modules=(), banned_calls=())
    with Executor(config) as ex:
        if not ex.isolation.get("pidns"):
            pytest.skip("the zygote's CPU is read from /proc as root")
        ex.run("def f():\n    return 1", "f")
        before, n = _zygote_cpu_s(ex), 5
        results = ex.run_batch([ExecCall(FLOOD, "f")] * n)
        per_call = (_zygote_cpu_s(ex) - before) / n
        assert all(r.status == "bad_reply" and "reply limit" in r.error for r in results), results[:2]
        assert all(r.cpu_s < 0.5 for r in results), [r.cpu_s for r in results]  # killed at once, not at the CPU limit
        assert per_call < 0.05, f"the zygote spent {per_call * 1000:.0f} ms of CPU per flooding call"
        assert ex.run("def f():\n    return 2", "f").value == 2
