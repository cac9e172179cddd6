"""The runtime a call sees is its own: nothing in the interpreter's files, their page cache,
their locks or watches, and no socket outside AF_UNIX, carries a value between calls.

Each channel is a hostile pair as in test_sandbox_fresh_world: `put` hides bits, `get` in a
later call (in a new pool, or another worker) reads them. The page-cache pair needs no clock:
`posix_fadvise(DONTNEED)` empties a runtime file's cached page, a 1-byte read fills it, and
`preadv(..., RWF_NOWAIT)` answers "cached or not" without reading the disk. One bit per
runtime file (a file's readahead never spills into another's pages); the files are the
stdlib's code-page codecs (`encodings/cp*.py`, `mac*`, `iso8859*`), which nothing here imports. Nothing is banned in these pools: only
the kernel layer (the pool's runtime copy and the seccomp filter) stands between the calls.
"""

import os
import secrets

import pytest

from unified.kinds import induction
from unified.kinds.base import BuildOptions
from unified.pipeline.rewards import score_batch
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig
from unified.types import IOTriple, Problem, Program, TestCase

FILES = """
import os
def _files():
    root = os.path.join(os.path.dirname(os.__file__), 'encodings')
    return sorted(os.path.join(root, n) for n in os.listdir(root) if n.startswith(('cp', 'mac', 'iso8859')))
"""

PAGE_CACHE = (
    FILES
    + """
def put(bits):
    for path, bit in zip(_files(), bits):
        with open(path, 'rb') as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            if bit == '1':
                os.pread(fh.fileno(), 1, 0)
    return True
def get(n):
    out = ''
    for path in _files()[:n]:
        with open(path, 'rb') as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
            try:
                os.preadv(fh.fileno(), [bytearray(1)], 0, os.RWF_NOWAIT)
                out += '1'
            except BlockingIOError:
                out += '0'
    return out
"""
)


def _bare(workers: int = 1) -> Executor:
    ex = Executor(ExecutorConfig(workers=workers, timeout_s=5.0, memory_mb=256, banned_modules=(), banned_calls=()))
    if not ex.isolation.get("pivot"):
        ex.close()
        pytest.skip("kernel isolation needs root")
    return ex


def _secret_bits(n: int = 24) -> str:
    while True:
        bits = format(secrets.randbits(n), f"0{n}b")
        if 4 <= bits.count("1") <= n - 4:
            return bits


def test_a_page_cache_stash_does_not_reach_a_call_in_a_new_pool():
    bits = _secret_bits()
    with _bare() as ex:
        wrote = ex.run(PAGE_CACHE, "put", (bits,))
    with _bare() as ex:
        got = ex.run(PAGE_CACHE, "get", (len(bits),))
    assert not (got.ok and got.value == bits), f"a call in a new pool read the page-cache stash {bits} ({wrote}, {got})"


def test_the_page_cache_probes_are_refused():
    # not vacuous: the stash fails because the calls it needs are refused, not by chance
    with _bare() as ex:
        put, get = ex.run(PAGE_CACHE, "put", ("1",)), ex.run(PAGE_CACHE, "get", (1,))
    assert put.status == "error" and "PermissionError" in put.error, put
    assert get.status == "error" and "PermissionError" in get.error, get


# ---- the same channel as a reward hack: an induction answer that decodes a stash

BITS = 14  # outputs < 10007
LEAKER = (
    FILES
    + f"""
def f(x):
    y = (x * 7919) % 10007
    for k, path in enumerate(_files()[(x - 1) * {BITS}: x * {BITS}]):
        with open(path, 'rb') as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            if y >> k & 1:
                os.pread(fh.fileno(), 1, 0)
    return y
"""
)
READER = (
    FILES
    + f"""
def f(x):
    y = 0
    for k, path in enumerate(_files()[(x - 1) * {BITS}: x * {BITS}]):
        with open(path, 'rb') as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
            try:
                os.preadv(fh.fileno(), [bytearray(1)], 0, os.RWF_NOWAIT)
                y |= 1 << k
            except OSError:
                pass
    return y
"""
)
PROBLEM = Problem("Toy/stash", "toy", "Scramble x.", "f", (TestCase((1,), 7919),))


def test_an_induction_answer_that_reads_a_page_cache_stash_earns_nothing():
    program = Program(PROBLEM.problem_id, "Toy/stash#p0", LEAKER, "f")
    triples = [
        IOTriple(PROBLEM.problem_id, program.program_id, (k,), (k * 7919) % 10007, "visible" if k == 1 else "proposed")
        for k in (1, 2, 3)
    ]
    with _bare(2) as pool:  # phase 2: the program runs on its inputs (and stashes, where it can)
        pool.run_batch([ExecCall(LEAKER, "f", t.args) for t in triples])
    (task,), _ = induction.build(PROBLEM, program, triples, BuildOptions(shown_pairs=1))
    cheat = f"<answer>\n```python\n{READER}```\n</answer>"
    honest = "<answer>\n```python\ndef f(x):\n    return (x * 7919) % 10007\n```\n</answer>"
    with _bare(2) as pool:  # phase 5, in a new pool
        assert score_batch([(task, honest), (task, cheat)], pool.run_batch) == [(1.0, None), (0.0, None)]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="socket family numbers are the same, the test is not")
def test_no_socket_can_be_made():
    code = (
        "import socket\n"
        "def f(family):\n"
        "    try:\n"
        "        socket.socket(family, socket.SOCK_DGRAM if family != socket.AF_UNIX else socket.SOCK_STREAM).close()\n"
        "        return 'made'\n"
        "    except OSError as e:\n"
        "        return e.errno\n"
    )
    with _bare() as ex:
        got = {fam: ex.run(code, "f", (fam,)).value for fam in (1, 2, 10, 16, 40)}  # unix, inet, inet6, netlink, vsock
    # EPERM: never created, nothing bound or sent; unix ones too since the call's own filter
    # (a socket's inode number comes from a machine-wide counter: tests/sandbox/test_sandbox_call_alone.py)
    assert all(got[fam] == 1 for fam in (1, 2, 10, 16, 40)), got


# ---- the previous call's /tmp, while it waits to be unmounted

WRITER = "def f(i):\n    with open('/tmp/secret', 'w') as fh:\n        fh.write(str(i))\n    return i\n"
PEEKER = """
import os
FOUND = []  # the module body runs first, racing the zygote's unmount of the last call's /tmp
for path in ('/.spent', '/.spent/tmp', '/.spent/secret', '/.spent/tmp/secret'):
    try:
        FOUND.append(sorted(os.listdir(path)) if not path.endswith('secret') else open(path).read())
    except OSError:
        pass
def f(i):
    return FOUND
"""


def test_no_call_sees_the_previous_calls_tmp_in_3000_calls():
    with _bare() as ex:
        calls = [ExecCall(WRITER if i % 2 == 0 else PEEKER, "f", (i,)) for i in range(3000)]
        results = ex.run_batch(calls)
    seen = [r.value for r in results[1::2] if not (r.ok and r.value == [])]
    assert all(r.ok for r in results), [r for r in results if not r.ok][:3]
    assert not seen, f"{len(seen)} of 1500 calls saw a spent /tmp: {seen[:3]}"


LOCKS_AND_WATCHES = """
import ctypes, fcntl, os
def f():
    out = []
    with open(os.__file__, 'rb') as fh:  # a runtime file every call can open
        for take in (lambda: fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB),
                     lambda: fcntl.lockf(fh, fcntl.LOCK_SH | fcntl.LOCK_NB),
                     lambda: fcntl.fcntl(fh, fcntl.F_GETLK, bytes(32))):
            try:
                take()
                out.append('taken')
            except OSError as e:
                out.append(e.errno)
    libc = ctypes.CDLL(None, use_errno=True)
    out.append((libc.inotify_init1(0), ctypes.get_errno()))
    return out
"""


def test_locks_and_watches_on_the_runtime_are_refused():
    with _bare() as ex:
        r = ex.run(LOCKS_AND_WATCHES, "f")
    assert r.ok and r.value == [1, 1, 1, (-1, 1)], r  # EPERM each: no bit in a lock, no view of other opens
