"""Literal text -> Python value within fixed limits: the reading half of `values`.

Text written by untrusted code (a sandbox reply) or by the model is parsed by walking
`ast` nodes, like `ast.literal_eval`, never `eval`, and refused (LiteralError naming the
limit) before it can cost the reader more than linear work or a value it cannot show:

- text longer than `max_chars` ("longer");
- an int of more than `max_int_bits` bits ("int"), in any base: Python's own 4300-digit
  limit covers decimal only, and `0x` + 300,000 digits reads in linear time, then breaks
  every `repr`;
- nesting deeper than `max_depth` ("deep");
- more than `max_same_hash` distinct items with one hash in a set, a frozenset, a dict's
  keys, or among the scalar items of a list or tuple ("hash"): building a set (or `set(out)`
  later) from n colliding items costs n**2 comparisons. Checked in linear time, before the
  set is built.
Containers are otherwise bounded by the text: an item takes at least two characters.
"""

from __future__ import annotations

import ast
import math
from collections import Counter
from dataclasses import dataclass

from unified.values.literal import INT_BITS, MAX_CHARS, MAX_DEPTH, LiteralError

_NAMES = {"nan": math.nan, "inf": math.inf}
_CALLS = {"set": set, "frozenset": frozenset}
_SCALARS = (int, float, complex, str, bytes)


@dataclass(frozen=True)
class ReadLimits:
    max_chars: int = 10 * MAX_CHARS
    max_int_bits: int = INT_BITS
    max_depth: int = MAX_DEPTH
    max_same_hash: int = 8


def read_literal(text: str, limits: ReadLimits = ReadLimits()) -> object:
    """The value `text` writes; raises LiteralError (see module doc), never evaluates."""
    if not isinstance(text, str):
        raise LiteralError(f"expected str, got {type(text).__name__}")
    if len(text) > limits.max_chars:
        raise LiteralError(f"literal text longer than {limits.max_chars} characters")
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except Exception as e:  # noqa: BLE001 - hostile text: whatever the parser raises is "not a literal"
        raise LiteralError(f"not a literal: {type(e).__name__}: {str(e)[:200]}") from None
    try:
        return _Reader(limits).value(node, 0)
    except LiteralError:
        raise
    except Exception as e:  # noqa: BLE001 - e.g. an unhashable set item
        raise LiteralError(f"not a literal: {type(e).__name__}: {str(e)[:200]}") from None


class _Reader:
    def __init__(self, limits: ReadLimits):
        self.limits = limits

    def value(self, node: ast.AST, depth: int) -> object:
        if depth > self.limits.max_depth:
            raise LiteralError(f"literal nested deeper than {self.limits.max_depth} levels")
        if isinstance(node, ast.Constant):
            return self.constant(node.value)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.value(e, depth + 1) for e in node.elts]
            if isinstance(node, ast.Set):
                return set(self.distinct_hashes(items, items))
            self.distinct_hashes(items, [x for x in items if isinstance(x, _SCALARS)])
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise LiteralError("** in a dict literal")
            keys = self.distinct_hashes([self.value(k, depth + 1) for k in node.keys], None)
            return dict(zip(keys, [self.value(v, depth + 1) for v in node.values]))
        if isinstance(node, ast.Name) and node.id in _NAMES:
            return _NAMES[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.number(node.operand, depth)
            return _unsigned_nan(-operand if isinstance(node.op, ast.USub) else +operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            # As ast.literal_eval: only `real +/- imaginary` (the way complex numbers are written).
            left, right = self.number(node.left, depth), self.number(node.right, depth)
            if isinstance(left, complex) or not isinstance(right, complex):
                raise LiteralError("only real +/- imaginary is allowed in a literal")
            return _unsigned_nan(left + right if isinstance(node.op, ast.Add) else left - right)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            args = [self.value(a, depth + 1) for a in node.args]
            if node.func.id in _CALLS and len(args) == 1:  # set([...]): the items are hashed there
                self.distinct_hashes(list(args[0]), None)
            return _call(node.func.id, args)
        raise LiteralError(f"{type(node).__name__} is not allowed in a literal")

    def constant(self, value: object) -> object:
        if value is Ellipsis:
            raise LiteralError("... is not a literal value")
        if isinstance(value, int) and value.bit_length() > self.limits.max_int_bits:
            raise LiteralError(f"int of more than {self.limits.max_int_bits} bits")
        return value

    def number(self, node: ast.AST, depth: int) -> int | float | complex:
        value = self.value(node, depth + 1)
        if isinstance(value, bool) or not isinstance(value, (int, float, complex)):
            raise LiteralError("arithmetic on a non-number in a literal")
        return value

    def distinct_hashes(self, items: list, hashed: list | None) -> list:
        """`items`, after checking that no hash is shared by more than `max_same_hash`
        distinct items of `hashed` (None: all of `items`). Linear: equal items (a list of
        zeros) are told apart from colliding ones only within a crowded hash."""
        hashed = items if hashed is None else hashed
        counts = Counter(map(hash, hashed))  # TypeError for an unhashable set item or key
        limit = self.limits.max_same_hash
        if not counts or max(counts.values()) <= limit:
            return items
        crowded = {h: [] for h, n in counts.items() if n > limit}
        for x in hashed:
            seen = crowded.get(hash(x))
            if seen is not None and not any(y is x or y == x for y in seen):
                seen.append(x)
                if len(seen) > limit:
                    raise LiteralError(f"more than {limit} distinct items share one hash")
        return items


def _call(name: str, args: list) -> object:
    if name in _CALLS and len(args) <= 1:
        return _CALLS[name](*args)
    if name == "complex" and len(args) == 2 and all(_is_real(a) for a in args):
        return complex(*args)
    if name == "float" and len(args) == 1 and args[0] in ("nan", "inf", "-inf", "+inf"):
        return float(args[0])
    raise LiteralError(f"call of {name}() is not allowed in a literal")


def _unsigned_nan(x):
    """`-nan` reads as `nan`: every NaN is written `nan` (`to_literal`, `repr`), so a sign read
    back would make one value of two texts and two values of one (a result remembered for
    f(nan) answered f(-nan)). Complex parts likewise."""
    if isinstance(x, float) and math.isnan(x):
        return math.nan
    if isinstance(x, complex) and (math.isnan(x.real) or math.isnan(x.imag)):
        return complex(_unsigned_nan(x.real), _unsigned_nan(x.imag))
    return x


def _is_real(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
