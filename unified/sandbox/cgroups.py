"""Per-worker cgroups: limits and accounting for a call's whole process tree (parent side).

A worker runs one call at a time, so a cgroup of its own, which the zygote joins once at
start (`sandbox.jail`) and every call's processes inherit by fork, binds each call:
- memory: the limit is the zygote's own usage when it is ready plus `memory_mb` (plus
  SLACK_MB for the zygote's pages a call copies), so the call's processes together (heap,
  copied pages, /tmp) may add `memory_mb`; the zygote itself is never the OOM killer's choice (oom_score_adj -1000,
  and its calls start at 0). The worker reads the OOM-kill counter per call;
- pids: `max_processes` + the zygote;
- CPU: the cgroup's counter (v1 `cpuacct.usage`, v2 `cpu.stat` usage_usec) less the
  zygote's own time is the CPU of every process the call created, reaped or not.
No migration per call (that costs an RCU grace period on every call).

Only beneath the cgroups this process runs in (`/proc/self/cgroup`), in each hierarchy:
`<own>/unified-sandbox-<pid>-<n>/w<index>-<generation>`, removed when the pool closes
(and, when a pool's process died without closing it, by the next pool made there).
cgroup v1 (memory, pids, cpuacct) where mounted, else v2 (controllers enabled in the
subtree where the kernel allows it: a v2 cgroup holding processes cannot hand memory or
pids to children, so there CPU accounting alone may be available). What cannot be had is
reported by `CgroupPool.enforced` (the executor says so once at start).
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field

_V1 = ("memory", "pids", "cpuacct")
SLACK_MB = 16
_SEQUENCE = itertools.count()


@dataclass(frozen=True)
class WorkerCgroup:
    """One worker's cgroup directories and the files the jail and the worker use."""

    dirs: tuple[str, ...]
    files: dict = field(default_factory=dict)  # role -> path: procs (list), cpu, cpu_format, memory, oom, limits

    def spec(self) -> dict:
        """What `sandbox.jail` needs (JSON-able)."""
        return dict(self.files)


class CgroupPool:
    """The executor's cgroup directory in each usable hierarchy, and its workers' cgroups."""

    def __init__(self, hierarchies: dict | None = None):
        self.roots: dict[str, str] = {}  # "v1:memory" / "v2" -> the pool's directory
        name = f"unified-sandbox-{os.getpid()}-{next(_SEQUENCE)}"
        for key, base in (_hierarchies() if hierarchies is None else hierarchies).items():
            _sweep(base)
            path = os.path.join(base, name)
            try:
                os.mkdir(path)
            except OSError:
                continue
            self.roots[key] = path
        if "v2" in self.roots:
            _enable_controllers(self.roots["v2"])
        self.enforced = _enforced(self.roots)
        self._generation = itertools.count()

    def worker(self, index: int) -> WorkerCgroup | None:
        """A fresh cgroup for worker `index` (None when no hierarchy is usable)."""
        leaf, dirs, files = f"w{index}-{next(self._generation)}", [], {"procs": []}
        for key, root in self.roots.items():
            path = os.path.join(root, leaf)
            try:
                os.mkdir(path)
            except OSError:
                continue
            dirs.append(path)
            files["procs"].append(os.path.join(path, "cgroup.procs"))
            files.update(_roles(key, path))
        return WorkerCgroup(tuple(dirs), files) if dirs else None

    def close(self) -> None:
        for path in self.roots.values():
            for leaf in _listdir(path):
                if leaf.startswith("w"):
                    _rmdir(os.path.join(path, leaf))
            _rmdir(path)


def set_limits(cgroup: WorkerCgroup | None, memory_mb: int, max_processes: int) -> None:
    """Once the worker is ready: memory = its usage now + memory_mb + SLACK_MB (the pages a
    call copies from the zygote, as RLIMIT_AS allows the zygote's image + memory_mb + 16 MB);
    pids = max_processes + 1."""
    if cgroup is None:
        return
    files = cgroup.files
    if "memory_limit" in files:
        limit = _read_int(files["memory"]) + ((memory_mb + SLACK_MB) << 20)
        _write(files["memory_limit"], str(limit))
        if "swap_limit" in files:  # no swapping around the limit: v1 memory+swap, v2 swap alone
            _write(files["swap_limit"], str(limit) if files.get("cgroup") == "v1" else "0")
    if "pids_limit" in files:
        _write(files["pids_limit"], str(max_processes + 1))


def remove(cgroup: WorkerCgroup | None, wait_s: float = 1.0) -> None:
    """Remove a worker's cgroup once its processes are gone (a killed worker's zygote may
    take a moment: it dies of its parent-death signal)."""
    deadline = time.monotonic() + wait_s
    for path in cgroup.dirs if cgroup else ():
        while not _rmdir(path) and os.path.isdir(path) and time.monotonic() < deadline:
            time.sleep(0.01)


def _roles(key: str, path: str) -> dict:
    join = lambda name: os.path.join(path, name)  # noqa: E731
    if key == "v1:memory":
        roles = {
            "memory": join("memory.usage_in_bytes"),
            "memory_limit": join("memory.limit_in_bytes"),
            "oom": join("memory.oom_control"),
        }
        if os.path.exists(join("memory.memsw.limit_in_bytes")):
            roles["swap_limit"] = join("memory.memsw.limit_in_bytes")
        return roles | {"cgroup": "v1"}
    if key == "v1:pids":
        return {"pids_limit": join("pids.max")}
    if key == "v1:cpuacct":
        return {"cpu": join("cpuacct.usage"), "cpu_format": "ns"}
    roles = {"cpu": join("cpu.stat"), "cpu_format": "cpu.stat"}  # v2: always there
    if os.path.exists(join("memory.max")):
        roles |= {
            "memory": join("memory.current"),
            "memory_limit": join("memory.max"),
            "swap_limit": join("memory.swap.max"),
            "oom": join("memory.events"),
        }
    if os.path.exists(join("pids.max")):
        roles["pids_limit"] = join("pids.max")
    return roles


def _enforced(roots: dict) -> dict:
    """Which limits the pool's cgroups can enforce: memory, pids, cpu (accounting)."""
    roles = {}
    for key, root in roots.items():
        roles.update(_roles(key, root))
    return {"memory": "memory_limit" in roles, "pids": "pids_limit" in roles, "cpu": "cpu" in roles}


def _enable_controllers(root: str) -> None:
    """v2: hand memory and pids down to the pool's directory and from it to the workers."""
    parent = os.path.dirname(root)
    for where in (parent, root):
        for name in ("memory", "pids"):
            try:
                _write(os.path.join(where, "cgroup.subtree_control"), "+" + name)
            except OSError:
                pass


def _hierarchies() -> dict[str, str]:
    """ "v1:<controller>" / "v2" -> the directory of this process's own cgroup there."""
    mounts = _cgroup_mounts()
    found = {}
    for line in _read("/proc/self/cgroup").splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "" and "v2" in mounts:
            found["v2"] = _under(mounts["v2"], path)
        for name in controllers.split(","):
            if name in _V1 and name in mounts:
                found[f"v1:{name}"] = _under(mounts[name], path)
    if any(k.startswith("v1:memory") for k in found):
        found.pop("v2", None)  # hybrid: v1 has the controllers; v2 would add nothing but cpu
    return {k: v for k, v in found.items() if os.access(v, os.W_OK)}


def _cgroup_mounts() -> dict[str, tuple[str, str]]:
    """controller (or "v2") -> (mount root, mount point), from /proc/self/mountinfo."""
    mounts = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        root, point = fields[3], fields[4].replace("\\040", " ")
        if rest[0] == "cgroup2":
            mounts.setdefault("v2", (root, point))
        elif rest[0] == "cgroup":
            for name in rest[2].split(","):
                mounts.setdefault(name, (root, point))
    return mounts


def _under(mount: tuple[str, str], path: str) -> str:
    root, point = mount
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return os.path.join(point, path.lstrip("/"))


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


def _read_int(path: str) -> int:
    return int(_read(path).split()[0])


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def _sweep(base: str) -> None:
    """Remove the (empty) cgroups of pools whose process died without closing them."""
    try:
        names = [n for n in os.listdir(base) if n.startswith("unified-sandbox-")]
    except OSError:
        return
    for name in names:
        pid = name.split("-")[2]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        path = os.path.join(base, name)
        for leaf in _listdir(path):
            if leaf.startswith("w"):
                _rmdir(os.path.join(path, leaf))
        _rmdir(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
