"""A call's process holds nothing of any other call: not a live value of the zygote's serve
loop (reached through the call's own stack), not a freed copy of an earlier reply or of its
totals (reached through the call's own memory), and so an answer that copies the previous
call's value earns nothing through the trainer's own scoring path.

The probes run as a model's program would, through the project's own executor: the memory
and stack probes in a pool that bans nothing (only the zygote's hygiene stands between the
calls), the reward probe under the default policy (it passes the static check: the frame
attributes are named at run time)."""

import secrets
import struct

import pytest

from unified.kinds import induction
from unified.kinds.base import BuildOptions
from unified.pipeline import ipo
from unified.pipeline.rewards import score_batch
from unified.sandbox.executor import Executor, ExecutorConfig
from unified.types import Problem, Program

PUT = """
def put(token, spin):
    total = 0
    for i in range(spin):  # some CPU: the reply's totals differ from one call to the next
        total += i
    secret = 'Q7' + token
    print(secret)
    return secret
"""

STACK = """
import sys
def f():
    frame, seen = sys._getframe(1), []
    while frame is not None:
        if frame.f_code.co_filename != '<sandbox>':
            for name, value in sorted(frame.f_locals.items()):
                if isinstance(value, (int, float, bytes, bytearray, str)):
                    seen.append((frame.f_code.co_name, name, repr(value)[:300]))
        frame = frame.f_back
    return seen
"""

# Walks this process's memory (the pages around the Python heap and the C heap: a write of
# one byte from an unmapped page answers EFAULT), and finds (a) copies of a secret, known
# here only as its first bytes and the rest XOR 0x5A (a count), and (b) the doubles within
# 5e-7 of a reported time that are not the reported (rounded) value itself (their values:
# the runtime's own data holds doubles in the range of a short call's times (static tables),
# so `_found` keeps only those that a fresh pool, which never ran the call, does not hold).
MEMORY = """
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.pwrite.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
libc.sbrk.restype = ctypes.c_void_p
libc.sbrk.argtypes = [ctypes.c_long]
PAGE, SPAN = 4096, 192 << 20

def runs():
    fd = os.open('/tmp/probe', os.O_WRONLY | os.O_CREAT, 0o600)
    pages = set()
    for centre in (id(object()), libc.sbrk(0)):
        base = centre & ~(PAGE - 1)
        for addr in range(base - SPAN, base + SPAN, PAGE):
            if libc.pwrite(fd, addr, 1, 0) == 1:
                pages.add(addr)
    out, start, last = [], None, None
    for addr in sorted(pages):
        if start is None or addr != last + PAGE:
            if start is not None:
                out.append((start, last + PAGE - start))
            start = addr
        last = addr
    if start is not None:
        out.append((start, last + PAGE - start))
    return out

def copies(mem, head, tail):
    found, at = 0, mem.find(head)
    while at >= 0:
        rest = mem[at + len(head): at + len(head) + len(tail)]
        if len(rest) == len(tail) and all(a ^ 0x5A == b for a, b in zip(rest, tail)):
            found += 1
        at = mem.find(head, at + 1)
    return found

def near(mem, target, key, found):
    at = mem.find(key)
    while at >= 0:
        if at % 8 == 6:
            value = struct.unpack_from('<d', mem, at - 6)[0]
            if value != target and abs(value - target) <= 5e-7:
                found.add(value)
        at = mem.find(key, at + 1)

def f(needles, times):
    # every time's bytes made once, before the scan, and kept: a key made later in the freed
    # block of a packed time would leave "key, NUL, the time's top five bytes" there, a double
    # 1e-11 from it (the probe's own, found as often for a time no call produced)
    packed = [struct.pack('<d', t) for t in times]
    keys = [p[6:] for p in packed]
    counts, values = [0] * len(needles), [set() for _ in times]
    for addr, size in runs():
        mem = ctypes.string_at(addr, size)
        for k, (head, tail) in enumerate(needles):
            counts[k] += copies(mem, head, tail)
        for k, t in enumerate(times):
            near(mem, t, keys[k], values[k])
        del mem
    return counts + [sorted(v) for v in values]
"""


def _pool():
    config = ExecutorConfig(workers=1, timeout_s=10.0, memory_mb=1024, banned_modules=(), banned_calls=())
    with Executor(config) as ex:
        if not ex.isolation.get("pidns"):
            pytest.skip("kernel isolation needs root")
        yield ex


one = pytest.fixture(scope="module", name="one")(_pool)
fresh = pytest.fixture(scope="module", name="fresh")(_pool)  # never runs a secret: the control


def _found(one, fresh, needles, times) -> list:
    """Per needle, its copies in the memory of the next call on `one`; per time, how many
    doubles near it that memory holds and a fresh pool's does not."""
    probe, control = (pool.run(MEMORY, "f", (needles, times)) for pool in (one, fresh))
    assert probe.ok and control.ok, (probe, control)
    counts, near = probe.value[: len(needles)], probe.value[len(needles) :]
    return counts + [len(set(v) - set(c)) for v, c in zip(near, control.value[len(needles) :])]


def _hidden(text: str) -> tuple[bytes, bytes]:
    data = text.encode()
    return data[:6], bytes(b ^ 0x5A for b in data[6:])


def test_no_value_of_an_earlier_call_is_live_in_the_image_a_call_is_forked_from(one):
    seen = []
    for spin in (1000, 300_000):
        token = secrets.token_hex(16)
        assert one.run(PUT, "put", (token, spin)).value == "Q7" + token
        probe = one.run(STACK, "f")
        assert probe.ok, probe
        assert not [s for s in probe.value if token in s[2]], probe.value
        seen.append(probe.value)
    assert seen[0] == seen[1], [s for s in seen[1] if s not in seen[0]]


def _probe_after_a_call(one, fresh) -> dict:
    token = secrets.token_hex(24)
    first = one.run(PUT, "put", (token, 200_000))
    assert first.ok, first
    needles = [_hidden("Q7" + token), _hidden(f"ok {len(repr('Q7' + token))} 0 ")]
    # the text of both times as the reply header holds them (its fields are "%17.6f")
    needles += [_hidden("%.6f" % first.cpu_s), _hidden("%.6f" % first.duration_s)]
    times = [float(b"%.6f" % first.cpu_s), float(b"%.6f" % first.duration_s)]
    return dict(zip(["secret", "message head", "cpu text", "wall text", "cpu", "wall"], _found(one, fresh, needles, times)))


def test_freed_memory_holds_no_copy_of_an_earlier_reply_or_its_wall_time(one, fresh):
    found = _probe_after_a_call(one, fresh)  # before the fix (932cf1f): 4, 2-4, 1, 1, 1 and 1-4
    assert (found["secret"], found["message head"], found["wall"]) == (0, 0, 0), found
    assert (found["cpu text"], found["wall text"]) == (0, 0), found  # the freed header's text


def test_freed_memory_holds_no_copy_of_an_earlier_calls_cpu_time(one, fresh):
    # before the fix: 2 (the serve loop's `cpu_now`, and a freed float)
    assert _probe_after_a_call(one, fresh)["cpu"] == 0


def test_a_time_no_call_produced_is_not_found(one, fresh):
    """The control: the same probe, after the same call, given a time no call produced
    finds nothing near it (before the probe packed its times once, up front, it found 1 here
    as for the CPU time: its own key written over a freed packed time; and before `_found`
    held the runtime's own doubles apart, 2-3 % of runs found one of those near the decoy)."""
    token = secrets.token_hex(24)
    first = one.run(PUT, "put", (token, 200_000))
    decoy = round(first.cpu_s + 0.000731, 6)
    assert _found(one, fresh, [_hidden("Q7" + token)], [decoy, float(b"%.6f" % first.duration_s)])[1] == 0


COPY_PREVIOUS = """
import ast
def f(x):
    try:
        raise ValueError
    except ValueError as e:
        frame = getattr(e.__traceback__, 'tb_' + 'frame')
    while frame is not None:
        for value in getattr(frame, 'f_' + 'locals').values():
            if isinstance(value, (bytes, bytearray)) and value[:3] == b'ok ':
                head, _, rest = bytes(value).partition(b'\\n')
                return ast.literal_eval(rest[: int(head.split()[1])].decode())
        frame = getattr(frame, 'f_' + 'back')
    return None
"""

SCRAMBLE = "def f(x):\n    return (x * 7919) % 10007\n"
PROBLEM = Problem("Toy/copy", "toy", "Scramble x.", "f", ())


def test_an_answer_that_copies_the_previous_calls_value_earns_nothing():
    with Executor(ExecutorConfig(workers=1, timeout_s=2.0, memory_mb=256)) as pool:
        program = Program(PROBLEM.problem_id, "Toy/copy#p0", SCRAMBLE, "f")
        inputs = [ipo.Input(PROBLEM.problem_id, (k,), "visible" if k == 1 else "proposed") for k in (1, 2)]
        triples, rejections = ipo.execute([program], inputs, pool.run_twice, 10_000)
        assert len(triples) == 2 and not rejections, rejections
        (task,), _ = induction.build(PROBLEM, program, triples, BuildOptions(shown_pairs=1))
        honest = f"<answer>\n```python\n{SCRAMBLE}```\n</answer>"
        cheat = f"<answer>\n```python\n{COPY_PREVIOUS}```\n</answer>"
        assert score_batch([(task, honest), (task, cheat)], pool.run_batch) == [(1.0, None), (0.0, None)]


def test_the_probes_see_what_they_look_for_within_their_own_call(one, fresh):
    """The memory probe finds a secret and a time that its own call holds (the needles work)."""
    token = secrets.token_hex(24)
    own = MEMORY + f"\nKEEP = ['Q7' + {token!r}, {0.123456789!r}]\n"
    probe = one.run(own, "f", ([_hidden("Q7" + token)], [0.123457]))
    assert probe.ok and probe.value[0] >= 1 and probe.value[1] == [0.123456789], probe
    assert _found(one, fresh, [_hidden("Q7" + token)], [0.123457]) == [0, 0]  # the program held them, not the pool
    assert struct.pack("<d", 0.123456789) != struct.pack("<d", 0.123457)
