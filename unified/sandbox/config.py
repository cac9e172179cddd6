"""The executor's settings (the `executor` config group's schema) and what a worker is
started with: its limits, the ban lists as stubs, the trusted rehearsal calls, and the
harness (worker, child, guards, literal writer) compiled here, in the parent, so that the
worker never reads a file of the project.
"""

from __future__ import annotations

import marshal
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from unified.sandbox import seccomp_filter
from unified.sandbox.precheck import ARGS_MARSHAL_VERSION, USER_FILE, runtime_modules, worker_stubs
from unified.sandbox.rules import BANNED_CALLS, BANNED_MODULES, SandboxRules

# The worker's code, sent compiled in its first frame (sandbox.jail.BOOT runs "worker").
# Paths below unified/: the literal writer is the values package's (stdlib only).
_HARNESS = {
    "worker": "sandbox/worker.py",
    "child": "sandbox/child.py",
    "guards": "sandbox/guards.py",
    "literal": "values/literal.py",
    "world": "sandbox/world.py",
    "meter": "sandbox/meter.py",
}
MAX_PROCESSES = 64  # per call: RLIMIT_NPROC (per uid: the worker's alone) and the cgroup's pids.max
# Trusted calls each worker runs in-process before its first fork (sandbox.child.rehearse):
# an int, and a container of every literal kind with printed output.
_REHEARSAL = (
    "def f(x):\n    return x + 1\n\ndef g(x):\n    print(x)\n    return [x, -1.5, 'a', b'b', (True, None), {'k': 1j}, {2}]\n"
)


@dataclass(frozen=True)
class ExecutorConfig:
    backend: str = "local"  # "local" | "ray"
    workers: int = 2  # warm pool size (0/None -> os.cpu_count())
    timeout_s: float = 2.0  # CPU seconds a call may use: the (deterministic) timeout
    memory_mb: int = 512  # address space a call may add to the worker image
    cpu_s: float | None = None  # RLIMIT_CPU, the hard stop; defaults to ceil(timeout_s)
    max_output_bytes: int = 65536  # stdout/stderr capture and return-value literal limit
    banned_modules: Optional[tuple[str, ...]] = BANNED_MODULES  # None -> these defaults
    banned_calls: Optional[tuple[str, ...]] = BANNED_CALLS
    ray_address: str | None = None  # ray backend: null = a local instance of its own; "auto" or host:port = join a cluster
    ray_max_retries: int = 3  # ray backend: Ray's max_retries for a chunk whose node, worker or task failed
    wall_s: float | None = None  # wall-clock backstop for sleeping/blocked code; 10 x timeout_s + 1
    # each distinct call runs once between `forget()`s (sandbox/reuse.py; the trainer forgets as each round starts);
    # off for a bare Executor, on in the trainer's config (unified/schema.py RUN_EXECUTOR); the ray backend runs every call
    reuse_results: bool = False
    # a pool without its own runtime copy (not root, no tmpfs, too little memory: sandbox/runtime.py) shares the
    # host's runtime files and their page cache with every call; allowed for a bare Executor, refused by the
    # trainer's config (unified/schema.py RUN_EXECUTOR) unless set to true
    allow_shared_runtime: bool = True

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 - frozen: normalise once
        set_("workers", int(self.workers or os.cpu_count() or 1))
        for key in ("timeout_s", "cpu_s", "wall_s"):
            if getattr(self, key) is not None and not getattr(self, key) > 0:
                raise ValueError(f"executor.{key} must be positive, got {getattr(self, key)!r}")
        set_("cpu_s", float(self.cpu_s) if self.cpu_s is not None else float(math.ceil(self.timeout_s)))
        set_("wall_s", float(self.wall_s) if self.wall_s is not None else 10.0 * self.timeout_s + 1.0)
        # None (null in YAML) means the built-in lists.
        set_("banned_modules", BANNED_MODULES if self.banned_modules is None else tuple(self.banned_modules))
        set_("banned_calls", BANNED_CALLS if self.banned_calls is None else tuple(self.banned_calls))
        if not (isinstance(self.ray_max_retries, int) and self.ray_max_retries >= 0):
            raise ValueError(f"executor.ray_max_retries must be an integer >= 0, got {self.ray_max_retries!r}")
        for key in ("workers", "memory_mb", "max_output_bytes"):
            if not getattr(self, key) > 0:
                raise ValueError(f"executor.{key} must be positive, got {getattr(self, key)!r}")

    def worker_init(self) -> bytes:
        """Everything a worker needs, marshalled (the worker imports nothing to read it)."""
        banned = runtime_modules(self.banned_modules)  # the determinism bans are the static check's (run_twice)
        policy = SandboxRules.from_lists(banned, self.banned_calls)
        limits = {
            "timeout_s": self.timeout_s,
            "cpu_rlimit": max(1, math.ceil(self.cpu_s)),
            "wall_s": self.wall_s,
            "memory_mb": self.memory_mb,
            "max_output_bytes": self.max_output_bytes,
            "max_file_mb": 32,
            "max_open_files": 256,
            "max_processes": MAX_PROCESSES,
            "banned_modules": banned,
            "block_gc": "gc" in banned,
        }
        stubs, direct = worker_stubs(policy)
        code = compile(_REHEARSAL, USER_FILE, "exec", dont_inherit=True)
        rehearsal = [marshal.dumps((code, entry, marshal.dumps((7,), ARGS_MARSHAL_VERSION))) for entry in ("f", "g")]
        here = Path(__file__).resolve().parents[1]  # unified/
        harness = {
            name: compile((here / file).read_text(encoding="utf-8"), f"<{name}>", "exec", dont_inherit=True)
            for name, file in _HARNESS.items()
        }
        return marshal.dumps(
            {
                "limits": limits,
                "banned_modules": banned,
                "stubs": stubs,
                "direct": direct,
                "open_write": policy.open_write,
                "rehearsal": rehearsal,
                "seccomp": seccomp_filter.bpf(),
                "seccomp_call": seccomp_filter.call_bpf(),
                **harness,
            }
        )
