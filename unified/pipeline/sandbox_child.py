"""What runs inside the forked child that executes ONE untrusted call.

This source is executed by the worker (`sandbox_worker`) into a namespace of its own,
next to the guards (`sandbox_guards`) and the literal writer (`literal`); it is not a
module and imports nothing of the project. The worker forks the child BEFORE a request
exists; `run_call` then:

1. reads one request (marshal of (code object, entry, args): the trusted parent compiled
   the program; compiling runs nothing)
   from the request pipe, and writes b"S" to the result pipe (the call starts);
2. shuts itself in: descriptors (the request pipe among them), rlimits (CPU time,
   address space, processes, files), working directory, user id, the guards' `arm`;
3. compiles and runs the program as module `__sandbox__`, calls the entry point, and
   writes ONE message with the return value as literal text to the result pipe,
   then `_exit`s. The worker and the parent treat every byte of it as hostile.

The child never sees the expected output: comparing is the parent's job. A program that
forges its own message can only claim a value, which it could have returned anyway.
Message: b"<status> <len value> <len error> <len stdout>\\n" + the three UTF-8 fields.
"""

import builtins
import marshal
import os
import resource
import sys

USER_FILE = "<sandbox>"  # co_filename of the program (the guards look for it)
USER_MODULE = "__sandbox__"  # its __name__: `if __name__ == "__main__":` blocks do not run
_set_digits, _set_recursion = sys.set_int_max_str_digits, sys.setrecursionlimit


def run_call(req_fd, result_fd, devnull_fd, tmpdir, uid, limits, guards, literal, os_):
    """Run one call in this freshly forked process and _exit; never returns.
    `os_` holds the os functions captured before the guards replaced them."""
    my_pid = os_.getpid()  # forks the program makes must not write a result
    status, value, error = "error", "", "internal: no result"
    capture = guards.Capture(limits["max_output_bytes"])
    try:
        request = _read_request(req_fd, os_)
        if request is None:  # the parent closed the pipe: the pool is shutting down
            os_._exit(0)
        os_.write(result_fd, b"S")
        code, entry, args = marshal.loads(request)
        del request
        _shut_in(req_fd, result_fd, devnull_fd, tmpdir, uid, limits, os_)
        sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = capture
        module = type(sys)(USER_MODULE)
        module.__dict__["__builtins__"] = builtins  # the module, as a script run as __main__ sees it
        sys.modules[USER_MODULE] = module
        guards.arm(limits["hook"], limits["prune"], module)
        # A random number of live objects shifts addresses, so output that depends on
        # id() or default hashes differs between runs and run_twice catches it.
        pad = [object() for _ in range(os_.urandom(1)[0] & 31)]
        exec(code, module.__dict__)  # noqa: S102 - this is the sandbox
        function = module.__dict__.get(entry)
        if not callable(function):
            raise NameError(f"entry point {entry!r} is not defined")
        result = function(*args)
        del pad
        _set_digits(4300)  # the program may have changed these; rendering needs sane ones
        _set_recursion(1000)
        try:
            status, value, error = "ok", literal.to_literal(result, limits["max_output_bytes"]), ""
        except (literal.LiteralError, ValueError, RecursionError) as e:
            status, error = "error", f"unserialisable return value: {_describe(e)}"
    except MemoryError:
        status, error = "memory", "MemoryError"
    except guards.BannedImport as e:
        status, error = "banned", f"banned import at run time: {_describe(e)}"
    except guards.BannedCall as e:
        status, error = "banned", f"banned call at run time: {_describe(e)}"
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are results too
        status, error = "error", f"{_name(e)}: {_describe(e)}"
    finally:
        if os_.getpid() == my_pid:
            _send(result_fd, status, value, error, capture, os_)
        os_._exit(0)


def _read_request(fd, os_):
    header = _read_exact(fd, 4, os_)
    return header and _read_exact(fd, int.from_bytes(header, "big"), os_)


def _read_exact(fd, n, os_):
    buf = bytearray()
    while len(buf) < n:
        chunk = os_.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _shut_in(req_fd, result_fd, devnull_fd, tmpdir, uid, limits, os_) -> None:
    os_.setsid()  # own session and process group (the fallback kill path uses it)
    for fd in (0, 1, 2):
        os_.dup2(devnull_fd, fd)
    os_.closerange(3, result_fd)
    os_.closerange(result_fd + 1, 1 << 20)
    cpu = limits["cpu_rlimit"]
    rlimits = {
        resource.RLIMIT_AS: limits["vm_bytes"] + limits["memory_mb"] * 2**20,  # on top of the worker image
        resource.RLIMIT_CPU: (cpu, cpu + 1),  # SIGXCPU, then SIGKILL: CPU time, not the wall clock
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_FSIZE: limits["max_file_mb"] * 2**20,
        resource.RLIMIT_NOFILE: limits["max_open_files"],
        resource.RLIMIT_NPROC: limits["max_processes"],  # counted per user: the uid is ours alone
    }
    for which, value in rlimits.items():
        soft, hard = value if isinstance(value, tuple) else (value, value)
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):  # without root a hard limit cannot be raised
            resource.setrlimit(which, (min(soft, resource.getrlimit(which)[1]),) * 2)
    os_.chdir(tmpdir)
    if uid >= 0:  # root: become a user of our own, without capabilities
        os_.setgroups([])
        os_.setresgid(uid, uid, uid)
        os_.setresuid(uid, uid, uid)
    _set_digits(4300)


def _name(e: BaseException) -> str:
    try:
        return str(type(e).__name__)[:200]
    except BaseException:  # noqa: BLE001
        return "Exception"


def _describe(e: BaseException) -> str:
    try:
        return str(e)[:2000]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return "<unprintable>"


def _send(fd, status, value, error, capture, os_) -> None:
    try:
        out = capture.getvalue()
        fields = [str(x).encode("utf-8", "replace") for x in (value, error, out)]
    except BaseException:  # noqa: BLE001 - e.g. MemoryError while encoding
        status, fields = "error", [b"", b"internal: could not encode the result", b""]
    data = b"%s %d %d %d\n" % (status.encode(), *map(len, fields)) + b"".join(fields)
    while data:
        try:
            data = data[os_.write(fd, data) :]
        except BaseException:  # noqa: BLE001 - the program closed or broke the pipe
            return
