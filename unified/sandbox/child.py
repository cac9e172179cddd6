"""What runs inside the forked child that executes ONE untrusted call.

This source is executed by the worker (`sandbox.worker`) into a namespace of its own,
next to the guards (`sandbox.guards`) and the literal writer (`literal`); it is not a
module and imports nothing of the project. The worker forks the child BEFORE a request
exists; `run_call` then:

1. reads one request (marshal of (code object, entry, marshalled args): the trusted parent
   compiled the program, compiling runs nothing; the arguments are marshalled on their own,
   `sandbox.precheck.marshalled_args`, whose bytes are also the result memory's key)
   from the request pipe, and writes b"S" to the result pipe (the call starts);
2. shuts itself in: a session and process group of its own, fds 0-2 on a /dev/null it opens
   itself (no open file description shared with the zygote or another call), the other
   descriptors (the request pipe among them) closed, rlimits (CPU time, address space,
   processes, files), working directory, user id (the guards were armed and the zygote's
   seccomp filter loaded in the zygote, the call's own on top of it just after the fork:
   `prepare`, `sandbox.world`). It is PID 1 of a PID namespace of its own (`sandbox.world`);
3. runs the program as module `__sandbox__` (`execute`), calls the entry point, and
   writes ONE message with the return value as literal text to the result pipe,
   then `_exit`s. The worker and the parent treat every byte of it as hostile.

Before its first fork the zygote `rehearse`s this path with the parent's own trusted
calls (no call's data exists yet), then `prepare`s what every call starts from, so that
children inherit it ready and warm: each page a child writes is a page copied.

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
_urandom, _setrlimit = os.urandom, resource.setrlimit  # before the guards can replace them


def prepare(limits, guards):
    """In the zygote, once, after `rehearse`: the empty program module and output capture
    that every call's child inherits (installed as `__sandbox__`/`__main__` and as stdout and
    stderr), the guards armed, the rlimits worked out. The zygote never runs a call, so
    every child finds them as made here; a child doing this itself copied ~60 more pages."""
    capture = guards.Capture(limits["max_output_bytes"])
    sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = capture
    module = _new_module()
    guards.arm(limits["hook"], guards.loaded_banned(limits["banned_modules"]), module)
    cpu = limits["cpu_rlimit"]
    wanted = {
        resource.RLIMIT_AS: limits["vm_bytes"] + limits["memory_mb"] * 2**20,  # on top of the worker image
        resource.RLIMIT_CPU: (cpu, cpu + 1),  # SIGXCPU, then SIGKILL: CPU time, not the wall clock
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_FSIZE: limits["max_file_mb"] * 2**20,
        resource.RLIMIT_NOFILE: limits["max_open_files"],
        resource.RLIMIT_NPROC: limits["max_processes"],  # counted per user: the uid is ours alone
    }
    limits["rlimits"] = tuple((k, v if isinstance(v, tuple) else (v, v)) for k, v in wanted.items())
    return module, capture


def run_call(req_fd, result_fd, tmpdir, uid, limits, module, capture, guards, literal, os_):
    """Run one call in this freshly forked process and _exit; never returns.
    `os_` holds the os functions captured before the guards replaced them."""
    my_pid = os_.getpid()  # forks the program makes must not write a result
    outcome = "error", "", "internal: no result"
    try:
        request = read_frame(req_fd, os_)
        if request is None:  # the parent closed the pipe: the pool is shutting down
            os_._exit(0)
        os_.write(result_fd, b"S")
        code, entry, args = marshal.loads(request)
        args = marshal.loads(args)
        del request
        if capture.parts:  # only the zygote can have written there (say, a warning): not this call's output
            capture.__init__(limits["max_output_bytes"])
        _shut_in(result_fd, tmpdir, uid, limits, os_)
        outcome = execute(code, entry, args, module, limits, guards, literal)
    except BaseException as e:  # noqa: BLE001 - e.g. a failing rlimit or uid change
        outcome = _failure(e, guards)
    finally:
        if os_.getpid() == my_pid:
            _send(result_fd, *outcome, capture, os_)
        os_._exit(0)


def execute(code, entry, args, module, limits, guards, literal):
    """(status, value literal, error) of `entry(*args)` from the program `code`, run here in
    `module` (`__sandbox__`)."""
    try:
        # A random number of live objects shifts addresses, so output that depends on
        # id() or default hashes differs between runs and run_twice catches it.
        pad = [object() for _ in range(_urandom(1)[0] & 31)]
        exec(code, module.__dict__)  # noqa: S102 - this is the sandbox
        function = module.__dict__.get(entry)
        if not callable(function):
            raise NameError(f"entry point {entry!r} is not defined")
        result = function(*args)
        del pad
        _set_digits(4300)  # the program may have changed these; rendering needs sane ones
        _set_recursion(1000)
        try:
            return "ok", literal.to_literal(result, limits["max_output_bytes"]), ""
        except (literal.LiteralError, ValueError, RecursionError) as e:
            return "error", "", f"unserialisable return value: {_describe(e)}"
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are results too
        return _failure(e, guards)


def rehearse(requests, limits, guards, literal, devnull_fd, os_, times=64) -> None:
    """Run the parent's trusted `requests` through `execute` in the zygote, before `prepare`.
    The interpreter then finds this path's bytecode specialised and its type-cache entries
    and interned names in place, so each call's child writes (and copies) fewer of the
    zygote's pages. Nothing of the rehearsal stays: its modules are dropped, stdout restored."""
    saved = sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__
    try:
        for _ in range(times):
            for request in requests:
                code, entry, args = marshal.loads(request)
                args = marshal.loads(args)
                limits["hook"]("exec", (code,))  # the audit hook runs on every event of a call
                capture = guards.Capture(limits["max_output_bytes"])
                sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = capture
                outcome = execute(code, entry, args, _new_module(), limits, guards, literal)
                _send(devnull_fd, *outcome, capture, os_)
    finally:
        sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__ = saved
        sys.modules.pop(USER_MODULE, None)


def _new_module():
    module = type(sys)(USER_MODULE)
    module.__dict__["__builtins__"] = builtins  # the module, as a script run as __main__ sees it
    sys.modules[USER_MODULE] = module
    return module


def read_frame(fd, os_):
    """One frame (4-byte big-endian length + payload) from `fd`, or None at end of file."""
    header = _read_exact(fd, 4, os_)
    return header and _read_exact(fd, int.from_bytes(header, "big"), os_)


def _read_exact(fd, n, os_):
    data = os_.read(fd, n)  # one read, unless the pipe hands the frame over in pieces
    while len(data) < n:
        chunk = os_.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _shut_in(result_fd, tmpdir, uid, limits, os_) -> None:
    """Descriptors, session, limits, directory, user. fds 0-2 are a /dev/null opened here, after
    the fork: no open file description is shared with the zygote or another call (one shared
    /dev/null carried `os.set_blocking(0, False)` from one call to the next). A session and
    process group of its own: `kill(0, ...)` and PRIO_PGRP reach the call's processes only (in
    the zygote's group they reached the pool's jail process, outside the call's namespace)."""
    try:
        os_.setsid()
    except OSError:  # already a group leader (not after a fork): nothing of the pool shares it
        pass
    null = os_.open("/dev/null", os_.O_RDWR)
    for fd in (0, 1, 2):
        if fd != null:
            os_.dup2(null, fd)
    if null > 2:
        os_.close(null)
    os_.closerange(3, result_fd)
    os_.closerange(result_fd + 1, 1 << 20)
    for which, (soft, hard) in limits["rlimits"]:
        try:
            _setrlimit(which, (soft, hard))
        except (ValueError, OSError):  # without root a hard limit cannot be raised
            _setrlimit(which, (min(soft, resource.getrlimit(which)[1]),) * 2)
    os_.chdir(tmpdir)
    if os_.getpriority(os_.PRIO_PROCESS, 0) != limits["call_nice"]:  # back from the zygote's boost
        os_.setpriority(os_.PRIO_PROCESS, 0, limits["call_nice"])
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


def _failure(e: BaseException, guards) -> tuple:
    if isinstance(e, MemoryError):
        return "memory", "", "MemoryError"
    if isinstance(e, guards.BannedImport):
        return "banned", "", f"banned import at run time: {_describe(e)}"
    if isinstance(e, guards.BannedCall):
        return "banned", "", f"banned call at run time: {_describe(e)}"
    return "error", "", f"{_name(e)}: {_describe(e)}"


def _send(fd, status, value, error, capture, os_) -> None:
    try:
        value, error = str(value).encode("utf-8", "replace"), str(error).encode("utf-8", "replace")
        out = str(capture.getvalue()).encode("utf-8", "replace")
    except BaseException:  # noqa: BLE001 - e.g. MemoryError while encoding
        status, value, error, out = "error", b"", b"internal: could not encode the result", b""
    data = b"%s %d %d %d\n%s%s%s" % (status.encode(), len(value), len(error), len(out), value, error, out)
    while data:
        try:
            data = data[os_.write(fd, data) :]
        except BaseException:  # noqa: BLE001 - the program closed or broke the pipe
            return
