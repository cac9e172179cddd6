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

_pread, _getrusage = os.pread, resource.getrusage  # before the guards


class Meter:
    def __init__(self, fds: dict, cpu_format: str):
        self.cpu_fd, self.oom_fd = fds.get("cpu", -1), fds.get("oom", -1)
        self.cpu_format = cpu_format
        self.tree = self.cpu_fd >= 0  # the cgroup counts the whole tree

    def cpu(self) -> float:
        """CPU seconds of the call's processes so far (a running total: subtract two)."""
        if not self.tree:
            usage = _getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime
        own = _getrusage(resource.RUSAGE_SELF)
        text = _pread(self.cpu_fd, 4096, 0)
        if self.cpu_format == "ns":
            total = int(text) / 1e9
        else:  # cgroup v2 cpu.stat: "usage_usec N" first
            total = int(text.split(b"usage_usec", 1)[1].split()[0]) / 1e6
        return total - own.ru_utime - own.ru_stime

    def oom_kills(self) -> int:
        if self.oom_fd < 0:
            return 0
        text = _pread(self.oom_fd, 4096, 0)
        return int(text.split(b"oom_kill ", 1)[1].split()[0]) if b"oom_kill " in text else 0
