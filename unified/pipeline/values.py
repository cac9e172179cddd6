"""Python values <-> literal text, and comparison by value.

Test arguments, program outputs and model answers travel as literal text (prompts,
Parquet, the sandbox's result pipe) and are compared as values. Nothing here ever calls
`eval` or unpickles: text is parsed by walking `ast` nodes, like `ast.literal_eval`,
so text written by untrusted code or by the model is safe to read.

Covered: None, bool, int, float (nan, inf, -inf and -0.0 survive), complex, str, bytes,
tuple, list, dict, set, frozenset, nested up to `MAX_DEPTH`. Subclasses of those types
are written as their base type (Counter -> dict, namedtuple -> tuple, np.float64 ->
float). `from_literal` accepts everything `ast.literal_eval` does plus `nan`, `inf`,
`frozenset(...)`, `complex(re, im)` and `float('nan')`.

Not covered: any other type (objects, numpy arrays, bytearray, ranges) - `to_literal`
raises `LiteralError`; the sign of a zero part of a complex number may not survive.
"""

from __future__ import annotations

import ast
import math

from unified.sandbox.literal import MAX_CHARS, MAX_DEPTH, LiteralError, to_literal

__all__ = ["LiteralError", "MAX_CHARS", "MAX_DEPTH", "from_literal", "to_literal", "values_equal"]

# ------------------------------------------------------------------------------ reading

_NAMES = {"nan": math.nan, "inf": math.inf}
_CALLS = {"set": set, "frozenset": frozenset}


def from_literal(text: str, max_chars: int = 10 * MAX_CHARS) -> object:
    """The value written by `text` (see module doc); raises LiteralError, never evaluates."""
    if not isinstance(text, str):
        raise LiteralError(f"expected str, got {type(text).__name__}")
    if len(text) > max_chars:
        raise LiteralError(f"literal text longer than {max_chars} characters")
    try:
        node = ast.parse(text.strip(), mode="eval").body
        return _value(node)
    except LiteralError:
        raise
    except Exception as e:  # noqa: BLE001 - hostile text: whatever the parser raises is "not a literal"
        raise LiteralError(f"not a literal: {type(e).__name__}: {e}") from None


def _value(node: ast.AST) -> object:
    if isinstance(node, ast.Constant):
        if node.value is Ellipsis:
            raise LiteralError("... is not a literal value")
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Set):
        return {_value(e) for e in node.elts}
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise LiteralError("** in a dict literal")
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _number(node.operand)
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        # As ast.literal_eval: only `real +/- imaginary` (the way complex numbers are written).
        left, right = _number(node.left), _number(node.right)
        if isinstance(left, complex) or not isinstance(right, complex):
            raise LiteralError("only real +/- imaginary is allowed in a literal")
        return left + right if isinstance(node.op, ast.Add) else left - right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        return _call(node.func.id, [_value(a) for a in node.args])
    raise LiteralError(f"{type(node).__name__} is not allowed in a literal")


def _number(node: ast.AST) -> int | float | complex:
    value = _value(node)
    if isinstance(value, bool) or not isinstance(value, (int, float, complex)):
        raise LiteralError("arithmetic on a non-number in a literal")
    return value


def _call(name: str, args: list) -> object:
    if name in _CALLS and len(args) <= 1:
        return _CALLS[name](*args)
    if name == "complex" and len(args) == 2 and all(_is_real(a) for a in args):
        return complex(*args)
    if name == "float" and len(args) == 1 and args[0] in ("nan", "inf", "-inf", "+inf"):
        return float(args[0])
    raise LiteralError(f"call of {name}() is not allowed in a literal")


def _is_real(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# ------------------------------------------------------------------------------ comparing


def values_equal(a: object, b: object, atol: float = 0.0) -> bool:
    """Python's `==`, except nan equals nan, floats may differ by `atol`, and containers
    compare element-wise under these rules. tuple != list, as in Python."""
    try:
        if a is b or a == b:  # our rules only ever accept more than ==
            return True
    except Exception:  # noqa: BLE001 - e.g. a too-deep structure; decide below
        pass
    try:
        return _equal(a, b, atol, 0)
    except (RecursionError, OverflowError, TypeError, ValueError):
        return False


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, complex))


def _equal(a: object, b: object, atol: float, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    if _is_number(a) and _is_number(b):
        if isinstance(a, complex) or isinstance(b, complex):
            a, b = complex(a), complex(b)
            return _num_equal(a.real, b.real, atol) and _num_equal(a.imag, b.imag, atol)
        return _num_equal(a, b, atol)
    for kind in (list, tuple, dict, (set, frozenset)):
        if isinstance(a, kind) or isinstance(b, kind):
            if not (isinstance(a, kind) and isinstance(b, kind)) or len(a) != len(b):
                return False
            break
    else:
        return bool(a == b)
    if isinstance(a, (list, tuple)):
        return all(x is y or _equal(x, y, atol, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k], atol, depth + 1) for k in a)
    # Sets: exact matches first, then pair what is left (only floats need this).
    left, right = list(a - b), list(b - a)
    for x in left:
        for i, y in enumerate(right):
            if _equal(x, y, atol, depth + 1):
                del right[i]
                break
        else:
            return False
    return not right


def _num_equal(x: int | float, y: int | float, atol: float) -> bool:
    if x == y:
        return True
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    if atol > 0 and (isinstance(x, float) or isinstance(y, float)):
        return math.isfinite(x) and math.isfinite(y) and abs(x - y) <= atol
    return False
