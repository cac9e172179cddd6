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


def bpf(deny_setsid: bool = False) -> bytes | None:
    """The filter as BPF instructions (struct sock_filter[]), or None without libseccomp."""
    try:
        import pyseccomp as seccomp
    except Exception:  # noqa: BLE001 - ImportError, or the binding failing to find libseccomp.so
        return None
    denied = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED + (("setsid",) if deny_setsid else ()):
        try:
            flt.add_rule(denied, name)
        except (OSError, RuntimeError, ValueError):  # not a system call on this architecture
            pass
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for name in ("unshare", "clone"):  # flags: the first argument of both (x86_64, aarch64)
        flt.add_rule(denied, name, seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return fh.read()
