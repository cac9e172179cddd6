"""unified.values: literal text round trips, safe reading, comparison by value."""

import math
from collections import Counter, OrderedDict, namedtuple

import pytest

from unified.values import LiteralError, from_literal, to_literal, values_equal

ROUND_TRIP = [
    None,
    True,
    False,
    0,
    -7,
    10**100,
    1.5,
    -0.0,
    math.inf,
    -math.inf,
    1 + 2j,
    complex(math.nan, 1),
    "",
    "a'b\"\n",
    b"\x00\xff",
    (),
    (1,),
    (1, (2, [3])),
    [],
    [1, "x"],
    {},
    {"a": [1, {2: (3,)}]},
    set(),
    {1, 2},
    frozenset(),
    frozenset({(1, 2), "x"}),
    {frozenset({1}): {2.5}},
    [math.nan],
]


@pytest.mark.parametrize("value", ROUND_TRIP, ids=repr)
def test_round_trip_keeps_type_and_value(value):
    back = from_literal(to_literal(value))
    assert type(back) is type(value)
    assert values_equal(back, value)


def test_negative_zero_and_nan_survive():
    assert math.copysign(1.0, from_literal(to_literal(-0.0))) == -1.0
    assert math.isnan(from_literal(to_literal(math.nan)))
    assert from_literal("[nan, inf, -inf]")[1:] == [math.inf, -math.inf]
    assert math.isnan(from_literal("float('nan')"))


def test_subclasses_are_written_as_their_base_type():
    point = namedtuple("Point", "x y")
    assert from_literal(to_literal(point(1, 2))) == (1, 2)
    assert type(from_literal(to_literal(Counter("aab")))) is dict
    assert from_literal(to_literal(OrderedDict(b=1, a=2))) == {"b": 1, "a": 2}


def test_set_text_does_not_depend_on_order():
    assert to_literal({"b", "a", "c"}) == "{'a', 'b', 'c'}"


@pytest.mark.parametrize(
    "value",
    [object(), bytearray(b"x"), range(3), 10**5000, "x" * 2_000_000],
    ids=["object", "bytearray", "range", "bigint", "bigstr"],
)
def test_non_literals_and_huge_values_are_refused(value):
    with pytest.raises(LiteralError):
        to_literal(value)


def test_cycles_and_deep_nesting_are_refused():
    cyclic = []
    cyclic.append(cyclic)
    with pytest.raises(LiteralError):
        to_literal(cyclic)
    with pytest.raises(LiteralError, match="size limit"):
        to_literal(list(range(1000)), max_chars=100)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "2**10",
        "[1] * 3",
        "x",
        "...",
        "9" * 5000,
        "{**a}",
        "(" * 300 + ")" * 300,
        "open('f')",
        "(1).real",
        "lambda: 1",
        "f'{1}'",
    ],
)
def test_from_literal_never_evaluates(text):
    with pytest.raises(LiteralError):
        from_literal(text)


def test_from_literal_reads_python_spellings():
    assert from_literal(" (1+2j) ") == 1 + 2j
    assert from_literal("-1j") == -1j
    assert from_literal("complex(1.0, -2.0)") == 1 - 2j
    assert from_literal("set()") == set()
    assert from_literal("frozenset({1})") == frozenset({1})


def test_values_equal_rules():
    assert not values_equal((1, 2), [1, 2])  # tuple is not list
    assert values_equal([1.0, 2], [1, 2])
    assert values_equal({1.0, math.nan}, {1, float("nan")})
    assert values_equal({"a": [math.nan]}, {"a": [math.nan]})
    assert not values_equal(0.1 + 0.2, 0.3)
    assert values_equal(0.1 + 0.2, 0.3, atol=1e-9)
    assert values_equal([(0.1 + 0.2, "x")], [(0.3, "x")], atol=1e-9)
    assert not values_equal([1, 2], [1, 2, 3])
    assert not values_equal({"a": 1}, {"b": 1})
    assert not values_equal("a", b"a")
    assert values_equal(1 + 1e-12j, 1, atol=1e-9)
    assert not values_equal(math.inf, 1e308, atol=1.0)
