"""A fresh world for every call: what the zygote does around each fork, as root.

This source is executed by the worker (`sandbox.worker`) into a namespace of its own
(stdlib only, no project imports). Before each fork (`World.enter`):

1. PID namespace: back into the zygote's own (setns on a descriptor `sandbox.jail`
   opened), then a new one for the next child: the call's first process is PID 1 of a
   namespace of its own, its forks count from 2, and when it ends the kernel kills every
   process the call started. No call sees how many processes an earlier call made;
2. /tmp: a size-limited tmpfs (noatime) owned by the call's user, mounted over /tmp.
   After the call (`leave`) it is unmounted, so nothing survives however deep or odd the
   tree, unless the call left no trace in it at all: the root directory's mtime, ctime,
   mode and owner as mounted, one inode and no block in use (anything a call creates,
   deletes, renames, chmods or tags changes one of these). Then the same empty tmpfs
   serves the next call and the mount is saved (most calls never touch /tmp);
3. the child starts as the OOM killer's first choice (oom_score_adj 1000, raised on the
   zygote just for the fork: raising needs no privilege), the zygote goes back to its own
   (-1000 where `sandbox.jail` could set it): its cgroup is shared with its calls.
SysV IPC and POSIX message queues are denied by the seccomp filter, which `lock` loads
once, in the zygote before its first fork (`sandbox.seccomp_filter`): every call inherits
it (no keyrings, IPC objects, user namespaces, ptrace, bpf, ...; a call's lack of
capabilities refuses it the rest). Each step that cannot be taken (no root) is skipped
and the isolation report says so.
"""

import ctypes
import os

CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOATIME, MNT_DETACH = 2, 4, 1024, 2
_pread, _pwrite, _stat, _statvfs = os.pread, os.pwrite, os.stat, os.statvfs  # before the guards
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class World:
    def __init__(self, fds: dict, tmp: str, uid: int, max_file_mb: int, bpf):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        self.pidns, self.oom_adj = fds.get("pidns", -1), fds.get("oom_adj", -1)
        self.home_adj = _pread(self.oom_adj, 16, 0).strip() if self.oom_adj >= 0 else b"0"
        self.mounted, self.as_mounted = False, None
        self.tmp = os.fsencode(tmp)
        self.options = f"size={max_file_mb}m,nr_inodes=4096,mode=0700,uid={uid},gid={uid}".encode()
        self.filter = None
        if bpf:
            self.buffer = ctypes.create_string_buffer(bytes(bpf), len(bpf))  # kept alive with the program
            self.filter = _SockFprog(len(bpf) // 8, ctypes.cast(self.buffer, ctypes.c_void_p))
        self.report = {"pidns_per_call": False, "tmpfs_per_call": False, "seccomp": self.filter is not None}
        if uid >= 0:
            self.report.update(self.enter(probe=True))
            self.leave()

    def enter(self, probe: bool = False) -> dict:
        """Steps 1-3 of the module doc, before the fork; what worked (on the first call)."""
        libc, done = self.libc, {}
        if self.pidns >= 0 and (probe or self.report["pidns_per_call"]):
            back = libc.setns(self.pidns, CLONE_NEWPID) == 0
            done["pidns_per_call"] = back and libc.unshare(CLONE_NEWPID) == 0
        if (probe or self.report["tmpfs_per_call"]) and not self.mounted:
            flags = MS_NOSUID | MS_NODEV | MS_NOATIME
            self.mounted = done["tmpfs_per_call"] = libc.mount(b"tmpfs", self.tmp, b"tmpfs", flags, self.options) == 0
            self.as_mounted = self._trace() if self.mounted else None
        if self.oom_adj >= 0:
            _pwrite(self.oom_adj, b"1000", 0)
        return done

    def forked(self) -> None:
        """In the zygote, after the fork: back to its own oom_score_adj."""
        if self.oom_adj >= 0:
            _pwrite(self.oom_adj, self.home_adj, 0)

    def leave(self) -> bool:
        """After the call (all its processes gone): unmount its /tmp unless it is untouched
        (step 2). False: no tmpfs per call here (the caller empties /tmp itself)."""
        if not self.mounted:
            return False
        if self._trace() != self.as_mounted:
            self.mounted = self.libc.umount2(self.tmp, MNT_DETACH) != 0
        return True

    def _trace(self) -> tuple:
        """What any change to the tmpfs leaves: the root's times, mode, owner, links, and
        the inodes and blocks in use."""
        st, fs = _stat(self.tmp), _statvfs(self.tmp)
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_uid, st.st_gid, st.st_nlink, st.st_ino,
                fs.f_files - fs.f_ffree, fs.f_blocks - fs.f_bfree)  # fmt: skip

    def lock(self) -> None:
        """In the zygote, before its first fork: load the seccomp filter (irreversible)."""
        if self.filter is not None and self.libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self.filter), 0, 0):
            raise OSError(ctypes.get_errno(), "seccomp filter refused")
