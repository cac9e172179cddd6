"""Every NaN is written `nan` (`to_literal`, `repr`), so `-nan` reads back as `nan`: one text, one
value (a result memory keyed by the text answered f(-nan) with f(nan)'s result)."""

import math

from unified.values import from_literal, to_literal


def test_minus_nan_reads_as_nan():
    for text in ("-nan", "+nan", "-(nan)", "[-nan]", "complex(-nan, 1)", "-complex(nan, nan)", "1 - complex(nan, 1)"):
        value = from_literal(text)
        value = value[0] if isinstance(value, list) else value
        parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
        assert all(math.copysign(1.0, p) == 1.0 for p in parts if math.isnan(p)), (text, value)
        assert any(math.isnan(p) for p in parts), text
    assert to_literal(-math.nan) == to_literal(math.nan) == "nan"


def test_other_signs_are_kept():
    assert math.copysign(1.0, from_literal("-0.0")) == -1.0
    assert from_literal("-inf") == -math.inf and from_literal("-1.5") == -1.5
    assert from_literal("complex(-0.0, -1)") == complex(-0.0, -1.0)
