"""Every call starts in a fresh world: nothing one call leaves behind can carry a value to
a later call, on the same worker, on another worker, or after the pool was rebuilt.

Each channel is a pair of hostile programs: `put(secret)` hides the secret where the
kernel keeps it after the call (a /tmp chain too deep for a recursive delete, a SysV shared
memory segment, a key in the kernel keyring, the PID counter), `get()` looks for it.
Nothing is banned in these pools: only the kernel layer stands between the two calls.
"""

import platform
import secrets

import pytest

from tests.helpers.sandbox_pools import isolated_pool
from unified.sandbox.executor import Executor

DEPTH = 1200  # deeper than the zygote's recursion limit: a recursive delete gave up here

TMP_CHAIN = f"""
import os
DEPTH = {DEPTH}
def put(secret):
    path = '/tmp'
    for _ in range(DEPTH):
        path += '/d'
        os.mkdir(path)
    with open(path + '/v', 'w') as fh:
        fh.write(secret)
    return True
def get():
    try:
        with open('/tmp' + '/d' * DEPTH + '/v') as fh:
            return fh.read()
    except OSError:
        return None
"""

SYSV_SHM = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
KEY, IPC_CREAT, SHM_RDONLY = 0x5EED, 0o1000, 0o10000
def put(secret):
    shmid = libc.shmget(KEY, 4096, IPC_CREAT | 0o666)
    if shmid < 0:
        return False
    addr = libc.shmat(shmid, None, 0)
    ctypes.memmove(addr, secret.encode() + b'\\0', len(secret) + 1)
    return True
def get():
    shmid = libc.shmget(KEY, 0, 0)
    if shmid < 0:
        return None
    return ctypes.string_at(libc.shmat(shmid, None, SHM_RDONLY)).decode()
"""

KEYRING = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ADD_KEY, KEYCTL = 248, 250  # x86_64
KEYCTL_SEARCH, KEYCTL_READ = 10, 11
RINGS = (-3, -4, -5)  # session, user, user-session keyrings
def put(secret):
    payload = secret.encode()
    ids = [libc.syscall(ADD_KEY, b'user', b'unified-fresh-world', payload, ctypes.c_size_t(len(payload)),
                        ctypes.c_long(ring)) for ring in RINGS]
    return any(i > 0 for i in ids)
def get():
    for ring in RINGS:
        key = libc.syscall(KEYCTL, KEYCTL_SEARCH, ctypes.c_long(ring), b'user', b'unified-fresh-world', 0)
        if key > 0:
            buf = ctypes.create_string_buffer(256)
            n = libc.syscall(KEYCTL, KEYCTL_READ, ctypes.c_long(key), buf, ctypes.c_long(256))
            if n > 0:
                return buf.raw[:n].decode()
    return None
"""

PID_COUNTER = """
import os
def put(secret):
    for _ in range(int(secret)):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return True
def get():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return (os.getpid(), pid)
"""


def _bare(workers: int) -> Executor:
    return isolated_pool(workers, timeout_s=2.0, banned_modules=(), banned_calls=())


@pytest.fixture(scope="module")
def one():
    with _bare(1) as ex:
        yield ex


@pytest.fixture(scope="module")
def two():
    with _bare(2) as ex:
        yield ex


def _same_worker(one, code: str, secret: str):
    one.run(code, "put", (secret,))
    return one.run(code, "get").value


def _other_worker(two, code: str, secret: str):
    replies, ran_on = two.run_replies([_call(code, "put", (secret,))])
    two.result(replies[0])
    replies, ran_again = two.run_replies([_call(code, "get", ())], avoid=ran_on)
    assert ran_again != ran_on
    return two.result(replies[0]).value


def _after_rebuild(_, code: str, secret: str):
    with _bare(1) as ex:
        ex.run(code, "put", (secret,))
    with _bare(1) as ex:
        return ex.run(code, "get").value


def _call(code, entry, args):
    from unified.sandbox.executor import ExecCall

    return ExecCall(code, entry, args)


SCENARIOS = {"same_worker": _same_worker, "other_worker": _other_worker, "after_rebuild": _after_rebuild}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("channel", ["tmp_chain", "sysv_shm", "keyring"])
def test_a_call_cannot_read_what_an_earlier_call_left(one, two, channel, scenario):
    if channel == "keyring" and platform.machine() != "x86_64":
        pytest.skip("the keyring program uses x86_64 syscall numbers")
    code = {"tmp_chain": TMP_CHAIN, "sysv_shm": SYSV_SHM, "keyring": KEYRING}[channel]
    secret = "s3cret-" + secrets.token_hex(8)
    pool = two if scenario == "other_worker" else one
    got = SCENARIOS[scenario](pool, code, secret)
    assert got != secret, f"{channel}: a later call read the earlier call's secret ({scenario})"


def test_the_writers_work_within_their_own_call_or_are_refused(one):
    # Not vacuous: the deep chain is written and read back within its own call; SysV shared
    # memory and keys cannot be made at all (seccomp: EPERM).
    both = "def both(secret):\n    return put(secret), get()\n"
    r = one.run(TMP_CHAIN + both, "both", ("x",))
    assert r.ok and r.value == (True, "x"), r
    for code in (SYSV_SHM, KEYRING) if platform.machine() == "x86_64" else (SYSV_SHM,):
        r = one.run(code + both, "both", ("x",))
        assert r.ok and r.value == (False, None), r


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_pid_counter_does_not_tell_how_many_processes_an_earlier_call_forked(one, two, scenario):
    seen = {n: SCENARIOS[scenario](two if scenario == "other_worker" else one, PID_COUNTER, str(n)) for n in (0, 3, 29)}
    assert None not in seen.values(), seen
    assert len(set(seen.values())) == 1, f"the pids a call sees depend on the earlier call: {seen}"


def test_a_call_can_make_no_user_namespace_and_reach_no_keyring(one):
    if platform.machine() != "x86_64":
        pytest.skip("x86_64 syscall numbers")
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def f():\n"
        "    user = libc.unshare(0x10000000)  # CLONE_NEWUSER: no capability needed, so only seccomp stops it\n"
        "    user_errno = ctypes.get_errno()\n"
        "    keyring = libc.syscall(250, 0, ctypes.c_long(-3), 1)  # KEYCTL_GET_KEYRING_ID, session, create\n"
        "    return user, user_errno, keyring, ctypes.get_errno(), os.getuid() != 0\n"
    )
    r = one.run(code, "f")
    assert r.ok and r.value == (-1, 1, -1, 1, True), r  # EPERM both


def test_the_last_calls_tmp_is_out_of_reach_while_it_is_unmounted(one):
    one.run(TMP_CHAIN, "put", ("x",))
    r = one.run("import os\ndef f():\n    return os.listdir('/.spent')", "f")
    assert r.status == "error" and "PermissionError" in r.error, r
