"""What goes into and comes out of the executor: ExecCall, ExecResult, and the counters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

STATUSES = ("ok", "error", "timeout", "memory", "banned", "crashed", "bad_reply")


@dataclass(frozen=True)
class ExecCall:
    code: str  # module source defining `entry`
    entry: str  # function name to call
    args: tuple = ()  # positional args as Python values (literal types only)


@dataclass(frozen=True)
class ExecResult:
    status: str  # one of STATUSES
    value: object = None  # the return value (status "ok")
    error: str = ""  # "ValueError: bad" etc.
    duration_s: float = 0.0  # wall clock
    stdout: str = ""  # stdout and stderr, interleaved, truncated
    cpu_s: float = 0.0  # CPU time of the call and everything it started
    timeout: str = ""  # status "timeout": "cpu" or "wall" (the backstop)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Stats:
    """Counters over every result an executor returned (`Executor.stats()`)."""

    KEYS = ("calls", *STATUSES, "timeout_cpu", "timeout_wall", "worker_restarts")

    def __init__(self):
        self.counts = Counter({k: 0 for k in self.KEYS})

    def count(self, result: ExecResult) -> ExecResult:
        self.counts["calls"] += 1
        self.counts[result.status] += 1
        if result.status == "timeout":
            self.counts["timeout_" + (result.timeout or "cpu")] += 1
        return result

    def snapshot(self) -> dict[str, int]:
        return {k: int(self.counts[k]) for k in self.KEYS}
