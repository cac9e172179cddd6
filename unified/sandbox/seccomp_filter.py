"""The system calls a sandboxed call may not make: a seccomp filter built by libseccomp.

Built here, in the parent, with libseccomp's ctypes binding (`pyseccomp`, the same API as
libseccomp's own Python binding), exported as BPF bytes and loaded ONCE by each worker's
zygote before its first fork (`sandbox.world`): every call inherits it for free (loading
a filter per call cost more than all the rest of a call's isolation). So it must let the
zygote work as root (unshare of PID and IPC namespaces, setns, mount/umount2 of /tmp);
those need capabilities, which a call never has (it runs under an unprivileged uid), so
the kernel refuses them to the call anyway. Denied with EPERM (no test program needs them):

- user namespaces, the one way to new namespaces and mounts without capabilities:
  unshare and clone with CLONE_NEWUSER; clone3 answers ENOSYS (its flags sit in memory a
  filter cannot read; glibc then falls back to clone);
- the kernel keyrings, which no namespace separates: add_key, request_key, keyctl;
- SysV IPC (shm*, sem*, msg*) and POSIX message queues (mq_*): no object can be made, so
  none outlives its call. Cheaper than an IPC namespace per call, which measured +280 us
  of CPU per call on top of a ~800 us fork (a PID namespace: +12 us); see docs/sandbox.md;
- the new mount API, pivot_root and chroot;
- other processes and the kernel's wider surface: ptrace, process_vm_readv/writev,
  pidfd_getfd, kcmp, bpf, perf_event_open, userfaultfd, io_uring_*, modules, kexec, reboot,
  swapon/off, acct, quotactl, syslog, personality, file handles;
- what reads or writes shared state beside the files themselves (the runtime is the pool's
  own copy, `sandbox.runtime`; these are the second wall): page-cache residency and its
  hints (fadvise64, readahead, mincore, cachestat, preadv2/pwritev2 with RWF_NOWAIT: one
  call evicts or fills a page, a later one asks "cached?" without a clock), file locks
  (flock, and fcntl's F_GETLK/F_SETLK/F_SETLKW and their OFD forms: a lock held on a
  shared runtime file is a bit other calls can test) and file-system watches
  (inotify_init*, fanotify_init: they see other processes open the runtime);
- sockets of any family but AF_UNIX: the network namespace has no interface, but netlink
  reply buffers are not charged to the call's memory cgroup (reported: ~320 MiB held under a 64 MiB
  limit) and AF_VSOCK reaches the VM's host;
- setsid when `deny_setsid` (a PID namespace per call: the harness needs no session of
  its own, and a new session is a new scheduler autogroup, out of reach of the zygote's
  priority).
Other architectures' calls (x32, i386 through int 0x80) kill the process.

Without libseccomp (the shared library or its binding) `bpf()` returns None and the
executor says so once at start.
"""

from __future__ import annotations

import errno
import tempfile

DENIED = (
    "add_key", "request_key", "keyctl", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_getfd", "kcmp", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "personality", "lookup_dcookie",
    "open_by_handle_at", "name_to_handle_at", "shmget", "shmat", "shmdt", "shmctl", "semget", "semop",
    "semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
    "mq_timedreceive", "mq_notify", "mq_getsetattr",
)  # fmt: skip
CLONE_NEWUSER = 0x10000000
SHARED_STATE = ("fadvise64", "readahead", "mincore", "flock", "inotify_init", "inotify_init1", "fanotify_init")
CACHESTAT = 451  # Linux 6.5, the same number on every architecture; older libseccomp may not know its name
AF_UNIX, RWF_NOWAIT = 1, 0x8
FCNTL_LOCKS = (5, 6, 7, 36, 37, 38)  # F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW


def bpf(deny_setsid: bool = False) -> bytes | None:
    """The filter as BPF instructions (struct sock_filter[]), or None without libseccomp."""
    try:
        import pyseccomp as seccomp
    except Exception:  # noqa: BLE001 - ImportError, or the binding failing to find libseccomp.so
        return None
    denied = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    try:  # a binary tree over the syscall number instead of a linear chain: every call of every program pays it
        flt.set_attr(seccomp.Attr.CTL_OPTIMIZE, 2)
    except (OSError, RuntimeError, ValueError, AttributeError):  # libseccomp < 2.5
        pass
    for name in DENIED + SHARED_STATE + (("setsid",) if deny_setsid else ()):
        _rule(flt, denied, name)
    if not _rule(flt, denied, "cachestat"):
        _rule(flt, denied, CACHESTAT)
    _rule(flt, denied, "socket", seccomp.Arg(0, seccomp.NE, AF_UNIX))
    for name in ("preadv2", "pwritev2"):  # flags: the sixth argument
        _rule(flt, denied, name, seccomp.Arg(5, seccomp.MASKED_EQ, RWF_NOWAIT, RWF_NOWAIT))
    for cmd in FCNTL_LOCKS:
        _rule(flt, denied, "fcntl", seccomp.Arg(1, seccomp.EQ, cmd))
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for name in ("unshare", "clone"):  # flags: the first argument of both (x86_64, aarch64)
        flt.add_rule(denied, name, seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


def _rule(flt, action, syscall, *args) -> bool:
    """Add one rule; False when the call does not exist on this architecture."""
    try:
        flt.add_rule(action, syscall, *args)
        return True
    except (OSError, RuntimeError, ValueError):
        return False

