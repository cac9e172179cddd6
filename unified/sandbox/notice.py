"""One line at start when a sandbox layer is missing: never silently weaker.

Said once per process (the first executor whose workers lack it), on the "unified" logger,
naming what does not bind the call and what stands in for it; docs/sandbox.md lists what
each layer covers."""

from __future__ import annotations

import logging

log = logging.getLogger("unified")
_said: set[str] = set()
_LAYERS = {  # isolation key -> what is missing without it
    "pidns_per_call": "a PID namespace per call (pids carry over between calls)",
    "tmpfs_per_call": "a fresh /tmp per call (emptied by a recursive delete instead)",
    "runtime_copy": "the pool's own runtime copy{why} (open: the host's runtime files and their page cache are "
    "shared with the host and every pool, so a file read's speed tells whether another process read it; "
    "the seccomp filter still refuses the page-cache hints and probes, locks, watches and statfs)",
    "seccomp": "the seccomp allowlist (no libseccomp: every system call is open to a call: keyrings and SysV IPC "
    "carry values between calls; machine-wide counters, AIO, user namespaces, ptrace, bpf stay reachable)",
}
_LIMITS = {
    "memory": "memory (RLIMIT_AS per process only: forks multiply it)",
    "pids": "process count (RLIMIT_NPROC only)",
    "cpu": "CPU time of the whole tree (children nobody waits for are not counted)",
}


class SharedRuntimeError(ValueError):
    """A pool without its own runtime copy, where the config did not allow one (one line)."""


def shared_runtime_refusal(why: str) -> str:
    return (
        f"sandbox: refused to start: no runtime copy of the pool's own ({why or 'unknown reason'}), so every call "
        "would share the host's runtime files and their page cache, through which one call's reads can be seen by "
        "a later one (docs/sandbox.md); run as root where a tmpfs can be mounted, or accept this with "
        "executor.allow_shared_runtime=true"
    )


def say_what_is_missing(isolation: dict, limits: dict, runtime_why: str = "") -> str | None:
    """Log (once) and return the line listing the layers and per-call limits that are off."""
    if not isolation.get("root_user"):
        missing = [
            (
                "kernel isolation (not root: no namespaces, no new root, no cgroups; the host's runtime files "
                "and their page cache are shared)"
            )
        ]
    else:
        why = f" ({runtime_why})" if runtime_why else ""
        missing = [text.format(why=why) for key, text in _LAYERS.items() if not isolation.get(key)]
        missing += [f"per-call limit on {text}" for key, text in _LIMITS.items() if not limits.get(key)]
    if not missing:
        return None
    line = "sandbox: not enforced here: " + "; ".join(missing) + " (see docs/sandbox.md)"
    if line not in _said:
        _said.add(line)
        log.warning(line)
    return line
