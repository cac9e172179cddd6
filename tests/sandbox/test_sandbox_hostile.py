"""Hostile programs: each test asserts containment AND that the pool still answers a normal
call afterwards. Three module-scoped pools share the work (`sandbox_pools`: `pool` with the
default policy, `guards` with run-time import guards only, `bare` with the kernel layer
only). Forged replies, other calls' data and the verdict: test_sandbox_forging.py.
"""

import math
import os
import socket
import time
from pathlib import Path

import pytest

from tests.helpers.sandbox_pools import SECRET, SECRET_VALUE, TIMEOUT, assert_alive, bare, guards, pool  # noqa: F401 - fixtures


# ------------------------------------------------------------------ CPU, memory, output


def test_infinite_loop_times_out(pool):
    r = pool.run("def f():\n    while True:\n        pass", "f")
    assert r.status == "timeout"
    assert_alive(pool)


def test_deep_recursion_is_an_error(pool):
    r = pool.run("def f(n=0):\n    return f(n + 1)", "f")
    assert r.status == "error" and r.error.startswith("RecursionError")
    assert_alive(pool)


def test_unbounded_recursion_with_raised_limit_is_contained(bare):
    r = bare.run("import sys\ndef f(n=0):\n    sys.setrecursionlimit(10**8)\n    return f(n + 1)", "f")
    assert r.status in ("timeout", "memory", "crashed", "error")
    assert_alive(bare)


def test_memory_bomb_hits_the_address_space_limit(pool):
    r = pool.run("def f():\n    blocks = []\n    while True:\n        blocks.append(bytearray(10**7))", "f")
    assert r.status == "memory", r
    r = pool.run("def f():\n    return len([0] * 10**10)", "f")
    assert r.status == "memory", r
    assert_alive(pool)


def test_huge_output_is_truncated(pool):
    r = pool.run("def f():\n    for _ in range(100):\n        print('x' * 100000)\n    return 1", "f")
    assert r.ok and r.value == 1
    assert 0 < len(r.stdout.encode()) <= 4096
    assert_alive(pool)


def test_enormous_or_unserialisable_return_values_are_errors(pool):
    for code, words in [
        ("def f():\n    return 'x' * 10**7", "too large"),
        ("def f():\n    return object()", "not a literal"),
        ("def f():\n    a = []\n    a.append(a)\n    return a", "nested"),
        ("def f():\n    return {1: bytearray(3)}", "not a literal"),
    ]:
        r = pool.run(code, "f")
        assert r.status == "error" and words in r.error, (code, r)
    assert_alive(pool)


def test_huge_int_to_str_is_contained(pool, bare):
    r = pool.run("def f():\n    return str(10**100000)", "f")
    assert r.status == "error" and r.error.startswith("ValueError")
    r = pool.run("def f():\n    return 10**100000", "f")
    assert r.status == "error" and "too large" in r.error
    # Lifting the limit inside the program does not make the parent render the number.
    r = bare.run("import sys\ndef f():\n    sys.set_int_max_str_digits(0)\n    return 10**100000", "f")
    assert r.status == "error" and "too large" in r.error
    assert_alive(pool)
    assert_alive(bare)


# ------------------------------------------------------------------ processes


def test_fork_bomb_is_banned_statically(pool):
    r = pool.run("import os\ndef f():\n    while True:\n        os.fork()", "f")
    assert r.status == "banned"
    assert_alive(pool)


def test_fork_bomb_is_contained_by_the_kernel(bare):
    code = "import os\ndef f():\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass"
    r = bare.run(code, "f")
    assert r.status == "timeout", r
    assert_alive(bare)  # RLIMIT_NPROC capped it; the PID namespace took every fork with it


def test_calls_run_at_the_callers_priority_not_the_zygotes(bare):
    # The zygote runs above its calls (so that it wakes at a deadline under a fork bomb);
    # a call must not inherit that boost, or hostile code would outrank the machine.
    r = bare.run("import os\ndef f():\n    return os.getpriority(os.PRIO_PROCESS, 0)", "f")
    assert r.ok and r.value == os.getpriority(os.PRIO_PROCESS, 0), r
    assert_alive(bare)


def test_daemon_that_outlives_the_call_is_killed(bare, tmp_path):
    marker = tmp_path / "daemon_was_here.txt"
    code = (
        "import os, time\n"
        "def f(path):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(1)\n"
        "            with open(path, 'w') as fh:\n"
        "                fh.write('escaped')\n"
        "            while True:\n"
        "                time.sleep(0.05)\n"
        "        os._exit(0)\n"
        "    return 'parent returned'\n"
    )
    r = bare.run(code, "f", (str(marker),))
    assert r.ok and r.value == "parent returned"
    assert_alive(bare)  # checked right away: the double-forked daemon is already gone
    time.sleep(1.3)
    assert not marker.exists()


def test_threads_left_running_do_not_outlive_the_call(bare):
    code = "import threading, time\ndef f():\n    threading.Thread(target=time.sleep, args=(60,)).start()\n    return 7"
    start = time.monotonic()
    r = bare.run(code, "f")
    assert r.ok and r.value == 7 and time.monotonic() - start < TIMEOUT
    assert_alive(bare)


def test_killing_the_parent_or_the_worker_fails(bare):
    pids = [w.proc.pid for w in bare._workers]
    for code in [
        "import os\ndef f():\n    os.kill(os.getppid(), 9)\n    return 'alive'",
        "import os\ndef f():\n    os.kill(1, 9)\n    return 'alive'",
        "import os, signal\ndef f():\n    os.killpg(0, signal.SIGKILL)\n    return 'alive'",
        "import os\ndef f():\n    for pid in range(2, 5000):\n        try:\n            os.kill(pid, 9)\n"
        "        except OSError:\n            pass\n    return 'alive'",
    ]:
        r = bare.run(code, "f")
        assert r.status in ("ok", "error", "crashed"), r  # the call itself may die; nothing else may
    try:
        bare.run("import os\ndef f():\n    os.kill(-1, 9)\n    return 1", "f")
    finally:
        assert [w.proc.pid for w in bare._workers] == pids
        assert all(w.proc.poll() is None for w in bare._workers)
    assert_alive(bare)


def test_exiting_early_is_an_error_or_a_crash(pool, bare):
    assert pool.run("import sys\ndef f():\n    sys.exit(3)", "f").status == "banned"
    assert pool.run("import os\ndef f():\n    os._exit(0)", "f").status == "banned"
    r = bare.run("import sys\ndef f():\n    sys.exit(3)", "f")
    assert r.status == "error" and r.error == "SystemExit: 3"
    r = bare.run("import os\ndef f():\n    os._exit(0)", "f")
    assert r.status == "crashed" and "without a result" in r.error
    assert_alive(pool)
    assert_alive(bare)


def test_signal_handler_tampering_does_not_stop_the_timeout(bare):
    code = (
        "import signal\n"
        "def f():\n"
        "    for s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGALRM, signal.SIGINT, signal.SIGHUP):\n"
        "        signal.signal(s, signal.SIG_IGN)\n"
        "    while True:\n"
        "        pass\n"
    )
    assert bare.run(code, "f").status == "timeout"
    assert_alive(bare)


def test_closing_stdout_and_the_result_pipe(bare):
    r = bare.run("import os, sys\ndef f():\n    sys.stdout.close()\n    os.close(1)\n    os.close(2)\n    return 5", "f")
    assert r.ok and r.value == 5
    r = bare.run("import os\ndef f():\n    os.closerange(0, 1024)\n    return 5", "f")
    assert r.status == "crashed"
    assert_alive(bare)


# ------------------------------------------------------------------ files, secrets, network


@pytest.fixture
def canary(tmp_path):
    path = tmp_path / "canary.txt"
    path.write_text("original")
    os.chmod(tmp_path, 0o777)  # even a world-writable directory must not help
    yield path
    assert path.read_text() == "original"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["canary.txt"]


def test_writing_files_outside_is_banned_statically(pool, canary):
    for code in [
        f"def f():\n    open({str(canary)!r}, 'w').write('pwned')",
        f"import os\ndef f():\n    os.remove({str(canary)!r})",
        f"import shutil\ndef f():\n    shutil.rmtree({str(canary.parent)!r})",
        f"from pathlib import Path\ndef f():\n    Path({str(canary)!r}).write_text('pwned')",
    ]:
        assert pool.run(code, "f").status == "banned", code
    r = pool.run("def f(p, m):\n    open(p, m).write('pwned')", "f", (str(canary), "w"))
    assert r.status == "banned"  # a mode the static check could not see: the run-time guard
    assert_alive(pool)


def test_writing_or_deleting_outside_is_stopped_by_the_kernel(bare, canary):
    for code in [
        "import os\ndef f(p):\n    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)\n    os.write(fd, b'pwned')",
        "import os\ndef f(p):\n    os.remove(p)",
        "import os\ndef f(p):\n    os.rename(p, p + '.moved')",
        "import shutil\ndef f(p):\n    shutil.rmtree(p.rsplit('/', 1)[0])",
        "import os\ndef f(p):\n    os.open(p + '.new', os.O_CREAT | os.O_WRONLY)",
        "import os\ndef f(p):\n    os.open('/dev/shm/unified_sandbox_escape', os.O_CREAT | os.O_WRONLY)",
    ]:
        r = bare.run(code, "f", (str(canary),))
        assert r.status == "error", (code, r)
    # /tmp inside is the call's own tmpfs: writing there is allowed and lands nowhere on the host
    bare.run("import os\ndef f():\n    os.open('/tmp/unified_sandbox_escape', os.O_CREAT | os.O_WRONLY)", "f")
    assert not Path("/tmp/unified_sandbox_escape").exists()
    r = bare.run("def f():\n    open('scratch.txt', 'w').write('ok')\n    return open('scratch.txt').read()", "f")
    assert r.ok and r.value == "ok"  # the private directory is writable
    r = bare.run("import os\ndef f():\n    return os.listdir('.')", "f")
    assert r.ok and r.value == []  # ... and fresh for every call
    assert_alive(bare)


def test_environment_secrets_are_not_visible(pool, bare):
    assert pool.run("import os\ndef f():\n    return os.environ.get('X')", "f").status == "banned"
    r = bare.run("import os\ndef f():\n    return dict(os.environ)", "f")
    assert r.ok and SECRET not in r.value and SECRET_VALUE not in str(r.value)
    code = (
        "import os\n"
        "def f(needle):\n"
        "    hits = []\n"
        "    for pid in os.listdir('/proc'):\n"
        "        try:\n"
        "            with open(f'/proc/{pid}/environ', 'rb') as fh:\n"
        "                if needle.encode() in fh.read():\n"
        "                    hits.append(pid)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return hits\n"
    )
    r = bare.run(code, "f", (SECRET_VALUE,))
    # no /proc inside the jail at all (without the jail: the parent's environ belongs to another user)
    assert (r.ok and r.value == []) or (r.status == "error" and "FileNotFoundError" in r.error), r
    assert_alive(bare)


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.3)
    yield server
    with pytest.raises(socket.timeout):
        server.accept()  # nobody ever connected
    server.close()


def test_socket_is_banned(pool, listener):
    port = listener.getsockname()[1]
    code = f"import socket\ndef f():\n    socket.create_connection(('127.0.0.1', {port}))"
    assert pool.run(code, "f").status == "banned"
    assert_alive(pool)


def test_no_network_even_without_the_python_guards(bare, listener):
    port = listener.getsockname()[1]
    # Raw libc calls: the program does not even need the socket module.
    code = (
        "import ctypes, struct\n"
        "def f(port):\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    fd = libc.socket(2, 1, 0)\n"
        "    if fd < 0:\n"
        "        return ('socket', ctypes.get_errno())\n"
        "    addr = struct.pack('=H', 2) + struct.pack('>H', port) + bytes([127, 0, 0, 1]) + bytes(8)\n"
        "    return ('connect', libc.connect(fd, addr, len(addr)), ctypes.get_errno())\n"
    )
    r = bare.run(code, "f", (port,))
    assert r.ok, r
    assert r.value[0] == "socket" or r.value[1] == -1  # ENETUNREACH: the namespace has no interfaces
    r = bare.run(f"import socket\ndef f():\n    socket.create_connection(('127.0.0.1', {port}), timeout=0.2)", "f")
    assert r.status == "error"  # no module for this user, or no route: either way no connection
    assert_alive(bare)


def test_privileges_are_dropped(bare):
    code = (
        "import os, ctypes\n"
        "def f():\n"
        "    libc = ctypes.CDLL(None)\n"
        "    remount = libc.mount(None, b'/', None, 32 | 4096, None)\n"
        "    return (os.getuid(), libc.setuid(0), libc.chroot(b'/tmp'), remount)\n"
    )
    r = bare.run(code, "f")
    assert r.ok, r
    uid, setuid, chroot, remount = r.value
    assert uid >= 200_000 and setuid == chroot == remount == -1  # no capabilities left
    r = bare.run("def f():\n    return open('/proc/1/mem', 'rb').read(1)", "f")
    assert r.status == "error" and ("Permission" in r.error or "FileNotFound" in r.error)
    assert_alive(bare)


# ------------------------------------------------------------------ guards and escapes


def test_banned_modules_through_import_tricks(pool, guards):
    for code in [
        "def f():\n    return __import__('subprocess')",
        "import importlib\ndef f():\n    return importlib.import_module('subprocess')",
        "def f():\n    return getattr(__builtins__, '__import__')('subprocess')",
        "import builtins\ndef f():\n    return builtins.__import__('os').system",
        "def f():\n    return ().__class__.__base__.__subclasses__()",
        "import sys\ndef f():\n    return sys.modules['os'].system('true')",
    ]:
        assert pool.run(code, "f").status == "banned", code
    # With calls unbanned the static check passes these; the run-time import guard does not.
    for code in [
        "def f():\n    return __import__('subprocess')",
        "def f():\n    return getattr(__builtins__, '__imp' + 'ort__')('sub' + 'process').run",
        "def f():\n    b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)\n"
        "    return b['__import__']('socket')",
    ]:
        r = guards.run(code, "f")
        assert r.status == "banned", (code, r)
    r = guards.run("import sys\ndef f():\n    return [m for m in ('subprocess', 'importlib', 'ctypes') if m in sys.modules]", "f")
    assert r.ok and r.value == []  # already-loaded banned modules are unreachable too
    r = pool.run("import os\ndef f():\n    return getattr(os, 'sys' + 'tem')('true')", "f")
    assert r.status == "banned"  # a name built at run time: the stub, not the static check
    assert_alive(pool)
    assert_alive(guards)


def test_builtins_tampering_does_not_leak_into_the_next_call(bare):
    r = bare.run("import builtins\ndef f():\n    builtins.len = lambda x: -1\n    builtins.print = None\n    return 1", "f")
    assert r.status in ("ok", "crashed")  # the child's own reporting may trip over its builtins
    r = bare.run("def f():\n    print('ok')\n    return len([1, 2, 3])", "f")
    assert r.ok and r.value == 3 and r.stdout == "ok\n"
    assert_alive(bare)


def test_state_does_not_leak_between_calls(bare):
    bare.run("import math\ndef f():\n    math.pi = 3\n    open('left.txt', 'w').write('x')", "f")
    r = bare.run("import math, os\ndef f():\n    return (math.pi, os.listdir('.'))", "f")
    assert r.value == (math.pi, [])
    assert_alive(bare)


def test_c_level_crash_is_banned_by_default_and_contained_otherwise(pool, bare):
    code = "import ctypes\ndef f():\n    return ctypes.string_at(0)"
    assert pool.run(code, "f").status == "banned"
    r = bare.run(code, "f")
    assert r.status == "crashed" and "SIGSEGV" in r.error
    assert_alive(pool)
    assert_alive(bare)
