"""Text of a value for people and prompts, bounded, and never an exception.

`shown(value)` is the value's literal text (`to_literal`) when that fits in `max_chars`;
otherwise an abbreviated repr (`reprlib`: the first items of each container, a few
levels deep, and ints of more than 4300 digits named by their size, since `repr` raises
for them), cut to `max_chars`. A hostile `__repr__` gives `<TypeName>`. The cost is
bounded by `max_chars` and reprlib's limits, not by the value's size.
"""

from __future__ import annotations

import reprlib

from unified.values.literal import INT_BITS, to_literal

MAX_SHOWN = 2000


class _Abbreviated(reprlib.Repr):
    def __init__(self):
        super().__init__()
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdict = 20
        self.maxstring, self.maxlong, self.maxother = 200, 100, 100

    def repr_int(self, x, level):
        if int.bit_length(x) > INT_BITS:  # repr would raise (and is quadratic below that)
            return f"<int of {int.bit_length(x)} bits>"
        return super().repr_int(x, level)


_ABBREVIATED = _Abbreviated()


def shown(value: object, max_chars: int = MAX_SHOWN) -> str:
    """Bounded text of `value` (see module doc)."""
    try:
        return to_literal(value, max_chars)
    except Exception:  # noqa: BLE001 - too large, too deep, no literal form
        pass
    try:
        text = str(_ABBREVIATED.repr(value))
    except Exception:  # noqa: BLE001 - a hostile __repr__ or __len__
        text = f"<{_type_name(value)}>"
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def _type_name(value: object) -> str:
    try:
        return str(type(value).__name__)[:100]
    except Exception:  # noqa: BLE001
        return "object"
