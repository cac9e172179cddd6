"""A sandbox worker: a clean, pre-imported zygote that forks one fresh child per call.

`sandbox.jail` builds the jail and execs `python -I -S -c <sandbox.jail.BOOT> <isolation>
<uid> <tmp> <statm fd> <kept fds>`: no site-packages, no project directory on sys.path or
on disk, no file of the project read here. BOOT reads the executor's first frame, `INIT`
(the settings, and this module, `sandbox.child`, `sandbox.guards`, `sandbox.world`,
`sandbox.meter` and `literal` as code objects the executor compiled), and runs this code. The worker executes the other three into
private namespaces (not modules), pre-imports a few light standard modules, installs the
guards on itself, rehearses the call path with the parent's trusted calls and prepares
what each call starts from (the program's empty module, its output capture, the armed
guards: `sandbox.child`), freezes its heap (gc.freeze) and answers "ready". From then on
its stdout and stderr are the capture. Then, for ever:

1. make the next call's world (`sandbox.world`: its own PID namespace and a fresh tmpfs
   on /tmp) and fork the next child BEFORE any request exists; the child reads the
   request itself (`sandbox.child.run_call`), so this process never holds any call's
   code, arguments or output: a call cannot find another call's data in its image;
2. wait for the child's start byte, then for its exit, up to the wall-clock backstop
   (`wall_s`), checking the call's cgroup every POLL_S (`sandbox.meter`): CPU time of the
   whole tree past the hard limit, or an OOM kill, ends the call at once. Kill what is
   left: the child is PID 1 of the call's namespace, so its end takes every process the
   call started (forks, daemons); as PID 1 of the worker's namespace, kill(-1) takes
   them at the deadline. As root the zygote runs ZYGOTE_BOOST nice levels above its calls,
   so a fork bomb of RLIMIT_NPROC spinning processes cannot delay it (each call starts a
   session and process group of its own: `sandbox.child`);
3. measure the call's CPU time (the cgroup's counter: every process of the call, reaped
   or not; else RUSAGE_CHILDREN) and decide the timeout by it: CPU time does not depend
   on how loaded the machine is, the wall clock does;
4. send the parent one frame: b"<wait status> <cpu s> <wall s> <verdict: cpu|wall|
   memory|output|->\\n" (fixed width) + the child's raw message, which the PARENT parses;
   then unmount the call's /tmp (if it left anything there). A message past `max_message`
   kills the call's tree the moment it is seen (verdict output): nothing of a flood is read
   on its behalf.

Nothing of a call stays in the image the next call is forked from (tests/sandbox/
test_sandbox_no_earlier_call.py; a call can walk its own stack and read its own memory): the
serve loop holds no per-call value (they live in `_call`'s frame, gone before the next fork);
the child's message is read into ONE fixed buffer, the reply's header written into it and the
frame sent from it, and the buffer is zeroed after (no bytes object ever holds a reply: the
old loop left 4 copies of a reply's value in freed memory, and its live locals held the last
raw reply); the CPU and OOM baselines are read after the fork, into the meter's own fixed
buffer (`sandbox.meter`, which parses the digits in place), so no child holds a total; and
`_scrub`, just before each fork, overwrites what the call's numbers left in freed objects with
constants: every freed float (the zygote forks with the float free list empty, so a call's path
frees its floats into that list, and the scrub takes them all back), the header's text (made
again from zeros: the same sizes, so the same blocks), and ints by allocating as many again
(which takes the blocks freed last). The only text a call's path makes is that header.

Protocol: requests arrive on fd 0 (4-byte big-endian length + marshal, from the trusted
parent); replies leave on a copy of fd 1, framed the same way (fd 1 itself is /dev/null so
that a stray print cannot corrupt them).
"""

import builtins
import gc
import os
import resource
import select
import struct
import sys
import time

OS = type(sys)("os_snapshot")
OS.__dict__.update(vars(os))  # captured before the guards replace any os function
PREIMPORT = (  # light and common in benchmark code; anything else loads from the read-only stdlib
    "math",
    "cmath",
    "itertools",
    "functools",
    "collections",
    "collections.abc",
    "heapq",
    "bisect",
    "operator",
    "string",
    "re",
    "copy",
    "array",
    "typing",
)
_monotonic, _getrusage, _select = time.monotonic, resource.getrusage, select.select
SIGKILL, SIGXCPU = 9, 24
ZYGOTE_BOOST = 10  # nice levels: ~9x the CPU weight of one call process
POLL_S = 0.05  # how often a running call's cgroup is checked (CPU of the tree, OOM kills)
# A reply's header, fixed width (the same length, so the same allocations, for every call):
# b"<wait status> <cpu s> <wall s> <verdict>\n"; the frame is 4 bytes of length, this, the message.
HEAD = b"%11d %17.6f %17.6f %-6s\n"
BODY = 4 + len(HEAD % (0, 0.0, 0.0, b"-"))  # where the child's message starts in the frame buffer
# CPython's float free list holds at most 100 (3.11, 3.12; past it a freed float goes back to the
# allocator's 32-byte blocks, as ints do, where the next allocation may not take it). The zygote
# forks with that list EMPTY (`_scrub` keeps 100 constants alive), so every float a call's path
# frees lands in the list (its path never holds 100 at once) and the next scrub takes them all.
SCRUB_FLOATS = 100
SCRUB_INTS = 256  # ints (and anything else of 32 bytes) freed last by a call's path
_pack_into = struct.pack_into


def _load(code, name: str):
    namespace = type(sys)(name)  # never registered in sys.modules
    namespace.__dict__["__builtins__"] = builtins
    exec(code, namespace.__dict__)  # noqa: S102 - our own harness, compiled by the executor
    return namespace


def _send(fd: int, data: bytes) -> None:
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[OS.write(fd, data) :]


class Zygote:
    def __init__(self, init: dict, harness: dict, iso: dict, uid: int, tmp: str, statm_fd: int, kept: dict):
        self.child, self.guards, self.literal = harness["child"], harness["guards"], harness["literal"]
        self.iso, self.uid, self.tmp = iso, uid, tmp
        self.pidns = iso.get("pidns") == "1"
        self.devnull = OS.open("/dev/null", OS.O_RDWR)
        self.limits = dict(init["limits"])
        self.wall_s = self.limits["wall_s"]
        self.max_message = 4 * self.limits["max_output_bytes"] + 65536
        fds = {k: int(v) for k, v in kept.items() if k != "cpu_format"}
        self.world = harness["world"].World(fds, tmp, uid, self.limits["max_file_mb"], init["seccomp"], init["seccomp_call"])
        self.meter = harness["meter"].Meter(fds, kept.get("cpu_format", "-"))
        self.limits["own_pidns"] = self.world.report["pidns_per_call"]
        for name in PREIMPORT:
            try:
                __import__(name)
            except ImportError:
                pass
        self.guards.install(init["banned_modules"], init["stubs"], init["direct"], init["open_write"], tmp)
        self.limits["hook"] = self.guards.audit_hook(tuple(init["banned_modules"]), self.limits["block_gc"])
        self.child.rehearse(init["rehearsal"], self.limits, self.guards, self.literal, self.devnull, OS)
        OS.close(self.devnull)  # a call opens its own (sandbox.child): no open file shared with it
        pages = int(OS.pread(statm_fd, 64, 0).split()[0]) if statm_fd >= 0 else 0
        if statm_fd >= 0:
            OS.close(statm_fd)
        self.limits["vm_bytes"] = pages * OS.sysconf("SC_PAGE_SIZE") + (16 << 20)  # + what the child maps
        self.main = sys.modules["__main__"]  # kept: from here on __main__ is the program's module
        # The zygote must wake at a call's deadline even when the call's processes (up to
        # RLIMIT_NPROC of them, spinning) and the rest of the machine hold every core: as
        # root it runs ZYGOTE_BOOST nice levels above the calls, which start back at the
        # jail's own nice (sandbox.child._shut_in).
        self.limits["call_nice"] = OS.getpriority(OS.PRIO_PROCESS, 0)
        if uid >= 0:
            try:
                OS.setpriority(OS.PRIO_PROCESS, 0, max(-20, self.limits["call_nice"] - ZYGOTE_BOOST))
            except OSError:
                pass
        self.module, self.capture = self.child.prepare(self.limits, self.guards)
        # a call's reply passes through this one buffer, zeroed after each call (`_scrub`)
        self.frame = bytearray(BODY + self.max_message + 1)
        self.view, self.zeros = memoryview(self.frame), memoryview(bytes(len(self.frame)))
        self.used, self.one, self.zero, self.big, self.fd_out = BODY, bytearray(1), 0.0, 1 << 29, -1
        self.floats = None
        self.world.lock()  # the seccomp filter: from here on, for this process and every call
        self.iso.update({k: str(int(v)) for k, v in self.world.report.items()} | {"tree_cpu": str(int(self.meter.tree))})
        gc.collect()
        gc.freeze()  # children skip these objects when they collect: fewer page copies

    def serve(self, fd_in: int, fd_out: int) -> None:
        """Steps 1-4 of the module doc, for ever. After each fork, every page this loop
        writes is copied (and reading an object writes its reference count), so the
        common path is lean. Everything of a call lives in `_call`'s frame and this
        process's fixed buffers, and is gone (returned, zeroed, overwritten: `_scrub`)
        before the next fork: the image a call is forked from is the same for every call."""
        report = " ".join(f"{k}={v}" for k, v in self.iso.items())
        _send(fd_out, f"ready pid={OS.getpid()} uid={self.uid} {report}".encode())
        self.fd_out = fd_out
        run_call, pipe, fork, close, enter, call = self.child.run_call, OS.pipe, OS.fork, OS.close, self.world.enter, self._call
        uid, limits, module, capture, seal = self.uid, self.limits, self.module, self.capture, self.world.seal
        guards, literal, tmp, scrub = self.guards, self.literal, self.tmp, self._scrub
        while True:
            enter()
            r, w = pipe()
            scrub()
            pid = fork()
            if pid == 0:
                close(r)
                seal()  # the call's own filter on top of the zygote's (sandbox.world)
                run_call(fd_in, w, tmp, uid, limits, module, capture, guards, literal, OS)
                OS._exit(70)  # not reached
            close(w)
            if not call(pid, r):  # the child found no request: the parent closed the pool
                return
            pid = r = w = 0  # the call's process number is freed here, before `scrub` overwrites it

    def _call(self, pid: int, r: int) -> bool:
        """One call, from the fork to the reply (steps 2-4); False when none came. The
        baselines are taken here, after the fork: the child never holds a total."""
        cpu_before, oom_before = self.meter.cpu(), self.meter.oom_kills()
        self.world.forked()
        if OS.readv(r, (self.one,)) != 1 or self.one[0] != 83:  # b"S": it read a request
            OS.close(r)
            self._finish(pid)
            return False
        start, pidfd = _monotonic(), OS.pidfd_open(pid)
        try:
            n, status, verdict = self._collect(pid, pidfd, r, start + self.wall_s, cpu_before, oom_before)
        finally:
            OS.close(pidfd)
            OS.close(r)
            self._finish(pid)
        wall = _monotonic() - start
        cpu, ooms = self.meter.cpu() - cpu_before, self.meter.oom_kills() - oom_before
        self._reply(n, _verdict(verdict, status, cpu, ooms, self.limits["timeout_s"]), status, cpu, wall)
        del cpu_before, oom_before, start, n, status, verdict, wall, cpu, ooms, pid, pidfd
        self._clean()
        return True

    def _reply(self, n: int, verdict: bytes, status: int, cpu: float, wall: float) -> None:
        """Header and message go out of the fixed frame buffer (zeroed by `_scrub`)."""
        head = HEAD % (status, cpu, wall, verdict)
        size = len(head) + n
        view = self.view
        view[4 : 4 + len(head)] = head
        _pack_into(">I", self.frame, 0, size)
        del head
        done = 0
        while done < size + 4:
            done += OS.write(self.fd_out, view[done : size + 4])

    def _scrub(self) -> None:
        """Just before each fork: zero what the fixed buffers held, and overwrite the freed
        objects the call's numbers and header left with constants made the same way (floats:
        every entry of the interpreter's free list, which is then left empty; the rest:
        allocation reuses the blocks freed last)."""
        used, self.used = self.used, BODY
        self.view[:used] = self.zeros[:used]
        self.meter.scrub()
        head = HEAD % (0, 0.0, 0.0, b"-")
        zero, big = self.zero, self.big
        self.floats = None  # its constants go back first (to the free list, and past 100 to blocks)...
        self.floats = [zero * 1.0 for _ in range(SCRUB_FLOATS)]  # ...then the free list is emptied
        ints = [big + 0 for _ in range(SCRUB_INTS)]
        del head, ints, used

    def _clean(self) -> None:
        """After the reply: the call's /tmp goes (unmounted; without root, emptied)."""
        if not self.world.leave():
            try:
                left = OS.listdir(self.tmp)
            except OSError:
                left = ()
            self._clear_tmp(left)

    def _collect(self, pid: int, pidfd: int, r: int, deadline: float, cpu_before: float, oom_before: int):
        """(bytes of the child's message now in the frame buffer, its wait status, why it was
        killed: b"wall", b"cpu", b"memory", b"output" or None). The pipe may outlive the child
        (a process it started holds it): the child's exit (its pidfd) ends the call. A message
        past `max_message` kills the call's tree at once and is not read further (b"output"):
        draining a flood for the call cost this process, outside the call's CPU accounting and
        at its raised priority, 1.1-3.0 s of CPU per call limited to 0.5 s."""
        n, verdict, fds = 0, None, [pidfd, r]
        next_check = _monotonic() + POLL_S
        while True:
            now = _monotonic()
            if verdict is None and (now >= deadline or now >= next_check):
                verdict = b"wall" if now >= deadline else self._over(cpu_before, oom_before)
                next_check = now + POLL_S
                if verdict is not None:
                    self._kill_all(pid)
            wait = None if verdict is not None else max(0.0, min(deadline, next_check) - now)
            ready = _select(fds, (), (), wait)[0]
            if r in ready:
                n, more = self._take(r, n, False)
                if not more or n > self.max_message:
                    fds = [pidfd]
                if n > self.max_message and verdict is None:  # no honest child writes this much
                    verdict = b"output"
                    self._kill_all(pid)
            if pidfd in ready:
                status = OS.waitpid(pid, 0)[1]
                if len(fds) == 2:
                    OS.set_blocking(r, False)
                    n = self._take(r, n, True)[0]
                return (n if n <= self.max_message else 0), status, verdict

    def _take(self, r: int, n: int, drain: bool):
        """Read from the pipe into the frame buffer after the `n` bytes there: once (select
        said it is ready), or until it is empty (`drain`: the child is gone). (The new count,
        max_message + 1 meaning over the limit; whether the pipe may hold more.)"""
        end, more = BODY + self.max_message + 1, True
        while BODY + n < end:
            try:
                got = OS.readv(r, (self.view[BODY + n : end],))
            except OSError:  # drained (the pipe is non-blocking by then)
                break
            n += got
            if not got:
                more = False
                break
            if not drain:
                break
        self.used = max(self.used, BODY + n)
        return n, more

    def _over(self, cpu_before: float, oom_before: int):
        """b"memory" / b"cpu" when the running call's tree went over a limit, else None."""
        if self.meter.oom_kills() > oom_before:
            return b"memory"
        if self.meter.tree and self.meter.cpu() - cpu_before >= self.limits["cpu_rlimit"]:
            return b"cpu"
        return None

    def _kill_all(self, pid: int) -> None:
        """SIGKILL the call and every process it started, at once: killing the child alone
        left up to RLIMIT_NPROC spinning forks between it and the CPU, and under load the
        killed child then took ~9 s to exit."""
        try:
            if self.pidns:
                OS.kill(-1, SIGKILL)  # PID 1 of the namespace: all others, never itself
            else:
                OS.killpg(pid, SIGKILL)
        except OSError:
            pass
        try:
            OS.kill(pid, SIGKILL)  # not in its own group yet (killed before its setsid)
        except OSError:
            pass

    def _finish(self, pid: int) -> None:
        """Kill and reap everything the call left (see module doc)."""
        if self.pidns:
            try:  # every process of the namespace descends from this one: any left?
                OS.waitpid(-1, OS.WNOHANG)
            except ChildProcessError:
                return  # none (the common case)
            try:
                OS.kill(-1, SIGKILL)  # PID 1 of the namespace: all others, never itself
            except OSError:
                pass
            while True:
                try:
                    OS.waitpid(-1, 0)
                except ChildProcessError:
                    return
        try:
            OS.killpg(pid, SIGKILL)  # fallback: the child's process group (setsid daemons escape)
        except OSError:
            pass
        try:
            OS.waitpid(pid, 0)
        except ChildProcessError:
            pass

    def _clear_tmp(self, names) -> None:
        for name in names:
            _remove(self.tmp + "/" + name)


def _verdict(killed, status: int, cpu: float, ooms: int, timeout_s: float) -> bytes:
    """Which limit ended the call: the wall clock, CPU time (of the whole tree, or RLIMIT_CPU's
    SIGXCPU), memory (an OOM kill in the call's cgroup), a reply past its limit, or none (b"-")."""
    if killed in (b"wall", b"output"):
        return killed
    if killed == b"cpu" or cpu >= timeout_s or status & 0x7F == SIGXCPU:
        return b"cpu"
    if killed == b"memory" or ooms > 0:
        return b"memory"
    return b"-"


def _remove(path: str) -> None:
    """rm -rf without following links."""
    try:
        if OS.path.isdir(path) and not OS.path.islink(path):
            for name in OS.listdir(path):
                _remove(path + "/" + name)
            OS.rmdir(path)
        else:
            OS.unlink(path)
    except (OSError, RecursionError):
        pass


def main() -> None:
    report, uid, tmp, statm_fd, kept = sys.argv[1:6]
    sys.argv[:] = [""]
    iso = dict(word.split("=", 1) for word in report.split())
    fd_out = OS.dup(1)
    OS.dup2(OS.open("/dev/null", OS.O_RDWR), 1)
    init = globals().pop("INIT")  # read by sandbox.jail.BOOT
    harness = {name: _load(init.pop(name), name) for name in ("literal", "guards", "child", "world", "meter")}
    stderr = sys.stderr
    try:
        kept_fds = dict(word.split("=", 1) for word in kept.split())
        Zygote(init, harness, iso, int(uid), tmp, int(statm_fd), kept_fds).serve(0, fd_out)
    except BaseException:
        sys.stderr = stderr  # the traceback goes to the executor's stderr, not to a call's capture
        raise


main()
