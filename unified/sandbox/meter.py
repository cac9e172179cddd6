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
    over every earlier call), never into a new bytes object."""

    def __init__(self, fds: dict, cpu_format: str):
        self.cpu_fd, self.oom_fd = fds.get("cpu", -1), fds.get("oom", -1)
        self.cpu_format = cpu_format
        self.tree = self.cpu_fd >= 0  # the cgroup counts the whole tree
        self.buffer = bytearray(4096)
        self.view, self.zeros = memoryview(self.buffer), memoryview(bytes(4096))

    def _read(self, fd: int):
        """The file's text, as a view of the buffer (valid until the next read)."""
        n = _preadv(fd, (self.view,), 0)
        return self.view[:n]

    def scrub(self) -> None:
        self.view[:] = self.zeros

    def cpu(self) -> float:
        """CPU seconds of the call's processes so far (a running total: subtract two)."""
        if not self.tree:
            usage = _getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime
        own = _getrusage(resource.RUSAGE_SELF)
        text = self._read(self.cpu_fd)
        if self.cpu_format == "ns":
            total = int(text) / 1e9
        else:  # cgroup v2 cpu.stat: "usage_usec N" first
            at = self.buffer.find(b"usage_usec ") + len(b"usage_usec ")
            total = int(text[at : self.buffer.find(b"\n", at)]) / 1e6
        return total - own.ru_utime - own.ru_stime

    def oom_kills(self) -> int:
        if self.oom_fd < 0:
            return 0
        text = self._read(self.oom_fd)
        at = self.buffer.find(b"\noom_kill ", 0, len(text))
        if at < 0:
            return 0
        at += len(b"\noom_kill ")
        end = self.buffer.find(b"\n", at, len(text))
        return int(text[at : end if end >= 0 else len(text)])
