"""The sandboxed code executor: run model-written functions on inputs, get values back.

    with Executor(ExecutorConfig(timeout_s=2)) as ex:
        ex.run("def f(x): return x + 1", "f", (1,))          # ExecResult(status="ok", value=2)
        ex.run_batch([ExecCall(code, "f", (i,)) for i in range(1000)])   # order preserved
        ex.run_twice(calls)                                  # pairs, for the determinism check

Layers, outermost first (details in each module's docstring):
- static check (`sandbox_policy`): the code is parsed here and banned imports/calls give
  status "banned" without running anything;
- a warm pool of worker processes (`sandbox_worker`) with scrubbed environments, started
  once; each call is a FRESH fork of a worker, so no state leaks between calls;
- kernel isolation when root: per-worker network (no interfaces), IPC, UTS and mount
  namespaces with every mount read-only, and per call a fresh PID namespace (every
  process the call started dies with it), a tmpfs as the only writable place, an
  unprivileged uid without capabilities, rlimits (address space, CPU, processes, files);
- Python guards in the child (`sandbox_child`): import hook, stubs for banned functions,
  guarded open, captured and truncated stdout/stderr;
- results: the child writes literal text, the parent reads it with `values.from_literal`
  (no pickle, no eval); a value that cannot be written that way is an "error".

Statuses: ok | error (exception type + message) | timeout (wall clock or CPU) | memory
(MemoryError under the address-space limit) | banned (static or run time) | crashed
(the child died by a signal, exited without a result, or wrote garbage).

Covered: hostile code cannot write outside its tmpfs, see the parent's environment,
open network connections, signal or see processes outside its namespace, leave
processes behind, exhaust the pool (fork bombs hit RLIMIT_NPROC), or corrupt the parent.
Not covered: reads of world-readable files (the file system is visible read-only);
/proc is the host's (other processes are listed but not readable, being other users);
CPU/memory contention between concurrent calls (no cgroups); kernel exploits. Without
root only the Python guards, rlimits and the session kill apply (see `isolation`).
Benchmark: bench/executor_throughput.py. CLI: python -m unified.pipeline.executor FILE.py
--entry f --args '[1, 2]'.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import math
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from unified.pipeline.sandbox_child import Limits
from unified.pipeline.sandbox_policy import BANNED_CALLS, BANNED_MODULES, Policy, scan
from unified.pipeline.values import LiteralError, from_literal, to_literal

STATUSES = ("ok", "error", "timeout", "memory", "banned", "crashed")
MAX_CODE_CHARS = 1_000_000
_REPO_ROOT = str(Path(__file__).resolve().parents[2])
_WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0",
               "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}  # fmt: skip
_BOOT = f"import sys; sys.path.insert(0, {_REPO_ROOT!r}); from unified.pipeline.sandbox_worker import main; main()"


@dataclass(frozen=True)
class ExecutorConfig:
    backend: str = "local"  # "local" | "ray"
    workers: int = 2  # warm pool size (0/None -> os.cpu_count())
    timeout_s: float = 2.0  # wall clock per call
    memory_mb: int = 512  # address space a call may add to the forked worker image
    cpu_s: float | None = None  # defaults to ceil(timeout_s) + 1
    max_output_bytes: int = 65536  # stdout/stderr capture and return-value literal limit
    banned_modules: tuple[str, ...] = BANNED_MODULES  # None -> these defaults
    banned_calls: tuple[str, ...] = BANNED_CALLS
    ray_address: str | None = None

    def __post_init__(self):
        if self.backend not in ("local", "ray"):
            raise ValueError(f"executor.backend must be 'local' or 'ray', got {self.backend!r}")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 - frozen: normalise once
        set_("workers", int(self.workers or os.cpu_count() or 1))
        set_("cpu_s", float(self.cpu_s) if self.cpu_s is not None else float(math.ceil(self.timeout_s) + 1))
        # None (null in YAML) means the built-in lists.
        set_("banned_modules", BANNED_MODULES if self.banned_modules is None else tuple(self.banned_modules))
        set_("banned_calls", BANNED_CALLS if self.banned_calls is None else tuple(self.banned_calls))
        for key in ("workers", "timeout_s", "memory_mb", "cpu_s", "max_output_bytes"):
            if not getattr(self, key) > 0:
                raise ValueError(f"executor.{key} must be positive, got {getattr(self, key)!r}")

    @property
    def limits(self) -> Limits:
        return Limits(self.timeout_s, self.cpu_s, self.memory_mb, self.max_output_bytes)


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
    duration_s: float = 0.0
    stdout: str = ""  # stdout and stderr, interleaved, truncated

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def executor_config_from(cfg_mapping) -> ExecutorConfig:
    """ExecutorConfig from an OmegaConf/dict node with the same keys (lists -> tuples)."""
    if hasattr(cfg_mapping, "_metadata"):  # an OmegaConf node: resolve interpolations
        from omegaconf import OmegaConf

        cfg_mapping = OmegaConf.to_container(cfg_mapping, resolve=True)
    if not isinstance(cfg_mapping, Mapping):
        raise ValueError(f"executor config must be a mapping, got {type(cfg_mapping).__name__}")
    known = {f.name for f in dataclasses.fields(ExecutorConfig)}
    for key in cfg_mapping:
        if key not in known:
            raise ValueError(f"unknown executor config key {key!r} (known: {', '.join(sorted(known))})")
    values = {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in cfg_mapping.items()}
    return ExecutorConfig(**values)


def build_executor(config: ExecutorConfig):
    """The executor for `config.backend`: a local pool, or chunks of calls on Ray."""
    if config.backend == "ray":
        from unified.pipeline.executor_ray import RayExecutor

        return RayExecutor(config)
    return Executor(config)


def result_from_reply(reply: dict) -> ExecResult:
    """An ExecResult from a worker's reply; the value is read from literal text here."""
    status, value = reply.get("status"), None
    if status not in STATUSES:
        return ExecResult("crashed", error=f"bad reply status {status!r}")
    if status == "ok":
        try:
            value = from_literal(reply["value"])
        except (LiteralError, KeyError, TypeError) as e:
            return ExecResult("crashed", error=f"unreadable result: {e}", duration_s=reply.get("duration_s", 0.0))
    return ExecResult(status, value, reply.get("error", ""), float(reply.get("duration_s", 0.0)), reply.get("stdout", ""))


class Precheck:
    """Everything decided in the parent before a call reaches a worker (cached per program)."""

    def __init__(self, config: ExecutorConfig):
        self.policy = Policy.from_lists(config.banned_modules, config.banned_calls)
        self.max_output = config.max_output_bytes
        self._verdicts: dict[str, ExecResult | None] = {}

    def __call__(self, call: ExecCall) -> tuple[ExecResult | None, dict | None]:
        """(a final result, None) or (None, the request for a worker)."""
        if not isinstance(call.entry, str) or not call.entry.isidentifier():
            return ExecResult("error", error=f"ValueError: bad entry point name {call.entry!r}"), None
        verdict = self._code_verdict(call.code)
        if verdict is not None:
            return verdict, None
        try:
            args = to_literal(tuple(call.args), max_chars=max(self.max_output, 1 << 20))
        except (LiteralError, TypeError) as e:
            return ExecResult("error", error=f"ValueError: arguments are not literal values: {e}"), None
        return None, {"code": call.code, "entry": call.entry, "args": args}

    def _code_verdict(self, code: str) -> ExecResult | None:
        if code in self._verdicts:
            return self._verdicts[code]
        if not isinstance(code, str) or len(code) > MAX_CODE_CHARS:
            return ExecResult("error", error=f"ValueError: code must be a str of at most {MAX_CODE_CHARS} chars")
        try:
            reason = scan(ast.parse(code), self.policy)
            verdict = ExecResult("banned", error=reason) if reason else None
        except SyntaxError as e:
            verdict = ExecResult("error", error=f"SyntaxError: {e.msg} (line {e.lineno})")
        except (ValueError, RecursionError, MemoryError) as e:
            verdict = ExecResult("error", error=f"{type(e).__name__}: {e}")
        if len(self._verdicts) > 50_000:
            self._verdicts.clear()
        self._verdicts[code] = verdict
        return verdict


class _Worker:
    """The parent's handle on one worker process (see sandbox_worker)."""

    def __init__(self, index: int, config: ExecutorConfig):
        self.index = index
        self.root = tempfile.mkdtemp(prefix="unified-sandbox-")
        os.chmod(self.root, 0o711)
        self.proc = subprocess.Popen(
            [sys.executable, "-s", "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=_WORKER_ENV, cwd="/", close_fds=True, start_new_session=True,  # no terminal SIGINT
        )  # fmt: skip
        self.fd_in, self.fd_out = self.proc.stdout.fileno(), self.proc.stdin.fileno()
        self.send({"root": self.root, "limits": dataclasses.asdict(config.limits),
                   "banned_modules": list(config.banned_modules), "banned_calls": list(config.banned_calls)})  # fmt: skip
        self.info: dict = {}

    def wait_ready(self, timeout: float = 60.0) -> None:
        if not select.select([self.fd_in], [], [], timeout)[0]:
            raise RuntimeError(f"executor worker {self.index} did not start within {timeout:.0f} s")
        self.info = self.recv() or {}
        if not self.info.get("ready"):
            raise RuntimeError(f"executor worker {self.index} failed to start (exit code {self.proc.poll()})")

    def send(self, obj: dict) -> None:
        data = json.dumps(obj).encode()
        data = struct.pack(">I", len(data)) + data
        while data:
            data = data[os.write(self.fd_out, data) :]

    def recv(self) -> dict | None:
        header = self._read(4)
        body = header and self._read(struct.unpack(">I", header)[0])
        return json.loads(body) if body else None

    def _read(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(self.fd_in, n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

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


class Executor:
    """A warm pool of sandbox workers; context manager, `close()` kills the pool."""

    def __init__(self, config: ExecutorConfig = ExecutorConfig()):
        self.config = config
        self._precheck = Precheck(config)
        self._lock = threading.Lock()
        self._workers = [_Worker(i, config) for i in range(config.workers)]
        try:
            for w in self._workers:
                w.wait_ready()
        except BaseException:
            self.close()
            raise
        self._closed = False

    @property
    def isolation(self) -> dict:
        """Which kernel layers the workers got (root_user, netns, mountns, readonly, pidns, uid...)."""
        return dict(self._workers[0].info.get("isolation", {}))

    def run(self, code: str, entry: str, args: tuple = ()) -> ExecResult:
        return self.run_batch([ExecCall(code, entry, tuple(args))])[0]

    def run_batch(self, calls: Sequence[ExecCall]) -> list[ExecResult]:
        replies, _ = self.run_replies(calls)
        return [r if isinstance(r, ExecResult) else result_from_reply(r) for r in replies]

    def run_twice(self, calls: Sequence[ExecCall]) -> list[tuple[ExecResult, ExecResult]]:
        """Each call twice, on different workers when there are several (determinism check).
        With one worker both runs fork from the same process image, so results that depend
        on memory addresses (`id()`, default `hash()`) repeat: use >= 2 workers to catch them."""
        first, ran_on = self.run_replies(calls)
        second, _ = self.run_replies(calls, avoid=ran_on)
        convert = lambda r: r if isinstance(r, ExecResult) else result_from_reply(r)  # noqa: E731
        return [(convert(a), convert(b)) for a, b in zip(first, second)]

    def run_replies(self, calls: Sequence[ExecCall], avoid: Sequence[int] | None = None):
        """Raw worker replies (values still literal text) or final ExecResults, in order,
        and the index of the worker that ran each call (-1: decided in the parent)."""
        if getattr(self, "_closed", True):
            raise RuntimeError("executor is closed")
        out: list = [None] * len(calls)
        requests: dict[int, dict] = {}
        for i, call in enumerate(calls):
            out[i], request = self._precheck(call)
            if request is not None:
                requests[i] = request
        with self._lock:
            ran_on = self._dispatch(requests, out, avoid)
        return out, ran_on

    def _dispatch(self, requests: dict[int, dict], out: list, avoid) -> list[int]:
        ran_on = [-1] * len(out)
        # Jobs queued by the worker they must avoid (None: any), so picking is O(workers).
        queues: dict[int | None, deque[int]] = {}
        for i in requests:
            key = avoid[i] if avoid is not None and len(self._workers) > 1 and avoid[i] >= 0 else None
            queues.setdefault(key, deque()).append(i)
        idle = deque(self._workers)
        inflight: dict[int, tuple[_Worker, int, float]] = {}  # fd -> (worker, job, deadline)
        hard_timeout = 2 * self.config.timeout_s + 10.0  # the worker enforces timeout_s itself
        while any(queues.values()) or inflight:
            for w in list(idle):
                job = _pick(queues, w.index)
                if job is None:
                    continue
                idle.remove(w)
                try:
                    w.send(requests[job])
                except OSError:  # the worker died between calls: the call never ran, requeue it
                    queues.setdefault(None, deque()).appendleft(job)
                    idle.append(self._respawn(w))
                    continue
                inflight[w.fd_in] = (w, job, time.monotonic() + hard_timeout)
            if not inflight:
                continue
            wait = max(0.0, min(d for _, _, d in inflight.values()) - time.monotonic())
            ready, _, _ = select.select(list(inflight), [], [], wait)
            now = time.monotonic()
            for fd in list(inflight):
                w, job, deadline = inflight[fd]
                if fd not in ready and now < deadline:
                    continue
                del inflight[fd]
                reply = w.recv() if fd in ready else None
                ran_on[job] = w.index
                if reply is None:
                    out[job] = ExecResult("crashed", error="executor worker died or hung; restarted")
                    w = self._respawn(w)
                else:
                    out[job] = reply
                idle.append(w)
        return ran_on

    def _respawn(self, worker: _Worker) -> _Worker:
        worker.proc.kill()
        worker.close(grace_s=1.0)
        fresh = _Worker(worker.index, self.config)
        fresh.wait_ready()
        self._workers[worker.index] = fresh
        return fresh

    def close(self) -> None:
        self._closed = True
        for w in getattr(self, "_workers", []):
            w.close()

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


# ------------------------------------------------------------------------------ CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump or traceback
        print(f"executor: error: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="python -m unified.pipeline.executor", description="Run FILE's function in the sandbox.")
    parser.add_argument("file", help="Python file defining the entry function")
    parser.add_argument("--entry", required=True, help="function to call")
    parser.add_argument("--args", default="[]", help="Python-literal list of positional args, e.g. '[1, \"a\"]'")
    parser.add_argument("--timeout", type=float, default=ExecutorConfig.timeout_s, help="wall-clock seconds")
    parser.add_argument("--memory-mb", type=int, default=ExecutorConfig.memory_mb, help="address-space limit")
    ns = parser.parse_args(argv)
    try:
        code = Path(ns.file).read_text()
    except (OSError, UnicodeDecodeError) as e:
        parser.error(f"cannot read {ns.file}: {e.strerror if isinstance(e, OSError) else e}")
    try:
        args = from_literal(ns.args)
    except LiteralError as e:
        parser.error(f"--args is not a Python literal: {e}")
    if not isinstance(args, (list, tuple)):
        parser.error(f"--args must be a list of positional arguments, got {type(args).__name__}")
    try:
        config = ExecutorConfig(workers=1, timeout_s=ns.timeout, memory_mb=ns.memory_mb)
    except ValueError as e:
        parser.error(str(e))
    with Executor(config) as ex:
        r = ex.run(code, ns.entry, tuple(args))
    print(json.dumps({"status": r.status, "value": to_literal(r.value) if r.ok else None,
                      "error": r.error, "duration_s": round(r.duration_s, 6), "stdout": r.stdout}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
