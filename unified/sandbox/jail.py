"""Stage 1 of a sandbox worker: build the jail, then exec a clean interpreter inside it.

The executor starts this file as `python -I -S sandbox_jail.py ROOT MAX_FILE_MB [CGROUP [RUNTIME]]`.
When root, it unshares network (no interfaces), IPC, UTS, mount and PID namespaces, forks
(the child, the future zygote, is PID 1 of the new PID namespace), joins the worker's
cgroup (CGROUP: JSON from `sandbox.cgroups`) and leaves the OOM killer's reach where it
may (oom_score_adj -1000 needs CAP_SYS_RESOURCE; its calls start at 1000), opens the descriptors the zygote keeps
(the cgroup's counters, its own oom_score_adj and PID namespace: `sandbox.meter`,
`sandbox.world`), builds a new root file system on a tmpfs at ROOT and pivots into it.
The new root holds only:

- the Python runtime, read-only: RUNTIME, the pool's copy of the interpreter, libpython,
  the standard library and the shared libraries they load, in memory (`sandbox.runtime`:
  no page, lock or watch shared with a host file or another pool); without one, the host's
  `sys.base_prefix` (its site-packages masked by an empty directory) and shared-library
  directories (/lib, /lib64, /usr/lib, /usr/lib64) bound read-only;
- /dev/null, /dev/zero, /dev/urandom, /dev/random;
- /tmp: a size-limited tmpfs owned by the sandbox user, the only writable place (each
  call gets a fresh tmpfs mounted over it: `sandbox.world`), and /.spent/tmp, where a
  finished call's tmpfs is moved to be unmounted: /.spent is root's alone (0700), so no
  call can walk to it (a tmpfs moved onto /.spent itself would answer lookups of /.spent
  with its own root, which belongs to the call's uid: the next call read the last one's
  files until the unmount).

Not the project, not /root, not the data files, not /proc, /etc, /run or /var, and so
no host Unix socket (abstract ones belong to the network namespace). Then it sets
no_new_privs and a parent-death signal and execs `python -I -S -c BOOT`: BOOT reads the
executor's first frame from stdin (the settings, and the harness compiled by the executor
into code objects) and runs `sandbox.worker` from it. The worker never reads a file of the
project, and the project's modules are not even on disk inside. (Sources passed as
arguments stayed in the worker's memory several times over, argv copies and compiler
garbage, ~1.3 MB that every fork copied the page tables of.)

Without root (or when a step fails) it execs the same worker in place; the isolation
report (passed to the worker as `key=0/1` words) says what is missing.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH, PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 2, 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}.get(platform.machine())
SANDBOX_UID_BASE = 200_000  # the call's uid = base + this jail's host pid: unique while it lives
RUNTIME_DIRS = ("/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32")
DEVICES = ("null", "zero", "urandom", "random")
SPENT = "/.spent/tmp"  # below a root-only directory: no call can look a spent /tmp up, even while it waits
BOOT = """import marshal, os
def read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit(70)
        data += chunk
    return data
INIT = marshal.loads(read(int.from_bytes(read(4), "big")))
exec(INIT.pop("worker"), globals())
"""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _mount(source, target, fstype, flags, data=None) -> bool:
    enc = [None if x is None else os.fsencode(x) for x in (source, target, fstype, data)]
    return _libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) == 0


def _bind_readonly(source: str, target: str, device: bool = False) -> bool:
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | (0 if device else MS_NODEV)
    return _mount(source, target, None, MS_BIND | MS_REC) and _mount(None, target, None, flags)


def build_root(new_root: str, uid: int, max_file_mb: int, copy: str = "") -> bool:
    """Mount the runtime-only tree at `new_root` and pivot into it (see module doc); the
    runtime from `copy` (the pool's copy in memory, `sandbox.runtime`) when given."""
    if not _mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755"):
        return False
    inside = lambda path: new_root + path  # noqa: E731
    if copy:  # its top directories (/root, /lib, /usr, ...) over the new root, read-only
        for name in sorted(set(os.listdir(copy)) - {"tmp", "dev", "proc", ".spent", ".old"}):  # never over the jail's own
            os.makedirs(inside("/" + name), exist_ok=True)
            if not _bind_readonly(os.path.join(copy, name), inside("/" + name)):
                return False
        return _finish(new_root, inside, uid, max_file_mb)
    runtime = [sys.base_prefix] + [d for d in RUNTIME_DIRS if os.path.lexists(d)]
    for path in dict.fromkeys(runtime):
        if os.path.islink(path):  # merged /usr: /lib -> usr/lib
            os.makedirs(os.path.dirname(inside(path)), exist_ok=True)
            os.symlink(os.readlink(path), inside(path))
            continue
        os.makedirs(inside(path), exist_ok=True)
        if not _bind_readonly(path, inside(path)):
            return False
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = inside(os.path.join(sys.base_prefix, "lib", ver, "site-packages"))
    if os.path.isdir(site) and not _mount("tmpfs", site, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k"):
        return False
    return _finish(new_root, inside, uid, max_file_mb)


def _finish(new_root: str, inside, uid: int, max_file_mb: int) -> bool:
    """Devices, /tmp and /.spent, then the pivot."""
    os.makedirs(inside("/dev"))
    for name in DEVICES:
        open(inside("/dev/" + name), "w").close()
        if not _bind_readonly("/dev/" + name, inside("/dev/" + name), device=True):
            return False
    os.makedirs(inside("/tmp"))
    os.makedirs(inside(os.path.dirname(SPENT)), mode=0o700)  # root's alone: the mount point below it is out of reach
    os.makedirs(inside(SPENT))  # where a finished call's /tmp waits to be unmounted (sandbox.world)
    opts = f"size={max_file_mb}m,nr_inodes=4096,mode=0700,uid={uid},gid={uid}"
    if not _mount("tmpfs", inside("/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, opts):
        return False
    os.makedirs(inside("/.old"))
    if SYS_PIVOT_ROOT is None or _libc.syscall(SYS_PIVOT_ROOT, os.fsencode(new_root), os.fsencode(inside("/.old"))):
        return False
    os.chdir("/")
    ok = _libc.umount2(b"/.old", MNT_DETACH) == 0
    os.rmdir("/.old")
    return ok and _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,mode=0755")


def isolate(root: str, uid: int, max_file_mb: int, cgroup: dict, copy: str = "") -> tuple[dict, int, dict]:
    """Namespaces, the worker's cgroup and the new root; forks once (the caller goes on as
    PID 1 of the new namespace). Also returns an inheritable descriptor of /proc/self/statm,
    opened before the pivot hides /proc: after the exec it reads the worker's own memory
    size; and the descriptors the zygote keeps (see module doc)."""
    iso = {
        "root_user": os.geteuid() == 0,
        "netns": False,
        "mountns": False,
        "pidns": False,
        "pivot": False,
        "cgroup": False,
        "runtime_copy": False,
    }
    if not iso["root_user"]:
        return iso, _statm(), {}
    iso["netns"] = _libc.unshare(CLONE_NEWNET) == 0
    _libc.unshare(CLONE_NEWIPC | CLONE_NEWUTS)  # SysV IPC and hostname: nice to have
    iso["mountns"] = _libc.unshare(CLONE_NEWNS) == 0 and _mount(None, "/", None, MS_REC | MS_PRIVATE)
    iso["pidns"] = _libc.unshare(CLONE_NEWPID) == 0
    if iso["pidns"]:
        pid = os.fork()
        if pid:  # stay as the executor's handle: its exit status is the worker's
            _, status = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # the handle killed -> PID 1 dies -> the namespace dies
    iso["cgroup"] = _join(cgroup)
    fds = _keep(cgroup if iso["cgroup"] else {}, iso["pidns"])
    statm = _statm()
    if iso["mountns"]:
        copy = copy if copy and os.path.isdir(copy) else ""  # gone (removed under us): the host's runtime, said so
        iso["pivot"] = build_root(root, uid, max_file_mb, copy)
        iso["runtime_copy"] = iso["pivot"] and bool(copy)
    return iso, statm, fds


def _join(cgroup: dict) -> bool:
    """Move this process into the worker's cgroup (every hierarchy); its calls inherit it by
    fork. Out of the OOM killer's reach where allowed (CAP_SYS_RESOURCE): in any case its
    calls start as the killer's first choice (oom_score_adj 1000, `sandbox.world`)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("-1000")
    except OSError:
        pass
    try:
        for path in cgroup.get("procs", ()):
            with open(path, "w") as fh:
                fh.write("0")
    except OSError:
        return False
    return bool(cgroup.get("procs"))


def _keep(cgroup: dict, pidns: bool) -> dict:
    """Inheritable descriptors for the zygote: name -> fd (see module doc)."""
    paths = {name: (cgroup[name], os.O_RDONLY) for name in ("cpu", "oom") if name in cgroup}
    paths["oom_adj"] = ("/proc/self/oom_score_adj", os.O_RDWR)
    if pidns:
        paths["pidns"] = ("/proc/self/ns/pid", os.O_RDONLY)
    fds = {}
    for name, (path, flags) in paths.items():
        try:
            fds[name] = os.open(path, flags)
        except OSError:
            continue
        os.set_inheritable(fds[name], True)
    return fds


def _statm() -> int:
    fd = os.open("/proc/self/statm", os.O_RDONLY)
    os.set_inheritable(fd, True)
    return fd


def main() -> None:
    root, max_file_mb = sys.argv[1], int(sys.argv[2])
    cgroup = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    copy = sys.argv[4] if len(sys.argv) > 4 else ""
    uid = SANDBOX_UID_BASE + os.getpid()
    iso, statm, fds = isolate(root, uid, max_file_mb, cgroup, copy)
    iso["no_new_privs"] = _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    tmp = "/tmp" if iso["pivot"] else root
    report = " ".join(f"{k}={int(v)}" for k, v in iso.items())
    kept = " ".join([f"{k}={v}" for k, v in fds.items()] + [f"cpu_format={cgroup.get('cpu_format', '-')}"])
    python = sys._base_executable  # the real interpreter, inside base_prefix (visible after the pivot)
    os.execv(python, [python, "-I", "-S", "-c", BOOT, report, str(uid if iso["root_user"] else -1), tmp, str(statm), kept])


if __name__ == "__main__":
    main()
