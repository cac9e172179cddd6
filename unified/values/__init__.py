"""Python values <-> literal text, comparison by value, and bounded display.

Test arguments, program outputs and model answers travel as literal text (prompts,
Parquet, the sandbox's result pipe) and are compared as values. Nothing here ever calls
`eval` or unpickles: text is parsed by walking `ast` nodes, like `ast.literal_eval`,
so text written by untrusted code or by the model is safe to read.

Covered: None, bool, int, float (nan, inf, -inf and -0.0 survive), complex, str, bytes,
tuple, list, dict, set, frozenset, nested up to `MAX_DEPTH`. Subclasses of those types
are written as their base type (Counter -> dict, namedtuple -> tuple, np.float64 ->
float). `from_literal` accepts everything `ast.literal_eval` does plus `nan`, `inf`,
`frozenset(...)`, `complex(re, im)` and `float('nan')`.

Hostile values cost bounded work (each part is a module of this package):
- `from_literal` (`literal_read`) refuses, with LiteralError naming the limit, text over
  `max_chars`, ints of more than `INT_BITS` bits in any base (hex too), nesting past
  `MAX_DEPTH` and sets/dicts/lists whose items crowd on one hash;
- `values_equal` (`compare`) takes steps linear in the values' size (no quadratic pairing
  of NaN-laden sets) and at most `MAX_STEPS`;
- `display_text` (`shown`) is bounded and never raises.

Not covered: any other type (objects, numpy arrays, bytearray, ranges) - `to_literal`
raises `LiteralError`; the sign of a zero part of a complex number may not survive.
"""

from __future__ import annotations

from unified.values.compare import MAX_STEPS, Comparison, compare
from unified.values.literal import INT_BITS, MAX_CHARS, MAX_DEPTH, LiteralError, to_literal
from unified.values.literal_read import ReadLimits, read_literal
from unified.values.shown import MAX_SHOWN, shown

__all__ = [
    "Comparison",
    "INT_BITS",
    "LiteralError",
    "MAX_CHARS",
    "MAX_DEPTH",
    "MAX_SHOWN",
    "MAX_STEPS",
    "ReadLimits",
    "compare",
    "display_text",
    "from_literal",
    "to_literal",
    "values_equal",
]


def from_literal(text: str, max_chars: int = 10 * MAX_CHARS) -> object:
    """The value written by `text` (see module doc); raises LiteralError, never evaluates."""
    return read_literal(text, ReadLimits(max_chars=max_chars))


def values_equal(a: object, b: object, atol: float = 0.0) -> bool:
    """Python's `==`, except nan equals nan, floats may differ by `atol`, and containers
    compare element-wise under these rules. tuple != list, as in Python. Bounded cost."""
    return compare(a, b, atol).equal


def display_text(value: object, max_chars: int = MAX_SHOWN) -> str:
    """Literal text of `value`, or an abbreviated repr, at most `max_chars`; never raises."""
    return shown(value, max_chars)
