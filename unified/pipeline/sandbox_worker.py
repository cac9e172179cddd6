"""A warm worker of the executor pool: started once, forks one fresh child per call.

The parent (`executor.Executor`) starts this module in a new interpreter with a scrubbed
environment and talks to it over stdin/stdout with length-prefixed JSON (no pickles).
At start-up the worker, when root, moves into new network (no interfaces, not even
loopback), IPC, UTS and mount namespaces, remounts every mount read-only in its private
mount table, sets no_new_privs, pre-imports common modules, and installs the Python
guards on itself (`sandbox_child.Plan`). Then, per call:

1. compile the program (cached: one program runs on many inputs) and read the args;
2. mount a fresh, size-limited tmpfs owned by the sandbox user: the only writable place;
3. setns back to its own PID namespace and unshare a new one, then fork: the child is
   PID 1 of a namespace of its own, so when it exits or is killed the kernel kills every
   process the call started (forks, setsid daemons, double forks), and the child cannot
   see or signal anything outside (os.kill(os.getppid()) is kill(0); os.kill(1) is itself);
4. the child (`sandbox_child.run_call`) drops to uid SANDBOX_UID_BASE + worker pid (no
   capabilities), sets rlimits, runs the program and writes one framed message;
5. the worker waits on the pipe and a pidfd until the wall-clock deadline, SIGKILLs the
   child on timeout, gets the exit status and CPU time from wait4, unmounts the tmpfs.

Without root (or when a namespace call fails) each call still runs in its own forked
process with rlimits, a private temp directory and the Python guards, and its process
group is killed afterwards; what that fallback misses (setsid daemons, the network, the
read-only file system, the separate user) is visible in the `isolation` report.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import resource
import select
import signal
import struct
import sys
import tempfile
import time

from unified.pipeline import sandbox_child
from unified.pipeline.sandbox_child import OS, Limits, Plan
from unified.pipeline.sandbox_policy import Policy
from unified.pipeline.values import LiteralError, from_literal

SANDBOX_UID_BASE = 200_000  # child uid = base + worker pid: unique while the worker lives
PREIMPORT = (
    # The sandbox user cannot read a standard library that lives under /root (pyenv):
    # only these (and builtin modules) can be imported there. Banned ones are dropped
    # again by the guards; they are loaded so that a permissive policy can use them.
    "math", "cmath", "re", "string", "collections", "collections.abc", "itertools", "functools",
    "operator", "heapq", "bisect", "array", "copy", "json", "fractions", "decimal", "statistics",
    "numbers", "typing", "dataclasses", "enum", "textwrap", "unicodedata", "struct", "difflib",
    "pprint", "reprlib", "keyword", "abc", "types", "contextlib", "weakref", "queue", "ast",
    "base64", "binascii", "zlib", "fnmatch", "glob", "pathlib", "colorsys", "traceback",
    "random", "time", "datetime", "calendar", "hashlib", "io", "string", "locale",
    "encodings.ascii", "encodings.latin_1", "encodings.utf_16", "encodings.utf_32",
    "encodings.utf_8_sig", "encodings.cp1252", "encodings.unicode_escape",
)  # fmt: skip

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH, PR_SET_NO_NEW_PRIVS = 2, 38
# Per-mount flags a bind remount must repeat, or the kernel refuses or clears them.
_KEEP = {"nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 1024, "nodiratime": 2048,
         "relatime": 1 << 21, "strictatime": 1 << 24}  # fmt: skip

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_select, _monotonic, _loads, _dumps = select.select, time.monotonic, json.loads, json.dumps
_getrusage = resource.getrusage  # not os.wait4: it imports `resource` at each call, which the guards block


def _mount(source, target, fstype, flags, data=None) -> bool:
    enc = [None if x is None else OS.fsencode(x) for x in (source, target, fstype, data)]
    return _libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) == 0


class Worker:
    def __init__(self, init: dict):
        self.root = init["root"]
        self.limits = Limits(**init["limits"])
        self.isolation = self._isolate()
        self.uid = SANDBOX_UID_BASE + OS.getpid() if OS.geteuid() == 0 else None
        self.isolation["uid"] = self.uid
        self.devnull = OS.open(OS.devnull, OS.O_RDWR)
        self.max_message = 4 * self.limits.max_output_bytes + 65536
        self.compiled: dict[str, object] = {}
        OS.environ.clear()
        OS.environ.update(sandbox_child.sandbox_environment(self.root))
        for name in PREIMPORT:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        Plan.build(Policy.from_lists(tuple(init["banned_modules"]), tuple(init["banned_calls"]))).install()
        gc.freeze()  # children skip these objects when they collect: fewer page copies

    # ------------------------------------------------------------------ start-up isolation

    def _isolate(self) -> dict:
        iso = {"root_user": OS.geteuid() == 0, "netns": False, "mountns": False, "readonly": False,
               "pidns": False, "no_new_privs": False, "readonly_failed": []}  # fmt: skip
        if iso["root_user"]:
            iso["netns"] = _libc.unshare(CLONE_NEWNET) == 0
            _libc.unshare(CLONE_NEWIPC | CLONE_NEWUTS)  # SysV IPC and hostname: nice to have
            if _libc.unshare(CLONE_NEWNS) == 0 and _mount(None, "/", None, MS_REC | MS_PRIVATE):
                iso["mountns"] = True
                iso["readonly_failed"] = self._remount_readonly()
                iso["readonly"] = "/" not in iso["readonly_failed"]
            self.own_pidns = OS.open("/proc/self/ns/pid", OS.O_RDONLY)
            iso["pidns"] = self._new_pidns()
        iso["no_new_privs"] = _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
        return iso

    def _remount_readonly(self) -> list[str]:
        failed = []
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
        for line in lines:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # "\040" -> " "
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            for opt in fields[5].split(","):
                flags |= _KEEP.get(opt, 0)
            if not _mount(None, point, None, flags):
                failed.append(point)
        return failed

    def _new_pidns(self) -> bool:
        """Make the next fork PID 1 of a fresh namespace (leaving the last one first)."""
        return _libc.setns(self.own_pidns, CLONE_NEWPID) == 0 and _libc.unshare(CLONE_NEWPID) == 0

    # ------------------------------------------------------------------ one call

    def run(self, request: dict) -> dict:
        try:  # compiling only parses (the parent parsed it already); it runs nothing
            code = self._compile(request["code"])
            args = tuple(from_literal(request["args"]))
        except (SyntaxError, ValueError, TypeError, LiteralError, RecursionError, MemoryError) as e:
            return _reply("error", error=f"{type(e).__name__}: {e}")
        tmp = self._make_tmp()
        try:
            return self._fork_and_wait(code, request["entry"], args, tmp)
        finally:
            self._drop_tmp(tmp)

    def _compile(self, source: str):
        if source not in self.compiled:
            if len(self.compiled) >= 256:
                self.compiled.clear()
            self.compiled[source] = compile(source, sandbox_child.USER_FILE, "exec")
        return self.compiled[source]

    def _make_tmp(self) -> str:
        if self.isolation["mountns"]:
            opts = f"size={self.limits.max_file_mb}m,nr_inodes=4096,mode=0700,uid={self.uid},gid={self.uid}"
            if _mount("tmpfs", self.root, "tmpfs", MS_NOSUID | MS_NODEV, opts):
                return self.root
        path = tempfile.mkdtemp(dir=self.root)
        if self.uid is not None:
            OS.chown(path, self.uid, self.uid)
        return path

    def _drop_tmp(self, path: str) -> None:
        if path == self.root:
            _libc.umount2(OS.fsencode(path), MNT_DETACH)  # frees everything the call wrote
        else:
            _remove_tree(path)

    def _fork_and_wait(self, code, entry: str, args: tuple, tmp: str) -> dict:
        in_pidns = self.isolation["pidns"] and self._new_pidns()
        vm_bytes = _vm_bytes()
        r, w = OS.pipe()
        start = _monotonic()
        pid = OS.fork()
        if pid == 0:
            OS.close(r)
            sandbox_child.run_call(code, entry, args, w, self.devnull, tmp, self.uid, self.limits, vm_bytes)
            OS._exit(70)  # not reached
        OS.close(w)
        try:
            buf, status, cpu, killed = self._collect(pid, r, start + self.limits.timeout_s)
        finally:
            OS.close(r)
            if not in_pidns:  # fallback: the child's process group (setsid daemons escape it)
                _killpg(pid)
        return self._verdict(buf, status, cpu, killed, _monotonic() - start)

    def _collect(self, pid: int, r: int, deadline: float):
        """Read the framed message and reap the child; SIGKILL it at the deadline."""
        buf, pipe_open, killed = bytearray(), True, False
        pidfd = OS.pidfd_open(pid)
        try:
            while True:
                remaining = deadline - _monotonic()
                if remaining <= 0 and not killed:
                    OS.kill(pid, signal.SIGKILL)  # PID 1 of its namespace: takes all the rest along
                    killed = True
                reading = pipe_open and len(buf) <= self.max_message
                ready, _, _ = _select([pidfd] + [r] * reading, [], [], None if killed else max(0.0, remaining))
                if r in ready:
                    chunk = OS.read(r, 1 << 16)
                    buf += chunk
                    pipe_open = bool(chunk)
                if pidfd in ready:
                    before = _cpu_of_children()
                    _, status = OS.waitpid(pid, 0)
                    if pipe_open and len(buf) <= self.max_message:
                        buf += _drain(r)
                    return bytes(buf), status, _cpu_of_children() - before, killed
        finally:
            OS.close(pidfd)

    def _verdict(self, buf: bytes, status: int, cpu: float, killed: bool, wall: float) -> dict:
        message = _parse_message(buf, self.max_message)
        signalled = OS.WIFSIGNALED(status)
        sig = OS.WTERMSIG(status) if signalled else 0
        if killed:
            return _reply("timeout", error="wall-clock limit exceeded", duration_s=wall)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= self.limits.cpu_s):
            return _reply("timeout", error="CPU-time limit exceeded", duration_s=wall)
        if message is not None:
            return message | {"duration_s": message["duration_s"] or wall}
        if signalled:
            return _reply("crashed", error=f"killed by {signal.Signals(sig).name}", duration_s=wall)
        code = OS.WEXITSTATUS(status)
        return _reply("crashed", error=f"exited with code {code} without a result", duration_s=wall)

    # ------------------------------------------------------------------ protocol loop

    def serve(self, fd_in: int, fd_out: int) -> None:
        _send(fd_out, {"ready": True, "pid": OS.getpid(), "isolation": self.isolation})
        while (request := _recv(fd_in)) is not None:
            try:
                reply = self.run(request)
            except Exception as e:  # noqa: BLE001 - the worker must answer, whatever happened
                reply = _reply("crashed", error=f"worker error: {type(e).__name__}: {e}")
            _send(fd_out, reply)


def _reply(status: str, value: str | None = None, error: str = "", stdout: str = "", duration_s: float = 0.0):
    return {"status": status, "value": value, "error": error, "stdout": stdout, "duration_s": duration_s}


def _parse_message(buf: bytes, limit: int) -> dict | None:
    """The child's message, checked field by field (the child is hostile), or None."""
    header, sep, body = buf.partition(b"\n")
    if not sep or not header.isdigit() or len(header) > 12 or int(header) > limit or len(body) < int(header):
        return None
    try:
        m = _loads(body[: int(header)].decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(m, dict) or m.get("status") not in ("ok", "error", "banned", "memory"):
        return None
    value, error, stdout, duration = m.get("value"), m.get("error", ""), m.get("stdout", ""), m.get("duration_s", 0.0)
    if m["status"] == "ok" and not isinstance(value, str):
        return None
    if not isinstance(error, str) or not isinstance(stdout, str) or not isinstance(duration, (int, float)):
        return None
    return _reply(m["status"], value if m["status"] == "ok" else None, error[:4000], stdout, float(duration))


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * OS.sysconf("SC_PAGE_SIZE")


def _cpu_of_children() -> float:
    usage = _getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _drain(fd: int) -> bytes:
    OS.set_blocking(fd, False)
    try:
        return OS.read(fd, 1 << 20)
    except OSError:
        return b""


def _killpg(pid: int) -> None:
    try:
        OS.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _remove_tree(path: str) -> None:
    """rm -rf without following links (shutil.rmtree uses the os functions the guards replaced)."""
    try:
        with OS.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    _remove_tree(entry.path)
                else:
                    OS.unlink(entry.path)
        OS.rmdir(path)
    except (OSError, RecursionError):
        pass


def _send(fd: int, obj: dict) -> None:
    data = _dumps(obj).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[OS.write(fd, data) :]


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = OS.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv(fd: int) -> dict | None:
    header = _read_exact(fd, 4)
    body = header and _read_exact(fd, struct.unpack(">I", header)[0])
    return None if body is None else _loads(body)


def main() -> None:
    # The protocol moves off fds 0/1 so that nothing printed by accident can corrupt it.
    fd_in, fd_out = OS.dup(0), OS.dup(1)
    devnull = OS.open(OS.devnull, OS.O_RDWR)
    OS.dup2(devnull, 0)
    OS.dup2(2, 1)
    init = _recv(fd_in)
    if init is not None:
        Worker(init).serve(fd_in, fd_out)


if __name__ == "__main__":
    sys.exit(main())
