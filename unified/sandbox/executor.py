"""The sandboxed code executor: run model-written functions on inputs, get values back.

    with Executor(ExecutorConfig(timeout_s=2)) as ex:
        ex.run("def f(x): return x + 1", "f", (1,))          # ExecResult(status="ok", value=2)
        ex.run_batch([ExecCall(code, "f", (i,)) for i in range(1000)])   # order preserved
        ex.run_twice(calls)                                  # pairs, for the determinism check
        ex.stats()                                           # counters: calls, timeouts by kind, ...

The sandbox only ever returns VALUES: whether a value is right is decided here, in the
parent, against expected values computed by trusted code (`oracle`, `evaluation`). No
check code runs next to the program, so a program that forges its own reply can only
claim a value, which it could have returned anyway.

Layers, outermost first (details in each module's docstring):
- static check (`sandbox.rules`): the code is parsed here; banned imports/calls give
  status "banned" without running anything;
- a warm pool of workers started once (`sandbox.jail` -> `sandbox.worker`); when root each
  lives in its own network (no interfaces), IPC, UTS, mount and PID namespaces, inside a
  new root that holds only the Python runtime (read-only), four /dev nodes and a private
  size-limited /tmp: not the project, /root, the data files, /proc or any host socket;
- each call is a FRESH child forked from a clean zygote that never held any call's data,
  in a fresh world (`sandbox.world`): PID 1 of a PID namespace of its own (when it ends,
  everything it started dies), a fresh tmpfs on /tmp, under an unprivileged uid without
  capabilities, with rlimits, and the seccomp allowlist (`sandbox.allowlist`,
  `sandbox.seccomp_filter`: every system call not recorded as needed answers EPERM);
- limits per call for its whole process tree (`sandbox.cgroups`, `sandbox.meter`): each
  worker's cgroup holds its zygote and its one running call: memory (memory_mb on top of
  the zygote), processes, and CPU time of every process the call created, reaped or not;
- Python guards in the child (`sandbox.guards`): the project (`unified`) and banned
  modules cannot be imported (an audit hook that no Python code can remove), stubs for
  banned functions, guarded open, captured and truncated stdout/stderr;
- results: the child writes literal text, the parent reads it within fixed limits
  (`sandbox.reply`, `values.literal_read`: no pickle, no eval), compares it at bounded
  cost (`values.compare`) and shows it bounded (`values.shown`).

Statuses: ok | error (exception type + message) | timeout | memory (MemoryError under the
address-space limit, or an OOM kill in the call's cgroup) | banned (static or run time) |
crashed (killed by a signal, or exited without a well-formed message) | bad_reply (a
message whose value is not a literal within the reader's limits: too long, an int of
more than INT_BITS bits, too deep, crowded hashes).

Timeouts are decided by the CPU time a call used (`timeout_s`; of its whole process tree
where the cgroup counts it; RLIMIT_CPU and the cgroup's counter stop it), not by the wall
clock, so the same program gets the same status on an idle or a loaded machine. A
wall-clock backstop (`wall_s`, default 10 x timeout_s + 1) only catches programs that
sleep or block. `stats()` counts timeouts by kind ("cpu" / "wall").

What is covered and what is not, per mechanism, and what a machine without root or
writable cgroups loses: docs/sandbox.md (`isolation` and `limits` say what this pool got;
anything missing is logged once at start).
Benchmark: bench/executor_throughput.py. CLI: `python -m unified.sandbox` (`sandbox.cli`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from unified.sandbox.cgroups import CgroupPool, WorkerCgroup, set_limits
from unified.sandbox.cgroups import remove as remove_cgroup
from unified.sandbox.child import read_frame
from unified.sandbox.config import MAX_PROCESSES, ExecutorConfig
from unified.sandbox.exec_types import STATUSES, ExecCall, ExecResult, Stats
from unified.sandbox.notice import SharedRuntimeError, say_what_is_missing, shared_runtime_refusal
from unified.sandbox.precheck import Precheck
from unified.sandbox.reply import parse_reply
from unified.sandbox.runtime import runtime_dir, why_none

__all__ = ["STATUSES", "ExecCall", "ExecResult", "Executor", "ExecutorConfig", "Precheck", "Stats", "result_from_reply"]

_JAIL = str(Path(__file__).resolve().with_name("jail.py"))
_WORKER_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "LD_BIND_NOW": "1",
}


def result_from_reply(reply, max_output_bytes: int = ExecutorConfig.max_output_bytes) -> ExecResult:
    """An ExecResult from a worker's raw reply (bytes), or the result decided in the parent."""
    if isinstance(reply, ExecResult):
        return reply
    if reply is None:
        return ExecResult("crashed", error="executor worker died or hung; restarted")
    return parse_reply(reply, max_output_bytes, ExecResult)


class _Worker:
    """The parent's handle on one worker process (see sandbox.jail, sandbox.worker)."""

    def __init__(self, index: int, config: ExecutorConfig, init: bytes, cgroup: WorkerCgroup | None = None, runtime: str = ""):
        self.index, self.config, self.cgroup = index, config, cgroup
        self.root = tempfile.mkdtemp(prefix="unified-sandbox-")
        os.chmod(self.root, 0o711)
        spec = json.dumps(cgroup.spec() if cgroup else {})
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", _JAIL, self.root, "32", spec, runtime],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_WORKER_ENV,
            cwd="/",
            close_fds=True,
            start_new_session=True,  # no terminal SIGINT
        )
        self.fd_in, self.fd_out = self.proc.stdout.fileno(), self.proc.stdin.fileno()
        self.send(init)
        self.info: dict = {}

    def wait_ready(self, timeout: float = 60.0) -> None:
        if not select.select([self.fd_in], [], [], timeout)[0]:
            raise RuntimeError(f"executor worker {self.index} did not start within {timeout:.0f} s")
        words = (self.recv() or b"").decode(errors="replace").split()
        if not words or words[0] != "ready":
            raise RuntimeError(f"executor worker {self.index} failed to start (exit code {self.proc.poll()})")
        fields = dict(w.split("=", 1) for w in words[1:])
        uid = int(fields.pop("uid"))
        iso = {k: v == "1" for k, v in fields.items() if k != "pid"}
        self.info = {"ready": True, "isolation": iso | {"uid": uid if uid >= 0 else None}}
        if iso.get("cgroup"):  # the zygote is in: its usage now is the base the call's memory_mb adds to
            set_limits(self.cgroup, self.config.memory_mb, MAX_PROCESSES)

    def send(self, data: bytes) -> None:
        data = len(data).to_bytes(4, "big") + data
        while data:
            data = data[os.write(self.fd_out, data) :]

    def recv(self) -> bytes | None:
        return read_frame(self.fd_in, os)

    def close(self, grace_s: float = 2.0) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # EOF: the worker's loop ends
            except OSError:
                pass
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
        remove_cgroup(self.cgroup)


class Executor:
    """A warm pool of sandbox workers; context manager, `close()` kills the pool."""

    def __init__(self, config: ExecutorConfig = ExecutorConfig()):
        self.config = config
        self._precheck = Precheck(config)
        self._init = config.worker_init()
        self._stats = Stats()
        self._lock = threading.Lock()
        self._cgroups = CgroupPool() if os.geteuid() == 0 else None
        self._runtime = str(runtime_dir() or "")  # the interpreter's files, the pool's own copy (once per process)
        self._workers = [self._new_worker(i) for i in range(config.workers)]
        try:
            for w in self._workers:
                w.wait_ready()
        except BaseException:
            self.close()
            raise
        self._closed = False
        why = "" if self.isolation.get("runtime_copy") else why_none() or "the jail could not bind it"
        if why and not config.allow_shared_runtime:
            self.close()
            raise SharedRuntimeError(shared_runtime_refusal(why))
        say_what_is_missing(self.isolation, self.limits, why)

    @property
    def limits(self) -> dict:
        """Which per-call limits bind the call's whole process tree (cgroups): memory, pids, cpu."""
        iso = self.isolation
        return {
            "memory": bool(iso.get("cgroup")) and bool(self._cgroups and self._cgroups.enforced["memory"]),
            "pids": bool(iso.get("cgroup")) and bool(self._cgroups and self._cgroups.enforced["pids"]),
            "cpu": bool(iso.get("tree_cpu")),
        }

    def _new_worker(self, index: int) -> _Worker:
        return _Worker(index, self.config, self._init, self._cgroups.worker(index) if self._cgroups else None, self._runtime)

    @property
    def isolation(self) -> dict:
        """Which kernel layers the workers got (root_user, netns, mountns, pidns, pivot, uid...)."""
        return dict(self._workers[0].info.get("isolation", {}))

    def stats(self) -> dict[str, int]:
        """Counters since the pool started: calls, one per status, timeout_cpu / timeout_wall
        (the CPU limit vs. the wall-clock backstop), worker_restarts."""
        return self._stats.snapshot()

    def run(self, code: str, entry: str, args: tuple = ()) -> ExecResult:
        return self.run_batch([ExecCall(code, entry, tuple(args))])[0]

    def run_batch(self, calls: Sequence[ExecCall]) -> list[ExecResult]:
        replies, _ = self.run_replies(calls)
        return [self.result(r) for r in replies]

    def run_twice(self, calls: Sequence[ExecCall]) -> list[tuple[ExecResult, ExecResult]]:
        """Each call twice, on different workers when there are several (determinism check).
        With one worker both runs fork from the same process image, so results that depend
        on memory addresses (`id()`, default `hash()`) repeat: use >= 2 workers to catch them."""
        first, ran_on = self.run_replies(calls, twice=True)
        second, _ = self.run_replies(calls, avoid=ran_on, twice=True)
        return [(self.result(a), self.result(b)) for a, b in zip(first, second)]

    def result(self, reply) -> ExecResult:
        """A raw reply (or parent-decided result) as an ExecResult, counted in `stats()`."""
        return self._stats.count(result_from_reply(reply, self.config.max_output_bytes))

    def determinism(self, call: ExecCall) -> ExecResult | None:
        """ "banned" when `run_twice` would not run the call: it imports a module banned for
        determinism's sake (`rules.DETERMINISM_MODULES`); None otherwise."""
        return self._precheck.determinism(call)

    def run_replies(self, calls: Sequence[ExecCall], avoid: Sequence[int] | None = None, twice: bool = False):
        """Raw worker replies (bytes, parsed by `result_from_reply`) or final ExecResults, in
        order, and the index of the worker that ran each call (-1: decided in the parent);
        `twice`: for the determinism check (its bans apply too)."""
        if getattr(self, "_closed", True):
            raise RuntimeError("executor is closed")
        out: list = [None] * len(calls)
        requests: dict[int, bytes] = {}
        for i, call in enumerate(calls):
            out[i], request = self._precheck(call, twice)
            if request is not None:
                requests[i] = request
        with self._lock:
            ran_on = self._dispatch(requests, out, avoid)
        return out, ran_on

    def _dispatch(self, requests: dict[int, bytes], out: list, avoid) -> list[int]:
        ran_on = [-1] * len(out)
        # Jobs queued by the worker they must avoid (None: any), so picking is O(workers).
        queues: dict[int | None, deque[int]] = {}
        for i in requests:
            key = avoid[i] if avoid is not None and len(self._workers) > 1 and avoid[i] >= 0 else None
            queues.setdefault(key, deque()).append(i)
        idle, pending = list(self._workers), len(requests)
        inflight: dict[int, tuple[_Worker, int, float]] = {}  # fd -> (worker, job, deadline)
        hard_timeout = self.config.wall_s + 10.0  # the worker enforces the limits itself
        while pending or inflight:
            for w in idle[:] if pending else ():
                job = _pick(queues, w.index)
                if job is None:
                    continue
                idle.remove(w)
                pending -= 1
                try:
                    w.send(requests[job])
                except OSError:  # the worker died between calls: the call never ran, requeue it
                    queues.setdefault(None, deque()).appendleft(job)
                    pending += 1
                    idle.append(self._respawn(w))
                    continue
                inflight[w.fd_in] = (w, job, time.monotonic() + hard_timeout)
            if not inflight:
                continue
            soonest = min(d for _, _, d in inflight.values())
            ready = select.select(list(inflight), [], [], max(0.0, soonest - time.monotonic()))[0]
            now = time.monotonic()
            late = [fd for fd, (_, _, d) in inflight.items() if now >= d and fd not in ready] if now >= soonest else []
            for fd in ready + late:
                w, job, _ = inflight.pop(fd)
                reply = w.recv() if fd in ready else None
                ran_on[job] = w.index
                out[job] = reply  # None: the worker died or hung (result_from_reply says so)
                if reply is None:
                    w = self._respawn(w)
                idle.append(w)
        return ran_on

    def _respawn(self, worker: _Worker) -> _Worker:
        self._stats.counts["worker_restarts"] += 1
        worker.proc.kill()
        worker.close(grace_s=1.0)
        fresh = self._new_worker(worker.index)
        fresh.wait_ready()
        self._workers[worker.index] = fresh
        return fresh

    def close(self) -> None:
        self._closed = True
        for w in getattr(self, "_workers", []):
            w.close()
        if getattr(self, "_cgroups", None) is not None:
            self._cgroups.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if not getattr(self, "_closed", True):
            self.close()


def _pick(queues: dict[int | None, deque[int]], worker: int) -> int | None:
    for key, queue in queues.items():
        if queue and key != worker:
            return queue.popleft()
    return None
