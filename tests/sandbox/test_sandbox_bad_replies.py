"""A reply can cost its call the reward, never the run: the parent reads every reply as
hostile. Integers and containers past fixed limits come back as a failed call
(`bad_reply`), showing a returned value is bounded and never raises, and comparing
returned values with expected ones costs work in proportion to their size: no quadratic
pairing of NaN-laden sets, no set built from thousands of colliding hashes.

Costs are asserted as work done (Python-level events counted with sys.setprofile, or the
limit a reply hit), never as time."""

import math
import sys

import pytest

from unified.kinds.base import BuildOptions
from unified.pipeline import ipo
from unified.pipeline.programs import check_visible
from unified.text.prompts import display
from unified.pipeline.rewards import score_batch
from unified.values import from_literal, to_literal, values_equal
from unified.sandbox.executor import ExecResult, Executor, ExecutorConfig
from unified.sandbox.reply import parse_reply
from unified.types import IOTriple, Problem, Program, TestCase
from unified.kinds import induction

MAX_OUT = ExecutorConfig.max_output_bytes
HEAD = b"0 0.001 0.001 -\n"
M61 = 2**61 - 1  # ints k * M61 + c all hash to c


class _TooMuchWork(BaseException):
    pass


def work(fn, *args, cap=3_000_000):
    """(fn's result, Python-level events while it ran); stops the run past `cap` events."""
    count = [0]

    def profile(frame, event, arg):
        count[0] += 1
        if count[0] > cap:
            raise _TooMuchWork

    sys.setprofile(profile)
    try:
        out = fn(*args)
    except _TooMuchWork:
        out = _TooMuchWork
    finally:
        sys.setprofile(None)
    return out, count[0]


def reply(value_text: str) -> bytes:
    v = value_text.encode()
    return HEAD + b"ok %d 0 0\n" % len(v) + v


def nan_set_text(n: int) -> str:
    return "{" + ", ".join(f"complex(nan, {k}.0)" for k in range(n)) + "}"


def forger(expression: str) -> str:
    """A program that writes its own reply frame, claiming the literal text `expression`
    builds as its return value (small source: model text is cut at 20,000 characters)."""
    return (
        "import io, os\n"
        "def f(x):\n"
        f"    value = ({expression}).encode()\n"
        "    message = b'ok %d 0 0\\n' % len(value) + value\n"
        "    for fd in range(3, 40):\n"
        "        try:\n"
        "            io.FileIO(fd, 'wb', closefd=False).write(message)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    )


FORGED = {  # text built in the sandbox: each reaches the parent (under the worker's ~320 KB cap)
    "huge_hex": "'0x' + 'f' * 300_000",
    "nan_set": "'{' + ', '.join('complex(nan, %d.0)' % k for k in range(8000)) + '}'",
    "colliding": "'{' + ', '.join(str(k * (2**61 - 1) + 7) for k in range(1, 2000)) + '}'",
}


HUGE_HEX = "0x" + "f" * 300_000  # 1.2 million bits: Python's 4300-digit limit covers decimal only
BIG_NAN_SET = nan_set_text(8000)  # ~190 KB: more than any honest reply under max_output_bytes
COLLIDING = "{" + ", ".join(str(k * M61 + 7) for k in range(1, 2000)) + "}"


# ------------------------------------------------------------------ decoding


@pytest.mark.parametrize(
    "text, limit",
    [
        ("0x" + "f" * 60_000, "int"),
        (HUGE_HEX, "longer"),
        ("-0b" + "1" * 20_000, "int"),
        ("[" + "0x" + "f" * 5000 + "]", "int"),
        (BIG_NAN_SET, "long"),
        (COLLIDING, "hash"),
        ("{%s: 1}" % COLLIDING[1:-1].replace(", ", ": 1, "), "hash"),
        ("[" * 150 + "]" * 150, "deep"),
    ],
    ids=["hex", "huge_hex", "bin", "hex_in_list", "nan_set", "colliding_set", "colliding_dict", "deep"],
)
def test_oversized_or_colliding_replies_are_bad_replies(text, limit):
    (r, events) = work(parse_reply, reply(text), MAX_OUT, ExecResult)
    assert r is not _TooMuchWork and r.status == "bad_reply", (limit, r)
    assert limit in r.error, r.error
    assert events < 200_000, events  # refused before the expensive part, not after it


def test_honest_values_at_the_limits_still_read():
    for value in [16**3000, -(2**14000), [1] * 20_000, {k * M61 + 7 for k in range(1, 6)}, {1: 2, -1: 3, -2: 4}]:
        text = to_literal(value, MAX_OUT)
        r = parse_reply(reply(text), MAX_OUT, ExecResult)
        assert r.ok and r.value == value, (str(value)[:40], r.status, r.error)


def test_model_text_with_a_huge_hex_int_is_not_a_literal():
    from unified.values import LiteralError

    with pytest.raises(LiteralError):
        from_literal(HUGE_HEX)


# ------------------------------------------------------------------ display


@pytest.mark.parametrize(
    "value",
    [
        16**300_000 - 1,
        [16**300_000],
        {"k": [[[[16**5000]]]]},
        [[]] * 10**6,
        "x" * 10**7,
        list(range(10**5)),
        [[[[[[[[[[1]]]]]]]]]] * 1000,
    ],
    ids=["huge_int", "huge_int_in_list", "deep_huge_int", "many_lists", "long_str", "long_list", "nested"],
)
def test_display_is_bounded_and_never_raises(value):
    text = display(value)
    assert isinstance(text, str) and 0 < len(text) <= 2000


def test_display_survives_a_hostile_repr():
    class Hostile:
        def __repr__(self):
            raise RuntimeError("no")

    assert "Hostile" in display(Hostile())
    assert display([1, 2]) == "[1, 2]"


# ------------------------------------------------------------------ comparing


def test_comparing_nan_sets_costs_work_linear_in_their_size():
    n = 2500  # an honest reply: under 64 KB of literal text
    text = nan_set_text(n)
    assert len(text) < MAX_OUT
    a, b = from_literal(text), from_literal(text)  # equal by our rules (nan == nan), no common object
    same, events = work(values_equal, a, b)
    assert same is True and events < 40 * n, events
    c = from_literal(nan_set_text(n - 1)[:-1] + ", complex(nan, -1.0)}")
    differ, events = work(values_equal, a, c)
    assert differ is False and events < 40 * n, events
    with_tolerance, events = work(values_equal, a, b, 1e-9)
    assert with_tolerance is True and events < 200 * n, events


def test_phase_two_check_of_the_worst_honest_reply_is_bounded():
    n = 2500
    first = parse_reply(reply(nan_set_text(n)), MAX_OUT, ExecResult)
    second = parse_reply(reply(nan_set_text(n)), MAX_OUT, ExecResult)
    reason, events = work(ipo.classify_run, first, second, MAX_OUT)
    assert reason is not _TooMuchWork and events < 400 * n, events


def test_float_sets_still_match_within_tolerance():
    assert values_equal({1.0, 2.0, math.nan}, {1.0 + 1e-9, 2.0, math.nan}, atol=1e-6)
    assert not values_equal({1.0, 2.0}, {1.0, 2.1}, atol=1e-6)
    assert values_equal({(1.0, math.nan), (2.0, 3.0)}, {(1.0, math.nan), (2.0, 3.0 + 1e-9)}, atol=1e-6)
    assert values_equal(frozenset({complex(math.nan, 1)}), frozenset({complex(math.nan, 1)}))
    assert not values_equal({complex(math.nan, 1)}, {complex(math.nan, 2)})


# ------------------------------------------------------------------ through the pipeline


PROBLEM = Problem("Toy/forged", "toy", "Return x + 1.", "f", (TestCase((1,), 2), TestCase((2,), 3)))


@pytest.fixture(scope="module")
def bare():
    cfg = ExecutorConfig(workers=2, timeout_s=2.0, memory_mb=256, banned_modules=(), banned_calls=())
    with Executor(cfg) as ex:  # the default max_output_bytes: forged replies up to ~320 KB reach the parent
        yield ex


@pytest.mark.parametrize("forged", FORGED)
def test_a_forged_reply_fails_its_call_in_every_phase(bare, forged):
    program = Program(PROBLEM.problem_id, "Toy/forged#p0", forger(FORGED[forged]), "f")
    r = bare.run(program.code, "f", (1,))
    assert r.status == "bad_reply", (r.status, r.error)
    # phase 1: the visible check rejects it (and shows it without raising)
    (passing, rejections), events = work(check_visible, [program], [PROBLEM], bare.run_batch)
    assert passing == set() and [x.reason for x in rejections] == ["fails_visible"], rejections
    assert events < 300_000, events
    # phase 2: no triple, a counted rejection, bounded work
    inputs = [ipo.Input(PROBLEM.problem_id, (k,), "visible") for k in (1, 2)]
    (triples, rejections), events = work(ipo.execute, [program], inputs, bare.run_twice, MAX_OUT)
    assert triples == [] and len(rejections) == 2, rejections
    assert events < 300_000, events
    # the reward: an induction answer that forges its reply earns 0
    honest = Program(PROBLEM.problem_id, "Toy/forged#p1", "def f(x):\n    return x + 1\n", "f")
    triples = [IOTriple(PROBLEM.problem_id, honest.program_id, (k,), k + 1, "visible") for k in (1, 2, 3)]
    (task,), _ = induction.build(PROBLEM, honest, triples, BuildOptions(shown_pairs=1))
    answer = f"<answer>\n```python\n{program.code}```\n</answer>"
    right = "<answer>\n```python\ndef f(x):\n    return x + 1\n```\n</answer>"
    assert score_batch([(task, answer), (task, right)], bare.run_batch) == [(0.0, None), (1.0, None)]
