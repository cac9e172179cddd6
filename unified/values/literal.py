"""Python values -> literal text (the writing half of `values`; `from_literal` reads it back).

Kept apart, with nothing but `math` imported, because the sandbox's zygote loads this
module's source into every call's process (by file name: `sandbox.config._HARNESS`):
each import there makes every fork slower.
See `values` for what is covered.
"""

from __future__ import annotations

import math

MAX_DEPTH = 100
MAX_CHARS = 1_000_000
_INT_DIGITS = 4300  # CPython's default int<->str limit; bigger ints are refused, not rendered
INT_BITS = 14_276  # ~ _INT_DIGITS decimal digits: the largest int written here, and read back by `values`


class LiteralError(ValueError):
    """The value has no (small enough) literal form, or the text is not a literal."""


def to_literal(value: object, max_chars: int = MAX_CHARS) -> str:
    """Literal text of `value` that `from_literal` reads back; raises LiteralError."""
    out: list[str] = []
    _emit(value, out, [max_chars], 0)
    return "".join(out)


def _spend(budget: list[int], n: int) -> None:
    budget[0] -= n
    if budget[0] < 0:
        raise LiteralError("value too large: its literal text exceeds the size limit")


def _emit(v: object, out: list[str], budget: list[int], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise LiteralError(f"value nested deeper than {MAX_DEPTH} levels (or cyclic)")
    if isinstance(v, (tuple, list)):
        _emit_sequence(v, out, budget, depth)
    elif isinstance(v, dict):
        _emit_dict(v, out, budget, depth)
    else:
        text = _set_text(v, budget, depth) if isinstance(v, (set, frozenset)) else _scalar_text(v, budget)
        _spend(budget, len(text))
        out.append(text)


def _scalar_text(v: object, budget: list[int]) -> str:
    if v is None or v is True or v is False:
        return repr(v)
    if isinstance(v, int):
        # Check the size before repr: rendering a huge int is quadratic.
        if int.bit_length(v) > INT_BITS:
            raise LiteralError(f"int too large to render (more than {_INT_DIGITS} digits)")
        return int.__repr__(int(v))
    if isinstance(v, float):
        return _float(float(v))
    if isinstance(v, complex):
        c = complex(v)
        finite = math.isfinite(c.real) and math.isfinite(c.imag)
        return repr(c) if finite else f"complex({_float(c.real)}, {_float(c.imag)})"
    if isinstance(v, (str, bytes)):
        _spend(budget, len(v))  # before repr, so a huge string costs nothing
        return repr(str(v) if isinstance(v, str) else bytes(v))
    raise LiteralError(f"{type(v).__name__} is not a literal type")


def _emit_sequence(v: tuple | list, out: list[str], budget: list[int], depth: int) -> None:
    opening, closing = ("(", ")") if isinstance(v, tuple) else ("[", "]")
    _spend(budget, 2)
    out.append(opening)
    for i, item in enumerate(v):
        if i:
            out.append(", ")
            _spend(budget, 2)
        _emit(item, out, budget, depth + 1)
    if isinstance(v, tuple) and len(v) == 1:
        _spend(budget, 1)  # every character is paid for: the text is never longer than max_chars
        out.append(",")
    out.append(closing)


def _emit_dict(v: dict, out: list[str], budget: list[int], depth: int) -> None:
    _spend(budget, 2)
    out.append("{")
    for i, (key, item) in enumerate(v.items()):
        if i:
            out.append(", ")
        _emit(key, out, budget, depth + 1)
        out.append(": ")
        _spend(budget, 4)
        _emit(item, out, budget, depth + 1)
    out.append("}")


def _set_text(v: set | frozenset, budget: list[int], depth: int) -> str:
    """Sorted element texts: the same set always gives the same text, whatever the hash seed."""
    items = []
    for item in v:
        parts: list[str] = []
        _emit(item, parts, budget, depth + 1)
        _spend(budget, 2)
        items.append("".join(parts))
    items.sort()
    body = "{" + ", ".join(items) + "}" if items else ""
    budget[0] += len(body)  # the elements were paid for already; the caller pays for the text again
    return f"frozenset({body})" if isinstance(v, frozenset) else (body or "set()")


def _float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)
