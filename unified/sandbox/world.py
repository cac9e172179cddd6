"""A fresh world for every call: what the zygote does around each fork, as root.

This source is executed by the worker (`sandbox.worker`) into a namespace of its own
(stdlib only, no project imports). Before each fork (`World.enter`):

1. PID namespace: back into the zygote's own (setns on a descriptor `sandbox.jail`
   opened), then a new one for the next child: the call's first process is PID 1 of a
   namespace of its own, its forks count from 2, and when it ends the kernel kills every
   process the call started. No call sees how many processes an earlier call made;
2. /tmp: a new size-limited tmpfs owned by the call's user, mounted over /tmp, and
   unmounted after the call: nothing survives, however deep or odd the tree (a recursive
   delete gave up on deep ones), not even the tmpfs's inode numbering. An unmount waits
   for an RCU grace period (~50-90 us asleep), so `leave` only moves the finished call's
   tmpfs to /.spent/tmp (below a root-only directory: no call can reach it; a move waits for nothing) and `forked` unmounts it
   while the next call runs;
3. the child starts as the OOM killer's first choice (oom_score_adj 1000, raised on the
   zygote just for the fork: raising needs no privilege), the zygote goes back to its own
   (-1000 where `sandbox.jail` could set it): its cgroup is shared with its calls.
SysV IPC and POSIX message queues are not on the seccomp allowlist, which `lock` loads
once, in the zygote before its first fork (`sandbox.seccomp_filter`, `sandbox.allowlist`):
every call inherits it (every system call not listed answers EPERM; the zygote's own mount,
umount2, setns and unshare are listed, and a call's lack of capabilities refuses it those).
Just after each fork the child loads the call's own filter on top (`seal`: pipes, sockets and
pidfds, which the zygote needs and a call must not make). Each step that cannot be taken (no root) is skipped
and the isolation report says so.
"""

import ctypes
import os

CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_MOVE, MNT_DETACH = 2, 4, 8192, 2
SPENT = b"/.spent/tmp"  # made by sandbox.jail, below a directory only root may enter
_pread, _pwrite, _exit = os.pread, os.pwrite, os._exit  # before the guards
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class World:
    def __init__(self, fds: dict, tmp: str, uid: int, max_file_mb: int, bpf, call_bpf=None):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        self.pidns, self.oom_adj = fds.get("pidns", -1), fds.get("oom_adj", -1)
        self.home_adj = _pread(self.oom_adj, 16, 0).strip() if self.oom_adj >= 0 else b"0"
        self.tmp = os.fsencode(tmp)
        self.options = f"size={max_file_mb}m,nr_inodes=4096,mode=0700,uid={uid},gid={uid}".encode()
        self.filter = _program(bpf)
        self.call_filter = _program(call_bpf)
        self.new_pidns = self.new_tmpfs = self.mounted = self.spent = False
        if uid >= 0:  # root: learn which steps this kernel allows
            libc = self.libc
            self.new_pidns = self.pidns >= 0 and libc.setns(self.pidns, CLONE_NEWPID) == 0 and libc.unshare(CLONE_NEWPID) == 0
            self.new_tmpfs = self._mount() and libc.umount2(self.tmp, MNT_DETACH) == 0
        self.report = {"pidns_per_call": self.new_pidns, "tmpfs_per_call": self.new_tmpfs, "seccomp": False}

    def enter(self) -> None:
        """Steps 1-3 of the module doc, before the fork. Lean: every page the zygote writes
        between two forks costs a page fault."""
        if self.new_pidns:
            self.libc.setns(self.pidns, CLONE_NEWPID)
            self.libc.unshare(CLONE_NEWPID)
        if self.new_tmpfs:
            self.mounted = self._mount()  # failing, the call gets the jail's own /tmp: emptied, see leave
        if self.oom_adj >= 0:
            _pwrite(self.oom_adj, b"1000", 0)

    def forked(self) -> None:
        """In the zygote, after the fork: back to its own oom_score_adj; unmount the last
        call's tmpfs while this one runs."""
        if self.oom_adj >= 0:
            _pwrite(self.oom_adj, self.home_adj, 0)
        if self.spent:
            self.spent = self.libc.umount2(SPENT, MNT_DETACH) != 0

    def leave(self) -> bool:
        """After the call (all its processes gone): its /tmp out of the way (moved to
        /.spent/tmp, or unmounted at once if the move fails). False: no tmpfs of its own this
        time (the caller empties /tmp itself)."""
        mounted, self.mounted = self.mounted, False
        if not mounted:
            return False
        if self.spent:  # the last one is still there (its unmount failed): this one goes at once
            return self.libc.umount2(self.tmp, MNT_DETACH) == 0
        self.spent = self.libc.mount(self.tmp, SPENT, None, MS_MOVE, None) == 0
        return self.spent or self.libc.umount2(self.tmp, MNT_DETACH) == 0

    def _mount(self) -> bool:
        return self.libc.mount(b"tmpfs", self.tmp, b"tmpfs", MS_NOSUID | MS_NODEV, self.options) == 0

    def lock(self) -> None:
        """In the zygote, before its first fork: load the seccomp filter (irreversible); the
        report says whether the kernel took it."""
        if self.filter is not None:
            self.report["seccomp"] = self.libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self.filter), 0, 0) == 0

    def seal(self) -> None:
        """In a call's child, just after the fork: the call's own filter on top of the zygote's
        (`seccomp_filter.call_bpf`): what the zygote needs between calls and a call must not have
        (pipes, sockets, pidfds: the objects whose inode numbers come from machine-wide counters
        that a call could move for the next call to read). A few instructions per system call."""
        loaded = self.call_filter is None or not self.report["seccomp"]  # no filter here at all: nothing to add
        if not loaded and self.libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self.call_filter), 0, 0) != 0:
            _exit(71)  # never run a call without it


_KEEP = []  # the filters' instruction buffers, alive as long as the process


def _program(bpf):
    """A struct sock_fprog over the BPF bytes, or None."""
    if not bpf:
        return None
    buffer = ctypes.create_string_buffer(bytes(bpf), len(bpf))
    _KEEP.append(buffer)
    return _SockFprog(len(bpf) // 8, ctypes.cast(buffer, ctypes.c_void_p))
