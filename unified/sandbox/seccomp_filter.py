"""The seccomp filter of every sandboxed call: an allowlist, built by libseccomp.

What may be called is `sandbox.allowlist` (recorded, then reviewed: see its docstring and
docs/sandbox.md); every other system call answers EPERM, and a call on the list whose
arguments are outside the listed ones (fcntl's commands, ioctl's requests, a socket's
family, clone's namespace flags, ...) answers EPERM as well. clone3 answers ENOSYS (its flags
sit in memory a filter cannot read; glibc then falls back to clone, whose flags it can).
Other architectures' calls (x32, i386 through int 0x80) kill the process.

Built here, in the parent, with libseccomp's ctypes binding (`pyseccomp`, the same API as
libseccomp's own Python binding), exported as BPF bytes and loaded ONCE by each worker's
zygote before its first fork (`sandbox.world`): every call inherits it for free (loading a
filter per call cost more than all the rest of a call's isolation). So the list holds the
zygote's own needs between calls too (mount and umount2 of /tmp, setns and unshare of a PID
namespace), narrowed by their arguments; those need capabilities, which a call never has
(it runs under an unprivileged uid), so the kernel refuses them to the call anyway.

`bpf(log=True)` builds the same filter with LOG as its default action instead of EPERM: a
call off the list runs and the kernel logs it (audit type 1326), which is how the list was
recorded (bench/seccomp_record.py). Without libseccomp (the shared library or its binding)
`bpf()` returns None and the executor says so once at start.
"""

from __future__ import annotations

import errno
import tempfile

from unified.sandbox.allowlist import CALL_DENIED, CALLS, CONDITIONAL, ZYGOTE

_OPS = ("eq", "masked_eq")


def bpf(log: bool = False, allowed: tuple[str, ...] | None = None, conditional: bool = True) -> bytes | None:
    """The filter as BPF instructions (struct sock_filter[]), or None without libseccomp.
    `log`: LOG instead of EPERM by default (recording); `allowed`: the unconditional list in
    place of `allowlist.CALLS + ZYGOTE`, and `conditional=False` leaves out the calls allowed
    by their arguments (recording from nothing)."""
    seccomp = _binding()
    if seccomp is None:
        return None
    flt = seccomp.SyscallFilter(seccomp.LOG if log else seccomp.ERRNO(errno.EPERM))
    try:  # a binary tree over the syscall number instead of a linear chain: every call of every program pays it
        flt.set_attr(seccomp.Attr.CTL_OPTIMIZE, 2)
    except (OSError, RuntimeError, ValueError, AttributeError):  # libseccomp < 2.5
        pass
    names = CALLS + ZYGOTE if allowed is None else tuple(allowed)
    for name in dict.fromkeys(names):
        _rule(flt, seccomp.ALLOW, name)
    for name, alternatives in CONDITIONAL.items() if conditional else ():
        for conditions in alternatives:  # one rule each: the call is allowed when any rule matches
            _rule(flt, seccomp.ALLOW, name, *(_arg(seccomp, *c) for c in conditions))
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    return _export(flt)


def call_bpf() -> bytes | None:
    """The call's own filter, on top of `bpf()` (loaded by the child right after the fork):
    everything allowed but `allowlist.CALL_DENIED`, which answers EPERM; None without libseccomp."""
    seccomp = _binding()
    if seccomp is None:
        return None
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in CALL_DENIED:
        _rule(flt, seccomp.ERRNO(errno.EPERM), name)
    return _export(flt)


def _binding():
    try:
        import pyseccomp as seccomp
    except Exception:  # noqa: BLE001 - ImportError, or the binding failing to find libseccomp.so
        return None
    return seccomp


def _export(flt) -> bytes:
    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


def _arg(seccomp, index: int, op: str, value: int, mask: int | None = None):
    if op not in _OPS:
        raise ValueError(f"unknown comparison {op!r}")
    if op == "eq":
        return seccomp.Arg(index, seccomp.EQ, value)
    return seccomp.Arg(index, seccomp.MASKED_EQ, mask, value)


def _rule(flt, action, syscall, *args) -> bool:
    """Add one rule; False when the call does not exist on this architecture."""
    try:
        flt.add_rule(action, syscall, *args)
        return True
    except (OSError, RuntimeError, ValueError):
        return False
