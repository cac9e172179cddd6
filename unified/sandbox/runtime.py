"""The runtime a sandboxed call runs on: a copy of the interpreter's files in memory, the
pool's own, so that no host file shares pages, locks or watches with a call.

With the host's files bind-mounted read-only (the jail's fallback), every call, worker, pool
and run shared their page cache: one call could evict a page (`posix_fadvise`) or fill it (a
1-byte read) and a later call read the bit back (`preadv(RWF_NOWAIT)`), exactly, with no
clock; the same pages told the host's own file reads. The copy lives on a tmpfs of its own,
mounted for it (at /dev/shm/unified-runtime-<pid>, sized to the copy, made read-only once
filled): its pages are memory, always resident and owned by nothing but the pool, so
residency says nothing, and its file system's counters (statvfs: blocks, inodes free) are its
own and never change, where /dev/shm's showed the host's shared-memory use. The seccomp filter
refuses the hints, locks, watches and statfs as well (second wall).

What is copied, keeping each absolute path (the jail binds the copy's top directories over
the new root): the interpreter binary, libpython, the standard library without what no call
can use (its tests, the GUI and IDE, the bundled pip wheels, the static library of
`config-*`, site-packages: an empty directory in its place), `lib-dynload` without
tkinter, and every shared library those ELF files load (`ldd`), the dynamic loader included.
About 100 MB, copied once per process (`runtime_dir`) and shared by its pools; unmounted at
exit, and a copy left by a killed process is unmounted and removed by the next one.

Without root, `ldd`, a tmpfs that can be mounted or twice the copy's size in free memory,
`runtime_dir` returns None (`why_none` says which) and the jail bind-mounts the host's runtime
(the isolation report says `runtime_copy=0`); the executor then refuses to start unless
`executor.allow_shared_runtime` (on for a bare Executor, off in the trainer's config).
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

SHM = Path("/dev/shm")
PREFIX = "unified-runtime-"
SKIP_STDLIB = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "__phello__"}
SKIP_DYNLOAD = ("_tkinter", "_test", "xxlimited", "_xx")
# `ldd` resolves as the worker's loader will: with no LD_PRELOAD or LD_LIBRARY_PATH (a process
# that loaded vLLM has both, pointing into site-packages, and passes them to its children)
LOADER_ENV = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL": "C"}
RESERVED = ("tmp", "dev", "proc", ".spent", ".old")  # the jail's own top directories
# the workers' locale (LANG=C.UTF-8, sandbox.executor): without its files a call ran in the C
# locale (locale.getlocale() None, getpreferredencoding 'utf-8') where any machine answers 'UTF-8'
LOCALES = ("/usr/lib/locale/C.utf8", "/usr/lib/locale/C.UTF-8")
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MNT_DETACH = 1, 2, 4, 32, 2
_lock = threading.Lock()
_made: dict[int, Path | None] = {}  # pid -> this process's copy
_why: dict[int, str] = {}  # pid -> why it has none
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def runtime_dir() -> Path | None:
    """This process's runtime copy (made on first use), or None where none can be made."""
    with _lock:
        pid = os.getpid()
        made = _made.get(pid)
        if pid not in _made or (made is not None and not made.is_dir()):  # a forked child makes its own
            _made[pid] = _make(SHM / f"{PREFIX}{pid}")
        return _made[pid]


def why_none() -> str:
    """Why this process has no runtime copy ("" when it has one or has not tried)."""
    return _why.get(os.getpid(), "")


def _make(dest: Path) -> Path | None:
    if os.geteuid() != 0:
        return _none("not root")
    if not SHM.is_dir() or shutil.which("ldd") is None:
        return _none("no /dev/shm" if not SHM.is_dir() else "no ldd to list the shared libraries")
    _remove_stale()
    try:
        files = manifest()
        need = sum(os.stat(f).st_size for f in files if not os.path.islink(f))
    except (OSError, subprocess.SubprocessError) as e:
        return _none(f"listing the runtime failed: {e}")
    inodes = len(files) + len({os.path.dirname(f) for f in files}) * 4 + 256
    size = need + 4096 * inodes + (16 << 20)  # a file takes whole pages
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if free < 2 * size:
        return _none(f"{free >> 20} MiB of free memory, less than twice the copy's {size >> 20} MiB")
    _rmtree(dest)
    try:
        dest.mkdir(mode=0o755)
        if not _mount(b"tmpfs", dest, b"tmpfs", MS_NOSUID | MS_NODEV, f"size={size},nr_inodes={inodes},mode=0755"):
            return _none(f"mounting a tmpfs failed ({errno.errorcode.get(ctypes.get_errno(), '?')})", dest)
        for src in files:
            _copy(src, dest)
        site = dest / _stdlib().relative_to("/") / "site-packages"
        site.mkdir(parents=True, exist_ok=True)  # empty: no third-party package reaches a call
        _seal(dest)
        if not _mount(None, dest, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None):
            return _none("making the copy's tmpfs read-only failed", dest)
    except (OSError, subprocess.SubprocessError) as e:
        return _none(f"copying the runtime failed: {e}", dest)
    atexit.register(_remove_own, dest, os.getpid())
    return dest


def _none(why: str, made: Path | None = None) -> None:
    _why[os.getpid()] = why
    if made is not None:
        _rmtree(made)


def _mount(source, target, fstype, flags: int, data) -> bool:
    data = data.encode() if isinstance(data, str) else data
    return _libc.mount(source, os.fsencode(target) if target is not None else None, fstype, flags, data) == 0


def _remove_own(dest: Path, owner: int) -> None:
    """At exit, the copy of the process that made it: a forked child inherits the handler
    and must not take its parent's copy with it when it exits."""
    if os.getpid() == owner:
        _rmtree(dest)


def manifest() -> list[str]:
    """Absolute paths to copy: files, and the symlinks that name them (kept as links)."""
    exe = sys._base_executable  # what the jail execs, inside the new root
    prefix = Path(sys.base_prefix)
    stdlib = _stdlib()
    paths = [exe, os.path.realpath(exe)]
    paths += [str(p) for p in (prefix / "lib").glob("libpython*")]
    for root, dirs, names in os.walk(stdlib):
        if Path(root) == stdlib:
            dirs[:] = [d for d in dirs if d not in SKIP_STDLIB and not d.startswith("config-")]
        paths += [os.path.join(root, n) for n in names]
    elves = [p for p in paths if p.endswith(".so") or ".so." in p or p == exe]
    dynload = stdlib / "lib-dynload"
    paths = [p for p in paths if not (p.startswith(str(dynload)) and os.path.basename(p).startswith(SKIP_DYNLOAD))]
    paths += _libraries([p for p in elves if p in set(paths)])
    for locale in LOCALES:
        paths += [os.path.join(root, n) for root, _, names in os.walk(locale) for n in names]
    return [p for p in dict.fromkeys(paths) if p.lstrip("/").split("/")[0] not in RESERVED]


def _stdlib() -> Path:
    return Path(os.__file__).resolve().parent  # the base interpreter's, also from a venv


def _libraries(elves: list[str]) -> list[str]:
    """The shared libraries (and the loader) the ELF files load, as the loader resolves
    them, plus the real files behind symlinked ones."""
    out: list[str] = []
    for chunk in range(0, len(elves), 64):
        text = subprocess.run(
            ["ldd", *elves[chunk : chunk + 64]], capture_output=True, text=True, timeout=60, env=LOADER_ENV
        ).stdout
        for line in text.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else (parts[0] if parts and parts[0].startswith("/") else "")
            if path.startswith("/") and os.path.exists(path):
                out.append(path)
                while os.path.islink(path):  # libz.so.1 -> libz.so.1.2.13: the link and its file
                    path = os.path.join(os.path.dirname(path), os.readlink(path))
                    out.append(path)
    return out


def _copy(src: str, root: Path) -> None:
    target = root / src.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if os.path.islink(src) and not os.path.isabs(os.readlink(src)):
        if not os.path.lexists(target):
            os.symlink(os.readlink(src), target)
        return
    shutil.copy2(os.path.realpath(src), target)


def _seal(root: Path) -> None:
    """Read-only for everyone: a call reads the runtime and nothing more (the jail binds it
    read-only as well)."""
    for dirpath, dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o555 if os.access(path, os.X_OK) else 0o444)
        os.chmod(dirpath, 0o555)


def _remove_stale() -> None:
    """Copies left by processes that no longer run."""
    for path in SHM.glob(PREFIX + "*"):
        pid = path.name[len(PREFIX) :].split(".")[0]
        if pid.isdigit() and not _alive(int(pid)):
            _rmtree(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _rmtree(path: Path) -> None:
    """Remove a copy: its tmpfs unmounted (detached: a jail that still binds it keeps it until
    it ends), then what is left (a copy of the old layout is a plain directory)."""
    if os.path.ismount(path):
        _libc.umount2(os.fsencode(path), MNT_DETACH)
    for dirpath, _, _ in os.walk(path):
        try:
            os.chmod(dirpath, 0o755)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)
