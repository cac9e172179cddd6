"""Comparison by value with a bounded cost: the comparing half of `values`.

Python's `==`, except nan equals nan, floats may differ by `atol`, and containers compare
element-wise under these rules; tuple != list, as in Python. One side is usually a value
a sandboxed program returned (or two runs of one), so the cost must not depend on how
hostile it is, only on its size:

- lists, tuples, dicts: one step per element;
- sets: exact matches by hash first (the reader refused crowded hashes); what is left
  differs only by nan (or by `atol`): with atol 0 each side becomes a multiset of
  canonical keys (nan -> one marker), compared in linear time, never by pairing items;
  with atol > 0, real numbers are matched in sorted order (n log n), anything else pairs
  greedily within the step budget;
- every element compared is a step; past `max_steps` the values count as different.
`compare` returns the verdict and the steps it took.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from unified.values.literal import MAX_DEPTH

MAX_STEPS = 200_000  # elements compared; an honest reply (<= 64 KB of text) has far fewer
_NAN, _NUM, _TUPLE, _FROZENSET = object(), object(), object(), object()


@dataclass(frozen=True)
class Comparison:
    equal: bool
    steps: int


class _Exhausted(Exception):
    pass


def compare(a: object, b: object, atol: float = 0.0, max_steps: int = MAX_STEPS) -> Comparison:
    """Whether `a` equals `b` by the rules above, and the steps it took."""
    comparer = _Comparer(atol, max_steps)
    try:
        if a is b or a == b:  # our rules only ever accept more than ==
            return Comparison(True, 1)
    except Exception:  # noqa: BLE001 - e.g. a too-deep structure; decide below
        pass
    try:
        equal = comparer.equal(a, b, 0)
    except (_Exhausted, RecursionError, OverflowError, TypeError, ValueError):
        equal = False
    return Comparison(equal, comparer.steps)


class _Comparer:
    def __init__(self, atol: float, max_steps: int):
        self.atol, self.max_steps, self.steps = atol, max_steps, 0

    def spend(self, n: int) -> None:
        self.steps += n
        if self.steps > self.max_steps:
            raise _Exhausted

    def equal(self, a: object, b: object, depth: int) -> bool:
        self.spend(1)
        if depth > MAX_DEPTH:
            return False
        if _is_number(a) and _is_number(b):
            if isinstance(a, complex) or isinstance(b, complex):
                a, b = complex(a), complex(b)
                return _num_equal(a.real, b.real, self.atol) and _num_equal(a.imag, b.imag, self.atol)
            return _num_equal(a, b, self.atol)
        for kind in (list, tuple, dict, (set, frozenset)):
            if isinstance(a, kind) or isinstance(b, kind):
                if not (isinstance(a, kind) and isinstance(b, kind)) or len(a) != len(b):
                    return False
                break
        else:
            return bool(a == b)
        if isinstance(a, (list, tuple)):
            return all(x is y or self.equal(x, y, depth + 1) for x, y in zip(a, b))
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(self.equal(a[k], b[k], depth + 1) for k in a)
        return self.sets_equal(a, b, depth)

    def sets_equal(self, a, b, depth: int) -> bool:
        left, right = list(a - b), list(b - a)  # exact matches by hash; the rest differs at most by nan/atol
        self.spend(len(a))
        if len(left) != len(right):
            return False
        if not left:
            return True
        keys_left, keys_right = Counter(map(_key, left)), Counter(map(_key, right))
        if self.atol == 0:
            return keys_left == keys_right
        common = keys_left & keys_right  # equal up to nan: matched; pair the rest within atol
        left = _without(left, common.copy())
        right = _without(right, common)
        if all(_is_real(x) for x in left + right):
            return all(_num_equal(x, y, self.atol) for x, y in zip(sorted(left), sorted(right)))
        return self.pair(left, right, depth)

    def pair(self, left: list, right: list, depth: int) -> bool:
        for x in left:
            for i, y in enumerate(right):
                if self.equal(x, y, depth + 1):
                    del right[i]
                    break
            else:
                return False
        return not right


def _without(items: list, keys: Counter) -> list:
    """`items` less one item per count of its key in `keys` (which is used up)."""
    rest = []
    for x in items:
        k = _key(x)
        if keys[k] > 0:
            keys[k] -= 1
        else:
            rest.append(x)
    return rest


def _key(x: object) -> object:
    """A hashable key that is equal for values equal up to nan (nan == nan), and is the
    value itself when no nan is inside (a subclass counts as its base type)."""
    if isinstance(x, float):
        return (_NUM, _NAN, 0.0) if x != x else float(x)
    if isinstance(x, complex):
        r, i = x.real, x.imag
        return (_NUM, _NAN if r != r else r, _NAN if i != i else i) if x != x else complex(x)
    if isinstance(x, tuple):
        return (_TUPLE, tuple(map(_key, x)))
    if isinstance(x, frozenset):
        return (_FROZENSET, frozenset(Counter(map(_key, x)).items()))
    return x


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, complex))


def _is_real(x: object) -> bool:
    return isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x))


def _num_equal(x: int | float, y: int | float, atol: float) -> bool:
    if x == y:
        return True
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    if atol > 0 and (isinstance(x, float) or isinstance(y, float)):
        return math.isfinite(x) and math.isfinite(y) and abs(x - y) <= atol
    return False
