"""What a call used, for its whole process tree: the zygote's reading of its cgroup.

This source is executed by the worker (`sandbox.worker`) into a namespace of its own
(stdlib only). `sandbox.jail` opened the worker cgroup's files before the new root hid
them (`sandbox.cgroups`); the zygote and its calls share that cgroup, so:

- CPU: the cgroup's counter less the zygote's own CPU time, between two readings, is the
  CPU of every process the call created, reaped or not (POSIX drops the usage of children
  nobody waits for; the cgroup does not). Without the counter: RUSAGE_CHILDREN, as POSIX;
- OOM kills: the counter of the cgroup's memory controller; one more after a call means
  the call's processes together went over its memory limit.
"""

import os
import resource

_preadv, _getrusage = os.preadv, resource.getrusage  # before the guards


class Meter:
    """Reads into one fixed buffer (zeroed by `scrub` before each fork: the counters are totals
    over every earlier call), never into a new bytes object, and parses the digits where they
    lie (`int()` of a view copies it into a bytes object first, whose freed block would keep
    the cgroup's CPU total for the next call to find)."""

    def __init__(self, fds: dict, cpu_format: str):
        self.cpu_fd, self.oom_fd = fds.get("cpu", -1), fds.get("oom", -1)
        self.cpu_format = cpu_format
        self.tree = self.cpu_fd >= 0  # the cgroup counts the whole tree
        self.buffer = bytearray(4096)
        self.view, self.zeros = memoryview(self.buffer), memoryview(bytes(4096))

    def _read(self, fd: int) -> int:
        """The file's text into the buffer; its length."""
        return _preadv(fd, (self.view,), 0)

    def _number(self, key: bytes, end: int) -> int:
        """The decimal number after `key` in the buffer's first `end` bytes (b"" : at its start),
        0 if absent."""
        at = 0
        if key:
            at = self.buffer.find(key, 0, end)
            if at < 0:
                return 0
            at += len(key)
        value, buffer = 0, self.buffer
        while at < end and 48 <= buffer[at] <= 57:
            value = value * 10 + buffer[at] - 48
            at += 1
        return value

    def scrub(self) -> None:
        self.view[:] = self.zeros

    def cpu(self) -> float:
        """CPU seconds of the call's processes so far (a running total: subtract two)."""
        if not self.tree:
            usage = _getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime
        own = _getrusage(resource.RUSAGE_SELF)
        end = self._read(self.cpu_fd)
        if self.cpu_format == "ns":
            total = self._number(b"", end) / 1e9
        else:  # cgroup v2 cpu.stat: "usage_usec N" first
            total = self._number(b"usage_usec ", end) / 1e6
        return total - own.ru_utime - own.ru_stime

    def oom_kills(self) -> int:
        if self.oom_fd < 0:
            return 0
        return self._number(b"\noom_kill ", self._read(self.oom_fd))
